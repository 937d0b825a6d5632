// TLS toward https:// backends, as `backendTls` configures it: the CA bundle and the client
// certificate read and checked once at start (a bad file is a ConfigError naming the field and the
// fix), one secure context for every backend connection, the per-connection options (SNI and the
// name checked), and a name for a TLS failure that logs, metrics and a backend's reason share.
// The proxy's connections (src/proxy) and the health checks (health.ts) both take their options here.
import { readTlsFiles } from '../config/tls-files.js';
import { isIP } from 'node:net';
import { createSecureContext, type ConnectionOptions, type SecureContext } from 'node:tls';
import { ConfigError, type LoadedConfig } from '../config/load.js';

export interface BackendTls {
  /** Verify each backend's certificate (chain and name): backendTls.verify. */
  readonly verify: boolean;
  /** backendTls.servername; null: the URL's host when it is a name. */
  readonly servername: string | null;
  /** The CA list (backendTls.ca, or Node's default) and the client certificate, for every connection. */
  readonly context: SecureContext;
  /** Whether a client certificate is shown. */
  readonly clientCert: boolean;
}

// The certificate-verification codes OpenSSL reports (Node puts them in err.code).
const VERIFY_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
]);

/** The longest detail kept in a reason (it reaches logs, the admin API and 503 bodies). */
const MAX_DETAIL = 160;

/**
 * A failure of TLS itself (verification, handshake, an alert from the backend) as a short reason,
 * e.g. "tls: CERT_HAS_EXPIRED (certificate has expired)"; null for any other error.
 */
export function tlsFailure(err: NodeJS.ErrnoException): string | null {
  const code = err.code;
  if (typeof code !== 'string') return null;
  if (!VERIFY_CODES.has(code) && !code.startsWith('ERR_SSL_') && !code.startsWith('ERR_TLS_') && code !== 'EPROTO') return null;
  // OpenSSL errors carry a short `reason` ("wrong version number"); verification errors say it in the message.
  const raw = (err as { reason?: unknown }).reason;
  const detail = (typeof raw === 'string' && raw !== '' ? raw : err.message).replace(/\s+/g, ' ').trim();
  return `tls: ${code}${detail && detail !== code ? ` (${detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL)}...` : detail})` : ''}`;
}

/**
 * The options of one connection to an https backend at `host`: SNI and the name its certificate
 * must carry are `servername`, else the host when it is a name; for an IP address no SNI is sent
 * ('' tells Node's https.Agent not to use the request's Host instead) and the address is checked.
 */
export function tlsOptions(t: BackendTls, host: string): ConnectionOptions {
  return { secureContext: t.context, rejectUnauthorized: t.verify, servername: t.servername ?? (isIP(host) === 0 ? host : '') };
}

/** Node's defaults: its trust store, verification on, no client certificate. */
export function defaultBackendTls(): BackendTls {
  return { verify: true, servername: null, context: createSecureContext(), clientCert: false };
}

/** Said at start (a warning) and by check-config (a note) while verification is off. */
export const BACKEND_TLS_UNVERIFIED =
  'backendTls.verify is false: https backends\' certificates are not checked, so anyone on the network path can pose as a backend; set backendTls.ca to the CA that signs them and turn verify back on';

type Settings = LoadedConfig['backendTls'];

/** Reads and checks the files of `backendTls`; a ConfigError naming the field and the fix. */
export function loadBackendTls(s: Settings): BackendTls {
  const problems: string[] = [];
  const { ca, cert, key } = readTlsFiles({ ca: 'backendTls.ca', cert: 'backendTls.cert', key: 'backendTls.key' }, s, "the backends'", problems);
  if (problems.length > 0) throw new ConfigError(problems);
  let context: SecureContext;
  try {
    context = createSecureContext({ ...(ca !== undefined ? { ca } : {}), ...(cert !== undefined && key !== undefined ? { cert, key } : {}) });
  } catch (err) {
    throw new ConfigError([`backendTls: the files cannot be used for TLS (${(err as Error).message}); check backendTls.ca, backendTls.cert and backendTls.key`]);
  }
  return { verify: s.verify, servername: s.servername, context, clientCert: cert !== undefined };
}
