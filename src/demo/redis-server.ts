// A local redis-server for `npm run demo:cluster`: on a given port or a free one, loopback only,
// no persistence (nothing is written to disk). Fails with an install hint when redis-server is
// missing.
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ChildStartError, spawnReady, type Child } from './child.js';

export const REDIS_INSTALL_HINT =
  'redis-server not found (looked at $REDIS_SERVER and on PATH). demo:cluster runs one for the gateways to share. ' +
  'Install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis), ' +
  'set REDIS_SERVER=/path/to/redis-server, or use a running Redis with --redis-url redis://host:port';

export class RedisMissingError extends Error {}

/** The redis-server binary: $REDIS_SERVER, else the first on PATH. */
export function findRedisServer(env: NodeJS.ProcessEnv = process.env): string {
  if (env.REDIS_SERVER) {
    if (existsSync(env.REDIS_SERVER)) return env.REDIS_SERVER;
    throw new RedisMissingError(`REDIS_SERVER=${env.REDIS_SERVER} does not exist. ${REDIS_INSTALL_HINT}`);
  }
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'redis-server'))) return join(dir, 'redis-server');
  }
  throw new RedisMissingError(REDIS_INSTALL_HINT);
}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not find a free port'))));
    });
  });
}

export interface LocalRedis {
  readonly child: Child;
  readonly port: number;
  readonly url: string;
}

const IN_USE = /Address already in use/i;

/** Starts redis-server on `port` (0: a free port, retried if taken meanwhile). */
export async function startRedisServer(port: number, timeoutMs = 10_000): Promise<LocalRedis> {
  const bin = findRedisServer();
  for (let attempt = 1; ; attempt++) {
    const p = port === 0 ? await freePort() : port;
    try {
      const { child } = await spawnReady({
        name: 'redis',
        command: bin,
        // No RDB, no AOF: the directory is never written to.
        args: ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir(), '--maxmemory-policy', 'noeviction'],
        ready: (line) => (line.includes('Ready to accept connections') ? true : undefined),
        fatal: (line) => IN_USE.test(line),
        timeoutMs,
      });
      return { child, port: p, url: `redis://127.0.0.1:${p}` };
    } catch (err) {
      const inUse = err instanceof ChildStartError && IN_USE.test(err.message);
      if (inUse && port !== 0) throw new ChildStartError(`redis: port ${port} is in use; choose another with --redis-port (0 = any free port)`);
      if (!inUse || attempt >= 5) throw err;
    }
  }
}
