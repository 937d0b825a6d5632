// What a review of the page cache found, each pinned on real sockets through a real gateway (in
// this process, so the cache clock can be moved and its state read) in front of a real backend
// whose answer to each path the test writes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import type { PageCache } from '../../src/cache/page-cache.js';
import type { BackendPool } from '../../src/runtime/pool.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const T0 = 1_800_000_000_000;
const clock = { t: T0 };
const handlers = new Map<string, Handler>();
const seen: { url: string; headers: http.IncomingHttpHeaders }[] = [];
let backend: http.Server;
let dir: string;
const gateways: Gateway[] = [];
const sockets = new Set<net.Socket>();

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    const h = handlers.get((req.url ?? '').split('?')[0] ?? '');
    if (h === undefined) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      return res.end('no handler\n');
    }
    h(req, res);
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  dir = mkdtempSync(join(tmpdir(), 'roomgate-cache-review-'));
});

afterEach(async () => {
  for (const s of sockets) s.destroy();
  sockets.clear();
  backend.closeAllConnections();
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  handlers.clear();
  seen.length = 0;
  clock.t = T0;
});

afterAll(async () => {
  backend.closeAllConnections();
  await new Promise<void>((r) => backend.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

async function gateway(cache: Record<string, unknown>, proxy: Record<string, unknown> = {}, more: Record<string, unknown> = {}): Promise<Gateway> {
  const config = { ...(Object.keys(proxy).length > 0 ? { proxy } : {}), cache: { paths: ['/'], ...cache }, ...more };
  const g = await startInProcessGateway(dir, `http://127.0.0.1:${(backend.address() as AddressInfo).port}`, config, { cacheClock: () => clock.t });
  gateways.push(g);
  return g;
}

const cacheOf = (g: Gateway): PageCache => (g as unknown as { cache: PageCache }).cache;
const poolOf = (g: Gateway): BackendPool => (g as unknown as { pool: BackendPool }).pool;

interface Got {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function get(g: Gateway, path: string, headers: Record<string, string> = {}): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: g.port, path, headers, agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
  });
}

async function until(what: string, ok: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a 304 refresh never brings per-client fields into the stored copy', () => {
  it("a Set-Cookie on the backend's 304 is not stored with the copy nor served to later clients", async () => {
    const g = await gateway({});
    let n = 0;
    handlers.set('/r304', (req, res) => {
      n++;
      if (req.headers['if-none-match'] === '"v1"') {
        // e.g. Django's session or CSRF middleware setting a fresh cookie on this one answer
        res.writeHead(304, { ETag: '"v1"', 'Cache-Control': 'max-age=10', 'Set-Cookie': 'sessionid=issued-to-the-refreshing-client; Path=/' });
        return res.end();
      }
      res.writeHead(200, { ETag: '"v1"', 'Cache-Control': 'max-age=10', 'Content-Type': 'text/plain' });
      res.end('public page');
    });
    const first = await get(g, '/r304');
    expect(first.headers['cache-status']).toBe('roomgate; fwd=uri-miss; fwd-status=200; stored');
    clock.t = T0 + 10_000;
    const refreshing = await get(g, '/r304');
    expect(refreshing.headers['cache-status']).toBe('roomgate; fwd=stale; fwd-status=304');
    expect(n).toBe(2);
    // Another client, a fresh hit: it must not get the cookie the backend gave the refresh.
    clock.t = T0 + 11_000;
    const other = await get(g, '/r304');
    expect(other.headers['cache-status']).toMatch(/^roomgate; hit/);
    expect(other.headers['set-cookie']).toBeUndefined();
  });

  it("a 304 saying Cache-Control: private removes the copy: it is not served to others within grace", async () => {
    const g = await gateway({ graceMs: 60_000 });
    handlers.set('/r304p', (req, res) => {
      if (req.headers['if-none-match'] === '"v1"') {
        res.writeHead(304, { ETag: '"v1"', 'Cache-Control': 'private, max-age=10' });
        return res.end();
      }
      res.writeHead(200, { ETag: '"v1"', 'Cache-Control': 'max-age=10' });
      res.end('was public');
    });
    await get(g, '/r304p');
    clock.t = T0 + 10_000;
    await get(g, '/r304p');
    clock.t = T0 + 11_000;
    const other = await get(g, '/r304p');
    // The copy now says it is one user's: a shared cache must not answer with it (fresh or stale).
    expect(other.headers['cache-status']).not.toMatch(/^roomgate; hit/);
  });
});

describe('a fill paused for a slow client', () => {
  it('goes on when that client leaves: the other waiter of a shared (too large) answer gets all of it, the backend request ends', async () => {
    const g = await gateway({ maxObjectBytes: 1024 });
    const size = 8 * 1024 * 1024;
    let backendClosed = false;
    handlers.set('/big', (_req, res) => {
      res.on('close', () => (backendClosed = true));
      // The head a little later, so that both clients are waiting on the one fill.
      setTimeout(() => {
        res.writeHead(200, { 'Cache-Control': 'max-age=60', 'Content-Length': String(size) });
        res.end(Buffer.alloc(size, 0x61));
      }, 300);
    });
    // Client A: asks and reads nothing, then goes away.
    const a = net.connect(g.port, '127.0.0.1');
    sockets.add(a);
    a.pause();
    a.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((r) => setTimeout(r, 50));
    // Client B: reads everything.
    let got = 0;
    let status = '';
    const bDone = new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port: g.port, path: '/big', headers: { host: 'x' }, agent: false }, (res) => {
        status = String(res.headers['cache-status']);
        res.on("data", (c: Buffer) => (got += c.length));
        res.on('end', () => resolve());
        res.on('error', reject);
      });
      req.on('error', reject);
    });
    // A's buffers fill; then A leaves.
    await new Promise((r) => setTimeout(r, 1_000));
    a.destroy();
    const timeout = new Promise<'hung'>((r) => setTimeout(() => r('hung'), 4_000).unref());
    const result = await Promise.race([bDone.then(() => 'done' as const), timeout]);
    expect({ result, got, status }).toEqual({ result: 'done', got: size, status: 'roomgate; fwd=uri-miss; fwd-status=200; detail=too-large; collapsed' });
    await until('the fill to finish', () => cacheOf(g).snapshot().fetching === 0, 2_000);
    expect(backendClosed).toBe(true);
  });

  it('whose only client leaves gives up its backend request (not held, not counted as fetching)', async () => {
    const g = await gateway({});
    const size = 8 * 1024 * 1024;
    let backendClosed = false;
    handlers.set('/big-private', (_req, res) => {
      res.on('close', () => (backendClosed = true));
      // Not storable: for the one client that asked.
      res.writeHead(200, { 'Cache-Control': 'private', 'Content-Length': String(size) });
      res.end(Buffer.alloc(size, 0x62));
    });
    const a = net.connect(g.port, '127.0.0.1');
    sockets.add(a);
    a.pause();
    a.write('GET /big-private HTTP/1.1\r\nHost: x\r\n\r\n');
    await until('the fetch to start', () => seen.length === 1);
    await new Promise((r) => setTimeout(r, 500));
    a.destroy();
    // What the page path does when its client leaves: the backend request is given up.
    await until('the fill to end after its client left', () => cacheOf(g).snapshot().fetching === 0 && backendClosed, 4_000);
  });
});

describe('accounting', () => {
  it("the backend's in-flight count holds while a fill's body still streams, as on the page path", async () => {
    const g = await gateway({});
    let release: (() => void) | null = null;
    handlers.set('/slow-body', (_req, res) => {
      res.writeHead(200, { 'Cache-Control': 'max-age=60', 'Content-Length': '10' });
      res.write('hello');
      release = () => res.end('world');
    });
    const answer = get(g, '/slow-body');
    await until('the head to be sent', () => release !== null);
    await new Promise((r) => setTimeout(r, 100));
    const inflight = poolOf(g).backends.find((b) => b.id === 'b1')?.inflight;
    (release as unknown as () => void)();
    await answer;
    expect(inflight).toBe(1);
  });

  it('a fill that times out is counted once in roomgate_http_requests_total (under the backend), as on the page path', async () => {
    const g = await gateway({}, { responseTimeoutMs: 200 });
    handlers.set('/timeout', () => {
      // never answers
    });
    const r = await get(g, '/timeout');
    expect(r.status).toBe(504);
    const m = await g.metrics.registry.getSingleMetricAsString('roomgate_http_requests_total');
    const total = m
      .split('\n')
      .filter((l) => l.startsWith('roomgate_http_requests_total{'))
      .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
    // One client request, one answer: counted once, as the page path counts a timeout.
    expect({ total, m }).toMatchObject({ total: 1 });
  });
});

describe('memory bound of the store', () => {
  it('the byte budget counts the keys: long URLs with tiny bodies stay within cache.maxBytes', async () => {
    const g = await gateway({ maxBytes: 200_000 });
    handlers.set('/k', (_req, res) => {
      res.writeHead(200, { 'Cache-Control': 'max-age=60' });
      res.end('x');
    });
    const long = 'a'.repeat(7_000);
    let keyBytes = 0;
    for (let i = 0; i < 100; i++) {
      const path = `/k?${i}-${long}`;
      keyBytes += path.length;
      await get(g, path);
    }
    const s = cacheOf(g).snapshot();
    // Each key holds its ~7 kB URL twice (the LRU's slot and the Vary map's primary key): the
    // budget counts both, so only as many as fit are kept (it once kept all 100 as ~31 kB).
    expect(s.bytes).toBeLessThanOrEqual(200_000);
    expect(s.objects).toBeLessThan(100);
    expect(s.bytes).toBeGreaterThanOrEqual(s.objects * 2 * (keyBytes / 100));
  });
});

describe('h2', () => {
  it('a GET with a body and no Content-Length (allowed on h2) is not answered from the cache: its body reaches the backend', async () => {
    const cert = join(dir, 'a.crt');
    const key = join(dir, 'a.key');
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '30', '-subj', '/CN=a.test', '-addext', 'subjectAltName=DNS:a.test'],
      { stdio: 'ignore', timeout: 10_000 },
    );
    const g = await gateway({}, {}, { tls: { certs: [{ cert, key }], reloadCheckMs: 0 } });
    const bodies: string[] = [];
    handlers.set('/h2body', (req, res) => {
      let b = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (b += c));
      req.on('end', () => {
        bodies.push(b);
        res.writeHead(200, { 'Cache-Control': 'max-age=60', 'Content-Length': String(5 + b.length) });
        res.end(`body=${b}`);
      });
    });
    const port = g.port;
    const ca = readFileSync(cert);
    const s = http2.connect(`https://a.test:${port}`, { createConnection: () => tlsConnect({ host: '127.0.0.1', port, servername: 'a.test', ca, ALPNProtocols: ['h2'] }) });
    try {
      const ask = (body: string | undefined): Promise<{ status: string; body: string }> =>
        new Promise((resolve, reject) => {
          const r = s.request({ ':method': 'GET', ':path': '/h2body' }, { endStream: body === undefined });
          let text = '';
          let status = '';
          const t = setTimeout(() => reject(new Error('h2 request timed out')), 5_000);
          r.on('response', (h) => (status = String(h['cache-status'])));
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => {
            clearTimeout(t);
            resolve({ status, body: text });
          });
          r.on('error', reject);
          if (body !== undefined) r.end(body);
        });
      await ask(undefined); // stored: "body="
      // As on HTTP/1.1 (Transfer-Encoding: chunked): not the cache's, forwarded with its body.
      const withBody = await ask('payload');
      expect(withBody).toEqual({ status: 'roomgate; fwd=bypass; detail=body', body: 'body=payload' });
      expect(bodies).toEqual(['', 'payload']);
    } finally {
      s.close();
    }
  });
});
