/**
 * Benchmark: Redis commands per second one roomgate gateway issues at steady state.
 *
 *   npm run build && node dist/bench/redis-commands.js [sockets] [--heartbeat-ms N] [--sample-s N]
 *                                                      [--room-size N] [--concurrency N]
 *
 * Starts its own redis-server (free port, no persistence, temp directory), 3 demo backends and one
 * gateway on that Redis (child processes of dist/examples/demo-backend/server.js and
 * dist/src/main.js start, port 0, the listening lines read from their stdout), opens N WebSocket
 * clients through the gateway (default 10,000, rooms of 4, bounded concurrency; each client mounts
 * its room like djust does), waits until the gateway's presence counts every socket and then a
 * few heartbeats more, and samples `INFO stats commandstats` every second for --sample-s seconds
 * (default 10) with a plain ioredis client. total_commands_processed includes the commands Lua
 * scripts run; the bench's own INFO calls are subtracted. It prints commands/s, the per-command
 * breakdown and the gateway's heartbeatMs, then stops every process it started and removes its
 * temp directory. A benchmark, not a test: it asserts nothing but fails with a clear message when
 * something cannot be set up (file descriptors, redis-server missing, a socket that never opens).
 *
 * File descriptors: the gateway holds 2 per socket (client side and backend side), this process 1
 * per socket. If the soft limit is too low, the bench re-runs itself under `ulimit -n` with a higher
 * limit (children inherit it); if that is not allowed (the hard limit, not root), it says so.
 *
 * Self-contained on purpose: nothing here imports from test/.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { stopChild, type Child } from '../src/demo/child.js';
import { startRedisServer } from '../src/demo/redis-server.js';

// Report lines go to stdout, problems to stderr: this is a command-line report, not the gateway's log.
const say = (line = ''): boolean => process.stdout.write(`${line}\n`);
const complain = (line: string): boolean => process.stderr.write(`${line}\n`);

// dist/bench/redis-commands.js -> the package root.
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(ROOT, 'dist/src/main.js');
const BACKEND = join(ROOT, 'dist/examples/demo-backend/server.js');
const REEXEC_ENV = 'ROOMGATE_BENCH_NOFILE';

interface Options {
  sockets: number;
  heartbeatMs: number;
  sampleS: number;
  roomSize: number;
  concurrency: number;
}

function usage(msg: string): never {
  complain(`redis-commands bench: ${msg}`);
  complain('usage: node dist/bench/redis-commands.js [sockets] [--heartbeat-ms N] [--sample-s N] [--room-size N] [--concurrency N]');
  process.exit(2);
}

function parseArgs(argv: readonly string[]): Options {
  const o: Options = { sockets: 10_000, heartbeatMs: 1_000, sampleS: 10, roomSize: 4, concurrency: 200 };
  const int = (name: string, v: string | undefined, min: number, max: number): number => {
    const n = Number(v);
    if (v === undefined || !Number.isInteger(n) || n < min || n > max) usage(`${name} must be an integer from ${min} to ${max}, got ${String(v)}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--heartbeat-ms') o.heartbeatMs = int(a, argv[++i], 50, 7_500);
    else if (a === '--sample-s') o.sampleS = int(a, argv[++i], 1, 600);
    else if (a === '--room-size') o.roomSize = int(a, argv[++i], 1, 1_000);
    else if (a === '--concurrency') o.concurrency = int(a, argv[++i], 1, 5_000);
    else if (/^[0-9]+$/.test(a)) o.sockets = int('sockets', a, 1, 200_000);
    else usage(`unknown argument ${a}`);
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// File descriptors

/** The soft limit of open files of this process (Linux /proc), or null when unknown. */
function openFilesLimit(): { soft: number; hard: number } | null {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const m = line ? /Max open files\s+(\S+)\s+(\S+)/.exec(line) : null;
    if (!m) return null;
    const num = (s: string): number => (s === 'unlimited' ? Number.POSITIVE_INFINITY : Number(s));
    return { soft: num(m[1] as string), hard: num(m[2] as string) };
  } catch {
    return null;
  }
}

/** Open files needed for n sockets: the gateway's 2 per socket plus its listeners, Redis and backend connections, stdio. */
function filesFor(sockets: number): number {
  return 2 * sockets + 300;
}

/** The most sockets a limit of `files` open files allows. */
function maxSocketsFor(files: number): number {
  return Math.max(1, Math.floor((files - 300) / 2));
}

/**
 * Makes sure this process (and so every child) may open `need` files: re-runs itself under
 * `ulimit -n need` when the soft limit is lower. Returns false when it re-ran (the caller exits
 * with the re-run's code); exits with a clear message when the limit cannot be raised.
 */
async function ensureOpenFiles(need: number, sockets: number): Promise<boolean> {
  const lim = openFilesLimit();
  if (lim === null || lim.soft >= need) return true;
  const advice =
    `${sockets} sockets need about ${need} open files (the gateway holds 2 per socket, this process 1); ` +
    `the limit is ${lim.soft} (hard ${lim.hard === Number.POSITIVE_INFINITY ? 'unlimited' : lim.hard})`;
  if (process.env[REEXEC_ENV]) {
    complain(`redis-commands bench: ${advice} even after ulimit -n ${need}: giving up.`);
    process.exit(1);
  }
  const probe = spawnSync('/bin/sh', ['-c', `ulimit -n ${need}`], { stdio: 'ignore' });
  if (probe.status !== 0) {
    complain(
      `redis-commands bench: ${advice}, and \`ulimit -n ${need}\` is refused here (raising the hard limit needs root with CAP_SYS_RESOURCE).\n` +
        `  Raise it (ulimit -n, LimitNOFILE in systemd, --ulimit nofile=... in docker) or run at most ${maxSocketsFor(lim.soft)} sockets: node dist/bench/redis-commands.js ${maxSocketsFor(lim.soft)}`,
    );
    process.exit(1);
  }
  say(`(open files limit ${lim.soft} is too low for ${sockets} sockets: re-running under ulimit -n ${need})`);
  const child = spawn('/bin/sh', ['-c', `ulimit -n ${need} && exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, [REEXEC_ENV]: String(need) },
  });
  const forward = (sig: NodeJS.Signals): void => {
    child.kill(sig);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const code = await new Promise<number>((resolve) => child.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
  process.exitCode = code;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Child processes

interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** The last 200 lines of stdout and stderr. */
  readonly output: string[];
  /** Called with every line of stdout and stderr. */
  readonly watchers: Set<(line: string) => void>;
}

const procs: Proc[] = [];
const clients: WebSocket[] = [];
let workDir: string | undefined;
/** The bench's redis-server (started by the project's own helper, also used by demo:cluster). */
let redisChild: Child | undefined;

function track(name: string, child: ChildProcess): Proc {
  const output: string[] = [];
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  // Keep the last lines for error messages; keep draining so that no child blocks on a full pipe.
  const watchers = new Set<(line: string) => void>();
  const keep = (l: string): void => {
    output.push(l);
    if (output.length > 200) output.shift();
    for (const w of [...watchers]) w(l);
  };
  if (child.stdout) createInterface({ input: child.stdout }).on('line', keep);
  if (child.stderr) createInterface({ input: child.stderr }).on('line', keep);
  const p: Proc = { name, child, exited, output, watchers };
  procs.push(p);
  return p;
}

function waitLine(p: Proc, what: string, match: (line: string) => boolean, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const found = p.output.find(match);
    if (found) return resolve(found);
    let done = false;
    const watcher = (l: string): void => {
      if (match(l)) finish(null, l);
    };
    const onExit = (code: number | null, sig: NodeJS.Signals | null): void => {
      // Let the last lines arrive before quoting them.
      setTimeout(() => finish(new Error(`${p.name} exited (${code ?? sig}) before ${what}:\n  ${p.output.slice(-20).join('\n  ')}`)), 50);
    };
    const finish = (err: Error | null, line?: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      p.watchers.delete(watcher);
      p.child.off('exit', onExit);
      if (err) reject(err);
      else resolve(line as string);
    };
    p.watchers.add(watcher);
    p.child.once('exit', onExit);
    const timer = setTimeout(() => finish(new Error(`${p.name}: no ${what} within ${timeoutMs} ms:\n  ${p.output.slice(-20).join('\n  ')}`)), timeoutMs);
  });
}

async function startBackend(id: string): Promise<string> {
  const p = track(`backend ${id}`, spawn(process.execPath, [BACKEND, '--port', '0', '--id', id], { stdio: ['ignore', 'pipe', 'pipe'] }));
  const line = await waitLine(p, 'listening line', (l) => l.includes('"listening"'), 15_000);
  return `${id}=http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`;
}

async function startGateway(dir: string, redisUrl: string, backends: readonly string[], heartbeatMs: number): Promise<number> {
  const config = {
    redis: { url: redisUrl },
    placement: { heartbeatMs },
    presence: { ttlMs: Math.min(15_000, Math.max(10_000, 2 * heartbeatMs)) },
    // The bench opens sockets much faster than any reconnect wave: no admission limits.
    admission: { maxInflightUpgrades: 0, upgradesPerSecond: 0 },
  };
  // YAML is a superset of JSON.
  const file = join(dir, 'roomgate.yaml');
  writeFileSync(file, JSON.stringify(config, null, 2));
  const args = [MAIN, 'start', '--port', '0', '--config', file, ...backends.flatMap((b) => ['--backend', b])];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      ROOMGATE_HOST: '127.0.0.1',
      ROOMGATE_ADMIN_PORT: '0',
      ROOMGATE_COOKIE_SECRETS: randomBytes(32).toString('base64url'),
      ROOMGATE_LOG_LEVEL: 'info',
    },
  });
  const p = track('gateway', child);
  const line = await waitLine(p, 'listening line', (l) => l.includes('"msg":"listening"'), 20_000);
  return (JSON.parse(line) as { port: number }).port;
}

/** Closes every client, stops every child (TERM, then KILL) and removes the temp directory. */
async function cleanup(): Promise<void> {
  for (const ws of clients) ws.terminate();
  clients.length = 0;
  await Promise.all(
    procs.map(async (p) => {
      if (p.child.exitCode !== null || p.child.signalCode !== null) return;
      p.child.kill(p.name === 'redis-server' ? 'SIGKILL' : 'SIGTERM');
      const timer = setTimeout(() => p.child.kill('SIGKILL'), 5_000);
      await p.exited;
      clearTimeout(timer);
    }),
  );
  if (redisChild) await stopChild(redisChild, 'SIGKILL');
  redisChild = undefined;
  if (workDir) rmSync(workDir, { recursive: true, force: true });
  workDir = undefined;
}

// Last resort: nothing outlives this process.
process.once('exit', () => {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Clients

/** Opens one socket of `room` through the gateway and mounts the room; retries a few times. */
async function openClient(wsBase: string, room: string): Promise<WebSocket> {
  let lastErr: Error | undefined;
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      return await new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(`${wsBase}/ws/live/?room=${encodeURIComponent(room)}`, { handshakeTimeout: 15_000, perMessageDeflate: false });
        const timer = setTimeout(() => {
          ws.terminate();
          reject(new Error('not mounted within 20 s'));
        }, 20_000);
        ws.on('message', (data) => {
          let m: { type?: string };
          try {
            m = JSON.parse(String(data)) as { type?: string };
          } catch {
            return;
          }
          if (m.type === 'connect') ws.send(JSON.stringify({ type: 'mount', url: `/game/${room}/`, room }));
          else if (m.type === 'mounted') {
            clearTimeout(timer);
            resolve(ws);
          }
        });
        ws.once('unexpected-response', (_req, res) => {
          clearTimeout(timer);
          ws.terminate();
          reject(new Error(`HTTP ${res.statusCode}`));
        });
        ws.once('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        ws.once('close', () => {
          clearTimeout(timer);
          reject(new Error('closed before mounted'));
        });
      });
    } catch (err) {
      lastErr = err as Error;
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EMFILE' || code === 'ENFILE') break; // retrying will not help
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
  const code = (lastErr as NodeJS.ErrnoException | undefined)?.code;
  const hint = code === 'EMFILE' || code === 'ENFILE' ? ' (too many open files: raise `ulimit -n` or run fewer sockets)' : '';
  throw new Error(`socket of room ${room} could not be opened: ${lastErr?.message ?? 'unknown error'}${hint}`);
}

async function openClients(wsBase: string, o: Options): Promise<void> {
  let next = 0;
  let opened = 0;
  let reported = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= o.sockets) return;
      const ws = await openClient(wsBase, `bench-${Math.floor(i / o.roomSize)}`);
      ws.on('error', () => undefined);
      clients.push(ws);
      opened++;
      if (opened - reported >= 2_000) {
        reported = opened;
        say(`  ${opened} sockets open`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, o.sockets) }, () => worker()));
}

async function gatewayOnline(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/_roomgate/api/online`, { signal: AbortSignal.timeout(5_000) });
  if (res.status !== 200) return -1;
  return ((await res.json()) as { total: number }).total;
}

// ---------------------------------------------------------------------------------------------
// Sampling

interface Sample {
  readonly at: number;
  readonly total: number;
  readonly calls: Map<string, number>;
}

function parseInfo(text: string): Sample {
  let total = Number.NaN;
  const calls = new Map<string, number>();
  for (const line of text.split(/\r?\n/)) {
    if (line.startsWith('total_commands_processed:')) total = Number(line.slice('total_commands_processed:'.length));
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) calls.set(m[1] as string, Number(m[2]));
  }
  if (!Number.isFinite(total)) throw new Error('INFO reply without total_commands_processed');
  return { at: performance.now(), total, calls };
}

async function main(o: Options): Promise<void> {
  for (const f of [MAIN, BACKEND]) if (!existsSync(f)) throw new Error(`${f} is missing: run npm run build first`);

  workDir = mkdtempSync(join(tmpdir(), 'roomgate-bench-redis-'));
  const started = performance.now();
  const redis = await startRedisServer(0);
  redisChild = redis.child;
  const backends = await Promise.all(['b1', 'b2', 'b3'].map((id) => startBackend(id)));
  const port = await startGateway(workDir, redis.url, backends, o.heartbeatMs);
  const rooms = Math.ceil(o.sockets / o.roomSize);
  say(`redis ${redis.url}, 3 demo backends, gateway on 127.0.0.1:${port} (placement.heartbeatMs ${o.heartbeatMs}), ready after ${((performance.now() - started) / 1000).toFixed(1)} s`);
  say(`opening ${o.sockets} sockets in ${rooms} rooms of ${o.roomSize} (${o.concurrency} at a time)`);

  const openStart = performance.now();
  await openClients(`ws://127.0.0.1:${port}`, o);
  const openS = (performance.now() - openStart) / 1000;
  say(`  ${o.sockets} sockets open and mounted in ${openS.toFixed(1)} s`);

  // Steady state: the gateway's own presence counts every socket, then a few quiet heartbeats.
  const deadline = performance.now() + 60_000;
  let online = -1;
  while ((online = await gatewayOnline(port)) !== o.sockets) {
    if (performance.now() > deadline) throw new Error(`the gateway's presence shows ${online} sockets, not ${o.sockets}, after 60 s`);
    await new Promise((r) => setTimeout(r, 250));
  }
  const settleMs = 3 * o.heartbeatMs + 1_000;
  say(`steady state: the gateway reports ${online} sockets; waiting ${settleMs} ms (3 heartbeats + 1 s) before sampling`);
  await new Promise((r) => setTimeout(r, settleMs));

  const probe = new Redis(redis.url, { lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 1, connectionName: 'bench-probe' });
  probe.on('error', () => undefined);
  await probe.connect();
  // One INFO command per sample (several sections in one INFO: Redis >= 7; else stats only).
  let sections = ['stats', 'commandstats'];
  const info = async (): Promise<Sample> => {
    try {
      return parseInfo(String(await probe.call('INFO', ...sections)));
    } catch (err) {
      if (sections.length === 1) throw err;
      sections = ['stats'];
      return parseInfo(String(await probe.call('INFO', ...sections)));
    }
  };
  await info(); // settles the section choice; not part of the window
  const samples: Sample[] = [await info()];
  for (let s = 1; s <= o.sampleS; s++) {
    await new Promise((r) => setTimeout(r, Math.max(0, samples[0]!.at + s * 1_000 - performance.now())));
    samples.push(await info());
  }
  await probe.quit();
  const first = samples[0] as Sample;
  const last = samples[samples.length - 1] as Sample;
  const seconds = (last.at - first.at) / 1000;
  // Every INFO call but the last was processed inside the window (a reading never counts itself).
  const own = samples.length - 1;
  const commands = last.total - first.total - own;
  const perSecond = commands / seconds;
  const perSample: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1] as Sample;
    const b = samples[i] as Sample;
    perSample.push((b.total - a.total - 1) / ((b.at - a.at) / 1000));
  }

  say('');
  say(`Redis commands per second at steady state: ${perSecond.toFixed(1)}/s`);
  say(`  ${o.sockets} sockets, ${rooms} rooms of ${o.roomSize}, 1 gateway, 3 backends, placement.heartbeatMs ${o.heartbeatMs} (${(1000 / o.heartbeatMs).toFixed(2)} heartbeats/s)`);
  say(`  ${commands} commands in ${seconds.toFixed(2)} s (INFO total_commands_processed, Lua-internal commands included, ${own} own INFO calls subtracted)`);
  say(`  per heartbeat: ${(perSecond * (o.heartbeatMs / 1000)).toFixed(1)} commands; per-second readings: ${perSample.map((x) => x.toFixed(0)).join(' ')}`);
  if (first.calls.size > 0) {
    const rows: [string, number][] = [];
    for (const [cmd, n] of last.calls) {
      const d = n - (first.calls.get(cmd) ?? 0) - (cmd === 'info' ? own : 0);
      if (d > 0) rows.push([cmd, d / seconds]);
    }
    rows.sort((a, b) => b[1] - a[1]);
    say(`  by command (/s): ${rows.map(([c, r]) => `${c} ${r.toFixed(1)}`).join(', ')}`);
    const scripts = rows.filter(([c]) => c === 'evalsha' || c === 'eval').reduce((s, [, r]) => s + r, 0);
    say(`  script calls (EVALSHA + EVAL, one round trip each): ${scripts.toFixed(1)}/s`);
  }
}

const options = parseArgs(process.argv.slice(2));
// Re-runs itself under a higher `ulimit -n` when needed (then only waits for that run).
if (await ensureOpenFiles(filesFor(options.sockets), options.sockets)) {
  let failed = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    complain(`redis-commands bench: ${sig}, cleaning up`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await main(options);
  } catch (err) {
    failed = true;
    complain(`redis-commands bench failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    await cleanup();
  }
  if (failed) process.exitCode = 1;
}
