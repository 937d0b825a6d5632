// A real redis-server for tests: on a free port, without persistence, in its own temp directory.
// Everything started here is tracked and torn down by stopAllRedis() (and, as a last resort, when
// the test process exits); every wait has a timeout. Tests never skip when redis-server is
// missing: they fail and say how to install it.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort } from '../../src/demo/redis-server.js';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** pid of the current redis-server process (changes on restart()). */
  readonly pid: number;
  /** A redis-server process is up (false after kill() until restart()). */
  readonly running: boolean;
  /** Sends the signal (default SIGKILL) and waits until the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts redis-server again on the same port (after kill()); empty, as there is no persistence. */
  restart(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;
const EXIT_TIMEOUT_MS = 5_000;
const INSTALL_HINT = 'redis-server is not installed: the Redis placement store tests need it; install it with `apt-get install -y redis-server`';

interface Instance {
  child: ChildProcess | undefined;
  readonly dir: string;
}
const instances = new Set<Instance>();

function findRedisServer(): string {
  const candidates = [process.env.REDIS_SERVER, '/usr/bin/redis-server', ...(process.env.PATH ?? '').split(delimiter).map((d) => join(d, 'redis-server'))];
  for (const c of candidates) if (c && existsSync(c)) return c;
  throw new Error(INSTALL_HINT);
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

class AddressInUse extends Error {}

/** Spawns redis-server and resolves once it accepts connections; rejects (process gone) otherwise. */
function spawnRedis(bin: string, port: number, dir: string): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'notice'];
  const child = spawn(bin, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise<ChildProcess>((resolve, reject) => {
    let output = '';
    let settled = false;
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.stdout?.removeListener('data', onData);
      child.stderr?.removeListener('data', onData);
      // Keep draining the pipes so that redis-server never blocks on a full pipe.
      child.stdout?.resume();
      child.stderr?.resume();
      if (err) {
        child.kill('SIGKILL');
        void exited(child).then(() => reject(err));
      } else resolve(child);
    };
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) finish();
      else if (/Address already in use/i.test(output)) finish(new AddressInUse(`port ${port} in use`));
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (err: NodeJS.ErrnoException) => finish(err.code === 'ENOENT' ? new Error(INSTALL_HINT) : err));
    child.once('exit', (code, signal) => {
      if (/Address already in use/i.test(output)) finish(new AddressInUse(`port ${port} in use`));
      else finish(new Error(`redis-server exited early (${code ?? signal}):\n${output}`));
    });
    const timer = setTimeout(() => finish(new Error(`redis-server not ready within ${READY_TIMEOUT_MS} ms:\n${output}`)), READY_TIMEOUT_MS);
  });
}

async function kill(inst: Instance, signal: NodeJS.Signals): Promise<void> {
  const child = inst.child;
  if (!child) return;
  if (child.exitCode === null && child.signalCode === null) {
    child.kill(signal);
    const gone = await Promise.race([exited(child).then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), EXIT_TIMEOUT_MS).unref())]);
    if (!gone) {
      child.kill('SIGKILL');
      await exited(child);
    }
  }
  inst.child = undefined;
}

export async function startRedis(): Promise<RedisServer> {
  const bin = findRedisServer();
  const inst: Instance = { child: undefined, dir: mkdtempSync(join(tmpdir(), 'roomgate-redis-')) };
  instances.add(inst);
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      inst.child = await spawnRedis(bin, port, inst.dir);
      break;
    } catch (err) {
      if (!(err instanceof AddressInUse) || attempt >= 5) throw err;
    }
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid(): number {
      const pid = inst.child?.pid;
      if (pid === undefined) throw new Error('redis-server is not running');
      return pid;
    },
    get running(): boolean {
      return inst.child !== undefined;
    },
    kill: (signal: NodeJS.Signals = 'SIGKILL') => kill(inst, signal),
    async restart(): Promise<void> {
      await kill(inst, 'SIGKILL');
      // The port was just released; a connection in TIME_WAIT or a slow exit can hold it briefly.
      for (let attempt = 1; ; attempt++) {
        try {
          inst.child = await spawnRedis(bin, port, inst.dir);
          return;
        } catch (err) {
          if (!(err instanceof AddressInUse) || attempt >= 20) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
  };
}

/** Kills every redis-server started here and removes their temp directories. */
export async function stopAllRedis(): Promise<void> {
  await Promise.all(
    [...instances].map(async (inst) => {
      await kill(inst, 'SIGKILL');
      rmSync(inst.dir, { recursive: true, force: true });
      instances.delete(inst);
    }),
  );
}

// Last resort if a test run dies without afterAll: no redis-server outlives the test process.
process.once('exit', () => {
  for (const inst of instances) {
    inst.child?.kill('SIGKILL');
    rmSync(inst.dir, { recursive: true, force: true });
  }
});


// --- Sentinel and Cluster ------------------------------------------------------------------------

/** Spawns redis-server with `args`, tracked like startRedis(); resolves once it logs `ready`. */
async function spawnTracked(args: (port: number, dir: string) => string[], ready: RegExp, name: string): Promise<{ port: number; dir: string }> {
  const bin = findRedisServer();
  const inst: Instance = { child: undefined, dir: mkdtempSync(join(tmpdir(), `roomgate-${name}-`)) };
  instances.add(inst);
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawn(bin, args(port, inst.dir), { cwd: inst.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    inst.child = child;
    const err = await new Promise<Error | undefined>((resolve) => {
      let output = '';
      const timer = setTimeout(() => resolve(new Error(`${name} not ready within ${READY_TIMEOUT_MS} ms:\n${output}`)), READY_TIMEOUT_MS);
      const onData = (chunk: Buffer): void => {
        output += chunk.toString();
        if (ready.test(output)) {
          clearTimeout(timer);
          resolve(undefined);
        } else if (/Address already in use/i.test(output)) {
          clearTimeout(timer);
          resolve(new AddressInUse(`port ${port} in use`));
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ENOENT' ? new Error(INSTALL_HINT) : e));
      child.once('exit', (code, signal) => resolve(new Error(`${name} exited early (${code ?? signal}):\n${output}`)));
    });
    if (!err) return { port, dir: inst.dir };
    await kill(inst, 'SIGKILL');
    if (!(err instanceof AddressInUse) || attempt >= 5) throw err;
  }
}

export interface RedisSentinel {
  /** "127.0.0.1:port" of the sentinel. */
  readonly address: string;
  readonly port: number;
  /** The master group name ("mymaster"). */
  readonly name: string;
}

/** A redis-server in sentinel mode monitoring the master at 127.0.0.1:masterPort as "mymaster" (quorum 1). */
export async function startSentinel(masterPort: number): Promise<RedisSentinel> {
  const { port } = await spawnTracked(
    (p, dir) => {
      const conf = join(dir, 'sentinel.conf');
      writeFileSync(
        conf,
        [
          `port ${p}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`,
          'sentinel down-after-milliseconds mymaster 1000',
          'sentinel failover-timeout mymaster 2000',
          '',
        ].join('\n'),
      );
      return [conf, '--sentinel'];
    },
    /\+monitor master mymaster/,
    'redis-sentinel',
  );
  return { address: `127.0.0.1:${port}`, port, name: 'mymaster' };
}

export interface RedisClusterServers {
  /** "127.0.0.1:port" of every node (all masters). */
  readonly nodes: readonly string[];
}

function redisCli(args: string[]): Promise<string> {
  const bin = findRedisServer().replace(/redis-server$/, 'redis-cli');
  return new Promise((resolve, reject) => {
    const child = spawn(existsSync(bin) ? bin : 'redis-cli', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`redis-cli ${args.join(' ')} failed (${code}):\n${out}`));
    });
  });
}

/** A 3-master Redis Cluster (no replicas) on free ports; resolves once CLUSTER INFO says ok on every node. */
export async function startCluster(): Promise<RedisClusterServers> {
  const ports = await Promise.all(
    [0, 1, 2].map(async () => {
      const { port } = await spawnTracked(
        (p, dir) => ['--port', String(p), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${p}.conf`), '--save', '', '--appendonly', 'no', '--dir', dir],
        /Ready to accept connections/,
        'redis-cluster',
      );
      return port;
    }),
  );
  const nodes = ports.map((p) => `127.0.0.1:${p}`);
  await redisCli(['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes']);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const infos = await Promise.all(ports.map((p) => redisCli(['-p', String(p), 'cluster', 'info'])));
    if (infos.every((i) => i.includes('cluster_state:ok'))) break;
    if (Date.now() > deadline) throw new Error(`cluster not ok within ${READY_TIMEOUT_MS} ms:\n${infos.join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { nodes };
}
