// The canonical request (src/http/client-request.ts) as each front hands it over. Every front runs
// in this process on real sockets, as src/compose/fronts.ts builds and attaches them: node:http
// alone (plain and TLS), node:http with the byte-level LeanFront attached (plain and TLS), and the
// H2Front on the TLS port (plain streams and RFC 8441 extended CONNECT). In place of the request
// pipeline a recorder keeps what it is handed (the entry called and the ClientRequest) and answers
// 200, or closes the socket of a handshake. The same requests go through every front; what they
// hand over must be the same (method, canonical target, Host, the client's address, the WebSocket
// ask, cookie, room header, the body the head declares), `encrypted` true exactly on the TLS port,
// and differ only in `transport`; the entry differs as the fronts' split says (byte-level GET/HEAD
// -> page(), anything node:http or HTTP/2 reads -> request(), a handshake -> upgrade()). Then the
// pure mappings: requestOf and bodyDeclared on node:http's messages, leanRequestOf on
// parseLeanHead's output; and a client that resets its connection before its address can be read,
// provoked for real, is handed over by neither plain front (on the TLS port it cannot be provoked:
// no request arrives before a TLS handshake the server takes part in, and the address is
// remembered when the connection is accepted). No gateway is started; every wait is on an event,
// with a timeout.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http, { IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import type { Server as HttpsServer } from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyDeclared, leanRequestOf, requestOf, type ClientRequest } from '../../src/http/client-request.js';
import { parseLeanHead } from '../../src/http/lean-request-head.js';
import type { PageClient } from '../../src/http/page-client.js';
import { createTargetRule } from '../../src/http/target.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import type { RequestPipeline } from '../../src/pipeline/pipeline.js';
import { H2Front } from '../../src/server/h2-front.js';
import { LeanFront } from '../../src/server/lean-connection.js';
import { createPublicServer } from '../../src/server/public-server.js';
import { TlsCertificates } from '../../src/server/tls.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { openH2 } from '../support/h2-session.js';

const ROOM_HEADER = 'x-room-key';
const HOST = 'rooms.example';
const PEER = '127.0.0.1';
const WAIT_MS = 5_000;
const HANDSHAKE_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const LIMITS = { maxHeaderBytes: 16_384, maxHeaders: 64 };
const target = createTargetRule({ reserved: ['/_roomgate/push'], pathPrefix: '/r/' });
const metrics = createMetrics(() => []);
const logger = createLogger('silent');

type Entry = 'request' | 'page' | 'upgrade';

/** What the pipeline was handed: the entry, the canonical request, the bytes behind a handshake's head. */
interface Handed {
  readonly entry: Entry;
  readonly r: ClientRequest;
  readonly rest?: number;
}

/** The request pipeline's four entries, recording what they are handed and answering at once. */
class Recorder implements Pick<RequestPipeline, 'request' | 'page' | 'upgrade' | 'goesToTheApp'> {
  readonly handed: Handed[] = [];

  request(r: ClientRequest, req: IncomingMessage, res: ServerResponse): void {
    this.handed.push({ entry: 'request', r });
    req.resume();
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '2' });
    res.end('ok');
  }

  page(r: ClientRequest, client: PageClient): void {
    this.handed.push({ entry: 'page', r });
    client.socket.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n${r.method === 'HEAD' ? '' : 'ok'}`);
    client.answered(client.keepAlive());
  }

  upgrade(r: ClientRequest, socket: Socket, rest: Buffer | null): void {
    this.handed.push({ entry: 'upgrade', r, rest: rest?.length ?? 0 });
    socket.destroy();
  }

  /** roomgate's own paths, for this test: /_own/ (the byte-level front hands them to node:http). */
  goesToTheApp(url: string): boolean {
    return !url.startsWith('/_own/');
  }
}

/** One public listener as src/compose/fronts.ts builds it: node:http, perhaps TLS with h2, perhaps the byte-level front. */
interface Gate {
  readonly server: http.Server;
  readonly recorder: Recorder;
  readonly lean: LeanFront | null;
  readonly h2: H2Front | null;
  readonly port: number;
}

function listen(server: http.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

async function startGate(withLean: boolean, certificates: TlsCertificates | null): Promise<Gate> {
  const recorder = new Recorder();
  const common = { maxHeaderBytes: LIMITS.maxHeaderBytes, maxHeaders: LIMITS.maxHeaders, target, allow: 'GET, HEAD, POST', roomHeader: ROOM_HEADER, pipeline: recorder, metrics, logger, hsts: null };
  const h2 =
    certificates === null ? null : new H2Front({ ...common, maxConcurrentStreams: 100, maxResets: 100, resetWindowS: 10, idleTimeoutMs: 10_000, requestTimeoutMs: 10_000, webSockets: true });
  const server = createPublicServer({ ...common, tls: certificates, http2: h2 !== null, headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 10_000 });
  h2?.attach(server as HttpsServer);
  let lean: LeanFront | null = null;
  if (withLean) {
    lean = new LeanFront({
      limits: { ...LIMITS, roomHeader: ROOM_HEADER },
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 10_000,
      clientWriteTimeoutMs: 10_000,
      target,
      pipeline: recorder,
      metrics,
    });
    lean.attach(server, certificates !== null);
  }
  return { server, recorder, lean, h2, port: await listen(server) };
}

async function stopGate(g: Gate): Promise<void> {
  g.lean?.closeAll();
  g.h2?.closeAll();
  const closed = new Promise<void>((resolve) => g.server.close(() => resolve()));
  g.server.closeAllConnections();
  await within(closed, 'server close');
}

/** `p`, or a rejection naming `what` after WAIT_MS. */
function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${WAIT_MS} ms`)), WAIT_MS);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

// --- clients -----------------------------------------------------------------------------------

/** Writes `bytes` on a new connection and reads until the gateway closes it: everything it answered. */
function h1Exchange(connect: () => net.Socket, bytes: string): Promise<string> {
  return within(
    new Promise<string>((resolve, reject) => {
      const s = connect();
      const got: Buffer[] = [];
      s.on('data', (d: Buffer) => got.push(d));
      s.on('error', reject);
      s.on('close', () => resolve(Buffer.concat(got).toString('latin1')));
      s.write(bytes, 'latin1');
    }),
    'HTTP/1.1 exchange',
  );
}

interface H2Ask {
  readonly headers: OutgoingHttpHeaders;
  readonly body: string | null;
}

/** One stream on `session`: its :status (or null when it was reset) and its RST code. */
function h2Exchange(session: ClientHttp2Session, ask: H2Ask): Promise<{ status: number | null; rstCode: number }> {
  return within(
    new Promise((resolve) => {
      const stream = session.request(ask.headers, { endStream: ask.body === null });
      let status: number | null = null;
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('error', () => undefined);
      stream.resume();
      stream.on('close', () => resolve({ status, rstCode: stream.rstCode }));
      if (ask.body !== null) stream.end(ask.body);
    }),
    'h2 exchange',
  );
}

// --- the requests, as HTTP/1.1 bytes and as h2 streams -----------------------------------------

/**
 * The canonical fields every front must hand over alike (all but `transport` and `encrypted`, which
 * the front decides); an h2 WebSocket's key, which its front makes, is written as 'fresh'.
 */
type Shared = Pick<ClientRequest, 'method' | 'target' | 'host' | 'peer' | 'cookie' | 'roomHeader' | 'body'> & { readonly upgrade: { upgrade: string; key: string; version: string } | null };

type FrontName = 'h1-node' | 'h1-lean' | 'tls-node' | 'tls-lean' | 'h2';

interface Case {
  readonly name: string;
  readonly h1: string;
  readonly h2: H2Ask;
  readonly expected: Shared;
  /** Which entry each front calls. */
  readonly entry: Record<FrontName, Entry>;
}

const h1Head = (line: string, fields: readonly string[], body = ''): string => `${line}\r\nHost: ${HOST}\r\n${fields.map((f) => `${f}\r\n`).join('')}\r\n${body}`;
const h2Head = (method: string, path: string, fields: OutgoingHttpHeaders = {}): OutgoingHttpHeaders => ({ ':method': method, ':scheme': 'https', ':authority': HOST, ':path': path, ...fields });
const ROOM_FIELDS = ['Cookie: rg_room=lobby', 'X-Room-Key: lobby', 'Cookie: theme=dark'];
const H2_ROOM_FIELDS = { cookie: ['rg_room=lobby', 'theme=dark'], [ROOM_HEADER]: 'lobby' };
const COMMON = { host: HOST, peer: PEER, cookie: 'rg_room=lobby; theme=dark', roomHeader: 'lobby', upgrade: null } as const;
const ALL_REQUEST: Record<FrontName, Entry> = { 'h1-node': 'request', 'h1-lean': 'request', 'tls-node': 'request', 'tls-lean': 'request', h2: 'request' };
const LEAN_PAGE: Record<FrontName, Entry> = { ...ALL_REQUEST, 'h1-lean': 'page', 'tls-lean': 'page' };

interface RoomAsk {
  /** The canonical target every front must hand over (default: `path` as sent). */
  readonly target?: string;
  readonly body: ClientRequest['body'];
  readonly entry: Record<FrontName, Entry>;
  /** The HTTP/1.1 request line's target, when not `path` (the absolute form). */
  readonly h1Target?: string;
  readonly h1Fields?: readonly string[];
  readonly h1Body?: string;
  readonly h2Fields?: OutgoingHttpHeaders;
  readonly h2Body?: string;
}

/** A request with the room's cookies and header, `method` and `path` on both protocols (HTTP/1.1 with Connection: close). */
function roomCase(name: string, method: string, path: string, a: RoomAsk): Case {
  return {
    name,
    h1: h1Head(`${method} ${a.h1Target ?? path} HTTP/1.1`, [...ROOM_FIELDS, ...(a.h1Fields ?? []), 'Connection: close'], a.h1Body),
    h2: { headers: h2Head(method, path, { ...H2_ROOM_FIELDS, ...a.h2Fields }), body: a.h2Body ?? null },
    expected: { ...COMMON, method, target: a.target ?? path, body: a.body },
    entry: a.entry,
  };
}

const CASES: readonly Case[] = [
  roomCase('a plain GET with two Cookie lines and the room header', 'GET', '/r/lobby/page?x=1', { body: 'none', entry: LEAN_PAGE }),
  roomCase('a HEAD', 'HEAD', '/r/lobby/page', { body: 'none', entry: LEAN_PAGE }),
  roomCase('a POST with a body of 5 bytes', 'POST', '/r/lobby/form', {
    body: 'bytes',
    entry: ALL_REQUEST,
    h1Fields: ['Content-Type: text/plain', 'Content-Length: 5'],
    h1Body: 'hello',
    h2Fields: { 'content-type': 'text/plain', 'content-length': '5' },
    h2Body: 'hello',
  }),
  roomCase('a chunked POST (h2: DATA without content-length)', 'POST', '/r/lobby/form', {
    body: 'bytes',
    entry: ALL_REQUEST,
    h1Fields: ['Transfer-Encoding: chunked'],
    h1Body: '5\r\nhello\r\n0\r\n\r\n',
    h2Body: 'hello',
  }),
  roomCase('a GET with Content-Length: 0', 'GET', '/r/lobby/page', { body: 'empty', entry: ALL_REQUEST, h1Fields: ['Content-Length: 0'], h2Fields: { 'content-length': '0' } }),
  // Not canonical: the byte-level front hands it to node:http, whose head check rewrites it.
  roomCase('a target with dot segments, repeated slashes and escapes', 'GET', '/r/lobby/./a/../%7euser//b/%2e%2E/c%3f%41?q=%2e/../x', {
    target: '/r/lobby/~user/c%3FA?q=%2e/../x',
    body: 'none',
    entry: ALL_REQUEST,
  }),
  // The absolute form is reduced to origin form (RFC 9112 3.2.2; its authority is the Host).
  roomCase('a target in absolute form', 'GET', '/r/lobby/page', { h1Target: `http://${HOST}/r/lobby/page`, body: 'none', entry: ALL_REQUEST }),
  // roomgate's own path (goesToTheApp false): the byte-level front hands it to node:http.
  roomCase("a GET of roomgate's own path", 'GET', '/_own/status', { body: 'none', entry: ALL_REQUEST }),
  {
    name: 'a WebSocket handshake (h2: extended CONNECT)',
    h1: h1Head('GET /ws/live/lobby HTTP/1.1', [...ROOM_FIELDS, 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Key: ${HANDSHAKE_KEY}`, 'Sec-WebSocket-Version: 13']),
    h2: { headers: { ':method': 'CONNECT', ':protocol': 'websocket', ':scheme': 'https', ':authority': HOST, ':path': '/ws/live/lobby', 'sec-websocket-version': '13', ...H2_ROOM_FIELDS }, body: null },
    // h2 clients send no key: the front makes a fresh one (h2-websocket.ts).
    expected: { ...COMMON, method: 'GET', target: '/ws/live/lobby', body: 'none', upgrade: { upgrade: 'websocket', key: HANDSHAKE_KEY, version: '13' } },
    entry: { 'h1-node': 'upgrade', 'h1-lean': 'upgrade', 'tls-node': 'upgrade', 'tls-lean': 'upgrade', h2: 'upgrade' },
  },
];

function caseNamed(start: string): Case {
  const c = CASES.find((x) => x.name.startsWith(start));
  if (c === undefined) throw new Error(`no case "${start}"`);
  return c;
}

// --- the fronts ---------------------------------------------------------------------------------

let dir: string;
let ca: Buffer;
let plainNode: Gate;
let plainLean: Gate;
let tlsNode: Gate;
let tlsLean: Gate;
let h2: ClientHttp2Session;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'canonical-request-'));
  let certificates: TlsCertificates;
  try {
    const caFiles = makeCa(dir, 'ca');
    const server = makeSigned(dir, 'server', caFiles, ['a.test']);
    // Read here once: the files are not needed after this.
    certificates = new TlsCertificates({ certs: [server], minVersion: 'TLSv1.2' });
    ca = readFileSync(caFiles.cert);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  [plainNode, plainLean, tlsNode, tlsLean] = await Promise.all([startGate(false, null), startGate(true, null), startGate(false, certificates), startGate(true, certificates)]);
  h2 = await openH2(`https://a.test:${tlsLean.port}`, () => tls.connect({ host: '127.0.0.1', port: tlsLean.port, servername: 'a.test', ca, ALPNProtocols: ['h2'] }), WAIT_MS);
});

afterAll(async () => {
  h2?.destroy();
  await Promise.all([plainNode, plainLean, tlsNode, tlsLean].filter((g) => g !== undefined).map(stopGate));
});

const plain = (g: Gate) => (): net.Socket => net.connect({ host: '127.0.0.1', port: g.port });
const overTls = (g: Gate) => (): net.Socket => tls.connect({ host: '127.0.0.1', port: g.port, servername: 'a.test', ca, ALPNProtocols: ['http/1.1'] });

/** One request through one front: what its recorder was handed for it (exactly one thing). */
async function through(front: FrontName, c: Case): Promise<{ handed: Handed; answer: string }> {
  const gate = { 'h1-node': plainNode, 'h1-lean': plainLean, 'tls-node': tlsNode, 'tls-lean': tlsLean, h2: tlsLean }[front];
  const before = gate.recorder.handed.length;
  let answer: string;
  if (front === 'h2') {
    const x = await h2Exchange(h2, c.h2);
    answer = x.status === null ? `reset ${x.rstCode}` : `status ${x.status}`;
  } else {
    answer = await h1Exchange(front.startsWith('tls') ? overTls(gate) : plain(gate), c.h1);
  }
  const handed = gate.recorder.handed.slice(before);
  expect(handed.length, `${front}: one hand-over for "${c.name}"`).toBe(1);
  return { handed: handed[0] as Handed, answer };
}

const FRONTS: readonly FrontName[] = ['h1-node', 'h1-lean', 'tls-node', 'tls-lean', 'h2'];

/** The fields every front must agree on, a key other than the one sent written as 'fresh'. */
function shared(r: ClientRequest): Shared {
  const up = r.upgrade === null ? null : { upgrade: r.upgrade.upgrade as string, key: r.upgrade.key === HANDSHAKE_KEY ? HANDSHAKE_KEY : 'fresh', version: r.upgrade.version as string };
  return { method: r.method, target: r.target, host: r.host, peer: r.peer, cookie: r.cookie, roomHeader: r.roomHeader, body: r.body, upgrade: up };
}

describe('every front hands the pipeline the same canonical request', () => {
  it.each(CASES)('$name', async (c) => {
    const got = new Map<FrontName, { handed: Handed; answer: string }>();
    for (const front of FRONTS) got.set(front, await through(front, c));
    for (const front of FRONTS) {
      const { handed, answer } = got.get(front) as { handed: Handed; answer: string };
      const r = handed.r;
      const expectedShared = front === 'h2' && c.expected.upgrade !== null ? { ...c.expected, upgrade: { ...c.expected.upgrade, key: 'fresh' } } : c.expected;
      expect({ front, ...shared(r) }).toEqual({ front, ...expectedShared });
      expect({ front, entry: handed.entry }).toEqual({ front, entry: c.entry[front] });
      expect({ front, transport: r.transport, encrypted: r.encrypted }).toEqual({ front, transport: front === 'h2' ? 'h2' : 'http/1.1', encrypted: front !== 'h1-node' && front !== 'h1-lean' });
      if (handed.entry === 'upgrade') {
        // Nothing followed the head: no bytes to carry (node:http gives an empty Buffer, the byte-level front null).
        expect({ front, rest: handed.rest }).toEqual({ front, rest: 0 });
        // The recorder closed the socket: no answer (h2: the stream reset with CANCEL).
        expect({ front, answer }).toEqual({ front, answer: front === 'h2' ? `reset ${http2.constants.NGHTTP2_CANCEL}` : '' });
      } else {
        expect({ front, answer: answer.startsWith('HTTP/1.1 200 ') || answer === 'status 200' }).toEqual({ front, answer: true });
      }
    }
    // The HTTP/1.1 fronts read the same bytes into the same field list (names as sent).
    const h1Raw = (['h1-node', 'h1-lean', 'tls-node', 'tls-lean'] as const).map((f) => got.get(f)?.handed.r.rawHeaders);
    for (const raw of h1Raw) expect(raw).toEqual(h1Raw[0]);
    // An h2 WebSocket's fresh key is what its fields carry on (the backend's handshake is made from them).
    const h2r = got.get('h2')?.handed.r as ClientRequest;
    if (h2r.upgrade !== null) {
      expect(h2r.upgrade.key).toMatch(/^[A-Za-z0-9+/]{22}==$/);
      expect(h2r.rawHeaders).toEqual(expect.arrayContaining(['Sec-WebSocket-Key', h2r.upgrade.key]));
    }
  });
});

// --- a client whose address cannot be read --------------------------------------------------------

/**
 * Requests on connections that reset before the gateway reads their address. A client process
 * connects, writes, and resets (SO_LINGER 0) while this process is blocked in execFileSync: the
 * kernel has queued the connection, its bytes and its reset before node accepts it, so the accepted
 * socket has no peer (getpeername: ENOTCONN) while its request bytes are still there to be parsed.
 * Resolves with the addresses the gateway's own sockets report, once each of them closed.
 */
async function resetBeforeAccept(g: Gate, requests: readonly string[]): Promise<(string | undefined)[]> {
  const script = `
    const net = require('node:net');
    let open = 0;
    for (const bytes of ${JSON.stringify(requests)}) {
      open++;
      const c = net.connect({ host: '127.0.0.1', port: ${g.port} });
      c.on('error', () => undefined);
      c.on('close', () => { if (--open === 0) process.exit(0); });
      c.write(bytes, 'latin1', () => c.resetAndDestroy());
    }
    setTimeout(() => process.exit(3), 4000).unref();`;
  const seen: (string | undefined)[] = [];
  const closed: Promise<void>[] = [];
  const all = new Promise<void>((resolve) => {
    const onConnection = (s: Socket): void => {
      seen.push(s.remoteAddress);
      closed.push(new Promise((r) => (s.destroyed ? r() : s.once('close', () => r()))));
      if (seen.length === requests.length) {
        g.server.off('connection', onConnection);
        resolve();
      }
    };
    g.server.on('connection', onConnection);
  });
  execFileSync(process.execPath, ['-e', script], { timeout: WAIT_MS, stdio: 'ignore' });
  await within(all, 'the reset connections accepted');
  await within(Promise.all(closed), 'the reset connections closed');
  return seen;
}

describe('a client whose address cannot be read is never handed over', () => {
  const requests = ['a plain GET', 'a POST with a body', 'a WebSocket handshake'].map((name) => caseNamed(name).h1);

  it.each([
    ['node:http', () => plainNode],
    ['node:http with the byte-level front', () => plainLean],
  ] as const)('%s: a GET, a POST and a handshake that reset before their address was read', async (_name, gate) => {
    const g = gate();
    const before = g.recorder.handed.length;
    const seen = await resetBeforeAccept(g, requests);
    // Provoked for real: the gateway's sockets had no address.
    expect(seen).toEqual([undefined, undefined, undefined]);
    expect(g.recorder.handed.slice(before)).toEqual([]);
    // The same front still hands over a client that stays.
    await through(g === plainNode ? 'h1-node' : 'h1-lean', caseNamed('a plain GET'));
  });
});

// --- the pure mappings ---------------------------------------------------------------------------

/** A node:http message as the parser leaves it, on a socket with `peer` (or none). */
function message(method: string, url: string, raw: readonly string[], socket: Partial<Socket> & object, httpVersionMajor = 1): IncomingMessage {
  const req = new IncomingMessage(socket as Socket);
  req.method = method;
  req.url = url;
  req.httpVersionMajor = httpVersionMajor;
  req.rawHeaders = [...raw];
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = raw[i + 1] as string;
    headers[name] = headers[name] === undefined ? value : `${headers[name]}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  req.headers = headers;
  return req;
}

describe('bodyDeclared', () => {
  const body = (raw: readonly string[]): string => bodyDeclared(message('POST', '/', ['Host', HOST, ...raw], { remoteAddress: PEER }));

  it('none without Content-Length or Transfer-Encoding; empty for Content-Length: 0; bytes for a length over 0 or chunked', () => {
    expect(body([])).toBe('none');
    expect(body(['Content-Length', '0'])).toBe('empty');
    // The head check lets only digits through: leading zeros are still a length of 0.
    expect(body(['Content-Length', '00'])).toBe('empty');
    expect(body(['Content-Length', '010'])).toBe('bytes');
    expect(body(['Content-Length', '1'])).toBe('bytes');
    expect(body(['Content-Length', '5'])).toBe('bytes');
    expect(body(['Transfer-Encoding', 'chunked'])).toBe('bytes');
    // Transfer-Encoding wins over a length (node:http's head check refuses both together anyway).
    expect(body(['Transfer-Encoding', 'chunked', 'Content-Length', '0'])).toBe('bytes');
  });
});

describe('requestOf', () => {
  it('maps a node:http request field by field', () => {
    const raw = ['Host', HOST, 'Cookie', 'a=1', 'X-Room-Key', 'lobby', 'cookie', 'b=2', 'Content-Length', '0'];
    const r = requestOf(message('GET', '/r/lobby/', raw, { remoteAddress: '192.0.2.7' }), ROOM_HEADER, false);
    expect(r).toEqual({
      method: 'GET',
      target: '/r/lobby/',
      host: HOST,
      transport: 'http/1.1',
      encrypted: false,
      peer: '192.0.2.7',
      upgrade: null,
      rawHeaders: raw,
      cookie: 'a=1; b=2',
      roomHeader: 'lobby',
      body: 'empty',
    });
  });

  it('reads TLS, h2, an h2 :authority without Host, and the WebSocket ask', () => {
    const raw = ['Upgrade', 'websocket', 'Sec-WebSocket-Key', HANDSHAKE_KEY, 'Sec-WebSocket-Version', '13'];
    const req = message('GET', '/ws/live/x', raw, { remoteAddress: '2001:db8::1', encrypted: true } as Partial<Socket>, 2);
    (req as unknown as { authority: string }).authority = 'h2.example';
    const r = requestOf(req, ROOM_HEADER, true);
    expect(r).toMatchObject({ host: 'h2.example', transport: 'h2', encrypted: true, peer: '2001:db8::1', upgrade: { upgrade: 'websocket', key: HANDSHAKE_KEY, version: '13' }, cookie: undefined, roomHeader: undefined, body: 'none' });
    // The same head as a page: no ask.
    expect(requestOf(req, ROOM_HEADER, false)?.upgrade).toBeNull();
  });

  it('is null for a socket with no address (never connected)', () => {
    const socket = new net.Socket();
    expect(socket.remoteAddress).toBeUndefined();
    expect(requestOf(message('GET', '/', ['Host', HOST], socket), ROOM_HEADER, false)).toBeNull();
    socket.destroy();
  });
});

describe('leanRequestOf on what parseLeanHead read', () => {
  const limits = { ...LIMITS, roomHeader: ROOM_HEADER };

  it('a page head: the same fields requestOf gives node:http, body none', () => {
    const bytes = Buffer.from(h1Head('GET /r/lobby/page?x=1 HTTP/1.1', ROOM_FIELDS), 'latin1');
    const p = parseLeanHead(bytes, 0, limits);
    if (p.kind !== 'head') throw new Error(`not a head: ${JSON.stringify(p)}`);
    expect(leanRequestOf(p.head, null, '192.0.2.9', true)).toEqual({
      method: 'GET',
      target: '/r/lobby/page?x=1',
      host: HOST,
      transport: 'http/1.1',
      encrypted: true,
      peer: '192.0.2.9',
      upgrade: null,
      rawHeaders: ['Host', HOST, 'Cookie', 'rg_room=lobby', 'X-Room-Key', 'lobby', 'Cookie', 'theme=dark'],
      cookie: 'rg_room=lobby; theme=dark',
      roomHeader: 'lobby',
      body: 'none',
    });
    // ...and what requestOf makes of the same head as node:http parses it.
    const viaNode = requestOf(message('GET', '/r/lobby/page?x=1', p.head.rawHeaders, { remoteAddress: '192.0.2.9', encrypted: true } as Partial<Socket>), ROOM_HEADER, false);
    expect(viaNode).toEqual(leanRequestOf(p.head, null, '192.0.2.9', true));
  });

  it('a HEAD without cookie or room header', () => {
    const p = parseLeanHead(Buffer.from(`HEAD / HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`, 'latin1'), 0, limits);
    if (p.kind !== 'head') throw new Error(`not a head: ${JSON.stringify(p)}`);
    expect(leanRequestOf(p.head, null, PEER, false)).toMatchObject({ method: 'HEAD', target: '/', cookie: undefined, roomHeader: undefined, upgrade: null, encrypted: false, body: 'none' });
  });

  it('a handshake: the WebSocket ask as its head says it', () => {
    const bytes = Buffer.from(h1Head('GET /ws/live/lobby HTTP/1.1', [...ROOM_FIELDS, 'Upgrade: WebSocket', 'Connection: keep-alive, Upgrade', `Sec-WebSocket-Key: ${HANDSHAKE_KEY}`, 'Sec-WebSocket-Version: 13']), 'latin1');
    const p = parseLeanHead(bytes, 0, limits);
    if (p.kind !== 'upgrade') throw new Error(`not a handshake: ${JSON.stringify(p)}`);
    const r = leanRequestOf(p.handshake.head, p.handshake, PEER, false);
    expect(r).toMatchObject({ method: 'GET', target: '/ws/live/lobby', host: HOST, cookie: 'rg_room=lobby; theme=dark', roomHeader: 'lobby', body: 'none', upgrade: { upgrade: 'WebSocket', key: HANDSHAKE_KEY, version: '13' } });
  });
});
