// HttpProxy (src/proxy/http-proxy.ts) as the page transport of node:http, in process: a real
// node:http server makes the canonical request (requestOf), HttpProxy reads its body and makes the
// exchange, a real Forwarder routes it through a real Placer and pool, and the backends are raw
// sockets that keep every byte they receive and answer scripted bytes. What is checked is what
// the transport alone does: the request the backend gets, the body's framing, which failures are
// retried, what the client gets instead of a broken or missing answer, and that nothing of a
// backend connection that cannot be trusted is used again.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultBackendTls } from '../../src/backends/backend-tls.js';
import type { ResolvedBackend } from '../../src/config/load.js';
import { requestOf } from '../../src/http/client-request.js';
import { HttpProxy } from '../../src/proxy/http-proxy.js';
import type { PagePathOptions } from '../../src/proxy/request-count.js';
import { fieldValues } from '../conformance/strict-parser.js';
import { answer, backendAt, Cleanup, counted, expectRefusal, field, pageRuntime, RawClient, refusedPort, roomOn, ScriptedBackend, type PageRuntime, type Script } from '../support/page-transports.js';
import { closeServer } from '../support/servers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

/** Bodies up to this many bytes are read whole before the backend request opens. */
const BUFFER_BYTES = 64;

/** The node:http front of these tests: requestOf, then HttpProxy's readBody and exchange, then Forwarder.route. */
async function front(backends: readonly ResolvedBackend[], o: { cacheStatus?: string; over?: Partial<PagePathOptions> } = {}): Promise<{ port: number; rt: PageRuntime }> {
  const rt = pageRuntime(backends, cleanup, o.over);
  const proxy = new HttpProxy({ ...rt.paths, body: { bufferBytes: BUFFER_BYTES, maxBytes: 0 }, bodyIdleTimeoutMs: 0, backendTls: defaultBackendTls() });
  const server = http.createServer((req, res) => {
    const r = requestOf(req, 'x-room', false);
    if (r === null) return;
    const key = rt.router.keyFor(r, Date.now());
    proxy.readBody(r, res, (body) => rt.forwarder.route(proxy.exchange(r, res, key, body, o.cacheStatus ?? null)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.add(() => closeServer(server));
  cleanup.add(() => proxy.close());
  return { port: (server.address() as AddressInfo).port, rt };
}

/** A backend answering every request 200 with `body`. */
const always =
  (body: string, fields: readonly string[] = []): Script =>
  (_req, conn) =>
    void conn.socket.write(answer(200, body, fields));

const text = (b: Buffer): string => b.toString('latin1');

describe('HttpProxy: the request the backend gets', () => {
  it('the prefix-stripped target, the forwarding fields made anew, the room and epoch of the placement; the answer relayed on a kept-alive backend connection', async () => {
    const be = await ScriptedBackend.start(always('page', ['X-From: backend']), cleanup);
    const { port, rt } = await front([backendAt('b1', be.port)]);
    const client = await RawClient.connect(port, cleanup);
    // The client's own claims (an untrusted peer) and ownership fields are never passed on.
    const claims = 'X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Roomgate-Room: other\r\nX-Roomgate-Epoch: 99\r\n';
    client.send('GET', '/r/room-1/page?x=1', claims);
    const [first] = await client.answers(['GET']);
    const got = be.requests[0];
    expect(got).toMatchObject({ method: 'GET', target: '/page?x=1', version: 'HTTP/1.1', framing: 'none' });
    const epoch = rt.placer.cachedPlacement('room-1')?.epoch;
    expect(epoch).toBeGreaterThan(0);
    expect(Object.fromEntries(['Host', 'X-Forwarded-For', 'X-Forwarded-Proto', 'X-Forwarded-Host', 'X-Forwarded-Prefix', 'X-Roomgate-Room', 'X-Roomgate-Epoch'].map((n) => [n, field(got!, n)]))).toEqual({
      Host: 'gw.test',
      'X-Forwarded-For': '127.0.0.1',
      'X-Forwarded-Proto': 'http',
      'X-Forwarded-Host': 'gw.test',
      'X-Forwarded-Prefix': '/r/room-1',
      'X-Roomgate-Room': 'room-1',
      'X-Roomgate-Epoch': String(epoch),
    });
    expect(first).toMatchObject({ status: 200, body: Buffer.from('page') });
    expect(field(first!, 'X-From')).toBe('backend');
    expect(field(first!, 'Set-Cookie')).toMatch(/^rg=room-1;/);
    expect(field(first!, 'Cache-Status')).toBeUndefined();
    // A second request takes the same backend connection.
    client.send('GET', '/r/room-1/page?x=1', claims);
    const answers = await client.answers(['GET', 'GET']);
    expect(answers[1]?.status).toBe(200);
    expect(be.conns.length).toBe(1);
    expect(be.conns[0]?.requests.length).toBe(2);
  });

  it('a body read whole goes with its Content-Length, a chunked one included', async () => {
    const be = await ScriptedBackend.start(always('stored'), cleanup);
    const { port } = await front([backendAt('b1', be.port)]);
    const client = await RawClient.connect(port, cleanup);
    client.send('POST', '/r/room-1/submit', 'Transfer-Encoding: chunked\r\n', '5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n');
    const [got] = await client.answers(['POST']);
    expect(got?.status).toBe(200);
    const req = be.requests[0]!;
    expect(req).toMatchObject({ method: 'POST', target: '/submit', framing: 'length' });
    expect(text(req.body)).toBe('hello world');
    expect(field(req, 'Content-Length')).toBe('11');
    expect(fieldValues(req, 'Transfer-Encoding')).toEqual([]);
  });

  // Node's client chunks a POST body by itself, not a DELETE one: the framing must be the transport's.
  it.each(['POST', 'DELETE'])('a %s body past the buffer streams to the backend as it comes, chunked', async (method) => {
    const be = await ScriptedBackend.start(always('stored'), cleanup);
    const { port } = await front([backendAt('b1', be.port)]);
    const client = await RawClient.connect(port, cleanup);
    const first = 'a'.repeat(BUFFER_BYTES + 36);
    client.send(method, '/r/room-1/upload', 'Transfer-Encoding: chunked\r\n', `${first.length.toString(16)}\r\n${first}\r\n`);
    // The backend has the head and the first bytes while the client has not sent the rest.
    await be.until(() => be.conns[0] !== undefined && text(be.conns[0].bytes).includes(first), 'the first bytes of the body at the backend');
    expect(be.requests.length).toBe(0);
    client.socket.write('4\r\ntail\r\n0\r\n\r\n');
    const [got] = await client.answers([method]);
    expect(got?.status).toBe(200);
    const req = be.requests[0]!;
    expect(req).toMatchObject({ method, framing: 'chunked' });
    expect(text(req.body)).toBe(`${first}tail`);
    expect(fieldValues(req, 'Content-Length')).toEqual([]);
  });
});

describe('HttpProxy: failures before the answer', () => {
  it('a refused connection: the body read whole goes to the next backend, the refusing one marked down', async () => {
    const live = await ScriptedBackend.start(always('from live'), cleanup);
    const { port, rt } = await front([backendAt('dead', await refusedPort()), backendAt('live', live.port)]);
    const room = await roomOn(rt.router, 'dead');
    const client = await RawClient.connect(port, cleanup);
    client.send('POST', `/r/${room}/submit`, 'Content-Length: 5\r\n', 'hello');
    const [got] = await client.answers(['POST']);
    expect(got).toMatchObject({ status: 200, body: Buffer.from('from live') });
    expect(text(live.requests[0]!.body)).toBe('hello');
    expect(rt.pool.get('dead')?.routable(Date.now())).toBe(false);
    expect(await counted(rt.metrics.proxyErrors, { backend: 'dead', kind: 'refused' })).toBe(1);
  });

  it('a refused connection under a streamed body is not retried: 502, the next backend never asked, the client connection ended', async () => {
    const live = await ScriptedBackend.start(always('from live'), cleanup);
    const { port, rt } = await front([backendAt('dead', await refusedPort()), backendAt('live', live.port)]);
    const room = await roomOn(rt.router, 'dead');
    const client = await RawClient.connect(port, cleanup);
    // More than the buffer of the 200 bytes declared: the rest never comes.
    client.send('POST', `/r/${room}/upload`, 'Content-Length: 200\r\n', 'b'.repeat(BUFFER_BYTES + 1));
    const [got] = await client.answers(['POST']);
    expectRefusal(got, 'backend-unavailable');
    expect(field(got!, 'Retry-After')).toBe('1');
    // The body's rest would be read as the next request: the connection ends with the answer.
    expect(field(got!, 'Connection')).toBe('close');
    await client.until(() => client.closed, 'the client connection ended');
    expect(live.conns.length).toBe(0);
    expect(await counted(rt.metrics.httpRequests, { backend: 'dead', status: '502' })).toBe(1);
  });

  it('every pooled connection stale: the GET goes again once, on a new connection, not on the next stale one', async () => {
    // Two GETs at once open two backend connections, both pooled; the backend then closes any
    // connection that carried a request before, as a backend closes idle ones at its timeout.
    const be = await ScriptedBackend.start((req, conn) => {
      if (conn.requests.length > 1) return void conn.socket.destroy();
      const send = (): void => void conn.socket.write(answer(200, `to ${req.target}`));
      if (req.target.endsWith('/slow')) setTimeout(send, 50);
      else send();
    }, cleanup);
    const { port, rt } = await front([backendAt('b1', be.port)]);
    const [a, b] = [await RawClient.connect(port, cleanup), await RawClient.connect(port, cleanup)];
    a.send('GET', '/r/room-1/slow');
    b.send('GET', '/r/room-1/slow');
    await Promise.all([a.answers(['GET']), b.answers(['GET'])]);
    expect(be.conns.length).toBe(2);
    a.send('GET', '/r/room-1/c');
    const [, got] = await a.answers(['GET', 'GET']);
    expect(got).toMatchObject({ status: 200, body: Buffer.from('to /c') });
    expect(be.conns.map((c) => c.requests.map((r) => r.target).join(' ')).sort()).toEqual(['/c', '/slow', '/slow /c']);
    expect(await counted(rt.metrics.proxyErrors, { backend: 'b1', kind: 'reset' })).toBe(1);
  });

  it('a backend that does not answer in time: 504, its request given up', async () => {
    const be = await ScriptedBackend.start(() => undefined, cleanup);
    const { port, rt } = await front([backendAt('b1', be.port)], { over: { responseTimeoutMs: 150 } });
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/slow');
    const [got] = await client.answers(['GET']);
    expectRefusal(got, 'backend-timeout');
    await be.until(() => be.conns[0]?.closed === true, 'the backend connection closed');
    expect(await counted(rt.metrics.proxyErrors, { backend: 'b1', kind: 'timeout' })).toBe(1);
    expect(rt.pool.get('b1')?.routable(Date.now())).toBe(true);
  });

  it.each([
    ['a status code past 599', 'HTTP/1.1 600 Beyond\r\nContent-Length: 2\r\n\r\nok'],
    ['a transfer coding other than chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n'],
  ])('an answer with %s: 502, and its backend connection is closed, never reused', async (_what, bad) => {
    const be = await ScriptedBackend.start((_req, conn, i) => void conn.socket.write(i === 0 ? bad : answer(200, 'good')), cleanup);
    const { port, rt } = await front([backendAt('b1', be.port)]);
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/a');
    const [got] = await client.answers(['GET']);
    expectRefusal(got, 'bad-backend-answer');
    await be.until(() => be.conns[0]?.closed === true, 'the first backend connection closed');
    client.send('GET', '/r/room-1/b');
    const answers = await client.answers(['GET', 'GET']);
    expect(answers[1]).toMatchObject({ status: 200, body: Buffer.from('good') });
    expect(be.conns.length).toBe(2);
    expect(await counted(rt.metrics.proxyErrors, { backend: 'b1', kind: 'bad-response' })).toBe(1);
  });

  it.each([
    ['bytes past its Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA', 'ok'],
    ['a body on a 204', 'HTTP/1.1 204 No Content\r\n\r\nBODY', ''],
  ])('an answer with %s: the complete answer relayed, the rest never; counted, the connection not reused', async (_what, bytes, body) => {
    const be = await ScriptedBackend.start((_req, conn, i) => void conn.socket.write(i === 0 ? bytes : answer(200, 'good')), cleanup);
    const { port, rt } = await front([backendAt('b1', be.port)]);
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/a');
    const [got] = await client.answers(['GET']);
    expect(text(got!.body)).toBe(body);
    await be.until(() => be.conns[0]?.closed === true, 'the first backend connection closed');
    expect(await counted(rt.metrics.proxyErrors, { backend: 'b1', kind: 'bad-response' })).toBe(1);
    client.send('GET', '/r/room-1/b');
    const answers = await client.answers(['GET', 'GET']);
    expect(answers[1]).toMatchObject({ status: 200, body: Buffer.from('good') });
    expect(answers[1]?.end).toBe(client.bytes.length);
    expect(be.conns.length).toBe(2);
  });
});

describe('HttpProxy: Cache-Status and a client that leaves', () => {
  const status = 'roomgate; fwd=miss; stored';

  it("the exchange's Cache-Status is on the relayed answer", async () => {
    const be = await ScriptedBackend.start(always('page'), cleanup);
    const { port } = await front([backendAt('b1', be.port)], { cacheStatus: status });
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/a');
    const [got] = await client.answers(['GET']);
    expect(got?.status).toBe(200);
    expect(field(got!, 'Cache-Status')).toBe(status);
  });

  it("the exchange's Cache-Status is on roomgate's own refusal", async () => {
    const { port } = await front([backendAt('dead', await refusedPort())], { cacheStatus: status });
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/a');
    const [got] = await client.answers(['GET']);
    // Refused, marked down, decided again: no backend is left.
    expectRefusal(got, 'no-backend');
    expect(field(got!, 'Cache-Status')).toBe(status);
  });

  it('a client that leaves before the answer: the backend request is destroyed, nothing counted under a status', async () => {
    const be = await ScriptedBackend.start(() => undefined, cleanup);
    // No response timeout could end the backend request within the test: only the client's leaving.
    const { port, rt } = await front([backendAt('b1', be.port)], { over: { responseTimeoutMs: 60_000 } });
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/slow');
    await be.until(() => be.requests.length === 1, 'the request at the backend');
    expect(rt.pool.get('b1')?.inflight).toBe(1);
    client.socket.destroy();
    await be.until(() => be.conns[0]?.closed === true, 'the backend connection closed');
    expect(rt.pool.get('b1')?.inflight).toBe(0);
    expect((await rt.metrics.httpRequests.get()).values).toEqual([]);
  });

  it('a client that leaves mid-answer: the backend request is destroyed, the request counted once', async () => {
    const be = await ScriptedBackend.start((_req, conn) => void conn.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nfirst-bytes'), cleanup);
    const { port, rt } = await front([backendAt('b1', be.port)]);
    const client = await RawClient.connect(port, cleanup);
    client.send('GET', '/r/room-1/download');
    await client.until(() => text(client.bytes).includes('first-bytes'), 'the first bytes of the answer');
    client.socket.destroy();
    await be.until(() => be.conns[0]?.closed === true, 'the backend connection closed');
    expect(rt.pool.get('b1')?.inflight).toBe(0);
    expect(await counted(rt.metrics.httpRequests, { backend: 'b1', status: '200' })).toBe(1);
  });
});
