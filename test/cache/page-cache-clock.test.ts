// Freshness and grace boundaries of the page cache, to the millisecond, with the cache's clock in
// the test's hand: a real gateway (in this process, so its cache clock can be given) in front of
// a real backend on a real socket that counts the requests it gets and answers what the test
// says. Each boundary is checked on both sides: the last millisecond inside, the first outside.
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';

interface Scripted {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const T0 = 1_800_000_000_000;
const clock = { t: T0 };
let script: Scripted = { status: 200, headers: {}, body: '' };
/** When set, the next request is answered by this instead of the script (then it is cleared). */
let streaming: ((res: http.ServerResponse) => Promise<void>) | null = null;
/** Answers for the next requests, one each, in the order they arrive. */
const streamingQueue: ((res: http.ServerResponse) => Promise<void>)[] = [];
const seen: http.IncomingHttpHeaders[] = [];
let backend: http.Server;
let dir: string;
const gateways: Gateway[] = [];

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    seen.push(req.headers);
    const queued = streamingQueue.shift();
    if (queued !== undefined) {
      void queued(res);
      return;
    }
    if (streaming !== null) {
      const s = streaming;
      streaming = null;
      void s(res);
      return;
    }
    // A body, when one came, is echoed: it must reach the backend as sent.
    if (req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined) {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        res.writeHead(200, { 'Cache-Control': 'max-age=60' });
        res.end(`body=${body}`);
      });
      return;
    }
    // A conditional refresh gets a 304 when the test says the page did not change.
    if (script.status === 304 && req.headers['if-none-match'] === undefined) {
      res.writeHead(200, { 'Cache-Control': 'max-age=10', ETag: '"v1"' });
      return res.end('unconditional');
    }
    res.writeHead(script.status, script.headers);
    res.end(script.body);
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  dir = mkdtempSync(join(tmpdir(), 'roomgate-cache-clock-'));
});

afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  seen.length = 0;
  clock.t = T0;
});

afterAll(async () => {
  backend.closeAllConnections();
  await new Promise<void>((r) => backend.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

async function gateway(cache: Record<string, unknown>): Promise<Gateway> {
  const g = await startInProcessGateway(dir, `http://127.0.0.1:${(backend.address() as AddressInfo).port}`, { cache: { paths: ['/'], ...cache } }, { cacheClock: () => clock.t });
  gateways.push(g);
  return g;
}

interface Got {
  status: number;
  cacheStatus: string;
  age: string | undefined;
  body: string;
}

function get(g: Gateway, path: string, headers: Record<string, string> = {}): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: g.port, path, headers, agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, cacheStatus: String(res.headers['cache-status']), age: res.headers.age, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
  });
}

/** Waits until the backend has seen n requests (a background refresh is not awaited by the answer). */
async function seenCount(n: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (seen.length < n) {
    if (Date.now() > deadline) throw new Error(`the backend saw ${seen.length} requests, expected ${n}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('freshness and grace by the clock', () => {
  it('fresh until max-age, to the millisecond; Age counts whole seconds since it was received', async () => {
    const g = await gateway({});
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'v1' };
    expect((await get(g, '/a')).cacheStatus).toBe('roomgate; fwd=uri-miss; fwd-status=200; stored');
    clock.t = T0 + 9_999;
    const last = await get(g, '/a');
    expect(last).toMatchObject({ body: 'v1', cacheStatus: 'roomgate; hit; ttl=0', age: '9' });
    clock.t = T0 + 10_000;
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'v2' };
    // No grace: the first millisecond past freshness is a fetch.
    const next = await get(g, '/a');
    expect(next).toMatchObject({ body: 'v2', cacheStatus: 'roomgate; fwd=stale; fwd-status=200; stored' });
    expect(seen).toHaveLength(2);
  });

  it('an Age from the backend shortens the freshness and is counted on', async () => {
    const g = await gateway({});
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10', Age: '4' }, body: 'aged' };
    await get(g, '/aged');
    clock.t = T0 + 5_999;
    expect(await get(g, '/aged')).toMatchObject({ cacheStatus: 'roomgate; hit; ttl=0', age: '9' });
    clock.t = T0 + 6_000;
    expect((await get(g, '/aged')).cacheStatus).toMatch(/^roomgate; fwd=stale; fwd-status=200; stored/);
  });

  it('within graceMs: the stale copy at once, one background refresh; after grace: a fetch the client waits for', async () => {
    const g = await gateway({ graceMs: 5_000 });
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'old' };
    await get(g, '/g');
    clock.t = T0 + 10_000;
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'new' };
    const stale = await get(g, '/g');
    expect(stale).toMatchObject({ body: 'old', cacheStatus: 'roomgate; hit; ttl=-1; detail=stale-while-revalidate' });
    await seenCount(2);
    // The refresh stored the new answer, received at T0 + 10 000.
    expect(await get(g, '/g')).toMatchObject({ body: 'new', cacheStatus: 'roomgate; hit; ttl=10' });
    expect(seen).toHaveLength(2);

    // The new copy's grace ends at T0 + 10 000 + 10 000 + 5 000.
    clock.t = T0 + 24_999;
    expect((await get(g, '/g')).cacheStatus).toBe('roomgate; hit; ttl=-5; detail=stale-while-revalidate');
    await seenCount(3);
    clock.t = T0 + 24_999 + 10_000 + 5_000;
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'newest' };
    expect(await get(g, '/g')).toMatchObject({ body: 'newest', cacheStatus: 'roomgate; fwd=stale; fwd-status=200; stored' });
  });

  it('within grace, once a refresh has failed the copy is said to stand in for an error, until a refresh succeeds', async () => {
    const g = await gateway({ graceMs: 60_000 });
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'kept' };
    await get(g, '/fails');
    clock.t = T0 + 10_000;
    script = { status: 503, headers: {}, body: 'down' };
    expect((await get(g, '/fails')).cacheStatus).toBe('roomgate; hit; ttl=-1; detail=stale-while-revalidate');
    await seenCount(2);
    await new Promise((r) => setTimeout(r, 50)); // the failed refresh is recorded after its answer
    expect(await get(g, '/fails')).toMatchObject({ body: 'kept', cacheStatus: 'roomgate; fwd=stale; fwd-status=503; ttl=-1; detail=stale-if-error' });
    await seenCount(3); // and it tried again
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10' }, body: 'back' };
    await new Promise((r) => setTimeout(r, 50));
    await get(g, '/fails');
    await seenCount(4);
    await new Promise((r) => setTimeout(r, 50));
    expect(await get(g, '/fails')).toMatchObject({ body: 'back', cacheStatus: 'roomgate; hit; ttl=10' });
  });

  it("the answer's own stale-while-revalidate and stale-if-error, with no graceMs", async () => {
    const g = await gateway({});
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10, stale-while-revalidate=2, stale-if-error=30' }, body: 'own' };
    await get(g, '/own');
    clock.t = T0 + 11_999;
    script = { status: 503, headers: {}, body: 'down' };
    expect((await get(g, '/own')).cacheStatus).toBe('roomgate; hit; ttl=-2; detail=stale-while-revalidate');
    await seenCount(2); // the refresh got the 503 and kept the copy
    clock.t = T0 + 12_000;
    // Past stale-while-revalidate: fetched; the backend fails, the copy is still within stale-if-error.
    expect(await get(g, '/own')).toMatchObject({ status: 200, body: 'own', cacheStatus: 'roomgate; fwd=stale; fwd-status=503; ttl=-2; detail=stale-if-error' });
    clock.t = T0 + 39_999;
    expect((await get(g, '/own')).cacheStatus).toBe('roomgate; fwd=stale; fwd-status=503; ttl=-30; detail=stale-if-error');
    clock.t = T0 + 40_000;
    // Past stale-if-error: the backend's 503 itself.
    expect(await get(g, '/own')).toMatchObject({ status: 503, body: 'down' });
  });

  it('must-revalidate is never served stale, whatever graceMs says', async () => {
    const g = await gateway({ graceMs: 60_000 });
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10, must-revalidate' }, body: 'strict' };
    await get(g, '/strict');
    clock.t = T0 + 10_000;
    script = { status: 502, headers: {}, body: 'bad gateway' };
    expect(await get(g, '/strict')).toMatchObject({ status: 502, body: 'bad gateway' });
  });

  it('a stale copy is refreshed with its validators; a 304 makes it fresh again without a body', async () => {
    const g = await gateway({});
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10', ETag: '"v1"' }, body: 'validated' };
    await get(g, '/etag');
    clock.t = T0 + 10_000;
    script = { status: 304, headers: { 'Cache-Control': 'max-age=20', ETag: '"v1"' }, body: '' };
    expect(await get(g, '/etag')).toMatchObject({ status: 200, body: 'validated', cacheStatus: 'roomgate; fwd=stale; fwd-status=304' });
    expect(seen[1]?.['if-none-match']).toBe('"v1"');
    // Fresh for the 304's 20 s from now.
    clock.t = T0 + 29_999;
    expect((await get(g, '/etag')).cacheStatus).toBe('roomgate; hit; ttl=0');
    expect(seen).toHaveLength(2);
  });

  it('a 304 for another version (another ETag) does not confirm the copy: it goes, and the client gets the page from the backend', async () => {
    const g = await gateway({});
    script = { status: 200, headers: { 'Cache-Control': 'max-age=10', ETag: '"v1"' }, body: 'version one' };
    await get(g, '/other-etag');
    clock.t = T0 + 10_000;
    script = { status: 304, headers: { 'Cache-Control': 'max-age=20', ETag: '"v2"' }, body: '' };
    // The conditional refresh gets a 304 naming v2; the client is passed to the backend, which the
    // test backend answers unconditionally (no If-None-Match on that request).
    const got = await get(g, '/other-etag');
    expect(got).toMatchObject({ status: 200, body: 'unconditional', cacheStatus: 'roomgate; fwd=bypass; detail=stale' });
    expect(seen[1]?.['if-none-match']).toBe('"v1"');
    expect(seen[2]?.['if-none-match']).toBeUndefined();
    // The v1 copy is gone: the next request is a miss.
    expect((await get(g, '/other-etag')).cacheStatus).toMatch(/^roomgate; fwd=uri-miss/);
  });

  it('defaultTtlMs gives answers without freshness a lifetime; without it they are not stored', async () => {
    script = { status: 200, headers: {}, body: 'plain' };
    const off = await gateway({});
    expect((await get(off, '/plain')).cacheStatus).toBe('roomgate; fwd=uri-miss; fwd-status=200; detail=no-freshness');
    await off.stop();
    const on = await gateway({ defaultTtlMs: 5_000 });
    await get(on, '/plain');
    clock.t = T0 + 4_999;
    expect((await get(on, '/plain')).cacheStatus).toBe('roomgate; hit; ttl=0');
    clock.t = T0 + 5_000;
    expect((await get(on, '/plain')).cacheStatus).toMatch(/^roomgate; fwd=stale; fwd-status=200; stored/);
  });

  it('a GET with a body is not the cache\'s: it reaches the backend with its body (a case the fuzzer found)', async () => {
    const g = await gateway({});
    const answer = await new Promise<string>((resolve, reject) => {
      const sock = net.connect(g.port, '127.0.0.1', () => {
        sock.write('GET /with-body HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nhi\r\n0\r\n\r\n');
      });
      let text = '';
      sock.setEncoding('latin1');
      sock.on('data', (c: string) => (text += c));
      sock.on('close', () => resolve(text));
      sock.on('error', reject);
      sock.setTimeout(5_000, () => sock.destroy(new Error('no answer')));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('Cache-Status: roomgate; fwd=bypass; detail=body');
    expect(answer).toContain('body=hi');
    expect(seen).toHaveLength(1);
  });

  it('a request arriving while a stored answer streams in gets the head, the body so far and the rest, as it comes', async () => {
    const g = await gateway({});
    let release: () => void = () => undefined;
    const halfway = new Promise<void>((r) => (release = r));
    streaming = async (res) => {
      res.writeHead(200, { 'Cache-Control': 'max-age=60', 'Content-Length': '10' });
      res.write('first');
      await halfway;
      res.end('-last');
    };
    const first = get(g, '/streamed');
    await seenCount(1);
    await new Promise((r) => setTimeout(r, 100)); // the first half is on its way
    const second = get(g, '/streamed');
    await new Promise((r) => setTimeout(r, 100));
    release();
    const [a, b] = await Promise.all([first, second]);
    expect(a).toMatchObject({ body: 'first-last', cacheStatus: 'roomgate; fwd=uri-miss; fwd-status=200; stored' });
    expect(b).toMatchObject({ body: 'first-last', cacheStatus: 'roomgate; fwd=uri-miss; fwd-status=200; stored; collapsed' });
    expect(seen).toHaveLength(1);
    expect((await get(g, '/streamed')).cacheStatus).toBe('roomgate; hit; ttl=60');
  });

  it('requests waiting on one fetch whose answer is not storable each get their own answer (the fuzzer found them given the first one)', async () => {
    const g = await gateway({ uncacheableMs: 0 });
    let n = 0;
    const answers = Array.from({ length: 8 }, () => {
      streamingQueue.push(async (res) => {
        const mine = ++n;
        await new Promise((r) => setTimeout(r, 150)); // the others join while this one waits
        res.writeHead(200, { 'Content-Type': 'text/plain' }); // no freshness: not storable
        res.end(`answer ${mine}`);
      });
      return get(g, '/personal');
    });
    const got = await Promise.all(answers);
    expect(seen).toHaveLength(8);
    expect(new Set(got.map((a) => a.body)).size).toBe(8);
    for (const a of got) expect(a.cacheStatus).toMatch(/^roomgate; fwd=(uri-miss; fwd-status=200; detail=no-freshness|bypass; detail=uncacheable)$/);
  });

  it("by default a client's no-cache is ignored: the stored copy is served, the backend not asked", async () => {
    const g = await gateway({});
    script = { status: 200, headers: { 'Cache-Control': 'max-age=60' }, body: 'one' };
    await get(g, '/kept');
    const before = seen.length;
    script = { status: 200, headers: { 'Cache-Control': 'max-age=60' }, body: 'injected' };
    expect(await get(g, '/kept', { 'Cache-Control': 'no-cache' })).toMatchObject({ body: 'one', cacheStatus: 'roomgate; hit; ttl=60' });
    expect(await get(g, '/kept', { Pragma: 'no-cache' })).toMatchObject({ body: 'one' });
    expect(seen.length).toBe(before);
  });

  it('with honorClientNoCache, a client asking for a fresh answer (no-cache) gets one from the backend, which is stored', async () => {
    const g = await gateway({ honorClientNoCache: true });
    script = { status: 200, headers: { 'Cache-Control': 'max-age=60' }, body: 'one' };
    await get(g, '/reload');
    script = { status: 200, headers: { 'Cache-Control': 'max-age=60' }, body: 'two' };
    expect(await get(g, '/reload', { 'Cache-Control': 'no-cache' })).toMatchObject({ body: 'two', cacheStatus: 'roomgate; fwd=request; fwd-status=200; stored' });
    expect(await get(g, '/reload')).toMatchObject({ body: 'two', cacheStatus: 'roomgate; hit; ttl=60' });
  });
});
