// LeanPages and PageRelay (src/proxy/lean-pages.ts, src/proxy/page-relay.ts), the byte-level page
// transport, in process: a minimal PageClient on a real client connection reads GET and HEAD heads
// with the front's own reader and hands each to LeanPages' exchange and a real Forwarder (real
// Placer, pool and RawBackendPool); the backends are raw sockets that keep every byte they receive
// and answer scripted bytes, and the client's bytes are read by the conformance referee. What is
// checked: keep-alive reuse of one backend connection, the retry of a GET when a reused one was
// closed under it, HEAD framing, an answer longer than its framing, roomgate's own refusals framed
// as node:http frames them, and the hand-over of a request whose backend speaks TLS.
import net, { type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { leanRequestOf, type ClientRequest } from '../../src/http/client-request.js';
import { parseLeanHead } from '../../src/http/lean-request-head.js';
import type { PageClient } from '../../src/http/page-client.js';
import { REFUSALS } from '../../src/http/refusals.js';
import { LeanPages } from '../../src/proxy/lean-pages.js';
import { answer, backendAt, Cleanup, counted, expectRefusal, field, pageRuntime, RawClient, refusedPort, ScriptedBackend, Watched, type PageRuntime, type Script } from '../support/page-transports.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaders: 100, roomHeader: 'x-room' };

/**
 * The byte-level front cut down to what LeanPages needs of it: one request at a time, the next
 * read once the answer is out, the connection ended after an answer that does not keep it.
 */
class TestPageClient extends Watched implements PageClient {
  current: { clientGone(): void } | null = null;
  readonly peer: string;
  readonly encrypted = false;
  closed = false;
  /** Each answered(open) call, in order. */
  readonly opens: boolean[] = [];
  handedOver: string | null = null;
  private buf = Buffer.alloc(0);
  private busy = false;
  private closeAsked = false;

  constructor(
    readonly socket: Socket,
    private readonly serve: (r: ClientRequest, client: TestPageClient) => void,
  ) {
    super();
    this.peer = socket.remoteAddress ?? '';
    socket.on('data', (chunk: Buffer) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      this.next();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      const current = this.current;
      this.current = null;
      current?.clientGone();
    });
  }

  keepAlive(): boolean {
    return !this.closeAsked;
  }

  answered(open: boolean): void {
    this.opens.push(open);
    this.busy = false;
    if (!open) {
      this.closed = true;
      this.socket.end();
    } else this.next();
    this.changed();
  }

  handOver(reason: string): void {
    this.handedOver = reason;
    this.changed();
  }

  private next(): void {
    if (this.busy || this.closed) return;
    const parsed = parseLeanHead(this.buf, 0, LIMITS);
    if (parsed.kind !== 'head') {
      if (parsed.kind !== 'incomplete') throw new Error(`the test sent a head the byte-level front does not take: ${parsed.kind}`);
      return;
    }
    this.buf = this.buf.subarray(parsed.head.end);
    this.busy = true;
    this.closeAsked = parsed.head.close;
    this.serve(leanRequestOf(parsed.head, null, this.peer, this.encrypted), this);
  }
}

interface Front {
  readonly rt: PageRuntime;
  /** The client connections the front accepted, in order. */
  readonly clients: TestPageClient[];
  readonly client: RawClient;
  /** The front's port, for more clients. */
  readonly port: number;
}

/** The front, LeanPages over a real Forwarder, and one client connected to it. */
async function front(backends: readonly ResolvedBackend[], cacheStatus: string | null = null): Promise<Front> {
  const rt = pageRuntime(backends, cleanup);
  const pages = new LeanPages({ ...rt.paths, keepAliveTimeoutMs: 5_000, hsts: null });
  const serve = (r: ClientRequest, client: TestPageClient): void => {
    const key = rt.router.keyFor(r, Date.now());
    pages.readBody(r, client, (body) => rt.forwarder.route(pages.exchange(r, client, key, body, cacheStatus)));
  };
  const clients: TestPageClient[] = [];
  const server = net.createServer((socket) => void clients.push(new TestPageClient(socket, serve)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.add(() => new Promise<void>((resolve) => server.close(() => resolve())));
  cleanup.add(() => pages.close());
  const port = (server.address() as AddressInfo).port;
  const client = await RawClient.connect(port, cleanup);
  cleanup.add(() => clients.forEach((c) => c.socket.destroy()));
  return { rt, clients, client, port };
}

/** The client connection as the front sees it, once it was accepted. */
async function accepted(f: Front): Promise<TestPageClient> {
  await f.client.until(() => f.clients.length > 0, 'the front accepted the client');
  return f.clients[0] as TestPageClient;
}

const text = (b: Buffer): string => b.toString('latin1');

/** A backend answering each request with its own number. */
const numbered: Script = (_req, conn, i) => void conn.socket.write(answer(200, `answer ${i}`));

describe('LeanPages: backend connections', () => {
  it('two requests in turn take one backend connection; the forwarded head and the relayed answer', async () => {
    const be = await ScriptedBackend.start(numbered, cleanup);
    const f = await front([backendAt('b1', be.port)]);
    f.client.send('GET', '/r/room-1/a?x=1', 'X-Roomgate-Room: other\r\n');
    await f.client.answers(['GET']);
    f.client.send('GET', '/r/room-1/b');
    const [first, second] = await f.client.answers(['GET', 'GET']);
    expect(be.conns.length).toBe(1);
    expect(be.requests.map((r) => `${r.method} ${r.target} ${r.version}`)).toEqual(['GET /a?x=1 HTTP/1.1', 'GET /b HTTP/1.1']);
    const fwd = be.requests[0]!;
    expect(field(fwd, 'Connection')).toBe('keep-alive');
    expect(field(fwd, 'X-Forwarded-For')).toBe('127.0.0.1');
    expect(field(fwd, 'X-Forwarded-Prefix')).toBe('/r/room-1');
    expect(field(fwd, 'X-Roomgate-Room')).toBe('room-1');
    expect(field(fwd, 'X-Roomgate-Epoch')).toBe(String(f.rt.placer.cachedPlacement('room-1')?.epoch));
    expect(first).toMatchObject({ status: 200, body: Buffer.from('answer 0') });
    expect(second).toMatchObject({ status: 200, body: Buffer.from('answer 1') });
    expect(field(first!, 'Connection')).toBe('keep-alive');
    expect(field(first!, 'Keep-Alive')).toBe('timeout=5');
    expect(field(first!, 'Set-Cookie')).toMatch(/^rg=room-1;/);
    expect((await accepted(f)).opens).toEqual([true, true]);
    expect(f.rt.pool.get('b1')?.inflight).toBe(0);
  });

  it('a reused connection closed under a GET: the GET goes again on a fresh connection', async () => {
    const be = await ScriptedBackend.start((req, conn, i) => (i === 1 ? conn.socket.destroy() : numbered(req, conn, i)), cleanup);
    const f = await front([backendAt('b1', be.port)]);
    f.client.send('GET', '/r/room-1/a');
    await f.client.answers(['GET']);
    f.client.send('GET', '/r/room-1/b');
    const answers = await f.client.answers(['GET', 'GET']);
    expect(answers[1]).toMatchObject({ status: 200, body: Buffer.from('answer 2') });
    expect(be.conns.map((c) => c.requests.map((r) => r.target))).toEqual([['/a', '/b'], ['/b']]);
    // A reset is not a failed connection: the backend stays routable.
    expect(f.rt.pool.get('b1')?.routable(Date.now())).toBe(true);
    expect(await counted(f.rt.metrics.proxyErrors, { backend: 'b1', kind: 'reset' })).toBe(1);
  });

  it('every pooled connection stale: the GET goes again once, on a new connection, not on the next stale one', async () => {
    // Two requests at once open two backend connections; both are pooled. The backend then closes
    // any connection that carried a request before, as a backend closes idle ones at its timeout.
    const be = await ScriptedBackend.start((req, conn, i) => {
      if (conn.requests.length > 1) return void conn.socket.destroy();
      if (req.target === '/slow') return void setTimeout(() => numbered(req, conn, i), 50);
      numbered(req, conn, i);
    }, cleanup);
    const f = await front([backendAt('b1', be.port)]);
    const other = await RawClient.connect(f.port, cleanup);
    f.client.send('GET', '/r/room-1/slow');
    other.send('GET', '/r/room-1/slow');
    await Promise.all([f.client.answers(['GET']), other.answers(['GET'])]);
    expect(be.conns.length).toBe(2);
    f.client.send('GET', '/r/room-1/c');
    const [, got] = await f.client.answers(['GET', 'GET']);
    expect(got).toMatchObject({ status: 200, body: Buffer.from('answer 3') });
    // One stale connection was tried (the newest), then a new one: the other pooled one was not.
    expect(be.conns.map((c) => c.requests.map((r) => r.target).join(' ')).sort()).toEqual(['/c', '/slow', '/slow /c']);
    expect(be.conns.length).toBe(3);
    expect(await counted(f.rt.metrics.proxyErrors, { backend: 'b1', kind: 'reset' })).toBe(1);
  });

  it('a fresh connection closed under a GET is not tried again: 502', async () => {
    const be = await ScriptedBackend.start((_req, conn) => void conn.socket.destroy(), cleanup);
    const f = await front([backendAt('b1', be.port)]);
    f.client.send('GET', '/r/room-1/a');
    const [got] = await f.client.answers(['GET']);
    expectRefusal(got, 'backend-unavailable');
    expect(be.conns.length).toBe(1);
  });

  it('a HEAD answer has no body, and the connections on both sides carry the next request', async () => {
    const be = await ScriptedBackend.start((req, conn) => void conn.socket.write(req.method === 'HEAD' ? 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n' : answer(200, 'hello')), cleanup);
    const f = await front([backendAt('b1', be.port)]);
    f.client.send('HEAD', '/r/room-1/a');
    const [head] = await f.client.answers(['HEAD']);
    expect(field(head!, 'Content-Length')).toBe('5');
    f.client.send('GET', '/r/room-1/a');
    const answers = await f.client.answers(['HEAD', 'GET']);
    expect(answers[1]).toMatchObject({ status: 200, body: Buffer.from('hello') });
    // Every byte the client got belongs to the two answers: none of a body after the HEAD's head.
    expect(answers[1]?.end).toBe(f.client.bytes.length);
    expect(be.conns.length).toBe(1);
  });

  it.each([
    ['GET', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA'],
    ['HEAD', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'],
  ])('bytes after a complete answer to %s: never relayed, counted, the connection not reused', async (method, bytes) => {
    const be = await ScriptedBackend.start((req, conn, i) => (i === 0 ? void conn.socket.write(bytes) : numbered(req, conn, i)), cleanup);
    const f = await front([backendAt('b1', be.port)]);
    f.client.send(method, '/r/room-1/a');
    const [got] = await f.client.answers([method]);
    expect(got?.status).toBe(200);
    expect(text(got!.body)).toBe(method === 'GET' ? 'ok' : '');
    await be.until(() => be.conns[0]?.closed === true, 'the first backend connection closed');
    expect(await counted(f.rt.metrics.proxyErrors, { backend: 'b1', kind: 'bad-response' })).toBe(1);
    f.client.send('GET', '/r/room-1/b');
    const answers = await f.client.answers([method, 'GET']);
    expect(answers[1]).toMatchObject({ status: 200, body: Buffer.from('answer 1') });
    expect(answers[1]?.end).toBe(f.client.bytes.length);
    expect(be.conns.length).toBe(2);
  });
});

describe("LeanPages: roomgate's own answers and hand-overs", () => {
  it('a refusal is framed as node:http frames it: Date, Connection, Keep-Alive, Cache-Status; no body on HEAD; Connection: close when asked', async () => {
    const status = 'roomgate; fwd=miss';
    const f = await front([backendAt('dead', await refusedPort())], status);
    f.client.send('GET', '/r/room-1/a');
    const refused = expectRefusal((await f.client.answers(['GET']))[0], 'no-backend');
    expect(Math.abs(Date.parse(field(refused, 'Date') ?? '') - Date.now())).toBeLessThan(5_000);
    expect(field(refused, 'Connection')).toBe('keep-alive');
    expect(field(refused, 'Keep-Alive')).toBe('timeout=5');
    expect(field(refused, 'Cache-Status')).toBe(status);
    expect(field(refused, 'Retry-After')).toBeDefined();
    f.client.send('HEAD', '/r/room-1/a');
    f.client.send('GET', '/r/room-1/a', 'Connection: close\r\n');
    const [, head, last] = await f.client.answers(['GET', 'HEAD', 'GET']);
    // The HEAD answer has the GET answer's fields (its Content-Length too) and no body.
    expect(head?.status).toBe(REFUSALS['no-backend'].status);
    expect(head?.body.length).toBe(0);
    expect(field(head!, 'Content-Length')).toBe(field(refused, 'Content-Length'));
    expect(field(expectRefusal(last, 'no-backend'), 'Connection')).toBe('close');
    expect(field(last!, 'Keep-Alive')).toBeUndefined();
    await f.client.until(() => f.client.closed, 'the client connection ended');
    expect(last?.end).toBe(f.client.bytes.length);
    expect((await accepted(f)).opens).toEqual([true, true, false]);
  });

  it('a backend that speaks TLS: the request is handed over, nothing written or sent', async () => {
    const be = await ScriptedBackend.start(numbered, cleanup);
    const f = await front([backendAt('tls', be.port, true)]);
    f.client.send('GET', '/r/room-1/a');
    const client = await accepted(f);
    await client.until(() => client.handedOver !== null, 'the hand-over');
    expect(client.handedOver).toBe('https-backend');
    expect(client.opens).toEqual([]);
    expect(f.client.bytes.length).toBe(0);
    expect(be.conns.length).toBe(0);
    expect(f.rt.pool.get('tls')?.inflight).toBe(0);
  });
});
