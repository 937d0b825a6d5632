// The stores of `--workers N` without Redis: StoreHost in the "primary" serving one memory state to
// several "workers" through IpcPlacementStore / IpcSharedDataStore. The channels here are in-process
// (JSON round trip, asynchronous delivery, as over real IPC; the real channel is tested in
// ipc-rpc.test.ts and test/integration/workers.test.ts). Each worker is its own gateway: the busy
// guard, heartbeats and presence see the others as they would see other gateways.
import { afterEach, describe, expect, it } from 'vitest';
import { IpcPlacementStore } from '../../src/cluster/ipc-placement-store.js';
import { RpcClosedError, RpcPeer, type IpcChannel } from '../../src/cluster/ipc-rpc.js';
import { IpcSharedDataStore } from '../../src/cluster/ipc-shared-data-store.js';
import { StoreHost } from '../../src/cluster/store-host.js';
import type { SharedDataEvent } from '../../src/shared-data/store.js';
import type { StoreEvent } from '../../src/placement/store.js';
import { waitFor } from '../support/processes.js';

/** Two ends of an in-process channel; close() is the other process going away. */
function channelPair(): { a: IpcChannel; b: IpcChannel; close: () => void } {
  type Side = { message: Set<(m: unknown) => void>; close: Set<() => void> };
  const sides: [Side, Side] = [
    { message: new Set(), close: new Set() },
    { message: new Set(), close: new Set() },
  ];
  let connected = true;
  const end = (me: Side, other: Side): IpcChannel => ({
    get connected() {
      return connected;
    },
    send(message, done) {
      if (!connected) return done(new Error('channel closed'));
      let copy: unknown;
      try {
        copy = JSON.parse(JSON.stringify(message));
      } catch (err) {
        return done(err as Error);
      }
      setImmediate(() => {
        if (connected) for (const l of other.message) l(copy);
      });
      done(null);
    },
    onMessage(l) {
      me.message.add(l);
      return () => me.message.delete(l);
    },
    onClose(l) {
      me.close.add(l);
      return () => me.close.delete(l);
    },
  });
  return {
    a: end(sides[0], sides[1]),
    b: end(sides[1], sides[0]),
    close() {
      connected = false;
      for (const s of sides) for (const l of [...s.close]) l();
    },
  };
}

interface FakeWorker {
  readonly placement: IpcPlacementStore;
  readonly sharedData: IpcSharedDataStore;
  readonly placementEvents: StoreEvent[];
  readonly sharedEvents: SharedDataEvent[];
  /** The primary's detach (what it does when the worker exits). */
  readonly detach: () => Promise<void>;
  /** The worker process dies: its channel closes. */
  readonly die: () => Promise<void>;
}

const TIMING = { idleTtlMs: 60_000, gatewayTtlMs: 5_000, presenceTtlMs: 5_000 };
const cleanups: (() => void)[] = [];

function worker(host: StoreHost, name: string): FakeWorker {
  const { a, b, close } = channelPair();
  const primarySide = new RpcPeer(a, { timeoutMs: 1_000, peerName: name });
  const workerSide = new RpcPeer(b, { timeoutMs: 1_000, peerName: 'the primary process' });
  const detach = host.attach(primarySide, name);
  const placement = new IpcPlacementStore(workerSide);
  const shared = new IpcSharedDataStore(workerSide);
  const placementEvents: StoreEvent[] = [];
  const sharedEvents: SharedDataEvent[] = [];
  placement.subscribe((ev) => placementEvents.push(ev));
  shared.subscribe((ev) => sharedEvents.push(ev));
  cleanups.push(close);
  return {
    placement,
    sharedData: shared,
    placementEvents,
    sharedEvents,
    detach,
    die: async () => {
      close();
      await detach();
    },
  };
}

afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const NOT_FORCED = { force: false } as const;

describe('placements shared through the primary', () => {
  it('one placement for all workers: compare-and-set, lost races, events to every worker', async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    const placed = await w1.placement.place('r1', 'b1', 0, NOT_FORCED);
    expect(placed.ok).toBe(true);
    const epoch = placed.ok ? placed.placement.epoch : -1;
    expect(await w2.placement.get('r1')).toEqual({ backend: 'b1', epoch });
    // w2 read no placement before w1 wrote: its write loses and learns the winner.
    expect(await w2.placement.place('r1', 'b2', 0, NOT_FORCED)).toEqual({ ok: false, reason: 'lost-race', current: { backend: 'b1', epoch } });
    const ev = { type: 'placement', room: 'r1', placement: { backend: 'b1', epoch } };
    await waitFor('the event at both workers', 2_000, () => w1.placementEvents.length > 0 && w2.placementEvents.length > 0);
    expect(w1.placementEvents).toEqual([ev]);
    expect(w2.placementEvents).toEqual([ev]);
    expect(await w1.placement.roomsPerBackend()).toEqual(new Map([['b1', 1]]));
  });

  it("another worker's live sockets make a move busy, as another gateway's would; its death frees the room", async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    const placed = await w1.placement.place('r1', 'b1', 0, NOT_FORCED);
    const epoch = placed.ok ? placed.placement.epoch : -1;
    // Before a whole report, a change or an unchanged report is answered 'resync' over IPC.
    expect(await w2.placement.heartbeat(null)).toBe('resync');
    expect(await w2.placement.heartbeat([{ room: 'r0', backend: 'b1', sockets: 1 }])).toBe('ok');
    // A change (r0 ended, r1 live) and then nothing (null) go over IPC as they are.
    expect(await w2.placement.heartbeat({ rooms: [{ room: 'r1', backend: 'b1', sockets: 2 }], gone: ['r0'] })).toBe('ok');
    expect(await w2.placement.heartbeat(null)).toBe('ok');
    await w1.placement.heartbeat([]);
    // w1 sees b1 down and wants to move the room: w2 still holds sockets there.
    expect(await w1.placement.place('r1', 'b2', epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: { backend: 'b1', epoch } });
    expect(await w1.placement.roomsPerBackend()).toEqual(new Map([['b1', 2]]));
    // Forced (the backend is gone for everyone) it moves.
    const forced = await w1.placement.place('r1', 'b2', epoch, { force: true });
    expect(forced.ok && forced.placement.backend).toBe('b2');
  });

  it("a handoff's reserved epoch: taken by one worker, written by its place(), above every epoch before", async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    const placed = await w1.placement.place('r1', 'b1', 0, NOT_FORCED);
    const epoch = placed.ok ? placed.placement.epoch : -1;
    const reserved = await w2.placement.reserveEpoch();
    expect(reserved).toBeGreaterThan(epoch);
    expect(await w2.placement.place('r1', 'b2', epoch, { force: true, epoch: reserved })).toEqual({ ok: true, placement: { backend: 'b2', epoch: reserved } });
    expect(await w1.placement.get('r1')).toEqual({ backend: 'b2', epoch: reserved });
  });

  it('drain states are shared (Maps survive the trip) and announced to every worker', async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    const state = { state: 'draining' as const, deadline: 1_900_000_000_000, since: 1_800_000_000_000 };
    await w1.placement.setBackendState('b2', state);
    expect(await w2.placement.backendStates()).toEqual(new Map([['b2', state]]));
    await waitFor('the event at w2', 2_000, () => w2.placementEvents.length > 0);
    expect(w2.placementEvents).toEqual([{ type: 'backend-state', id: 'b2', state }]);
  });

  it('once the primary is gone: unavailable, an event, and every call fails at once', async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    expect(w1.placement.available).toBe(true);
    await w1.die();
    expect(w1.placement.available).toBe(false);
    expect(w1.sharedData.available).toBe(false);
    expect(w1.placementEvents).toEqual([{ type: 'available', available: false }]);
    expect(w1.sharedEvents).toEqual([{ type: 'available', available: false }]);
    await expect(w1.placement.get('r1')).rejects.toBeInstanceOf(RpcClosedError);
    await expect(w1.sharedData.online()).rejects.toThrow('the primary process is gone');
  });
});

describe('presence, lobby and leaderboards shared through the primary', () => {
  it('presence of the workers adds up; a worker that dies takes its share with it at once', async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    const since = 1_700_000_000_000;
    await w1.sharedData.publishPresence([{ room: 'r1', backend: 'b1', sockets: 3, since }], 5_000);
    await w2.sharedData.publishPresence(
      [
        { room: 'r1', backend: 'b1', sockets: 2, since: since - 1_000 },
        { room: 'r2', backend: 'b2', sockets: 1, since },
      ],
      5_000,
    );
    expect(await w1.sharedData.online()).toEqual({ total: 6, rooms: 2, byBackend: { b1: 5, b2: 1 } });
    // Unchanged (null) and a change (a delta) go over IPC as they are.
    expect(await w1.sharedData.publishPresence(null, 5_000)).toBeUndefined();
    await w1.sharedData.publishPresence({ rooms: [{ room: 'r3', backend: 'b2', sockets: 1, since }], gone: [] }, 5_000);
    expect(await w1.sharedData.online()).toEqual({ total: 7, rooms: 3, byBackend: { b1: 5, b2: 2 } });
    await w1.sharedData.publishPresence({ rooms: [], gone: ['r3'] }, 5_000);
    expect(await w1.sharedData.online()).toEqual({ total: 6, rooms: 2, byBackend: { b1: 5, b2: 1 } });
    expect(await w2.sharedData.room('r1')).toEqual({ room: 'r1', backend: 'b1', sockets: 5, since: new Date(since - 1_000).toISOString(), meta: null, pinned: false, listed: false });
    const page = await w1.sharedData.lobby({ sort: 'sockets', order: 'desc', offset: 0, limit: 10 });
    expect(page.rooms.map((r) => [r.room, r.sockets])).toEqual([
      ['r1', 5],
      ['r2', 1],
    ]);
    // Lobby events of w2's report reach w1 (its lobby stream pushes them).
    await waitFor('w1 hears of r2', 2_000, () => w1.sharedEvents.some((e) => e.type === 'lobby' && e.rooms.includes('r2')));
    const before = w1.sharedEvents.length;
    await w2.die();
    expect(await w1.sharedData.online()).toEqual({ total: 3, rooms: 1, byBackend: { b1: 3 } });
    await waitFor('w1 hears that r2 emptied', 2_000, () => w1.sharedEvents.slice(before).some((e) => e.type === 'lobby' && e.rooms.includes('r2')));
  });

  it('metadata and leaderboards are one for all workers', async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    await w1.sharedData.setMeta('r9', { title: 'Blue', capacity: 4 }, true);
    expect((await w2.sharedData.room('r9'))?.meta).toEqual({ title: 'Blue', capacity: 4 });
    // The listed flag crosses the IPC both ways (default true; false kept).
    expect(await w2.sharedData.room('r9')).toMatchObject({ listed: true });
    await w1.sharedData.setMeta('r8', { title: 'Quiet' }, true, false);
    expect(await w2.sharedData.room('r8')).toMatchObject({ meta: { title: 'Quiet' }, listed: false });
    expect(await w1.sharedData.score('weekly', 'ana', 5, 'incr')).toBe(5);
    expect(await w2.sharedData.score('weekly', 'ana', 2, 'incr')).toBe(7);
    expect(await w2.sharedData.score('weekly', 'bo', 9, 'max')).toBe(9);
    expect(await w1.sharedData.top('weekly', 0, 10)).toEqual([
      { member: 'bo', score: 9, rank: 1 },
      { member: 'ana', score: 7, rank: 2 },
    ]);
    expect(await w2.sharedData.member('weekly', 'ana')).toEqual({ member: 'ana', score: 7, rank: 2 });
    expect(await w1.sharedData.around('weekly', 'bo', 1)).toHaveLength(2);
    expect(await w2.sharedData.boardExists('weekly')).toBe(true);
    expect(await w2.sharedData.boardSize('weekly')).toBe(2);
    expect(await w2.sharedData.deleteMeta('r9')).toBe(true);
    expect(await w1.sharedData.room('r9')).toBeNull();
    // The primary's validation errors come back as errors (the API answers 503 for any store error).
    await expect(w1.sharedData.score('weekly', 'ana', Number.NaN, 'set')).rejects.toThrow(/score must be a finite number/);
  });
});

describe("a version-2 handoff's messages between workers (src/runtime/handoff-ask.ts, handoff-remote.ts)", () => {
  it('reach every worker, the sender included; the other live workers are counted; a malformed one is dropped by the primary', async () => {
    const host = new StoreHost(TIMING);
    const w1 = worker(host, 'w1');
    const w2 = worker(host, 'w2');
    // Every worker publishes presence each heartbeat, rooms or none: that is what makes it live.
    await w1.sharedData.publishPresence([], 5_000);
    await w2.sharedData.publishPresence([{ room: 'r1', backend: 'b1', sockets: 1, since: 1 }], 5_000);
    expect(await w1.sharedData.otherGateways()).toEqual(['w2']);
    expect(await w2.sharedData.otherGateways()).toEqual(['w1']);
    const hold = { kind: 'hold', id: 'h1', room: 'r1', from: 'b1', to: 'b2', gateway: 'gw-1' } as const;
    // A worker's bytes are checked by the primary as Redis' subscribers check theirs.
    await w2.sharedData.publishHandoff({ kind: 'held', id: 'h1', gateway: '', sockets: -1 } as never);
    await w1.sharedData.publishHandoff(hold);
    const handoff = (w: FakeWorker): SharedDataEvent[] => w.sharedEvents.filter((e) => e.type === 'handoff');
    await waitFor('the hold at both workers', 2_000, () => handoff(w1).length > 0 && handoff(w2).length > 0);
    expect(handoff(w1)).toEqual([{ type: 'handoff', signal: hold }]);
    expect(handoff(w2)).toEqual([{ type: 'handoff', signal: hold }]);
  });
});
