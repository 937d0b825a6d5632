// TLS toward a rediss:// Redis, as `redis.tlsCa`, `redis.tlsCert` and `redis.tlsKey` configure it:
// the files read and checked once at start (a bad file is a ConfigError naming the field and the
// fix), as the TLS options of every Redis connection (data nodes of any form). Without them a
// rediss:// Redis is verified against Node's default trust store, like any TLS client.
import type { ConnectionOptions } from 'node:tls';
import { ConfigError, type LoadedConfig } from '../config/load.js';
import { readTlsFiles } from '../config/tls-files.js';

type Settings = Pick<LoadedConfig['redis'], 'url' | 'tlsCa' | 'tlsCert' | 'tlsKey'>;

/** The TLS options of Redis connections, or undefined (no rediss:// url, or no files given). */
export function loadRedisTls(s: Settings): ConnectionOptions | undefined {
  if (!s.url?.startsWith('rediss://') || (s.tlsCa === null && s.tlsCert === null && s.tlsKey === null)) return undefined;
  const problems: string[] = [];
  const pems = readTlsFiles({ ca: 'redis.tlsCa', cert: 'redis.tlsCert', key: 'redis.tlsKey' }, { ca: s.tlsCa, cert: s.tlsCert, key: s.tlsKey }, "the Redis servers'", problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return pems;
}
