// The public data API over real sockets: a node:http server on 127.0.0.1:0 that hands every
// request under /_roomgate/ to the control plane (as the public server does), over the in-memory
// shared store (several handles on one state stand for several gateways). Every route, every
// error code, tokens, limits, the SSE lobby stream (snapshot, change events, coalescing,
// unavailable and recovery, ping, shutdown, disconnect), a store that is down, and the raw paths
// fastify's inject() would normalize ("." and ".."). The OpenAPI document: test/api/openapi.test.ts.
// Every wait has a timeout.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/control/api-routes.js';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { MemorySharedDataState, MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import type { CachePurge, HandoffSignal, LobbyPage, LobbyQuery, LobbyRoom, Online, PresenceAnswer, PresenceDelta, Ranked, RoomMeta, RoomPresence, ScoreMode, SharedDataEvent, SharedDataStore } from '../../src/shared-data/store.js';
import { makeControl, memoryLogger } from '../support/control.js';

const TOKEN = 'test-token-0123456789abcdef';
const TOKEN2 = 'second-token-ABCDEFGHIJKLMNOP';
const TTL = 60_000;

// ---------------------------------------------------------------------------------------------
// Harness

/** Log lines written by the API (JSON strings), to check what is (and is not) logged. */
const { logger, lines: logLines } = memoryLogger('debug');

interface ApiOptions {
  tokens: string[];
  maxMetaBytes: number;
  streamIntervalMs: number;
  streamPingMs: number;
  bodyTimeoutMs: number;
  /** api.listRooms: ['*'] unless a test says (the reads of every room are tested with all listed; privacy in its own describe). */
  listRooms: string[];
  publicReads: boolean;
}

interface Harness {
  readonly api: ControlPlane;
  readonly server: http.Server;
  readonly base: string;
  readonly port: number;
}

const harnesses: Harness[] = [];

async function startApi(store: SharedDataStore, over: Partial<ApiOptions> = {}): Promise<Harness> {
  const { control: api } = makeControl(
    store,
    {
      api: {
        tokens: over.tokens ?? [TOKEN, TOKEN2],
        maxMetaBytes: over.maxMetaBytes ?? 512,
        streamIntervalMs: over.streamIntervalMs ?? 150,
        maxStreams: 64,
        listRooms: over.listRooms ?? ['*'],
        publicReads: over.publicReads ?? true,
      },
    },
    { logger, streamPingMs: over.streamPingMs ?? 15_000, ...(over.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: over.bodyTimeoutMs }) },
  );
  const server = http.createServer((req, res) => {
    if (api.owns(req.url ?? '/')) return api.handle(req, res);
    res.writeHead(599);
    res.end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const h = { api, server, port, base: `http://127.0.0.1:${port}${API_PREFIX}` };
  harnesses.push(h);
  return h;
}

async function stopAll(): Promise<void> {
  for (const h of harnesses.splice(0)) {
    await h.api.close();
    h.server.closeAllConnections();
    await new Promise<void>((resolve) => h.server.close(() => resolve()));
  }
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

async function call(
  h: Harness,
  method: string,
  path: string,
  opts: { body?: unknown; raw?: string; token?: string | null; auth?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.auth !== undefined) headers['authorization'] = opts.auth;
  else if (opts.token !== undefined && opts.token !== null) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(h.base + path, { method, headers, body, signal: AbortSignal.timeout(10_000) });
  const text = await r.text();
  let json: unknown = undefined;
  if (text !== '' && (r.headers.get('content-type') ?? '').startsWith('application/json')) json = JSON.parse(text);
  return { status: r.status, headers: r.headers, text, json };
}

/** An http.request without fetch's URL normalization: the path goes out exactly as given. */
function rawRequest(h: Harness, method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: h.port, method, path, headers, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, json: text ? (JSON.parse(text) as unknown) : undefined });
      });
    });
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

function expectError(a: Answer | { status: number; json: unknown }, status: number, code: string): void {
  expect(a.status, JSON.stringify(a.json)).toBe(status);
  expect(a.json).toEqual({ error: { code, message: expect.any(String) } });
}

async function waitFor(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function presence(room: string, backend: string, sockets: number, since = Date.now()): RoomPresence {
  return { room, backend, sockets, since };
}

/** A store wrapper: counts calls, and can reject every call and/or report itself down. */
class FlakyStore implements SharedDataStore {
  readonly kind = 'memory' as const;
  async connect(): Promise<void> {
    return this.inner.connect();
  }
  rejecting = false;
  reportDown = false;
  /** Resolve online() with something JSON cannot serialize (an internal error). */
  poisonOnline = false;
  readonly calls: string[] = [];
  private readonly listeners = new Set<(ev: SharedDataEvent) => void>();
  private readonly unsub: () => void;

  constructor(readonly inner: SharedDataStore) {
    this.unsub = inner.subscribe((ev) => this.emit(ev));
  }

  get available(): boolean {
    return !this.reportDown && this.inner.available;
  }

  /** Down for everyone (rejects, reports down, emits the availability event) or back up. */
  setDown(down: boolean): void {
    this.rejecting = down;
    this.reportDown = down;
    this.emit({ type: 'available', available: !down });
  }

  private emit(ev: SharedDataEvent): void {
    for (const l of [...this.listeners]) l(ev);
  }

  private async go<T>(name: string, f: () => Promise<T>): Promise<T> {
    this.calls.push(name);
    if (this.rejecting) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    return f();
  }

  claimIdempotency(key: string, ttlMs: number): Promise<string | null> {
    return this.go('claimIdempotency', () => this.inner.claimIdempotency(key, ttlMs));
  }

  settleIdempotency(key: string, answer: string, ttlMs: number): Promise<void> {
    return this.go('settleIdempotency', () => this.inner.settleIdempotency(key, answer, ttlMs));
  }

  releaseIdempotency(key: string): Promise<void> {
    return this.go('releaseIdempotency', () => this.inner.releaseIdempotency(key));
  }

  publishCachePurge(purge: CachePurge): Promise<void> {
    return this.go('publishCachePurge', () => this.inner.publishCachePurge(purge));
  }

  publishHandoff(signal: HandoffSignal): Promise<void> {
    return this.go('publishHandoff', () => this.inner.publishHandoff(signal));
  }

  otherGateways(): Promise<string[]> {
    return this.go('otherGateways', () => this.inner.otherGateways());
  }

  publishPresence(rooms: readonly RoomPresence[] | PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer> {
    return this.go('publishPresence', () => this.inner.publishPresence(rooms, ttlMs));
  }
  withdrawPresence(): Promise<void> {
    return this.go('withdrawPresence', () => this.inner.withdrawPresence());
  }
  online(): Promise<Online> {
    if (this.poisonOnline) return this.go('online', async () => ({ total: 1n, rooms: 0, byBackend: {} }) as unknown as Online);
    return this.go('online', () => this.inner.online());
  }
  lobby(q: LobbyQuery): Promise<LobbyPage> {
    return this.go('lobby', () => this.inner.lobby(q));
  }
  room(room: string): Promise<LobbyRoom | null> {
    return this.go('room', () => this.inner.room(room));
  }
  setMeta(room: string, meta: RoomMeta, pinned: boolean): Promise<void> {
    return this.go('setMeta', () => this.inner.setMeta(room, meta, pinned));
  }
  deleteMeta(room: string): Promise<boolean> {
    return this.go('deleteMeta', () => this.inner.deleteMeta(room));
  }
  score(board: string, member: string, value: number, mode: ScoreMode): Promise<number> {
    return this.go('score', () => this.inner.score(board, member, value, mode));
  }
  top(board: string, offset: number, limit: number): Promise<Ranked[]> {
    return this.go('top', () => this.inner.top(board, offset, limit));
  }
  member(board: string, member: string): Promise<Ranked | null> {
    return this.go('member', () => this.inner.member(board, member));
  }
  around(board: string, member: string, n: number): Promise<Ranked[]> {
    return this.go('around', () => this.inner.around(board, member, n));
  }
  boardExists(board: string): Promise<boolean> {
    return this.go('boardExists', () => this.inner.boardExists(board));
  }
  boardSize(board: string): Promise<number> {
    return this.go('boardSize', () => this.inner.boardSize(board));
  }
  subscribe(listener: (ev: SharedDataEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  get subscribers(): number {
    return this.listeners.size;
  }
  async close(): Promise<void> {
    this.unsub();
    await this.inner.close();
  }
}

/** Two gateways on one in-memory state: the API's own handle and another gateway's. */
function memoryStores(): { state: MemorySharedDataState; mine: MemorySharedDataStore; other: MemorySharedDataStore } {
  const state = new MemorySharedDataState();
  return {
    state,
    mine: new MemorySharedDataStore('gw-api', { presenceTtlMs: TTL }, state),
    other: new MemorySharedDataStore('gw-other', { presenceTtlMs: TTL }, state),
  };
}

// ---------------------------------------------------------------------------------------------
// SSE client: http.get, parsed incrementally.

interface SseEvent {
  readonly event: string;
  readonly data: any;
  readonly at: number;
}

class SseClient {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  retry: number | null = null;
  ended = false;
  private buf = '';
  private cursor = 0;

  private constructor(
    readonly req: http.ClientRequest,
    readonly res: http.IncomingMessage,
  ) {
    res.setEncoding('utf8');
    res.on('data', (c: string) => {
      this.buf += c;
      this.parse();
    });
    res.on('end', () => (this.ended = true));
    res.on('close', () => (this.ended = true));
    res.on('error', () => (this.ended = true));
  }

  static open(url: string, timeoutMs = 5_000): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        req.destroy();
        reject(new Error(`no SSE response within ${timeoutMs} ms`));
      }, timeoutMs);
      const req = http.get(url, { headers: { accept: 'text/event-stream' } }, (res) => {
        clearTimeout(timer);
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`SSE status ${res.statusCode}`));
        }
        resolve(new SseClient(req, res));
      });
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  private parse(): void {
    let i: number;
    while ((i = this.buf.indexOf('\n\n')) >= 0) {
      const block = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          this.comments.push(line.slice(1).trim());
          continue;
        }
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let value = c < 0 ? '' : line.slice(c + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'retry') this.retry = Number(value);
      }
      if (data.length > 0) this.events.push({ event, data: JSON.parse(data.join('\n')) as unknown, at: Date.now() });
    }
  }

  /** The next event not yet returned. */
  async next(timeoutMs: number): Promise<SseEvent> {
    await waitFor(() => this.events.length > this.cursor || this.ended, timeoutMs, `an SSE event (${this.events.length} so far)`);
    const ev = this.events[this.cursor];
    if (!ev) throw new Error('stream ended');
    this.cursor++;
    return ev;
  }

  /** Events received after the cursor (without consuming them). */
  get unread(): SseEvent[] {
    return this.events.slice(this.cursor);
  }

  close(): void {
    this.req.destroy();
  }
}

const sseClients: SseClient[] = [];
async function openStream(h: Harness, query = ''): Promise<SseClient> {
  const c = await SseClient.open(`${h.base}/lobby/stream${query}`);
  sseClients.push(c);
  return c;
}

afterAll(async () => {
  for (const c of sseClients) c.close();
  await stopAll();
});

// ---------------------------------------------------------------------------------------------

describe('reads: online, lobby, one room', () => {
  let h: Harness;
  let other: MemorySharedDataStore;
  let mine: MemorySharedDataStore;
  const t0 = Date.parse('2025-01-01T00:00:00Z');

  beforeAll(async () => {
    ({ mine, other } = memoryStores());
    h = await startApi(mine);
    // 30 rooms over two gateways and two backends; room-07 is on both gateways.
    const a: RoomPresence[] = [];
    const b: RoomPresence[] = [];
    for (let i = 0; i < 30; i++) {
      const room = `room-${String(i).padStart(2, '0')}`;
      (i % 2 === 0 ? a : b).push(presence(room, i % 3 === 0 ? 'b1' : 'b2', (i % 7) + 1, t0 + i * 1000));
    }
    b.push(presence('room-07', 'b2', 10, t0 - 5000));
    b.push(presence('lobby:x', 'b1', 2, t0));
    await mine.publishPresence(a, TTL);
    await other.publishPresence(b, TTL);
    await mine.setMeta('room-03', { status: 'open', title: 'three' }, false);
    await mine.setMeta('room-04', { status: 'open' }, false);
    await mine.setMeta('room-05', { status: 'closed' }, false);
  });

  it('GET /online sums every gateway', async () => {
    const a = await call(h, 'GET', '/online');
    expect(a.status).toBe(200);
    expect(a.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(a.headers.get('cache-control')).toBe('no-store');
    expect(a.headers.get('access-control-allow-origin')).toBeNull();
    let total = 0;
    for (let i = 0; i < 30; i++) total += (i % 7) + 1;
    total += 10 + 2;
    expect(a.json.total).toBe(total);
    expect(a.json.rooms).toBe(31);
    // Counts only: no backend id (the admin port has those).
    expect(Object.keys(a.json).sort()).toEqual(['rooms', 'total']);
  });

  it('GET /lobby: default sort is sockets desc, limit 50', async () => {
    const a = await call(h, 'GET', '/lobby');
    expect(a.status).toBe(200);
    expect(a.json.total).toBe(31);
    expect(a.json.rooms).toHaveLength(31);
    expect(a.json.nextOffset).toBeNull();
    const sockets = (a.json.rooms as LobbyRoom[]).map((r) => r.sockets);
    expect(sockets).toEqual([...sockets].sort((x, y) => y - x));
    expect(a.json.rooms[0]).toMatchObject({ room: 'room-07', sockets: 11, since: new Date(t0 - 5000).toISOString(), pinned: false });
    expect((a.json.rooms as LobbyRoom[]).some((r) => 'backend' in r)).toBe(false);
  });

  it('GET /lobby: filters status, prefix, minSockets; backend is refused (400), backend ids are not public', async () => {
    const open = await call(h, 'GET', '/lobby?status=open&sort=room');
    expect((open.json.rooms as LobbyRoom[]).map((r) => r.room)).toEqual(['room-03', 'room-04']);
    expect(open.json.rooms[0].meta).toEqual({ status: 'open', title: 'three' });
    const b1 = await call(h, 'GET', '/lobby?backend=b1&limit=500');
    expectError(b1, 400, 'bad_request');
    expect(b1.json.error.message).toContain('query parameter "backend" is not offered');
    expectError(await call(h, 'GET', '/lobby/stream?backend=b1'), 400, 'bad_request');
    expect((await call(h, 'GET', '/lobby?backend=')).status).toBe(200);
    const pre = await call(h, 'GET', '/lobby?prefix=lobby%3A');
    expect((pre.json.rooms as LobbyRoom[]).map((r) => r.room)).toEqual(['lobby:x']);
    const min = await call(h, 'GET', '/lobby?minSockets=7');
    expect((min.json.rooms as LobbyRoom[]).every((r) => r.sockets >= 7)).toBe(true);
    expect(min.json.total).toBe(5); // four rooms with 7 sockets + room-07 with 11
  });

  it('GET /lobby: sort since/room with their default order, and explicit order', async () => {
    const since = await call(h, 'GET', '/lobby?sort=since&limit=3');
    // Equal since: by room key.
    expect((since.json.rooms as LobbyRoom[]).map((r) => r.room)).toEqual(['room-07', 'lobby:x', 'room-00']);
    const room = await call(h, 'GET', '/lobby?sort=room&order=desc&limit=2');
    expect((room.json.rooms as LobbyRoom[]).map((r) => r.room)).toEqual(['room-29', 'room-28']);
    const asc = await call(h, 'GET', '/lobby?sort=sockets&order=asc&limit=1');
    expect(asc.json.rooms[0].sockets).toBe(1);
  });

  it('GET /lobby: pagination walks every room exactly once', async () => {
    const seen: string[] = [];
    let offset: number | null = 0;
    let pages = 0;
    while (offset !== null) {
      const a: Answer = await call(h, 'GET', `/lobby?sort=room&limit=7&offset=${offset}`);
      expect(a.status).toBe(200);
      expect(a.json.total).toBe(31);
      seen.push(...(a.json.rooms as LobbyRoom[]).map((r) => r.room));
      offset = a.json.nextOffset as number | null;
      if (++pages > 10) throw new Error('pagination does not end');
    }
    expect(pages).toBe(5);
    expect(seen).toHaveLength(31);
    expect(new Set(seen).size).toBe(31);
    expect(seen).toEqual([...seen].sort());
    const past = await call(h, 'GET', '/lobby?offset=100');
    expect(past.json).toEqual({ rooms: [], total: 31, nextOffset: null });
    const max = await call(h, 'GET', '/lobby?limit=500');
    expect(max.status).toBe(200);
  });

  it('GET /lobby: invalid parameters are 400 and never reach the store', async () => {
    for (const q of [
      'limit=0',
      'limit=501',
      'limit=ten',
      'limit=1.5',
      'offset=-1',
      'offset=1e3',
      'minSockets=abc',
      'sort=name',
      'order=up',
      'limit=5&limit=6',
      `prefix=${'x'.repeat(1025)}`,
    ]) {
      const a = await call(h, 'GET', `/lobby?${q}`);
      expectError(a, 400, 'bad_request');
    }
    // Unknown parameters are ignored (cache busters).
    expect((await call(h, 'GET', '/lobby?_=123')).status).toBe(200);
  });

  it('GET /rooms/{room}: live room, unknown room, metadata-only room', async () => {
    const a = await call(h, 'GET', '/rooms/room-03');
    expect(a.status).toBe(200);
    expect(a.json).toEqual({ room: 'room-03', sockets: 4, since: new Date(t0 + 3000).toISOString(), meta: { status: 'open', title: 'three' }, pinned: false, listed: true });
    expectError(await call(h, 'GET', '/rooms/nope'), 404, 'not_found');
    const colon = await call(h, 'GET', '/rooms/lobby%3Ax');
    expect(colon.json.room).toBe('lobby:x');
  });

  it('room keys: __proto__ and constructor are ordinary keys; "." and ".." are addressable', async () => {
    expectError(await call(h, 'GET', '/rooms/__proto__'), 404, 'not_found');
    await other.publishPresence([presence('__proto__', 'b1', 3, t0), presence('constructor', 'b2', 1, t0), presence('..', 'b1', 1, t0)], TTL);
    const p = await call(h, 'GET', '/rooms/__proto__');
    expect(p.status).toBe(200);
    expect(p.json).toMatchObject({ room: '__proto__', sockets: 3 });
    expect((await call(h, 'GET', '/rooms/constructor')).json).toMatchObject({ room: 'constructor', sockets: 1 });
    const dots = await rawRequest(h, 'GET', `${API_PREFIX}/rooms/..`);
    expect(dots.status).toBe(200);
    expect(dots.json).toMatchObject({ room: '..' });
    expect(({} as Record<string, unknown>)['sockets']).toBeUndefined();
  });
});

describe('invalid room keys never reach the store', () => {
  let h: Harness;
  let store: FlakyStore;
  beforeAll(async () => {
    store = new FlakyStore(memoryStores().mine);
    h = await startApi(store);
  });

  it('10 KB key, "a b", "a/b", empty, malformed percent-encoding, over the pattern: 400', async () => {
    const before = store.calls.length;
    const cases = [
      `/rooms/${'a'.repeat(10 * 1024)}`,
      `/rooms/${'a'.repeat(129)}`,
      '/rooms/a%20b',
      '/rooms/a%2Fb',
      '/rooms/%C3%A9t%C3%A9',
      '/rooms/%E0%A4%A',
      '/rooms/a%00b',
    ];
    for (const path of cases) expectError(await call(h, 'GET', path), 400, 'bad_request');
    for (const path of cases) {
      expectError(await call(h, 'PUT', `${path}/meta`, { token: TOKEN, body: { a: 1 } }), 400, 'bad_request');
      expectError(await call(h, 'DELETE', `${path}/meta`, { token: TOKEN }), 400, 'bad_request');
    }
    // A raw space cannot be sent in a request line; the client encodes it, and "a b" is refused.
    expectError(await call(h, 'GET', '/rooms/a b'), 400, 'bad_request');
    expect(store.calls.length).toBe(before);
    // And the refused keys are not logged.
    expect(logLines.some((l) => l.includes('a'.repeat(129)))).toBe(false);
  });

  it('an empty room segment: 400', async () => {
    expectError(await call(h, 'GET', '/rooms/'), 400, 'bad_request');
    expectError(await call(h, 'GET', '/leaderboards//members/a'), 400, 'bad_request');
  });
});

describe('room metadata (token)', () => {
  let h: Harness;
  let mine: MemorySharedDataStore;

  beforeAll(async () => {
    ({ mine } = memoryStores());
    h = await startApi(mine, { maxMetaBytes: 512 });
    await mine.publishPresence([presence('m1', 'b1', 2), presence('m2', 'b2', 1)], TTL);
  });

  it('no token: 401 with WWW-Authenticate; wrong token: 401; right token: 200 with the room', async () => {
    const none = await call(h, 'PUT', '/rooms/m1/meta', { body: { status: 'open' } });
    expectError(none, 401, 'unauthorized');
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expectError(await call(h, 'PUT', '/rooms/m1/meta', { body: { status: 'open' }, token: 'wrong-token-0123456789abcdef' }), 401, 'unauthorized');
    const ok = await call(h, 'PUT', '/rooms/m1/meta', { body: { status: 'open', players: ['ann'] }, token: TOKEN });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ room: 'm1', sockets: 2, meta: { status: 'open', players: ['ann'] }, pinned: false, listed: true });
    expect(ok.json.backend).toBeUndefined();
    expect((await call(h, 'GET', '/rooms/m1')).json.meta).toEqual({ status: 'open', players: ['ann'] });
    expect((await call(h, 'GET', '/lobby?status=open')).json.rooms.map((r: LobbyRoom) => r.room)).toEqual(['m1']);
  });

  it('token checks: every configured token works, as Bearer or Basic password; near misses fail; scheme is case-insensitive', async () => {
    const put = (auth: string): Promise<Answer> => call(h, 'PUT', '/rooms/m2/meta', { body: { v: 1 }, auth });
    expect((await put(`Bearer ${TOKEN2}`)).status).toBe(200);
    expect((await put(`bearer ${TOKEN}`)).status).toBe(200);
    expect((await put(`Bearer   ${TOKEN}  `)).status).toBe(200);
    expect((await put(`Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`)).status).toBe(200);
    const wrong = [
      `Bearer ${TOKEN.slice(0, -1)}`, // prefix
      `Bearer ${TOKEN}x`, // longer
      `Bearer ${TOKEN.slice(0, -1)}${TOKEN.endsWith('f') ? 'e' : 'f'}`, // same length, last byte differs
      `Bearer x${TOKEN.slice(1)}`, // same length, first byte differs
      `Bearer ${TOKEN.toUpperCase()}`,
      `Basic ${Buffer.from(TOKEN).toString('base64')}`, // no user:password
      TOKEN, // no scheme
      'Bearer ',
      'Bearer',
      `Bearer ${TOKEN},${TOKEN2}`,
    ];
    for (const auth of wrong) expectError(await put(auth), 401, 'unauthorized');
    // The token never appears in a log line.
    expect(logLines.some((l) => l.includes(TOKEN) || l.includes(TOKEN2))).toBe(false);
  });

  it('no token configured: writes are 403 naming api.tokens (even with a header); reads still work', async () => {
    const { mine: s } = memoryStores();
    const h2 = await startApi(s, { tokens: [] });
    const a = await call(h2, 'PUT', '/rooms/x/meta', { body: {}, token: TOKEN });
    expectError(a, 403, 'forbidden');
    expect(a.json.error.message).toContain('api.tokens');
    expectError(await call(h2, 'DELETE', '/rooms/x/meta'), 403, 'forbidden');
    expectError(await call(h2, 'POST', '/leaderboards/b/scores', { body: { member: 'a', score: 1 } }), 403, 'forbidden');
    expect((await call(h2, 'GET', '/online')).status).toBe(200);
    // Empty strings in the list are not tokens: "Bearer " must not pass.
    const h3 = await startApi(s, { tokens: [''] });
    expectError(await call(h3, 'PUT', '/rooms/x/meta', { body: {}, auth: 'Bearer ' }), 403, 'forbidden');
  });

  it('bodies: too large 413 (declared or streamed), bad JSON, non-objects, empty: 400', async () => {
    const big = { pad: 'x'.repeat(600) };
    const a = await call(h, 'PUT', '/rooms/m1/meta', { body: big, token: TOKEN });
    expectError(a, 413, 'payload_too_large');
    // Exactly at the limit is fine.
    const exact = JSON.stringify({ pad: 'y'.repeat(512 - 10) });
    expect(Buffer.byteLength(exact)).toBe(512);
    expect((await call(h, 'PUT', '/rooms/m1/meta', { raw: exact, token: TOKEN })).status).toBe(200);
    expectError(await call(h, 'PUT', '/rooms/m1/meta', { raw: JSON.stringify({ pad: 'y'.repeat(503) }), token: TOKEN }), 413, 'payload_too_large');
    expectError(await call(h, 'PUT', '/rooms/m1/meta', { raw: '{"status": ', token: TOKEN }), 400, 'bad_request');
    expectError(await call(h, 'PUT', '/rooms/m1/meta', { raw: "{'a': 1}", token: TOKEN }), 400, 'bad_request');
    for (const v of ['[1,2]', '"open"', '42', 'null', 'true', '', '   ']) {
      expectError(await call(h, 'PUT', '/rooms/m1/meta', { raw: v, token: TOKEN }), 400, 'bad_request');
    }
    const notUtf8 = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]); // {"a":"\xff"}
    expectError(await rawRequest(h, 'PUT', `${API_PREFIX}/rooms/m1/meta`, { authorization: `Bearer ${TOKEN}` }, notUtf8), 400, 'bad_request');
    // Failed writes changed nothing.
    expect((await call(h, 'GET', '/rooms/m1')).json.meta).toEqual({ pad: 'y'.repeat(502) });
  });

  it('a streamed body far over the limit is cut off: 413 (or the connection closed), and the server keeps serving', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const req = http.request(
        { host: '127.0.0.1', port: h.port, method: 'PUT', path: `${API_PREFIX}/rooms/m1/meta`, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(`status ${res.statusCode} connection ${res.headers.connection}`);
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code}`));
      const timer = setTimeout(() => {
        req.destroy();
        resolve('timeout');
      }, 10_000);
      req.on('close', () => clearTimeout(timer));
      let sent = 0;
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = (): void => {
        while (sent < 8 * 1024 * 1024) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      req.write('{"pad": "');
      pump();
    });
    expect(outcome).toMatch(/^(status 413 connection close|error (ECONNRESET|EPIPE))$/);
    expect((await call(h, 'GET', '/online')).status).toBe(200);
  });

  it('a body that does not arrive in time: 408 with the error shape', async () => {
    const { mine: s } = memoryStores();
    const h2 = await startApi(s, { bodyTimeoutMs: 300 });
    const res = await new Promise<{ status: number; json: unknown }>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: h2.port, method: 'PUT', path: `${API_PREFIX}/rooms/m1/meta?pinned=1`, headers: { authorization: `Bearer ${TOKEN}`, 'content-length': '100' } },
        (r) => {
          const chunks: Buffer[] = [];
          r.on('data', (c: Buffer) => chunks.push(c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }));
        },
      );
      req.on('error', reject);
      req.setTimeout(5_000, () => req.destroy(new Error('no answer')));
      req.write('{"a":');
    });
    expectError(res, 408, 'bad_request');
  });

  it('pinned metadata stays after the room empties; unpinned is accepted for an empty room; DELETE 204 then 404', async () => {
    const pin = await call(h, 'PUT', '/rooms/later/meta?pinned=true', { body: { status: 'scheduled' }, token: TOKEN });
    expect(pin.status).toBe(200);
    expect(pin.json).toMatchObject({ room: 'later', sockets: 0, meta: { status: 'scheduled' }, pinned: true });
    expect((await call(h, 'GET', '/rooms/later')).json.pinned).toBe(true);
    // Not in the lobby: the lobby lists live rooms only.
    expect((await call(h, 'GET', '/lobby?status=scheduled')).json.total).toBe(0);
    const unpinned = await call(h, 'PUT', '/rooms/soon/meta', { body: { status: 'waiting' }, token: TOKEN });
    expect(unpinned.status).toBe(200);
    expect(unpinned.json).toMatchObject({ room: 'soon', sockets: 0, pinned: false });
    expectError(await call(h, 'PUT', '/rooms/later/meta?pinned=maybe', { body: {}, token: TOKEN }), 400, 'bad_request');

    expectError(await call(h, 'DELETE', '/rooms/later/meta'), 401, 'unauthorized');
    const del = await call(h, 'DELETE', '/rooms/later/meta', { token: TOKEN });
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expectError(await call(h, 'DELETE', '/rooms/later/meta', { token: TOKEN }), 404, 'not_found');
    expectError(await call(h, 'GET', '/rooms/later'), 404, 'not_found');
    expectError(await call(h, 'DELETE', '/rooms/never/meta', { token: TOKEN }), 404, 'not_found');
  });

  it('authorization is checked before the room key and the body', async () => {
    expectError(await call(h, 'PUT', '/rooms/a%20b/meta', { raw: 'not json' }), 401, 'unauthorized');
    expectError(await call(h, 'PUT', '/rooms/m1/meta', { raw: 'x'.repeat(5000) }), 401, 'unauthorized');
  });
});

describe('leaderboards', () => {
  let h: Harness;
  let store: FlakyStore;

  beforeAll(async () => {
    store = new FlakyStore(memoryStores().mine);
    h = await startApi(store);
  });

  const post = (board: string, body: unknown, token: string | null = TOKEN): Promise<Answer> => call(h, 'POST', `/leaderboards/${board}/scores`, { body, token });

  it('one score: set (default), incr, max; answer is {member, score, rank}', async () => {
    const a = await post('chess', { member: 'ann', score: 10 });
    expect(a.status).toBe(200);
    expect(a.json).toEqual({ member: 'ann', score: 10, rank: 1 });
    expect((await post('chess', { member: 'bob', score: 20, mode: 'set' })).json).toEqual({ member: 'bob', score: 20, rank: 1 });
    expect((await post('chess', { member: 'ann', score: 15, mode: 'incr' })).json).toEqual({ member: 'ann', score: 25, rank: 1 });
    expect((await post('chess', { member: 'bob', score: 5, mode: 'max' })).json).toEqual({ member: 'bob', score: 20, rank: 2 });
    expect((await post('chess', { member: 'bob', score: 30, mode: 'max' })).json).toEqual({ member: 'bob', score: 30, rank: 1 });
    expect((await post('chess', { member: 'cy', score: -2.5 })).json).toEqual({ member: 'cy', score: -2.5, rank: 3 });
  });

  it('a batch: validated whole, applied in order, answers after the batch', async () => {
    const a = await post('batch', {
      scores: [
        { member: 'a', score: 1, mode: 'incr' },
        { member: 'b', score: 7 },
        { member: 'a', score: 2, mode: 'incr' },
      ],
    });
    expect(a.status).toBe(200);
    expect(a.json).toEqual({
      board: 'batch',
      scores: [
        { member: 'a', score: 3, rank: 2 },
        { member: 'b', score: 7, rank: 1 },
        { member: 'a', score: 3, rank: 2 },
      ],
    });
    const thousand = Array.from({ length: 1000 }, (_, i) => ({ member: `p${i}`, score: i }));
    const big = await post('big', { scores: thousand });
    expect(big.status).toBe(200);
    expect(big.json.scores).toHaveLength(1000);
    expect(big.json.scores[999]).toEqual({ member: 'p999', score: 999, rank: 1 });
    expectError(await post('big2', { scores: [...thousand, { member: 'x', score: 1 }] }), 400, 'bad_request');
    expectError(await post('big2', { scores: [] }), 400, 'bad_request');
    expectError(await post('big2', { scores: 'no' }), 400, 'bad_request');
    // One bad entry: nothing written.
    expectError(await post('partial', { scores: [{ member: 'ok', score: 1 }, { member: 'bad', score: '2' }] }), 400, 'bad_request');
    expectError(await call(h, 'GET', '/leaderboards/partial'), 404, 'not_found');
    expectError(await post('partial', { scores: [{ member: 'ok', score: 1 }], extra: true }), 400, 'bad_request');
  });

  it('score validation: strings, non-finite, modes, members, unknown fields: 400', async () => {
    const bad: unknown[] = [
      { member: 'ann', score: '12' },
      { member: 'ann' },
      { member: 'ann', score: null },
      { member: 'ann', score: true },
      { member: 'ann', score: 2 ** 60 },
      { member: 'ann', score: 1, mode: 'add' },
      { member: 'ann', score: 1, mode: 1 },
      { member: '', score: 1 },
      { member: 'x'.repeat(129), score: 1 },
      { member: 'a\u0001b', score: 1 },
      { member: 'a\nb', score: 1 },
      { member: 'a\u007fb', score: 1 },
      { member: 7, score: 1 },
      { score: 1 },
      { member: 'ann', score: 1, scroe: 2 },
      [{ member: 'ann', score: 1 }],
      'ann',
    ];
    for (const b of bad) expectError(await post('valid', b), 400, 'bad_request');
    // 1e999 is valid JSON that parses to Infinity.
    expectError(await call(h, 'POST', '/leaderboards/valid/scores', { raw: '{"member": "ann", "score": 1e999}', token: TOKEN }), 400, 'bad_request');
    expectError(await call(h, 'POST', '/leaderboards/valid/scores', { raw: '{"member": "ann", "score": 1', token: TOKEN }), 400, 'bad_request');
    expectError(await call(h, 'GET', '/leaderboards/valid'), 404, 'not_found');
    // Printable members of any script, with spaces and slashes, up to 128 code points.
    const odd = ['Ann Lee', 'a/b', '日本語', '😀'.repeat(128), 'x'.repeat(128), '__proto__'];
    for (const m of odd) expect((await post('valid', { member: m, score: 1 })).status).toBe(200);
    expect((await call(h, 'GET', `/leaderboards/valid/members/${encodeURIComponent('a/b')}`)).json).toMatchObject({ member: 'a/b', score: 1 });
    expect((await call(h, 'GET', `/leaderboards/valid/members/${encodeURIComponent('😀'.repeat(128))}`)).status).toBe(200);
    expect((await call(h, 'GET', '/leaderboards/valid/members/__proto__')).json).toMatchObject({ member: '__proto__' });
  });

  it('board names: pattern and length; body over 64 KB: 413', async () => {
    for (const name of ['bad%20board', 'x'.repeat(65), 'a%2Fb', 'b%C3%A9']) {
      expectError(await call(h, 'GET', `/leaderboards/${name}`), 400, 'bad_request');
      expectError(await post(name, { member: 'a', score: 1 }), 400, 'bad_request');
    }
    expect((await post('x'.repeat(64), { member: 'a', score: 1 })).status).toBe(200);
    expect((await post('A-z_0.9:x', { member: 'a', score: 1 })).status).toBe(200);
    const huge = { scores: Array.from({ length: 1000 }, (_, i) => ({ member: `member-with-a-long-name-${i}-${'z'.repeat(40)}`, score: i })) };
    expect(JSON.stringify(huge).length).toBeGreaterThan(64 * 1024);
    expectError(await post('huge', huge), 413, 'payload_too_large');
    expectError(await post('chess', { member: 'a', score: 1 }, null), 401, 'unauthorized');
    expectError(await post('chess', { member: 'a', score: 1 }, 'nope-nope-nope-nope'), 401, 'unauthorized');
  });

  it('GET a board: pages, size, nextOffset, ties by member; unknown board 404', async () => {
    const scores = [
      { member: 'd', score: 5 },
      { member: 'b', score: 5 },
      { member: 'c', score: 9 },
      { member: 'a', score: 1 },
      { member: 'e', score: 5 },
    ];
    await post('ties', { scores });
    const all = await call(h, 'GET', '/leaderboards/ties');
    expect(all.json).toEqual({
      board: 'ties',
      size: 5,
      nextOffset: null,
      entries: [
        { member: 'c', score: 9, rank: 1 },
        { member: 'b', score: 5, rank: 2 },
        { member: 'd', score: 5, rank: 3 },
        { member: 'e', score: 5, rank: 4 },
        { member: 'a', score: 1, rank: 5 },
      ],
    });
    const p1 = await call(h, 'GET', '/leaderboards/ties?limit=2');
    expect(p1.json.entries.map((e: Ranked) => e.member)).toEqual(['c', 'b']);
    expect(p1.json.nextOffset).toBe(2);
    const p2 = await call(h, 'GET', '/leaderboards/ties?limit=2&offset=2');
    expect(p2.json.entries.map((e: Ranked) => e.rank)).toEqual([3, 4]);
    expect(p2.json.nextOffset).toBe(4);
    const p3 = await call(h, 'GET', '/leaderboards/ties?limit=2&offset=4');
    expect(p3.json.nextOffset).toBeNull();
    expectError(await call(h, 'GET', '/leaderboards/ties?limit=501'), 400, 'bad_request');
    expectError(await call(h, 'GET', '/leaderboards/ties?offset=x'), 400, 'bad_request');
    const e = await call(h, 'GET', '/leaderboards/no-such-board');
    expectError(e, 404, 'not_found');
    expect(e.json.error.message).toContain('no-such-board');
  });

  it('GET a member; ?around=N; unknown member or board 404', async () => {
    expect((await call(h, 'GET', '/leaderboards/ties/members/d')).json).toEqual({ member: 'd', score: 5, rank: 3 });
    const around = await call(h, 'GET', '/leaderboards/ties/members/d?around=1');
    expect(around.json).toEqual({
      board: 'ties',
      member: 'd',
      entries: [
        { member: 'b', score: 5, rank: 2 },
        { member: 'd', score: 5, rank: 3 },
        { member: 'e', score: 5, rank: 4 },
      ],
    });
    expect((await call(h, 'GET', '/leaderboards/ties/members/c?around=2')).json.entries.map((e: Ranked) => e.member)).toEqual(['c', 'b', 'd']);
    expect((await call(h, 'GET', '/leaderboards/ties/members/c?around=0')).json.entries).toEqual([{ member: 'c', score: 9, rank: 1 }]);
    expectError(await call(h, 'GET', '/leaderboards/ties/members/zz'), 404, 'not_found');
    expectError(await call(h, 'GET', '/leaderboards/ties/members/zz?around=1'), 404, 'not_found');
    expectError(await call(h, 'GET', '/leaderboards/nope/members/a'), 404, 'not_found');
    expectError(await call(h, 'GET', '/leaderboards/ties/members/d?around=101'), 400, 'bad_request');
    expectError(await call(h, 'GET', '/leaderboards/ties/members/d?around=-1'), 400, 'bad_request');
    expectError(await call(h, 'GET', `/leaderboards/ties/members/${'m'.repeat(129)}`), 400, 'bad_request');
    expectError(await call(h, 'GET', '/leaderboards/ties/members/a%01b'), 400, 'bad_request');
  });
});

describe('routing: unknown routes, methods, HEAD, OPTIONS, internal errors', () => {
  let h: Harness;
  let store: FlakyStore;
  beforeAll(async () => {
    store = new FlakyStore(memoryStores().mine);
    h = await startApi(store);
  });

  it('unknown routes: 404 with the error shape', async () => {
    for (const p of ['/nope', '/', '/online/', '/rooms', '/rooms/a/b', '/leaderboards', '/leaderboards/b/members', '/lobby/stream/x', '/ONLINE']) {
      expectError(await call(h, 'GET', p), 404, 'not_found');
    }
    const outside = await rawRequest(h, 'GET', '/_roomgate/apix/online');
    expectError(outside, 404, 'not_found');
  });

  it('wrong method: 405 with Allow', async () => {
    const cases: [string, string, string][] = [
      ['POST', '/online', 'GET, HEAD'],
      ['DELETE', '/lobby', 'GET, HEAD'],
      ['POST', '/lobby/stream', 'GET, HEAD'],
      ['PUT', '/rooms/r1', 'GET, HEAD'],
      ['GET', '/rooms/r1/meta', 'PUT, DELETE'],
      ['POST', '/rooms/r1/meta', 'PUT, DELETE'],
      ['PUT', '/leaderboards/b', 'GET, HEAD'],
      ['GET', '/leaderboards/b/scores', 'POST'],
      ['PUT', '/leaderboards/b/members/m', 'GET, HEAD'],
      ['PATCH', '/openapi.json', 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      const a = await call(h, method, path, { token: TOKEN });
      expectError(a, 405, 'method_not_allowed');
      expect(a.headers.get('allow')).toBe(allow);
    }
  });

  it('HEAD answers like GET without a body; OPTIONS lists the methods (no CORS headers)', async () => {
    const head = await rawRequest(h, 'HEAD', `${API_PREFIX}/online`);
    expect(head.status).toBe(200);
    expect(head.json).toBeUndefined();
    expect(Number(head.headers['content-length'])).toBeGreaterThan(0);
    const opt = await rawRequest(h, 'OPTIONS', `${API_PREFIX}/rooms/r1/meta`, { origin: 'http://evil.example' });
    expect(opt.status).toBe(204);
    expect(opt.headers['allow']).toBe('PUT, DELETE');
    expect(opt.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('a bug (a store answer JSON cannot encode): 500 internal, logged', async () => {
    store.poisonOnline = true;
    try {
      const a = await call(h, 'GET', '/online');
      expectError(a, 500, 'internal');
      expect(a.json.error.message).toBe('internal error');
    } finally {
      store.poisonOnline = false;
    }
    expect(logLines.some((l) => l.includes('public api: internal error') && l.includes('"route":"online"'))).toBe(true);
  });
});

describe('store down: 503 store_unavailable with Retry-After, routing unaffected', () => {
  let h: Harness;
  let store: FlakyStore;
  beforeAll(async () => {
    store = new FlakyStore(memoryStores().mine);
    h = await startApi(store);
    await store.inner.publishPresence([presence('r1', 'b1', 1)], TTL);
    await store.inner.score('board', 'ann', 1, 'set');
  });
  afterEach(() => {
    store.rejecting = false;
    store.reportDown = false;
  });

  const routes: [string, string, unknown?][] = [
    ['GET', '/online'],
    ['GET', '/lobby'],
    ['GET', '/rooms/r1'],
    ['PUT', '/rooms/r1/meta', { status: 'open' }],
    ['DELETE', '/rooms/r1/meta'],
    ['GET', '/leaderboards/board'],
    ['GET', '/leaderboards/board/members/ann'],
    ['GET', '/leaderboards/board/members/ann?around=2'],
    ['POST', '/leaderboards/board/scores', { member: 'ann', score: 2 }],
    ['POST', '/leaderboards/board/scores', { scores: [{ member: 'ann', score: 2 }] }],
  ];

  for (const mode of ['rejecting', 'reporting down'] as const) {
    it(`every store route answers 503 when the store is ${mode}`, async () => {
      if (mode === 'rejecting') store.rejecting = true;
      else store.reportDown = true;
      const callsBefore = store.calls.length;
      for (const [method, path, body] of routes) {
        const a = await call(h, method, path, { body, token: TOKEN });
        expectError(a, 503, 'store_unavailable');
        expect(a.headers.get('retry-after')).toBe('2');
        expect(a.json.error.message).toMatch(/shared data store is unavailable/);
        expect(a.json.error.message).toMatch(/routing is unaffected/);
      }
      // A store that says it is down is not even called.
      if (mode === 'reporting down') expect(store.calls.length).toBe(callsBefore);
    });
  }

  it('non-store answers are unchanged while the store is down: 401, 400, 404 route, openapi', async () => {
    store.setDown(true);
    expectError(await call(h, 'PUT', '/rooms/r1/meta', { body: {} }), 401, 'unauthorized');
    expectError(await call(h, 'GET', '/rooms/a%20b'), 400, 'bad_request');
    expectError(await call(h, 'POST', '/leaderboards/board/scores', { body: { member: 'a', score: '1' }, token: TOKEN }), 400, 'bad_request');
    expectError(await call(h, 'GET', '/nope'), 404, 'not_found');
    expect((await call(h, 'GET', '/openapi.json')).status).toBe(200);
    store.setDown(false);
    expect((await call(h, 'GET', '/rooms/r1')).status).toBe(200);
    // Store failures are logged (warn), rate-limited, without the token.
    const warns = logLines.filter((l) => l.includes('shared store unavailable (503)'));
    expect(warns.length).toBeGreaterThanOrEqual(1);
    expect(warns.length).toBeLessThanOrEqual(3);
  });
});

describe('lobby stream (SSE)', () => {
  const INTERVAL = 150;
  const T = Date.now() - 60_000;
  // A fixed since: a republished room only changes when its sockets or backend do.
  const p = (room: string, backend: string, sockets: number): RoomPresence => presence(room, backend, sockets, T);
  let h: Harness;
  let store: FlakyStore;
  let other: MemorySharedDataStore;

  beforeAll(async () => {
    const s = memoryStores();
    other = s.other;
    store = new FlakyStore(s.mine);
    h = await startApi(store, { streamIntervalMs: INTERVAL, streamPingMs: 200 });
    await other.publishPresence([p('s1', 'b1', 3), p('s2', 'b2', 1)], TTL);
  });

  it('retry, snapshot first (with online), then changes as one rooms event', async () => {
    const c = await openStream(h);
    const snap = await c.next(3_000);
    expect(c.retry).toBe(2000);
    expect(snap.event).toBe('snapshot');
    expect(snap.data.rooms.map((r: LobbyRoom) => r.room)).toEqual(['s1', 's2']);
    expect(snap.data).toMatchObject({ total: 2, nextOffset: null, online: { total: 4, rooms: 2 } });
    expect(snap.data.rooms.some((r: LobbyRoom) => 'backend' in r)).toBe(false);

    // The limit guards against a hang only; that changes wait for the interval and go out together
    // is the coalescing test's (by counting events), how soon is a figure for bench/.
    await other.publishPresence([p('s1', 'b1', 5), p('s2', 'b2', 1), p('s3', 'b1', 2)], TTL);
    const ev = await c.next(10_000);
    expect(ev.event).toBe('rooms');
    const byRoom = new Map((ev.data.rooms as LobbyRoom[]).map((r) => [r.room, r]));
    expect([...byRoom.keys()].sort()).toEqual(['s1', 's3']);
    expect(byRoom.get('s1')).toMatchObject({ sockets: 5 });
    expect(byRoom.get('s1')).not.toHaveProperty('backend');
    expect(ev.data.online).toEqual({ total: 8, rooms: 3 });

    // A room that empties is sent as gone.
    await other.publishPresence([p('s1', 'b1', 5), p('s2', 'b2', 1)], TTL);
    const gone = await c.next(INTERVAL + 2_000);
    expect(gone.data.rooms).toEqual([{ room: 's3', gone: true }]);

    // Metadata written through the API reaches the stream.
    expect((await call(h, 'PUT', '/rooms/s2/meta', { body: { status: 'open' }, token: TOKEN })).status).toBe(200);
    const meta = await c.next(INTERVAL + 2_000);
    expect(meta.data.rooms).toEqual([expect.objectContaining({ room: 's2', meta: { status: 'open' } })]);
    c.close();
  });

  it('coalescing: many changes in one interval are one event; events are at least an interval apart', async () => {
    const c = await openStream(h);
    expect((await c.next(3_000)).event).toBe('snapshot');
    // 40 changes at once (+ one presence change): one event with all of them.
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 40; i++) writes.push(store.inner.setMeta('s1', { n: i }, false));
    writes.push(other.publishPresence([p('s1', 'b1', 6), p('s2', 'b2', 1)], TTL));
    await Promise.all(writes);
    const ev = await c.next(INTERVAL + 2_000);
    expect(ev.event).toBe('rooms');
    expect(ev.data.rooms).toEqual([expect.objectContaining({ room: 's1', sockets: 6, meta: { n: 39 } })]);
    await sleep(INTERVAL * 3);
    expect(c.unread).toEqual([]);

    // Changes spread over ~5 intervals: at most one event per interval.
    const start = Date.now();
    for (let i = 0; i < 25; i++) {
      await store.inner.setMeta('s2', { i }, false);
      await sleep(INTERVAL / 5);
    }
    const spread = Date.now() - start;
    await sleep(INTERVAL * 2);
    const evs = c.unread.filter((e) => e.event === 'rooms');
    expect(evs.length).toBeGreaterThanOrEqual(2);
    expect(evs.length).toBeLessThanOrEqual(Math.ceil(spread / INTERVAL) + 1);
    for (let i = 1; i < evs.length; i++) expect((evs[i] as SseEvent).at - (evs[i - 1] as SseEvent).at).toBeGreaterThanOrEqual(INTERVAL - 60);
    // The last one carries the final state.
    expect(evs.at(-1)?.data.rooms).toEqual([expect.objectContaining({ room: 's2', meta: { i: 24 } })]);
    c.close();
  });

  it('filters: the snapshot is the query page; changes outside the prefix are not sent; non-matching rooms are gone', async () => {
    await other.publishPresence([p('s1', 'b1', 6), p('s2', 'b2', 1), p('g:1', 'b1', 1), p('g:2', 'b2', 2)], TTL);
    const c = await openStream(h, '?prefix=g%3A&sort=room&minSockets=1');
    const snap = await c.next(3_000);
    expect(snap.data.rooms.map((r: LobbyRoom) => r.room)).toEqual(['g:1', 'g:2']);
    await store.inner.setMeta('s1', { other: true }, false);
    await store.inner.setMeta('g:1', { status: 'open' }, false);
    const ev = await c.next(INTERVAL + 2_000);
    expect(ev.data.rooms).toEqual([expect.objectContaining({ room: 'g:1', meta: { status: 'open' } })]);

    const open = await openStream(h, '?status=open');
    expect((await open.next(3_000)).data.rooms.map((r: LobbyRoom) => r.room).sort()).toEqual(['g:1']);
    await store.inner.setMeta('g:1', { status: 'full' }, false);
    const left = await open.next(INTERVAL + 2_000);
    expect(left.data.rooms).toEqual([{ room: 'g:1', gone: true }]);
    c.close();
    open.close();
  });

  it('invalid stream parameters: 400 before the stream starts', async () => {
    expectError(await call(h, 'GET', '/lobby/stream?limit=0'), 400, 'bad_request');
    expectError(await call(h, 'GET', '/lobby/stream?sort=x'), 400, 'bad_request');
  });

  it('ping comments keep the stream alive', async () => {
    const c = await openStream(h);
    await c.next(3_000);
    await waitFor(() => c.comments.filter((x) => x === 'ping').length >= 2, 3_000, 'two pings');
    c.close();
  });

  it('store down: unavailable event (once), stream stays open; back up: a fresh snapshot', async () => {
    const c = await openStream(h);
    expect((await c.next(3_000)).event).toBe('snapshot');
    store.setDown(true);
    const un = await c.next(2_000);
    expect(un.event).toBe('unavailable');
    expect(un.data.error.code).toBe('store_unavailable');
    expect(un.data.error.message).toMatch(/routing is unaffected/);
    // Changes meanwhile (straight into the inner store): no events while down.
    await other.publishPresence([p('s1', 'b1', 9)], TTL);
    await sleep(INTERVAL * 3);
    expect(c.unread).toEqual([]);
    expect(c.ended).toBe(false);
    // A new client while the store is down gets the stream and `unavailable` at once.
    const late = await openStream(h);
    expect((await late.next(2_000)).event).toBe('unavailable');

    store.setDown(false);
    const snap = await c.next(3_000);
    expect(snap.event).toBe('snapshot');
    expect(snap.data.rooms).toEqual([expect.objectContaining({ room: 's1', sockets: 9 })]);
    expect((await late.next(3_000)).event).toBe('snapshot');
    // And changes flow again.
    await other.publishPresence([p('s1', 'b1', 10)], TTL);
    expect((await c.next(INTERVAL + 2_000)).data.rooms).toEqual([expect.objectContaining({ room: 's1', sockets: 10 })]);
    c.close();
    late.close();
  });

  it('store failing without an availability event: unavailable, then recovery by retry (every 2 s)', async () => {
    const c = await openStream(h);
    expect((await c.next(3_000)).event).toBe('snapshot');
    store.rejecting = true;
    await other.publishPresence([p('s1', 'b1', 11)], TTL);
    expect((await c.next(INTERVAL + 2_000)).event).toBe('unavailable');
    store.rejecting = false;
    const snap = await c.next(5_000);
    expect(snap.event).toBe('snapshot');
    expect(snap.data.rooms).toEqual([expect.objectContaining({ room: 's1', sockets: 11 })]);
    c.close();
  });

  it('a client that disconnects is forgotten; the last one unsubscribes from the store', async () => {
    for (const c of sseClients) c.close();
    await waitFor(() => h.api.streams === 0, 3_000, 'earlier streams to close');
    const c1 = await openStream(h);
    const c2 = await openStream(h);
    await c1.next(3_000);
    await c2.next(3_000);
    expect(h.api.streams).toBe(2);
    expect(store.subscribers).toBe(1);
    c1.close();
    await waitFor(() => h.api.streams === 1, 3_000, 'one stream');
    c2.close();
    await waitFor(() => h.api.streams === 0, 3_000, 'no stream');
    expect(store.subscribers).toBe(0);
  });

  it('close() ends every stream cleanly; later stream requests get 503', async () => {
    const s = memoryStores();
    await s.other.publishPresence([p('z', 'b1', 1)], TTL);
    const h2 = await startApi(s.mine, { streamIntervalMs: INTERVAL });
    const a = await openStream(h2);
    const b = await openStream(h2, '?limit=1');
    await a.next(3_000);
    await b.next(3_000);
    let ended = 0;
    a.res.on('end', () => ended++);
    b.res.on('end', () => ended++);
    h2.api.closeStreams();
    await waitFor(() => ended === 2, 3_000, 'both streams to end');
    expect(h2.api.streams).toBe(0);
    const after = await call(h2, 'GET', '/lobby/stream');
    expectError(after, 503, 'store_unavailable');
    expect(after.headers.get('retry-after')).toBe('2');
    // The rest of the API still answers.
    expect((await call(h2, 'GET', '/online')).json.total).toBe(1);
    // The server can close: nothing holds a connection open.
    h2.server.closeIdleConnections();
  });
});

describe('privacy: the public reads name listed rooms only, never a backend id (api.listRooms, ?listed, api.publicReads)', () => {
  let h: Harness;
  let mine: MemorySharedDataStore;
  let other: MemorySharedDataStore;
  const SECRET = 'private-7f3a9c2e';
  const INTERVAL = 150;
  const p = (room: string, backend: string, sockets: number): RoomPresence => presence(room, backend, sockets, Date.parse('2025-01-01T00:00:00Z'));

  beforeAll(async () => {
    ({ mine, other } = memoryStores());
    h = await startApi(mine, { listRooms: ['public-*'], streamIntervalMs: INTERVAL });
    await other.publishPresence([p(SECRET, 'backend-secret', 4), p('public-1', 'b1', 2), p('chess', 'b2', 1), p('quiet', 'b2', 3)], TTL);
    await mine.setMeta('chess', { title: 'Chess' }, false);
  });

  it('GET /lobby: rooms listed by a glob or by their metadata; total counts them only; /online still counts every socket', async () => {
    const a = await call(h, 'GET', '/lobby?limit=500');
    expect((a.json.rooms as LobbyRoom[]).map((r) => r.room)).toEqual(['public-1', 'chess']);
    expect(a.json.total).toBe(2);
    expect(a.text).not.toContain(SECRET);
    expect(a.text).not.toContain('backend');
    expect((await call(h, 'GET', `/lobby?prefix=${SECRET.slice(0, 9)}`)).json.total).toBe(0);
    expect((await call(h, 'GET', '/online')).json).toEqual({ total: 10, rooms: 4 });
  });

  it('GET /rooms/{room}: a room that is not listed gets the very answer of an unknown room (no oracle)', async () => {
    const unknown = await call(h, 'GET', '/rooms/never-was-here');
    const secret = await call(h, 'GET', `/rooms/${SECRET}`);
    expectError(secret, 404, 'not_found');
    expect(secret.text).toBe(unknown.text);
    expect(secret.status).toBe(unknown.status);
    expect(await call(h, 'GET', '/rooms/public-1')).toMatchObject({ status: 200, json: { room: 'public-1', sockets: 2, listed: false } });
    const chess = await call(h, 'GET', '/rooms/chess');
    expect(chess.json).toMatchObject({ room: 'chess', meta: { title: 'Chess' }, listed: true });
    expect(chess.json).not.toHaveProperty('backend');
  });

  it('PUT meta ?listed=false keeps the room private (its answer says so); metadata without it lists the room', async () => {
    const put = await call(h, 'PUT', '/rooms/quiet/meta?listed=false', { body: { title: 'Quiet' }, token: TOKEN });
    expect(put.json).toMatchObject({ room: 'quiet', sockets: 3, meta: { title: 'Quiet' }, listed: false });
    expect(put.json).not.toHaveProperty('backend');
    expect((await call(h, 'GET', '/rooms/quiet')).text).toBe((await call(h, 'GET', '/rooms/never-was-here')).text);
    expect((await call(h, 'GET', '/lobby')).json.total).toBe(2);
    expectError(await call(h, 'PUT', '/rooms/quiet/meta?listed=maybe', { body: {}, token: TOKEN }), 400, 'bad_request');
    // A glob lists a room whatever its metadata says.
    await call(h, 'PUT', '/rooms/public-1/meta?listed=false', { body: { title: 'P' }, token: TOKEN });
    expect((await call(h, 'GET', '/rooms/public-1')).status).toBe(200);
    await call(h, 'PUT', '/rooms/quiet/meta', { body: { title: 'Quiet' }, token: TOKEN });
    expect((await call(h, 'GET', '/lobby')).json.rooms.map((r: LobbyRoom) => r.room)).toEqual(['quiet', 'public-1', 'chess']);
    await call(h, 'PUT', '/rooms/quiet/meta?listed=false', { body: { title: 'Quiet' }, token: TOKEN });
  });

  it('the stream: a private room is never named, neither when it changes nor when it goes; a room unlisted after being shown is gone', async () => {
    const c = await openStream(h);
    const snap = await c.next(3_000);
    expect(snap.data.rooms.map((r: LobbyRoom) => r.room)).toEqual(['public-1', 'chess']);
    // Only private rooms change: no room is named (the counts change, so an event may carry them).
    await other.publishPresence([p(SECRET, 'backend-secret', 5), p('public-1', 'b1', 2), p('chess', 'b2', 1), p('quiet', 'b2', 3)], TTL);
    const ev = await c.next(INTERVAL + 2_000);
    expect(ev.data).toEqual({ rooms: [], online: { total: 11, rooms: 4 } });
    // A listed room leaves the list when its metadata unlists it: gone, as for a room that empties.
    await call(h, 'PUT', '/rooms/chess/meta?listed=false', { body: { title: 'Chess' }, token: TOKEN });
    expect((await c.next(INTERVAL + 2_000)).data.rooms).toEqual([{ room: 'chess', gone: true }]);
    // The private room goes, and a listed one changes: only the listed one is named.
    await other.publishPresence([p('public-1', 'b1', 3), p('chess', 'b2', 1), p('quiet', 'b2', 3)], TTL);
    const last = await c.next(INTERVAL + 2_000);
    expect(last.data.rooms).toEqual([expect.objectContaining({ room: 'public-1', sockets: 3 })]);
    await sleep(INTERVAL * 2);
    for (const e of [snap, ev, last, ...c.unread]) {
      expect(JSON.stringify(e.data)).not.toContain(SECRET);
      expect(JSON.stringify(e.data)).not.toContain('backend');
    }
    c.close();
    await call(h, 'PUT', '/rooms/chess/meta', { body: { title: 'Chess' }, token: TOKEN });
  });

  it('api.publicReads false: the reads are 404 and out of the document; metadata and score writes still work', async () => {
    const closed = await startApi(mine, { listRooms: ['*'], publicReads: false });
    for (const path of ['/online', '/lobby', '/lobby/stream', '/rooms/public-1', '/leaderboards/global', '/leaderboards/global/members/ann']) {
      expectError(await call(closed, 'GET', path), 404, 'not_found');
    }
    expect((await call(closed, 'PUT', '/rooms/public-1/meta', { body: { title: 'P' }, token: TOKEN })).status).toBe(200);
    expect((await call(closed, 'POST', '/leaderboards/global/scores', { body: { member: 'ann', score: 1 }, token: TOKEN })).status).toBe(200);
    const doc = (await call(closed, 'GET', '/openapi.json')).json as { paths: Record<string, Record<string, unknown>> };
    for (const path of ['/lobby', '/lobby/stream', '/online', '/rooms/{room}', '/leaderboards/{board}']) expect(Object.keys(doc.paths)).not.toContain(path);
    expect(Object.keys(doc.paths['/rooms/{room}/meta'] ?? {}).sort()).toEqual(['delete', 'put']);
    // The lobby page is not roomgate's then: its path goes to the app.
    expect(closed.api.owns('/_roomgate/lobby')).toBe(false);
    expect(h.api.owns('/_roomgate/lobby')).toBe(true);
  });
});
