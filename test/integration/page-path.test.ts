// The HTTP/1.1 page path (GET/HEAD pages and assets through roomgate) as the two ends of the wire
// see it: a raw net client that writes exact bytes and reads them with the strict referee
// (test/conformance/strict-parser.ts), and a raw net backend that answers exact bytes and counts
// its TCP connections. What is pinned is what a client and a backend can observe, not how the
// gateway gets there, so the same file judges the node:http path and a byte-level one: framing
// (Content-Length, chunked, close-delimited, HEAD/204/304, 1xx), keep-alive on both sides
// (connection counts), pipelining, failures mid-way (cut bodies, resets, stale pooled
// connections, bytes after a complete answer), back-pressure, hop-by-hop fields in answers, and
// the head the backend gets. Malformed heads either way are the conformance corpora's
// (test/conformance); this file uses valid bytes only. Neighbours: the response corpus also has
// 1xx, 204/304/HEAD with a body, two answers in one write and cut bodies, judged with a follow-up
// from another client; here the follow-up is on the same client connection and the backend
// connections are counted. forwarding.test.ts has X-Forwarded-* and hop-by-hop request headers in
// full; hardening.test.ts the GET retry after a reset (separate client connections).
// Every test starts with no backend connection (beforeEach closes them), so counts are exact.
import { createHash, randomBytes } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, stop, stopAll, waitFor, withTimeout, type GatewayProc } from '../support/processes.js';
import { aliveProblem } from '../conformance/raw.js';
import { fieldValues, parseResponse, parseRequest, type ParsedRequest, type ParsedResponse } from '../conformance/strict-parser.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const latin1 = (s: string | Buffer): Buffer => (typeof s === 'string' ? Buffer.from(s, 'latin1') : s);

// ------------------------------------------------------------------------------------------------
// The backend: a net server that parses requests with the referee and lets each test script the
// answer bytes (and when to close or reset). Answers on one connection go out in request order.

interface BConn {
  readonly id: number;
  readonly socket: net.Socket;
  readonly requests: ParsedRequest[];
  closedAt: number | null;
  /** The referee's verdict if the gateway's bytes broke its rules. */
  error: string | null;
}

type Handler = (req: ParsedRequest, conn: BConn) => void | Promise<void>;

/** A 200 with Content-Length (HEAD: the length of the body a GET would get, and no body). */
function ok(body: string | Buffer, extra = '', head = false, statusLine = 'HTTP/1.1 200 OK'): Buffer {
  const b = latin1(body);
  return Buffer.concat([latin1(`${statusLine}\r\n${extra}Content-Type: application/octet-stream\r\nContent-Length: ${b.length}\r\n\r\n`), head ? Buffer.alloc(0) : b]);
}

/** The default answer: the body is "METHOD target", so every answer names its own request. */
const echo: Handler = (req, c) => {
  c.socket.write(ok(`${req.method} ${req.target}`, '', req.method === 'HEAD'));
};

/** Writes, and waits for 'drain' when the socket's buffer is full (a backend that respects back-pressure). */
async function writeWithDrain(s: net.Socket, b: Buffer): Promise<void> {
  if (s.destroyed) throw new Error('backend socket closed');
  if (s.write(b)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (): void => {
      s.off('drain', done);
      s.off('close', gone);
      resolve();
    };
    const gone = (): void => {
      s.off('drain', done);
      reject(new Error('backend socket closed'));
    };
    s.on('drain', done);
    s.on('close', gone);
  });
}

class PageBackend {
  readonly conns: BConn[] = [];
  handler: Handler = echo;
  port = 0;
  private server: net.Server | null = null;
  private nextId = 1;

  async start(): Promise<void> {
    this.server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  private accept(socket: net.Socket): void {
    const conn: BConn = { id: this.nextId++, socket, requests: [], closedAt: null, error: null };
    this.conns.push(conn);
    let buf: Buffer = Buffer.alloc(0);
    let queue: Promise<unknown> = Promise.resolve();
    socket.on('error', () => undefined);
    socket.on('close', () => (conn.closedAt = Date.now()));
    socket.on('data', (chunk: Buffer) => {
      if (conn.error !== null) return;
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        const step = parseRequest(buf, 0);
        if (step.kind === 'incomplete') return;
        if (step.kind === 'error') {
          conn.error = `${step.reason} at byte ${step.at}: ${JSON.stringify(buf.toString('latin1').slice(0, 300))}`;
          socket.destroy();
          return;
        }
        const req = step.message;
        buf = buf.subarray(req.end);
        conn.requests.push(req);
        const handler = this.handler;
        queue = queue.then(async () => {
          if (!socket.destroyed) await handler(req, conn);
        }).catch(() => socket.destroy());
      }
    });
  }

  /** Every request, with the id of the connection it came on. */
  requests(): (ParsedRequest & { conn: number })[] {
    return this.conns.flatMap((c) => c.requests.map((r) => ({ ...r, conn: c.id })));
  }

  /** The connection a request for target came on (the first such request). */
  connOf(target: string): number | undefined {
    return this.requests().find((r) => r.target === target)?.conn;
  }

  /** One line per connection: its requests (for counts with a readable failure). */
  summary(): string[] {
    return this.conns.map((c) => `conn ${c.id}: ${c.requests.map((r) => `${r.method} ${r.target}`).join(', ') || '(no request)'}${c.closedAt === null ? '' : ' (closed)'}`);
  }

  errors(): string[] {
    return this.conns.flatMap((c) => (c.error === null ? [] : [`conn ${c.id}: ${c.error}`]));
  }

  /** Closes every connection (the gateway's pooled ones too), forgets them, back to the echo. */
  async reset(): Promise<void> {
    this.handler = echo;
    for (const c of this.conns) c.socket.destroy();
    await waitFor('backend connections closed', 2_000, () => this.conns.every((c) => c.closedAt !== null));
    this.conns.length = 0;
    // The gateway reads the FINs of its pooled connections.
    await sleep(50);
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

// ------------------------------------------------------------------------------------------------
// The client: a net socket, exact bytes out, and a strict reader of the answers in.

interface Answer {
  readonly status: number;
  readonly reason: string;
  readonly headers: ParsedResponse['headers'];
  readonly body: Buffer;
  readonly framing: ParsedResponse['framing'];
  readonly trailers: ParsedResponse['trailers'];
  /** 1xx answers read before this one. */
  readonly interim: ParsedResponse[];
}

const clients = new Set<RawClient>();

class RawClient {
  closed = false;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private joined: Buffer = Buffer.alloc(0);
  /** Offset of the first byte no response has claimed yet. */
  private pos = 0;
  private waiters: (() => void)[] = [];

  private constructor(readonly sock: net.Socket) {
    clients.add(this);
    sock.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.size += d.length;
      this.wake();
    });
    sock.on('error', () => undefined);
    sock.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static open(port: number): Promise<RawClient> {
    return withTimeout(
      new Promise<RawClient>((resolve, reject) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('connect', () => resolve(new RawClient(s)));
        s.once('error', reject);
      }),
      5_000,
      'client connect',
    );
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Resolves at the next data or close, or after ms. */
  private event(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  get received(): Buffer {
    if (this.joined.length !== this.size) this.joined = Buffer.concat(this.chunks, this.size);
    return this.joined;
  }

  /** Bytes received so far. */
  get length(): number {
    return this.size;
  }

  /** Everything received so far as latin1 text. */
  text(): string {
    return this.received.toString('latin1');
  }

  /** Bytes after the last response read. */
  unread(): Buffer {
    return this.received.subarray(this.pos);
  }

  send(...parts: (string | Buffer)[]): void {
    for (const p of parts) this.sock.write(latin1(p));
  }

  /** Writes parts with gapMs between them. */
  async sendSlowly(parts: readonly string[], gapMs: number): Promise<void> {
    for (const [i, p] of parts.entries()) {
      if (i > 0) await sleep(gapMs);
      this.sock.write(latin1(p));
    }
  }

  /**
   * The next final answer (1xx before it collected in `interim`), read strictly; rejects on a
   * framing error, on a close before it is complete, and after timeoutMs. minBytes: do not parse
   * before that many bytes are buffered (big bodies).
   */
  async response(method = 'GET', timeoutMs = 5_000, minBytes = 0): Promise<Answer> {
    const deadline = Date.now() + timeoutMs;
    const interim: ParsedResponse[] = [];
    for (;;) {
      if (this.size - this.pos >= minBytes || this.closed) {
        const buf = this.received;
        const step = parseResponse(buf, method, this.pos, this.closed);
        if (step.kind === 'error') {
          throw new Error(`the answer to ${method} breaks the referee's rules (${step.reason} at ${step.at}): ${JSON.stringify(buf.toString('latin1', this.pos, this.pos + 400))}`);
        }
        if (step.kind === 'message') {
          const m = step.message;
          this.pos = m.end;
          if (m.status < 200) {
            interim.push(m);
            continue;
          }
          return { status: m.status, reason: m.reason, headers: m.headers, body: Buffer.from(m.body), framing: m.framing, trailers: m.trailers, interim };
        }
        if (this.closed) throw new Error(`connection closed before a complete answer to ${method}: ${JSON.stringify(buf.toString('latin1', this.pos, this.pos + 400))}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no complete answer to ${method} within ${timeoutMs} ms: ${JSON.stringify(this.received.toString('latin1', this.pos, this.pos + 400))}`);
      await this.event(left);
    }
  }

  /** True once the gateway closed the connection, false if it is still open after ms. */
  async closedWithin(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) await this.event(deadline - Date.now());
    return this.closed;
  }

  destroy(): void {
    this.sock.destroy();
    clients.delete(this);
  }
}

const GET = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: app.example\r\n${extra}\r\n`;
const HEAD = (path: string, extra = ''): string => `HEAD ${path} HTTP/1.1\r\nHost: app.example\r\n${extra}\r\n`;

/** Tokens of every Connection line of an answer, lower-cased. */
const connectionTokens = (m: { headers: ParsedResponse['headers'] }): string[] =>
  fieldValues(m, 'connection').flatMap((v) => v.split(',')).map((t) => t.trim().toLowerCase()).filter((t) => t !== '');

/** One GET on c and its answer, which must be the echo of that GET. */
async function echoed(c: RawClient, path: string, extra = ''): Promise<Answer> {
  c.send(GET(path, extra));
  const r = await c.response();
  expect(r.status, path).toBe(200);
  expect(r.body.toString('latin1'), path).toBe(`GET ${path}`);
  return r;
}

/** Exactly n backend connections since the test began; the failure lists what each carried. */
function expectBackendConnections(n: number): void {
  expect(be.summary().length, be.summary().join('\n')).toBe(n);
}

// ------------------------------------------------------------------------------------------------

let be: PageBackend;
let gw: GatewayProc;

beforeAll(async () => {
  be = new PageBackend();
  await be.start();
});

afterAll(async () => {
  for (const c of clients) c.destroy();
  await stopAll();
  await be.close();
});

beforeEach(async () => {
  await be.reset();
});

afterEach(() => {
  for (const c of clients) c.destroy();
  // The gateway never sent the backend bytes the referee refuses.
  expect(be.errors()).toEqual([]);
});

// The same behaviour from both page paths: the byte-level one (proxy.leanPages, the default) and
// node:http's, which takes every request when it is switched off.
describe.each([
  ['the byte-level page path', true],
  ['node:http (proxy.leanPages: false)', false],
])('%s', (_name, lean) => {
  beforeAll(async () => {
    await be.reset();
    // health.path null is a TCP connect check, made at start and then every intervalMs: once an
    // hour, so that every backend connection a test counts is a page request's.
    gw = await startGateway({
      backends: [`p1=http://127.0.0.1:${be.port}`],
      // An idle client connection stays a minute: a close within the tests' 10 s guards is the
      // gateway's answer to what the test did, not its idle timer.
      config: { health: { path: null, intervalMs: 3_600_000 }, proxy: { leanPages: lean }, listen: { keepAliveTimeoutMs: 60_000 } },
    });
    await waitFor('the first health check', 5_000, () => be.conns.length > 0);
  });

  afterAll(async () => {
    const metrics = await (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`)).text();
    const handovers = [...metrics.matchAll(/^roomgate_page_handovers_total\{reason="([^"]+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])] as const);
    if (lean) {
      // Only the requests outside the byte-level subset went to node:http: the POST (the GET with
      // Content-Length after it is on the same connection), the HTTP/1.0 client and the health
      // check of aliveProblem(); every other connection stayed on the lean path.
      expect(handovers.map(([r]) => r).sort()).toEqual(['method', 'own-path', 'version']);
      expect(handovers.reduce((n, [, k]) => n + k, 0)).toBeLessThan(5);
    } else expect(handovers).toEqual([]);
    await stop(gw);
  });

  describe('keep-alive on both sides', () => {
    it('50 sequential GETs on one client connection: answered in order over one backend connection, and the client connection stays open', async () => {
      const c = await RawClient.open(gw.port);
      for (let i = 0; i < 50; i++) {
        const r = await echoed(c, `/ka/${i}`);
        expect(connectionTokens(r), `answer ${i}`).not.toContain('close');
      }
      expect(c.unread()).toHaveLength(0);
      expect(await c.closedWithin(200)).toBe(false);
      expectBackendConnections(1);
      expect(be.conns[0]?.requests.map((r) => r.target)).toEqual(Array.from({ length: 50 }, (_, i) => `/ka/${i}`));
      expect(be.conns[0]?.closedAt).toBeNull();
      // Still usable after a pause (well below listen.keepAliveTimeoutMs).
      await sleep(300);
      await echoed(c, '/ka/after-pause');
      expectBackendConnections(1);
    });

    it('two client connections doing 20 GETs each at the same time use at most 3 backend connections', async () => {
      const [a, b] = await Promise.all([RawClient.open(gw.port), RawClient.open(gw.port)]);
      const run = async (c: RawClient, tag: string): Promise<void> => {
        for (let i = 0; i < 20; i++) await echoed(c, `/two/${tag}/${i}`);
      };
      await Promise.all([run(a, 'a'), run(b, 'b')]);
      expect(be.requests()).toHaveLength(40);
      expect(be.summary().length, be.summary().join('\n')).toBeLessThanOrEqual(3);
      expect(a.closed || b.closed).toBe(false);
    });
  });

  describe('pipelining', () => {
    it('three requests in one write (GET, HEAD, GET) are answered in order, each complete, even when the backend answers them out of order', async () => {
      // The first answer is the slowest: if the gateway sends them to the backend on separate
      // connections, the third is ready before the first.
      const delays: Record<string, number> = { '/pipe/1': 200, '/pipe/2': 0, '/pipe/3': 60 };
      be.handler = async (req, conn) => {
        await sleep(delays[req.target] ?? 0);
        await echo(req, conn);
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/pipe/1') + HEAD('/pipe/2') + GET('/pipe/3'));
      const r1 = await c.response('GET');
      const r2 = await c.response('HEAD');
      const r3 = await c.response('GET');
      expect([r1.status, r2.status, r3.status]).toEqual([200, 200, 200]);
      expect(r1.body.toString()).toBe('GET /pipe/1');
      expect(r2.body).toHaveLength(0);
      expect(fieldValues(r2, 'content-length')).toEqual([String('HEAD /pipe/2'.length)]);
      expect(r3.body.toString()).toBe('GET /pipe/3');
      expect(c.unread()).toHaveLength(0);
      // The connection goes on after the pipelined batch.
      await echoed(c, '/pipe/after');
      expect(be.requests().map((r) => `${r.method} ${r.target}`).sort()).toEqual(['GET /pipe/1', 'GET /pipe/3', 'GET /pipe/after', 'HEAD /pipe/2']);
    });
  });

  describe('Connection: close from the client', () => {
    it('is answered with Connection: close, the client connection is closed after the answer, and the backend connection stays keep-alive', async () => {
      const c = await RawClient.open(gw.port);
      c.send(GET('/closing', 'Connection: close\r\n'));
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.toString()).toBe('GET /closing');
      expect(connectionTokens(r)).toContain('close');
      expect(await c.closedWithin(10_000)).toBe(true);
      expect(c.unread()).toHaveLength(0);
      // Connection is hop-by-hop: the backend is not told to close.
      const seen = be.requests()[0] as ParsedRequest;
      expect(fieldValues(seen, 'connection').join(',').toLowerCase()).not.toContain('close');
      // The next client's request rides the same backend connection.
      const d = await RawClient.open(gw.port);
      await echoed(d, '/after-close');
      expectBackendConnections(1);
    });
  });

  describe('framing of the backend answer', () => {
    // Every byte value, so any re-encoding shows.
    const BINARY = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(4_000), latin1('\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n')]);

    it('Content-Length: the exact body bytes, and the client and backend connections are used again', async () => {
      be.handler = (req, conn) => {
        if (req.target === '/cl') conn.socket.write(ok(BINARY));
        else echo(req, conn);
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/cl'));
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.equals(BINARY)).toBe(true);
      await echoed(c, '/after-cl');
      expectBackendConnections(1);
    });

    it('chunked with extensions and a trailer: the exact body bytes, no extension or trailer reaches the client, both connections used again', async () => {
      const big = randomBytes(70_000);
      const parts = [latin1('hello'), big, BINARY, latin1('!')];
      be.handler = async (req, conn) => {
        if (req.target !== '/chunked') return echo(req, conn);
        const s = conn.socket;
        s.write('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
        await sleep(20);
        s.write(Buffer.concat([latin1('5;ext-secret=1\r\n'), parts[0] as Buffer, latin1('\r\n')]));
        await sleep(20);
        s.write(Buffer.concat([latin1(`${big.length.toString(16)};q="ext-quoted-secret"\r\n`), big, latin1('\r\n')]));
        // No BWS before ';' ("1 ;x"): RFC 9112 lets a recipient accept it, but senders must not
        // produce it and Node's parser refuses it (the client connection is cut), so it is not pinned.
        s.write(Buffer.concat([latin1(`${BINARY.length.toString(16).toUpperCase()}\r\n`), BINARY, latin1('\r\n1;lone-ext-secret\r\n!\r\n')]));
        await sleep(20);
        s.write('0;last-ext-secret\r\nX-Trailer-Secret: trailer-value\r\n\r\n');
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/chunked'));
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.equals(Buffer.concat(parts))).toBe(true);
      expect(r.trailers).toEqual([]);
      const text = c.text();
      for (const leak of ['ext-secret', 'ext-quoted-secret', 'lone-ext-secret', 'last-ext-secret', 'X-Trailer-Secret', 'trailer-value']) {
        expect(text.includes(leak), leak).toBe(false);
      }
      await echoed(c, '/after-chunked');
      expectBackendConnections(1);
    });

    it('close-delimited (no length, the backend closes): the exact body, complete; an open client connection is still usable', async () => {
      be.handler = async (req, conn) => {
        if (req.target !== '/until-close') return echo(req, conn);
        conn.socket.write(Buffer.concat([latin1('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n'), BINARY.subarray(0, 1000)]));
        await sleep(30);
        conn.socket.end(BINARY.subarray(1000));
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/until-close'));
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.equals(BINARY)).toBe(true);
      // Re-framed (chunked) for a keep-alive client, or close-delimited to the client too: either is
      // correct. A re-framed answer leaves the connection usable.
      if (r.framing !== 'close') {
        expect(await c.closedWithin(100)).toBe(false);
        await echoed(c, '/after-until-close');
      } else expect(c.closed).toBe(true);
    });

    it('an HTTP/1.0 client gets a chunked backend answer without chunked framing, and its connection is closed after it', async () => {
      be.handler = (req, conn) => {
        conn.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n');
      };
      const c = await RawClient.open(gw.port);
      c.send('GET /old-client HTTP/1.0\r\nHost: app.example\r\n\r\n');
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.toString()).toBe('hello world');
      expect(fieldValues(r, 'transfer-encoding')).toEqual([]);
      expect(await c.closedWithin(10_000)).toBe(true);
    });
  });

  describe('answers without a body', () => {
    it('HEAD with Content-Length: 1000 (and HEAD with chunked), 204 and 304: heads only, the next request on the connection works, one backend connection throughout', async () => {
      be.handler = (req, conn) => {
        const s = conn.socket;
        if (req.target === '/head') s.write('HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n');
        else if (req.target === '/head-chunked') s.write('HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n');
        else if (req.target === '/no-content') s.write('HTTP/1.1 204 No Content\r\nX-Kind: nothing\r\n\r\n');
        else if (req.target === '/not-modified') s.write('HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nCache-Control: max-age=60\r\n\r\n');
        else echo(req, conn);
      };
      const c = await RawClient.open(gw.port);

      c.send(HEAD('/head'));
      const head = await c.response('HEAD');
      expect(head.status).toBe(200);
      expect(head.body).toHaveLength(0);
      expect(fieldValues(head, 'content-length')).toEqual(['1000']);
      await echoed(c, '/after-head');

      c.send(HEAD('/head-chunked'));
      const headChunked = await c.response('HEAD');
      expect(headChunked.status).toBe(200);
      expect(headChunked.body).toHaveLength(0);
      await echoed(c, '/after-head-chunked');

      c.send(GET('/no-content'));
      const noContent = await c.response();
      expect(noContent.status).toBe(204);
      expect(fieldValues(noContent, 'x-kind')).toEqual(['nothing']);
      // RFC 9110 8.6 / RFC 9112 6.1: no Content-Length or Transfer-Encoding on a 204.
      expect(fieldValues(noContent, 'content-length')).toEqual([]);
      expect(fieldValues(noContent, 'transfer-encoding')).toEqual([]);
      await echoed(c, '/after-no-content');

      c.send(GET('/not-modified', 'If-None-Match: "v1"\r\n'));
      const notModified = await c.response();
      expect(notModified.status).toBe(304);
      expect(fieldValues(notModified, 'etag')).toEqual(['"v1"']);
      expect(fieldValues(notModified, 'transfer-encoding')).toEqual([]);
      await echoed(c, '/after-not-modified');

      expect(c.unread()).toHaveLength(0);
      expectBackendConnections(1);
    });
  });

  describe('interim (1xx) answers', () => {
    it('a 101 to a GET that asked for no upgrade (with an Upgrade of its own, or none): 502, and nothing of the backend connection reaches the client', async () => {
      be.handler = (req, conn) => {
        if (req.target === '/switch') conn.socket.write('HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\nafter the switch');
        else if (req.target === '/switch-bare') conn.socket.write('HTTP/1.1 101 Switching Protocols\r\n\r\nafter the switch');
        else echo(req, conn);
      };
      for (const path of ['/switch', '/switch-bare']) {
        const c = await RawClient.open(gw.port);
        c.send(GET(path));
        const r = await c.response();
        expect(r.status, path).toBe(502);
        await sleep(100);
        expect(c.text(), path).not.toContain('after the switch');
        c.destroy();
      }
    });

    it('103 Early Hints and 100 Continue before the 200 of a GET: the client gets the 200 and its body, and the connection goes on', async () => {
      be.handler = async (req, conn) => {
        const s = conn.socket;
        if (req.target === '/hints') {
          s.write('HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n');
          await sleep(50);
          s.write(ok('after hints'));
        } else if (req.target === '/continue') {
          s.write('HTTP/1.1 100 Continue\r\n\r\n');
          await sleep(50);
          s.write(ok('after continue'));
        } else echo(req, conn);
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/hints'));
      const hints = await c.response();
      expect(hints.status).toBe(200);
      expect(hints.body.toString()).toBe('after hints');
      await echoed(c, '/after-hints');
      c.send(GET('/continue'));
      const cont = await c.response();
      expect(cont.status).toBe(200);
      expect(cont.body.toString()).toBe('after continue');
      await echoed(c, '/after-continue');
      expectBackendConnections(1);
    });
  });

  // The byte-level path's bound (node:http's client reads interim answers until the response
  // timeout): more than 16 before the final answer is a 502, the connection is not reused.
  if (lean)
    describe('a flood of interim answers', () => {
      it('more than 16 interim (1xx) answers get the client a 502 at once, and its next request its own answer', async () => {
        be.handler = (req, conn) => {
          if (req.target !== '/flood-1xx') return echo(req, conn);
          conn.socket.write('HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n'.repeat(200));
        };
        const c = await RawClient.open(gw.port);
        c.send(GET('/flood-1xx'));
        const r = await c.response();
        expect(r.status).toBe(502);
        await echoed(c, '/after-flood');
        expectBackendConnections(2);
      });
    });

  describe('a client that ends its side (FIN) while its request is in flight', () => {
    it('is not answered: the request is abandoned and its backend connection closed at once, as node:http does', async () => {
      be.handler = (req, conn) => {
        if (req.target !== '/never') return echo(req, conn);
        // Never answers: only the client's FIN can end this.
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/never'));
      await waitFor('the request at the backend', 5_000, () => be.connOf('/never') !== undefined);
      c.sock.end();
      const conn = be.conns.find((k) => k.id === be.connOf('/never'));
      // Only the FIN can end it: the backend never answers and responseTimeoutMs is 60 s, far past
      // this hang guard (how soon is not this test's: speed is bench/'s).
      await waitFor('the backend connection closed', 10_000, () => conn?.closedAt !== null);
      expect(await c.closedWithin(10_000)).toBe(true);
      expect(c.text()).toBe('');
    });
  });

  describe('bytes after a complete answer', () => {
    const cases: [string, Handler][] = [
      ['garbage in the same write', (_req, conn) => void conn.socket.write(Buffer.concat([ok('first'), latin1('GARBAGE-BYTES\r\n\r\n')]))],
      ['a second, unsolicited answer in the same write', (_req, conn) => void conn.socket.write(Buffer.concat([ok('first'), ok('unsolicited-answer', 'X-Unsolicited: 1\r\n')]))],
    ];
    for (const [name, polluter] of cases) {
      it(`${name}: the client gets exactly the first answer, its next request its own answer, and the polluted backend connection is not used again`, async () => {
        be.handler = (req, conn) => (req.target === '/polluted' ? polluter(req, conn) : echo(req, conn));
        const c = await RawClient.open(gw.port);
        c.send(GET('/polluted'));
        const r = await c.response();
        expect(r.status).toBe(200);
        expect(r.body.toString()).toBe('first');
        await echoed(c, '/next');
        expect(c.text()).not.toMatch(/GARBAGE|unsolicited|X-Unsolicited/);
        expect(c.unread()).toHaveLength(0);
        const polluted = be.connOf('/polluted');
        expect(polluted).toBeDefined();
        expect(be.connOf('/next')).not.toBe(polluted);
        await waitFor('the polluted backend connection closed', 2_000, () => be.conns.find((k) => k.id === polluted)?.closedAt !== null);
      });
    }

    it('an unsolicited answer arriving later, while the backend connection is idle: the next request still gets its own answer', async () => {
      be.handler = async (req, conn) => {
        if (req.target !== '/late') return echo(req, conn);
        conn.socket.write(ok('first'));
        await sleep(30);
        conn.socket.write(ok('late-unsolicited', 'X-Unsolicited: 1\r\n'));
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/late'));
      const r = await c.response();
      expect(r.body.toString()).toBe('first');
      // Long enough for the late bytes to reach the gateway before the next request goes out.
      // (Sent sooner, the backend's late answer would follow a request the gateway already wrote:
      // no proxy can tell it from that request's answer.)
      await sleep(150);
      await echoed(c, '/next');
      expect(c.text()).not.toMatch(/unsolicited|X-Unsolicited/);
      // Not pinned: whether that connection is used again (today it is; see the commit message).
    });
  });

  describe('the backend fails mid-answer', () => {
    for (const how of ['close', 'reset'] as const) {
      it(`Content-Length: 1000, 10 bytes, then a ${how}: the client connection is closed short of 1000 bytes, and the gateway serves the next connection`, async () => {
        be.handler = async (req, conn) => {
          if (req.target !== '/cut') return echo(req, conn);
          const s = conn.socket;
          s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n');
          await sleep(30);
          s.write('0123456789');
          await sleep(30);
          if (how === 'close') s.end();
          else s.resetAndDestroy();
        };
        const c = await RawClient.open(gw.port);
        c.send(GET('/cut'));
        expect(await c.closedWithin(3_000)).toBe(true);
        // Never a complete answer: the referee, told the stream ended, still finds it incomplete.
        const step = parseResponse(c.received, 'GET', 0, true);
        expect(step.kind, c.text().slice(0, 300)).toBe('incomplete');
        const bodyStart = c.text().indexOf('\r\n\r\n');
        if (bodyStart >= 0) {
          expect(c.text()).toMatch(/^HTTP\/1\.1 200 /);
          expect(c.received.length - (bodyStart + 4)).toBeLessThan(1000);
        }
        const d = await RawClient.open(gw.port);
        await echoed(d, '/after-cut');
        expect(await aliveProblem(gw)).toBeNull();
      });
    }
  });

  describe('a pooled backend connection the backend closed', () => {
    it('closed right after its first answer (no Connection: close): the second GET on the client connection still gets 200', async () => {
      be.handler = (req, conn) => {
        conn.socket.end(ok(`${req.method} ${req.target}`));
      };
      const c = await RawClient.open(gw.port);
      await echoed(c, '/first');
      await echoed(c, '/second');
      await echoed(c, '/third');
      expect(be.connOf('/second')).not.toBe(be.connOf('/first'));
    });

    it('closed as the next request arrives, without an answer: the GET is sent again on a new connection and gets 200', async () => {
      be.handler = (req, conn) => {
        if (conn.requests.length > 1) conn.socket.end();
        else echo(req, conn);
      };
      const c = await RawClient.open(gw.port);
      await echoed(c, '/warm');
      await echoed(c, '/retried');
      const seen = be.requests().filter((r) => r.target === '/retried');
      expect(seen).toHaveLength(2);
      expect(seen[0]?.conn).not.toBe(seen[1]?.conn);
      expect(c.closed).toBe(false);
    });
  });

  describe('back-pressure', () => {
    it('a 5 MB body to a client that starts reading after 1 s, slowly, arrives whole', async () => {
      const size = 5 * 1024 * 1024;
      const body = randomBytes(size);
      be.handler = async (req, conn) => {
        if (req.target !== '/big') return echo(req, conn);
        await writeWithDrain(conn.socket, latin1(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`));
        for (let off = 0; off < size; off += 64 * 1024) await writeWithDrain(conn.socket, body.subarray(off, off + 64 * 1024));
      };
      const c = await RawClient.open(gw.port);
      c.sock.pause();
      c.send(GET('/big'));
      await sleep(1_000);
      // Slowly: a pause after each read for the first half second.
      const slowUntil = Date.now() + 500;
      c.sock.on('data', () => {
        if (Date.now() < slowUntil) {
          c.sock.pause();
          setTimeout(() => c.sock.resume(), 10);
        }
      });
      c.sock.resume();
      const r = await c.response('GET', 10_000, size);
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(size);
      expect(sha256(r.body)).toBe(sha256(body));
      await echoed(c, '/after-big');
    });

    // The byte-level path only: node:http parses every pipelined request that arrived in one read
    // and dispatches them all at once (each on its own backend connection), reading on only when
    // its output has drained; the byte-level path asks the backend for one answer at a time.
    if (lean) it('a client that pipelines 1,000 requests for 32 KB pages and does not read gets no answers made beyond what the socket buffers take; then all arrive whole', async () => {
      const PAGE = 32 * 1024;
      const N = 1_000;
      be.handler = (req, conn) => {
        if (!req.target.startsWith('/kb/')) return echo(req, conn);
        conn.socket.write(Buffer.concat([latin1(`HTTP/1.1 200 OK\r\nContent-Length: ${PAGE}\r\n\r\n`), Buffer.alloc(PAGE, req.target.length)]));
      };
      const c = await RawClient.open(gw.port);
      c.sock.pause();
      c.send(Array.from({ length: N }, (_, n) => GET(`/kb/${n}`)).join(''));
      await sleep(1_000);
      // Each answer fits the socket's buffer whole, so only the connection's own check stops the
      // next one: without it all 1,000 (32 MB) would be made and held in the gateway's memory.
      // What the socket buffers on the way take (about 7 MB on Linux loopback) is allowed.
      expect(be.requests().length).toBeLessThan(400);
      c.sock.resume();
      // The client's count is in bytes, heads included: N pages' worth can arrive before the last
      // answer is even asked for (the test once read 999 requests at that point). So the wait is
      // for every request at the backend too.
      await waitFor(`${N} answers of 32 KB`, 15_000, () => be.requests().length >= N && c.length >= N * PAGE);
      expect(be.requests()).toHaveLength(N);
    });

    it('a client that stops reading holds the backend back (bounded); reading on, the body goes on intact; closing mid-body closes the backend connection', async () => {
      const BLOCK = 64 * 1024;
      /** Block k of the endless body: k in its first 4 bytes, then k % 251 (a lost, doubled or reordered block shows). */
      const block = (k: number): Buffer => {
        const b = Buffer.alloc(BLOCK, k % 251);
        b.writeUInt32BE(k, 0);
        return b;
      };
      let written = 0;
      be.handler = async (req, conn) => {
        if (req.target !== '/endless') return echo(req, conn);
        await writeWithDrain(conn.socket, latin1('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000000\r\n\r\n'));
        for (let k = 0; !conn.socket.destroyed; k++) {
          await writeWithDrain(conn.socket, block(k));
          written += BLOCK;
        }
      };
      const c = await RawClient.open(gw.port);
      c.sock.pause();
      c.send(GET('/endless'));
      // The backend is held once the socket buffers on the way are full (about 7 MB on Linux
      // loopback, more when the kernel grows them), not drained into the gateway's memory: without
      // back-pressure `written` grows without end (the gateway would take the whole endless body).
      // Waits for it to stop growing (the same for 500 ms), however slow the machine is.
      let last = -1;
      const held = await waitFor('the backend held back by the paused client', 15_000, () => {
        const now = written;
        if (now === last && now > 0) return now;
        last = now;
        return undefined;
      }, 500);
      expect(held).toBeLessThan(64 * 1024 * 1024);
      c.sock.resume();
      await waitFor('16 MB at the client', 10_000, () => c.length > 16 * 1024 * 1024);
      const rx = c.received;
      const bodyStart = rx.indexOf('\r\n\r\n') + 4;
      expect(rx.toString('latin1', 0, bodyStart)).toMatch(/^HTTP\/1\.1 200 [^]*\r\nContent-Length: 1000000000\r\n/i);
      for (let k = 0; bodyStart + (k + 1) * BLOCK <= rx.length; k++) {
        if (rx.compare(block(k), 0, BLOCK, bodyStart + k * BLOCK, bodyStart + (k + 1) * BLOCK) !== 0) throw new Error(`block ${k} of the body differs`);
      }
      const closedAt = Date.now();
      c.destroy();
      const endless = be.conns.find((k) => k.id === be.connOf('/endless'));
      await waitFor('the backend connection closed', 5_000, () => endless?.closedAt !== null);
      expect((endless?.closedAt as number) - closedAt).toBeLessThan(3_000);
    });
  });

  describe('hop-by-hop fields in the answer', () => {
    it('Connection: close, Keep-Alive, Proxy-Connection, Upgrade of the backend are not relayed; the client connection stays keep-alive', async () => {
      be.handler = (req, conn) => {
        if (req.target !== '/hop') return echo(req, conn);
        conn.socket.end(
          'HTTP/1.1 200 OK\r\nConnection: close\r\nKeep-Alive: timeout=1, max=1\r\nProxy-Connection: close\r\nUpgrade: h2c\r\nX-End-To-End: kept\r\nContent-Length: 5\r\n\r\nhello',
        );
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/hop'));
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.toString()).toBe('hello');
      expect(fieldValues(r, 'x-end-to-end')).toEqual(['kept']);
      expect(connectionTokens(r)).not.toContain('close');
      expect(fieldValues(r, 'keep-alive')).not.toContain('timeout=1, max=1');
      expect(fieldValues(r, 'proxy-connection')).toEqual([]);
      expect(fieldValues(r, 'upgrade')).toEqual([]);
      expect(c.text()).not.toContain('h2c');
      expect(await c.closedWithin(100)).toBe(false);
      await echoed(c, '/after-hop');
    });

    it('fields the backend\'s Connection header names are not relayed (RFC 9110 7.6.1), except Content-Length', async () => {
      be.handler = (req, conn) => {
        if (req.target !== '/named') return echo(req, conn);
        conn.socket.write('HTTP/1.1 200 OK\r\nConnection: X-Hop, content-length\r\nX-Hop: secret\r\nConnection: X-Other\r\nX-Other: 1\r\nX-Kept: yes\r\nContent-Length: 5\r\n\r\nhello');
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/named'));
      const r = await c.response();
      expect(r.body.toString()).toBe('hello');
      expect(fieldValues(r, 'x-hop')).toEqual([]);
      expect(fieldValues(r, 'x-other')).toEqual([]);
      expect(fieldValues(r, 'x-kept')).toEqual(['yes']);
      expect(fieldValues(r, 'content-length')).toEqual(['5']);
      await echoed(c, '/after-named');
    });

    it('Transfer-Encoding of the backend is only there when the gateway frames the body chunked itself', async () => {
      be.handler = (req, conn) => {
        if (req.target !== '/hop-te') return echo(req, conn);
        // timeout=30: Node's agent honours a shorter hint (timeout=1 and the connection is not reused).
        conn.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nKeep-Alive: timeout=30\r\n\r\n5\r\nhello\r\n0\r\n\r\n');
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/hop-te'));
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.toString()).toBe('hello');
      const te = fieldValues(r, 'transfer-encoding');
      expect(te).toEqual(r.framing === 'chunked' ? ['chunked'] : []);
      expect(fieldValues(r, 'keep-alive')).not.toContain('timeout=30');
      await echoed(c, '/after-hop-te');
      expectBackendConnections(1);
    });
  });

  describe("the backend's Keep-Alive hint", () => {
    it('timeout=1: the connection is not reused (the backend may close it any moment); timeout=30: it is', async () => {
      be.handler = (req, conn) => {
        const hint = req.target === '/hint-1' ? 'timeout=1' : 'timeout=30';
        conn.socket.write(`HTTP/1.1 200 OK\r\nKeep-Alive: ${hint}\r\nContent-Length: 2\r\n\r\nok`);
      };
      const c = await RawClient.open(gw.port);
      for (const path of ['/hint-1', '/hint-1']) {
        c.send(GET(path));
        expect((await c.response()).status).toBe(200);
      }
      await waitFor('the first backend connection closed', 5_000, () => be.summary().length === 2);
      expectBackendConnections(2);
      for (const path of ['/hint-30', '/hint-30', '/hint-30']) {
        c.send(GET(path));
        expect((await c.response()).status).toBe(200);
      }
      expectBackendConnections(3);
    });
  });

  describe('requests a byte-level path may hand to node:http', () => {
    it('a POST with a body (head and body 50 ms apart), a GET with Content-Length: 0, and a head split over writes 50 ms apart all work on one connection', async () => {
      be.handler = (req, conn) => {
        conn.socket.write(ok(`${req.method} ${req.target} ${req.body.length} ${sha256(req.body).slice(0, 16)}`));
      };
      const c = await RawClient.open(gw.port);
      const payload = randomBytes(3_000);
      c.send(`POST /post HTTP/1.1\r\nHost: app.example\r\nContent-Type: application/octet-stream\r\nContent-Length: ${payload.length}\r\n\r\n`);
      await sleep(50);
      c.send(payload);
      const post = await c.response();
      expect(post.status).toBe(200);
      expect(post.body.toString()).toBe(`POST /post ${payload.length} ${sha256(payload).slice(0, 16)}`);

      c.send(GET('/cl0', 'Content-Length: 0\r\n'));
      const cl0 = await c.response();
      expect(cl0.status).toBe(200);
      expect(cl0.body.toString()).toBe(`GET /cl0 0 ${sha256(Buffer.alloc(0)).slice(0, 16)}`);

      // Split in the request line, in a header name, and inside the blank line that ends the head.
      await c.sendSlowly(['GET /spl', 'it HTTP/1.1\r\nHo', 'st: app.example\r\nX-Part: 1\r\n\r', '\n'], 50);
      const split = await c.response();
      expect(split.status).toBe(200);
      expect(split.body.toString()).toBe(`GET /split 0 ${sha256(Buffer.alloc(0)).slice(0, 16)}`);

      const reqs = be.requests();
      expect(reqs.map((r) => `${r.method} ${r.target}`)).toEqual(['POST /post', 'GET /cl0', 'GET /split']);
      expect(reqs[0]?.body.equals(payload)).toBe(true);
      expect(reqs[1]?.body).toHaveLength(0);
      expect(fieldValues(reqs[2] as ParsedRequest, 'x-part')).toEqual(['1']);
    });
  });

  describe('the room cookie and the head the backend gets', () => {
    it('?room=abc: Set-Cookie for the room next to the backend\'s own; the backend gets method, target, Host and the client\'s headers in order, X-Forwarded-* replaced, no hop-by-hop', async () => {
      be.handler = (req, conn) => {
        conn.socket.write(ok('page', 'Set-Cookie: app=1; Path=/\r\nSet-Cookie: other=2; HttpOnly\r\n'));
      };
      const c = await RawClient.open(gw.port);
      c.send(
        'GET /lobby/page?room=abc&x=1 HTTP/1.1\r\nHost: app.example:8443\r\nUser-Agent: page-path-test/1\r\nAccept: text/html\r\n' +
          'X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n' +
          'Connection: keep-alive, X-Hop\r\nX-Hop: hop-secret\r\nKeep-Alive: timeout=99\r\nTE: trailers\r\nProxy-Connection: keep-alive\r\n' +
          'Cookie: a=1; b=2\r\nX-Trace: t1\r\nX-Trace: t2\r\n\r\n',
      );
      const r = await c.response();
      expect(r.status).toBe(200);
      expect(r.body.toString()).toBe('page');
      const cookies = fieldValues(r, 'set-cookie');
      expect(cookies).toHaveLength(3);
      expect(cookies).toContain('app=1; Path=/');
      expect(cookies).toContain('other=2; HttpOnly');
      expect(cookies.filter((v) => /^roomgate_room=abc\.[0-9a-z]+\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=86400; HttpOnly; SameSite=Lax$/.test(v))).toHaveLength(1);

      const seen = be.requests();
      expect(seen).toHaveLength(1);
      const q = seen[0] as ParsedRequest;
      expect([q.method, q.target, q.version]).toEqual(['GET', '/lobby/page?room=abc&x=1', 'HTTP/1.1']);
      const own = q.headers.filter(([n]) => !/^(x-forwarded-|x-roomgate-|connection$)/i.test(n));
      expect(own).toEqual([
        ['Host', 'app.example:8443'],
        ['User-Agent', 'page-path-test/1'],
        ['Accept', 'text/html'],
        ['Cookie', 'a=1; b=2'],
        ['X-Trace', 't1'],
        ['X-Trace', 't2'],
      ]);
      expect(fieldValues(q, 'x-forwarded-for')).toEqual(['127.0.0.1']);
      expect(fieldValues(q, 'x-forwarded-proto')).toEqual(['http']);
      expect(fieldValues(q, 'x-forwarded-host')).toEqual(['app.example:8443']);
      // The room's ownership fields (test/integration/ownership.test.ts has their rules).
      expect(fieldValues(q, 'x-roomgate-room')).toEqual(['abc']);
      expect(fieldValues(q, 'x-roomgate-epoch')).toHaveLength(1);
      // The gateway's own hop header at most: keep-alive, never the client's list.
      for (const v of fieldValues(q, 'connection')) expect(v.toLowerCase()).toBe('keep-alive');
      expect(q.headers.map(([, v]) => v).join('\n')).not.toMatch(/hop-secret|timeout=99|6\.6\.6\.6|evil/);
    });
  });

  describe('status line and Date', () => {
    it("the backend's reason phrase reaches the client; a backend Date is kept, and an answer without one gets one", async () => {
      const date = 'Tue, 01 Jan 2030 00:00:00 GMT';
      be.handler = (req, conn) => {
        if (req.target === '/reason') conn.socket.write(ok('fine', `Date: ${date}\r\n`, false, 'HTTP/1.1 200 Fine'));
        else if (req.target === '/no-date') conn.socket.write(ok('made', '', false, 'HTTP/1.1 201 Made It'));
        else echo(req, conn);
      };
      const c = await RawClient.open(gw.port);
      c.send(GET('/reason'));
      const fine = await c.response();
      expect([fine.status, fine.reason]).toEqual([200, 'Fine']);
      expect(fieldValues(fine, 'date')).toEqual([date]);

      c.send(GET('/no-date'));
      const made = await c.response();
      expect([made.status, made.reason]).toEqual([201, 'Made It']);
      const dates = fieldValues(made, 'date');
      expect(dates).toHaveLength(1);
      expect(dates[0]).toMatch(/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/);
      expect(Math.abs(Date.parse(dates[0] as string) - Date.now())).toBeLessThan(60_000);
    });
  });
});
