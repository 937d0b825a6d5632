// TLS termination on the public port: the certificates of `tls.certs`, read from PEM files,
// the first one for clients that name no server (or one no certificate covers), the others chosen
// by SNI from the names in each certificate (subjectAltName DNS names, else the CN; `*.example.com`
// covers one label). Reloaded in place (SIGHUP, or a changed file seen by a periodic check):
// sockets already open keep the session they have, new handshakes get the new certificates, and a
// reload that fails (a missing file, a key that does not match) keeps the certificates in use.
import type { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { checkPemPair } from '../config/pem-pair.js';
import { createSecureContext, type SecureContext, type SecureVersion } from 'node:tls';

export interface CertFiles {
  readonly cert: string;
  readonly key: string;
}

export interface TlsSettings {
  readonly certs: readonly CertFiles[];
  readonly minVersion: SecureVersion;
  /**
   * Session ticket keys (48 bytes) for every certificate's context: the workers of one roomgate
   * share them, so a client resumes its session whichever worker it reaches. Absent: Node's own
   * random keys per context.
   */
  readonly ticketKeys?: Buffer;
}

/** One certificate as read: its context, the names it serves and when it expires. */
export interface LoadedCert {
  readonly files: CertFiles;
  readonly context: SecureContext;
  readonly names: readonly string[];
  readonly validTo: Date;
  /** PEM text, for `https.createServer` (the default certificate). */
  readonly certPem: string;
  readonly keyPem: string;
}

/** A problem with one certificate, naming its config field and what to do. */
export class TlsFileError extends Error {}

/** Reads and checks one certificate and key pair; `field` names it in errors (tls.certs.0). */
export function loadCert(files: CertFiles, field: string, minVersion: SecureVersion, ticketKeys?: Buffer): LoadedCert {
  const read = (path: string, which: 'cert' | 'key'): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      throw new TlsFileError(`${field}.${which}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  };
  const certPem = read(files.cert, 'cert');
  const keyPem = read(files.key, 'key');
  const pair = checkPemPair(certPem, keyPem);
  if (!pair.ok) {
    if (pair.which === 'cert') throw new TlsFileError(`${field}.cert: ${files.cert} is not a PEM certificate (${pair.detail})`);
    if (pair.which === 'key') throw new TlsFileError(`${field}.key: ${files.key} is not a PEM private key (${pair.detail})`);
    throw new TlsFileError(`${field}: the key in ${files.key} does not belong to the certificate in ${files.cert}`);
  }
  const x509 = pair.x509;
  const context = createSecureContext({ cert: certPem, key: keyPem, minVersion, ...(ticketKeys ? { ticketKeys } : {}) });
  return { files, context, names: certNames(x509), validTo: new Date(x509.validTo), certPem, keyPem };
}

/** The DNS names a certificate serves: its subjectAltName DNS entries, else its CN. Lower case. */
export function certNames(x509: X509Certificate): string[] {
  const san = x509.subjectAltName ?? '';
  const dns = san
    .split(/,\s*/)
    .filter((e) => e.startsWith('DNS:'))
    .map((e) => e.slice(4).toLowerCase());
  if (dns.length > 0) return dns;
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x509.subject)?.[1];
  return cn ? [cn.toLowerCase()] : [];
}

/** Whether a certificate name (possibly `*.example.com`) covers a server name. */
export function nameCovers(pattern: string, servername: string): boolean {
  const name = servername.toLowerCase();
  if (!pattern.startsWith('*.')) return pattern === name;
  const dot = name.indexOf('.');
  return dot > 0 && name.slice(dot + 1) === pattern.slice(2);
}

/** The certificates in use, and the SNI choice among them. */
export class TlsCertificates {
  private loaded: LoadedCert[];
  private mtimes: string;

  constructor(private settings: TlsSettings) {
    this.loaded = loadAll(settings);
    this.mtimes = fileStamps(settings);
  }

  get settingsMinVersion(): SecureVersion {
    return this.settings.minVersion;
  }

  get ticketKeys(): Buffer | undefined {
    return this.settings.ticketKeys;
  }

  /** The certificate for clients without SNI or with a name no certificate covers. */
  get default(): LoadedCert {
    return this.loaded[0] as LoadedCert;
  }

  get all(): readonly LoadedCert[] {
    return this.loaded;
  }

  /** The context for a server name: an exact name first, then a wildcard, then the default. */
  contextFor(servername: string | undefined): SecureContext {
    if (servername) {
      const name = servername.toLowerCase();
      const exact = this.loaded.find((c) => c.names.includes(name));
      if (exact) return exact.context;
      const wild = this.loaded.find((c) => c.names.some((n) => nameCovers(n, name)));
      if (wild) return wild.context;
    }
    return this.default.context;
  }

  /** Node's SNICallback. */
  readonly sniCallback = (servername: string, cb: (err: Error | null, ctx?: SecureContext) => void): void => {
    cb(null, this.contextFor(servername));
  };

  /**
   * Reads every file again (with new settings, e.g. after SIGHUP). All or nothing: an error leaves
   * the certificates in use and is thrown to the caller to log.
   */
  reload(settings: TlsSettings = this.settings): LoadedCert[] {
    const next = loadAll(settings);
    this.settings = settings;
    this.loaded = next;
    this.mtimes = fileStamps(settings);
    return next;
  }

  /** New session ticket keys for later reloads (the server's context is the one in use: TlsReloader). */
  setTicketKeys(keys: Buffer): void {
    this.settings = { ...this.settings, ticketKeys: keys };
  }

  /** Whether a file changed (size or modification time) since the last read. */
  changedOnDisk(): boolean {
    return fileStamps(this.settings) !== this.mtimes;
  }
}

function loadAll(settings: TlsSettings): LoadedCert[] {
  if (settings.certs.length === 0) throw new TlsFileError('tls.certs: at least one certificate is needed for TLS');
  return settings.certs.map((c, i) => loadCert(c, `tls.certs.${i}`, settings.minVersion, settings.ticketKeys));
}

function fileStamps(settings: TlsSettings): string {
  return settings.certs
    .flatMap((c) => [c.cert, c.key])
    .map((p) => {
      try {
        const s = statSync(p);
        return `${s.size}:${s.mtimeMs}`;
      } catch {
        return 'missing';
      }
    })
    .join('|');
}

/** Days until a certificate expires (negative: expired), for warnings. */
export function daysLeft(c: LoadedCert, nowMs: number): number {
  return Math.floor((c.validTo.getTime() - nowMs) / 86_400_000);
}
