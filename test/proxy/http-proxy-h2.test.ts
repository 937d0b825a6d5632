// HttpProxy (src/proxy/http-proxy.ts) as the page transport of HTTP/2, in process: a real
// http2.createSecureServer does what the h2 front does with a stream (src/server/h2-front.ts:
// checkH2RequestHead, then the canonical request of requestOf), HttpProxy reads its body and makes
// the exchange, a real Forwarder routes it, and the backends are the raw sockets of
// test/support/page-transports.ts, read by the conformance referee. The client is node:http2's own.
// What only HTTP/2 shows is checked: the HTTP/1.1 request a stream becomes (Host from :authority,
// a body with its Content-Length), an answer relayed without its reason phrase or hop-by-hop
// fields, and a stream the client cancels while its connection lives on: its backend response is
// destroyed there and then. On HTTP/1.1 the client's closed connection leaves its response
// unfinished, and send()'s own close handler destroys the backend request; a reset h2 stream
// leaves the response `writableFinished`, so only relayAnswer's close handler ends the backend's
// answer (without it the backend connection stays open and its request in flight).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultBackendTls } from '../../src/backends/backend-tls.js';
import type { ResolvedBackend } from '../../src/config/load.js';
import { requestOf } from '../../src/http/client-request.js';
import { checkH2RequestHead, type H2HeadLimits } from '../../src/http/h2-request-head.js';
import { REFUSALS } from '../../src/http/refusals.js';
import { createTargetRule } from '../../src/http/target.js';
import { HttpProxy } from '../../src/proxy/http-proxy.js';
import { fieldValues } from '../conformance/strict-parser.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { openH2 } from '../support/h2-session.js';
import { answer, backendAt, Cleanup, counted, field, pageRuntime, ScriptedBackend, WAIT_MS, type PageRuntime } from '../support/page-transports.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

/** Bodies up to this many bytes are read whole before the backend request opens. */
const BUFFER_BYTES = 64;
const LIMITS: H2HeadLimits = { maxHeaders: 64, maxHeaderBytes: 16_384, target: createTargetRule({ reserved: [], pathPrefix: '/r/' }) };

/** The server's certificate and the CA the client trusts; the files are gone once read. */
let tlsFiles: { cert: Buffer; key: Buffer; ca: Buffer };

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-http-proxy-h2-'));
  try {
    const ca = makeCa(dir, 'ca');
    const srv = makeSigned(dir, 'srv', ca, ['gw.test']);
    tlsFiles = { cert: readFileSync(srv.cert), key: readFileSync(srv.key), ca: readFileSync(ca.cert) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * Node warns when an h2 answer is given a reason phrase (once per process; vitest runs each file in
 * its own, and no other test here writes a head before the first): every warning is kept.
 */
const warnings: Error[] = [];
const keepWarning = (w: Error): void => void warnings.push(w);
beforeAll(() => void process.on('warning', keepWarning));
afterAll(() => void process.off('warning', keepWarning));

/**
 * The h2 front of these tests, as src/server/h2-front.ts hands a stream over: checkH2RequestHead,
 * requestOf, then HttpProxy's readBody and exchange, then Forwarder.route. Resolves with the
 * port, the runtime, and a client session to it (as gw.test) whose settings have arrived.
 */
async function front(backends: readonly ResolvedBackend[]): Promise<{ port: number; rt: PageRuntime; session: ClientHttp2Session; serverSessions: Set<ServerHttp2Session> }> {
  const rt = pageRuntime(backends, cleanup);
  const proxy = new HttpProxy({ ...rt.paths, body: { bufferBytes: BUFFER_BYTES, maxBytes: 0 }, bodyIdleTimeoutMs: 0, backendTls: defaultBackendTls() });
  const server = http2.createSecureServer({ cert: tlsFiles.cert, key: tlsFiles.key, allowHTTP1: false });
  const serverSessions = new Set<ServerHttp2Session>();
  server.on('session', (s: ServerHttp2Session) => {
    serverSessions.add(s);
    s.once('close', () => serverSessions.delete(s));
  });
  server.on('request', (req, res) => {
    const verdict = checkH2RequestHead(req, LIMITS);
    if (!verdict.ok || verdict.asterisk) {
      res.writeHead(verdict.ok ? 200 : verdict.refusal.status);
      return void res.end();
    }
    const r = requestOf(req as unknown as IncomingMessage, 'x-room', false);
    if (r === null) return void res.destroy();
    const pageRes = res as unknown as ServerResponse;
    const key = rt.router.keyFor(r, Date.now());
    proxy.readBody(r, pageRes, (body) => rt.forwarder.route(proxy.exchange(r, pageRes, key, body, null)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.add(
    () =>
      new Promise<void>((resolve) => {
        for (const s of serverSessions) s.destroy();
        server.close(() => resolve());
      }),
  );
  cleanup.add(() => proxy.close());
  const port = (server.address() as AddressInfo).port;
  const session = await openH2(`https://gw.test:${port}`, () => tls.connect({ host: '127.0.0.1', port, servername: 'gw.test', ca: tlsFiles.ca, ALPNProtocols: ['h2'] }), WAIT_MS);
  session.on('error', () => undefined);
  cleanup.add(() => void session.destroy());
  return { port, rt, session, serverSessions };
}

/** An answer the h2 client read whole. */
interface H2Answer {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** Sends a request (with `body` as its DATA, if any) on `session`; resolves with its whole answer. */
function exchange(session: ClientHttp2Session, headers: OutgoingHttpHeaders, body?: string): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error(`no whole answer within ${WAIT_MS} ms`));
    }, WAIT_MS);
    const chunks: Buffer[] = [];
    let head: IncomingHttpHeaders | null = null;
    stream.on('response', (h) => void (head = h));
    stream.on('data', (c: Buffer) => void chunks.push(c));
    stream.on('end', () => {
      clearTimeout(timer);
      if (head === null) reject(new Error('the stream ended without an answer head'));
      else resolve({ headers: head, body: Buffer.concat(chunks) });
    });
    stream.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    if (body !== undefined) stream.end(body);
  });
}

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'x-hop'];

describe('HttpProxy on HTTP/2', () => {
  it('a GET stream goes to the backend as an HTTP/1.1 request with Host from :authority; its answer comes back without reason phrase or hop-by-hop fields', async () => {
    // A reason phrase h2 has no place for, fields of the backend connection (and one its
    // Connection names), and a chunked body: none of it may reach the h2 answer.
    const bytes = 'HTTP/1.1 200 Fine By Me\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\nX-From: backend\r\nTransfer-Encoding: chunked\r\n\r\n4\r\npage\r\n0\r\n\r\n';
    const be = await ScriptedBackend.start((_req, conn) => void conn.socket.write(bytes), cleanup);
    const { port, rt, session } = await front([backendAt('b1', be.port)]);
    warnings.length = 0;
    const got = await exchange(session, { ':method': 'GET', ':path': '/r/room-1/page?x=1', 'x-forwarded-for': '6.6.6.6' });
    const req = be.requests[0]!;
    expect(req).toMatchObject({ method: 'GET', target: '/page?x=1', version: 'HTTP/1.1', framing: 'none' });
    expect(fieldValues(req, 'Host')).toEqual([`gw.test:${port}`]);
    expect(field(req, 'X-Forwarded-For')).toBe('127.0.0.1');
    expect(field(req, 'X-Forwarded-Proto')).toBe('https');
    expect(field(req, 'X-Roomgate-Room')).toBe('room-1');
    expect(got.headers[':status']).toBe(200);
    expect(got.body.toString()).toBe('page');
    expect(got.headers['x-from']).toBe('backend');
    expect(got.headers['set-cookie']).toEqual([expect.stringMatching(/^rg=room-1;/)]);
    for (const name of HOP_BY_HOP) expect(got.headers[name], name).toBeUndefined();
    // Node drops a reason phrase on h2 with a warning: none was given.
    expect(warnings.map((w) => w.message)).toEqual([]);
    expect(await counted(rt.metrics.httpRequests, { backend: 'b1', status: '200' })).toBe(1);
  });

  // Fields an HTTP/1.1 answer may carry but node's HTTP/2 layer refuses to send: its writeHead
  // throws, and the fields it had set before throwing stayed on the response, so the 502 written
  // in their place threw too, out of every handler: a backend could stop the gateway.
  it('an answer with HTTP2-Settings (connection-specific, RFC 9113 8.2.2) reaches the h2 client without it', async () => {
    const bytes = 'HTTP/1.1 200 OK\r\nX-From: backend\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: 4\r\n\r\npage';
    const be = await ScriptedBackend.start((_req, conn) => void conn.socket.write(bytes), cleanup);
    const { session } = await front([backendAt('b1', be.port)]);
    const got = await exchange(session, { ':method': 'GET', ':path': '/r/room-1/page' });
    expect(got.headers[':status']).toBe(200);
    expect(got.body.toString()).toBe('page');
    expect(got.headers['x-from']).toBe('backend');
    expect(got.headers['http2-settings']).toBeUndefined();
  });

  it('an answer node cannot send on HTTP/2 (a field that may appear once, twice) is a 502 from the catalogue, and the connection serves on', async () => {
    const bad = 'HTTP/1.1 200 OK\r\nX-From: backend\r\nETag: "a"\r\nETag: "b"\r\nContent-Length: 4\r\n\r\npage';
    const be = await ScriptedBackend.start((_req, conn, i) => void conn.socket.write(i === 0 ? bad : answer(200, 'again')), cleanup);
    const { session, rt } = await front([backendAt('b1', be.port)]);
    const got = await exchange(session, { ':method': 'GET', ':path': '/r/room-1/page' });
    expect(got.headers[':status']).toBe(REFUSALS['bad-backend-answer'].status);
    expect(got.headers['x-from'], 'nothing of the refused answer').toBeUndefined();
    expect(got.headers.etag).toBeUndefined();
    expect(await counted(rt.metrics.proxyErrors, { backend: 'b1', kind: 'bad-response' })).toBe(1);
    const next = await exchange(session, { ':method': 'GET', ':path': '/r/room-1/page' });
    expect(next.headers[':status']).toBe(200);
    expect(next.body.toString()).toBe('again');
  });

  it('a POST stream with a body reaches the backend whole, with its Content-Length', async () => {
    const be = await ScriptedBackend.start((_req, conn) => void conn.socket.write(answer(200, 'stored')), cleanup);
    const { session } = await front([backendAt('b1', be.port)]);
    const body = 'hello h2 body';
    const got = await exchange(session, { ':method': 'POST', ':path': '/r/room-1/submit', 'content-length': String(body.length), 'content-type': 'text/plain' }, body);
    expect(got.headers[':status']).toBe(200);
    expect(got.body.toString()).toBe('stored');
    const req = be.requests[0]!;
    expect(req).toMatchObject({ method: 'POST', target: '/submit', framing: 'length' });
    expect(req.body.toString('latin1')).toBe(body);
    expect(fieldValues(req, 'Content-Length')).toEqual([String(body.length)]);
    expect(fieldValues(req, 'Transfer-Encoding')).toEqual([]);
  });

  it('a stream the client cancels mid-answer, its connection open: the backend response is destroyed, the request counted once, the connection serves on', async () => {
    // A long answer of which the first bytes come, the rest never: only its destruction ends it.
    const be = await ScriptedBackend.start((_req, conn, i) => void conn.socket.write(i === 0 ? 'HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nfirst-bytes' : answer(200, 'again')), cleanup);
    const { rt, session, serverSessions } = await front([backendAt('b1', be.port)]);
    const stream = session.request({ ':method': 'GET', ':path': '/r/room-1/download' });
    stream.on('error', () => undefined);
    let received = '';
    const first = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no first bytes within ${WAIT_MS} ms`)), WAIT_MS);
      stream.on('data', (c: Buffer) => {
        received += c.toString('latin1');
        if (!received.includes('first-bytes')) return;
        clearTimeout(timer);
        resolve();
      });
    });
    await first;
    expect(rt.pool.get('b1')?.inflight).toBe(1);
    // RST_STREAM CANCEL: the stream ends, its connection (the h2 session) does not.
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await be.until(() => be.conns[0]?.closed === true, 'the backend connection of the cancelled answer closed');
    expect(rt.pool.get('b1')?.inflight).toBe(0);
    expect(await counted(rt.metrics.httpRequests, { backend: 'b1', status: '200' })).toBe(1);
    expect(session.closed || session.destroyed).toBe(false);
    expect(serverSessions.size).toBe(1);
    // The same connection takes the next stream; the backend answers it on a new connection.
    const again = await exchange(session, { ':method': 'GET', ':path': '/r/room-1/page' });
    expect(again.headers[':status']).toBe(200);
    expect(again.body.toString()).toBe('again');
    expect(be.conns.length).toBe(2);
    expect(await counted(rt.metrics.httpRequests, { backend: 'b1', status: '200' })).toBe(2);
  });
});
