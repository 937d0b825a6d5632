// Heartbeats never overlap (Supervisor.tick folds calls into one more run). A heartbeat that
// lands while the placer recovers from degraded mode awaits that recovery (Placer.heartbeat ->
// recover), and the recovery includes reconcile(): two store round trips per room placed
// provisionally during the outage. All later heartbeats were folded behind it, so for the whole
// reconcile this gateway wrote no report: past placement.gatewayTtlMs the store counts it as gone
// ("a gateway silent this long no longer holds rooms busy") while it holds live sockets.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy } from '../support/fault-proxy.js';
import { startBackends, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';
import { httpGet, mapLimit, agent } from '../support/routing-helpers.js';

const GATEWAY_TTL_MS = 3_000;
let redis: RedisServer;
let proxy: FaultProxy;
let gw: GatewayProc;
let direct: Redis;

beforeAll(async () => {
  redis = await startRedis();
  proxy = await FaultProxy.start(redis.port);
  const backends = await startBackends(['b1', 'b2']);
  gw = await startGateway({
    backends,
    config: {
      redis: { url: proxy.redisUrl, commandTimeoutMs: 1_000 },
      placement: { heartbeatMs: 250, gatewayTtlMs: GATEWAY_TTL_MS },
      presence: { ttlMs: 1_000 },
    },
  });
  direct = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await direct.connect();
}, 60_000);

afterAll(async () => {
  direct?.disconnect();
  await stopAll();
  await proxy?.close();
  await stopAllRedis();
  agent.destroy();
});

const msg = (s: string) => (l: Record<string, unknown>) => String(l.msg).includes(s);

it('heartbeats go on while the rooms placed during an outage are reconciled', async () => {
  const [key] = await direct.keys('*{rg}:gw');
  expect(key).toBeDefined();
  const gwId = (await direct.zrange(key as string, '0', '-1'))[0] as string;

  // Outage: every connection to Redis reset; rooms placed provisionally meanwhile.
  await proxy.reset();
  await waitFor('degraded', 10_000, () => gw.logs().find(msg('placement store unreachable')));
  const rooms = Array.from({ length: 60 }, (_, i) => `reconcile-${i}`);
  await mapLimit(rooms, 16, async (r) => expect((await httpGet(`${gw.url}/?room=${r}`)).status).toBe(200));

  // Back, but each round trip takes ~200 ms: reconciling 60 rooms takes ~24 s, and the first
  // heartbeat to land during the recovery (restore + report: ~400 ms) waits for all of it.
  await proxy.delay(100);
  await waitFor('recovery starts', 15_000, () => gw.logs().find(msg('placement store reachable again')));
  let worstAge = 0;
  const until = Date.now() + 6_000;
  while (Date.now() < until) {
    const [score, [s, us]] = await Promise.all([direct.zscore(key as string, gwId), direct.time()]);
    const nowMs = Number(s) * 1000 + Math.floor(Number(us) / 1000);
    worstAge = Math.max(worstAge, nowMs - Number(score));
    await new Promise((r) => setTimeout(r, 100));
  }
  // The gateway is alive and its heartbeats run every 250 ms: its report never gets as old as gatewayTtlMs.
  expect(worstAge).toBeLessThan(GATEWAY_TTL_MS);
}, 60_000);
