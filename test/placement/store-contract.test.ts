// One contract for both placement stores: every test runs against the in-memory store (two handles
// on one MemoryPlacementState, a controlled clock) and the Redis store (two RedisPlacementStore on
// one real redis-server, real waits). Each handle plays one gateway.
//
// Epochs come from one counter per store: a new placement's epoch is greater than every epoch
// given out before (of any room, also of expired placements), but not necessarily the previous
// one + 1. So the tests compare epochs (greater, equal, distinct), never expect exact values.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { MemoryPlacementState, MemoryPlacementStore } from '../../src/placement/memory-store.js';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import type { BackendAdminState, PlaceResult, PlacementRecord, PlacementStore, StoreEvent, StoreTiming } from '../../src/placement/store.js';
import { waitFor } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';

interface Harness {
  readonly timing: StoreTiming;
  /** A handle for one gateway; all handles of one harness share one state. */
  open(gatewayId: string): Promise<PlacementStore>;
  /** Lets time pass: the memory clock jumps, for Redis the test really waits (scaled, see REDIS_TIME_SCALE). */
  advance(ms: number): Promise<void>;
  dispose(): Promise<void>;
}

// Short TTLs. The waits below keep >= 250 ms between a deadline and the moment a test looks
// (on the Redis store's real clock, 3 times that: REDIS_TIME_SCALE).
const TIMING: StoreTiming = { idleTtlMs: 800, gatewayTtlMs: 400 };
/**
 * A placement younger than gatewayTtlMs cannot be moved unforced (its sockets may not have been
 * reported by any heartbeat yet): tests that move a room first let it age this much past that.
 */
const AGE_MARGIN_MS = 100;
/** Reports outlive placements: a placement can expire while another gateway still reports its room live. */
const LONG_REPORTS: StoreTiming = { idleTtlMs: 400, gatewayTtlMs: 1200 };
const NOT_FORCED = { force: false } as const;
const FORCED = { force: true } as const;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function memoryHarness(timing: StoreTiming = TIMING): Harness {
  const state = new MemoryPlacementState();
  let clock = 1_700_000_000_000;
  const stores: PlacementStore[] = [];
  return {
    timing,
    async open(gatewayId) {
      const s = new MemoryPlacementStore(gatewayId, timing, state, () => clock);
      stores.push(s);
      return s;
    },
    async advance(ms) {
      clock += ms;
    },
    async dispose() {
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}

let redis: RedisServer | undefined;
let harnessSeq = 0;

/**
 * Redis runs on the real clock, where the tests' margins (250-300 ms between a deadline and the
 * moment a test looks) are not enough: on a busy 2-core machine a test process or redis-server
 * can stall for longer (a placement placed, aged 500 ms and then refreshed had expired at its
 * 800 ms idle TTL; the heartbeat re-created it and the busy check got 'lost-race'). So the Redis
 * store gets every TTL multiplied by this factor, and advance() waits as much longer: each test
 * keeps its logical timeline (the same relations between TTLs and waits as on the memory store's
 * controlled clock), with margins of 750 ms and more.
 */
const REDIS_TIME_SCALE = 3;

function redisHarness(timing: StoreTiming = TIMING): Harness {
  if (!redis) throw new Error('redis-server not started');
  const url = redis.url;
  // A fresh key prefix per test: tests share the server, never state.
  const keyPrefix = `contract-${process.pid}-${++harnessSeq}:`;
  const stores: RedisPlacementStore[] = [];
  const real: StoreTiming = { ...timing, idleTtlMs: timing.idleTtlMs * REDIS_TIME_SCALE, gatewayTtlMs: timing.gatewayTtlMs * REDIS_TIME_SCALE };
  return {
    timing,
    async open(gatewayId) {
      const s = new RedisPlacementStore({ url, keyPrefix, gatewayId, timing: real, commandTimeoutMs: 1000 });
      stores.push(s);
      await s.connect({ timeoutMs: 5000 });
      return s;
    },
    advance: (ms) => sleep(ms * REDIS_TIME_SCALE),
    async dispose() {
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}

/** Collects a handle's events. */
function record(store: PlacementStore): { events: StoreEvent[]; stop: () => void } {
  const events: StoreEvent[] = [];
  const stop = store.subscribe((ev) => events.push(ev));
  return { events, stop };
}

function placementEvents(events: readonly StoreEvent[], room: string): StoreEvent[] {
  return events.filter((e) => e.type === 'placement' && e.room === room);
}

function placementEvent(room: string, placement: PlacementRecord): StoreEvent {
  return { type: 'placement', room, placement };
}

/**
 * A place() that wrote a new placement: ok, on `backend`, with an epoch greater than `above`
 * (pass the highest epoch given out before: every new epoch exceeds all earlier ones).
 */
function placed(res: PlaceResult, backend: string, above: number): PlacementRecord {
  expect(res).toEqual({ ok: true, placement: { backend, epoch: expect.any(Number) } });
  const p = (res as Extract<PlaceResult, { ok: true }>).placement;
  expect(Number.isSafeInteger(p.epoch)).toBe(true);
  expect(p.epoch).toBeGreaterThan(above);
  return p;
}

/** A stored placement (get()) that was written anew: on `backend`, with an epoch greater than `above`. */
function stored(p: PlacementRecord | null, backend: string, above: number): PlacementRecord {
  expect(p).toEqual({ backend, epoch: expect.any(Number) });
  expect(Number.isSafeInteger(p!.epoch)).toBe(true);
  expect(p!.epoch).toBeGreaterThan(above);
  return p!;
}

/** What each test gets: its harness, two gateways' handles on it, and age() (see setup). */
interface Handles {
  readonly h: Harness;
  readonly a: PlacementStore;
  readonly b: PlacementStore;
  readonly age: () => Promise<void>;
}

function contract(kind: 'memory' | 'redis', makeHarness: (timing?: StoreTiming) => Harness): void {
  // Concurrent: the Redis store's tests mostly wait for real TTLs to pass, and each test has its
  // own state, so their waits overlap (vitest's maxConcurrency at a time).
  describe.concurrent(`PlacementStore contract: ${kind}`, () => {
    /**
     * One test's own harness and two handles, disposed when the test ends (the tests run
     * concurrently: each has its own state, on Redis its own key prefix and event channel).
     * age() lets the placements written so far age past gatewayTtlMs, so that an unforced move of
     * them is no longer refused for their youth. With TIMING: 500 ms, well within idleTtlMs (800 ms).
     */
    const setup = async (onFinished: TestContext['onTestFinished'], timing: StoreTiming = TIMING): Promise<Handles> => {
      const h = makeHarness(timing);
      onFinished(() => h.dispose());
      const a = await h.open('gw-a');
      const b = await h.open('gw-b');
      return { h, a, b, age: () => h.advance(h.timing.gatewayTtlMs + AGE_MARGIN_MS) };
    };

    it('get/place round trip, seen by both gateways', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      expect(a.kind).toBe(kind);
      expect(a.available).toBe(true);
      expect(await a.get('room-1')).toBeNull();
      // Epoch 0 means "no placement": a placement's epoch is a positive integer.
      const p = placed(await a.place('room-1', 'b1', 0, NOT_FORCED), 'b1', 0);
      expect(await a.get('room-1')).toEqual(p);
      expect(await b.get('room-1')).toEqual(p);
      expect(await b.get('room-2')).toBeNull();
    });

    it('every change of backend takes an epoch above all earlier ones (any room); a same-backend place keeps the epoch', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      await age();
      const p2 = placed(await b.place('r', 'b2', p1.epoch, NOT_FORCED), 'b2', p1.epoch);
      // One counter for all rooms: another room's placement in between takes an epoch too.
      const other = placed(await b.place('other', 'b1', 0, NOT_FORCED), 'b1', p2.epoch);
      const p3 = placed(await a.place('r', 'b3', p2.epoch, FORCED), 'b3', other.epoch);
      expect(await b.place('r', 'b3', p3.epoch, NOT_FORCED)).toEqual({ ok: true, placement: p3 });
      expect(await a.get('r')).toEqual(p3);
      expect(await a.get('other')).toEqual(other);
    });

    it('compare-and-set: a stale expected epoch loses the race and gets the current placement', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      const lost = { ok: false, reason: 'lost-race', current: p };
      expect(await b.place('r', 'b2', 0, NOT_FORCED)).toEqual(lost);
      expect(await b.place('r', 'b2', p.epoch + 1, NOT_FORCED)).toEqual(lost);
      expect(await b.place('r', 'b1', p.epoch + 6, FORCED)).toEqual(lost);
      expect(await b.place('absent', 'b1', 3, NOT_FORCED)).toEqual({ ok: false, reason: 'lost-race', current: null });
      expect(await b.get('r')).toEqual(p);
      expect(await b.get('absent')).toBeNull();
    });

    it('two gateways racing to place the same rooms always agree on one backend', async ({ onTestFinished }) => {
      // Long-lived placements: 240 racing calls and 120 reads must not outlast idleTtlMs on a loaded machine.
      const { h, a, b, age } = await setup(onTestFinished, { ...TIMING, idleTtlMs: 60_000 });
      const rooms = Array.from({ length: 60 }, (_, i) => `race-${i}`);
      /** The one winner of a racing pair; the loser is told where the room is (route there, or decide again). */
      const winner = (pair: readonly PlaceResult[], room: string): PlacementRecord => {
        const won = pair.filter((res) => res.ok);
        const lost = pair.filter((res) => !res.ok);
        expect(won, room).toHaveLength(1);
        expect(lost, room).toHaveLength(1);
        const placement = won[0]!.ok ? won[0]!.placement : undefined;
        expect(lost[0], room).toEqual({ ok: false, reason: 'lost-race', current: placement });
        return placement!;
      };
      // First placements, all rooms at once, both gateways at once.
      const first = await Promise.all(rooms.map((r) => Promise.all([a.place(r, 'b1', 0, NOT_FORCED), b.place(r, 'b2', 0, NOT_FORCED)])));
      const firstWon = rooms.map((room, i) => winner(first[i]!, room));
      // Then, once the placements are old enough to be moved, racing moves away from the winner,
      // to two different backends.
      await age();
      const moves = await Promise.all(
        rooms.map((r, i) => Promise.all([a.place(r, 'm1', firstWon[i]!.epoch, NOT_FORCED), b.place(r, 'm2', firstWon[i]!.epoch, NOT_FORCED)])),
      );
      const epochs: number[] = [];
      for (const [i, room] of rooms.entries()) {
        const one = firstWon[i]!;
        const two = winner(moves[i]!, room);
        expect(one.epoch, room).toBeGreaterThan(0);
        expect(two.epoch, room).toBeGreaterThan(one.epoch);
        epochs.push(one.epoch, two.epoch);
        const fromA = await a.get(room);
        expect(fromA).toEqual(two);
        expect(await b.get(room)).toEqual(fromA);
      }
      // One counter: no two placements (of any rooms) ever share an epoch.
      expect(new Set(epochs).size).toBe(epochs.length);
    });

    it("busy: a move away from the backend another gateway holds sockets on is refused unless forced", async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      // Old enough to be moved: the refusal below is A's report, not the placement's youth.
      await age();
      await a.heartbeat([{ room: 'r', backend: 'b1', sockets: 2 }]);
      expect(await b.place('r', 'b2', p1.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: p1 });
      expect(await b.get('r')).toEqual(p1);
      // A same-backend place is no move: allowed (refreshes the TTL).
      expect(await b.place('r', 'b1', p1.epoch, NOT_FORCED)).toEqual({ ok: true, placement: p1 });
      const p2 = placed(await b.place('r', 'b2', p1.epoch, FORCED), 'b2', p1.epoch);
      expect(await a.get('r')).toEqual(p2);
    });

    it("busy counts only other gateways' current reports of sockets on the current backend", async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p: Record<string, PlacementRecord> = {};
      let top = 0;
      for (const r of ['own', 'zero', 'elsewhere', 'replaced']) top = (p[r] = placed(await a.place(r, 'b1', 0, NOT_FORCED), 'b1', top)).epoch;
      await age(); // only reports can make them busy now
      await a.heartbeat([
        { room: 'own', backend: 'b1', sockets: 1 },
        { room: 'zero', backend: 'b1', sockets: 0 },
        { room: 'elsewhere', backend: 'b9', sockets: 3 },
        { room: 'replaced', backend: 'b1', sockets: 1 },
      ]);
      // Its own report does not stop a gateway.
      top = placed(await a.place('own', 'b2', p.own!.epoch, NOT_FORCED), 'b2', top).epoch;
      expect(await b.place('zero', 'b2', p.zero!.epoch, NOT_FORCED)).toMatchObject({ ok: true });
      expect(await b.place('elsewhere', 'b2', p.elsewhere!.epoch, NOT_FORCED)).toMatchObject({ ok: true });
      expect(await b.place('replaced', 'b2', p.replaced!.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: p.replaced });
      // Each heartbeat replaces the previous report.
      await a.heartbeat([]);
      placed(await b.place('replaced', 'b2', p.replaced!.epoch, NOT_FORCED), 'b2', top);
    });

    it('a stale gateway (no heartbeat for gatewayTtlMs) no longer blocks a move', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      await age(); // only A's report can make it busy now
      await a.heartbeat([{ room: 'r', backend: 'b1', sockets: 5 }]);
      expect(await b.place('r', 'b2', p1.epoch, NOT_FORCED)).toMatchObject({ ok: false, reason: 'busy' });
      // Stale, but the placement (idle TTL, refreshed by A's heartbeat) still lives.
      await h.advance(h.timing.gatewayTtlMs + 150);
      placed(await b.place('r', 'b2', p1.epoch, NOT_FORCED), 'b2', p1.epoch);
    });

    it('a closed gateway no longer blocks a move', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      await age(); // only A's report can make it busy now
      await a.heartbeat([{ room: 'r', backend: 'b1', sockets: 5 }]);
      expect(await b.place('r', 'b2', p1.epoch, NOT_FORCED)).toMatchObject({ ok: false, reason: 'busy' });
      await a.close();
      placed(await b.place('r', 'b2', p1.epoch, NOT_FORCED), 'b2', p1.epoch);
    });

    it('an unforced move of a placement younger than gatewayTtlMs is busy while another gateway is alive (no report needed); once it has aged, the move succeeds', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      // Both gateways alive, neither reporting the room.
      const alive = () => Promise.all([a.heartbeat([]), b.heartbeat([])]);
      await alive();
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      // No report holds the room, but sockets opened since it was placed may not be reported yet.
      const young = { ok: false, reason: 'busy', current: p1 };
      expect(await b.place('r', 'b2', p1.epoch, NOT_FORCED)).toEqual(young);
      // The gateway that placed it is refused too (the other one may hold sockets).
      expect(await a.place('r', 'b2', p1.epoch, NOT_FORCED)).toEqual(young);
      await h.advance(h.timing.gatewayTtlMs - 250); // older, but still younger than gatewayTtlMs
      await alive();
      expect(await b.place('r', 'b3', p1.epoch, NOT_FORCED)).toEqual(young);
      // The refused moves changed nothing.
      expect(await a.get('r')).toEqual(p1);
      expect(Object.fromEntries(await b.roomsPerBackend())).toEqual({ b1: 1 });
      await h.advance(250 + AGE_MARGIN_MS); // now older than gatewayTtlMs
      await alive();
      const p2 = placed(await b.place('r', 'b2', p1.epoch, NOT_FORCED), 'b2', p1.epoch);
      expect(await a.get('r')).toEqual(p2);
      // The move wrote a new placement, young in its turn: moving it on at once is refused.
      expect(await a.place('r', 'b3', p2.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: p2 });
      expect(await b.get('r')).toEqual(p2);
      expect(Object.fromEntries(await b.roomsPerBackend())).toEqual({ b2: 1 });
    });

    it('a gateway alone (no other gateway alive) may move a young placement: it knows its own sockets', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      placed(await a.place('r', 'b2', p1.epoch, NOT_FORCED), 'b2', p1.epoch);
    });

    it('a forced move of a placement younger than gatewayTtlMs succeeds', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      await Promise.all([a.heartbeat([]), b.heartbeat([])]);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      expect(await b.place('r', 'b2', p1.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: p1 });
      const p2 = placed(await b.place('r', 'b2', p1.epoch, FORCED), 'b2', p1.epoch);
      expect(await a.get('r')).toEqual(p2);
      // The forced move's placement is young too; forced, it moves on at once again.
      const p3 = placed(await a.place('r', 'b3', p2.epoch, FORCED), 'b3', p2.epoch);
      expect(await b.get('r')).toEqual(p3);
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b3: 1 });
    });

    it('a same-backend place of a placement younger than gatewayTtlMs is ok and keeps the epoch', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      const same = { ok: true, placement: p1 };
      expect(await b.place('r', 'b1', p1.epoch, NOT_FORCED)).toEqual(same);
      expect(await a.place('r', 'b1', p1.epoch, NOT_FORCED)).toEqual(same);
      expect(await b.place('r', 'b1', p1.epoch, FORCED)).toEqual(same);
      expect(await a.get('r')).toEqual(p1);
      expect(await b.get('r')).toEqual(p1);
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 1 });
    });

    it('placements expire idleTtlMs after the last place or heartbeat on their backend', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p: Record<string, PlacementRecord> = {};
      let top = 0;
      for (const r of ['kept', 'idle', 'wrong-backend']) top = (p[r] = placed(await a.place(r, 'b1', 0, NOT_FORCED), 'b1', top)).epoch;
      // 6 x 200 ms = 1.5 x idleTtlMs, heartbeats (from the other gateway) every 200 ms.
      for (let i = 0; i < 6; i++) {
        await h.advance(200);
        await b.heartbeat([
          { room: 'kept', backend: 'b1', sockets: 1 },
          { room: 'wrong-backend', backend: 'b2', sockets: 1 },
        ]);
        // Half the idle TTL in: a report of another backend neither overwrote the placement...
        if (i === 1) expect(await a.get('wrong-backend')).toEqual(p['wrong-backend']);
      }
      expect(await a.get('kept')).toEqual(p.kept);
      expect(await a.get('idle')).toBeNull();
      // ...nor refreshed it: it expired, and the next report re-created it where the sockets are,
      // as a new placement (new epoch).
      const recreated = stored(await a.get('wrong-backend'), 'b2', top);
      // Expired = no placement: epoch 0 again; the expired epoch is never given out again.
      expect(await a.place('idle', 'b1', p.idle!.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'lost-race', current: null });
      placed(await a.place('idle', 'b3', 0, NOT_FORCED), 'b3', recreated.epoch);
    });

    it('an unchanged report (null) keeps every room of the last report live, past idleTtlMs; silent, its rooms expire idleTtlMs after its last heartbeat', async ({ onTestFinished }) => {
      const { h, a, b } = await setup(onTestFinished);
      const kept = placed(await a.place('kept', 'b1', 0, NOT_FORCED), 'b1', 0);
      const idle = placed(await a.place('idle', 'b2', 0, NOT_FORCED), 'b2', kept.epoch);
      expect(await b.heartbeat([{ room: 'kept', backend: 'b1', sockets: 2 }])).toBe('ok');
      // 6 x 200 ms = 1.5 x idleTtlMs of unchanged reports.
      for (let i = 0; i < 6; i++) {
        await h.advance(200);
        expect(await b.heartbeat(null)).toBe('ok');
      }
      expect(await a.get('kept')).toEqual(kept);
      expect(await a.get('idle')).toBeNull();
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 1 });
      // Still busy for another gateway's move: the report stands.
      expect(await a.place('kept', 'b3', kept.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: kept });
      // B goes silent: its room expires idleTtlMs after its last heartbeat (A's heartbeats go on).
      await h.advance(h.timing.idleTtlMs - 250);
      expect(await a.heartbeat([])).toBe('ok');
      expect(await a.get('kept')).toEqual(kept);
      await h.advance(500);
      expect(await a.heartbeat([])).toBe('ok');
      expect(await a.get('kept')).toBeNull();
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({});
      // B back after its report stopped counting: a delta or null cannot be applied, a full report can.
      expect(await b.heartbeat(null)).toBe('resync');
      expect(await b.heartbeat({ rooms: [], gone: ['kept'] })).toBe('resync');
      expect(await b.heartbeat([{ room: 'kept', backend: 'b1', sockets: 2 }])).toBe('ok');
      stored(await a.get('kept'), 'b1', idle.epoch);
    });

    it('a changed report (a delta) updates only the rooms it names: the others stay as the last report left them', async ({ onTestFinished }) => {
      const { h, a, b } = await setup(onTestFinished);
      const onA = record(a);
      const p: Record<string, PlacementRecord> = {};
      let top = 0;
      for (const r of ['r1', 'r2', 'r3']) top = (p[r] = placed(await a.place(r, 'b1', 0, NOT_FORCED), 'b1', top)).epoch;
      expect(
        await b.heartbeat([
          { room: 'r1', backend: 'b1', sockets: 1 },
          { room: 'r2', backend: 'b1', sockets: 1 },
          { room: 'r3', backend: 'b1', sockets: 1 },
        ]),
      ).toBe('ok');
      // A gateway without a report cannot send changes: it is told to send the whole report.
      const c = await h.open('gw-c');
      expect(await c.heartbeat({ rooms: [{ room: 'r9', backend: 'b1', sockets: 1 }], gone: [] })).toBe('resync');
      expect(await c.heartbeat(null)).toBe('resync');
      expect(await a.get('r9')).toBeNull();
      // r1 ended, r2's socket count changed, r4 is new (no placement: created where its sockets are).
      expect(
        await b.heartbeat({
          rooms: [
            { room: 'r2', backend: 'b1', sockets: 3 },
            { room: 'r4', backend: 'b2', sockets: 1 },
          ],
          gone: ['r1'],
        }),
      ).toBe('ok');
      const r4 = stored(await a.get('r4'), 'b2', top);
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 3, b2: 1 });
      // 1.5 x idleTtlMs of unchanged reports: r2, r3 (unnamed) and r4 stay; r1 left the report and expires.
      for (let i = 0; i < 6; i++) {
        await h.advance(200);
        expect(await b.heartbeat(null)).toBe('ok');
      }
      expect(await a.get('r1')).toBeNull();
      expect(await a.get('r2')).toEqual(p.r2);
      expect(await a.get('r3')).toEqual(p.r3);
      expect(await a.get('r4')).toEqual(r4);
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 2, b2: 1 });
      expect(await a.place('r3', 'b2', p.r3!.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: p.r3 });
      // A room reported on another backend than its placement (a delta): no longer busy there, and
      // the placement is no longer kept live by it.
      expect(await b.heartbeat({ rooms: [{ room: 'r3', backend: 'b3', sockets: 1 }], gone: [] })).toBe('ok');
      placed(await a.place('r3', 'b2', p.r3!.epoch, NOT_FORCED), 'b2', r4.epoch);
      await waitFor('the r4 event', 3000, () => placementEvents(onA.events, 'r4').length === 1);
      expect(placementEvents(onA.events, 'r2')).toEqual([placementEvent('r2', p.r2!)]);
    });

    it('maxIdleRooms: beyond the cap the least recently kept idle placements are evicted, never a room reported live; counted', async ({ onTestFinished }) => {
      let evicted = 0;
      const { h, a, b, age } = await setup(onTestFinished, { ...TIMING, maxIdleRooms: 3, onEvicted: (n) => (evicted += n) });
      const rooms = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
      const on: Record<string, string> = { r0: 'b1', r1: 'b2', r2: 'b1', r3: 'b2', r4: 'b1', r5: 'b2' };
      const put = async (r: string): Promise<PlacementRecord> => {
        await h.advance(2); // distinct times: Redis orders by the expiry in ms
        return placed(await a.place(r, on[r]!, 0, NOT_FORCED), on[r]!, 0);
      };
      const present = async (): Promise<string[]> => {
        const out: string[] = [];
        for (const r of rooms) if ((await a.get(r)) !== null) out.push(r);
        return out;
      };
      for (const r of ['r0', 'r1', 'r2']) await put(r);
      await h.advance(2);
      await a.heartbeat([{ room: 'r1', backend: 'b2', sockets: 1 }]); // r1 live: not counted, never evicted
      await put('r3');
      expect(await present()).toEqual(['r0', 'r1', 'r2', 'r3']);
      expect(evicted).toBe(0);
      await put('r4'); // one idle too many: the oldest, r0, goes
      expect(await present()).toEqual(['r1', 'r2', 'r3', 'r4']);
      expect(evicted).toBe(1);
      // A same-backend place keeps r2 alive: it is now the most recent. The oldest is r1, live:
      // stepped over; r3 goes.
      await h.advance(2);
      const r2 = (await a.get('r2'))!;
      expect(await a.place('r2', 'b1', r2.epoch, NOT_FORCED)).toEqual({ ok: true, placement: r2 });
      await put('r5');
      expect(await present()).toEqual(['r1', 'r2', 'r4', 'r5']);
      expect(evicted).toBe(2);
      const perBackend = await a.roomsPerBackend();
      expect([...perBackend.values()].reduce((x, y) => x + y, 0)).toBe(4);
    });

    it('maxIdleRooms: with another gateway alive, a placement younger than gatewayTtlMs is not evicted (its sockets may be unreported)', async ({ onTestFinished }) => {
      let evicted = 0;
      const { h, a, b, age } = await setup(onTestFinished, { ...TIMING, maxIdleRooms: 3, onEvicted: (n) => (evicted += n) });
      await b.heartbeat([]); // b is alive, reporting nothing
      for (const r of ['y0', 'y1', 'y2', 'y3']) {
        await h.advance(2); // distinct times: Redis orders by the expiry in ms
        placed(await a.place(r, 'b1', 0, NOT_FORCED), 'b1', 0);
      }
      expect(evicted).toBe(0);
      expect((await a.roomsPerBackend()).get('b1')).toBe(4); // over the cap: all young
      await h.advance(TIMING.gatewayTtlMs + AGE_MARGIN_MS);
      await b.heartbeat([]);
      placed(await a.place('y4', 'b1', 0, NOT_FORCED), 'b1', 0); // 5 placements, cap 3: the 2 oldest go
      expect(evicted).toBe(2);
      expect(await a.get('y0')).toBeNull();
      expect(await a.get('y1')).toBeNull();
      expect(await a.get('y2')).not.toBeNull();
    });

    it('a same-backend place refreshes the idle TTL', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      await h.advance(500);
      expect(await b.place('r', 'b1', p1.epoch, NOT_FORCED)).toEqual({ ok: true, placement: p1 });
      await h.advance(500); // 1000 ms after the first place, 500 after the refresh
      expect(await a.get('r')).toEqual(p1);
      await h.advance(h.timing.idleTtlMs);
      expect(await a.get('r')).toBeNull();
    });

    it('roomsPerBackend counts unexpired placements and drops expired ones', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      expect(await a.roomsPerBackend()).toEqual(new Map());
      await a.place('r1', 'b1', 0, NOT_FORCED);
      const r2 = placed(await b.place('r2', 'b1', 0, NOT_FORCED), 'b1', 0);
      await a.place('r3', 'b2', 0, NOT_FORCED);
      expect(Object.fromEntries(await b.roomsPerBackend())).toEqual({ b1: 2, b2: 1 });
      await age();
      placed(await a.place('r2', 'b2', r2.epoch, NOT_FORCED), 'b2', r2.epoch);
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 1, b2: 2 });
      for (let i = 0; i < 6; i++) {
        await h.advance(200);
        await a.heartbeat([{ room: 'r3', backend: 'b2', sockets: 1 }]);
      }
      expect(Object.fromEntries(await b.roomsPerBackend())).toEqual({ b2: 1 });
      await h.advance(h.timing.idleTtlMs + 200);
      expect(await a.roomsPerBackend()).toEqual(new Map());
    });
    it('backend admin states: set, overwrite, clear, list; changes arrive as events on every handle', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const onA = record(a);
      const onB = record(b);
      const draining: BackendAdminState = { state: 'draining', deadline: 1_700_000_060_000, since: 1_700_000_000_000 };
      const maintenance: BackendAdminState = { state: 'maintenance', deadline: null, since: 1_700_000_001_000 };
      await a.setBackendState('b1', draining);
      await b.setBackendState('b2', maintenance);
      expect(await a.backendStates()).toEqual(new Map([['b1', draining], ['b2', maintenance]]));
      expect(await b.backendStates()).toEqual(new Map([['b1', draining], ['b2', maintenance]]));
      const active: BackendAdminState = { state: 'active', deadline: null, since: 1_700_000_002_000 };
      await b.setBackendState('b1', active);
      await a.setBackendState('b2', null);
      expect(await b.backendStates()).toEqual(new Map([['b1', active]]));
      const expected: StoreEvent[] = [
        { type: 'backend-state', id: 'b1', state: draining },
        { type: 'backend-state', id: 'b2', state: maintenance },
        { type: 'backend-state', id: 'b1', state: active },
        { type: 'backend-state', id: 'b2', state: null },
      ];
      for (const rec of [onA, onB]) {
        await waitFor('4 backend-state events', 3000, () => rec.events.filter((e) => e.type === 'backend-state').length >= 4);
        expect(rec.events.filter((e) => e.type === 'backend-state')).toEqual(expected);
      }
    });

    it('placement changes arrive as events on the other handle (and the own one); a same-backend place is no change', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const onA = record(a);
      const onB = record(b);
      const p1 = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      await a.place('r', 'b1', p1.epoch, NOT_FORCED); // no change, no event
      const p2 = placed(await a.place('r', 'b2', p1.epoch, FORCED), 'b2', p1.epoch);
      expect(await b.place('r', 'b3', p1.epoch, NOT_FORCED)).toMatchObject({ ok: false, reason: 'lost-race' }); // no event
      await a.place('marker', 'b1', 0, NOT_FORCED);
      const expected: StoreEvent[] = [placementEvent('r', p1), placementEvent('r', p2)];
      for (const rec of [onA, onB]) {
        await waitFor('the marker event', 3000, () => placementEvents(rec.events, 'marker').length === 1);
        expect(placementEvents(rec.events, 'r')).toEqual(expected);
      }
      // Unsubscribed: nothing more.
      onB.stop();
      await a.place('marker-2', 'b1', 0, NOT_FORCED);
      await waitFor('the second marker on A', 3000, () => placementEvents(onA.events, 'marker-2').length === 1);
      await sleep(kind === 'redis' ? 100 : 0);
      expect(placementEvents(onB.events, 'marker-2')).toEqual([]);
    });

    it('keys like __proto__, constructor, a:b.c are plain rooms and backend ids', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const onB = record(b);
      const rooms = ['__proto__', 'constructor', 'a:b.c', 'hasOwnProperty', 'toString', 'p:x', 'gw'];
      const first = new Map<string, PlacementRecord>();
      let top = 0;
      for (const room of rooms) {
        const p = placed(await a.place(room, 'constructor', 0, NOT_FORCED), 'constructor', top);
        first.set(room, p);
        top = p.epoch;
      }
      await age();
      const moved = placed(await b.place('__proto__', '__proto__', first.get('__proto__')!.epoch, NOT_FORCED), '__proto__', top);
      for (const room of rooms) expect(await b.get(room), room).toEqual(room === '__proto__' ? moved : first.get(room));
      const counts = await a.roomsPerBackend();
      expect(counts.get('constructor')).toBe(rooms.length - 1);
      expect(counts.get('__proto__')).toBe(1);
      expect(counts.size).toBe(2);
      // The moved placement ages too (the others expire meanwhile): then only the report makes it busy.
      await age();
      await a.heartbeat([{ room: '__proto__', backend: '__proto__', sockets: 1 }]);
      expect(await b.place('__proto__', 'x', moved.epoch, NOT_FORCED)).toMatchObject({ ok: false, reason: 'busy' });
      const st: BackendAdminState = { state: 'maintenance', deadline: null, since: 1 };
      await a.setBackendState('__proto__', st);
      await a.setBackendState('constructor', st);
      const states = await b.backendStates();
      expect([...states.keys()].sort()).toEqual(['__proto__', 'constructor']);
      expect(states.get('__proto__')).toEqual(st);
      await waitFor('events for odd keys', 3000, () => onB.events.filter((e) => e.type === 'backend-state').length >= 2);
      expect(placementEvents(onB.events, '__proto__')).toEqual([placementEvent('__proto__', first.get('__proto__')!), placementEvent('__proto__', moved)]);
      expect(({} as Record<string, unknown>).backend).toBeUndefined();
    });

    it('epochs never repeat, even after a placement expired: a stale {backend, epoch} never wins against a re-placed room', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      // Gateway A placed the room and remembers {b1, e1}; the placement then expires unseen by A.
      const stale = placed(await a.place('r', 'b1', 0, NOT_FORCED), 'b1', 0);
      await h.advance(h.timing.idleTtlMs + 250);
      expect(await b.get('r')).toBeNull();
      // B places the room again, on the same backend: a new placement with a new epoch.
      const again = placed(await b.place('r', 'b1', 0, NOT_FORCED), 'b1', stale.epoch);
      // A's compare-and-set on its stale view fails, whatever it asks for, and is told the current placement.
      const lostToAgain = { ok: false, reason: 'lost-race', current: again };
      expect(await a.place('r', 'b2', stale.epoch, NOT_FORCED)).toEqual(lostToAgain);
      expect(await a.place('r', 'b2', stale.epoch, FORCED)).toEqual(lostToAgain);
      expect(await a.place('r', 'b1', stale.epoch, NOT_FORCED)).toEqual(lostToAgain);
      expect(await b.get('r')).toEqual(again);
      // Once more, on another backend this time: neither earlier epoch matches it.
      await h.advance(h.timing.idleTtlMs + 250);
      const third = placed(await b.place('r', 'b2', 0, NOT_FORCED), 'b2', again.epoch);
      for (const old of [stale, again]) {
        expect(await a.place('r', 'b3', old.epoch, FORCED)).toEqual({ ok: false, reason: 'lost-race', current: third });
      }
      expect(await a.get('r')).toEqual(third);
      // The counter is the store's, not the room's: another room continues above it.
      placed(await a.place('other', 'b1', 0, NOT_FORCED), 'b1', third.epoch);
    });

    it("place() with no placement adopts the backend another gateway's fresh report has the room live on", async ({ onTestFinished }) => {
      // Reports outlive placements here, so that a placement can expire under a live report.
      const { h, a, b, age } = await setup(onTestFinished, LONG_REPORTS);
      const onA = record(a);
      const onB = record(b);
      const first: Record<string, PlacementRecord> = {};
      let top = 0;
      for (const r of ['adopt', 'own', 'same', 'stale']) top = (first[r] = placed(await a.place(r, 'b1', 0, NOT_FORCED), 'b1', top)).epoch;
      // Sockets on b2 while the placements say b1 (e.g. not yet closed after a move).
      await b.heartbeat([
        { room: 'adopt', backend: 'b2', sockets: 1 },
        { room: 'same', backend: 'b2', sockets: 2 },
        { room: 'stale', backend: 'b2', sockets: 1 },
      ]);
      await a.heartbeat([{ room: 'own', backend: 'b2', sockets: 1 }]);
      // A report of another backend leaves an existing placement alone.
      for (const r of Object.keys(first)) expect(await b.get(r), r).toEqual(first[r]);
      await h.advance(h.timing.idleTtlMs + 250); // the placements expired; the reports are still fresh
      for (const r of Object.keys(first)) expect(await a.get(r), r).toBeNull();

      // A would put the room on b3, which would split it from B's sockets on b2: b2 is adopted instead.
      const res = await a.place('adopt', 'b3', 0, NOT_FORCED);
      expect(res).toEqual({ ok: false, reason: 'lost-race', current: { backend: 'b2', epoch: expect.any(Number) } });
      const adopted = (res as Extract<PlaceResult, { reason: 'lost-race' }>).current!;
      expect(adopted.epoch).toBeGreaterThan(top);
      expect(await a.get('adopt')).toEqual(adopted);
      expect(await b.get('adopt')).toEqual(adopted);
      // The adopted placement is the room's like any other: moving it away from B's sockets is busy.
      // (Twice over here: the placement is also younger than gatewayTtlMs. Letting it age while B's
      // report stays fresh would need B's heartbeats, which would end the 'stale' case below.)
      expect(await a.place('adopt', 'b3', adopted.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: adopted });
      // Written by the store, announced like any placement, on both handles.
      for (const rec of [onA, onB]) {
        await waitFor('the adoption event', 3000, () => placementEvents(rec.events, 'adopt').length >= 2);
        expect(placementEvents(rec.events, 'adopt')).toEqual([placementEvent('adopt', first.adopt!), placementEvent('adopt', adopted)]);
      }

      // Only other gateways' reports count: A's own report of b2 does not stop A.
      const own = placed(await a.place('own', 'b3', 0, NOT_FORCED), 'b3', adopted.epoch);
      // A report of the very backend asked for: an ordinary placement.
      const same = placed(await a.place('same', 'b2', 0, NOT_FORCED), 'b2', own.epoch);
      // A stale gateway's report (no heartbeat for gatewayTtlMs) no longer counts.
      await h.advance(h.timing.gatewayTtlMs - h.timing.idleTtlMs);
      expect(await a.get('stale')).toBeNull();
      placed(await a.place('stale', 'b3', 0, NOT_FORCED), 'b3', same.epoch);
    });

    it('heartbeat re-creates a missing placement of a live room where its sockets are, with a new epoch, and announces it', async ({ onTestFinished }) => {
      const { h, a, b, age } = await setup(onTestFinished);
      const onA = record(a);
      const onB = record(b);
      const old = placed(await a.place('expired', 'b1', 0, NOT_FORCED), 'b1', 0);
      const oldElsewhere = placed(await a.place('elsewhere', 'b1', 0, NOT_FORCED), 'b1', old.epoch);
      await h.advance(h.timing.idleTtlMs + 250);
      expect(await b.get('expired')).toBeNull();
      const elsewhere = placed(await a.place('elsewhere', 'b3', 0, NOT_FORCED), 'b3', oldElsewhere.epoch);
      const live = [
        { room: 'expired', backend: 'b2', sockets: 1 }, // expired: re-created where its sockets are
        { room: 'never', backend: 'b1', sockets: 3 }, // never placed (lost): created
      ];
      await b.heartbeat([
        ...live,
        { room: 'elsewhere', backend: 'b2', sockets: 1 }, // placed on another backend: left alone
        { room: 'idle', backend: 'b1', sockets: 0 }, // no sockets: nothing
      ]);
      const expired = stored(await a.get('expired'), 'b2', elsewhere.epoch);
      const never = stored(await a.get('never'), 'b1', elsewhere.epoch);
      expect(never.epoch).not.toBe(expired.epoch);
      expect(await b.get('expired')).toEqual(expired);
      expect(await a.get('elsewhere')).toEqual(elsewhere);
      expect(await a.get('idle')).toBeNull();
      expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 1, b2: 1, b3: 1 });
      for (const rec of [onA, onB]) {
        await waitFor('the re-creation events', 3000, () => placementEvents(rec.events, 'expired').length >= 2 && placementEvents(rec.events, 'never').length >= 1);
        expect(placementEvents(rec.events, 'expired')).toEqual([placementEvent('expired', old), placementEvent('expired', expired)]);
        expect(placementEvents(rec.events, 'never')).toEqual([placementEvent('never', never)]);
        expect(placementEvents(rec.events, 'elsewhere')).toEqual([placementEvent('elsewhere', oldElsewhere), placementEvent('elsewhere', elsewhere)]);
        expect(placementEvents(rec.events, 'idle')).toEqual([]);
      }
      // Later heartbeats only refresh (same epoch, no event), past the idle TTL.
      for (let i = 0; i < 3; i++) {
        await h.advance(300);
        await b.heartbeat(live);
      }
      expect(await a.get('expired')).toEqual(expired);
      expect(await a.get('never')).toEqual(never);
      // A re-created placement is the room's like any other: busy for a move, and the expired
      // placement's epoch does not match it.
      expect(await a.place('expired', 'b3', expired.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: expired });
      expect(await a.place('expired', 'b3', old.epoch, FORCED)).toEqual({ ok: false, reason: 'lost-race', current: expired });
      // Another gateway reporting yet another backend leaves it alone.
      await a.heartbeat([{ room: 'expired', backend: 'b9', sockets: 1 }]);
      expect(await b.get('expired')).toEqual(expired);
      await a.place('marker', 'b1', 0, NOT_FORCED);
      for (const rec of [onA, onB]) {
        await waitFor('the marker event', 3000, () => placementEvents(rec.events, 'marker').length === 1);
        expect(placementEvents(rec.events, 'expired')).toEqual([placementEvent('expired', old), placementEvent('expired', expired)]);
        expect(placementEvents(rec.events, 'never')).toEqual([placementEvent('never', never)]);
      }
    });

    if (kind === 'redis') {
      it('after a Redis restart (empty) the full state is re-sent: changes and unchanged reports answer resync until then', async ({ onTestFinished }) => {
        // Its own redis-server: a restart must not touch the other tests' data.
        const own = await startRedis();
        onTestFinished(() => own.kill());
        const timing: StoreTiming = { idleTtlMs: TIMING.idleTtlMs * REDIS_TIME_SCALE, gatewayTtlMs: TIMING.gatewayTtlMs * REDIS_TIME_SCALE };
        const a = new RedisPlacementStore({ url: own.url, keyPrefix: 'restart:', gatewayId: 'gw-a', timing, commandTimeoutMs: 1000 });
        const b = new RedisPlacementStore({ url: own.url, keyPrefix: 'restart:', gatewayId: 'gw-b', timing, commandTimeoutMs: 1000 });
        onTestFinished(async () => {
          await Promise.all([a.close(), b.close()]);
        });
        await Promise.all([a.connect({ timeoutMs: 5000 }), b.connect({ timeoutMs: 5000 })]);
        // Before a first full report, changes cannot be applied.
        expect(await b.heartbeat(null)).toBe('resync');
        const one = placed(await a.place('live-1', 'b1', 0, NOT_FORCED), 'b1', 0);
        const live = [
          { room: 'live-1', backend: 'b1', sockets: 2 },
          { room: 'live-2', backend: 'b2', sockets: 1 },
        ];
        expect(await b.heartbeat(live)).toBe('ok');
        expect(await b.heartbeat({ rooms: [{ room: 'live-3', backend: 'b1', sockets: 1 }], gone: [] })).toBe('ok');
        expect(await b.heartbeat(null)).toBe('ok');
        expect(await a.get('live-1')).toEqual(one);
        await own.restart();
        await waitFor('both stores reconnected', 10_000, () => a.available && b.available);
        expect(await a.get('live-1')).toBeNull();
        // The store does not trust what Redis has after a reconnect: the whole report, please.
        expect(await b.heartbeat(null)).toBe('resync');
        expect(await b.heartbeat({ rooms: [], gone: ['live-3'] })).toBe('resync');
        expect(await b.heartbeat([...live, { room: 'live-3', backend: 'b1', sockets: 1 }])).toBe('ok');
        stored(await a.get('live-1'), 'b1', 0);
        stored(await a.get('live-2'), 'b2', 0);
        stored(await a.get('live-3'), 'b1', 0);
        expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 2, b2: 1 });
        expect(await b.heartbeat(null)).toBe('ok');
      });

      // Sequential, after the concurrent tests: FLUSHALL wipes every test's keys, not only its own.
      it('after Redis lost its data (FLUSHALL), the next heartbeat re-creates the live rooms where their sockets are', { concurrent: false }, async ({ onTestFinished }) => {
        const { h, a, b, age } = await setup(onTestFinished);
        const onA = record(a);
        const onB = record(b);
        const before: Record<string, PlacementRecord> = {};
        let top = 0;
        for (const [r, backend] of [['live-1', 'b1'], ['live-2', 'b2'], ['idle', 'b1']] as const) {
          top = (before[r] = placed(await a.place(r, backend, 0, NOT_FORCED), backend, top)).epoch;
        }
        const live = [
          { room: 'live-1', backend: 'b1', sockets: 2 },
          { room: 'live-2', backend: 'b2', sockets: 1 },
        ];
        await b.heartbeat(live);
        const admin = new Redis(redis!.url, { maxRetriesPerRequest: 1 });
        try {
          expect(await admin.flushall()).toBe('OK');
        } finally {
          await admin.quit().catch(() => admin.disconnect());
        }
        for (const r of Object.keys(before)) expect(await a.get(r), r).toBeNull();
        expect(await a.roomsPerBackend()).toEqual(new Map());
        // B's report is gone too: nothing is busy until B's next heartbeat. Its liveness stamp went
        // with it, so an unchanged report or a delta is answered 'resync', and B sends it whole.
        expect(await b.heartbeat(null)).toBe('resync');
        expect(await b.heartbeat({ rooms: [], gone: [] })).toBe('resync');
        expect(await b.heartbeat(live)).toBe('ok');
        // (The epoch counter went with the data: these epochs are not compared with the earlier ones.)
        const one = stored(await a.get('live-1'), 'b1', 0);
        const two = stored(await a.get('live-2'), 'b2', 0);
        expect(one.epoch).not.toBe(two.epoch);
        expect(await b.get('live-1')).toEqual(one);
        // A room without live sockets stays lost: it is placed again when next needed.
        expect(await a.get('idle')).toBeNull();
        expect(Object.fromEntries(await a.roomsPerBackend())).toEqual({ b1: 1, b2: 1 });
        // B's report is back: once old enough to be moved (B's next heartbeat keeps its report
        // fresh), the re-created rooms are busy for other gateways again.
        await age();
        await b.heartbeat(live);
        expect(await a.place('live-1', 'b3', one.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: one });
        for (const rec of [onA, onB]) {
          await waitFor('the re-creation events', 3000, () => placementEvents(rec.events, 'live-2').length >= 2);
          expect(placementEvents(rec.events, 'live-1')).toEqual([placementEvent('live-1', before['live-1']!), placementEvent('live-1', one)]);
          expect(placementEvents(rec.events, 'live-2')).toEqual([placementEvent('live-2', before['live-2']!), placementEvent('live-2', two)]);
        }
        // The next heartbeat only refreshes.
        await b.heartbeat(live);
        expect(await a.get('live-1')).toEqual(one);
        expect(await a.get('live-2')).toEqual(two);
      });
    }
  });
}

contract('memory', memoryHarness);

describe('redis-server for the contract', () => {
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await stopAllRedis();
  });
  contract('redis', redisHarness);
});
