// Both Redis stores (placement, lobby) exercised through one Redis target, as two gateways use
// them: compare-and-set, heartbeats, backend states and their pub/sub events; presence, online
// counts and leaderboards. For the connection-form tests (plain, Sentinel, Cluster, TLS). Every
// store opened here is closed by closeAllStores().
import { expect } from 'vitest';
import { RedisSharedDataStore } from '../../src/shared-data/redis-store.js';
import type { SharedDataEvent } from '../../src/shared-data/store.js';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import type { StoreEvent } from '../../src/placement/store.js';
import type { RedisTarget } from '../../src/redis/link.js';
import { waitFor } from './processes.js';

const TIMING = { idleTtlMs: 5000, gatewayTtlMs: 5000 };
const COMMAND_TIMEOUT_MS = 500;
const closers: (() => Promise<void>)[] = [];

/** Closes every store opened here (call from afterAll / afterEach). */
export async function closeAllStores(): Promise<void> {
  await Promise.all(closers.splice(0).map((c) => c().catch(() => undefined)));
}

export function placement(target: RedisTarget, gatewayId: string): RedisPlacementStore {
  const s = new RedisPlacementStore({ ...target, keyPrefix: 'rf:', gatewayId, timing: TIMING, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  closers.push(() => s.close());
  return s;
}

export function lobby(target: RedisTarget, gatewayId: string): RedisSharedDataStore {
  const s = new RedisSharedDataStore({ ...target, keyPrefix: 'rf:', gatewayId, presenceTtlMs: 5000, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  closers.push(() => s.close());
  return s;
}

/** Placement and lobby through `target`, with a second gateway watching the events. */
export async function exerciseStores(target: RedisTarget): Promise<void> {
  const p1 = placement(target, 'gw-1');
  const p2 = placement(target, 'gw-2');
  await Promise.all([p1.connect({ timeoutMs: 8000 }), p2.connect({ timeoutMs: 8000 })]);
  expect(p1.available && p2.available).toBe(true);
  const seen: StoreEvent[] = [];
  p2.subscribe((ev) => seen.push(ev));

  const placed = await p1.place('room-a', 'b1', 0, { force: false });
  expect(placed.ok).toBe(true);
  expect(await p2.get('room-a')).toMatchObject({ backend: 'b1' });
  const lost = await p2.place('room-a', 'b2', 0, { force: false });
  expect(lost.ok).toBe(false);
  await p1.heartbeat([{ room: 'room-a', backend: 'b1', sockets: 3 }]);
  expect((await p2.roomsPerBackend()).get('b1')).toBe(1);
  await p1.setBackendState('b2', { state: 'draining', deadline: null, since: Date.now() });
  expect((await p2.backendStates()).get('b2')).toMatchObject({ state: 'draining' });
  await waitFor('placement event at gw-2', 3000, () => seen.some((e) => e.type === 'placement' && e.room === 'room-a'));
  await waitFor('backend-state event at gw-2', 3000, () => seen.some((e) => e.type === 'backend-state' && e.id === 'b2'));

  const l1 = lobby(target, 'gw-1');
  const l2 = lobby(target, 'gw-2');
  await Promise.all([l1.connect({ timeoutMs: 8000 }), l2.connect({ timeoutMs: 8000 })]);
  const lobbyEvents: SharedDataEvent[] = [];
  l2.subscribe((ev) => lobbyEvents.push(ev));
  await l1.publishPresence(
    [
      { room: 'room-a', backend: 'b1', sockets: 3, since: Date.now() },
      { room: 'room-b', backend: 'b2', sockets: 2, since: Date.now() },
    ],
    5000,
  );
  await waitFor('online total 5 at gw-2', 3000, async () => (await l2.online()).total === 5);
  expect(await l2.online()).toMatchObject({ total: 5, rooms: 2, byBackend: { b1: 3, b2: 2 } });
  await waitFor('lobby event at gw-2', 3000, () => lobbyEvents.some((e) => e.type === 'lobby'));
  expect(await l1.score('board', 'alice', 10, 'set')).toBe(10);
  expect(await l2.score('board', 'bob', 7, 'incr')).toBe(7);
  expect(await l1.score('board', 'bob', 20, 'max')).toBe(20);
  expect(await l2.top('board', 0, 10)).toEqual([
    { member: 'bob', score: 20, rank: 1 },
    { member: 'alice', score: 10, rank: 2 },
  ]);

  await Promise.all([p1.close(), p2.close(), l1.close(), l2.close()]);
}

