// A certificate and its private key as PEM text, parsed and matched: the one check behind the
// public port's certificates (src/server/tls.ts) and the client certificate shown to https
// backends (src/backends/backend-tls.ts). Each caller words the problem for its own config field.
import { createPrivateKey, X509Certificate } from 'node:crypto';

export type PemPair =
  | { readonly ok: true; readonly x509: X509Certificate }
  | { readonly ok: false; readonly which: 'cert' | 'key' | 'mismatch'; readonly detail: string };

export function checkPemPair(certPem: string, keyPem: string): PemPair {
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(certPem);
  } catch (err) {
    return { ok: false, which: 'cert', detail: (err as Error).message };
  }
  let key;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    return { ok: false, which: 'key', detail: (err as Error).message };
  }
  if (!x509.checkPrivateKey(key)) return { ok: false, which: 'mismatch', detail: '' };
  return { ok: true, x509 };
}
