// A Placer over a real Redis placement store, recovering from a failed heartbeat: the report it
// leaves in Redis must be the live rooms as they are after the recovery, never an older one. And
// a placement lost under a live, unchanged room comes back with the periodic whole report.
// Real redis-server (test/support/redis.ts), real store, registry and pool; no mocks.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { createLogger } from '../../src/observability/logger.js';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { TunnelRegistry, type Tunnel } from '../../src/runtime/tunnels.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';
import { testPlacer } from '../support/runtime-parts.js';

const backend = (id: string): ResolvedBackend => ({ id, url: `http://10.0.0.1:${8000 + Number(id.slice(1))}`, host: '10.0.0.1', port: 8000, weight: 1 });
const TIMING = { idleTtlMs: 30_000, gatewayTtlMs: 30_000 };
const PREFIX = 'rec:';
const BASE = `${PREFIX}{rg}:`;

let server: RedisServer;
const closers: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  server = await startRedis();
});
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});
afterAll(async () => {
  await stopAllRedis();
});

describe('Placer over Redis: a heartbeat that recovers from a failed one', () => {
  it('leaves the live rooms as they are after the recovery, not the report it had taken before it', async () => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    closers.push(() => void admin.disconnect());
    const store = new RedisPlacementStore({ url: server.url, keyPrefix: PREFIX, gatewayId: 'gw-1', timing: TIMING, commandTimeoutMs: 300 });
    closers.push(() => store.close());
    await store.connect();
    const pool = new BackendPool([backend('b1'), backend('b2')], 10_000);
    const tunnels = new TunnelRegistry(pool);
    const logs: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void logs.push(line) });
    const placer = testPlacer({ store, pool, tunnels, logger, idleTtlMs: TIMING.idleTtlMs });
    closers.push(() => placer.close());

    await placer.heartbeat(Date.now()); // the first report: whole (no room yet)
    const d = await placer.resolve('r', Date.now());
    expect(d).toHaveProperty('route');
    const on = (d as { route: string }).route;
    expect(await admin.pttl(`${BASE}p:r`)).toBeGreaterThan(0); // placed, nobody reports it live yet

    // A heartbeat that times out (Redis holds writes longer than the command timeout): degraded.
    await admin.call('CLIENT', 'PAUSE', '3000', 'WRITE');
    await placer.heartbeat(Date.now());
    expect(placer.isDegraded).toBe(true);
    await admin.call('CLIENT', 'UNPAUSE');
    expect(store.available).toBe(true);

    // The next heartbeat recovers (a round trip for the drain states first, then the whole list).
    // The room's first socket opens meanwhile: after the heartbeat started, before its recovery
    // took the list.
    const beat = placer.heartbeat(Date.now());
    const t: Tunnel = { room: 'r', backendId: on, close: () => undefined };
    tunnels.add(t);
    await beat;
    expect(placer.isDegraded).toBe(false);

    // Redis must hold the room live through this gateway, its placement kept (no TTL).
    expect(await admin.hget(`${BASE}gw:gw-1`, 'r')).toBe(on);
    expect(await admin.pttl(`${BASE}p:r`)).toBe(-1);
    // And an unchanged heartbeat after it leaves it so.
    await placer.heartbeat(Date.now());
    expect(await admin.hget(`${BASE}gw:gw-1`, 'r')).toBe(on);
    expect(await admin.pttl(`${BASE}p:r`)).toBe(-1);
    tunnels.remove(t);
  });

  it('puts back, within idleTtlMs / 2, a placement lost while its room stayed live and unchanged', async () => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    closers.push(() => void admin.disconnect());
    const store = new RedisPlacementStore({ url: server.url, keyPrefix: `${PREFIX}lost:`, gatewayId: 'gw-2', timing: TIMING, commandTimeoutMs: 1_000 });
    closers.push(() => store.close());
    await store.connect();
    const pool = new BackendPool([backend('b1'), backend('b2')], 10_000);
    const tunnels = new TunnelRegistry(pool);
    const placer = testPlacer({ store, pool, tunnels, logger: createLogger('error', { write: () => undefined }), idleTtlMs: TIMING.idleTtlMs });
    closers.push(() => placer.close());
    const key = `${PREFIX}lost:{rg}:p:q`;

    const t0 = Date.now();
    await placer.heartbeat(t0);
    const d = await placer.resolve('q', t0);
    const on = (d as { route: string }).route;
    const t: Tunnel = { room: 'q', backendId: on, close: () => undefined };
    tunnels.add(t);
    await placer.heartbeat(t0 + 1_000); // the room's change: reported, its placement kept
    expect(await admin.pttl(key)).toBe(-1);

    // The placement goes (as an older gateway sharing the store lets it expire) while the room
    // stays live here and nothing about it changes.
    await admin.del(key);
    await placer.heartbeat(t0 + 2_000); // unchanged: a report of changes does not name it
    expect(await admin.exists(key)).toBe(0);
    await placer.heartbeat(t0 + TIMING.idleTtlMs / 2); // the periodic whole report
    expect(Object.values(await admin.hgetall(key))).toContain(on);
    expect(await admin.pttl(key)).toBe(-1);
    tunnels.remove(t);
  });
});
