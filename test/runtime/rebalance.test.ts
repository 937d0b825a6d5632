// Rebalancing (src/runtime/rebalance.ts) in process, wired as a gateway wires it: the handoff
// runtime (src/runtime/handoff-setup.ts) over a real pool, placer, supervisor, the memory stores,
// and in-process test backends that serve the hooks over loopback (test/support/
// handoff-test-backend.ts), each room's state seeded there. Its timer is the test's: each
// interval is fired by hand (the delay it asked for is the configured rate), the stores' clock is
// moved by that interval, so nothing sleeps.
import { BackendCalls } from '../../src/runtime/backend-calls.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { defaultBackendTls } from '../../src/backends/backend-tls.js';
import type { LoadedConfig, ResolvedBackend } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryPlacementState, MemoryPlacementStore } from '../../src/placement/memory-store.js';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import type { PlacementStore } from '../../src/placement/store.js';
import { EventLog } from '../../src/runtime/events.js';
import { createHandoffRuntime, type HandoffRuntime } from '../../src/runtime/handoff-setup.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { Supervisor } from '../../src/runtime/supervisor.js';
import { TunnelRegistry } from '../../src/runtime/tunnels.js';
import { MemorySharedDataState, MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { HandoffTestBackend } from '../support/handoff-test-backend.js';
import { CALL_SECRET, waitFor, withTimeout } from '../support/processes.js';
import { startRedis, stopAllRedis } from '../support/redis.js';
import { testPlacer } from '../support/runtime-parts.js';

const logger = createLogger('silent', { write: () => undefined });
const TIMING = { idleTtlMs: 600_000, gatewayTtlMs: 5_000 };

interface Timer {
  readonly ms: number;
  /** One rebalancing step, resolved when it is over. */
  readonly fn: () => Promise<void>;
  cancelled: boolean;
  fired: boolean;
}

/** The stores' clock, moved by the test. */
const clock = { t: 1_700_000_000_000, now: (): number => clock.t };

/** One gateway: its runtime parts and the handoff runtime with rebalancing, its timer the test's. */
interface Gw {
  readonly pool: BackendPool;
  readonly store: PlacementStore;
  readonly supervisor: Supervisor;
  readonly handoff: HandoffRuntime;
  readonly metrics: ReturnType<typeof createMetrics>;
  readonly timers: Timer[];
  /** The timer rebalancing set last, if not fired or cancelled yet. */
  pending(): Timer | null;
  /** Opens a plain tunnel of the room on the backend (a live room through this gateway). */
  live(room: string, backend: string): void;
}

let closers: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of closers.reverse()) await c();
  closers = [];
});

afterAll(async () => {
  await stopAllRedis();
});

function resolved(b: HandoffTestBackend): ResolvedBackend {
  const u = new URL(b.url);
  return { id: b.id, url: b.url, host: u.hostname, port: Number(u.port), weight: 1 };
}

function config(rebalance: Record<string, unknown> | undefined, handoff: Record<string, unknown> = {}): Pick<LoadedConfig, 'handoff' | 'backendCalls'> {
  return configSchema.parse({ handoff: { ...handoff, ...(rebalance === undefined ? {} : { rebalance }) }, backendCalls: { secrets: [CALL_SECRET] } });
}

async function backends(...ids: string[]): Promise<HandoffTestBackend[]> {
  const out = await Promise.all(ids.map((id) => new HandoffTestBackend(id, [CALL_SECRET]).start()));
  closers.push(() => Promise.all(out.map((b) => b.close())).then(() => undefined));
  return out;
}

function gateway(
  id: string,
  shared: { placement: MemoryPlacementState; data: MemorySharedDataState },
  rebalance?: Record<string, unknown>,
  o: { store?: PlacementStore; handoff?: Record<string, unknown> } = {},
): Gw {
  let supervisor: Supervisor | null = null;
  const pool = new BackendPool([], 600_000, {
    onPassive: (b, state, reason) => supervisor?.passiveChanged(b, state, reason),
    onMembership: (added, removed) => supervisor?.membershipChanged(added, removed),
  });
  const tunnels = new TunnelRegistry(pool);
  const store = o.store ?? new MemoryPlacementStore(id, TIMING, shared.placement, clock.now);
  const sharedData = new MemorySharedDataStore(id, { presenceTtlMs: 10_000 }, shared.data, clock.now);
  const metrics = createMetrics(() => []);
  const placer = testPlacer({ store, pool, tunnels, logger, retryAfterS: 1, idleTtlMs: TIMING.idleTtlMs, recoveryRingMs: TIMING.gatewayTtlMs });
  const health = { reportFailure: () => undefined, setTargets: () => undefined };
  supervisor = new Supervisor({ pool, tunnels, placer, sharedData, events: new EventLog(), health, metrics, logger, onDown: 'keep', heartbeatMs: 1_000, presenceTtlMs: 10_000 });
  store.subscribe((ev) => supervisor?.storeEvent(ev));
  const timers: Timer[] = [];
  const after = (ms: number, fn: () => Promise<void>): (() => void) => {
    const t: Timer = { ms, fn, cancelled: false, fired: false };
    timers.push(t);
    return () => {
      t.cancelled = true;
    };
  };
  const handoff = createHandoffRuntime(config(rebalance, o.handoff), { placer, pool, store, tunnels, sharedData, backendTls: defaultBackendTls(), gatewayId: id, calls: new BackendCalls([CALL_SECRET]), metrics, logger, after });
  supervisor.onBackendBack((b) => handoff.backendBack(b));
  closers.push(() => {
    handoff.stop();
    placer.close();
  });
  const pending = (): Timer | null => {
    const t = timers.at(-1);
    return t && !t.cancelled && !t.fired ? t : null;
  };
  const live = (room: string, backend: string): void => {
    tunnels.add({ room, backendId: backend, close: () => undefined });
  };
  return { pool, store, supervisor, handoff, metrics, timers, pending, live };
}

/** `n` live rooms on the backend, placed there, their state seeded in the app, a socket through `gw`. */
async function liveRooms(gw: Gw, b: HandoffTestBackend, n: number): Promise<string[]> {
  const rooms: string[] = [];
  for (let i = 0; i < n; i++) {
    const room = `${b.id}-room-${i}`;
    const p = await gw.store.place(room, b.id, 0, { force: false });
    if (!p.ok) throw new Error('not placed');
    b.seed(room, `state of ${room}`, p.placement.epoch);
    gw.live(room, b.id);
    rooms.push(room);
  }
  return rooms;
}

/** Fires the timer (the stores' clock moved by its interval first); the next one the step set, or null. */
async function fire(gw: Gw, t: Timer): Promise<Timer | null> {
  expect(t.cancelled).toBe(false);
  clock.t += t.ms;
  t.fired = true;
  const n = gw.timers.length;
  await withTimeout(t.fn(), 10_000, 'a rebalancing step');
  return gw.timers.length > n ? gw.pending() : null;
}

async function moves(gw: Gw, result: string): Promise<number> {
  return (await gw.metrics.rebalanceMoves.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
}

async function placedOn(gw: Gw, rooms: readonly string[]): Promise<string[]> {
  return Promise.all(rooms.map(async (r) => (await gw.store.get(r))?.backend ?? 'none'));
}

function shared(): { placement: MemoryPlacementState; data: MemorySharedDataState } {
  return { placement: new MemoryPlacementState(), data: new MemorySharedDataState() };
}

describe('rebalancing', () => {
  it('is off by default: a backend that joins gets no live room', async () => {
    const [b1, b2] = await backends('b1', 'b2');
    const gw = gateway('gw-1', shared());
    gw.pool.setBackends([resolved(b1 as HandoffTestBackend)]);
    gw.handoff.start();
    await liveRooms(gw, b1 as HandoffTestBackend, 6);
    gw.pool.setBackends([b1, b2].map((b) => resolved(b as HandoffTestBackend)));
    expect(gw.timers).toEqual([]);
    expect(gw.handoff.snapshot().rebalance).toMatchObject({ enabled: false, targets: [], moved: 0 });
    // Only hellos (asked at start: which tunnels are followed), no handoff.
    expect((b1 as HandoffTestBackend).calls.filter((c) => c.step !== 'hello')).toEqual([]);
  });

  it('moves rooms with their state to a backend that joins, one per interval, until the skew is under the factor; never a room of a backend without hooks', async () => {
    const [b1, b2, b3] = (await backends('b1', 'b2', 'b3')) as [HandoffTestBackend, HandoffTestBackend, HandoffTestBackend];
    b2.hooks = false;
    const gw = gateway('gw-1', shared(), { enabled: true, skewFactor: 1.5, roomsPerMinute: 20 });
    gw.pool.setBackends([resolved(b1), resolved(b2)]);
    gw.handoff.start();
    const on1 = await liveRooms(gw, b1, 9);
    const on2 = await liveRooms(gw, b2, 9);
    gw.pool.setBackends([b1, b2, b3].map(resolved));
    expect(gw.handoff.snapshot().rebalance.targets).toEqual(['b3']);
    let timer = gw.pending();
    const movedPerStep: number[] = [];
    for (let i = 0; timer !== null && i < 20; i++) {
      // The configured rate: one step every 60000 / roomsPerMinute ms.
      expect(timer.ms).toBe(3_000);
      const before = await moves(gw, 'moved');
      timer = await fire(gw, timer);
      movedPerStep.push((await moves(gw, 'moved')) - before);
    }
    // 9/9/0, b2 without hooks: b1 gives rooms until it holds no more than 1.5 x b3 (5 against 4).
    expect(movedPerStep).toEqual([1, 1, 1, 1, 0]);
    expect(await placedOn(gw, on1)).toEqual([...Array(4).fill('b3'), ...Array(5).fill('b1')]);
    expect(await placedOn(gw, on2)).toEqual(Array(9).fill('b2'));
    // The state went with each room: the blob the app exported arrived on b3.
    for (const room of on1.slice(0, 4)) expect(b3.rooms.get(room)?.state).toBe(`state of ${room}`);
    expect(b2.calls.map((c) => c.step)).not.toContain('export');
    expect(gw.handoff.snapshot().recent.filter((e) => e.trigger === 'rebalance').map((e) => e.result)).toEqual(['moved', 'moved', 'moved', 'moved']);
    expect(gw.handoff.snapshot().rebalance).toMatchObject({ enabled: true, targets: [], moved: 4, failed: 0 });
    expect(gw.handoff.snapshot().rebalance.last).toContain('stopped rebalancing to b3');
  });

  it('a backend that comes back (checks up, drain lifted) is rebalanced to; one that goes down again stops it', async () => {
    const [b1, b3] = (await backends('b1', 'b3')) as [HandoffTestBackend, HandoffTestBackend];
    const gw = gateway('gw-1', shared(), { enabled: true, roomsPerMinute: 60 });
    gw.pool.setBackends([resolved(b1), resolved(b3)]);
    gw.handoff.start();
    gw.supervisor.healthChanged('b3', 'down', '3 failed checks');
    await liveRooms(gw, b1, 6);
    expect(gw.pending()).toBeNull();
    gw.supervisor.healthChanged('b3', 'up', '2 passed checks');
    const t = gw.pending() as Timer;
    expect(t.ms).toBe(1_000);
    const t2 = await fire(gw, t);
    expect(await moves(gw, 'moved')).toBe(1);
    // Down again before the next interval: the next step moves nothing and stops.
    gw.supervisor.healthChanged('b3', 'down', '3 failed checks');
    expect(await fire(gw, t2 as Timer)).toBeNull();
    expect(await moves(gw, 'moved')).toBe(1);
    expect(gw.handoff.snapshot().rebalance).toMatchObject({ targets: [] });
    expect(gw.handoff.snapshot().rebalance.last).toContain('takes no new rooms');
    // Up but draining (any gateway's admin call, heard from the store): no rooms go to it.
    await gw.store.setBackendState('b3', { state: 'draining', deadline: null, since: clock.t });
    gw.supervisor.healthChanged('b3', 'up', '2 passed checks');
    expect(gw.pending()).toBeNull();
    // Its drain lifted: rebalanced to again, and a room moves.
    await gw.store.setBackendState('b3', null);
    const t3 = gw.pending() as Timer;
    expect(t3.ms).toBe(1_000);
    await fire(gw, t3);
    expect(await moves(gw, 'moved')).toBe(2);
  });

  it('waits a few intervals for a target that does not answer the hello yet, then stops', async () => {
    const [b1, b3] = (await backends('b1', 'b3')) as [HandoffTestBackend, HandoffTestBackend];
    b3.behave.set('hello', 'hang');
    const gw = gateway('gw-1', shared(), { enabled: true }, { handoff: { timeoutMs: 50 } });
    gw.pool.setBackends([resolved(b1)]);
    gw.handoff.start();
    await liveRooms(gw, b1, 6);
    gw.pool.setBackends([resolved(b1), resolved(b3)]);
    let t = gw.pending();
    const notes: string[] = [];
    for (let i = 0; t !== null && i < 10; i++) {
      t = await fire(gw, t);
      notes.push(gw.handoff.snapshot().rebalance.last);
    }
    expect(notes).toEqual([
      ...Array(4).fill('waiting for b3 to answer whether it serves the handoff hooks'),
      'stopped rebalancing to b3: it did not answer whether it serves the handoff hooks (waited 5 intervals)',
    ]);
    expect(b1.calls.map((c) => c.step)).not.toContain('export');
  });

  it('respects the handoff bound: a step refused as too many moves nothing and the next interval tries again', async () => {
    const [b1, b3] = (await backends('b1', 'b3')) as [HandoffTestBackend, HandoffTestBackend];
    const gw = gateway('gw-1', shared(), { enabled: true }, { handoff: { maxConcurrentPerBackend: 1, timeoutMs: 300 } });
    gw.pool.setBackends([resolved(b1)]);
    gw.handoff.start();
    const rooms = await liveRooms(gw, b1, 6);
    gw.pool.setBackends([resolved(b1), resolved(b3)]);
    // An operator's move holds b1's one slot: its export hangs until the gateway's deadline.
    b1.behave.set('export', 'hang');
    const arrived = b1.arrival('export');
    const operator = gw.handoff.move(rooms[5] as string, 'b3');
    await withTimeout(arrived, 5_000, 'the hanging export');
    const t = await fire(gw, gw.pending() as Timer);
    expect(gw.handoff.snapshot().rebalance.last).toMatch(/^waiting: handoff.maxConcurrentPerBackend \(1\)/);
    expect(await moves(gw, 'refused')).toBe(1);
    expect((await withTimeout(operator, 5_000, 'the operator move')).event.result).toBe('rolled-back');
    b1.behave.delete('export');
    await fire(gw, t as Timer);
    expect(await moves(gw, 'moved')).toBe(1);
    expect(gw.handoff.snapshot().rebalance).toMatchObject({ moved: 1, failed: 0 });
  });

  it('a reload that turns it off stops at once; the gateway stopping too', async () => {
    const [b1, b3] = (await backends('b1', 'b3')) as [HandoffTestBackend, HandoffTestBackend];
    const gw = gateway('gw-1', shared(), { enabled: true });
    gw.pool.setBackends([resolved(b1)]);
    gw.handoff.start();
    await liveRooms(gw, b1, 6);
    gw.pool.setBackends([resolved(b1), resolved(b3)]);
    const t = gw.pending() as Timer;
    expect(t).not.toBeNull();
    gw.handoff.configureRebalance({ enabled: false, skewFactor: 1.5, roomsPerMinute: 30 });
    expect(t.cancelled).toBe(true);
    expect(gw.handoff.snapshot().rebalance).toMatchObject({ enabled: false, targets: [] });
    // On again, b3 back once more; then the gateway stops: that timer is cancelled too.
    gw.handoff.configureRebalance({ enabled: true, skewFactor: 1.5, roomsPerMinute: 30 });
    gw.supervisor.healthChanged('b3', 'up', 'checks');
    const t2 = gw.pending() as Timer;
    expect(t2).not.toBeNull();
    gw.handoff.stop();
    expect(t2.cancelled).toBe(true);
    expect(b1.calls.filter((c) => c.step === 'export')).toEqual([]);
  });

  it('moves nothing while the placement store is down (Redis), and goes on once it is back', async () => {
    const [b1, b3] = (await backends('b1', 'b3')) as [HandoffTestBackend, HandoffTestBackend];
    const redis = await startRedis();
    const store = new RedisPlacementStore({ url: redis.url, keyPrefix: 'rb:', gatewayId: 'gw-1', timing: TIMING, commandTimeoutMs: 500 });
    await store.connect({ timeoutMs: 5_000 });
    closers.push(() => store.close());
    const gw = gateway('gw-1', shared(), { enabled: true }, { store });
    gw.pool.setBackends([resolved(b1)]);
    gw.handoff.start();
    await liveRooms(gw, b1, 6);
    gw.pool.setBackends([resolved(b1), resolved(b3)]);
    await redis.kill();
    await waitFor('the store to notice Redis is down', 5_000, () => !store.available);
    const t = await fire(gw, gw.pending() as Timer);
    expect(gw.handoff.snapshot().rebalance.last).toBe('the placement store is unavailable: no moves until it works');
    expect(b1.calls.map((c) => c.step).filter((s) => s !== 'hello')).toEqual([]);
    expect(t).not.toBeNull();
    // Redis back (empty: the rooms placed again), and the next interval moves a room.
    await redis.restart();
    await waitFor('the store to reconnect', 10_000, () => store.available);
    for (let i = 0; i < 6; i++) b1.seed(`b1-room-${i}`, `state of b1-room-${i}`, (await gw.store.place(`b1-room-${i}`, 'b1', 0, { force: false }).then((p) => (p.ok ? p.placement.epoch : 0))));
    await fire(gw, t as Timer);
    expect(await moves(gw, 'moved')).toBe(1);
  });

  it('gateways sharing the store move one room per interval together: one of them takes the turn', async () => {
    const [b1, b3] = (await backends('b1', 'b3')) as [HandoffTestBackend, HandoffTestBackend];
    const state = shared();
    const gws = [gateway('gw-1', state, { enabled: true }), gateway('gw-2', state, { enabled: true })] as [Gw, Gw];
    for (const gw of gws) {
      gw.pool.setBackends([resolved(b1)]);
      gw.handoff.start();
    }
    const rooms = await liveRooms(gws[0], b1, 10);
    for (const room of rooms) gws[1].live(room, 'b1');
    for (const gw of gws) gw.pool.setBackends([resolved(b1), resolved(b3)]);
    const timers = gws.map((gw) => gw.pending() as Timer);
    // Both fire in the same interval: one room moves, the other gateway waits for its turn.
    clock.t += 2_000;
    await withTimeout(Promise.all(timers.map((t) => ((t.fired = true), t.fn()))), 10_000, 'both steps');
    const moved = await Promise.all(gws.map((gw) => moves(gw, 'moved')));
    expect(moved.sort()).toEqual([0, 1]);
    expect(gws.map((gw) => gw.handoff.snapshot().rebalance.last).filter((l) => l === 'another gateway moves a room this interval')).toHaveLength(1);
    // The next interval: a room moves again.
    clock.t += 2_000;
    await withTimeout(Promise.all(gws.map((gw) => (gw.pending() as Timer).fn())), 10_000, 'both steps again');
    expect((await Promise.all(gws.map((gw) => moves(gw, 'moved')))).reduce((a, b) => a + b)).toBe(2);
  });
});
