/**
 * Every process and temp directory the suite starts goes through here, so that all of them go
 * away at the end, on an error, on Ctrl-C, and (through the parent-death signal) even when the
 * orchestrator itself is killed.
 *
 * Each child runs in its own process group (nginx's master and worker are killed together),
 * pinned with `taskset -c CPU` when asked (the affinity is inherited by its threads and
 * children), and under `setpriv --pdeathsig KILL` where util-linux has it. If the orchestrator is
 * killed outright (SIGKILL: no handler runs), the parent-death signal kills its direct children
 * and a small watchdog shell (started with the first child) kills the process groups still
 * listed in its registry (an nginx worker outlives its master otherwise) and removes the temp
 * directories, within a second; the watchdog exits by itself within a second of a normal exit.
 */
import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { chmodSync, existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
// A port bound and released: the same helper demo:cluster uses.
export { freePort } from '../../src/demo/redis-server.js';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<void>;
  /** The last 200 lines of stdout and stderr. */
  readonly output: string[];
  readonly watchers: Set<(line: string) => void>;
}

const procs = new Set<Proc>();
const dirs = new Set<string>();

// ---------------------------------------------------------------------------------------------
// Watchdog

const WATCHDOG = `
o=$1; f=$2; d=$3
while kill -0 "$o" 2>/dev/null; do sleep 1; done
if [ -f "$f" ]; then
  while read -r kind v; do [ "$kind" = pg ] && kill -s KILL -- "-$v" 2>/dev/null; done < "$f"
  while read -r kind v; do [ "$kind" = dir ] && rm -rf -- "$v"; done < "$f"
fi
rm -rf -- "$d"
`;
let watchDir: string | undefined;

/** Rewrites the watchdog's registry: the live process groups and temp directories. */
function register(): void {
  if (!watchDir) {
    watchDir = mkdtempSync(join(tmpdir(), 'roomgate-bench-watch-'));
    const w = spawn('/bin/sh', ['-c', WATCHDOG, 'watchdog', String(process.pid), join(watchDir, 'registry'), watchDir], { detached: true, stdio: 'ignore' });
    w.unref();
  }
  const lines = [...[...procs].map((p) => `pg ${p.pid}`), ...[...dirs].map((d) => `dir ${d}`)];
  writeFileSync(join(watchDir, 'registry.tmp'), `${lines.join('\n')}\n`);
  renameSync(join(watchDir, 'registry.tmp'), join(watchDir, 'registry'));
}

let pdeathsig: boolean | undefined;
function hasPdeathsig(): boolean {
  pdeathsig ??= spawnSync('setpriv', ['--pdeathsig', 'KILL', 'true'], { stdio: 'ignore' }).status === 0;
  return pdeathsig;
}

export interface StartOptions {
  /** `taskset -c` list, e.g. "0". */
  cpu?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Add an IPC channel (Node children). */
  ipc?: boolean;
  /** Give the child a stdin pipe (our Node children exit when it closes). */
  stdin?: boolean;
}

export function startProc(name: string, cmd: string, args: readonly string[], o: StartOptions = {}): Proc {
  let argv = [cmd, ...args];
  if (o.cpu !== undefined) argv = ['taskset', '-c', o.cpu, ...argv];
  if (hasPdeathsig()) argv = ['setpriv', '--pdeathsig', 'KILL', ...argv];
  const stdio: StdioOptions = [o.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'];
  if (o.ipc) stdio.push('ipc');
  const child = spawn(argv[0]!, argv.slice(1), { stdio, env: o.env ?? process.env, cwd: o.cwd, detached: true });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${cmd}`);
  const output: string[] = [];
  const watchers = new Set<(line: string) => void>();
  const keep = (l: string): void => {
    output.push(l);
    if (output.length > 200) output.shift();
    for (const w of [...watchers]) w(l);
  };
  if (child.stdout) createInterface({ input: child.stdout }).on('line', keep);
  if (child.stderr) createInterface({ input: child.stderr }).on('line', keep);
  child.stdin?.on('error', () => undefined);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const p: Proc = { name, child, pid: child.pid, exited, output, watchers };
  procs.add(p);
  register();
  void exited.then(() => {
    procs.delete(p);
    register();
  });
  child.once('error', (err) => keep(`${name}: ${err.message}`));
  return p;
}

function alive(p: Proc): boolean {
  return p.child.exitCode === null && p.child.signalCode === null;
}

function killGroup(p: Proc, sig: NodeJS.Signals): void {
  try {
    process.kill(-p.pid, sig);
  } catch {
    try {
      p.child.kill(sig);
    } catch {
      /* gone */
    }
  }
}

/** TERM to the process group, KILL after `graceMs`; resolves when the process has exited. */
export async function stopProc(p: Proc, graceMs = 5_000): Promise<void> {
  if (alive(p)) {
    killGroup(p, 'SIGTERM');
    const timer = setTimeout(() => killGroup(p, 'SIGKILL'), graceMs);
    await p.exited;
    clearTimeout(timer);
  }
  // Leftovers of the group (an nginx worker whose master went first).
  killGroup(p, 'SIGKILL');
}

/** A temp directory under `parent` (default the OS's), removed by removeDir, cleanupAll or the watchdog. */
export function tempDir(prefix: string, parent = tmpdir()): string {
  const d = mkdtempSync(join(parent, prefix));
  // nginx workers run as an unprivileged user when started as root.
  chmodSync(d, 0o755);
  dirs.add(d);
  register();
  return d;
}

export function removeDir(d: string): void {
  rmSync(d, { recursive: true, force: true });
  dirs.delete(d);
  register();
}

/** Stops every process this module started and removes every temp directory. */
export async function cleanupAll(): Promise<void> {
  await Promise.all([...procs].map((p) => stopProc(p, 3_000)));
  for (const d of [...dirs]) removeDir(d);
}

// Last resort (an uncaught error, process.exit): nothing outlives the orchestrator.
process.once('exit', () => {
  for (const p of procs) killGroup(p, 'SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Resolves with the first line (already seen or to come) that matches; rejects on exit or timeout. */
export function waitLine(p: Proc, what: string, match: (line: string) => boolean, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const found = p.output.find(match);
    if (found) return resolve(found);
    let done = false;
    const finish = (err: Error | null, line?: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      p.watchers.delete(watcher);
      if (err) reject(err);
      else resolve(line!);
    };
    const watcher = (l: string): void => {
      if (match(l)) finish(null, l);
    };
    p.watchers.add(watcher);
    void p.exited.then(() => setTimeout(() => finish(new Error(`${p.name} exited before ${what}:\n  ${p.output.slice(-15).join('\n  ')}`)), 50));
    const timer = setTimeout(() => finish(new Error(`${p.name}: no ${what} within ${timeoutMs} ms:\n  ${p.output.slice(-15).join('\n  ')}`)), timeoutMs);
  });
}

/** Polls `url` until it answers 200; rejects when `p` exits or after `timeoutMs`. */
export async function waitHttpOk(p: Proc | null, url: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last = '';
  for (;;) {
    if (p && !alive(p)) throw new Error(`${p.name} exited before answering ${url}:\n  ${p.output.slice(-15).join('\n  ')}`);
    try {
      const status = await statusOf(url);
      if (status === 200) return;
      last = `HTTP ${status}`;
    } catch (err) {
      last = String((err as Error).cause ?? (err as Error).message);
    }
    if (performance.now() > deadline) {
      throw new Error(`${p?.name ?? url}: no 200 from ${url} within ${timeoutMs} ms (${last})${p ? `:\n  ${p.output.slice(-15).join('\n  ')}` : ''}`);
    }
    await sleep(50);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function which(cmd: string): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/sbin', '/usr/bin']) {
    if (dir && existsSync(join(dir, cmd))) return join(dir, cmd);
  }
  return null;
}

/** The status of a GET; https without verifying (the suite's own self-signed certificate). */
function statusOf(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    const req = get(url, { rejectUnauthorized: false, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}
