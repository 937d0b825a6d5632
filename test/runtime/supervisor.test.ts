// The runtime's rules over time, with a fake clock and no sockets: a real pool, tunnel registry,
// placer, event log and in-memory stores; tunnels are plain objects that record being closed.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryPlacementState, MemoryPlacementStore } from '../../src/placement/memory-store.js';
import type { LiveReport } from '../../src/placement/store.js';
import { EventLog } from '../../src/runtime/events.js';
import { setAdminState } from '../../src/runtime/runtime-view.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { Supervisor, WHOLE_PRESENCE_EVERY_MS } from '../../src/runtime/supervisor.js';
import { TunnelRegistry, type Tunnel } from '../../src/runtime/tunnels.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import type { PresenceAnswer, PresenceDelta, RoomPresence, SharedDataStore } from '../../src/shared-data/store.js';
import { testPlacer } from '../support/runtime-parts.js';

const backend = (id: string): ResolvedBackend => ({ id, url: `http://10.0.0.1:${8000 + Number(id.slice(1))}`, host: '10.0.0.1', port: 8000, weight: 1 });

interface TestTunnel extends Tunnel {
  closed: boolean;
}

/** A shared-data store that records presence reports and can fail like an unreachable Redis. */
class RecordingSharedData extends MemorySharedDataStore {
  failing = false;
  /** Every report as sent: the whole list, a delta, or null (unchanged). */
  readonly sent: (readonly RoomPresence[] | PresenceDelta | null)[] = [];
  /** After each report, this gateway's whole presence as the store has it (a delta or null applied). */
  readonly reports: (readonly RoomPresence[])[] = [];
  private readonly held = new Map<string, RoomPresence[]>();
  /** While set, each publish waits for it (a store slower than the heartbeat). */
  gate: Promise<void> | null = null;
  inFlight = 0;
  maxInFlight = 0;
  override async publishPresence(rooms: readonly RoomPresence[] | PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer> {
    if (this.failing) throw new Error('shared data store unreachable (test)');
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.gate) await this.gate;
    } finally {
      this.inFlight--;
    }
    const answer = await super.publishPresence(rooms, ttlMs);
    if (answer === 'resync') return answer;
    this.sent.push(rooms);
    if (Array.isArray(rooms)) this.held.clear();
    const entries: readonly RoomPresence[] = Array.isArray(rooms) ? rooms : rooms === null ? [] : (rooms as PresenceDelta).rooms;
    if (rooms !== null && !Array.isArray(rooms)) {
      for (const room of (rooms as PresenceDelta).gone) this.held.delete(room);
      for (const r of entries) this.held.delete(r.room);
    }
    for (const r of entries) this.held.set(r.room, [...(this.held.get(r.room) ?? []), r]);
    this.reports.push([...this.held.values()].flat());
    return answer;
  }
}

/** Polls a condition every 5 ms; fails after 5 s. */
async function waitUntil(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms: ${cond.toString()}`);
    await sleep(5);
  }
}

interface Clock {
  now(): number;
  advance(ms: number): number;
}

function fakeClock(): Clock {
  let now = 1_700_000_000_000;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

/** One gateway's runtime; gateways sharing `shared` (a placement store's state and a clock) see each other. */
function rig(onDown: 'keep' | 'close', ids = ['b1', 'b2'], shared?: { state: MemoryPlacementState; clock: Clock; gatewayId: string }, heartbeatMs = 1_000) {
  const clock = shared?.clock ?? fakeClock();
  // Every log line, parsed: which level a rule logs at is part of the rule.
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const metrics = createMetrics(() => []);
  const events = new EventLog();
  const healthCalls: string[] = [];
  const health = {
    reportFailure: (id: string, reason: string) => healthCalls.push(`failure ${id} ${reason}`),
    setTargets: (t: readonly { id: string }[]) => healthCalls.push(`targets ${t.map((x) => x.id).join(',')}`),
  };
  let supervisor: Supervisor | null = null;
  const sup = (): Supervisor => supervisor as Supervisor;
  const pool = new BackendPool([], 10_000, {
    onPassive: (b, state, reason) => sup().passiveChanged(b, state, reason),
    onMembership: (added, removed) => sup().membershipChanged(added, removed),
  });
  const tunnels = new TunnelRegistry(pool, clock.now);
  const store = new MemoryPlacementStore(shared?.gatewayId ?? 'gw-test', { idleTtlMs: 180_000, gatewayTtlMs: 5_000 }, shared?.state, clock.now);
  const sharedData = new RecordingSharedData('gw-test', { presenceTtlMs: 10_000 }, undefined, clock.now);
  const placer = testPlacer({
    store,
    pool,
    tunnels,
    logger,
    retryAfterS: 1,
    onDown,
    cacheTtlMs: 5_000,
    idleTtlMs: 180_000,
    maxIdleRooms: 20_000,
    onPlaced: (room, from, to, forced, live) => sup().placed(room, from, to, forced, live),
    now: clock.now,
  });
  supervisor = new Supervisor({
    pool,
    tunnels,
    placer,
    sharedData: sharedData as SharedDataStore,
    events,
    health,
    metrics,
    logger,
    onDown,
    heartbeatMs,
    presenceTtlMs: 10_000,
    now: clock.now,
  });
  // As the gateway wires it: every gateway hears every administrative change through its store.
  store.subscribe((ev) => sup().storeEvent(ev));
  pool.setBackends(ids.map(backend));
  const open = (room: string, backendId: string): TestTunnel => {
    const t: TestTunnel = {
      room,
      backendId,
      closed: false,
      close() {
        this.closed = true;
      },
    };
    tunnels.add(t);
    return t;
  };
  return { clock, pool, tunnels, placer, store, sharedData, events, healthCalls, supervisor, open, logs };
}

describe('Supervisor: health policy', () => {
  it('keep (default): a backend its checks mark down takes no new rooms, and its live sockets stay', async () => {
    const r = rig('keep');
    const t = r.open('r1', 'b1');
    r.supervisor.healthChanged('b1', 'down', '3 failed checks: timeout');
    expect(t.closed).toBe(false);
    expect(r.pool.get('b1')!.acceptsNew(r.clock.now())).toBe(false);
    expect(r.events.list().map((e) => [e.kind, e.backend, e.detail])).toContainEqual(['down', 'b1', '3 failed checks: timeout']);
    r.supervisor.healthChanged('b1', 'up', '2 passed checks');
    expect(r.pool.get('b1')!.acceptsNew(r.clock.now())).toBe(true);
  });

  it('a backend going down is logged at warn; one that recovers (checks or a connection) at info', () => {
    const r = rig('keep');
    const levelOf = (msg: string): unknown[] => r.logs.filter((l) => l.msg === msg).map((l) => [l.level, l.backend]);
    r.supervisor.healthChanged('b1', 'down', '3 failed checks');
    r.supervisor.healthChanged('b1', 'up', '2 passed checks');
    expect(levelOf('backend down')).toEqual([['warn', 'b1']]);
    expect(levelOf('backend up')).toEqual([['info', 'b1']]);
    const b2 = r.pool.get('b2')!;
    r.supervisor.passiveChanged(b2, 'down', 'ECONNREFUSED');
    r.supervisor.passiveChanged(b2, 'up', 'connected');
    expect(levelOf('backend passively marked down')).toEqual([['warn', 'b2']]);
    expect(levelOf('backend passively marked up')).toEqual([['info', 'b2']]);
  });

  it('close: the sockets are closed while another backend is up; the panic guard keeps them when none is', () => {
    const r = rig('close');
    const a = r.open('r1', 'b1');
    const b = r.open('r2', 'b2');
    r.supervisor.healthChanged('b1', 'down', '3 failed checks');
    expect(a.closed).toBe(true);
    expect(r.tunnels.size).toBe(1);
    // b2 is now the last one up: when it goes down too, its sockets are kept.
    r.supervisor.healthChanged('b2', 'down', '3 failed checks');
    expect(b.closed).toBe(false);
    expect(r.tunnels.size).toBe(1);
  });

  it('a passive mark counts towards the checks and is logged as an event', () => {
    const r = rig('keep');
    r.pool.markDown('b2', r.clock.now(), 'refused');
    expect(r.healthCalls).toContain('failure b2 refused');
    expect(r.events.list().at(-1)).toMatchObject({ kind: 'down', backend: 'b2', detail: 'passive: refused' });
  });

  it('membership changes become events and new health-check targets', () => {
    const r = rig('keep');
    r.pool.setBackends([backend('b2'), backend('b3')]);
    expect(r.events.list().slice(-2).map((e) => [e.kind, e.backend])).toEqual([
      ['joined', 'b3'],
      ['removed', 'b1'],
    ]);
    expect(r.healthCalls.at(-1)).toBe('targets b2,b3');
  });
});

describe('Supervisor: heartbeat', () => {
  it('reports follow changes: the whole list first, then null while nothing changes, then only the changed rooms', async () => {
    const r = rig('keep');
    const placement: LiveReport[] = [];
    const heartbeat = r.store.heartbeat.bind(r.store);
    r.store.heartbeat = (report) => {
      placement.push(report);
      return heartbeat(report);
    };
    const version = r.tunnels.version;
    const a = r.open('r1', 'b1');
    r.open('r2', 'b2');
    expect(r.tunnels.version).toBe(version + 2);
    await r.supervisor.tick();
    expect(placement.at(-1)).toEqual([
      { room: 'r1', backend: 'b1', sockets: 1, since: r.clock.now() },
      { room: 'r2', backend: 'b2', sockets: 1, since: r.clock.now() },
    ]);
    expect(r.sharedData.sent.at(-1)).toEqual(placement.at(-1));
    r.clock.advance(1_000);
    await r.supervisor.tick();
    expect(placement.at(-1)).toBeNull();
    expect(r.sharedData.sent.at(-1)).toBeNull();
    // A socket more in r2, r1 ends, r3 starts: the delta names those rooms only.
    const since = r.clock.now();
    r.open('r2', 'b2');
    r.tunnels.remove(a);
    r.open('r3', 'b1');
    r.clock.advance(1_000);
    await r.supervisor.tick();
    const delta = { rooms: [{ room: 'r2', backend: 'b2', sockets: 2, since: since - 1_000 }, { room: 'r3', backend: 'b1', sockets: 1, since }], gone: ['r1'] };
    expect(placement.at(-1)).toEqual(delta);
    expect(r.sharedData.sent.at(-1)).toEqual(delta);
    expect(r.sharedData.reports.at(-1)!.map((p) => [p.room, p.sockets]).sort()).toEqual([['r2', 2], ['r3', 1]]);
    // Far past idleTtlMs on unchanged reports: the placements of the live rooms stay.
    for (let i = 0; i < 200; i++) {
      r.clock.advance(1_000);
      await r.supervisor.tick();
    }
    expect(placement.at(-1)).toBeNull();
    expect(await r.store.get('r2')).toEqual({ backend: 'b2', epoch: expect.any(Number) });
    expect(await r.store.get('r3')).toEqual({ backend: 'b1', epoch: expect.any(Number) });
    expect(await r.store.get('r1')).toBeNull();
    // A failed report: the next one is whole again.
    r.sharedData.failing = true;
    await r.supervisor.tick();
    r.sharedData.failing = false;
    await r.supervisor.tick();
    expect(r.sharedData.sent.at(-1)).toHaveLength(2);
  });

  it('a report whose changes outgrow the live rooms (no heartbeat for long, under churn) is sent whole', async () => {
    const r = rig('keep');
    r.open('kept', 'b1');
    await r.supervisor.tick();
    for (let i = 0; i < 1_100; i++) r.tunnels.remove(r.open(`brief-${i}`, 'b2'));
    await r.supervisor.tick();
    expect(r.sharedData.sent.at(-1)).toEqual([{ room: 'kept', backend: 'b1', sockets: 1, since: r.clock.now() }]);
    r.tunnels.remove(r.open('one-more', 'b2'));
    await r.supervisor.tick();
    expect(r.sharedData.sent.at(-1)).toEqual({ rooms: [], gone: ['one-more'] });
  });

  it('a store that no longer holds the report (silent past gatewayTtlMs) answers resync, and the same heartbeat sends the whole list', async () => {
    const r = rig('keep');
    const placement: LiveReport[] = [];
    const heartbeat = r.store.heartbeat.bind(r.store);
    r.store.heartbeat = async (report) => {
      const answer = await heartbeat(report);
      placement.push(report, answer as never);
      return answer;
    };
    r.open('r1', 'b1');
    await r.supervisor.tick();
    r.clock.advance(6_000); // gatewayTtlMs is 5 s here: the report stopped counting
    await r.supervisor.tick();
    expect(placement.slice(2)).toEqual([null, 'resync', [{ room: 'r1', backend: 'b1', sockets: 1, since: expect.any(Number) }], 'ok']);
    expect(await r.store.get('r1')).toEqual({ backend: 'b1', epoch: expect.any(Number) });
  });

  it('publishes presence every tick; a failure is logged once, and the next good tick recovers', async () => {
    const r = rig('keep');
    r.open('r1', 'b1');
    r.open('r1', 'b1');
    await r.supervisor.tick();
    expect(r.sharedData.reports.at(-1)).toEqual([{ room: 'r1', backend: 'b1', sockets: 2, since: r.clock.now() }]);
    r.sharedData.failing = true;
    await r.supervisor.tick();
    await r.supervisor.tick();
    expect(r.sharedData.reports).toHaveLength(1);
    r.sharedData.failing = false;
    r.clock.advance(1_000);
    await r.supervisor.tick();
    expect(r.sharedData.reports).toHaveLength(2);
    expect(await r.sharedData.online()).toMatchObject({ total: 2, rooms: 1 });
    // The failure is an error, logged once; the recovery is good news (info), not a warning.
    const lines = r.logs.filter((l) => /presence/.test(String(l.msg))).map((l) => [l.level, l.msg]);
    expect(lines).toEqual([
      ['error', 'presence not published: shared data store unreachable (routing is unaffected)'],
      ['info', 'presence published again: shared data store reachable'],
    ]);
  });

  it('publishes the whole presence list at least every WHOLE_PRESENCE_EVERY_MS, nothing in between when nothing changed', async () => {
    const r = rig('keep');
    r.open('r1', 'b1');
    await r.supervisor.tick();
    expect(Array.isArray(r.sharedData.sent.at(-1))).toBe(true);
    const kinds: string[] = [];
    for (let t = 5_000; t <= WHOLE_PRESENCE_EVERY_MS; t += 5_000) {
      r.clock.advance(5_000);
      await r.supervisor.tick();
      const last = r.sharedData.sent.at(-1);
      kinds.push(last === null ? 'null' : Array.isArray(last) ? 'whole' : 'delta');
    }
    // Unchanged: null each tick, and the whole list again once WHOLE_PRESENCE_EVERY_MS has passed.
    expect(kinds).toEqual([...Array.from({ length: WHOLE_PRESENCE_EVERY_MS / 5_000 - 1 }, () => 'null'), 'whole']);
    expect(r.sharedData.reports.at(-1)).toEqual([{ room: 'r1', backend: 'b1', sockets: 1, since: expect.any(Number) }]);
  });

  it('never runs two heartbeats at once: calls during a slow one fold into one more run after it, with the state of then', async () => {
    const r = rig('keep');
    let open: () => void = () => undefined;
    r.sharedData.gate = new Promise<void>((resolve) => (open = resolve));
    const first = r.supervisor.tick();
    r.open('late', 'b1');
    const folded = [r.supervisor.tick(), r.supervisor.tick(), r.supervisor.tick()];
    await sleep(20);
    expect(r.sharedData.maxInFlight).toBe(1);
    expect(r.sharedData.reports).toHaveLength(0);
    r.sharedData.gate = null;
    open();
    await Promise.all([first, ...folded]);
    // The slow one, then exactly one more, which reports the room opened meanwhile.
    expect(r.sharedData.reports).toHaveLength(2);
    expect(r.sharedData.reports.at(-1)!.map((p) => p.room)).toEqual(['late']);
    expect(r.sharedData.maxInFlight).toBe(1);
  });

  it('a drain deadline closes the remaining sockets when it passes, not before; maintenance at once', async () => {
    const r = rig('keep', ['b1', 'b2', 'b3']);
    const draining = r.open('r1', 'b1');
    const kept = r.open('r2', 'b2');
    // Through the store, as the admin API does: every heartbeat reads the states back from it.
    await setAdminState(r.store, r.pool, 'b1', { state: 'draining', deadline: r.clock.now() + 60_000, since: r.clock.now() });
    await r.supervisor.tick();
    expect(draining.closed).toBe(false);
    r.clock.advance(60_000);
    await r.supervisor.tick();
    expect(draining.closed).toBe(true);
    expect(r.events.list().at(-1)).toMatchObject({ kind: 'drain-deadline', backend: 'b1', detail: 'closed 1 sockets' });
    const maint = r.open('r3', 'b3');
    await setAdminState(r.store, r.pool, 'b3', { state: 'maintenance', deadline: null, since: r.clock.now() });
    await r.supervisor.tick();
    expect(maint.closed).toBe(true);
    expect(kept.closed).toBe(false);
  });

  it('two gateways at a drain deadline: the room moves only once neither reports it live there, never onto a second backend while one still holds it', async () => {
    // The deadline is one instant, but each gateway reaches it in its own heartbeat. A closes its
    // socket of the room first and its client comes back at once; B still holds its own socket of
    // the same room on b1 until its next tick. Placing the room elsewhere now would put it on two
    // backends for up to a heartbeat.
    const clock = fakeClock();
    const state = new MemoryPlacementState();
    const a = rig('keep', ['b1', 'b2', 'b3'], { state, clock, gatewayId: 'gw-a' });
    const b = rig('keep', ['b1', 'b2', 'b3'], { state, clock, gatewayId: 'gw-b' });
    const room = Array.from({ length: 50 }, (_, i) => `split-${i}`).find((r) => a.pool.ring.first(r) === 'b1')!;
    expect(await a.placer.resolve(room, clock.now())).toMatchObject({ route: 'b1' });
    const viaA = a.open(room, 'b1');
    const viaB = b.open(room, 'b1');
    // Both gateways beat every second; the placement grows older than gatewayTtlMs (no longer young).
    for (let i = 0; i < 6; i++) {
      clock.advance(1_000);
      await a.supervisor.tick();
      await b.supervisor.tick();
    }

    const deadline = clock.now() + 2_000;
    await setAdminState(a.store, a.pool, 'b1', { state: 'draining', deadline, since: clock.now() });
    expect(b.pool.get('b1')!.admin?.state).toBe('draining');
    clock.advance(1_000);
    await a.supervisor.tick();
    await b.supervisor.tick();
    expect([viaA.closed, viaB.closed]).toEqual([false, false]);
    clock.advance(1_000);

    // Past the deadline, before A's tick: A's own socket is still open, so A does not move the room.
    expect(await a.placer.resolve(room, clock.now())).toMatchObject({ reject: 503, reason: 'room-busy' });
    await a.supervisor.tick();
    expect(viaA.closed).toBe(true);
    expect(viaB.closed).toBe(false);
    // A's client reconnects through A: B still reports the room live on b1, so it waits.
    expect(await a.placer.resolve(room, clock.now())).toMatchObject({ reject: 503, reason: 'room-busy', retryAfterS: 1 });
    expect(await b.placer.resolve(room, clock.now())).toMatchObject({ reject: 503, reason: 'room-busy' });
    expect((await a.store.get(room))?.backend).toBe('b1');

    // B's tick closes its socket and reports the room gone in the same heartbeat: the move goes through, forced.
    clock.advance(400);
    await b.supervisor.tick();
    expect(viaB.closed).toBe(true);
    const moved = await a.placer.resolve(room, clock.now());
    expect(moved).toMatchObject({ place: { from: 'b1', force: true, overrideLive: false } });
    expect(['b2', 'b3']).toContain('route' in moved ? moved.route : null);
    expect((await a.store.get(room))?.backend).toBe('route' in moved ? moved.route : null);
    expect(a.events.list().filter((e) => e.kind === 'drain-deadline').map((e) => e.detail)).toEqual(['closed 1 sockets']);
    expect(b.events.list().filter((e) => e.kind === 'drain-deadline').map((e) => e.detail)).toEqual(['closed 1 sockets']);
  });

  it('once started, maintenance closes the sockets at once and a drain deadline at the deadline, without waiting for the next heartbeat', async () => {
    // The regular heartbeat is a minute away: every report below comes from the store event or the deadline timer.
    const r = rig('keep', ['b1', 'b2', 'b3'], undefined, 60_000);
    r.supervisor.start(); // one heartbeat now
    try {
      await waitUntil(() => r.sharedData.reports.length === 1);
      const maint = r.open('r1', 'b1');
      const draining = r.open('r2', 'b2');
      const kept = r.open('r3', 'b3');
      await setAdminState(r.store, r.pool, 'b1', { state: 'maintenance', deadline: null, since: r.clock.now() });
      // The store event ran a heartbeat: closed first, then reported without the room.
      expect(maint.closed).toBe(true);
      await waitUntil(() => r.sharedData.reports.length === 2);
      expect(r.sharedData.reports.at(-1)!.map((p) => p.room).sort()).toEqual(['r2', 'r3']);

      // A deadline 60 ms ahead (fake clock): nothing is closed before it; a timer at the deadline closes it.
      await setAdminState(r.store, r.pool, 'b2', { state: 'draining', deadline: r.clock.now() + 60, since: r.clock.now() });
      expect(draining.closed).toBe(false);
      r.clock.advance(60);
      await waitUntil(() => draining.closed);
      await waitUntil(() => r.sharedData.reports.length === 3);
      expect(r.sharedData.reports.at(-1)!.map((p) => p.room)).toEqual(['r3']);
      expect(kept.closed).toBe(false);

      // Undrained before its deadline: the timer is dropped (no heartbeat runs at the old deadline).
      await setAdminState(r.store, r.pool, 'b3', { state: 'draining', deadline: r.clock.now() + 50, since: r.clock.now() });
      await setAdminState(r.store, r.pool, 'b3', null);
      r.clock.advance(50);
      await sleep(200);
      expect(kept.closed).toBe(false);
      expect(r.sharedData.reports).toHaveLength(3);
    } finally {
      r.supervisor.stop();
    }
  });

  it('a backend going down (a refused connection, or its checks) runs a heartbeat at once: its ended sockets leave the report without waiting for the next one', async () => {
    // The regular heartbeat is a minute away: every report after the first comes from the marks.
    const r = rig('keep', ['b1', 'b2', 'b3'], undefined, 60_000);
    r.supervisor.start(); // one heartbeat now
    try {
      // Settled: no heartbeat runs now (one still running would fold a new call into a later run).
      await r.supervisor.tick();
      await waitUntil(() => r.sharedData.reports.length === 2);
      const dead = r.open('r1', 'b1');
      r.open('r2', 'b2');
      const stalled = r.open('r3', 'b3');
      // The dead backend's socket ended with it; its first refused connection marks it down.
      r.tunnels.remove(dead);
      r.pool.markDown('b1', r.clock.now(), 'ECONNREFUSED');
      await waitUntil(() => r.sharedData.reports.length === 3);
      expect(r.sharedData.reports.at(-1)!.map((p) => p.room).sort()).toEqual(['r2', 'r3']);
      // Down by its checks with a socket still open (onDown keep): reported at once, the open socket still live.
      await r.supervisor.tick();
      await waitUntil(() => r.sharedData.reports.length === 4);
      r.supervisor.healthChanged('b3', 'down', '3 failed checks');
      await waitUntil(() => r.sharedData.reports.length === 5);
      // Nothing changed since the last report (null): r2 and r3 are still live in the store.
      expect(r.sharedData.sent.at(-1)).toBeNull();
      expect(r.sharedData.reports.at(-1)!.map((p) => p.room).sort()).toEqual(['r2', 'r3']);
      expect((await r.sharedData.online()).rooms).toBe(2);
      expect(stalled.closed).toBe(false);
      // Back up: no extra heartbeat.
      r.supervisor.healthChanged('b3', 'up', 'checks pass');
      await sleep(100);
      expect(r.sharedData.reports).toHaveLength(5);
    } finally {
      r.supervisor.stop();
    }
  });

  it('onDown close: the heartbeat a down verdict runs already leaves out the sockets it closed', async () => {
    const r = rig('close', ['b1', 'b2'], undefined, 60_000);
    r.supervisor.start();
    try {
      await r.supervisor.tick();
      await waitUntil(() => r.sharedData.reports.length === 2);
      const hung = r.open('r1', 'b1');
      r.open('r2', 'b2');
      r.supervisor.healthChanged('b1', 'down', '3 failed checks');
      expect(hung.closed).toBe(true);
      await waitUntil(() => r.sharedData.reports.length === 3);
      expect(r.sharedData.reports.at(-1)!.map((p) => p.room)).toEqual(['r2']);
    } finally {
      r.supervisor.stop();
    }
  });

  it('a removed backend keeps its sockets and is forgotten once they are gone', async () => {
    const r = rig('keep');
    const t = r.open('r1', 'b1');
    r.pool.setBackends([backend('b2')]);
    await r.supervisor.tick();
    expect(t.closed).toBe(false);
    expect(r.pool.get('b1')).toBeDefined();
    r.tunnels.remove(t);
    await r.supervisor.tick();
    expect(r.pool.get('b1')).toBeUndefined();
  });

  it('room counts placed between two heartbeats survive the next heartbeat', async () => {
    const r = rig('keep');
    const d = await r.placer.resolve('fresh', r.clock.now());
    expect('route' in d).toBe(true);
    const on = (d as { route: string }).route;
    await r.supervisor.tick();
    expect(r.pool.get(on)!.rooms).toBe(1);
  });
});
