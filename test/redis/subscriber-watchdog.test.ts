// The Redis subscriber connection watched (issue 26 item 8): a subscriber waits with no command
// pending, so nothing noticed when it stalled and every event was lost while the link looked
// available. A real redis-server behind the fault proxy (test/support/fault-proxy.ts): the watched
// store reaches Redis only through the proxy, a second store directly. Stalled or black-holed, the
// watched store must report itself unavailable (PING unanswered) and, once the link is back,
// subscribe again on a new connection and receive events again.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import type { StoreEvent } from '../../src/placement/store.js';
import { FaultProxy, closeAllFaultProxies } from '../support/fault-proxy.js';
import { waitFor } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';

const TIMING = { idleTtlMs: 60_000, gatewayTtlMs: 5_000 };
/** The PING goes every max(1 s, 2 x this); unanswered after this long it counts as stalled. */
const COMMAND_TIMEOUT_MS = 300;

let redis: RedisServer;
let seq = 0;
const stores: RedisPlacementStore[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await closeAllFaultProxies();
});
afterAll(async () => {
  await stopAllRedis();
});

function store(url: string, keyPrefix: string, gatewayId: string, logs: string[] = []): RedisPlacementStore {
  const s = new RedisPlacementStore({ url, keyPrefix, gatewayId, timing: TIMING, commandTimeoutMs: COMMAND_TIMEOUT_MS, onLog: (_l, msg) => logs.push(msg) });
  stores.push(s);
  return s;
}

describe('the subscriber connection is watched', () => {
  for (const fault of ['stall', 'blackhole'] as const) {
    it(`${fault}: detected within seconds (unavailable), re-subscribed on a new connection once the link is back, events flow again`, async () => {
      const proxy = await FaultProxy.start(redis.port);
      const prefix = `watchdog-${process.pid}-${++seq}:`;
      const logs: string[] = [];
      const watched = store(proxy.redisUrl, prefix, 'gw-watched', logs);
      const direct = store(redis.url, prefix, 'gw-direct');
      await Promise.all([watched.connect({ timeoutMs: 5_000 }), direct.connect({ timeoutMs: 5_000 })]);
      const events: StoreEvent[] = [];
      watched.subscribe((ev) => events.push(ev));
      const placed = (room: string) => events.some((e) => e.type === 'placement' && e.room === room);

      await direct.place('before', 'b1', 0, { force: false });
      await waitFor('the first event', 5_000, () => (placed('before') ? true : undefined));

      await proxy[fault]();
      // Nothing is sent on the commands connection meanwhile: only the subscriber's PING can tell.
      await waitFor('the stalled subscriber detected', 6_000, () => (watched.available ? undefined : true));
      expect(logs).toContain('redis placement store: subscriber connection stalled (no answer to PING), reconnecting');
      expect(events).toContainEqual({ type: 'available', available: false });

      await proxy.restore();
      await waitFor('subscribed again', 10_000, () => (watched.available ? true : undefined));
      await direct.place('after', 'b2', 0, { force: false });
      await waitFor('an event after the recovery', 5_000, () => (placed('after') ? true : undefined));
    });
  }

  it('a healthy subscriber is never replaced (the PINGs are answered)', async () => {
    const logs: string[] = [];
    const s = store(redis.url, `watchdog-${process.pid}-${++seq}:`, 'gw-healthy', logs);
    await s.connect({ timeoutMs: 5_000 });
    await new Promise((r) => setTimeout(r, 3_500)); // three checks
    expect(s.available).toBe(true);
    expect(logs.filter((m) => m.includes('stalled'))).toEqual([]);
  });
});
