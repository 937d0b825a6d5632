// The configuration `start` and `check-config` run with, every problem at once: the schema's and
// the rules across keys (src/config/load.ts), and those of the files it names (the certificates
// and keys of tls.certs, backendTls and redis), read as start reads them. A missing static
// directory no longer hides a certificate whose key does not match until it is fixed.
import { ConfigError, inspectConfig, type LoadedConfig } from '../config/load.js';
import type { View } from '../config/checks.js';
import { loadBackendTls } from '../backends/backend-tls.js';
import { loadRedisTls } from '../redis/redis-tls.js';
import { loadCert, TlsFileError } from '../server/tls.js';
import type { ConfigSource } from './config.js';

export function loadChecked(source: ConfigSource): LoadedConfig {
  const { config, problems, view, origin } = inspectConfig({ file: source.file, overrides: source.overrides });
  // A file named by an environment variable (ROOMGATE_TLS_CERTS, REDIS_TLS_CA): said, as the
  // schema's problems say "(from ...)", so the fix goes where the path was written.
  const named = fileProblems(view).map((p) => {
    const from = origin(p.slice(0, p.indexOf(':')));
    return from ? `${p} (from ${from})` : p;
  });
  const all = [...problems, ...named];
  if (config === undefined || all.length > 0) throw new ConfigError(all);
  return config;
}

/** The problems of the files named by the valid parts of the configuration. */
function fileProblems(v: View): string[] {
  const problems: string[] = [];
  const collect = (read: () => unknown): void => {
    try {
      read();
    } catch (err) {
      if (err instanceof ConfigError) problems.push(...err.problems);
      else if (err instanceof TlsFileError) problems.push(err.message);
      else throw err;
    }
  };
  const minVersion = v.get('tls.minVersion') ?? 'TLSv1.2';
  for (const { index, value } of v.items('tls.certs')) collect(() => loadCert(value, `tls.certs.${index}`, minVersion));
  const backendTls = v.get('backendTls');
  if (backendTls) collect(() => loadBackendTls(backendTls));
  const redis = v.get('redis');
  if (redis) collect(() => loadRedisTls(redis));
  return problems;
}
