// The page cache (cache.* config, Cache-Status, the cache admin routes and metrics) against real
// gateways and real backends, all in this process (no test needs a gateway's process: a process
// each would cost its module loading): node:http servers on port 0, reached over TCP, that count every request they get and script each path's answer. The backend is the
// witness: "served from the cache" means the backend did not see the request. Covered, on both
// page paths (the byte-level one and node:http's): request collapsing of a cold page, grace
// (stale-while-revalidate with one background refresh, stale-if-error with every backend gone and
// by the answer's own directive, 503 after grace), what is never stored or never served to another
// client (Set-Cookie, private, no-store, 5xx, Authorization, session cookies, bypass paths, POST),
// which cookies a fill carries, the room as part of the key and the room cookie on cached answers,
// HEAD and Range from a stored GET, Vary, purge and GET /cache on the admin port, the cache
// metrics, answers larger than cache.maxObjectBytes, and the framing of answers the cache writes
// (raw bytes judged by the strict referee of test/conformance). The contract: the cache section of
// docs/configuration.md and Cache-Status per RFC 9211.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { buildRing } from '../../src/placement/ring.js';
import { fieldValues, parseResponse, type ParsedResponse } from '../conformance/strict-parser.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, httpRequest, metricValue, waitFor, withTimeout, type RawAnswer } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const sleepUntil = (t: number): Promise<void> => sleep(Math.max(0, t - Date.now()));

const dir = scopeTempDir('roomgate-page-cache-');
const running = new Set<Gateway>();
afterAll(async () => {
  await Promise.all([...running].map((g) => g.stop()));
});

/** What the tests reach of a gateway: its two ports, and its stop. */
interface TestGateway {
  readonly port: number;
  readonly adminPort: number;
  stop(): Promise<void>;
}

/**
 * A gateway in this process with the harness's defaults (startGateway's: bounded loads off, calls
 * signed, the admin port on), `config` merged over them (top-level keys). Stopped by `stop`, or after the file.
 */
async function startGateway(o: { backends: readonly string[]; config: Record<string, unknown> & { admin?: Record<string, unknown> } }): Promise<TestGateway> {
  const { admin, ...config } = o.config;
  const g: Gateway = await startInProcessGateway(dir, '', {
    backends: o.backends.map((b) => ({ id: b.slice(0, b.indexOf('=')), url: b.slice(b.indexOf('=') + 1) })),
    placement: { boundedLoadFactor: 0 },
    backendCalls: { secrets: [CALL_SECRET] },
    admin: { enabled: true, host: '127.0.0.1', port: 0, ...admin },
    ...config,
  });
  running.add(g);
  return {
    port: g.port,
    adminPort: g.adminPort!,
    stop: async () => {
      running.delete(g);
      await g.stop();
    },
  };
}

// ------------------------------------------------------------------------------------------------
// The backend: every request is recorded (method, target, headers, body); each path (without the
// query) may have a script for its answer, else the default: 200, max-age=60, and a body that names
// the request and how many requests for that target the backend has had ("GET /c/x #2"), so a body
// tells a cached answer from a fresh one.

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

interface Reply {
  status?: number;
  headers?: Record<string, string | string[]>;
  body?: string;
  delayMs?: number;
  /** Sent once this settles: a test holds an answer until it has seen what happens meanwhile. */
  hold?: Promise<void>;
  /**
   * With a Content-Length field (the default is chunked: node:http frames a body so after an
   * explicit writeHead). The behaviour tests do not depend on framing; the wire tests pin it.
   */
  contentLength?: boolean;
  /** Chunked: sent in this many writes. */
  chunks?: number;
}

type Script = (req: Seen, n: number) => Reply;

const defaultReply: Script = (req, n) => ({ headers: { 'cache-control': 'max-age=60' }, body: `${req.method} ${req.url} #${n}` });

class Backend {
  readonly seen: Seen[] = [];
  port = 0;
  private readonly scripts = new Map<string, Script>();
  private readonly finished = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private server: http.Server | null = null;

  async start(): Promise<this> {
    const server = http.createServer((req, res) => this.handle(req, res));
    server.keepAliveTimeout = 5_000;
    this.server = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Scripts the answers for a path (the target without its query). */
  script(path: string, s: Script): void {
    this.scripts.set(path, s);
  }

  /** Requests the backend got for this exact target (path?query). */
  of(url: string): Seen[] {
    return this.seen.filter((s) => s.url === url);
  }

  count(url: string): number {
    return this.of(url).length;
  }

  /** Answers to url the backend has finished sending. */
  answered(url: string): number {
    return this.finished.get(url) ?? 0;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '';
      // roomgate's own hello at start (its calls are signed): not a page fetch; no hooks here.
      if (req.method === 'POST' && url === '/_roomgate/handoff/hello') {
        res.writeHead(404).end();
        return;
      }
      const seen: Seen = { method: req.method ?? '', url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      this.seen.push(seen);
      const n = this.count(url);
      const script = this.scripts.get(url.split('?')[0] ?? url) ?? defaultReply;
      const reply = script(seen, n);
      const send = (): void => {
        if (res.destroyed) return;
        res.on('finish', () => this.finished.set(url, (this.finished.get(url) ?? 0) + 1));
        const body = Buffer.from(reply.body ?? '');
        const parts = reply.contentLength ? 1 : (reply.chunks ?? 1);
        res.writeHead(reply.status ?? 200, reply.contentLength ? { ...reply.headers, 'content-length': String(body.length) } : (reply.headers ?? {}));
        if (req.method === 'HEAD') return void res.end();
        if (parts <= 1) return void res.end(body);
        const size = Math.ceil(body.length / parts);
        for (let i = 0; i < body.length; i += size) res.write(body.subarray(i, i + size));
        res.end();
      };
      if (reply.hold) void reply.hold.then(send);
      else if (reply.delayMs) {
        const t = setTimeout(() => {
          this.timers.delete(t);
          send();
        }, reply.delayMs);
        this.timers.add(t);
      } else send();
    });
  }

  /** Stops listening and closes every connection (the gateway's pooled ones too). */
  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const server = this.server;
    if (!server) return;
    this.server = null;
    const closed = new Promise<void>((r) => server.close(() => r()));
    server.closeAllConnections();
    await closed;
  }
}

// ------------------------------------------------------------------------------------------------
// The client side: one request per connection (httpRequest, bounded), Cache-Status read as RFC 9211
// parameters.

async function get(gw: TestGateway, path: string, headers: Record<string, string> = {}, o: { method?: string; body?: string; timeoutMs?: number } = {}): Promise<RawAnswer> {
  return httpRequest(gw.port, path, { headers: { host: 'app.example', ...headers }, method: o.method, body: o.body, timeoutMs: o.timeoutMs });
}

interface CacheStatus {
  readonly raw: string;
  /** A bare parameter (hit, stored, collapsed). */
  has(flag: string): boolean;
  /** A key=value parameter's value. */
  param(name: string): string | undefined;
}

function cs(r: RawAnswer): CacheStatus {
  const v = r.headers['cache-status'];
  const raw = Array.isArray(v) ? v.join(', ') : (v ?? '');
  const parts = raw.split(';').map((p) => p.trim());
  return {
    raw,
    has: (flag) => parts.slice(1).includes(flag),
    param: (name) => {
      const p = parts.slice(1).find((x) => x.startsWith(`${name}=`));
      return p === undefined ? undefined : p.slice(name.length + 1);
    },
  };
}

/** What a failed expectation prints about an answer. */
const show = (r: RawAnswer): string => `${r.status} Cache-Status: ${JSON.stringify(r.headers['cache-status'])} Age: ${JSON.stringify(r.headers.age)} body: ${JSON.stringify(r.body.slice(0, 120))}`;

function expectHit(r: RawAnswer, body?: string): void {
  const s = cs(r);
  expect(s.raw, show(r)).toMatch(/^roomgate;/);
  expect(s.has('hit'), show(r)).toBe(true);
  expect(s.param('fwd'), show(r)).toBeUndefined();
  expect(s.param('detail'), show(r)).toBeUndefined();
  expect(Number(s.param('ttl')), show(r)).toBeGreaterThanOrEqual(0);
  expect(r.headers.age, show(r)).toMatch(/^\d+$/);
  if (body !== undefined) expect(r.body, show(r)).toBe(body);
}

/** A miss the gateway fetched and stored. */
function expectStoredMiss(r: RawAnswer, fwd = 'uri-miss'): void {
  const s = cs(r);
  expect(s.raw, show(r)).toMatch(/^roomgate;/);
  expect(s.param('fwd'), show(r)).toBe(fwd);
  expect(s.param('fwd-status'), show(r)).toBe(String(r.status));
  expect(s.has('stored'), show(r)).toBe(true);
  expect(s.has('hit'), show(r)).toBe(false);
}

/** An answer fetched for this client and not stored. */
function expectNotStored(r: RawAnswer): void {
  const s = cs(r);
  expect(s.raw, show(r)).toMatch(/^roomgate;/);
  expect(s.has('stored'), show(r)).toBe(false);
  expect(s.has('hit'), show(r)).toBe(false);
}

function expectBypass(r: RawAnswer, detail: string): void {
  const s = cs(r);
  expect(s.raw, show(r)).toMatch(/^roomgate;/);
  expect(s.param('fwd'), show(r)).toBe('bypass');
  expect(s.param('detail'), show(r)).toBe(detail);
  expect(s.has('stored'), show(r)).toBe(false);
}

/** The roomgate_room Set-Cookie lines of an answer. */
function roomCookies(r: RawAnswer): string[] {
  return (r.headers['set-cookie'] ?? []).filter((l) => l.startsWith('roomgate_room='));
}

/** The value of the room cookie an answer sets (for sending it back as a Cookie). */
function roomCookieValue(r: RawAnswer): string {
  const [line] = roomCookies(r);
  if (line === undefined) throw new Error(`no room cookie set: ${show(r)} Set-Cookie: ${JSON.stringify(r.headers['set-cookie'])}`);
  return line.slice('roomgate_room='.length).split(';')[0]!;
}

async function adminCall(gw: TestGateway, method: string, path: string, o: { token?: string; body?: unknown } = {}): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const headers: Record<string, string> = {};
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
    method,
    headers,
    body: o.body === undefined ? undefined : JSON.stringify(o.body),
    signal: AbortSignal.timeout(5_000),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.status, json, text };
}

/** POST /cache/purge with the admin token (null: without an Authorization header). */
const purge = (gw: TestGateway, body: unknown, token: string | null = TOKEN): ReturnType<typeof adminCall> => adminCall(gw, 'POST', '/cache/purge', { token: token ?? undefined, body });

/**
 * One request in exact bytes on its own connection (Connection: close), the answer read to the
 * close and judged by the strict referee (test/conformance/strict-parser.ts): the message, or the
 * rule its bytes break.
 */
async function rawExchange(port: number, method: string, path: string, extra = ''): Promise<{ message: ParsedResponse | null; error: string | null; text: string }> {
  const bytes = await withTimeout(
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const sock = net.connect(port, '127.0.0.1', () => sock.write(`${method} ${path} HTTP/1.1\r\nHost: app.example\r\n${extra}Connection: close\r\n\r\n`));
      sock.on('data', (d: Buffer) => chunks.push(d));
      sock.on('close', () => resolve(Buffer.concat(chunks)));
      sock.on('error', reject);
    }),
    5_000,
    `${method} ${path} (raw)`,
  );
  const text = bytes.toString('latin1');
  const step = parseResponse(bytes, method, 0, true);
  if (step.kind === 'message') return { message: step.message, error: null, text };
  return { message: null, error: step.kind === 'error' ? `${step.reason} at byte ${step.at}` : 'incomplete', text };
}

/** Counter deltas: read before, call the result after. */
async function counters(gw: TestGateway, names: readonly [string, Record<string, string>][]): Promise<() => Promise<number[]>> {
  const before = await Promise.all(names.map(([n, l]) => metricValue(gw, n, l)));
  return async () => (await Promise.all(names.map(([n, l]) => metricValue(gw, n, l)))).map((v, i) => v - before[i]!);
}

/**
 * The deltas once they equal `want`, or the last ones after 3 s: a counter may be bumped just after
 * the client has the answer's last byte.
 */
async function settled(delta: () => Promise<number[]>, want: number[]): Promise<number[]> {
  const deadline = Date.now() + 3_000;
  for (;;) {
    const got = await delta();
    if (got.every((v, i) => v === want[i]) || Date.now() > deadline) return got;
    await sleep(50);
  }
}

const outcome = (o: string): [string, Record<string, string>] => ['roomgate_cache_requests_total', { outcome: o }];

// ------------------------------------------------------------------------------------------------

// The two paths run concurrently (each has its own backend and gateways, and mostly waits on TTLs
// and grace periods); within a path the tests run in order (concurrent: false), as they share them.
// Tests with expect.soft take the test's own expect: the global one cannot tell which of two
// concurrently running tests a soft failure belongs to.
describe.concurrent.each([
  ['the byte-level page path', true],
  ['node:http (proxy.leanPages: false)', false],
])('page cache, %s', (_name, lean) => {
  // health.path null: a TCP connect check at start and then once an hour, so every request a
  // backend counts is a page request's.
  const base = { health: { path: null, intervalMs: 3_600_000 }, proxy: { leanPages: lean } };
  const be = new Backend();
  /** cache.paths ["/"], everything else default but maxObjectBytes 64 KiB; admin token set. */
  let gw: TestGateway;
  /** graceMs 5000, paths /c/ and a regex, bypassCookies with a prefix, the cookie "lang" kept, defaultTtlMs 5000. */
  let gg: TestGateway;

  beforeAll(async () => {
    await be.start();
    const backends = [`p1=${be.url}`];
    [gw, gg] = await Promise.all([
      startGateway({ backends, config: { ...base, admin: { token: TOKEN }, cache: { paths: ['/'], maxObjectBytes: 65_536 } } }),
      startGateway({
        backends,
        config: {
          ...base,
          cache: {
            paths: ['/c/', '~^/re/[0-9]+$'],
            graceMs: 5_000,
            defaultTtlMs: 5_000,
            bypassCookies: ['sessionid', 'wp_login*'],
            // The spec's { mode, names } shipped as two keys (docs/configuration.md).
            cookies: ['lang'],
            cookiesMode: 'allow',
          },
        },
      }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([gw?.stop(), gg?.stop()]);
    await be.close();
  });

  // --- 1. collapsing --------------------------------------------------------------------------

  it('200 concurrent GETs for a cold page reach the backend once; the waiters get the same body with "collapsed"; the next GET is a hit with Age', { concurrent: false }, async () => {
    const url = '/c/collapse';
    const pageBody = `collapsed page ${randomBytes(8).toString('hex')} ${'x'.repeat(4_000)}`;
    // The fill's answer waits 2 s: every one of the 200 requests must reach the gateway before it
    // (300 ms was not always enough at load 20, with the gateway and the clients in one process).
    be.script(url, () => ({ delayMs: 2_000, headers: { 'cache-control': 'max-age=60', 'content-type': 'text/html' }, body: pageBody }));
    const delta = await counters(gw, [outcome('coalesced'), outcome('miss')]);

    const answers = await Promise.all(Array.from({ length: 200 }, () => get(gw, url, {}, { timeoutMs: 10_000 })));
    expect(be.count(url)).toBe(1);
    expect(answers.map((a) => a.status).filter((s) => s !== 200)).toEqual([]);
    expect(answers.filter((a) => a.body !== pageBody).map(show)).toEqual([]);
    const fills = answers.filter((a) => !cs(a).has('collapsed'));
    expect(fills.map(show)).toHaveLength(1);
    expectStoredMiss(fills[0]!);
    const waiters = answers.filter((a) => cs(a).has('collapsed'));
    expect(waiters).toHaveLength(199);
    // "The same as the fill's answer plus collapsed."
    for (const w of waiters) {
      expect(cs(w).param('fwd'), show(w)).toBe('uri-miss');
      expect(cs(w).param('fwd-status'), show(w)).toBe('200');
    }

    const next = await get(gw, url);
    expect(next.status).toBe(200);
    expectHit(next, pageBody);
    expect(Number(cs(next).param('ttl'))).toBeLessThanOrEqual(60);
    expect(next.headers['content-type']).toBe('text/html');
    expect(be.count(url)).toBe(1);
    expect(await settled(delta, [199, 1])).toEqual([199, 1]);
  });

  // --- 2. grace: stale-while-revalidate -------------------------------------------------------

  it('grace: a stale page is served at once with one background refresh; the GET after it is a fresh hit with the new body', { concurrent: false }, async () => {
    const url = '/c/grace';
    // The refresh is held until the stale answers are in: one that waited for it would never come.
    let release = (): void => undefined;
    const refreshHeld = new Promise<void>((r) => (release = r));
    be.script(url, (_r, n) => ({ hold: n === 1 ? undefined : refreshHeld, headers: { 'cache-control': 'max-age=1' }, body: `grace v${n}` }));
    const first = await get(gg, url);
    expect(first.body).toBe('grace v1');
    expectStoredMiss(first);
    // Past its freshness by about a second (any rounding of ttl is then negative), within grace (5 s).
    await sleep(2_100);
    const delta = await counters(gg, [outcome('stale')]);

    const stale = await get(gg, url);
    expect(stale.status).toBe(200);
    expect(stale.body).toBe('grace v1');
    const s = cs(stale);
    expect(s.has('hit'), show(stale)).toBe(true);
    expect(s.param('detail'), show(stale)).toBe('stale-while-revalidate');
    expect(s.param('ttl'), show(stale)).toMatch(/^-[1-9]\d*$/);
    expect(stale.headers.age, show(stale)).toMatch(/^\d+$/);

    // More requests while the refresh runs: stale too, and no second refresh.
    const during = await Promise.all([0, 1, 2].map(() => get(gg, url)));
    for (const d of during) {
      expect(d.body, show(d)).toBe('grace v1');
      expect(cs(d).param('detail'), show(d)).toBe('stale-while-revalidate');
    }
    // All answered while the refresh was still held: none waited for it.
    await waitFor('the background refresh reached the backend', 5_000, () => be.count(url) >= 2);
    expect(be.answered(url), 'the refresh had not answered when the stale pages came').toBe(1);
    release();
    await waitFor('the background refresh answered', 5_000, () => be.answered(url) >= 2);
    await sleep(100);
    expect(be.count(url)).toBe(2);

    const fresh = await get(gg, url);
    expectHit(fresh, 'grace v2');
    await sleep(100);
    expect(be.count(url), 'exactly one background refresh').toBe(2);
    expect(await settled(delta, [4])).toEqual([4]);
  });

  // --- 3. every backend gone ------------------------------------------------------------------

  it('every backend gone: cached pages answer 200 within grace (stale-if-error once a refresh failed), uncached pages 503, and after grace the cached ones 503 too', { concurrent: false }, async ({ expect }) => {
    const [k1, k2] = await Promise.all([new Backend().start(), new Backend().start()]);
    try {
      for (const k of [k1, k2]) k.script('/k/page', (req, n) => ({ headers: { 'cache-control': 'max-age=1' }, body: `${req.url} #${n}` }));
      const gk = await startGateway({ backends: [`k1=${k1.url}`, `k2=${k2.url}`], config: { ...base, cache: { paths: ['/'], graceMs: 2_000 } } });
      // Two rooms on each backend (pure consistent hashing: the test defaults turn bounded loads off).
      const ring = buildRing([{ id: 'k1', weight: 1 }, { id: 'k2', weight: 1 }]);
      const candidates = Array.from({ length: 40 }, (_, i) => `kill-${i}`);
      const rooms = [...candidates.filter((r) => ring.first(r) === 'k1').slice(0, 2), ...candidates.filter((r) => ring.first(r) === 'k2').slice(0, 2)];
      expect(rooms).toHaveLength(4);

      const cached = await Promise.all(rooms.map((r) => get(gk, `/k/page?room=${r}`)));
      // The copies' age counts from their answers, so the timeline starts once all are in (a
      // start before the requests made a fill slower than 300 ms on a loaded machine look fresh).
      const filledAt = Date.now();
      for (const c of cached) {
        expect(c.status).toBe(200);
        expectStoredMiss(c);
      }
      // Both backends served pages (the witness of the placement).
      expect(k1.seen.length).toBe(2);
      expect(k2.seen.length).toBe(2);

      await Promise.all([k1.close(), k2.close()]);
      const delta = await counters(gk, [outcome('stale-if-error')]);

      for (const r of rooms) {
        const u = await get(gk, `/k/other?room=${r}`);
        expect(u.status, show(u)).toBe(503);
        expect(u.body, show(u)).toMatch(/^the service is unavailable, retry shortly\nrequest id: /);
        expect.soft(cs(u).raw, `every answer has Cache-Status: ${show(u)}`).toMatch(/^roomgate;/);
      }

      // Past freshness (max-age=1), within grace (2 s): the copy at once, while a refresh is tried...
      await sleepUntil(filledAt + 1_300);
      for (const [i, r] of rooms.entries()) {
        const a = await get(gk, `/k/page?room=${r}`);
        expect(a.status, show(a)).toBe(200);
        expect(a.body).toBe(cached[i]!.body);
        expect.soft(cs(a).param('detail'), show(a)).toBe('stale-while-revalidate');
      }
      // ...and once that refresh has failed (no backend: at once), the copy stands in for the error.
      await new Promise((r) => setTimeout(r, 150));
      for (const [i, r] of rooms.entries()) {
        const a = await get(gk, `/k/page?room=${r}`);
        expect(a.status, show(a)).toBe(200);
        expect(a.body).toBe(cached[i]!.body);
        const s = cs(a);
        // Soft: the labels are checked for every room, and the 503s after grace still are.
        expect.soft(s.param('fwd'), show(a)).toBe('stale');
        expect.soft(s.param('fwd-status') ?? '', show(a)).toMatch(/^5\d\d$/);
        expect.soft(s.param('detail'), show(a)).toBe('stale-if-error');
        expect.soft(Number(s.param('ttl')), show(a)).toBeLessThan(0);
      }
      expect.soft((await settled(delta, [rooms.length]))[0], 'roomgate_cache_requests_total{outcome="stale-if-error"}').toBe(rooms.length);

      // Past freshness + grace: nothing left to serve.
      await sleepUntil(filledAt + 1_000 + 2_000 + 600);
      for (const r of rooms) {
        const a = await get(gk, `/k/page?room=${r}`);
        expect(a.status, show(a)).toBe(503);
        expect(a.body, show(a)).toMatch(/^the service is unavailable, retry shortly\nrequest id: /);
      }
      await gk.stop();
    } finally {
      await Promise.all([k1.close(), k2.close()]);
    }
  });

  it("stale-if-error by the answer's own directive (graceMs 0): a stale copy answers a backend 503, and not once past the directive's window", { concurrent: false }, async () => {
    const url = '/c/sie';
    // First a cacheable page, then the backend fails with 503.
    be.script(url, (_r, n): Reply => (n === 1 ? { headers: { 'cache-control': 'max-age=1, stale-if-error=1' }, body: 'sie v1' } : { status: 503, body: `down #${n}` }));
    const filledAt = Date.now();
    expectStoredMiss(await get(gw, url));
    await sleepUntil(filledAt + 1_300);
    const delta = await counters(gw, [outcome('stale-if-error')]);
    const a = await get(gw, url);
    expect(a.status, show(a)).toBe(200);
    expect(a.body).toBe('sie v1');
    const s = cs(a);
    expect(s.param('fwd'), show(a)).toBe('stale');
    expect(s.param('fwd-status'), show(a)).toBe('503');
    expect(s.param('detail'), show(a)).toBe('stale-if-error');
    expect(Number(s.param('ttl')), show(a)).toBeLessThan(0);
    expect(be.count(url)).toBe(2);
    expect(await settled(delta, [1])).toEqual([1]);
    // Past max-age + stale-if-error: the backend's 503 is the answer.
    await sleepUntil(filledAt + 2_300);
    const b = await get(gw, url);
    expect(b.status, show(b)).toBe(503);
    expect(b.body).toBe('down #3');
  });

  // --- 4. never wrong -------------------------------------------------------------------------

  it('answers with Set-Cookie, Cache-Control private or no-store, a 500, or no freshness (defaultTtlMs 0) are never served to a second client', { concurrent: false }, async () => {
    const cases: [string, Record<string, string | string[]>, number][] = [
      ['/c/never/set-cookie', { 'cache-control': 'max-age=60', 'set-cookie': 'sid=SID' }, 200],
      ['/c/never/private', { 'cache-control': 'private, max-age=60' }, 200],
      ['/c/never/no-store', { 'cache-control': 'no-store, max-age=60' }, 200],
      ['/c/never/error', { 'cache-control': 'max-age=60' }, 500],
      ['/c/never/no-ttl', {}, 200],
    ];
    for (const [path, headers, status] of cases) {
      be.script(path, (_r, n) => {
        const h = { ...headers };
        if (typeof h['set-cookie'] === 'string') h['set-cookie'] = `sid=${n}`;
        return { status, headers: h, body: `${path} #${n}` };
      });
      for (const n of [1, 2, 3]) {
        const a = await get(gw, path);
        expect(a.status, path).toBe(status);
        expect(a.body, `${path}: request ${n} reached the backend`).toBe(`${path} #${n}`);
        expectNotStored(a);
        if (path.endsWith('set-cookie')) expect(a.headers['set-cookie'], path).toContain(`sid=${n}`);
      }
      expect(be.count(path), path).toBe(3);
    }
    // A 404 with freshness is stored.
    be.script('/c/never/404', (_r, n) => ({ status: 404, headers: { 'cache-control': 'max-age=60' }, body: `gone #${n}` }));
    const m = await get(gw, '/c/never/404');
    expectStoredMiss(m);
    const h = await get(gw, '/c/never/404');
    expect(h.status).toBe(404);
    expectHit(h, 'gone #1');
    // defaultTtlMs > 0 (gg): an answer without freshness is stored.
    be.script('/c/ttl-default', (_r, n) => ({ headers: {}, body: `no ttl #${n}` }));
    expectStoredMiss(await get(gg, '/c/ttl-default'));
    expectHit(await get(gg, '/c/ttl-default'), 'no ttl #1');
  });

  it('Authorization and a session cookie bypass: the backend sees them, and their answers are never stored or served from the cache', { concurrent: false }, async () => {
    for (const [path, headers, detail] of [
      ['/c/auth', { authorization: 'Bearer user-token' }, 'authorization'],
      ['/c/session', { cookie: 'theme=dark; sessionid=x' }, 'session-cookie'],
    ] as const) {
      const b1 = await get(gw, path, headers);
      expect(b1.body).toBe(`GET ${path} #1`);
      expectBypass(b1, detail);
      const first = be.of(path)[0]!;
      if (detail === 'authorization') expect(first.headers.authorization).toBe('Bearer user-token');
      else expect(first.headers.cookie).toBe('theme=dark; sessionid=x');
      // The bypassing answer (cacheable by its headers) was not stored.
      const anon = await get(gw, path);
      expect(anon.body, `${path}: an anonymous request after a bypass reached the backend`).toBe(`GET ${path} #2`);
      expectStoredMiss(anon);
      expectHit(await get(gw, path), `GET ${path} #2`);
      // The stored page is not served to a bypassing request either.
      const b2 = await get(gw, path, headers);
      expect(b2.body).toBe(`GET ${path} #3`);
      expectBypass(b2, detail);
      expect(be.count(path)).toBe(3);
    }
  });

  it('cookies: a fill carries none of the client\'s cookies (the room cookie included) by default; a bypass path carries them all; POST is fwd=method and untouched', { concurrent: false }, async () => {
    const seed = await get(gw, '/c/cookie-seed?room=cookie-room');
    const signed = roomCookieValue(seed);
    const cookie = `theme=dark; roomgate_room=${signed}; csrftoken=abc`;

    const a = await get(gw, '/c/cookies', { cookie });
    expectStoredMiss(a);
    expect(be.of('/c/cookies')[0]!.headers.cookie, 'cookies the backend got on a cache fill').toBeUndefined();
    // Other cookies are not part of the key: another client with other cookies gets the hit.
    expectHit(await get(gw, '/c/cookies', { cookie: `theme=light; roomgate_room=${signed}` }), 'GET /c/cookies #1');
    expect(be.count('/c/cookies')).toBe(1);

    // cache.bypassPaths (default ["/admin/"]): as if there were no cache.
    const adm = await get(gw, '/admin/page', { cookie });
    expectBypass(adm, 'path');
    expect(be.of('/admin/page')[0]!.headers.cookie).toBe(cookie);
    await get(gw, '/admin/page', { cookie });
    expect(be.count('/admin/page')).toBe(2);
    // Judged on the path the backend gets, in its canonical form: behind a per-tab prefix, or
    // spelled with an escape, it is the same /admin/ page and never stored.
    be.script('/admin/secret', () => ({ headers: { 'cache-control': 'public, max-age=60' }, body: 'account page' }));
    for (const spelling of ['/r/room-a/admin/secret', '/%61dmin/secret', '/x/../admin/secret']) {
      expectBypass(await get(gw, spelling), 'path');
    }
    expect(be.count('/admin/secret')).toBe(3);

    // POST: forwarded as without a cache, cookies and body included.
    be.script('/c/form', (req, n) => ({ headers: { 'cache-control': 'max-age=60' }, body: `${req.method} #${n}` }));
    for (const n of [1, 2]) {
      const p = await get(gw, '/c/form', { cookie, 'content-type': 'application/x-www-form-urlencoded' }, { method: 'POST', body: `field=${n}` });
      expect(p.status).toBe(200);
      expect(p.body).toBe(`POST #${n}`);
      expect(cs(p).raw, show(p)).toMatch(/^roomgate;/);
      expect(cs(p).param('fwd'), show(p)).toBe('method');
      expect(cs(p).has('stored'), show(p)).toBe(false);
    }
    const posts = be.of('/c/form');
    expect(posts.map((p) => [p.method, p.body, p.headers.cookie])).toEqual([
      ['POST', 'field=1', cookie],
      ['POST', 'field=2', cookie],
    ]);

    // A client's Cache-Control: no-cache (or Pragma) does not reach the backend nor replace the
    // copy everyone gets (cache.honorClientNoCache is off): the stored copy is served.
    expectStoredMiss(await get(gw, '/c/forced'));
    for (const h of [{ 'cache-control': 'no-cache' }, { 'cache-control': 'max-age=0' }, { pragma: 'no-cache' }] as Record<string, string>[]) {
      expectHit(await get(gw, '/c/forced', h), 'GET /c/forced #1');
    }
    expect(be.count('/c/forced')).toBe(1);

    // A fill carries no If-* and no Range header of the client.
    const cond = await get(gw, '/c/conditional', { 'if-none-match': '"abc"', 'if-modified-since': 'Wed, 21 Oct 2015 07:28:00 GMT' });
    expect(cond.status).toBe(200);
    const fill = be.of('/c/conditional')[0]!;
    expect(Object.keys(fill.headers).filter((k) => k.startsWith('if-') || k === 'range')).toEqual([]);
  });

  it('bypassCookies (with a "name*" prefix) and cookies.names (kept cookies: forwarded alone, part of the key); paths outside cache.paths and a "~" regex path', { concurrent: false }, async () => {
    // wp_login* matches wp_login_42.
    const wp = await get(gg, '/c/bc', { cookie: 'wp_login_42=1; lang=fr' });
    expectBypass(wp, 'session-cookie');
    expect(be.of('/c/bc')[0]!.headers.cookie).toBe('wp_login_42=1; lang=fr');
    const sess = await get(gg, '/c/bc', { cookie: 'sessionid=abc' });
    expectBypass(sess, 'session-cookie');
    // wp_logout is not a bypass cookie: cached (no cookie kept, so the key is the anonymous one).
    expectStoredMiss(await get(gg, '/c/bc', { cookie: 'wp_logout=1' }));
    expect(be.of('/c/bc')[2]!.headers.cookie).toBeUndefined();
    expect(be.count('/c/bc')).toBe(3);

    const fr = await get(gg, '/c/lang', { cookie: 'theme=dark; lang=fr; roomgate_room=x.y.z' });
    expectStoredMiss(fr);
    expect(be.of('/c/lang')[0]!.headers.cookie).toBe('lang=fr');
    const en = await get(gg, '/c/lang', { cookie: 'lang=en' });
    expectStoredMiss(en);
    expect(be.of('/c/lang')[1]!.headers.cookie).toBe('lang=en');
    expectHit(await get(gg, '/c/lang', { cookie: 'lang=fr; other=1' }), 'GET /c/lang #1');
    expectHit(await get(gg, '/c/lang', { cookie: 'lang=en' }), 'GET /c/lang #2');
    // No kept cookie: another key.
    expectStoredMiss(await get(gg, '/c/lang'));
    expect(be.count('/c/lang')).toBe(3);

    // Not under cache.paths: every request reaches the backend.
    expectBypass(await get(gg, '/elsewhere'), 'path');
    expectBypass(await get(gg, '/elsewhere'), 'path');
    expect(be.count('/elsewhere')).toBe(2);
    // "~^/re/[0-9]+$": /re/12 is cached, /re/x is not.
    expectStoredMiss(await get(gg, '/re/12'));
    expectHit(await get(gg, '/re/12'), 'GET /re/12 #1');
    expectBypass(await get(gg, '/re/x'), 'path');
    expectBypass(await get(gg, '/re/x'), 'path');
    expect([be.count('/re/12'), be.count('/re/x')]).toEqual([1, 2]);
  });

  // --- 5. the room in the key -----------------------------------------------------------------

  it('the room is part of the key (X-Room-Key, ?room=, the room cookie); the room cookie is set on cached answers where it is due and never reaches the backend', { concurrent: false }, async () => {
    const path = '/c/room-page';
    const ra = await get(gw, path, { 'x-room-key': 'room-a' });
    const rb = await get(gw, path, { 'x-room-key': 'room-b' });
    expectStoredMiss(ra);
    expectStoredMiss(rb);
    expect([ra.body, rb.body]).toEqual([`GET ${path} #1`, `GET ${path} #2`]);
    const ha = await get(gw, path, { 'x-room-key': 'room-a' });
    const hb = await get(gw, path, { 'x-room-key': 'room-b' });
    expectHit(ha, `GET ${path} #1`);
    expectHit(hb, `GET ${path} #2`);
    expect(be.count(path)).toBe(2);
    // The room came from a header: the room cookie is due on every answer, hits included, each
    // for its own room.
    for (const [r, room] of [[ra, 'room-a'], [rb, 'room-b'], [ha, 'room-a'], [hb, 'room-b']] as const) {
      expect(roomCookies(r), show(r)).toHaveLength(1);
      expect(roomCookieValue(r).startsWith(`${room}.`), roomCookies(r)[0]).toBe(true);
    }
    const signedA = roomCookieValue(ra);
    const signedB = roomCookieValue(rb);

    // The room cookie as the room source: the same entries; no room cookie is due.
    const ca = await get(gw, path, { cookie: `roomgate_room=${signedA}` });
    const cb = await get(gw, path, { cookie: `roomgate_room=${signedB}` });
    expectHit(ca, `GET ${path} #1`);
    expectHit(cb, `GET ${path} #2`);
    expect(roomCookies(ca)).toEqual([]);
    expect(roomCookies(cb)).toEqual([]);
    expect(be.count(path)).toBe(2);

    // No room at all: a third entry.
    expectStoredMiss(await get(gw, path));
    expect(be.count(path)).toBe(3);

    // ?room=: due without the cookie, not with it; the cookie is not part of the key.
    const q = '/c/room-query?room=room-q';
    const q1 = await get(gw, q);
    expectStoredMiss(q1);
    expect(roomCookies(q1)).toHaveLength(1);
    const q2 = await get(gw, q);
    expectHit(q2, `GET ${q} #1`);
    expect(roomCookies(q2)).toHaveLength(1);
    const q3 = await get(gw, q, { cookie: `roomgate_room=${roomCookieValue(q1)}` });
    expectHit(q3, `GET ${q} #1`);
    expect(roomCookies(q3)).toEqual([]);
    expect(be.count(q)).toBe(1);

    // The backend never got a room cookie (nor any cookie) on these fills.
    expect(be.seen.filter((s) => s.url.startsWith('/c/room-')).map((s) => s.headers.cookie)).toEqual([undefined, undefined, undefined, undefined]);
  });

  // --- 6. HEAD and Range ----------------------------------------------------------------------

  it('HEAD is answered from a stored GET; a HEAD miss fills with a GET; Range bytes=0-3 on a hit is a 206 with Content-Range', { concurrent: false }, async () => {
    const body = 'GET /c/head #1';
    expectStoredMiss(await get(gw, '/c/head'));
    const head = await get(gw, '/c/head', {}, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['content-length']).toBe(String(body.length));
    expectHit(head);
    expect(be.count('/c/head')).toBe(1);

    const miss = await get(gw, '/c/head-first', {}, { method: 'HEAD' });
    expect(miss.status).toBe(200);
    expect(miss.body).toBe('');
    expectStoredMiss(miss);
    expect(be.of('/c/head-first').map((s) => s.method)).toEqual(['GET']);
    expectHit(await get(gw, '/c/head-first'), 'GET /c/head-first #1');
    expect(be.count('/c/head-first')).toBe(1);

    const part = await get(gw, '/c/head', { range: 'bytes=0-3' });
    expect(part.status, show(part)).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 0-3/${body.length}`);
    expect(part.body).toBe(body.slice(0, 4));
    expect(part.headers['content-length']).toBe('4');
    expectHit(part);
    // Two ranges: the whole page.
    const multi = await get(gw, '/c/head', { range: 'bytes=0-1,4-5' });
    expect(multi.status, show(multi)).toBe(200);
    expect(multi.body).toBe(body);
    expect(be.count('/c/head')).toBe(1);
  });

  // --- 7. Vary --------------------------------------------------------------------------------

  it('Vary: Accept-Language stores one variant per value; Vary: * is not stored', { concurrent: false }, async () => {
    be.script('/c/vary', (req, n) => ({ headers: { 'cache-control': 'max-age=60', vary: 'Accept-Language' }, body: `${String(req.headers['accept-language'])} #${n}` }));
    const en = await get(gw, '/c/vary', { 'accept-language': 'en' });
    expect(en.body).toBe('en #1');
    expectStoredMiss(en);
    const fr = await get(gw, '/c/vary', { 'accept-language': 'fr' });
    expect(fr.body).toBe('fr #2');
    expectStoredMiss(fr, 'vary-miss');
    expectHit(await get(gw, '/c/vary', { 'accept-language': 'en' }), 'en #1');
    expectHit(await get(gw, '/c/vary', { 'accept-language': 'fr' }), 'fr #2');
    expect(be.count('/c/vary')).toBe(2);

    be.script('/c/vary-star', (_r, n) => ({ headers: { 'cache-control': 'max-age=60', vary: '*' }, body: `star #${n}` }));
    expectNotStored(await get(gw, '/c/vary-star'));
    expect((await get(gw, '/c/vary-star')).body).toBe('star #2');
  });

  // --- 8. purge, GET /cache, metrics ----------------------------------------------------------

  it('purge by url, by prefix and by room through the admin API; GET /cache reports objects and bytes', { concurrent: false }, async () => {
    const urls = ['/c/pu/a', '/c/pu/b', '/c/pu/c?x=1', '/c/keep'];
    for (const u of urls) expectStoredMiss(await get(gw, u));
    for (const u of urls) expectHit(await get(gw, u), `GET ${u} #1`);
    const before = await adminCall(gw, 'GET', '/cache');
    expect(before.status).toBe(200);
    expect(before.json.enabled).toBe(true);
    expect(before.json.objects).toBeGreaterThanOrEqual(urls.length);
    expect(before.json.bytes).toBeGreaterThan(0);
    expect(before.json.maxBytes).toBe(67_108_864);
    expect(before.json.hitRatio).toBeGreaterThan(0);
    expect((before.json.counts as Record<string, number>).hit).toBeGreaterThan(0);

    // Writes need the token; {} is a bad request.
    expect((await purge(gw, { url: '/c/pu/a' }, null)).status).toBe(401);
    expect((await purge(gw, { url: '/c/pu/a' }, 'wrong-token-0123456789abcdef')).status).toBe(401);
    expect((await purge(gw, {})).status).toBe(400);
    expectHit(await get(gw, '/c/pu/a'), 'GET /c/pu/a #1');

    const byUrl = await purge(gw, { url: '/c/pu/c?x=1' });
    expect(byUrl.status, byUrl.text).toBe(200);
    expect(byUrl.json).toMatchObject({ purged: 1 });
    expectStoredMiss(await get(gw, '/c/pu/c?x=1'));
    expect(be.count('/c/pu/c?x=1')).toBe(2);
    expectHit(await get(gw, '/c/pu/a'), 'GET /c/pu/a #1');

    const byPrefix = await purge(gw, { prefix: '/c/pu/' });
    expect(byPrefix.status, byPrefix.text).toBe(200);
    expect(byPrefix.json).toMatchObject({ purged: 3 });
    const after = await adminCall(gw, 'GET', '/cache');
    expect(after.json.objects).toBe((before.json.objects as number) - 3);
    expect(after.json.bytes).toBeLessThan(before.json.bytes as number);
    for (const u of ['/c/pu/a', '/c/pu/b']) {
      const a = await get(gw, u);
      expect(a.body, show(a)).toBe(`GET ${u} #2`);
      expectStoredMiss(a);
    }
    expectHit(await get(gw, '/c/keep'), 'GET /c/keep #1');
    expect(be.count('/c/keep')).toBe(1);

    // By room: only that room's entry goes.
    for (const room of ['purge-a', 'purge-b']) expectStoredMiss(await get(gw, '/c/pr', { 'x-room-key': room }));
    const byRoom = await purge(gw, { room: 'purge-a' });
    expect(byRoom.status, byRoom.text).toBe(200);
    expect(byRoom.json.purged).toBeGreaterThanOrEqual(1);
    expectStoredMiss(await get(gw, '/c/pr', { 'x-room-key': 'purge-a' }));
    expectHit(await get(gw, '/c/pr', { 'x-room-key': 'purge-b' }), 'GET /c/pr #2');
    expect(be.count('/c/pr')).toBe(3);
  });

  it('metrics: cache requests by outcome, hits as backend="cache" in roomgate_http_requests_total, the size gauges and fills', { concurrent: false }, async () => {
    const delta = await counters(gw, [
      outcome('hit'),
      outcome('miss'),
      outcome('bypass'),
      ['roomgate_http_requests_total', { backend: 'cache' }],
      ['roomgate_cache_fills_total', {}],
      ['roomgate_cache_response_seconds_count', { outcome: 'hit' }],
      ['roomgate_http_requests_total', {}],
    ]);
    expectStoredMiss(await get(gw, '/c/metrics'));
    expectHit(await get(gw, '/c/metrics'));
    expectHit(await get(gw, '/c/metrics'));
    expectBypass(await get(gw, '/c/metrics', { authorization: 'Bearer x' }), 'authorization');
    const [hit, miss, bypass, httpCache, fills, hitSeconds, httpAll] = await settled(delta, [2, 1, 1, 2, 1, 2, 4]);
    // Four client requests: four in roomgate_http_requests_total, the two hits as backend="cache".
    expect({ hit, miss, bypass, httpCache, hitSeconds, httpAll }).toEqual({ hit: 2, miss: 1, bypass: 1, httpCache: 2, hitSeconds: 2, httpAll: 4 });
    expect(fills).toBeGreaterThanOrEqual(1);
    expect(await metricValue(gw, 'roomgate_cache_objects')).toBeGreaterThan(0);
    expect(await metricValue(gw, 'roomgate_cache_bytes')).toBeGreaterThan(0);
  });

  // --- 9. too big -----------------------------------------------------------------------------

  it('a chunked answer larger than maxObjectBytes is relayed whole and not stored; a small chunked one is stored', { concurrent: false }, async () => {
    const big = randomBytes(50_000).toString('hex'); // 100 000 bytes > 65 536
    be.script('/c/big-chunked', () => ({ headers: { 'cache-control': 'max-age=60' }, body: big, chunks: 10 }));
    const objectsBefore = (await adminCall(gw, 'GET', '/cache')).json.objects;
    for (const n of [1, 2]) {
      const a = await get(gw, '/c/big-chunked');
      expect(a.status).toBe(200);
      expect(a.body.length).toBe(big.length);
      expect(a.body === big, 'the body relayed whole').toBe(true);
      expect(cs(a).has('hit'), show(a)).toBe(false);
      // The first answer's head is out before the body is found too big: its Cache-Status is not
      // held to "not stored" (the Content-Length case in the wire tests is).
      if (n > 1) expect(cs(a).has('stored'), show(a)).toBe(false);
      expect(be.count('/c/big-chunked'), `request ${n} reached the backend`).toBe(n);
    }
    expect((await adminCall(gw, 'GET', '/cache')).json.objects).toBe(objectsBefore);
    const small = 'small chunked '.repeat(300);
    be.script('/c/small-chunked', () => ({ headers: { 'cache-control': 'max-age=60' }, body: small, chunks: 3 }));
    expectStoredMiss(await get(gw, '/c/small-chunked'));
    expectHit(await get(gw, '/c/small-chunked'), small);
    expect(be.count('/c/small-chunked')).toBe(1);
  });
  // --- the wire: framing of cached answers --------------------------------------------------

  it('the wire: answers built from a backend answer with Content-Length (miss, HEAD miss, collapsed waiter, hit, HEAD hit, 206, too big) are valid HTTP/1.1 with one Content-Length', { concurrent: false }, async ({ expect }) => {
    const body = 'wire page body';
    // Long enough for the second request (sent 50 ms later) to wait on the first one's fill, under load.
    be.script('/c/wire', () => ({ contentLength: true, delayMs: 1_000, headers: { 'cache-control': 'max-age=60' }, body }));
    be.script('/c/wire-head', () => ({ contentLength: true, headers: { 'cache-control': 'max-age=60' }, body }));
    be.script('/admin/wire', () => ({ contentLength: true, headers: { 'cache-control': 'max-age=60' }, body }));
    const big = randomBytes(50_000).toString('hex');
    be.script('/c/wire-big', () => ({ contentLength: true, headers: { 'cache-control': 'max-age=60' }, body: big }));

    /** The referee's verdict, one Content-Length of the right value, the body (soft: every case is reported). */
    const judge = (what: string, r: Awaited<ReturnType<typeof rawExchange>>, length: number, wantBody: string | null): ParsedResponse | null => {
      expect.soft(r.error, `${what}: ${JSON.stringify(r.text.slice(0, 400))}`).toBeNull();
      const m = r.message;
      if (m === null) return null;
      expect.soft(fieldValues(m, 'content-length'), `${what}: ${JSON.stringify(r.text.slice(0, 400))}`).toEqual([String(length)]);
      if (wantBody !== null) expect.soft(m.body.toString('latin1'), what).toBe(wantBody);
      return m;
    };
    // A bypassing answer: relayed as without a cache (the control).
    judge('bypass path', await rawExchange(gw.port, 'GET', '/admin/wire'), body.length, body);
    const [miss, waiter] = await Promise.all([rawExchange(gw.port, 'GET', '/c/wire'), sleep(50).then(() => rawExchange(gw.port, 'GET', '/c/wire'))]);
    judge('GET miss', miss, body.length, body);
    judge('collapsed waiter', waiter, body.length, body);
    judge('GET hit', await rawExchange(gw.port, 'GET', '/c/wire'), body.length, body);
    judge('HEAD hit', await rawExchange(gw.port, 'HEAD', '/c/wire'), body.length, '');
    judge('HEAD miss', await rawExchange(gw.port, 'HEAD', '/c/wire-head'), body.length, '');
    judge('206 of a hit', await rawExchange(gw.port, 'GET', '/c/wire', 'Range: bytes=0-3\r\n'), 4, body.slice(0, 4));
    expect(be.count('/c/wire')).toBe(1);
    expect(be.count('/c/wire-head')).toBe(1);

    // Too big, with Content-Length: known before the head goes out, so not "stored".
    const tb = judge('too big', await rawExchange(gw.port, 'GET', '/c/wire-big'), big.length, big);
    if (tb !== null) expect.soft(fieldValues(tb, 'cache-status').join(), 'too big with Content-Length').not.toMatch(/;\s*stored/);
    judge('too big, again', await rawExchange(gw.port, 'GET', '/c/wire-big'), big.length, big);
    expect(be.count('/c/wire-big')).toBe(2);
  });
});
