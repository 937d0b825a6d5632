// The public port's TLS as the configuration asks for it: the certificates read at start (a bad
// file is a configuration error naming the field), expiry warnings, and the reloads (SIGHUP, or a
// changed file seen by the periodic check) that swap them on the running server.
import type { Server as HttpsServer } from 'node:https';
import { ConfigError, type LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import { daysLeft, TlsCertificates, TlsFileError, type TlsSettings } from './tls.js';

/** Certificates that expire within this many days are warned about (at start, on reload, check-config). */
export const TLS_EXPIRY_WARNING_DAYS = 21;

/** The TLS settings of a configuration; null while no certificate is listed (plain HTTP). */
export function tlsSettings(config: LoadedConfig, ticketKeys?: Buffer): TlsSettings | null {
  if (config.tls.certs.length === 0) return null;
  return { certs: config.tls.certs, minVersion: config.tls.minVersion, ...(ticketKeys ? { ticketKeys } : {}) };
}

/**
 * Reads and checks the configured certificates (files readable, PEM, key matching): null without
 * TLS; a ConfigError naming the field otherwise, so `start` and `check-config` exit 2 on it.
 */
export function loadTls(config: LoadedConfig, ticketKeys?: Buffer): TlsCertificates | null {
  const settings = tlsSettings(config, ticketKeys);
  if (settings === null) return null;
  try {
    return new TlsCertificates(settings);
  } catch (err) {
    if (err instanceof TlsFileError) throw new ConfigError([err.message]);
    throw err;
  }
}

/** The Strict-Transport-Security value TLS answers carry, or null when TLS or HSTS is off. */
export function hstsValue(config: LoadedConfig): string | null {
  if (config.tls.certs.length === 0 || config.tls.hstsMaxAgeS <= 0) return null;
  return `max-age=${config.tls.hstsMaxAgeS}${config.tls.hstsIncludeSubdomains ? '; includeSubDomains' : ''}`;
}

/** A warning per certificate that has expired or expires soon; [] when all are fine. */
export function tlsExpiryWarnings(tls: TlsCertificates, nowMs: number): string[] {
  return tls.all.flatMap((c, i) => {
    const days = daysLeft(c, nowMs);
    if (days >= TLS_EXPIRY_WARNING_DAYS) return [];
    const when = days < 0 ? `expired on ${c.validTo.toISOString()}` : `expires in ${days} days (${c.validTo.toISOString()})`;
    return [`tls.certs.${i}: the certificate in ${c.files.cert} (${c.names.join(', ')}) ${when}`];
  });
}

/** Reloads of a running server's certificates: on request, and when a file changes on disk. */
export class TlsReloader {
  private timer: NodeJS.Timeout | null = null;
  /** The last failed reload's error: the periodic check retries, but says the same thing once. */
  private lastError: string | null = null;

  constructor(
    private readonly tls: TlsCertificates,
    private readonly server: HttpsServer,
    private readonly logger: Logger,
  ) {}

  /** Warns about expiring certificates and checks the files every `everyMs` (0: never). */
  start(settings: () => TlsSettings | null, everyMs: number): void {
    for (const w of tlsExpiryWarnings(this.tls, Date.now())) this.logger.warn(w);
    if (everyMs <= 0) return;
    this.timer = setInterval(() => {
      if (this.tls.changedOnDisk()) this.reload(settings(), 'a certificate file changed');
    }, everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Session ticket keys for new handshakes (every certificate's: see ticket-keys.ts), and for reloads. */
  setTicketKeys(keys: Buffer): void {
    this.tls.setTicketKeys(keys);
    this.server.setTicketKeys(keys);
  }

  /**
   * Reads the certificates again and puts them in use for new handshakes (open sockets keep
   * theirs). On failure the old ones stay and the error is logged; returns whether it worked.
   */
  reload(settings: TlsSettings | null, why: string): boolean {
    if (!settings) return false;
    try {
      const loaded = this.tls.reload(settings);
      const def = this.tls.default;
      this.server.setSecureContext({ cert: def.certPem, key: def.keyPem, minVersion: settings.minVersion, ...(settings.ticketKeys ? { ticketKeys: settings.ticketKeys } : {}) });
      this.lastError = null;
      this.logger.info({ why, certs: loaded.map((c) => ({ names: c.names, validTo: c.validTo.toISOString() })) }, 'TLS certificates reloaded');
      for (const w of tlsExpiryWarnings(this.tls, Date.now())) this.logger.warn(w);
      return true;
    } catch (err) {
      const message = (err as Error).message;
      // The change check tries again every reloadCheckMs until the files read well: the same
      // error at error level once (and again on an explicit reload), then at debug.
      const level = message === this.lastError && why !== 'reload' ? 'debug' : 'error';
      this.lastError = message;
      this.logger[level]({ why, err: message }, 'TLS certificates not reloaded: the ones in use stay');
      return false;
    }
  }
}
