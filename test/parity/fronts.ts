// The fronts of the parity suite and the gateways behind them, all in front of one byte-logging
// backend (test/conformance/backend.ts: every request parsed by the strict referee, recorded with
// its fields as sent and its body bytes, answered with an X-Parity-Backend tag; a WebSocket
// handshake gets a real 101 and the frame "hi").
//  - h1-lean: plain HTTP/1.1, proxy.leanPages on (the byte-level front takes simple GET/HEAD);
//  - h1-node: plain HTTP/1.1, proxy.leanPages off (node:http for every request);
//  - h1-tls: HTTP/1.1 over TLS (ALPN http/1.1), leanPages on;
//  - h2: HTTP/2 over TLS (H2Front), the same gateway as h1-tls;
//  - h2-connect: RFC 8441 extended CONNECT WebSockets on that h2 gateway (upgrade rows only);
//  - worker: `roomgate start --workers 2` (dist/src/main.js), plain HTTP/1.1, leanPages on. Two,
//    not one: `--workers 1` is the single-process path (src/cli/commands/start-run.ts starts no
//    primary), so only N >= 2 puts a request through a cluster worker (src/cluster/worker.ts); on
//    Linux (the default balance, 'kernel') the kernel hands each connection to either worker.
// Each gateway has the same settings otherwise (SUITE_CONFIG); three run in this process, the
// worker's is a real process tree (the primary and its two workers). The whole set runs three
// times: as configured, with proxy.rewriteLocation on, and with room.pinInject on (rows' `gateway`).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Gateway } from '../../src/gateway.js';
import { accept101, startRawBackend, type BackendRequest, type RawBackend } from '../conformance/backend.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, startGateway, stopAll } from '../support/processes.js';
import { startRedis, stopAllRedis } from '../support/redis.js';
import { RedisSharedDataStore } from '../../src/shared-data/redis-store.js';
import { OWN, PARITY_SECRET, rows, type Front, type Row } from './cases.js';
import { h1Exchange, h2Exchange, type Answer } from './clients.js';

/** Whether a front runs a row, or why not. */
export type Applies = { readonly run: true } | { readonly run: false; readonly reason: string };

const UPGRADES_ON_CONNECT = 'an h2 WebSocket is an extended CONNECT: upgrade rows run on front h2-connect';
/** roomgate's hello call to the backend (handoff.path's default), answered as a version-2 backend that takes held messages. */
export const PARITY_HELLO = '/_roomgate/handoff/hello';
const HELLO_ANSWER = '{"version":2,"messages":true}';
const ONLY_UPGRADES = 'front h2-connect carries WebSocket handshakes only: plain requests run on front h2';

export function applies(row: Row, front: Front): Applies {
  const own = row.notOn?.[front];
  if (own !== undefined) return { run: false, reason: own };
  if (front === 'h2' && row.upgrade === true) return { run: false, reason: UPGRADES_ON_CONNECT };
  if (front === 'h2-connect' && row.upgrade !== true) return { run: false, reason: ONLY_UPGRADES };
  return { run: true };
}

/** The scheme the backend must be told (X-Forwarded-Proto) for a front. */
export function schemeOf(front: Front): 'http' | 'https' {
  return front === 'h1-tls' || front === 'h2' || front === 'h2-connect' ? 'https' : 'http';
}

const HANDSHAKE_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** The HTTP/1.1 bytes of a row. */
export function h1Bytes(row: Row): Buffer {
  if (row.raw !== undefined) return Buffer.from(row.raw, 'latin1');
  const lines = [`${row.method} ${row.target} HTTP/1.1`];
  if (row.host !== null) lines.push(`Host: ${row.host ?? 'a.example'}`);
  for (const [n, v] of row.headers ?? []) lines.push(`${n}: ${v}`);
  if (row.upgrade) lines.push('Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${HANDSHAKE_KEY}`);
  const body = row.body ?? '';
  const framing = row.framing ?? (row.body === undefined ? 'none' : 'length');
  let tail = '';
  if (framing === 'length') lines.push(`Content-Length: ${Buffer.byteLength(body, 'latin1')}`);
  if (framing === 'chunked') {
    lines.push('Transfer-Encoding: chunked');
    tail = `${body.length > 0 ? `${body.length.toString(16)}\r\n${body}\r\n` : ''}0\r\n\r\n`;
  } else tail = body;
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${tail}`, 'latin1');
}

/** The h2 request of a row: pseudo-headers, then the row's fields lower-cased, the body as DATA. */
export function h2Request(row: Row): { headers: [string, string][]; body: Buffer | null; connect: boolean } {
  const authority = row.host ?? 'a.example';
  const headers: [string, string][] = [];
  if (row.upgrade) headers.push([':method', 'CONNECT'], [':protocol', 'websocket'], [':scheme', 'https'], [':authority', authority], [':path', row.target], ['sec-websocket-version', '13']);
  else if (row.method === 'CONNECT') headers.push([':method', 'CONNECT'], [':authority', row.target]);
  else headers.push([':method', row.method], [':scheme', 'https'], [':authority', authority], [':path', row.target]);
  for (const [n, v] of row.h2Headers ?? row.headers ?? []) headers.push([n.toLowerCase(), v]);
  const framing = row.framing ?? (row.body === undefined ? 'none' : 'length');
  const body = row.body === undefined && framing !== 'chunked' ? null : Buffer.from(row.body ?? '', 'latin1');
  if (framing === 'length' && body !== null) headers.push(['content-length', String(body.length)]);
  return { headers, body: body !== null && body.length === 0 && framing !== 'length' ? null : body, connect: row.upgrade === true };
}

/** The rows' own backend answers (Row.answer) by the target the backend gets; each target once. */
function scriptedAnswers(): Map<string, { bytes: string }> {
  const out = new Map<string, { bytes: string }>();
  for (const row of rows) {
    if (row.answer === undefined) continue;
    const target = (row.backend === 'nothing' ? undefined : row.backend.target) ?? row.target;
    if (out.has(target)) throw new Error(`parity rows: two scripted answers for ${target}`);
    out.set(target, { bytes: row.answer });
  }
  return out;
}

/** Settings every gateway of the suite shares (the worker's as YAML, the others' as JSON). */
function suiteConfig(staticDir: string, redisUrl: string): Record<string, unknown> {
  return {
    // A TCP check only: the byte log holds the clients' requests and nothing else.
    health: { path: null },
    // maxBodyBytes: the body rule's 413 at a size the table can send on every front.
    proxy: { websocketPaths: ['/ws/live/'], maxBodyBytes: 100_000 },
    cookie: { secrets: [PARITY_SECRET] },
    // Signed calls, as every front of the worker process has them (test defaults): its WebSockets are followed (X-Roomgate-Socket).
    backendCalls: { secrets: [CALL_SECRET] },
    static: { mounts: [{ prefix: '/static/', dir: staticDir }] },
    listen: { host: '127.0.0.1', port: 0, headersTimeoutMs: 3_000, requestTimeoutMs: 5_000 },
    // One Redis for every gateway, the workers included: its channel carries the handoff rows' hold.
    // commandTimeoutMs: the 500 ms default let a loaded machine (a clean-clone CI run: 4 workers on 2
    // cores) stall one call past it, and the API rows of that gateway's fronts answered 503
    // store_unavailable where the others answered 200. The table compares fronts, not Redis
    // deadlines; 3 s stays inside the clients' 4 s.
    redis: { url: redisUrl, keyPrefix: PARITY_PREFIX, commandTimeoutMs: 3_000 },
    // A room in handoff waits 5 x this (the hold's five steps) before its 503: inside the clients' 4 s.
    handoff: { timeoutMs: HANDOFF_STEP_MS },
  };
}

const PARITY_PREFIX = 'parity:';
const HANDOFF_STEP_MS = 500;

/** X-Parity-Location's value (OWN filled in) as Location and Refresh fields, or '' when the request has none. */
function redirectFields(req: BackendRequest, own: string): string {
  const v = req.headers.find(([n]) => n.toLowerCase() === 'x-parity-location')?.[1];
  if (v === undefined) return '';
  const url = v.replaceAll(OWN, own);
  return `Location: ${url}\r\nRefresh: 0; url=${url}\r\n`;
}

export interface Suite {
  readonly backend: RawBackend;
  /** Sends a row through a front from `address`; what the client got. */
  send(front: Front, row: Row, address: string): Promise<Answer>;
  /**
   * Runs `run` while `room` is in a version-2 handoff on every gateway of the suite: a `hold` from a
   * runner that never sends the end, published again every step so the room's count of handoffs
   * never falls to zero while `run` lasts (each gateway ends an unheard one after six steps).
   * `run` starts once every gateway answered the first hold (`held`): none can miss it.
   */
  inHandoff<T>(room: string, run: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface SuiteOptions {
  /** Start the worker front too (a real process tree): default true. */
  readonly worker?: boolean;
}

export async function startSuite(o: SuiteOptions = {}): Promise<Suite> {
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-parity-'));
  const gateways: Gateway[] = [];
  const closers: (() => Promise<void>)[] = [];
  let backend: RawBackend | null = null;
  try {
    writeFileSync(join(dir, 'hello.txt'), 'hello from a static mount\n');
    const ca = makeCa(dir, 'ca');
    const cert = makeSigned(dir, 'a', ca, ['a.example', '127.0.0.1']);
    const scripted = scriptedAnswers();
    let own = '';
    backend = await startRawBackend({
      // A row's own answer (Row.answer) when it has one; else 200 (201 with the Location a row asks for).
      answer: (req: BackendRequest) => {
        // roomgate's hello (signed calls): a backend that takes held messages, so its WebSockets are followed.
        if (req.method === 'POST' && req.target === PARITY_HELLO) return { bytes: `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${HELLO_ANSWER.length}\r\n\r\n${HELLO_ANSWER}` };
        const rowAnswer = scripted.get(req.target);
        if (rowAnswer !== undefined) return rowAnswer;
        const location = redirectFields(req, own);
        const body = `${req.method} ${req.target}\n`;
        const len = Buffer.byteLength(body, 'latin1');
        const status = location === '' ? '200 OK' : '201 Created';
        return { bytes: `HTTP/1.1 ${status}\r\nX-Parity-Backend: b1\r\n${location}Content-Type: text/plain\r\nContent-Length: ${len}\r\n\r\n${req.method === 'HEAD' ? '' : body}` };
      },
      upgrade: (req: BackendRequest) => {
        const rowAnswer = scripted.get(req.target);
        if (rowAnswer !== undefined) return rowAnswer;
        const location = redirectFields(req, own);
        return location === '' ? accept101(req) : { bytes: `HTTP/1.1 302 Found\r\nX-Parity-Backend: b1\r\n${location}Content-Length: 0\r\n\r\n` };
      },
    });
    own = backend.url.slice('http://'.length);
    const redis = await startRedis();
    // The handoffs' runner: a gateway of its own on the suite's channel.
    const runner = new RedisSharedDataStore({ url: redis.url, keyPrefix: PARITY_PREFIX, gatewayId: 'parity-runner', presenceTtlMs: 5_000, commandTimeoutMs: 2_000 });
    closers.push(() => runner.close());
    await runner.connect({ timeoutMs: 5_000 });
    // The default set, and the same fronts with proxy.rewriteLocation on (rows with `gateway`).
    const start = async (extra: Record<string, unknown>, top: Record<string, unknown> = {}): Promise<Record<Front, number | null>> => {
      const base = { ...suiteConfig(dir, redis.url), ...top };
      const proxy = { ...(base.proxy as object), ...extra };
      const url = (backend as RawBackend).url;
      const [lean, node, tls] = await Promise.all([
        startInProcessGateway(dir, url, { ...base, proxy: { ...proxy, leanPages: true } }),
        startInProcessGateway(dir, url, { ...base, proxy: { ...proxy, leanPages: false } }),
        startInProcessGateway(dir, url, { ...base, proxy: { ...proxy, leanPages: true }, tls: { certs: [{ cert: cert.cert, key: cert.key }] }, http2: { enabled: true, websockets: true } }),
      ]);
      gateways.push(lean, node, tls);
      let workerPort: number | null = null;
      if (o.worker !== false) {
        const primaryListening = (l: string): boolean => l.includes('"msg":"listening"') && l.includes('"role":"primary"');
        const gw = await startGateway({ config: { ...base, proxy, backends: [{ id: 'b1', url }] }, args: ['--workers', '2'], readyLine: primaryListening, env: { ROOMGATE_LOG_LEVEL: 'info', ROOMGATE_COOKIE_SECRETS: PARITY_SECRET } });
        workerPort = gw.port;
      }
      return { 'h1-lean': lean.port, 'h1-node': node.port, 'h1-tls': tls.port, h2: tls.port, 'h2-connect': tls.port, worker: workerPort };
    };
    // The sets of fronts: as configured, proxy.rewriteLocation on, room.pinInject on.
    const sets = [start({}), start({ rewriteLocation: true }), start({}, { room: { pinInject: true } })] as const;
    const [plain, rewriting, injecting] = await Promise.all(sets);
    const be = backend;
    return {
      backend: be,
      send(front, row, address) {
        const port = (row.gateway === 'rewrite-location' ? rewriting : row.gateway === 'pin-inject' ? injecting : plain)[front];
        if (port === null) throw new Error(`front ${front} is not started`);
        if (front === 'h2' || front === 'h2-connect') return h2Exchange(port, h2Request(row), address);
        return h1Exchange({ port, tls: front === 'h1-tls' }, h1Bytes(row), row.method, address);
      },
      // In-process gateways, plus the worker tree's two workers (each a gateway on the channel) per set.
      inHandoff: (room, run) => inHandoff(runner, room, gateways.length + (o.worker === false ? 0 : 2 * sets.length), run),
      async close() {
        await Promise.all(gateways.map((g) => g.stop()));
        await stopAll();
        await Promise.all(closers.map((c) => c()));
        await stopAllRedis();
        await be.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all(gateways.map((g) => g.stop()));
    await stopAll();
    await Promise.all(closers.map((c) => c()));
    await stopAllRedis();
    await backend?.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}


let handoffs = 0;

/** Suite.inHandoff: `gateways` is how many must answer the first hold before `run` starts. */
async function inHandoff<T>(runner: RedisSharedDataStore, room: string, gateways: number, run: () => Promise<T>): Promise<T> {
  const hold = (): { id: string; sent: Promise<void> } => {
    const id = `parity-handoff-${++handoffs}`;
    return { id, sent: runner.publishHandoff({ kind: 'hold', id, room, from: 'b1', to: 'b2', gateway: 'parity-runner' }) };
  };
  const first = hold();
  // Counted, not matched by name: gateways in one process may share a name.
  let heard = 0;
  let answered = (): void => undefined;
  const all = new Promise<void>((r) => (answered = r));
  const stop = runner.subscribe((ev) => {
    if (ev.type !== 'handoff' || ev.signal.kind !== 'held' || ev.signal.id !== first.id) return;
    if (++heard >= gateways) answered();
  });
  const again = setInterval(() => void hold().sent.catch(() => undefined), HANDOFF_STEP_MS);
  try {
    await first.sent;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${heard} of ${gateways} gateways answered the hold of ${room}`)), 5_000)));
    await Promise.race([all, late]).finally(() => clearTimeout(timer));
    return await run();
  } finally {
    clearInterval(again);
    stop();
  }
}
