// The PEM files of a TLS client (a CA bundle to trust, a client certificate and its key), read and
// checked once at start for one config section: `backendTls` (https backends) and `redis` (a
// rediss:// Redis). Every problem names the field and the fix; the caller throws them as a
// ConfigError.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { checkPemPair } from './pem-pair.js';

/** The config field names of the three files, e.g. {ca: 'backendTls.ca', ...}. */
export interface TlsFileFields {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

export interface TlsFilePaths {
  readonly ca: string | null;
  readonly cert: string | null;
  readonly key: string | null;
}

/** The PEM text of each file given (a client certificate only with its key). */
export interface TlsFilePems {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

/**
 * Reads and checks the files; `servers` says whose certificates the CA signs (for messages, e.g.
 * "the backends'"). Problems are pushed onto `problems`.
 */
export function readTlsFiles(fields: TlsFileFields, paths: TlsFilePaths, servers: string, problems: string[]): TlsFilePems {
  const ca = paths.ca === null ? undefined : readPem(fields.ca, paths.ca, "a readable PEM file of CA certificates, or null for Node's default trust store", problems);
  if (ca !== undefined) checkCa(fields.ca, paths.ca as string, ca, servers, problems);
  const cert = paths.cert === null ? undefined : readPem(fields.cert, paths.cert, 'a readable PEM client certificate file, or null (no client certificate)', problems);
  const key = paths.key === null ? undefined : readPem(fields.key, paths.key, 'a readable PEM private key file, or null (no client certificate)', problems);
  if (cert !== undefined && key !== undefined) checkPair(fields, paths.cert as string, cert, paths.key as string, key, problems);
  return { ...(ca !== undefined ? { ca } : {}), ...(cert !== undefined && key !== undefined ? { cert, key } : {}) };
}

function readPem(field: string, path: string, expected: string, problems: string[]): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    problems.push(`${field}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); expected ${expected}: fix the path or the file's permissions`);
    return undefined;
  }
}

/** Every certificate of a CA bundle parses, and there is at least one. */
function checkCa(field: string, path: string, pem: string, servers: string, problems: string[]): void {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) {
    problems.push(`${field}: ${path} holds no PEM certificate ("-----BEGIN CERTIFICATE-----"); expected the CA certificates that sign ${servers} certificates`);
    return;
  }
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch (err) {
      problems.push(`${field}: certificate ${i + 1} in ${path} is not valid PEM (${(err as Error).message}); expected a bundle of PEM CA certificates`);
      return;
    }
  }
}

/** The client certificate parses, the key parses, and the key belongs to the certificate. */
function checkPair(fields: TlsFileFields, certPath: string, certPem: string, keyPath: string, keyPem: string, problems: string[]): void {
  const pair = checkPemPair(certPem, keyPem);
  if (pair.ok) return;
  if (pair.which === 'cert') problems.push(`${fields.cert}: ${certPath} is not a PEM certificate (${pair.detail}); expected the client certificate (its chain after it)`);
  else if (pair.which === 'key') problems.push(`${fields.key}: ${keyPath} is not a PEM private key (${pair.detail}); expected the private key of ${fields.cert}`);
  else problems.push(`${fields.key}: the key in ${keyPath} does not belong to the certificate in ${certPath}; expected the key of ${fields.cert}: give the matching pair`);
}
