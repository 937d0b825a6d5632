// The Sentinel and Cluster connection forms: both Redis stores (placement, lobby) work through a
// Redis Sentinel and through a 3-master Redis Cluster (scripts route by the {rg} slot, pub/sub
// events reach another gateway), and `roomgate check-config` accepts the forms and rejects mixed
// or invalid ones by name. Real redis-server processes on free ports, all killed in afterAll.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisSharedDataStore } from '../../src/shared-data/redis-store.js';
import type { SharedDataEvent } from '../../src/shared-data/store.js';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import type { StoreEvent } from '../../src/placement/store.js';
import type { RedisTarget } from '../../src/redis/link.js';
import { runCli, waitFor } from '../support/processes.js';
import { startCluster, startRedis, startSentinel, stopAllRedis } from '../support/redis.js';

const TIMING = { idleTtlMs: 5000, gatewayTtlMs: 5000 };
const COMMAND_TIMEOUT_MS = 500;
const closers: (() => Promise<void>)[] = [];

afterAll(async () => {
  await Promise.all(closers.map((c) => c().catch(() => undefined)));
  await stopAllRedis();
});

function placement(target: RedisTarget, gatewayId: string): RedisPlacementStore {
  const s = new RedisPlacementStore({ ...target, keyPrefix: 'rf:', gatewayId, timing: TIMING, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  closers.push(() => s.close());
  return s;
}

function lobby(target: RedisTarget, gatewayId: string): RedisSharedDataStore {
  const s = new RedisSharedDataStore({ ...target, keyPrefix: 'rf:', gatewayId, presenceTtlMs: 5000, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  closers.push(() => s.close());
  return s;
}

/** Placement and lobby through `target`, with a second gateway watching the events. */
async function exerciseStores(target: RedisTarget): Promise<void> {
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

describe('Redis connection forms', () => {
  let sentinel: RedisTarget;
  let cluster: RedisTarget;

  beforeAll(async () => {
    const [master, clusterServers] = await Promise.all([startRedis(), startCluster()]);
    const s = await startSentinel(master.port);
    sentinel = { sentinels: [s.address], sentinelName: s.name };
    cluster = { clusterNodes: clusterServers.nodes };
  }, 25_000);

  it('both stores work through Redis Sentinel', async () => {
    await exerciseStores(sentinel);
  }, 15_000);

  it('both stores work through Redis Cluster (scripts in the {rg} slot, pub/sub across nodes)', async () => {
    await exerciseStores(cluster);
  }, 15_000);

  it('check-config accepts the Sentinel and Cluster forms and never prints the password', async () => {
    const s = await runCli(['check-config'], { REDIS_SENTINELS: '10.0.0.1:26379, 10.0.0.2:26379', REDIS_SENTINEL_NAME: 'prod', REDIS_URL: 'rediss://:hunter2secret@ignored' });
    expect(s.stderr).toBe('');
    expect(s.code).toBe(0);
    expect(s.stdout).toContain('"10.0.0.2:26379"');
    expect(s.stdout).toContain('"sentinelName": "prod"');
    expect(s.stdout).not.toContain('hunter2secret');
    const c = await runCli(['check-config'], { REDIS_CLUSTER_NODES: '10.0.0.1:6379,10.0.0.2:6379' });
    expect(c.code).toBe(0);
    expect(c.stdout).toContain('"10.0.0.1:6379"');
  });

  it('check-config rejects mixed and invalid forms, naming the field and the fix', async () => {
    const mixed = await runCli(['check-config'], { REDIS_SENTINELS: '10.0.0.1:26379', REDIS_CLUSTER_NODES: '10.0.0.1:6379' });
    expect(mixed.code).not.toBe(0);
    expect(mixed.stderr).toMatch(/redis\.clusterNodes: got \["10\.0\.0\.1:6379"\] while redis\.sentinels is set too; expected one form only, Sentinel or Cluster/);
    const bad = await runCli(['check-config'], { REDIS_SENTINELS: 'sentinel-without-port', REDIS_CLUSTER_NODES: '' });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('redis.sentinels.0: got "sentinel-without-port" (from REDIS_SENTINELS); expected a "host:port" with a port from 1 to 65535');
    const db = await runCli(['check-config'], { REDIS_CLUSTER_NODES: '10.0.0.1:6379', REDIS_URL: 'redis://:hunter2secret@x/3' });
    expect(db.code).not.toBe(0);
    expect(db.stderr).toContain('redis.url: got "redis://:<redacted>@x/3" with redis.clusterNodes set; expected no db: Redis Cluster has only db 0, remove "/3" from the URL');
    expect(db.stderr + db.stdout).not.toContain('hunter2secret');
  });
});
