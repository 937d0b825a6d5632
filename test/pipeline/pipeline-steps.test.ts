// The request pipeline with its real parts, each step's place in the order proved on real sockets.
// The data plane is built as the gateway builds it (buildDataPlane: the Router with its key
// extractor, the Forwarder, the PageCache, HttpProxy, UpgradeProxy with its Admission) over a real
// BackendPool and Placer (testPlacer) and a memory placement store; a node:http server hands each
// request to the RequestPipeline through requestOf, as the node:http front does; the backends are
// node:http servers in this process that record every request and handshake they get. No gateway
// process, no sleeps: every wait is on an event, with a timeout.
//
// Each case asks a question only the order answers: a refusal written before the body arrives
// (method before body), a bad key not counted (body before key), a backend that never hears of a
// request (every step before the forwarding core), a cached copy served without one (cache before
// forwarding), a 503 of admission that only a request placed on a backend gets (placement before
// admission).
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultBackendTls } from '../../src/backends/backend-tls.js';
import { buildDataPlane, type DataPlane } from '../../src/compose/data-plane.js';
import type { Runtime } from '../../src/compose/runtime.js';
import { validate, type LoadedConfig, type ResolvedBackend } from '../../src/config/load.js';
import { requestOf } from '../../src/http/client-request.js';
import { clientRefusal, REFUSALS } from '../../src/http/refusals.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import type { OwnPaths } from '../../src/pipeline/pipeline.js';
import { pipelineOf } from '../../src/compose/fronts.js';
import { MemoryPlacementStore } from '../../src/placement/memory-store.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { TunnelRegistry } from '../../src/runtime/tunnels.js';
import { testPlacer } from '../support/runtime-parts.js';
import { chooseRelay } from '../../src/proxy/native-relay.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';

/** Every wait on a socket: far above what a step takes on loopback, far below the test's budget. */
const WAIT_MS = 2_000;
const logger = createLogger('silent', { write: () => undefined });
const backendTls = defaultBackendTls();
const closers: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

// ---------------------------------------------------------------------------------------------
// Backends: node:http servers that record what reaches them.

interface Seen {
  readonly method: string;
  readonly url: string;
  /** The room the gateway told the backend (X-Roomgate-Room). */
  readonly room: string | undefined;
  readonly body: string;
}

interface RecordingBackend {
  readonly config: ResolvedBackend;
  readonly requests: Seen[];
  /** The targets of the WebSocket handshakes it got (held: answered only by answerHandshakes). */
  readonly handshakes: string[];
  /** 'request' and 'handshake', as they arrive. */
  readonly events: EventEmitter;
  /** Answers every held handshake with a 101. */
  answerHandshakes(): void;
}

function backendConfig(id: string, port: number): ResolvedBackend {
  return { id, url: `http://127.0.0.1:${port}`, host: '127.0.0.1', port, weight: 1 };
}

/** A backend that answers pages with its id (cacheable under /cached/) and holds WebSocket handshakes. */
async function recordingBackend(id: string): Promise<RecordingBackend> {
  const requests: Seen[] = [];
  const handshakes: string[] = [];
  const held: net.Socket[] = [];
  const events = new EventEmitter();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', room: req.headers['x-roomgate-room'] as string | undefined, body: Buffer.concat(chunks).toString() });
      const body = `from ${id}`;
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': String(body.length), 'Cache-Control': req.url?.startsWith('/cached/') ? 'public, max-age=60' : 'no-store' });
      res.end(body);
      events.emit('request');
    });
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
    handshakes.push(req.url ?? '');
    held.push(socket);
    socket.on('error', () => socket.destroy());
    events.emit('handshake');
  });
  const url = await listenOnLoopback(server);
  closers.push(closing(server));
  return {
    config: backendConfig(id, Number(new URL(url).port)),
    requests,
    handshakes,
    events,
    answerHandshakes: () => {
      for (const s of held.splice(0)) s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    },
  };
}

/**
 * Closes `server` with every connection it ever took: an upgraded socket (a tunnel's, a held
 * handshake's) is no longer node:http's, and closeAllConnections does not reach it.
 */
function closing(server: http.Server): () => Promise<void> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  return async () => {
    for (const s of sockets) s.destroy();
    await closeServer(server);
  };
}

/** A backend whose port refuses connections (nothing listens there any more). */
async function refusingBackend(id: string): Promise<ResolvedBackend> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return backendConfig(id, port);
}

/** Resolves on the emitter's next `event`; rejects after WAIT_MS. */
async function next(events: EventEmitter, event: 'request' | 'handshake'): Promise<void> {
  try {
    await once(events, event, { signal: AbortSignal.timeout(WAIT_MS) });
  } catch {
    throw new Error(`no ${event} reached the backend within ${WAIT_MS} ms`);
  }
}

// ---------------------------------------------------------------------------------------------
// The gateway: the real data plane, its pipeline, and a node:http server in front.

interface Gate {
  readonly port: number;
  readonly data: DataPlane;
  readonly pool: BackendPool;
  readonly metrics: Metrics;
}

/** roomgate's own paths: none here (steps 2 to 4 are pipeline.test.ts's). */
const OWNS_NOTHING: OwnPaths = {
  owns: () => false,
  handle: () => {
    throw new Error('no path is owned here');
  },
};

/**
 * The data plane over `backends` (all up), configured by `settings` (the config file's keys,
 * validated with the schema's defaults for the rest), behind a node:http server that hands every
 * request to the pipeline as the node:http front does.
 */
async function gateway(backends: readonly ResolvedBackend[], settings: { room?: object; proxy?: object; cache?: object; admission?: object }): Promise<Gate> {
  const { config, problems } = validate({
    ...settings,
    cookie: { secrets: ['0123456789abcdef0123456789abcdef'] },
    proxy: { leanPages: false, websocketPaths: ['/ws/'], ...settings.proxy },
  });
  if (config === undefined) throw new Error(`test configuration: ${problems.join('; ')}`);
  const loaded: LoadedConfig = { ...config, backends: [...backends] };
  const metrics = createMetrics(() => []);
  const pool = new BackendPool(loaded.backends, loaded.proxy.passiveDownMs);
  for (const b of loaded.backends) pool.setHealth(b.id, 'up', 'test');
  const tunnels = new TunnelRegistry(pool);
  const store = new MemoryPlacementStore('gw-test', { idleTtlMs: 30_000, gatewayTtlMs: 5_000 });
  const placer = testPlacer({ store, pool, tunnels, logger, noRoom: loaded.room.noRoom });
  // Of the runtime, the data plane reads the pool, the tunnels and the placer (src/compose/data-plane.ts).
  const runtime = { pool, tunnels, placer } as Partial<Runtime> as Runtime;
  const data = buildDataPlane(loaded, { logger, metrics, backendTls, runtime, relay: chooseRelay('javascript') });
  // The parts wired as the gateway wires them (src/compose/fronts.ts).
  const pipeline = pipelineOf(data, OWNS_NOTHING, () => true);
  const roomHeader = loaded.room.header.toLowerCase();
  const server = http.createServer((req, res) => {
    const r = requestOf(req, roomHeader, false);
    if (r === null) res.destroy();
    else pipeline.request(r, req, res);
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, rest: Buffer) => {
    const r = requestOf(req, roomHeader, true);
    if (r === null) socket.destroy();
    else pipeline.upgrade(r, socket, rest);
  });
  const url = await listenOnLoopback(server);
  const stopServer = closing(server);
  closers.push(async () => {
    // As the gateway stops: open tunnels are cut both ways first (src/gateway.ts).
    tunnels.destroyAll();
    await stopServer();
    data.httpProxy.close();
    data.upgradeProxy.close();
    data.cache?.close();
    placer.close();
    await store.close();
  });
  return { port: Number(new URL(url).port), data, pool, metrics };
}

// ---------------------------------------------------------------------------------------------
// Clients: raw sockets, so that a head can be sent without its body and the answer read as sent.

interface Answer {
  readonly status: number;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** The answer once its head and Content-Length body are in (a 101: its head), else null. */
function parseAnswer(buf: Buffer, ended: boolean): Answer | null {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const [statusLine = '', ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = Number(statusLine.split(' ')[1]);
  const body = buf.subarray(end + 4);
  if (status === 101) return { status, headers, body: '' };
  const length = headers['content-length'];
  if (length !== undefined && body.length >= Number(length)) return { status, headers, body: body.subarray(0, Number(length)).toString() };
  return ended ? { status, headers, body: body.toString() } : null;
}

/**
 * Opens a connection to the gateway, sends `text` (a head, maybe without its body) and resolves
 * with the answer. A promise a case awaits later is marked handled, so a case that fails before
 * then reports its own failure, not this one's timeout as well.
 */
function send(gate: Gate, text: string): Promise<{ answer: Answer; socket: net.Socket }> {
  const p = answerTo(gate, text);
  p.catch(() => undefined);
  return p;
}

async function answerTo(gate: Gate, text: string): Promise<{ answer: Answer; socket: net.Socket }> {
  const socket = net.connect(gate.port, '127.0.0.1');
  closers.push(() => void socket.destroy());
  socket.write(text);
  const signal = AbortSignal.timeout(WAIT_MS);
  const answer = await new Promise<Answer>((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const settle = (a: Answer | null, err: Error | null): void => {
      socket.off('data', onData);
      socket.off('close', onClose);
      signal.removeEventListener('abort', onAbort);
      if (a !== null) resolve(a);
      else reject(err ?? new Error('no answer'));
    };
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      const a = parseAnswer(buf, false);
      if (a !== null) settle(a, null);
    };
    const onClose = (): void => settle(parseAnswer(buf, true), new Error(`connection closed without an answer to ${JSON.stringify(text.split('\r\n')[0])}`));
    const onAbort = (): void => settle(null, new Error(`no answer within ${WAIT_MS} ms to ${JSON.stringify(text.split('\r\n')[0])}`));
    socket.on('data', onData);
    socket.on('close', onClose);
    signal.addEventListener('abort', onAbort);
  });
  return { answer, socket };
}

/** A request head with `fields` (the connection kept alive, as clients do), and `body` if given. */
function head(method: string, target: string, fields: Record<string, string> = {}, body = ''): string {
  let text = `${method} ${target} HTTP/1.1\r\nHost: gw.test\r\n`;
  for (const [k, v] of Object.entries(fields)) text += `${k}: ${v}\r\n`;
  return `${text}\r\n${body}`;
}

/** A WebSocket handshake for `target`. */
function handshake(target: string): string {
  return `GET ${target} HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
}

async function ask(gate: Gate, text: string): Promise<Answer> {
  return (await send(gate, text)).answer;
}

/** roomgate's own answer (src/http/refusals.ts): its status, and its text first in the body. */
function expectRefusal(a: Answer, code: keyof typeof REFUSALS): void {
  expect(a.status).toBe(REFUSALS[code].status);
  expect(a.body.split('\n')[0]).toBe(REFUSALS[code].text);
}

async function badKeysCounted(gate: Gate): Promise<number> {
  return (await gate.metrics.badRoomKeys.get()).values.reduce((n, v) => n + v.value, 0);
}

/** A room whose placement (made now) is on backend `id`. */
async function roomPlacedOn(gate: Gate, id: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const room = `room-${i}`;
    const d = await gate.data.router.decide(room, Date.now());
    if ('route' in d && d.route === id) return room;
  }
  throw new Error(`no room lands on ${id}`);
}

/** An invalid key by room.pattern: counted when the key step reads it. */
const BAD_KEY = 'no*such*room';

// ---------------------------------------------------------------------------------------------

describe('the request pipeline with its real parts: each step in its place', () => {
  it('step 5 before 6: TRACE and an unknown method with a body are refused before the body arrives; the backend gets nothing', async () => {
    const backend = await recordingBackend('a');
    const gate = await gateway([backend.config], {});
    // Only the heads are sent: an answer now proves the body was never waited for.
    const { answer: trace, socket } = await send(gate, head('TRACE', '/page?room=r1', { 'Content-Length': '5' }));
    expectRefusal(trace, 'method-not-allowed');
    expect(trace.headers.allow).toBe(gate.data.methods.allow);
    // The unread body would be taken for the next request: the connection ends with the answer.
    expect(trace.headers.connection).toBe('close');
    if (!socket.closed) await once(socket, 'close', { signal: AbortSignal.timeout(WAIT_MS) });
    const purge = await ask(gate, head('PURGE', '/page?room=r1', { 'Content-Length': '5' }));
    expectRefusal(purge, 'method-unknown');
    expect(backend.requests).toEqual([]);
    // The same request with an allowed method reaches the backend, its body whole.
    expect(await ask(gate, head('POST', '/page?room=r1', { 'Content-Length': '5' }, 'hello'))).toMatchObject({ status: 200, body: 'from a' });
    expect(backend.requests).toEqual([{ method: 'POST', url: '/page?room=r1', room: 'r1', body: 'hello' }]);
  });

  it('step 6 before 7: a body over proxy.maxBodyBytes gets 413 with no room-key work and no backend', async () => {
    const backend = await recordingBackend('a');
    const gate = await gateway([backend.config], { proxy: { maxBodyBytes: 1_024, bufferBodyBytes: 256 } });
    const tooLarge = await ask(gate, head('POST', `/page?room=${BAD_KEY}`, { 'Content-Length': '2048' }));
    expectRefusal(tooLarge, 'body-too-large');
    expect(await badKeysCounted(gate)).toBe(0);
    // A body within the limit goes on to the key step, which counts the same bad key.
    await ask(gate, head('POST', `/page?room=${BAD_KEY}`, { 'Content-Length': '2' }, 'ok'));
    expect(await badKeysCounted(gate)).toBe(1);
    // Only that one reached the backend (room.noRoom least-loaded placed it); the refused one never did.
    expect(backend.requests).toEqual([{ method: 'POST', url: `/page?room=${BAD_KEY}`, room: undefined, body: 'ok' }]);
  });

  it('step 7: with room.noRoom reject, no key and a bad key get 400 (the bad one counted), and no backend hears of either', async () => {
    const backend = await recordingBackend('a');
    const gate = await gateway([backend.config], { room: { noRoom: 'reject' } });
    expectRefusal(await ask(gate, head('GET', '/page')), 'no-room-key');
    expect(await badKeysCounted(gate)).toBe(0);
    expectRefusal(await ask(gate, head('GET', `/page?room=${BAD_KEY}`)), 'no-room-key');
    expect((await gate.metrics.badRoomKeys.get()).values).toEqual([expect.objectContaining({ labels: { source: 'query', reason: 'invalid' }, value: 1 })]);
    expect(backend.requests).toEqual([]);
    // A valid key passes.
    expect(await ask(gate, head('GET', '/page?room=r1'))).toMatchObject({ status: 200, body: 'from a' });
  });

  it('step 8 before 9: a cached page is answered without the backend; a request the cache passes carries Cache-Status on the backend\'s answer', async () => {
    const backend = await recordingBackend('a');
    const gate = await gateway([backend.config], { cache: { paths: ['/cached/'] } });
    const first = await ask(gate, head('GET', '/cached/page?room=r1'));
    expect(first).toMatchObject({ status: 200, body: 'from a' });
    expect(first.headers['cache-status']).toMatch(/^roomgate; fwd=uri-miss/);
    expect(backend.requests).toHaveLength(1);
    const second = await ask(gate, head('GET', '/cached/page?room=r1'));
    expect(second).toMatchObject({ status: 200, body: 'from a' });
    expect(second.headers['cache-status']).toMatch(/^roomgate; hit; ttl=\d+$/);
    expect(backend.requests).toHaveLength(1);
    // Not a cached path: passed on to the forwarding core, and the backend's answer says why.
    const passed = await ask(gate, head('GET', '/page?room=r1'));
    expect(passed).toMatchObject({ status: 200, body: 'from a' });
    expect(passed.headers['cache-status']).toBe('roomgate; fwd=bypass; detail=path');
    expect(backend.requests.map((r) => r.url)).toEqual(['/cached/page?room=r1', '/page?room=r1']);
  });

  it("step 9, placement: each room's requests go to the backend its placement names, and stay there", async () => {
    const [a, b] = [await recordingBackend('a'), await recordingBackend('b')];
    const gate = await gateway([a.config, b.config], {});
    const rooms = Array.from({ length: 8 }, (_, i) => `room-${i}`);
    for (const room of rooms) expect((await ask(gate, head('GET', `/page?room=${room}`))).status).toBe(200);
    for (const room of rooms) expect((await ask(gate, head('GET', `/page?room=${room}`))).status).toBe(200);
    const placed = new Map<string, string>();
    for (const room of rooms) {
      const d = await gate.data.router.decide(room, Date.now());
      placed.set(room, 'route' in d ? d.route : 'none');
    }
    // Both backends hold rooms, so "the right backend" is not "the only one".
    expect(new Set(placed.values())).toEqual(new Set(['a', 'b']));
    for (const [id, backend] of [['a', a], ['b', b]] as const) {
      const expected = rooms.filter((r) => placed.get(r) === id);
      expect(backend.requests.map((r) => r.room)).toEqual([...expected, ...expected]);
    }
  });

  it('step 9, the forwarding core: a refused connection marks the backend down and the next backend gets the request', async () => {
    const [dead, live] = [await refusingBackend('dead'), await recordingBackend('live')];
    const gate = await gateway([dead, live.config], {});
    const room = await roomPlacedOn(gate, 'dead');
    expect(await ask(gate, head('GET', `/page?room=${room}`))).toMatchObject({ status: 200, body: 'from live' });
    expect(live.requests).toEqual([expect.objectContaining({ url: `/page?room=${room}`, room })]);
    expect(gate.pool.get('dead')?.routable(Date.now())).toBe(false);
    expect((await gate.metrics.proxyErrors.get()).values).toContainEqual(expect.objectContaining({ labels: { backend: 'dead', kind: 'refused' }, value: 1 }));
  });

  it('step 9, admission: with one upgrade in flight a second to that backend gets 503 backend-busy and never reaches it; one with no key gets 400, not 503', async () => {
    const backend = await recordingBackend('a');
    const gate = await gateway([backend.config], { room: { noRoom: 'reject' }, admission: { maxInflightUpgrades: 1, retryAfterS: 7 } });
    const handshakeSeen = next(backend.events, 'handshake');
    const first = send(gate, handshake('/ws/live?room=r1'));
    await handshakeSeen;
    const busy = await ask(gate, handshake('/ws/live?room=r2'));
    expectRefusal(busy, 'backend-busy');
    expect(busy.headers['retry-after']).toBe('7');
    expect(backend.handshakes).toEqual(['/ws/live?room=r1']);
    // Admission is asked once placement named a backend: a handshake with no key is refused by
    // placement, whatever admission would say.
    expectRefusal(await ask(gate, handshake('/ws/live')), 'no-room-key');
    expect((await gate.metrics.admissionRefusals.get()).values).toEqual([expect.objectContaining({ labels: { backend: 'a' }, value: 1 })]);
    // The backend answers the first: its tunnel opens, and its slot is free for the next handshake.
    backend.answerHandshakes();
    expect((await first).answer.status).toBe(101);
    const thirdSeen = next(backend.events, 'handshake');
    const third = send(gate, handshake('/ws/live?room=r3'));
    await thirdSeen;
    backend.answerHandshakes();
    expect((await third).answer.status).toBe(101);
    expect(backend.handshakes).toEqual(['/ws/live?room=r1', '/ws/live?room=r3']);
  });

  it('step 5 for a handshake: a path outside proxy.websocketPaths is 404 and never reaches a backend', async () => {
    const backend = await recordingBackend('a');
    const gate = await gateway([backend.config], {});
    const refused = await ask(gate, handshake('/elsewhere/live?room=r1'));
    const expected = clientRefusal('websocket-route');
    expect(refused.status).toBe(expected.status);
    expect(refused.body).toBe(expected.body);
    // The room prefix is stripped before the paths are matched: /r/r1/elsewhere is still elsewhere.
    expect((await ask(gate, handshake('/r/r1/elsewhere/live'))).status).toBe(expected.status);
    expect(backend.handshakes).toEqual([]);
    // On a WebSocket path the same handshake goes through.
    const seen = next(backend.events, 'handshake');
    const ok = send(gate, handshake('/ws/live?room=r1'));
    await seen;
    backend.answerHandshakes();
    expect((await ok).answer.status).toBe(101);
    expect(backend.handshakes).toEqual(['/ws/live?room=r1']);
  });
});
