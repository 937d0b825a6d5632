// A real redis-server for tests: on a free port, without persistence, in its own temp directory.
// Everything started here is tracked and torn down by stopAllRedis() (and, as a last resort, when
// the test process exits); every wait has a timeout. Tests never skip when redis-server is
// missing: they fail and say how to install it.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { Redis } from 'ioredis';
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


// --- Sentinel, replicas, Cluster, TLS -----------------------------------------------------------

/** A tracked redis-server (data node, replica, sentinel or cluster node) that a test can kill. */
export interface RedisNode {
  readonly port: number;
  /** "127.0.0.1:port". */
  readonly address: string;
  /** pid of the process (throws once it was killed). */
  readonly pid: number;
  readonly running: boolean;
  /** Sends the signal (default SIGKILL) and waits until the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

function nodeHandle(inst: Instance, port: number): RedisNode {
  return {
    port,
    address: `127.0.0.1:${port}`,
    get pid(): number {
      const pid = inst.child?.pid;
      if (pid === undefined) throw new Error(`redis-server on ${port} is not running`);
      return pid;
    },
    get running(): boolean {
      return inst.child !== undefined;
    },
    kill: (signal: NodeJS.Signals = 'SIGKILL') => kill(inst, signal),
  };
}

/** Spawns redis-server with `args`, tracked like startRedis(); resolves once it logs `ready`. */
async function spawnTracked(args: (port: number, dir: string) => string[], ready: RegExp, name: string): Promise<RedisNode> {
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
          // Keep draining the pipes so that redis-server never blocks on a full pipe.
          child.stdout?.removeListener('data', onData);
          child.stderr?.removeListener('data', onData);
          child.stdout?.resume();
          child.stderr?.resume();
          resolve(undefined);
        } else if (/Address already in use/i.test(output)) {
          clearTimeout(timer);
          resolve(new AddressInUse(`port ${port} in use`));
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ENOENT' ? new Error(INSTALL_HINT) : e));
      // An exit can come before the last of its output is read (a cluster node whose bus port,
      // port + 10000, is taken exits 1, its "Address already in use" maybe still in the pipe): tried
      // again on another port like a port in use; a real start error fails every attempt.
      child.once('exit', (code, signal) => resolve(new ExitedEarly(`${name} exited early (${code ?? signal}):\n${output}`)));
    });
    if (!err) return nodeHandle(inst, port);
    await kill(inst, 'SIGKILL');
    if (!(err instanceof AddressInUse || err instanceof ExitedEarly) || attempt >= 5) throw err;
  }
}

/** redis-server exited before it was ready. */
class ExitedEarly extends Error {}

const DATA_NODE_ARGS = (p: number, dir: string): string[] => ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];

/** Runs redis-cli (next to redis-server) with `args`; rejects on a non-zero exit, after 20 s at most. */
export function redisCli(args: readonly string[]): Promise<string> {
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

/** One field of INFO (or of any "key:value" line list), or undefined. */
function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

/** Polls `check` every 100 ms until it returns true; throws `what` (with the last output) after timeoutMs. */
async function until(what: string, timeoutMs: number, check: () => Promise<boolean | string>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = '';
  for (;;) {
    try {
      const r = await check();
      if (r === true) return;
      last = r;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A replica of the master at 127.0.0.1:masterPort; resolves once its replication link is up. */
export async function startReplica(masterPort: number): Promise<RedisNode> {
  const node = await spawnTracked((p, dir) => [...DATA_NODE_ARGS(p, dir), '--replicaof', '127.0.0.1', String(masterPort)], /Ready to accept connections/, 'redis-replica');
  await until(`replica ${node.port} in sync with ${masterPort}`, READY_TIMEOUT_MS, async () => {
    const info = await redisCli(['-p', String(node.port), 'info', 'replication']);
    return infoField(info, 'master_link_status') === 'up' || info;
  });
  return node;
}

export interface RedisSentinel extends RedisNode {
  /** The master group name ("mymaster"). */
  readonly name: string;
}

export interface SentinelOptions {
  /** Sentinels that must agree the master is down (default 1). */
  readonly quorum?: number;
  /** sentinel down-after-milliseconds (default 1000). */
  readonly downAfterMs?: number;
  /** sentinel failover-timeout (default 2000). */
  readonly failoverTimeoutMs?: number;
}

/** A redis-server in sentinel mode monitoring the master at 127.0.0.1:masterPort as "mymaster". */
export async function startSentinel(masterPort: number, o: SentinelOptions = {}): Promise<RedisSentinel> {
  const node = await spawnTracked(
    (p, dir) => {
      const conf = join(dir, 'sentinel.conf');
      writeFileSync(
        conf,
        [
          `port ${p}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor mymaster 127.0.0.1 ${masterPort} ${o.quorum ?? 1}`,
          `sentinel down-after-milliseconds mymaster ${o.downAfterMs ?? 1000}`,
          `sentinel failover-timeout mymaster ${o.failoverTimeoutMs ?? 2000}`,
          '',
        ].join('\n'),
      );
      return [conf, '--sentinel'];
    },
    /\+monitor master mymaster/,
    'redis-sentinel',
  );
  return Object.assign(node, { name: 'mymaster' });
}

/** `SENTINEL master mymaster` of one sentinel, as fields. */
async function sentinelView(s: RedisSentinel): Promise<Map<string, string>> {
  const lines = (await redisCli(['-p', String(s.port), 'sentinel', 'master', s.name])).trim().split('\n');
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < lines.length; i += 2) out.set(lines[i] as string, lines[i + 1] as string);
  return out;
}

/**
 * `count` sentinels of the master at masterPort; resolves once every one knows the others and
 * `replicas` replicas (sentinels find each other through the master every 2 s), so that a
 * failover can be voted on at once.
 */
export async function startSentinels(masterPort: number, count: number, replicas: number, o: SentinelOptions = {}): Promise<RedisSentinel[]> {
  const sentinels = await Promise.all(Array.from({ length: count }, () => startSentinel(masterPort, o)));
  await until(`${count} sentinels that know each other and ${replicas} replica(s)`, 15_000, async () => {
    const views = await Promise.all(sentinels.map(sentinelView));
    const ok = views.every((v) => v.get('num-other-sentinels') === String(count - 1) && v.get('num-slaves') === String(replicas));
    return ok || JSON.stringify(views.map((v) => [v.get('num-other-sentinels'), v.get('num-slaves')]));
  });
  return sentinels;
}

/** "host:port" of the master the sentinel names now. */
export async function sentinelMaster(s: RedisSentinel): Promise<string> {
  const [host, port] = (await redisCli(['-p', String(s.port), 'sentinel', 'get-master-addr-by-name', s.name])).trim().split('\n');
  return `${host}:${port}`;
}

export interface RedisClusterServers {
  /** "127.0.0.1:port" of every node (masters and replicas). */
  readonly nodes: readonly string[];
  readonly servers: readonly RedisNode[];
}

export interface ClusterOptions {
  /** Replicas per master (default 0: 3 masters only; 1: 3 masters + 3 replicas). */
  readonly replicas?: 0 | 1;
  /** cluster-node-timeout: a master unreachable this long is failed over (default 1000 ms). */
  readonly nodeTimeoutMs?: number;
}

/**
 * A Redis Cluster of 3 masters (with `replicas`, each with its replicas) on free ports; resolves
 * once CLUSTER INFO says ok on every node, every node knows every other and replicas are in sync.
 */
export async function startCluster(o: ClusterOptions = {}): Promise<RedisClusterServers> {
  const replicas = o.replicas ?? 0;
  const servers = await Promise.all(
    Array.from({ length: 3 * (1 + replicas) }, () =>
      spawnTracked(
        (p, dir) => [
          ...DATA_NODE_ARGS(p, dir),
          '--cluster-enabled', 'yes',
          '--cluster-config-file', join(dir, `nodes-${p}.conf`),
          '--cluster-node-timeout', String(o.nodeTimeoutMs ?? 1000),
        ],
        /Ready to accept connections/,
        'redis-cluster',
      ),
    ),
  );
  const nodes = servers.map((s) => s.address);
  await redisCli(['--cluster', 'create', ...nodes, '--cluster-replicas', String(replicas), '--cluster-yes']);
  await until('cluster ok on every node', 15_000, async () => {
    const infos = await Promise.all(servers.map((s) => redisCli(['-p', String(s.port), 'cluster', 'info'])));
    const ok = infos.every((i) => infoField(i, 'cluster_state') === 'ok' && infoField(i, 'cluster_known_nodes') === String(servers.length));
    if (!ok) return infos.join('\n');
    const links = await Promise.all(servers.map((s) => redisCli(['-p', String(s.port), 'info', 'replication'])));
    const unsynced = links.filter((i) => infoField(i, 'role') === 'slave' && infoField(i, 'master_link_status') !== 'up');
    return links.filter((i) => infoField(i, 'role') === 'slave').length === 3 * replicas && unsynced.length === 0 ? true : links.join('\n');
  });
  return { nodes, servers };
}

/** A cluster node's `CLUSTER NODES` line: its address, role and slot ranges. */
export interface ClusterNodeLine {
  readonly address: string;
  readonly master: boolean;
  readonly failed: boolean;
  readonly slots: readonly (readonly [number, number])[];
}

/** What `node` believes about the cluster (CLUSTER NODES). */
export async function clusterNodes(node: RedisNode): Promise<ClusterNodeLine[]> {
  const text = await redisCli(['-p', String(node.port), 'cluster', 'nodes']);
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const f = line.split(' ');
      const flags = (f[2] ?? '').split(',');
      const slots = f.slice(8).filter((r) => /^\d/.test(r)).map((r) => {
        const [a, b] = r.split('-').map(Number);
        return [a as number, b ?? (a as number)] as const;
      });
      return { address: (f[1] ?? '').replace(/@.*$/, ''), master: flags.includes('master'), failed: flags.includes('fail'), slots };
    });
}

/** The master (as `asker` sees it) that serves the slot of `key`, e.g. "{rg}". */
export async function clusterMasterOf(cluster: RedisClusterServers, asker: RedisNode, key: string): Promise<RedisNode> {
  const slot = Number((await redisCli(['-p', String(asker.port), 'cluster', 'keyslot', key])).trim());
  const line = (await clusterNodes(asker)).find((n) => n.master && !n.failed && n.slots.some(([a, b]) => slot >= a && slot <= b));
  const server = cluster.servers.find((s) => s.address === line?.address);
  if (!server) throw new Error(`no live master serves slot ${slot} of ${key} (as ${asker.address} sees it)`);
  return server;
}

export interface TlsRedisFiles {
  /** The server's certificate and key, and the CA file it checks client certificates against. */
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/**
 * A redis-server that speaks TLS only (`--port 0 --tls-port P`). `authClients` (Redis's own
 * default is yes) makes it require a client certificate signed by `files.ca`.
 */
export async function startTlsRedis(files: TlsRedisFiles, o: { authClients?: boolean } = {}): Promise<RedisNode & { readonly url: string }> {
  const node = await spawnTracked(
    (p, dir) => [
      '--port', '0', '--tls-port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
      '--tls-cert-file', files.cert, '--tls-key-file', files.key, '--tls-ca-cert-file', files.ca,
      '--tls-auth-clients', o.authClients ? 'yes' : 'no',
    ],
    /Ready to accept connections/,
    'redis-tls',
  );
  return Object.assign(node, { url: `rediss://127.0.0.1:${node.port}` });
}

/** Calls per command since the last CONFIG RESETSTAT (commands run by scripts included), without the admin's own. */
export async function commandCounts(r: Redis): Promise<Record<string, number>> {
  const info = (await r.info('commandstats')) as string;
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const [, name, calls] = m;
    if (!name || !calls || name.startsWith('config') || name === 'info') continue;
    out[name] = Number(calls);
  }
  return out;
}

/** All calls of commandCounts(). */
export const sumCounts = (counts: Record<string, number>): number => Object.values(counts).reduce((x, y) => x + y, 0);
