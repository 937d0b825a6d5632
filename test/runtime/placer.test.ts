// The Placer in process, no sockets on the wire: a real BackendPool, TunnelRegistry and
// MemoryPlacementStore/State with a controlled clock. Each "gateway" here is one Placer with its
// own pool and tunnels; several share one MemoryPlacementState, as several gateways share Redis.
// The store is wrapped (never re-implemented) to count and record calls, and to fail like an
// unreachable Redis.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BackendPool } from '../../src/runtime/pool.js';
import type { ResolvedBackend } from '../../src/config/load.js';
import { createLogger } from '../../src/observability/logger.js';
import type { Decision } from '../../src/placement/decide.js';
import { MemoryPlacementState, MemoryPlacementStore } from '../../src/placement/memory-store.js';
import type {
  BackendAdminState,
  HeartbeatAnswer,
  LiveReport,
  PlaceOptions,
  PlaceResult,
  PlacementRecord,
  PlacementStore,
  StoreEvent,
} from '../../src/placement/store.js';
import { TunnelRegistry, type Tunnel } from '../../src/runtime/tunnels.js';
import type { Placer } from '../../src/runtime/placer.js';
import { testPlacer } from '../support/runtime-parts.js';

// --- fixtures ----------------------------------------------------------------------------------

const TIMING = { idleTtlMs: 30_000, gatewayTtlMs: 5_000 };
const CACHE_TTL_MS = 1_000;
/** Longer than every clock jump below: a passive mark never runs out by itself in a test. */
const PASSIVE_DOWN_MS = 600_000;

// Silent, and writing nowhere (no stdout stream per test file).
const logger = createLogger('silent', { write: () => undefined });

function backendConfig(id: string, port: number, weight = 1): ResolvedBackend {
  return { id, url: `http://127.0.0.1:${port}`, host: '127.0.0.1', port, weight };
}
const B1 = backendConfig('b1', 9101);
const B2 = backendConfig('b2', 9102);
const B3 = backendConfig('b3', 9103);
const B4 = backendConfig('b4', 9104);
const THREE = [B1, B2, B3];

// The clock every store, every Placer and every resolve() uses. It starts at the real time and
// only moves forward.
let clock = Date.now();
const now = (): number => clock;
const advance = (ms: number): void => {
  clock += ms;
};

interface PlaceCall {
  readonly room: string;
  readonly backend: string;
  readonly expectedEpoch: number;
  readonly force: boolean;
  result?: PlaceResult;
}

const UNREACHABLE = 'placement store unreachable (test: Redis down)';

/**
 * A PlacementStore that delegates every call to a real store and records it. While `broken`, it
 * behaves like the Redis store with Redis down: `available` is false, every call rejects, and
 * pub/sub events are not delivered.
 */
class ProbeStore implements PlacementStore {
  readonly kind = 'memory' as const;
  broken = false;
  gets = 0;
  heartbeats = 0;
  readonly places: PlaceCall[] = [];

  constructor(readonly inner: PlacementStore) {}

  get available(): boolean {
    return !this.broken && this.inner.available;
  }

  async connect(): Promise<void> {
    this.check();
    return this.inner.connect();
  }

  private check(): void {
    if (this.broken) throw new Error(UNREACHABLE);
  }

  async get(room: string): Promise<PlacementRecord | null> {
    this.gets++;
    this.check();
    return this.inner.get(room);
  }

  async place(room: string, backend: string, expectedEpoch: number, opts: PlaceOptions): Promise<PlaceResult> {
    const call: PlaceCall = { room, backend, expectedEpoch, force: opts.force };
    this.places.push(call);
    this.check();
    call.result = await this.inner.place(room, backend, expectedEpoch, opts);
    return call.result;
  }

  async reserveEpoch(): Promise<number> {
    this.check();
    return this.inner.reserveEpoch();
  }

  async heartbeat(live: LiveReport): Promise<HeartbeatAnswer> {
    this.heartbeats++;
    this.check();
    return this.inner.heartbeat(live);
  }

  async roomsPerBackend(): Promise<Map<string, number>> {
    this.check();
    return this.inner.roomsPerBackend();
  }

  async setBackendState(id: string, state: BackendAdminState | null): Promise<void> {
    this.check();
    return this.inner.setBackendState(id, state);
  }

  async backendStates(): Promise<Map<string, BackendAdminState>> {
    this.check();
    return this.inner.backendStates();
  }

  subscribe(listener: (ev: StoreEvent) => void): () => void {
    return this.inner.subscribe((ev) => {
      if (!this.broken) listener(ev);
    });
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

interface Placed {
  readonly room: string;
  readonly from: string | null;
  readonly to: string;
  readonly forced: boolean;
  readonly liveMoved: boolean;
}

interface TestGateway {
  readonly id: string;
  readonly pool: BackendPool;
  readonly tunnels: TunnelRegistry;
  readonly store: ProbeStore;
  readonly placer: Placer;
  readonly placed: Placed[];
  readonly degradedChanges: boolean[];
  /** The decision without its epoch (the routing rules' part; the epoch has its own test). */
  resolve(room: string | null): Promise<Decision>;
}

/** A decision as the routing tests compare it: the epoch told to backends left out. */
function withoutEpoch(d: Decision): Decision {
  if (!('route' in d) || d.epoch === undefined) return d;
  const { epoch: _epoch, ...rest } = d;
  return rest;
}

const opened: TestGateway[] = [];

afterEach(async () => {
  for (const g of opened.splice(0)) {
    g.placer.close();
    g.store.broken = false;
    await g.store.close();
  }
});

function gateway(
  state: MemoryPlacementState,
  id: string,
  o: { backends?: readonly ResolvedBackend[]; boundFactor?: number; onDown?: 'keep' | 'close'; maxIdleRooms?: number; onEvicted?: (n: number) => void } = {},
): TestGateway {
  const pool = new BackendPool(o.backends ?? THREE, PASSIVE_DOWN_MS);
  const tunnels = new TunnelRegistry(pool);
  const store = new ProbeStore(new MemoryPlacementStore(id, TIMING, state, now));
  const placed: Placed[] = [];
  const degradedChanges: boolean[] = [];
  const placer = testPlacer({
    store,
    pool,
    tunnels,
    logger,
    boundFactor: o.boundFactor ?? 0,
    onDown: o.onDown ?? 'keep',
    cacheTtlMs: CACHE_TTL_MS,
    idleTtlMs: TIMING.idleTtlMs,
    maxIdleRooms: o.maxIdleRooms ?? 1_000_000,
    onEvicted: o.onEvicted,
    recoveryRingMs: TIMING.gatewayTtlMs,
    now,
    onPlaced: (room, from, to, forced, liveMoved) => placed.push({ room, from, to, forced, liveMoved }),
    onDegraded: (d) => degradedChanges.push(d),
  });
  const g: TestGateway = { id, pool, tunnels, store, placer, placed, degradedChanges, resolve: async (room) => withoutEpoch(await placer.resolve(room, clock)) };
  opened.push(g);
  return g;
}

/** A tunnel as the registry sees it: a room, a backend, and whether it was closed. */
interface TestTunnel extends Tunnel {
  closed: boolean;
}

/** A live socket of `room` on `backend` through gateway g (no socket: the registry never sees one). */
function openTunnel(g: TestGateway, room: string, backend: string): TestTunnel {
  if (!g.pool.get(backend)) throw new Error(`no backend ${backend}`);
  const t: TestTunnel = {
    room,
    backendId: backend,
    closed: false,
    close() {
      this.closed = true;
    },
  };
  g.tunnels.add(t);
  return t;
}

/** The ring's order for a room: [owner, next, ...]. */
function walk(g: TestGateway, room: string): string[] {
  return g.pool.ring.walk(room);
}

/** n room names whose ring owner (in g's pool) is `owner`. */
function roomsOwnedBy(g: TestGateway, owner: string, n: number, prefix: string): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    if (i > 100_000) throw new Error(`no rooms for ${owner}`);
    const room = `${prefix}-${i}`;
    if (walk(g, room)[0] === owner) out.push(room);
  }
  return out;
}

function route(d: Decision): string {
  if (!('route' in d)) throw new Error(`expected a route, got ${JSON.stringify(d)}`);
  return d.route;
}

/** The room's placement in the shared store (must exist). */
async function stored(g: TestGateway, room: string): Promise<PlacementRecord> {
  const p = await g.store.inner.get(room);
  if (!p) throw new Error(`room ${room} has no placement`);
  return p;
}

const maintenance = (): BackendAdminState => ({ state: 'maintenance', deadline: null, since: clock });

// --- tests -------------------------------------------------------------------------------------

describe('Placer: new rooms and stickiness', () => {
  it('places a new room on its ring owner with epoch 1; the next resolve is sticky and writes nothing', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const rooms = Array.from({ length: 60 }, (_, i) => `new-${i}`);
    const owners = new Map(rooms.map((r) => [r, walk(a, r)[0]!]));
    // The rooms spread over all three backends, so "the owner" is not one fixed answer.
    expect(new Set(owners.values())).toEqual(new Set(['b1', 'b2', 'b3']));

    const epochs = new Map<string, number>();
    for (const room of rooms) {
      const d = await a.resolve(room);
      expect(d, room).toEqual({ route: owners.get(room), reason: 'ring', place: { expectedEpoch: 0, from: null, force: false, overrideLive: false } });
      const p = await stored(a, room);
      expect(p.backend, room).toBe(owners.get(room));
      expect(p.epoch, room).toBeGreaterThanOrEqual(1);
      epochs.set(room, p.epoch);
    }
    // The very first placement in a fresh store has epoch 1.
    expect(epochs.get(rooms[0]!)).toBe(1);
    expect(a.store.places.map((p) => [p.room, p.backend, p.expectedEpoch, p.force])).toEqual(rooms.map((r) => [r, owners.get(r), 0, false]));
    expect(a.placed).toEqual(rooms.map((r) => ({ room: r, from: null, to: owners.get(r), forced: false, liveMoved: false })));

    // Again, from the cache: sticky, no write.
    for (const room of rooms) expect(await a.resolve(room), room).toEqual({ route: owners.get(room), reason: 'sticky' });
    expect(a.store.places).toHaveLength(rooms.length);

    // Once the cache entry is old it is read again from the store: still sticky, still no write.
    const getsBefore = a.store.gets;
    advance(CACHE_TTL_MS + 1);
    for (const room of rooms) expect(await a.resolve(room), room).toEqual({ route: owners.get(room), reason: 'sticky' });
    expect(a.store.gets - getsBefore).toBe(rooms.length);
    expect(a.store.places).toHaveLength(rooms.length);
    expect(a.placed).toHaveLength(rooms.length);
    for (const room of rooms) expect(await stored(a, room)).toEqual({ backend: owners.get(room), epoch: epochs.get(room) });
  });

  it('a placed room stays on its backend when a 4th backend joins; new rooms go to the joiner', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const rooms = Array.from({ length: 300 }, (_, i) => `join-${i}`);
    const before = new Map<string, string>();
    for (const room of rooms) before.set(room, route(await a.resolve(room)));

    a.pool.setBackends([...THREE, B4]);
    // The ring now gives a share of these very rooms to b4: stickiness is what keeps them.
    const ownedByB4Now = rooms.filter((r) => walk(a, r)[0] === 'b4');
    expect(ownedByB4Now.length).toBeGreaterThan(30);

    const writes = a.store.places.length;
    advance(CACHE_TTL_MS + 1); // read from the store, not only the cache
    for (const room of rooms) expect(await a.resolve(room), room).toEqual({ route: before.get(room), reason: 'sticky' });
    expect(a.store.places).toHaveLength(writes);

    // A second gateway that joined the same store with the 4-backend list agrees.
    const b = gateway(state, 'gw-b', { backends: [...THREE, B4] });
    for (const room of ownedByB4Now) expect(await b.resolve(room), room).toEqual({ route: before.get(room), reason: 'sticky' });

    // New rooms whose owner is b4 are placed there.
    const fresh = roomsOwnedBy(a, 'b4', 20, 'join-fresh');
    for (const room of fresh) {
      expect(await a.resolve(room), room).toMatchObject({ route: 'b4', reason: 'ring' });
      expect((await stored(a, room)).backend).toBe('b4');
    }
  });

  it('a room placed while its owner was down stays put when the owner recovers; new rooms go to the owner again', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const rooms = roomsOwnedBy(a, 'b1', 30, 'recover');
    a.pool.markDown('b1', clock, 'test: refused');
    const moved = new Map<string, PlacementRecord>();
    for (const room of rooms) {
      const d = await a.resolve(room);
      expect(d, room).toMatchObject({ route: walk(a, room)[1], reason: 'ring-skip' });
      moved.set(room, await stored(a, room));
      expect(moved.get(room)!.backend).toBe(route(d));
    }
    a.pool.markUp('b1');
    advance(CACHE_TTL_MS + 1);
    const writes = a.store.places.length;
    for (const room of rooms) expect(await a.resolve(room), room).toEqual({ route: moved.get(room)!.backend, reason: 'sticky' });
    expect(a.store.places).toHaveLength(writes);
    for (const room of rooms) expect(await stored(a, room)).toEqual(moved.get(room));

    for (const room of roomsOwnedBy(a, 'b1', 10, 'recover-fresh')) expect(await a.resolve(room), room).toMatchObject({ route: 'b1', reason: 'ring' });
  });
});

describe('Placer: backends that are down for one gateway', () => {
  it('a passively down backend: its idle room is re-placed on the next ring backend with epoch + 1', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const rooms = roomsOwnedBy(a, 'b2', 10, 'down');
    for (const room of rooms) expect(route(await a.resolve(room))).toBe('b2');
    // Placements younger than gatewayTtlMs are not moved unforced (the store answers 'busy').
    advance(TIMING.gatewayTtlMs);
    a.pool.markDown('b2', clock, 'test: refused');
    a.placed.length = 0;
    for (const room of rooms) {
      const next = walk(a, room)[1];
      expect(next).not.toBe('b2');
      const old = await stored(a, room);
      // Compare-and-set against the placement read, and a new, higher epoch.
      expect(await a.resolve(room), room).toEqual({ route: next, reason: 'ring-skip', place: { expectedEpoch: old.epoch, from: 'b2', force: false, overrideLive: false } });
      const now = await stored(a, room);
      expect(now.backend, room).toBe(next);
      expect(now.epoch, room).toBeGreaterThan(old.epoch);
      expect(a.placed.at(-1)).toEqual({ room, from: 'b2', to: next, forced: false, liveMoved: false });
    }
  });

  it('two gateways: A reports the room live on b1, so B (b1 down in its view) gets room-busy until A goes stale', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const b = gateway(state, 'gw-b');
    const [room] = roomsOwnedBy(a, 'b1', 1, 'busy');
    const next = walk(a, room!)[1]!;
    expect(route(await a.resolve(room!))).toBe('b1');
    const first = await stored(a, room!);
    // Old enough to be moved (gatewayTtlMs): from here on only A's report makes it busy.
    advance(TIMING.gatewayTtlMs);
    const t = openTunnel(a, room!, 'b1');
    await a.placer.heartbeat(clock);
    const reportedAt = clock;

    b.pool.markDown('b1', clock, 'test: refused in B only');
    const busy = { reject: 503, reason: 'room-busy', retryAfterS: 2 };
    expect(await b.resolve(room!)).toEqual(busy);
    // B asked the store to move it once (it holds no socket of the room itself) and was refused;
    // a 'busy' answer is final for that request, not retried like a lost race.
    expect(b.store.places.filter((c) => c.room === room)).toHaveLength(1);
    expect(b.store.places.at(-1)).toMatchObject({ room, backend: next, expectedEpoch: first.epoch, force: false, result: { ok: false, reason: 'busy' } });
    expect(await stored(a, room!)).toEqual(first);
    // A, which sees b1 up, keeps routing there.
    expect(await a.resolve(room!)).toEqual({ route: 'b1', reason: 'sticky' });

    // Just before A's report goes stale: still busy.
    clock = reportedAt + TIMING.gatewayTtlMs - 1;
    expect(await b.resolve(room!)).toEqual(busy);
    expect(await stored(a, room!)).toEqual(first);

    // A has been silent for gatewayTtlMs: its sockets no longer hold the room, B moves it.
    clock = reportedAt + TIMING.gatewayTtlMs;
    expect(await b.resolve(room!)).toEqual({ route: next, reason: 'ring-skip', place: { expectedEpoch: first.epoch, from: 'b1', force: false, overrideLive: false } });
    const moved = await stored(a, room!);
    expect(moved.backend).toBe(next);
    expect(moved.epoch).toBeGreaterThan(first.epoch);
    // Live: the store refused the move as busy a moment ago (A held the room's sockets on b1).
    expect(b.placed).toEqual([{ room, from: 'b1', to: next, forced: false, liveMoved: true }]);
    // The placement event reached A: its socket on the old backend is closed, its cache follows.
    expect(a.tunnels.socketsInRoom(room!)).toBe(0);
    expect(t.closed).toBe(true);
    expect(a.placer.cachedPlacement(room!)).toEqual(moved);
  });

  it('local busy guard: a room this gateway holds live sockets of is not moved off a locally-down backend', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const [room, other] = roomsOwnedBy(a, 'b3', 2, 'guard');
    expect(route(await a.resolve(room!))).toBe('b3');
    expect(route(await a.resolve(other!))).toBe('b3');
    const first = await stored(a, room!);
    const otherFirst = await stored(a, other!);
    // Old enough to be moved unforced (gatewayTtlMs); read again, so that the first resolve below
    // decides from a fresh cache entry.
    advance(TIMING.gatewayTtlMs);
    expect(await a.resolve(room!)).toEqual({ route: 'b3', reason: 'sticky' });
    expect(await a.resolve(other!)).toEqual({ route: 'b3', reason: 'sticky' });
    const t = openTunnel(a, room!, 'b3');
    a.pool.markDown('b3', clock, 'test: refused');
    const writes = a.store.places.length;

    // No heartbeat was sent: the store knows nothing of the socket; the Placer itself refuses.
    expect(await a.resolve(room!)).toEqual({ reject: 503, reason: 'room-busy', retryAfterS: 2 });
    advance(CACHE_TTL_MS + 1);
    expect(await a.resolve(room!)).toEqual({ reject: 503, reason: 'room-busy', retryAfterS: 2 });
    expect(a.store.places).toHaveLength(writes);
    expect(await stored(a, room!)).toEqual(first);
    expect(t.closed).toBe(false);

    // A room of the same backend without sockets here moves.
    expect(await a.resolve(other!)).toMatchObject({ route: walk(a, other!)[1], place: { expectedEpoch: otherFirst.epoch, from: 'b3', force: false, overrideLive: false } });

    // b3 goes into maintenance: while our socket there is open the room still waits (the
    // heartbeat closes it first, Supervisor.tick); once it is closed the room moves, forced.
    a.pool.setAdmin('b3', maintenance());
    expect(await a.resolve(room!)).toEqual({ reject: 503, reason: 'room-busy', retryAfterS: 2 });
    expect(t.closed).toBe(false);
    expect(a.tunnels.closeBackend('b3')).toBe(1);
    const next = walk(a, room!)[1]!;
    expect(await a.resolve(room!)).toEqual({ route: next, reason: 'ring-skip', place: { expectedEpoch: first.epoch, from: 'b3', force: true, overrideLive: false } });
    expect((await stored(a, room!)).backend).toBe(next);
    expect((await stored(a, room!)).epoch).toBeGreaterThan(first.epoch);
    expect(a.placed.at(-1)).toEqual({ room, from: 'b3', to: next, forced: true, liveMoved: true });
    expect(a.tunnels.socketsInRoom(room!)).toBe(0);
    expect(t.closed).toBe(true);
  });
});

describe('Placer: a backend down by its health checks (health.onDown)', () => {
  it('keep: a room with live sockets here stays on it (no write); a room without goes elsewhere; close: the busy guard refuses', async () => {
    const state = new MemoryPlacementState();
    const keep = gateway(state, 'gw-keep');
    const [live, idle] = roomsOwnedBy(keep, 'b2', 2, 'checks');
    for (const r of [live!, idle!]) expect(route(await keep.resolve(r))).toBe('b2');
    advance(TIMING.gatewayTtlMs); // old enough to be moved unforced
    openTunnel(keep, live!, 'b2');
    keep.pool.setHealth('b2', 'down', 'test');
    const writes = keep.store.places.length;

    expect(await keep.resolve(live!)).toEqual({ route: 'b2', reason: 'sticky-live' });
    advance(CACHE_TTL_MS + 1); // and from a fresh store read
    expect(await keep.resolve(live!)).toEqual({ route: 'b2', reason: 'sticky-live' });
    expect(keep.store.places).toHaveLength(writes);
    expect(await keep.resolve(idle!)).toMatchObject({ route: walk(keep, idle!)[1], place: { from: 'b2', force: false, overrideLive: false } });

    // Passively marked down as well (a refused connection): no longer kept; our live socket there
    // makes the Placer refuse the move instead (the room is never split).
    keep.pool.markDown('b2', clock, 'test: refused');
    expect(await keep.resolve(live!)).toEqual({ reject: 503, reason: 'room-busy', retryAfterS: 2 });

    const close = gateway(new MemoryPlacementState(), 'gw-close', { onDown: 'close' });
    expect(route(await close.resolve(live!))).toBe('b2');
    advance(TIMING.gatewayTtlMs);
    openTunnel(close, live!, 'b2');
    close.pool.setHealth('b2', 'down', 'test');
    expect(await close.resolve(live!)).toEqual({ reject: 503, reason: 'room-busy', retryAfterS: 2 });
  });
});

describe('Placer: backends gone for everyone (forced moves)', () => {
  it('maintenance: the room waits while another gateway still reports it live there, then moves, forced', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const b = gateway(state, 'gw-b');
    const [room] = roomsOwnedBy(a, 'b2', 1, 'maint');
    const next = walk(a, room!)[1]!;
    expect(route(await a.resolve(room!))).toBe('b2');
    const first = await stored(a, room!);
    // Old enough to be moved (gatewayTtlMs): below, only A's report makes it busy.
    advance(TIMING.gatewayTtlMs);
    const t = openTunnel(a, room!, 'b2');
    await a.placer.heartbeat(clock);

    // Without maintenance B's local view (b2 down) is not enough: busy.
    b.pool.markDown('b2', clock, 'test');
    expect(await b.resolve(room!)).toMatchObject({ reject: 503, reason: 'room-busy' });

    // Maintenance: gone for everyone, but A has not closed its socket yet (its next heartbeat
    // does): moving now would put the room on two backends. Busy, nothing written.
    b.pool.setAdmin('b2', maintenance());
    a.pool.setAdmin('b2', maintenance());
    const writes = b.store.places.filter((p) => p.result?.ok).length;
    expect(await b.resolve(room!)).toMatchObject({ reject: 503, reason: 'room-busy' });
    expect(b.store.places.at(-1)).toMatchObject({ room, backend: next, force: false, result: { ok: false, reason: 'busy' } });
    expect(b.store.places.filter((p) => p.result?.ok)).toHaveLength(writes);
    expect(t.closed).toBe(false);

    // A's heartbeat closes its sockets on b2 and reports without them: now the room moves.
    a.tunnels.closeBackend('b2');
    await a.placer.heartbeat(clock);
    expect(await b.resolve(room!)).toEqual({ route: next, reason: 'ring-skip', place: { expectedEpoch: first.epoch, from: 'b2', force: true, overrideLive: false } });
    expect((await stored(b, room!)).epoch).toBeGreaterThan(first.epoch);
    expect(b.placed.at(-1)).toEqual({ room, from: 'b2', to: next, forced: true, liveMoved: true });
    const writesA = a.store.places.length;
    expect(await a.resolve(room!)).toEqual({ route: next, reason: 'sticky' });
    expect(a.store.places).toHaveLength(writesA);
  });

  it('removed from the pool: the room moves with force although another gateway holds it live', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const b = gateway(state, 'gw-b');
    const [room, bystander] = roomsOwnedBy(a, 'b1', 2, 'removed');
    for (const r of [room!, bystander!]) expect(route(await a.resolve(r))).toBe('b1');
    const first = await stored(a, room!);
    const t = openTunnel(a, room!, 'b1');
    const t2 = openTunnel(a, room!, 'b1');
    const staying = openTunnel(a, bystander!, 'b1');
    await a.placer.heartbeat(clock);

    // No gateway closes the sockets of a removed backend (a reload never drops one), so waiting
    // for them would keep the room there for ever: the move overrides the live reports.
    b.pool.setBackends([B2, B3]);
    expect(b.pool.get('b1')?.removed).toBe(true);
    const d = await b.resolve(room!);
    expect(d).toMatchObject({ place: { expectedEpoch: first.epoch, from: 'b1', force: true, overrideLive: true } });
    expect(['b2', 'b3']).toContain(route(d));
    expect((await stored(b, room!)).backend).toBe(route(d));
    expect((await stored(b, room!)).epoch).toBeGreaterThan(first.epoch);
    expect(b.placed.at(-1)).toEqual({ room, from: 'b1', to: route(d), forced: true, liveMoved: true });
    // A learnt it from the store event: both its sockets of the room on b1 are closed, the other
    // room's socket on b1 is untouched.
    expect(a.tunnels.socketsInRoom(room!)).toBe(0);
    expect([t, t2].every((x) => x.closed)).toBe(true);
    expect(a.tunnels.socketsInRoom(bystander!, 'b1')).toBe(1);
    expect(staying.closed).toBe(false);
    expect(a.pool.get('b1')!.liveSockets).toBe(1);
  });
});

describe('Placer: draining', () => {
  it('keeps its rooms (sticky), gets no new ones, and once the deadline passes its rooms move, forced, a live one once no gateway reports it there', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const b = gateway(state, 'gw-b');
    const kept = roomsOwnedBy(a, 'b1', 10, 'drain-kept');
    for (const room of kept) expect(route(await a.resolve(room))).toBe('b1');
    const live = kept[0]!;
    const first = await stored(a, live);
    const t = openTunnel(a, live, 'b1');
    await a.placer.heartbeat(clock);

    const deadline = clock + 20_000;
    // Through the store, as the admin API does: every gateway learns it.
    await a.store.setBackendState('b1', { state: 'draining', deadline, since: clock });
    expect(b.pool.get('b1')!.admin).toEqual({ state: 'draining', deadline, since: clock });
    expect(a.pool.get('b1')!.admin?.state).toBe('draining');

    const writes = a.store.places.length + b.store.places.length;
    advance(CACHE_TTL_MS + 1);
    for (const room of kept) {
      expect(await a.resolve(room), room).toEqual({ route: 'b1', reason: 'sticky' });
      expect(await b.resolve(room), room).toEqual({ route: 'b1', reason: 'sticky' });
    }
    expect(a.store.places.length + b.store.places.length).toBe(writes);

    // New rooms never go to b1, including those it owns on the ring.
    const fresh = Array.from({ length: 150 }, (_, i) => `drain-new-${i}`);
    const ownedByB1 = fresh.filter((r) => walk(a, r)[0] === 'b1');
    expect(ownedByB1.length).toBeGreaterThan(20);
    for (const [i, room] of fresh.entries()) {
      const d = await (i % 2 ? a : b).resolve(room);
      expect(route(d), room).not.toBe('b1');
      if (ownedByB1.includes(room)) expect(d, room).toMatchObject({ route: walk(a, room)[1], reason: 'ring-skip' });
    }

    // Deadline passed: b1 is gone for everyone. The live room waits while A still reports it
    // (its heartbeat is fresh); the rooms without sockets move at once, forced.
    clock = deadline;
    await a.placer.heartbeat(clock);
    expect(await b.resolve(live)).toMatchObject({ reject: 503, reason: 'room-busy' });
    expect(t.closed).toBe(false);
    for (const room of kept.slice(1)) {
      expect(await a.resolve(room), room).toMatchObject({ route: walk(a, room)[1], place: { from: 'b1', force: true, overrideLive: false } });
    }
    // A's heartbeat closes its socket there (Supervisor.tick) and reports the room gone: it moves.
    a.tunnels.closeBackend('b1');
    await a.placer.heartbeat(clock);
    const next = walk(b, live)[1]!;
    expect(await b.resolve(live)).toEqual({ route: next, reason: 'ring-skip', place: { expectedEpoch: first.epoch, from: 'b1', force: true, overrideLive: false } });
    expect((await stored(b, live)).backend).toBe(next);
    expect(t.closed).toBe(true);
    expect(a.tunnels.socketsInRoom(live)).toBe(0);
  });
});

describe('Placer: races between gateways', () => {
  it('two Placers resolving the same new rooms at once always agree on one backend', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a', { boundFactor: 1.25 });
    const b = gateway(state, 'gw-b', { boundFactor: 1.25 });
    // Different load figures (as between two gateways between heartbeats): A's bounded loads skip
    // b1, B's do not. Left alone, the two would place many rooms differently.
    a.pool.applyLoads(new Map([['b1', 100]]), a.pool.loadMark());
    const rooms = Array.from({ length: 300 }, (_, i) => `race-${i}`);
    let differ = 0;
    for (const room of rooms) {
      const [da, db] = await Promise.all([a.placer.explain(room, clock, false), b.placer.explain(room, clock, false)]);
      if (route(da.decision) !== route(db.decision)) differ++;
    }
    expect(differ).toBeGreaterThan(30);

    const results = await Promise.all(
      rooms.map((room, i) => (i % 2 ? Promise.all([a.resolve(room), b.resolve(room)]) : Promise.all([b.resolve(room), a.resolve(room)]))),
    );
    for (const [i, room] of rooms.entries()) {
      const [x, y] = results[i]!;
      const p = await stored(a, room);
      expect(route(x), room).toBe(p.backend);
      expect(route(y), room).toBe(p.backend);
      // One placement per room, never a move: the loser routes to the winner's choice.
      expect([...a.placed, ...b.placed].filter((e) => e.room === room), room).toEqual([
        { room, from: null, to: p.backend, forced: false, liveMoved: false },
      ]);
      const written = [...a.store.places, ...b.store.places].filter((c) => c.room === room && c.result?.ok);
      expect(written, room).toHaveLength(1);
      expect(written[0]!.result).toEqual({ ok: true, placement: p });
    }
    // The races were real: both tried to place, and the compare-and-set turned losers away.
    const lost = [...a.store.places, ...b.store.places].filter((p) => p.result && !p.result.ok);
    expect(lost.length).toBeGreaterThan(0);
    expect(lost.every((p) => p.result?.ok === false && p.result.reason === 'lost-race')).toBe(true);
    // Both gateways' caches agree afterwards.
    for (const room of rooms) expect(a.placer.cachedPlacement(room), room).toEqual(b.placer.cachedPlacement(room));
  });
});

describe('Placer: the epoch told to backends (X-Roomgate-Epoch)', () => {
  it("is the epoch of the placement behind the route: a new room's, the same while sticky, the new one after a move, 0 with none", async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const epochOf = async (room: string | null): Promise<number | undefined> => {
      const d = await a.placer.resolve(room, clock);
      return 'route' in d ? d.epoch : undefined;
    };
    const [room] = roomsOwnedBy(a, 'b2', 1, 'epoch');
    const first = await epochOf(room!);
    expect(first).toBe((await stored(a, room!)).epoch);
    expect(first).toBeGreaterThan(0);
    advance(CACHE_TTL_MS + 1);
    expect(await epochOf(room!)).toBe(first); // sticky, read from the store
    expect(await epochOf(null)).toBeUndefined(); // no room, no epoch

    advance(TIMING.gatewayTtlMs);
    a.pool.markDown('b2', clock, 'test: refused');
    const moved = await epochOf(room!);
    expect(moved).toBe((await stored(a, room!)).epoch);
    expect(moved).toBeGreaterThan(first!);

    // The store unreachable: a room never placed is routed by the ring with epoch 0; a known one keeps its own.
    a.store.broken = true;
    advance(CACHE_TTL_MS + 1);
    const [unknown] = roomsOwnedBy(a, 'b1', 1, 'epoch-degraded');
    expect(await epochOf(unknown!)).toBe(0);
    expect(await epochOf(room!)).toBe(moved);
  });
});

describe('Placer: degraded (store unreachable)', () => {
  it('routes from its cache and the pure ring, then reconciles when the store is back', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a', { boundFactor: 1.25 });
    const other = new MemoryPlacementStore('gw-other', TIMING, state, now); // a gateway that still reaches the store

    // A room placed off its ring owner (owner was down), so "sticky" and "ring" differ for it.
    const [sticky] = roomsOwnedBy(a, 'b1', 1, 'deg-sticky');
    a.pool.markDown('b1', clock, 'test');
    const stickyOn = route(await a.resolve(sticky!));
    expect(stickyOn).not.toBe('b1');
    a.pool.markUp('b1');

    // Skewed loads: bounded loads would skip b1 for a new room it owns.
    a.pool.applyLoads(new Map([['b1', 100]]), a.pool.loadMark());
    const [fresh, agreed, conflict] = roomsOwnedBy(a, 'b1', 3, 'deg-new');
    const bounded = await a.placer.explain(fresh!, clock, false);
    expect(bounded.decision).toMatchObject({ reason: 'bounded-skip' });
    expect(route(bounded.decision)).not.toBe('b1');
    expect(a.placer.isDegraded).toBe(false);

    a.store.broken = true;
    advance(CACHE_TTL_MS + 1); // every cache entry is old: only degraded mode keeps using it
    expect(await a.resolve(sticky!)).toEqual({ route: stickyOn, reason: 'sticky' });
    expect(a.placer.isDegraded).toBe(true);
    expect(a.degradedChanges).toEqual([true]);

    const placesBefore = a.store.places.length;
    for (const room of [fresh!, agreed!, conflict!]) {
      expect(await a.resolve(room), room).toEqual({ route: 'b1', reason: 'ring', place: { expectedEpoch: 0, from: null, force: false, overrideLive: false } });
    }
    expect(a.store.places).toHaveLength(placesBefore); // degraded: nothing is even attempted
    // The provisional placement is sticky while degraded.
    advance(CACHE_TTL_MS + 1);
    expect(await a.resolve(fresh!)).toEqual({ route: 'b1', reason: 'sticky' });
    expect(await a.resolve(sticky!)).toEqual({ route: stickyOn, reason: 'sticky' });
    for (const room of [fresh!, agreed!, conflict!]) expect(state.placements.has(room), room).toBe(false);
    const t = openTunnel(a, conflict!, 'b1');

    // Meanwhile another gateway places two of them: one on the same backend, one elsewhere.
    // (A does not hear of it: no events while its store is unreachable.)
    expect(await other.place(agreed!, 'b1', 0, { force: false })).toMatchObject({ ok: true });
    const elsewhere = walk(a, conflict!)[1]!;
    expect(await other.place(conflict!, elsewhere, 0, { force: false })).toMatchObject({ ok: true });
    expect(t.closed).toBe(false);

    // A heartbeat while still unreachable changes nothing.
    await a.placer.heartbeat(clock);
    expect(a.placer.isDegraded).toBe(true);

    const reconcile = vi.spyOn(a.placer, 'reconcile');
    a.store.broken = false;
    await a.placer.heartbeat(clock);
    expect(a.placer.isDegraded).toBe(false);
    expect(a.degradedChanges).toEqual([true, false]);
    expect(reconcile).toHaveBeenCalledTimes(1);
    const counts = await (reconcile.mock.results[0]!.value as ReturnType<Placer['reconcile']>);
    expect(counts).toEqual({ written: 1, agreed: 1, conflicts: 1 });

    expect(await other.get(fresh!)).toMatchObject({ backend: 'b1' });
    expect(await other.get(agreed!)).toMatchObject({ backend: 'b1' });
    expect(await other.get(conflict!)).toMatchObject({ backend: elsewhere });
    // The write was A's reconcile: a placement from none (expected epoch 0) on b1.
    expect(a.store.places.filter((c) => c.room === fresh)).toEqual([{ room: fresh, backend: 'b1', expectedEpoch: 0, force: false, result: { ok: true, placement: await other.get(fresh!) } }]);
    expect(a.store.places.filter((c) => c.room === agreed || c.room === conflict)).toEqual([]);
    // The store's answer won: our socket of that room on b1 is closed, and we route to the winner.
    expect(t.closed).toBe(true);
    expect(a.tunnels.socketsInRoom(conflict!)).toBe(0);
    expect(await a.resolve(conflict!)).toEqual({ route: elsewhere, reason: 'sticky' });
    // Nothing provisional is left to write.
    const counts2 = await a.placer.reconcile();
    expect(counts2).toEqual({ written: 0, agreed: 0, conflicts: 0 });
    await other.close();
  });
});

describe('Placer: gateways leaving degraded mode one after the other', () => {
  it('for recoveryRingMs after the store is back new rooms still go to their ring owner, as on a gateway still degraded: the two agree', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a', { boundFactor: 1.25 });
    const b = gateway(state, 'gw-b', { boundFactor: 1.25 });
    // Skewed loads: bounded loads would skip b1 for a new room it owns.
    const skew = (g: TestGateway): void => g.pool.applyLoads(new Map([['b1', 100]]), g.pool.loadMark());
    const [first, second, later] = roomsOwnedBy(a, 'b1', 3, 'stagger');
    a.store.broken = true;
    b.store.broken = true;
    await Promise.all([a.placer.heartbeat(clock), b.placer.heartbeat(clock)]);
    expect([a.placer.isDegraded, b.placer.isDegraded]).toEqual([true, true]);

    // A reaches the store again (a failover: each gateway reconnects on its own schedule); B not yet.
    a.store.broken = false;
    await a.placer.heartbeat(clock);
    expect(a.placer.isDegraded).toBe(false);
    skew(a);
    skew(b);
    // B, degraded, places by the ring alone; A, back, must reach the same answer, whoever is first.
    expect(route(await b.resolve(first!))).toBe('b1');
    expect(route(await a.resolve(first!))).toBe('b1');
    expect(route(await a.resolve(second!))).toBe('b1');
    expect(route(await b.resolve(second!))).toBe('b1');
    expect((await stored(a, first!)).backend).toBe('b1');

    // B back: its provisional placements agree with the store.
    b.store.broken = false;
    const reconcile = vi.spyOn(b.placer, 'reconcile');
    await b.placer.heartbeat(clock);
    expect(await (reconcile.mock.results[0]!.value as ReturnType<Placer['reconcile']>)).toEqual({ written: 0, agreed: 2, conflicts: 0 });

    // Once every gateway still degraded counts as gone, bounded loads apply again.
    advance(TIMING.gatewayTtlMs + 1);
    skew(a);
    const d = await a.placer.explain(later!, clock, false);
    expect(d.decision).toMatchObject({ reason: 'bounded-skip' });
  });
});

describe('Placer: idle expiry', () => {
  it('after idleTtlMs without live sockets a placement expires and the room is placed anew; a live room does not expire', async () => {
    const state = new MemoryPlacementState();
    const a = gateway(state, 'gw-a');
    const [idle, live, quiet] = roomsOwnedBy(a, 'b2', 3, 'idle');
    a.pool.markDown('b2', clock, 'test');
    const idleOn = route(await a.resolve(idle!));
    const liveOn = route(await a.resolve(live!));
    const quietOn = route(await a.resolve(quiet!));
    expect(idleOn).not.toBe('b2');
    expect(liveOn).not.toBe('b2');
    a.pool.markUp('b2');
    openTunnel(a, live!, liveOn);
    const liveFirst = await stored(a, live!);
    const idleFirst = await stored(a, idle!);

    // Heartbeats for a bit less than the idle TTL: both still placed.
    const placedAt = clock;
    for (let t = 5_000; t < TIMING.idleTtlMs; t += 5_000) {
      clock = placedAt + t;
      await a.placer.heartbeat(clock);
    }
    expect(await a.resolve(idle!)).toEqual({ route: idleOn, reason: 'sticky' });
    expect(await stored(a, idle!)).toEqual(idleFirst);
    expect(a.placer.cachedPlacement(quiet!)).toMatchObject({ backend: quietOn });

    // Past the idle TTL (heartbeats going on): the idle room's placement is gone, in the store
    // and in the cache; the live room's is kept alive by the heartbeats.
    for (let t = TIMING.idleTtlMs; t <= TIMING.idleTtlMs + 10_000; t += 5_000) {
      clock = placedAt + t;
      await a.placer.heartbeat(clock);
    }
    expect(await a.store.inner.get(idle!)).toBeNull();
    // A room nobody asked for since it was placed is forgotten by the heartbeat's cache sweep too.
    expect(await a.store.inner.get(quiet!)).toBeNull();
    expect(a.placer.cachedPlacement(quiet!)).toBeNull();
    expect(await stored(a, live!)).toEqual(liveFirst);
    expect(a.placer.cachedPlacement(live!)).toEqual(liveFirst);

    // Placed anew: on its ring owner now that it is up, as a fresh placement (epoch 1, from none).
    expect(await a.resolve(idle!)).toEqual({ route: 'b2', reason: 'ring', place: { expectedEpoch: 0, from: null, force: false, overrideLive: false } });
    expect((await stored(a, idle!)).backend).toBe('b2');
    expect(await a.resolve(live!)).toEqual({ route: liveOn, reason: 'sticky' });
  });
});

describe('Placer: the cap on cached rooms without live sockets (placement.maxIdleRooms)', () => {
  const rooms = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  const cachedRooms = (g: TestGateway, names: readonly string[]): string[] => names.filter((r) => g.placer.cachedPlacement(r) !== null);

  it('forgets the least recently placed idle rooms first, never a room with live sockets here, and counts what it forgot', async () => {
    const state = new MemoryPlacementState();
    const evictions: number[] = [];
    const a = gateway(state, 'gw-a', { maxIdleRooms: 3, onEvicted: (n) => evictions.push(n) });
    const r = rooms('cap', 7);
    for (const room of r.slice(0, 3)) await a.resolve(room);
    // r1 gets a live socket: it does not count against the cap and is never forgotten.
    openTunnel(a, r[1]!, route(await a.resolve(r[1]!)));
    await a.resolve(r[3]!);
    expect(cachedRooms(a, r)).toEqual(r.slice(0, 4)); // 3 idle + 1 live: at the cap
    expect(evictions).toEqual([]);
    await a.resolve(r[4]!); // one idle too many: the oldest (r0) goes
    expect(cachedRooms(a, r)).toEqual([r[1], r[2], r[3], r[4]]);
    await a.resolve(r[5]!); // the next oldest is r1, live: kept; r2 goes
    expect(cachedRooms(a, r)).toEqual([r[1], r[3], r[4], r[5]]);
    expect(evictions).toEqual([1, 1]);

    // Read again from the store (past the cache TTL), r3 becomes the most recent: r4 goes before it.
    advance(CACHE_TTL_MS + 1);
    expect(a.store.gets).toBeGreaterThan(0);
    const gets = a.store.gets;
    await a.resolve(r[3]!);
    expect(a.store.gets).toBe(gets + 1);
    await a.resolve(r[6]!);
    expect(cachedRooms(a, r)).toEqual([r[1], r[3], r[5], r[6]]);
    expect(evictions).toEqual([1, 1, 1]);

    // A forgotten room is read from the store again, and stays on its backend (the store still has it).
    const before = await stored(a, r[0]!);
    expect(await a.resolve(r[0]!)).toEqual({ route: before.backend, reason: 'sticky' });
  });

  it('never forgets a provisional placement (made while the store was unreachable, to be written back)', async () => {
    const state = new MemoryPlacementState();
    const evictions: number[] = [];
    const a = gateway(state, 'gw-a', { maxIdleRooms: 2, onEvicted: (n) => evictions.push(n) });
    a.store.broken = true;
    const r = rooms('prov', 6);
    for (const room of r) await a.resolve(room);
    expect(a.placer.isDegraded).toBe(true);
    expect(cachedRooms(a, r)).toEqual(r);
    expect(evictions).toEqual([]);
    // Back: reconciliation writes every one of them, then they are ordinary entries again.
    a.store.broken = false;
    const result = await a.placer.reconcile();
    expect(result.written).toBe(6);
    await a.resolve('prov-next');
    expect(cachedRooms(a, [...r, 'prov-next'])).toEqual([r[5], 'prov-next']);
    // At least the 5 others (a room written back is remembered again by its own placement event
    // and may be forgotten twice).
    expect(evictions.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(5);
  });
});
