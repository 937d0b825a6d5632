// The one certificate a TLS benchmark uses: P-256, self-signed, made with openssl in `dir`.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface BenchCert {
  readonly cert: string;
  readonly key: string;
  /** Certificate and key in one file, as HAProxy takes them. */
  readonly pem: string;
}

/** Names: `name` as CN and DNS subjectAltName, or an IP address as IP subjectAltName. */
export function benchCertificate(dir: string, name: string): BenchCert {
  const cert = join(dir, 'bench.crt');
  const key = join(dir, 'bench.key');
  const san = /^[\d.]+$/.test(name) ? `IP:${name}` : `DNS:${name}`;
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=${san}`], { stdio: 'ignore' });
  if (made.status !== 0) throw new Error('TLS benchmarks need openssl to make their certificate');
  const pem = join(dir, 'bench.pem');
  writeFileSync(pem, readFileSync(cert, 'utf8') + readFileSync(key, 'utf8'));
  return { cert, key, pem };
}
