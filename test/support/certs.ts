// Certificates made at test time with openssl (as the public-port TLS tests do): a test CA and
// certificates it signs, for servers (names and addresses) and clients. Every file goes into the
// directory the caller gives (and removes).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';

export interface CertFiles {
  readonly cert: string;
  readonly key: string;
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function openssl(args: readonly string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore', timeout: 10_000 });
}

/** A self-signed CA certificate and its key, as `dir`/`base`.crt and .key. */
export function makeCa(dir: string, base: string, cn = `${base} test CA`): CertFiles {
  const files = { cert: join(dir, `${base}.crt`), key: join(dir, `${base}.key`) };
  openssl(['req', '-x509', ...EC_KEY, '-keyout', files.key, '-out', files.cert, '-days', '30', '-subj', `/CN=${cn}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  return files;
}

/**
 * A certificate signed by `ca` for `names` (DNS names or IP addresses; the first is the CN), for
 * TLS servers and clients alike. `days` below 0 makes one that has already expired.
 */
export function makeSigned(dir: string, base: string, ca: CertFiles, names: readonly string[], days = 30): CertFiles {
  const files = { cert: join(dir, `${base}.crt`), key: join(dir, `${base}.key`) };
  const csr = join(dir, `${base}.csr`);
  const ext = join(dir, `${base}.ext`);
  const san = names.map((n) => (isIP(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  writeFileSync(ext, `basicConstraints=CA:FALSE\nsubjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  openssl(['req', '-new', ...EC_KEY, '-keyout', files.key, '-out', csr, '-subj', `/CN=${names[0]}`]);
  const serial = `0x${Date.now().toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`;
  openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', serial, '-days', String(days), '-extfile', ext, '-out', files.cert]);
  return files;
}

/** A test CA and a server certificate it signs for `names`: the certificate's files and the CA certificate, a client's `ca`. */
export function signedServer(dir: string, names: readonly string[] = ['a.test']): CertFiles & { readonly ca: Buffer } {
  const caFiles = makeCa(dir, 'ca');
  return { ...makeSigned(dir, 'srv', caFiles, names), ca: readFileSync(caFiles.cert) };
}
