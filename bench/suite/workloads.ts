/**
 * One run = one workload through one target, on a freshly started proxy. Each function returns
 * the run's figures; the orchestrator interleaves targets and rounds.
 *
 * Measurement windows: the proxy's CPU (utime + stime of its process tree) and the busy time of
 * each core are read at both ends of a window (cpu.ts); the load generator counts what it received
 * in the same window. Figures per unit of work divide the two.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RoomSigner } from '../../src/room/signing.js';
import { between, loadAvg1, sample, treeRssKb, type Sample } from './cpu.js';
import type { LoadGen } from './driver.js';
import type { ClientSpec } from './loadgen.js';
import { BROADCAST_HZ, PAGE_PATH, WS_PATH, cookieHeader, pageHeaders } from './protocol.js';
import { removeDir, sleep, startProc, tempDir, waitLine } from './procs.js';
import { Histogram } from './stats.js';
import { startTarget, type BackendAddr, type Running, type TargetName } from './proxies.js';

export type WorkloadKind = 'game' | 'burst' | 'page' | 'scale';

export interface Workload {
  /** "game-1000", "burst", "page", "scale". */
  readonly key: string;
  readonly kind: WorkloadKind;
  /** Clients (game), upgrades (burst), sockets (scale). */
  readonly size: number;
}

export interface Options {
  readonly durationS: number;
  readonly warmupS: number;
  readonly roomSize: number;
  readonly openConcurrency: number;
  readonly burstInflight: number;
  readonly pageConnections: number;
  readonly pingMs: number;
}

export interface Context {
  readonly backends: readonly BackendAddr[];
  readonly proxyCpu: string;
  readonly loadCpu: string;
  readonly secret: string;
  readonly signer: RoomSigner;
  readonly nofile: number;
  readonly loadgen: LoadGen;
  readonly roomgateConfig?: Record<string, unknown>;
  readonly roomgateConfigB?: Record<string, unknown>;
  /** Backends and load generators: their CPU is the load side's. */
  readonly loadPids: readonly number[];
  readonly opts: Options;
  /** --tls: the proxies terminate TLS with this certificate (the direct target cannot). */
  readonly tls?: { readonly cert: string; readonly key: string; readonly pem: string };
}

export interface RunRecord {
  round: number;
  workload: string;
  kind: WorkloadKind;
  target: TargetName;
  ok: boolean;
  error?: string;
  notes: string[];
  /** The figures (see report.ts for their names and units). */
  m: Record<string, number>;
  /**
   * Conditions: 1-min load average at the start, window length, busy share of both cores (whoever
   * used them), and the share of its core the load side itself used (near 1: the load side, not
   * the target, was the limit).
   */
  cond: { load1: number; windowS: number; proxyCoreBusy: number; loadCoreBusy: number; loadSide: number };
}

let runSeq = 0;

/** Rooms of `roomSize`, each room's clients listed together; cookie signed like roomgate's. */
function clientSpecs(ctx: Context, run: Running, n: number, query: string): ClientSpec[] {
  const prefix = `r${++runSeq}`;
  const now = Date.now();
  const out: ClientSpec[] = [];
  const signed = new Map<number, string>();
  for (let i = 0; i < n; i++) {
    const r = Math.floor(i / ctx.opts.roomSize);
    const room = `${prefix}-${r}`;
    let s = signed.get(r);
    if (s === undefined) signed.set(r, (s = ctx.signer.sign(room, now)));
    // direct: straight to the room's backend (any fixed mapping will do: it is the limit).
    const port = run.port ?? ctx.backends[r % ctx.backends.length]!.port;
    const tls = run.port !== null && ctx.tls !== undefined;
    out.push({ port, path: `${WS_PATH}${query}`, origin: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`, cookie: cookieHeader(room, s, i), tls });
  }
  return out;
}

/** Rooms whose sockets landed on more than one backend. */
function splits(welcome: readonly [string, string][]): number {
  const by = new Map<string, Set<string>>();
  for (const [room, backend] of welcome) {
    let s = by.get(room);
    if (!s) by.set(room, (s = new Set()));
    s.add(backend);
  }
  let n = 0;
  for (const s of by.values()) if (s.size > 1) n++;
  return n;
}

function cond(ctx: Context, load1: number, a: Sample, b: Sample): RunRecord['cond'] {
  const w = between(a, b);
  return {
    load1,
    windowS: w.seconds,
    proxyCoreBusy: w.busyShare[Number(ctx.proxyCpu.split(/[,-]/)[0])] ?? Number.NaN,
    loadCoreBusy: w.busyShare[Number(ctx.loadCpu.split(/[,-]/)[0])] ?? Number.NaN,
    loadSide: w.loadShare,
  };
}

function rss(run: Running): number {
  return run.pid ? treeRssKb(run.pid) : Number.NaN;
}

const DEBUG = process.env.BENCH_DEBUG === '1';
let phaseAt = performance.now();
/** With BENCH_DEBUG=1: how long each phase took, on stderr. */
function phase(what: string): void {
  const now = performance.now();
  if (DEBUG) process.stderr.write(`  .. ${what} (+${((now - phaseAt) / 1000).toFixed(2)} s)\n`);
  phaseAt = now;
}

export async function runWorkload(ctx: Context, w: Workload, target: TargetName, round: number): Promise<RunRecord> {
  phase(`${w.key} ${target}: start`);
  const rec: RunRecord = { round, workload: w.key, kind: w.kind, target, ok: false, notes: [], m: {}, cond: { load1: loadAvg1(), windowS: 0, proxyCoreBusy: Number.NaN, loadCoreBusy: Number.NaN, loadSide: Number.NaN } };
  let run: Running;
  try {
    run = await startTarget(target, { backends: ctx.backends, cpu: ctx.proxyCpu, secret: ctx.secret, nofile: ctx.nofile, roomgateConfig: ctx.roomgateConfig, roomgateConfigB: ctx.roomgateConfigB, tls: ctx.tls });
  } catch (err) {
    rec.error = `${target} did not start: ${(err as Error).message}`;
    return rec;
  }
  try {
    await sleep(200);
    if (w.kind === 'game') await game(ctx, w, run, rec);
    else if (w.kind === 'burst') await burst(ctx, w, run, rec);
    else if (w.kind === 'page') await page(ctx, run, rec);
    else await scale(ctx, w, run, rec);
    rec.ok = true;
  } catch (err) {
    rec.error = (err as Error).message;
  }
  try {
    const downs = run.backendDowns();
    if (downs > 0) {
      rec.notes.push(
        `roomgate marked a backend down ${downs} time(s) (its active health checks: health.timeoutMs 1 s, fall 3): ` +
          'it then answers 503 to new sockets of those rooms and closes their live sockets',
      );
    }
    if (!rec.ok || rec.m.failed || rec.m.errors || rec.m.closed) {
      const tail = run.logTail(3).map((l) => l.replace(/^\S+ \S+ /, '').slice(0, 200));
      if (tail.length > 0) rec.notes.push(`${target} logged: ${tail.join(' / ')}`);
    }
  } finally {
    phase('run done');
    await ctx.loadgen.closeAll().catch(() => undefined);
    phase('sockets closed');
    await run.stop();
    phase('target stopped');
  }
  return rec;
}

type OpenOptions = Parameters<Context['loadgen']['open']>[1];

/**
 * What game and scale share: open the sockets, settle, then one measured window with the proxy's
 * CPU and RSS around it. Notes sockets that failed or closed; throws when none opened.
 */
async function openAndMeasure(ctx: Context, w: Workload, run: Running, rec: RunRecord, query: string, open: OpenOptions, settleMs: number) {
  const rss0 = rss(run);
  phase('target up');
  const opened = await ctx.loadgen.open(clientSpecs(ctx, run, w.size, query), open);
  phase('sockets open');
  if (opened.failed > 0) rec.notes.push(`${opened.failed} of ${w.size} sockets failed to open: ${opened.errors.join('; ')}`);
  if (opened.opened === 0) throw new Error(`no socket opened: ${opened.errors.join('; ')}`);
  await sleep(settleMs);
  const a = sample(run.pid, ctx.loadPids);
  await ctx.loadgen.windowStart();
  await sleep(ctx.opts.durationS * 1000);
  const win = await ctx.loadgen.windowEnd();
  const b = sample(run.pid, ctx.loadPids);
  const rss1 = rss(run);
  rec.cond = cond(ctx, rec.cond.load1, a, b);
  if (win.closed > 0) rec.notes.push(`${win.closed} sockets closed during the window`);
  if (win.alive + win.closed < opened.opened) rec.notes.push(`${opened.opened - win.alive - win.closed} sockets closed before the window`);
  return {
    opened,
    win,
    cpuMs: b.proxyCpuMs - a.proxyCpuMs,
    s: win.elapsedMs / 1000,
    kbPerSocket: run.pid ? (rss1 - rss0) / opened.opened : Number.NaN,
    rssMb: run.pid ? rss1 / 1024 : Number.NaN,
  };
}

async function game(ctx: Context, w: Workload, run: Running, rec: RunRecord): Promise<void> {
  const { opened, win, cpuMs, s, kbPerSocket, rssMb } = await openAndMeasure(ctx, w, run, rec, '', { concurrency: ctx.opts.openConcurrency, mode: 'game' }, ctx.opts.warmupS * 1000);
  rec.m = {
    sockets: opened.opened,
    failed: opened.failed,
    framesPerS: win.frames / s,
    expectedFramesPerS: opened.opened * BROADCAST_HZ,
    inputsPerS: win.inputs / s,
    p50: win.hist.percentile(50),
    p95: win.hist.percentile(95),
    p99: win.hist.percentile(99),
    max: win.hist.max,
    cpuUsPerFrame: run.pid ? (cpuMs * 1000) / win.frames : Number.NaN,
    proxyCpuPct: run.pid ? (100 * cpuMs) / 1000 / s : Number.NaN,
    kbPerSocket,
    rssMb,
    splits: splits(opened.welcome),
    closed: win.closed,
    openS: opened.elapsedMs / 1000,
    open99: new Histogram().merge(opened.openHist).percentile(99),
  };
  if (win.frames === 0) throw new Error(`no frame delivered in the window (${win.alive} of ${opened.opened} sockets open)`);
}

async function burst(ctx: Context, w: Workload, run: Running, rec: RunRecord): Promise<void> {
  // Warm-up: a few handshakes so the first timed ones do not pay for cold code paths.
  const warm = await ctx.loadgen.open(clientSpecs(ctx, run, Math.min(200, w.size), '?idle=1'), { concurrency: ctx.opts.burstInflight, mode: 'burst' });
  await ctx.loadgen.closeAll();
  if (warm.opened === 0) throw new Error(`warm-up: no socket opened: ${warm.errors.join('; ')}`);
  await sleep(300);
  const specs = clientSpecs(ctx, run, w.size, '?idle=1');
  const a = sample(run.pid, ctx.loadPids);
  const opened = await ctx.loadgen.open(specs, { concurrency: ctx.opts.burstInflight, mode: 'burst' });
  const b = sample(run.pid, ctx.loadPids);
  if (opened.failed > 0) rec.notes.push(`${opened.failed} of ${w.size} upgrades failed: ${opened.errors.join('; ')}`);
  const cpuMs = b.proxyCpuMs - a.proxyCpuMs;
  const hist = new Histogram().merge(opened.openHist);
  rec.cond = cond(ctx, rec.cond.load1, a, b);
  rec.m = {
    upgrades: opened.opened,
    failed: opened.failed,
    upgradesPerS: opened.opened / (opened.elapsedMs / 1000),
    open50: hist.percentile(50),
    open95: hist.percentile(95),
    open99: hist.percentile(99),
    cpuUsPerUpgrade: run.pid ? (cpuMs * 1000) / opened.opened : Number.NaN,
    cpuMs: run.pid ? cpuMs : Number.NaN,
  };
}

/** A raw HTTP/1.1 request head (GET, no body) with these headers, for a wrk script. */
export function requestHead(path: string, headers: Record<string, string>): string {
  return `GET ${path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
}

/**
 * A wrk Lua script that sends the given raw request heads in turn (each connection starting at a
 * random one) and prints one `WRKJSON {...}` line (WrkResult) when wrk is done.
 */
export function wrkHeadsScript(heads: readonly string[], comment: string): string {
  const lua = (s: string): string => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\r/g, '\\r').replace(/\n/g, '\\n');
  return `-- generated: ${comment}
local reqs = {
${heads.map((h) => `  "${lua(h)}",`).join('\n')}
}
local n = #reqs
local i = 0
init = function(args)
  i = math.random(n) - 1
end
request = function()
  i = i + 1
  if i > n then i = 1 end
  return reqs[i]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"durationUs":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p99":%d,"max":%d}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
`;
}

/** A wrk Lua script sending page GETs with a different room cookie each (from a fixed list). */
function wrkScript(ctx: Context, port: number, rooms: number): string {
  const now = Date.now();
  const heads: string[] = [];
  for (let i = 0; i < rooms; i++) {
    const room = `page-${i}`;
    heads.push(requestHead(PAGE_PATH, { Host: `127.0.0.1:${port}`, ...pageHeaders(cookieHeader(room, ctx.signer.sign(room, now), i)) }));
  }
  return wrkHeadsScript(heads, `bench/suite/workloads.ts: ${rooms} rooms, one request each in turn`);
}

/** wrk's totals (latencies in µs); `status` counts non-2xx/3xx answers, the rest socket errors. */
export interface WrkResult {
  requests: number;
  durationUs: number;
  bytes: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  p50: number;
  p99: number;
  max: number;
}

/** One wrk -t1 run with a script from wrkHeadsScript, pinned to `cpu`; rejects when no result line comes in time. */
export async function runWrk(o: { cpu: string; connections: number; url: string; script: string; seconds: number }): Promise<WrkResult> {
  const p = startProc('wrk', 'wrk', ['-t1', `-c${o.connections}`, `-d${o.seconds}s`, '--timeout', '5s', '-s', o.script, o.url], { cpu: o.cpu });
  const line = await waitLine(p, 'result line', (l) => l.startsWith('WRKJSON '), (o.seconds + 30) * 1000);
  await p.exited;
  return JSON.parse(line.slice('WRKJSON '.length)) as WrkResult;
}

function wrk(ctx: Context, port: number, script: string, seconds: number): Promise<WrkResult> {
  const url = `${ctx.tls && port !== ctx.backends[0]!.port ? 'https' : 'http'}://127.0.0.1:${port}${PAGE_PATH}`;
  return runWrk({ cpu: ctx.loadCpu, connections: ctx.opts.pageConnections, url, script, seconds });
}

async function page(ctx: Context, run: Running, rec: RunRecord): Promise<void> {
  // direct: wrk straight at one backend (the page ignores the room; on the one shared load core,
  // one backend or three have the same capacity).
  const port = run.port ?? ctx.backends[0]!.port;
  const dir = tempDir('roomgate-bench-wrk-');
  try {
    const script = join(dir, 'rooms.lua');
    writeFileSync(script, wrkScript(ctx, port, 1000));
    await wrk(ctx, port, script, Math.max(1, Math.round(ctx.opts.warmupS)));
    const a = sample(run.pid, ctx.loadPids);
    const r = await wrk(ctx, port, script, ctx.opts.durationS);
    const b = sample(run.pid, ctx.loadPids);
    const cpuMs = b.proxyCpuMs - a.proxyCpuMs;
    const errors = r.connect + r.read + r.write + r.timeout;
    if (errors + r.status > 0) rec.notes.push(`wrk: ${r.status} non-2xx/3xx, ${errors} socket errors`);
    rec.cond = cond(ctx, rec.cond.load1, a, b);
    rec.m = {
      requests: r.requests,
      reqPerS: r.requests / (r.durationUs / 1e6),
      p50: r.p50 / 1000,
      p99: r.p99 / 1000,
      cpuUsPerReq: run.pid ? (cpuMs * 1000) / r.requests : Number.NaN,
      errors: errors + r.status,
      kbPerReq: r.bytes / 1024 / r.requests,
    };
  } finally {
    removeDir(dir);
  }
}

async function scale(ctx: Context, w: Workload, run: Running, rec: RunRecord): Promise<void> {
  const open: OpenOptions = { concurrency: ctx.opts.openConcurrency, mode: 'idle', pingMs: ctx.opts.pingMs };
  const { opened, win, cpuMs, s, kbPerSocket, rssMb } = await openAndMeasure(ctx, w, run, rec, '?idle=1', open, 1000);
  rec.m = {
    sockets: opened.opened,
    failed: opened.failed,
    kbPerSocket,
    rssMb,
    cpuMsPerS: run.pid ? cpuMs / s : Number.NaN,
    pongsPerS: win.pongs / s,
    openS: opened.elapsedMs / 1000,
    splits: splits(opened.welcome),
    closed: win.closed,
  };
}
