/**
 * roomgate's page cache (docs: `cache` in the configuration) against nginx's micro-cache, with no
 * proxy at all as the baseline, in the same run:
 *
 *   npm run bench:cache -- [--rounds 3] [--duration 6] [--warmup 2] [--connections 64] [--storm 500]
 *                          [--targets direct,nginx-nocache,roomgate-nocache,nginx,roomgate]
 *
 * - hot set: one backend (a node:http server of this file, `--serve backend`) serves 100 distinct
 *   8 KB pages with `Cache-Control: max-age=5`; wrk -t1 asks for them in turn at full speed over
 *   keep-alive connections, each request with its room cookie (10 rooms; the plain `room` cookie
 *   nginx hashes and roomgate's signed `roomgate_room`, so no Set-Cookie is due). A window of
 *   --duration seconds after an untimed --warmup run that fills the caches; the window outlives
 *   max-age, so both caches serve stale while they refresh. Figures: req/s, wrk's p50/p99, the
 *   proxy's CPU per request and per hit (hits = requests - backend fetches in the window), backend
 *   fetches, errors.
 * - stampede: a cold key (a new URL each run), --storm requests on as many connections opened
 *   beforehand, sent at once; the backend answers that URL after 200 ms. Figures: backend fetches
 *   of that URL (1 for a cache that collapses), p50/p99/max latency of the requests (from each
 *   request's write to the last byte of its answer), and the Cache-Status values seen.
 *
 * Targets: direct (wrk at the backend), nginx (proxies.ts's config + proxy_cache as a micro-cache,
 * its cache zone on tmpfs), roomgate (proxies.ts's config + `cache: { paths: ["/"], graceMs:
 * 300000 }`), and both without a cache (what the cache saves). The proxy is pinned to --proxy-cpu,
 * the backend, wrk, the stampede client and this process to --load-cpu (taskset), as in the suite.
 * Writes bench/results/page-cache.md (--out). Everything it starts is stopped and every temp
 * directory removed at the end, on an error and on Ctrl-C. Asserts nothing.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createRoomSigner } from '../src/room/signing.js';
import { between, loadAvg1, sample, type Window } from './suite/cpu.js';
import { cleanupAll, freePort, removeDir, sleep, startProc, stopProc, tempDir, waitLine, type Proc } from './suite/procs.js';
import { ROOT, ensureTools, startTarget, versions, type ProxyContext, type Running } from './suite/proxies.js';
import { padTo, pageHeaders } from './suite/protocol.js';
import { cell, fmt, median } from './suite/stats.js';
import { requestHead, runWrk, wrkHeadsScript, type WrkResult } from './suite/workloads.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);
const log = (line: string): boolean => process.stderr.write(`${line}\n`);

const PAGES = 100;
const PAGE_BYTES = 8 * 1024;
const ROOMS = 10;
const MAX_AGE_S = 5;
const ROOMGATE_CACHE = { paths: ['/'], graceMs: 300_000 };
const ALL_TARGETS = ['direct', 'nginx-nocache', 'roomgate-nocache', 'nginx', 'roomgate'] as const;
type Target = (typeof ALL_TARGETS)[number];
/** The stampede is about the caches; direct is its baseline. */
const STORM_TARGETS: readonly Target[] = ['direct', 'nginx', 'roomgate'];

/** nginx as a micro-cache, the usual recipe; `dir` is a tmpfs directory of the bench. */
function nginxMicroCache(dir: string): NonNullable<ProxyContext['nginx']> {
  return {
    http: `  proxy_cache_path ${dir}/zone levels=1:2 keys_zone=micro:16m max_size=256m inactive=10m use_temp_path=off;`,
    location: [
      'proxy_cache micro;',
      // The room is part of roomgate's key; here each page is always asked for in one room, so
      // this key has as many entries as roomgate's.
      'proxy_cache_key $scheme$proxy_host$request_uri$cookie_room;',
      'proxy_cache_valid 200 5s;',
      'proxy_cache_use_stale updating error timeout http_500 http_502 http_503 http_504;',
      'proxy_cache_lock on;',
      'proxy_cache_background_update on;',
      // roomgate always sends Cache-Status; nginx sends its equivalent.
      'add_header X-Cache-Status $upstream_cache_status always;',
    ]
      .map((l) => `      ${l}`)
      .join('\n'),
  };
}

// ---- the backend (a child process: --serve backend) ----------------------------------------------

function serveBackend(port: number, slowMs: number): void {
  const tail = '--></main></body></html>\n';
  const pages = Array.from({ length: PAGES }, (_, i) =>
    Buffer.from(padTo(`<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>page ${i}</title></head><body><main><h1>Page ${i}</h1><!--`, PAGE_BYTES - tail.length) + tail, 'latin1'),
  );
  let fetches = 0;
  const slow = new Map<string, number>();
  const page = (res: http.ServerResponse, body: Buffer): void => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': body.length, 'Cache-Control': `max-age=${MAX_AGE_S}` });
    res.end(body);
  };
  const server = http.createServer((req, res) => {
    req.resume();
    const url = req.url ?? '/';
    if (url === '/healthz') {
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': 3, 'Cache-Control': 'no-store' });
      res.end('ok\n');
    } else if (url === '/_bench/fetches') {
      const body = JSON.stringify({ fetches, slow: Object.fromEntries(slow) });
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
      res.end(body);
    } else if (url.startsWith('/slow/')) {
      fetches++;
      const key = url.slice('/slow/'.length).split('?')[0] ?? '';
      slow.set(key, (slow.get(key) ?? 0) + 1);
      setTimeout(() => page(res, pages[0]!), slowMs);
    } else {
      fetches++;
      const n = Number(/^\/page\/(\d+)/.exec(url)?.[1] ?? 0);
      page(res, pages[n % PAGES]!);
    }
  });
  // The proxies keep idle connections to their backend: do not close them during a run.
  server.keepAliveTimeout = 300_000;
  server.headersTimeout = 301_000;
  server.listen(port, '127.0.0.1', () => {
    const addr = server.address();
    say(JSON.stringify({ event: 'listening', port: typeof addr === 'object' && addr ? addr.port : 0 }));
  });
  const stop = (): never => process.exit(0);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop).on('error', stop).resume();
}

// ---- small HTTP helpers of the orchestrator --------------------------------------------------------

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** A GET with a 3 s timeout. */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve_, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers, agent: false, timeout: 3_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve_({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: no answer within 3 s`)));
    req.on('error', reject);
  });
}

/** `get`, an error given back as a value (a proxy's malformed answer is a finding, not a crash of the bench). */
async function tryGet(port: number, path: string, headers: Record<string, string>): Promise<Answer | Error> {
  try {
    return await get(port, path, headers);
  } catch (err) {
    return err as Error;
  }
}

/** Errors by message, counted, as one note: "3x Parse Error: ...". */
function errorNote(what: string, errors: readonly Error[]): string | null {
  if (errors.length === 0) return null;
  const by: Record<string, number> = {};
  for (const e of errors) countInto(by, e.message);
  return `${what}: ${Object.entries(by).map(([m, n]) => `${n}x ${m}`).join('; ')}`;
}

interface Fetches {
  fetches: number;
  slow: Record<string, number>;
}

async function backendFetches(port: number): Promise<Fetches> {
  return JSON.parse((await get(port, '/_bench/fetches')).body) as Fetches;
}

/** roomgate_cache_requests_total by outcome, from the admin port's /metrics. */
async function cacheOutcomes(adminPort: number): Promise<Record<string, number>> {
  const a = await get(adminPort, '/metrics');
  if (a.status !== 200) throw new Error(`/metrics: HTTP ${a.status}`);
  const out: Record<string, number> = {};
  for (const m of a.body.matchAll(/^roomgate_cache_requests_total\{[^}]*outcome="([^"]+)"[^}]*\}\s+(\S+)$/gm)) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  return out;
}

function diff(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const d = (b[k] ?? 0) - (a[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

/** The cache verdict of an answer: roomgate's Cache-Status or nginx's X-Cache-Status, ttl/age numbers blanked. */
function verdict(headers: Record<string, string | string[] | undefined>): string {
  const v = headers['cache-status'] ?? headers['x-cache-status'];
  const s = Array.isArray(v) ? v.join(', ') : (v ?? '(none)');
  return s.replace(/ttl=-?[\d.]+/g, 'ttl=N');
}

function countInto(m: Record<string, number>, k: string, n = 1): void {
  m[k] = (m[k] ?? 0) + n;
}

// ---- targets ------------------------------------------------------------------------------------

interface Bench {
  readonly backendPort: number;
  readonly backendPid: number;
  readonly proxyCpu: string;
  readonly loadCpu: string;
  readonly ctx: ProxyContext;
  readonly signer: ReturnType<typeof createRoomSigner>;
  readonly o: { duration: number; warmup: number; connections: number; storm: number; slowMs: number };
}

interface Started {
  readonly port: number;
  readonly pid: number | null;
  readonly adminPort: number | null;
  readonly logTail: (n: number) => string[];
  stop(): Promise<void>;
}

/** The parent of nginx's cache zone: tmpfs when the machine has /dev/shm. */
const TMPFS = existsSync('/dev/shm') ? '/dev/shm' : undefined;

async function startOne(b: Bench, target: Target): Promise<Started> {
  if (target === 'direct') return { port: b.backendPort, pid: null, adminPort: null, logTail: () => [], stop: async () => undefined };
  let run: Running;
  let adminPort: number | null = null;
  let zone: string | null = null;
  if (target === 'nginx') {
    zone = tempDir('roomgate-bench-nginx-cache-', TMPFS);
    try {
      run = await startTarget('nginx', { ...b.ctx, nginx: nginxMicroCache(zone) });
    } catch (err) {
      removeDir(zone);
      throw err;
    }
  } else if (target === 'roomgate') {
    adminPort = await freePort();
    run = await startTarget('roomgate', { ...b.ctx, roomgateConfig: { cache: ROOMGATE_CACHE, admin: { enabled: true, host: '127.0.0.1', port: adminPort } } });
  } else {
    run = await startTarget(target === 'nginx-nocache' ? 'nginx' : 'roomgate', b.ctx);
  }
  return {
    port: run.port!,
    pid: run.pid,
    adminPort,
    logTail: (n) => run.logTail(n),
    stop: async () => {
      await run.stop();
      if (zone) removeDir(zone);
    },
  };
}

// ---- hot set ------------------------------------------------------------------------------------

function cookieFor(b: Bench, room: string, seed: number): string {
  // A browser's cookies without a session cookie: roomgate's default bypassCookies ("sessionid")
  // sends a request with one past the cache, as a logged-in page should be.
  return `_ga=GA1.1.${1_000_000_000 + seed}.1733160000; room=${room}; roomgate_room=${b.signer.sign(room, Date.now())}; theme=dark; django_language=en`;
}

function pageRequest(b: Bench, port: number, i: number): Record<string, string> {
  return { Host: `127.0.0.1:${port}`, ...pageHeaders(cookieFor(b, `hot-${i % ROOMS}`, i)) };
}

interface HotRecord {
  round: number;
  target: Target;
  ok: boolean;
  error?: string;
  notes: string[];
  load1: number;
  reqPerS: number;
  p50: number;
  p99: number;
  cpuUsPerReq: number;
  cpuUsPerHit: number;
  /** Proxy CPU in the window / window length, in % of one core. */
  cpuPct: number;
  fetches: number;
  hitShare: number;
  errors: number;
  loadSide: number;
  proxyCoreBusy: number;
  outcomes?: Record<string, number>;
  probes: string[];
}

async function hotSet(b: Bench, target: Target, round: number): Promise<HotRecord> {
  const rec: HotRecord = { round, target, ok: false, notes: [], load1: loadAvg1(), reqPerS: NaN, p50: NaN, p99: NaN, cpuUsPerReq: NaN, cpuUsPerHit: NaN, cpuPct: NaN, fetches: NaN, hitShare: NaN, errors: NaN, loadSide: NaN, proxyCoreBusy: NaN, probes: [] };
  const dir = tempDir('roomgate-bench-cache-wrk-');
  let t: Started | null = null;
  try {
    t = await startOne(b, target);
    const port = t.port;
    const script = join(dir, 'pages.lua');
    const heads = Array.from({ length: PAGES }, (_, i) => requestHead(`/page/${i}`, pageRequest(b, port, i)));
    writeFileSync(script, wrkHeadsScript(heads, `bench/page-cache.ts: ${PAGES} pages in ${ROOMS} rooms, in turn`));
    const wrk = (seconds: number): Promise<WrkResult> => runWrk({ cpu: b.loadCpu, connections: b.o.connections, url: `http://127.0.0.1:${port}/page/0`, script, seconds });
    const warm = await wrk(b.o.warmup);
    const warmErrors = warm.connect + warm.read + warm.write + warm.timeout + warm.status;
    if (warmErrors > 0) rec.notes.push(`warm-up wrk run (cold caches): ${warm.status} non-2xx/3xx, ${warmErrors - warm.status} socket errors of ${warm.requests} requests`);
    const outcomes0 = t.adminPort ? await cacheOutcomes(t.adminPort) : null;
    const f0 = await backendFetches(b.backendPort);
    const s0 = sample(t.pid, [b.backendPid]);
    const r = await wrk(b.o.duration);
    const s1 = sample(t.pid, [b.backendPid]);
    const f1 = await backendFetches(b.backendPort);
    if (t.adminPort && outcomes0) rec.outcomes = diff(outcomes0, await cacheOutcomes(t.adminPort));
    // What a client (Node's HTTP parser) sees now: two requests for one page.
    for (let k = 0; k < 2; k++) {
      const a = await tryGet(port, '/page/7', pageRequest(b, port, 7));
      rec.probes.push(a instanceof Error ? `error: ${a.message}` : `${a.status} ${verdict(a.headers)}${a.headers.age !== undefined ? ` (Age ${a.headers.age})` : ''}${a.headers['set-cookie'] ? ' +Set-Cookie' : ''}`);
    }
    const w: Window = between(s0, s1);
    rec.fetches = f1.fetches - f0.fetches;
    const cpuMs = w.proxyCpuMs;
    rec.reqPerS = r.requests / (r.durationUs / 1e6);
    rec.p50 = r.p50 / 1000;
    rec.p99 = r.p99 / 1000;
    rec.hitShare = target === 'direct' ? 0 : Math.max(0, 1 - rec.fetches / r.requests);
    rec.cpuUsPerReq = t.pid ? (cpuMs * 1000) / r.requests : NaN;
    const hits = r.requests - rec.fetches;
    rec.cpuUsPerHit = t.pid && hits > r.requests / 2 ? (cpuMs * 1000) / hits : NaN;
    rec.cpuPct = t.pid ? (cpuMs / 10) / w.seconds : NaN;
    rec.errors = r.connect + r.read + r.write + r.timeout + r.status;
    rec.loadSide = w.loadShare;
    rec.proxyCoreBusy = w.busyShare[Number(b.proxyCpu)] ?? NaN;
    if (rec.errors > 0) rec.notes.push(`wrk: ${r.status} non-2xx/3xx, ${r.connect + r.read + r.write + r.timeout} socket errors`);
    rec.ok = true;
  } catch (err) {
    rec.error = (err as Error).message;
  } finally {
    if (t) {
      const tail = t.logTail(5).filter((l) => l.trim() !== '');
      if (tail.length > 0 && target !== 'direct') rec.notes.push(`last log lines: ${tail.join(' | ').slice(0, 600)}`);
      await t.stop();
    }
    removeDir(dir);
  }
  return rec;
}

// ---- stampede -----------------------------------------------------------------------------------

interface StormAnswer {
  readonly ms: number;
  readonly status: number;
  readonly verdict: string;
  readonly error?: string;
}

/** One request on an open connection: resolves (never rejects) at the answer's last byte, an error or `timeoutMs`. */
function oneRequest(s: Socket, head: Buffer, timeoutMs: number): Promise<StormAnswer> {
  return new Promise((done) => {
    let buf: Buffer = Buffer.alloc(0);
    let need = -1;
    let status = 0;
    let cs = '';
    let dupCl = false;
    let finished = false;
    const t0 = performance.now();
    const finish = (error?: string): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      s.removeAllListeners('data');
      done({ ms: performance.now() - t0, status, verdict: dupCl ? `${cs} [Content-Length twice]` : cs, ...(error ? { error } : {}) });
    };
    const timer = setTimeout(() => finish(`no answer within ${timeoutMs} ms`), timeoutMs);
    s.on('data', (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      if (need < 0) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const text = buf.toString('latin1', 0, end);
        status = Number(text.slice(9, 12));
        const cl = /\r\ncontent-length:[ \t]*(\d+)/i.exec(text);
        dupCl = (text.match(/\r\ncontent-length:/gi)?.length ?? 0) > 1;
        cs = (/\r\n(?:cache-status|x-cache-status):[ \t]*([^\r\n]*)/i.exec(text)?.[1] ?? '(none)').replace(/ttl=-?[\d.]+/g, 'ttl=N');
        if (!cl) return finish('answer without Content-Length');
        need = end + 4 + Number(cl[1]);
      }
      if (buf.length >= need) finish();
    });
    s.once('error', (e) => finish(e.message));
    s.once('close', () => finish('connection closed'));
    s.write(head);
  });
}

interface StormRecord {
  round: number;
  target: Target;
  ok: boolean;
  error?: string;
  notes: string[];
  load1: number;
  fetches: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
  verdicts: Record<string, number>;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

async function stampede(b: Bench, target: Target, round: number): Promise<StormRecord> {
  const rec: StormRecord = { round, target, ok: false, notes: [], load1: loadAvg1(), fetches: NaN, p50: NaN, p99: NaN, max: NaN, errors: NaN, verdicts: {} };
  const sockets: Socket[] = [];
  let t: Started | null = null;
  try {
    t = await startOne(b, target);
    const port = t.port;
    // Warm the proxy (a fresh process; its JIT) with a few hundred hot-set requests.
    const warmErrors: Error[] = [];
    for (let i = 0; i < 300; i++) {
      const a = await tryGet(port, `/page/${i % PAGES}`, pageRequest(b, port, i));
      if (a instanceof Error) warmErrors.push(a);
    }
    const note = errorNote('warm-up GETs with node:http (300, the first 100 cold)', warmErrors);
    if (note) rec.notes.push(note);
    const key = `storm-${round}-${target}-${randomBytes(4).toString('hex')}`;
    const head = Buffer.from(requestHead(`/slow/${key}`, { Host: `127.0.0.1:${port}`, ...pageHeaders(cookieFor(b, 'storm', 0)) }), 'latin1');
    // Every connection open first: the storm is of requests, not of connects.
    await new Promise<void>((resolve_, reject) => {
      let open = 0;
      const timer = setTimeout(() => reject(new Error(`stampede: ${open} of ${b.o.storm} connections open after 10 s`)), 10_000);
      for (let i = 0; i < b.o.storm; i++) {
        const s = connect({ host: '127.0.0.1', port });
        s.setNoDelay(true);
        sockets.push(s);
        s.once('error', (e) => {
          clearTimeout(timer);
          reject(e);
        });
        s.once('connect', () => {
          if (++open === b.o.storm) {
            clearTimeout(timer);
            resolve_();
          }
        });
      }
    });
    await sleep(200);
    for (const s of sockets) s.removeAllListeners('error');
    const answers = await Promise.all(sockets.map((s) => oneRequest(s, head, 15_000)));
    await sleep(300); // a late second fetch would show
    const f = await backendFetches(b.backendPort);
    rec.fetches = f.slow[key] ?? 0;
    const ms = answers.filter((a) => !a.error && a.status === 200).map((a) => a.ms).sort((x, y) => x - y);
    rec.p50 = percentile(ms, 50);
    rec.p99 = percentile(ms, 99);
    rec.max = ms[ms.length - 1] ?? NaN;
    rec.errors = answers.length - ms.length;
    for (const a of answers) countInto(rec.verdicts, a.error ? `error: ${a.error}` : a.status === 200 ? a.verdict : `${a.status} ${a.verdict}`);
    rec.ok = true;
  } catch (err) {
    rec.error = (err as Error).message;
  } finally {
    for (const s of sockets) s.destroy();
    if (t) await t.stop();
  }
  return rec;
}

// ---- report -------------------------------------------------------------------------------------

function table(header: string[], rows: string[][], align: string[]): string {
  return [`| ${header.join(' | ')} |`, `| ${align.join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** Counts: "median (min–max)" as whole numbers. */
function countCell(xs: readonly number[]): string {
  const f = xs.filter((x) => Number.isFinite(x));
  if (f.length === 0) return '—';
  const w = (x: number): string => Math.round(x).toLocaleString('en');
  const lo = Math.min(...f);
  const hi = Math.max(...f);
  return lo === hi ? w(lo) : `${w(median(f))} (${w(lo)}–${w(hi)})`;
}

function sumCounts(list: readonly (Record<string, number> | undefined)[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of list) for (const [k, v] of Object.entries(m ?? {})) countInto(out, k, v);
  return out;
}

function countsText(m: Record<string, number>): string {
  const e = Object.entries(m).sort((a, b) => b[1] - a[1]);
  return e.length === 0 ? '—' : e.map(([k, v]) => `\`${k}\` ×${v.toLocaleString('en')}`).join('; ');
}

interface Meta {
  startedAt: string;
  finishedAt: string;
  rounds: number;
  targets: readonly Target[];
  versions: Record<string, string>;
  load1Start: number;
  load1End: number;
  proxyCpu: string;
  loadCpu: string;
  o: Bench['o'];
  zone: string;
}

/** What else ran on the proxy's core in a hot-set window: its busy share minus the proxy's own CPU, in %. */
function otherPct(r: HotRecord): number {
  return Math.max(0, r.proxyCoreBusy * 100 - (r.target === 'direct' ? 0 : r.cpuPct));
}

function report(hot: readonly HotRecord[], storms: readonly StormRecord[], meta: Meta): string {
  const v = meta.versions;
  const out: string[] = [];
  const ok = <T extends { ok: boolean; target: Target }>(rs: readonly T[], t: Target): T[] => rs.filter((r) => r.ok && r.target === t);
  const c = <T extends { ok: boolean; target: Target }>(rs: readonly T[], t: Target, f: (r: T) => number): string => cell(ok(rs, t).map(f));
  const n = <T extends { ok: boolean; target: Target }>(rs: readonly T[], t: Target, f: (r: T) => number): string => countCell(ok(rs, t).map(f));
  const med = <T extends { ok: boolean; target: Target }>(rs: readonly T[], t: Target, f: (r: T) => number): number => median(ok(rs, t).map(f));
  const loads = [...hot, ...storms].map((r) => r.load1);
  out.push('# roomgate page cache against nginx\'s micro-cache', '');
  out.push(`${meta.startedAt} – ${meta.finishedAt}, \`npm run bench:cache\` (bench/page-cache.ts). ${meta.rounds} round(s), targets interleaved within each round. Cells: median (min–max) over rounds.`, '');
  out.push('**Conditions**', '');
  out.push(
    `- machine: ${v.cpu}, kernel ${v.kernel}; the proxy on CPU ${meta.proxyCpu}, the backend, wrk, the stampede client and the orchestrator on CPU ${meta.loadCpu} (taskset)`,
    `- versions: roomgate ${v.roomgate}, Node ${v.node}, nginx ${v.nginx}, ${v.wrk}`,
    `- load average (1 min): ${meta.load1Start.toFixed(2)} at the start, ${meta.load1End.toFixed(2)} at the end; ${fmt(Math.min(...loads))}–${fmt(Math.max(...loads))} at the start of the runs`,
    `- load side (backend + wrk + orchestrator) share of its core in the hot-set windows: ${hot.filter((r) => r.ok).map((r) => `${r.target} ${Math.round(r.loadSide * 100)} %`).filter((_, i, a) => a.length <= 10 || i < 10).join(', ')}${hot.filter((r) => r.ok).length > 10 ? ', ...' : ''}`,
    `- other processes on the proxy's core (its busy share minus the proxy's own CPU) in the hot-set windows: ${(() => {
      const busy = hot.filter((r) => r.ok && otherPct(r) > 10);
      return busy.length === 0 ? 'under 10 % in every run' : `**over 10 % in ${busy.length} of ${hot.length} runs** (${busy.map((r) => `round ${r.round} ${r.target} ${Math.round(otherPct(r))} %`).join(', ')}): those runs competed for the core, see "Every run"`;
    })()}`,
    `- roomgate: proxies.ts's config (signed room cookie, one backend, HTTP health checks, log warn) + \`cache: ${JSON.stringify(ROOMGATE_CACHE)}\` and its admin port (for /metrics); roomgate-nocache: the same without cache`,
    `- nginx: proxies.ts's config (1 worker, keepalive 64) + \`proxy_cache\` with \`proxy_cache_valid 200 5s\`, \`proxy_cache_use_stale updating error timeout http_500 http_502 http_503 http_504\`, \`proxy_cache_lock on\`, \`proxy_cache_background_update on\`, key \`$scheme$proxy_host$request_uri$cookie_room\`, zone in a temp directory under ${meta.zone}; nginx-nocache: the same without cache`,
    '',
  );

  out.push(`## Hot set: ${PAGES} pages of ${PAGE_BYTES / 1024} KB, \`Cache-Control: max-age=${MAX_AGE_S}\`, ${ROOMS} rooms`, '');
  out.push(
    `wrk -t1 -c${meta.o.connections}, ${meta.o.duration} s window after a ${meta.o.warmup} s warm-up run (untimed, fills the caches); keep-alive; each request carries its room cookie. ` +
      '"backend fetches" = requests the backend served in the window (refreshes of expired pages for the caches); ' +
      '"CPU µs/hit" = proxy CPU in the window / (requests − backend fetches). CPU is utime+stime of the proxy\'s process tree (nginx: master, worker, cache manager/loader).',
    '',
  );
  const hotRows = meta.targets.map((t) => [
    t,
    c(hot, t, (r) => r.reqPerS),
    c(hot, t, (r) => r.p50),
    c(hot, t, (r) => r.p99),
    t === 'direct' ? '—' : c(hot, t, (r) => r.cpuUsPerReq),
    c(hot, t, (r) => r.cpuUsPerHit),
    t === 'direct' ? '—' : c(hot, t, (r) => r.cpuPct),
    n(hot, t, (r) => r.fetches),
    t === 'direct' ? '—' : c(hot, t, (r) => r.hitShare * 100),
    n(hot, t, (r) => r.errors),
  ]);
  out.push(
    table(['target', 'req/s', 'p50 ms', 'p99 ms', 'proxy CPU µs/req', 'proxy CPU µs/hit', 'proxy CPU % of core', 'backend fetches', 'hit %', 'errors'], hotRows, ['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    '',
  );
  if (meta.targets.includes('roomgate') && meta.targets.includes('nginx')) {
    const ratio = (f: (r: HotRecord) => number): string => fmt(med(hot, 'roomgate', f) / med(hot, 'nginx', f));
    out.push(`**roomgate ÷ nginx** (medians): req/s ${ratio((r) => r.reqPerS)}x, CPU µs per hit ${ratio((r) => r.cpuUsPerHit)}x, p99 ${ratio((r) => r.p99)}x.`);
    if (meta.targets.includes('direct')) out.push(`Against direct (no proxy, no cache): nginx ${fmt(med(hot, 'nginx', (r) => r.reqPerS) / med(hot, 'direct', (r) => r.reqPerS))}x the req/s, roomgate ${fmt(med(hot, 'roomgate', (r) => r.reqPerS) / med(hot, 'direct', (r) => r.reqPerS))}x.`);
    if (meta.targets.includes('roomgate-nocache')) out.push(`Cache against no cache, CPU per request: roomgate ${fmt(med(hot, 'roomgate', (r) => r.cpuUsPerReq) / med(hot, 'roomgate-nocache', (r) => r.cpuUsPerReq))}x, nginx ${fmt(med(hot, 'nginx', (r) => r.cpuUsPerReq) / med(hot, 'nginx-nocache', (r) => r.cpuUsPerReq))}x.`);
    out.push('');
  }

  out.push(`## Stampede: one cold URL, ${meta.o.storm} concurrent requests, the backend answers it after ${meta.o.slowMs} ms`, '');
  out.push(
    `${meta.o.storm} keep-alive connections opened first, then one request on each, written in one go, in one room (a new URL each run). ` +
      'Latency: from a request\'s write to the last byte of its answer. "backend fetches": requests for that URL the backend saw (1 when the cache collapses them).',
    '',
  );
  const stormTargets = meta.targets.filter((t) => STORM_TARGETS.includes(t));
  out.push(
    table(
      ['target', 'backend fetches', 'p50 ms', 'p99 ms', 'max ms', 'errors'],
      stormTargets.map((t) => [t, n(storms, t, (r) => r.fetches), c(storms, t, (r) => r.p50), c(storms, t, (r) => r.p99), c(storms, t, (r) => r.max), n(storms, t, (r) => r.errors)]),
      ['---', '---:', '---:', '---:', '---:', '---:'],
    ),
    '',
  );
  out.push('Cache verdicts of the stampede\'s answers, all rounds (roomgate: `Cache-Status`, nginx: `X-Cache-Status`; ttl blanked):', '');
  for (const t of stormTargets.filter((x) => x !== 'direct')) out.push(`- ${t}: ${countsText(sumCounts(ok(storms, t).map((r) => r.verdicts)))}`);
  out.push('');

  if (meta.targets.includes('roomgate')) {
    out.push('## roomgate\'s cache outcomes in the hot-set windows', '');
    out.push('`roomgate_cache_requests_total{outcome}` from /metrics, difference over each window:', '');
    for (const r of ok(hot, 'roomgate')) out.push(`- round ${r.round}: ${countsText(r.outcomes ?? {})}`);
    out.push('', 'Two requests for one page after each window (status, verdict, Age):', '');
    for (const t of meta.targets.filter((x) => x === 'roomgate' || x === 'nginx')) out.push(`- ${t}: ${[...new Set(ok(hot, t).flatMap((r) => r.probes))].map((p) => `\`${p}\``).join(', ')}`);
    out.push('');
  }

  const failures = [...hot, ...storms].filter((r) => !r.ok || r.notes.length > 0);
  if (failures.length > 0) {
    out.push('## Failures and notes', '');
    for (const r of failures) out.push(`- ${'reqPerS' in r ? 'hot set' : 'stampede'}, round ${r.round}, ${r.target}: ${r.ok ? '' : `FAILED: ${(r.error ?? '').replace(/\s*\n\s*/g, ' | ').slice(0, 800)}. `}${r.notes.join('; ')}`);
    out.push('');
  }

  out.push('## Every run', '');
  out.push(
    table(
      ['round', 'target', 'load 1m', 'req/s', 'p99 ms', 'CPU µs/req', 'CPU µs/hit', 'proxy core busy %', 'other on proxy core %', 'backend fetches', 'errors', 'load side %'],
      hot.map((r) => [String(r.round), r.target, r.load1.toFixed(2), r.ok ? fmt(r.reqPerS) : 'FAILED', fmt(r.p99), fmt(r.cpuUsPerReq), fmt(r.cpuUsPerHit), fmt(r.proxyCoreBusy * 100), fmt(otherPct(r)), countCell([r.fetches]), countCell([r.errors]), fmt(r.loadSide * 100)]),
      ['---:', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:'],
    ),
    '',
  );
  out.push(
    table(
      ['round', 'target', 'load 1m', 'backend fetches', 'p50 ms', 'p99 ms', 'max ms', 'errors'],
      storms.map((r) => [String(r.round), r.target, r.load1.toFixed(2), r.ok ? countCell([r.fetches]) : 'FAILED', fmt(r.p50), fmt(r.p99), fmt(r.max), countCell([r.errors])]),
      ['---:', '---', '---:', '---:', '---:', '---:', '---:', '---:'],
    ),
    '',
  );
  return out.join('\n');
}

// ---- main ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    strict: true,
    options: {
      serve: { type: 'string' },
      port: { type: 'string', default: '0' },
      'slow-ms': { type: 'string', default: '200' },
      rounds: { type: 'string', default: '3' },
      duration: { type: 'string', default: '6' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: '64' },
      storm: { type: 'string', default: '500' },
      targets: { type: 'string', default: ALL_TARGETS.join(',') },
      'proxy-cpu': { type: 'string', default: '0' },
      'load-cpu': { type: 'string', default: '1' },
      out: { type: 'string', default: join(ROOT, 'bench/results') },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const slowMs = Number(values['slow-ms']);
  if (values.serve === 'backend') return serveBackend(Number(values.port), slowMs);
  if (values.help) {
    say(`usage: npm run bench:cache -- [--rounds 3] [--duration 6] [--warmup 2] [--connections 64] [--storm 500] [--slow-ms 200]
         [--targets ${ALL_TARGETS.join(',')}] [--proxy-cpu 0] [--load-cpu 1] [--out bench/results]`);
    return;
  }
  const targets = values.targets.split(',').filter(Boolean) as Target[];
  const bad = targets.filter((t) => !ALL_TARGETS.includes(t));
  if (bad.length > 0) throw new Error(`unknown targets: ${bad.join(', ')} (known: ${ALL_TARGETS.join(', ')})`);
  const rounds = Number(values.rounds);
  const o = { duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections), storm: Number(values.storm), slowMs };
  const proxyCpu = values['proxy-cpu'];
  const loadCpu = values['load-cpu'];
  ensureTools(['taskset', 'wrk', ...(targets.some((t) => t.startsWith('nginx')) ? ['nginx'] : [])], log);
  // This process (timers, the stampede's client, /proc reads) shares the load core, as in the suite.
  spawnSync('taskset', ['-a', '-p', '-c', loadCpu, String(process.pid)], { stdio: 'ignore' });

  const startedAt = new Date().toISOString();
  const load1Start = loadAvg1();
  log(`bench:cache: ${rounds} round(s) x [${targets.join(', ')}]; proxy on CPU ${proxyCpu}, backend and load on CPU ${loadCpu}; load average ${load1Start}`);
  if (load1Start > 1) log(`bench:cache: the load average is ${load1Start}: figures will be noisy (something else is running)`);

  const backend: Proc = startProc('backend', process.execPath, [import.meta.filename, '--serve', 'backend', '--port', '0', '--slow-ms', String(slowMs)], { cpu: loadCpu, stdin: true });
  const line = await waitLine(backend, 'backend listening', (l) => l.includes('"listening"'), 10_000);
  const backendPort = (JSON.parse(line) as { port: number }).port;
  const secret = randomBytes(24).toString('hex');
  const b: Bench = {
    backendPort,
    backendPid: backend.pid,
    proxyCpu,
    loadCpu,
    o,
    signer: createRoomSigner({ secrets: [secret], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 }),
    ctx: { backends: [{ id: 'b1', port: backendPort }], cpu: proxyCpu, secret, nofile: 4096 },
  };
  const hot: HotRecord[] = [];
  const storms: StormRecord[] = [];
  const f = (x: number, d = 1): string => (Number.isFinite(x) ? x.toFixed(d) : '—');
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const t of targets) {
        const r = await hotSet(b, t, round);
        hot.push(r);
        log(`[round ${round}] hot set  ${t.padEnd(16)} ${r.ok ? `${f(r.reqPerS, 0)} req/s, p99 ${f(r.p99, 2)} ms, CPU ${f(r.cpuUsPerHit, 2)} µs/hit, ${r.fetches} backend fetches, errors ${r.errors}` : `FAILED: ${r.error?.split('\n')[0]}`} (load ${r.load1})`);
      }
      for (const t of targets.filter((x) => STORM_TARGETS.includes(x))) {
        const r = await stampede(b, t, round);
        storms.push(r);
        log(`[round ${round}] stampede ${t.padEnd(16)} ${r.ok ? `${r.fetches} backend fetches, p50 ${f(r.p50)} ms, p99 ${f(r.p99)} ms, errors ${r.errors}; ${countsText(r.verdicts)}` : `FAILED: ${r.error?.split('\n')[0]}`}`);
      }
    }
  } finally {
    await stopProc(backend);
  }
  const meta: Meta = { startedAt, finishedAt: new Date().toISOString(), rounds, targets, versions: versions(), load1Start, load1End: loadAvg1(), proxyCpu, loadCpu, o, zone: TMPFS ? `${TMPFS} (tmpfs)` : 'the OS temp directory' };
  const md = report(hot, storms, meta);
  const outDir = resolve(values.out);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'page-cache.md'), md);
  say(`\n${md}`);
  log(`wrote ${join(outDir, 'page-cache.md')}`);
  if ([...hot, ...storms].some((r) => !r.ok)) process.exitCode = 1;
}

let stopping = false;
const onSignal = (sig: NodeJS.Signals): void => {
  if (stopping) process.exit(130);
  stopping = true;
  log(`bench:cache: ${sig}: stopping everything it started...`);
  void cleanupAll().finally(() => process.exit(130));
};
const serving = process.argv.includes('--serve');
if (!serving) {
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
try {
  await main();
} catch (err) {
  log(`bench:cache failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  if (!serving) await cleanupAll();
}
