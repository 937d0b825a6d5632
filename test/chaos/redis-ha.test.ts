// Redis high availability for real: the Redis that two gateways share fails over under load,
// once through Sentinel (the primary is kill -9'd, a replica is promoted by 3 sentinels) and once
// in a Redis Cluster (the master serving the {rg} slot is kill -9'd, its replica takes over).
// Real processes throughout: redis-server nodes and sentinels, demo backends b1-b3, two gateway
// processes A and B, a few hundred djust-like room clients (every room has one client through A
// and one through B), a stream of page GETs, and the backends' own /_backend/rooms as the witness
// of splits.
//
// The promise checked under each failover: routing and live sockets are unaffected (no socket
// closed, no room split, every page GET answered by the room's backend), rooms joined while Redis
// has no primary (the gateways run degraded) end up stored in the new primary where they live, and
// writes succeed again. Measured, recorded as chaos rows (not asserted tight): when writes succeed
// again (a fresh room's placement is in the new primary right after its page GET), when both
// gateways left degraded mode, when every room's placement was back.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import type { RedisTarget } from '../../src/redis/link.js';
import { loadRedisTls } from '../../src/redis/redis-tls.js';
import { makeCa, makeSigned, type CertFiles } from '../support/certs.js';
import { recordChaos } from '../support/chaos.js';
import { metricValue, runCli, startBackends, startGateway, stopAll, waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { closeAllStores, exerciseStores, placement } from '../support/redis-stores.js';
import {
  clusterMasterOf,
  clusterNodes,
  sentinelMaster,
  startCluster,
  startRedis,
  startReplica,
  startSentinels,
  startTlsRedis,
  stopAllRedis,
  type RedisNode,
} from '../support/redis.js';
import { RoomClient, RoomFleet, SplitWatcher, logsFrom, percentile, sleep, stopAllRoomClients, witnessOf, type GatewayTarget } from '../support/room-clients.js';

const PREFIX = 'ha:';
const COMMAND_TIMEOUT_MS = 500;
/** Rooms live before the fault, each with one client through A and one through B. */
const ROOMS = 100;
/** A new room (two clients) joins this often from the kill until both gateways are back. */
const NEW_ROOM_EVERY_MS = 150;
/** A page GET this often, alternately through A and B, of a live room. */
const PAGE_EVERY_MS = 20;

const readers: (Redis | Cluster)[] = [];
let watcher: SplitWatcher | undefined;

afterEach(async () => {
  stopAllRoomClients();
  await watcher?.stop();
  watcher = undefined;
  for (const r of readers.splice(0)) r.disconnect();
  await closeAllStores();
  await stopAll();
  await stopAllRedis();
});

function gatewayConfig(backends: readonly BackendProc[], redis: RedisTarget | Record<string, unknown>): Record<string, unknown> {
  return {
    backends: backends.map((b) => ({ id: b.id, url: b.url })),
    redis: { ...redis, keyPrefix: PREFIX, commandTimeoutMs: COMMAND_TIMEOUT_MS },
    health: { intervalMs: 500, timeoutMs: 400, rise: 2, fall: 3 },
    // The real bounded loads; a short heartbeat so that reconciliation is quick.
    placement: { boundedLoadFactor: 1.25, heartbeatMs: 500 },
  };
}

/** A reader of the stored placements (the test's own connection, not the gateways'). */
type Reader = Redis | Cluster;

async function storedBackend(reader: Reader, room: string): Promise<string | null> {
  return reader.hget(`${PREFIX}{rg}:p:${room}`, 'backend');
}

interface Timeline {
  /** Per gateway: times (ms after the kill) roomgate_placement_degraded was seen to change. */
  readonly degraded: Map<string, { at: number; value: number }[]>;
  /** /readyz answers other than 200 (count). */
  readyzFailures: number;
  polls: number;
}

interface FailoverFigures {
  readonly writesBackMs: number;
  readonly recoverMs: number;
  readonly reconciledMs: number;
  readonly promotedMs: number;
  readonly sockets: number;
  readonly newRooms: number;
  readonly newRoomsWhileDegraded: number;
  readonly pages: number;
  readonly pagesFailed: number;
  readonly pageP99Ms: number;
  readonly pageMaxMs: number;
  readonly callMaxMs: number;
  readonly errorLines: number;
  readonly roomsSplit: number;
  readonly socketsDropped: number;
  readonly roomsMoved: number;
  readonly lost: number;
}

/**
 * The scenario both failovers share: two gateways on `redis` in front of b1-b3, ROOMS rooms live,
 * then `kill()` under load; `promoted()` says when Redis itself has a writable primary again and
 * `reader()` reads the new primary. Asserts the promise and returns the measured figures.
 */
async function failoverUnderLoad(o: {
  readonly redis: RedisTarget;
  readonly kill: () => Promise<void>;
  readonly promoted: () => Promise<boolean>;
  readonly reader: () => Reader;
}): Promise<FailoverFigures> {
  const backends = await startBackends(['b1', 'b2', 'b3']);
  const [gwA, gwB] = await Promise.all([0, 1].map(() => startGateway({ config: gatewayConfig(backends, o.redis) })));
  const gateways = [gwA, gwB] as GatewayProc[];
  const A: GatewayTarget = { name: 'A', wsUrl: gwA!.wsUrl };
  const B: GatewayTarget = { name: 'B', wsUrl: gwB!.wsUrl };
  await Promise.all(gateways.map((gw) => waitFor('gateway not degraded', 10_000, async () => (await metricValue(gw, 'roomgate_placement_degraded')) === 0, 100)));

  watcher = new SplitWatcher(() => witnessOf(backends));
  watcher.start();
  const fleet = new RoomFleet();
  for (let i = 0; i < ROOMS; i++) {
    fleet.add(`live-${i}`, A);
    fleet.add(`live-${i}`, B);
  }
  await waitFor(`${fleet.size} clients live`, 30_000, () => fleet.liveCount() === fleet.size, 100);
  const before = new Map([...fleet.roomBackends()].map(([room, set]) => [room, [...set].join('+')]));
  const reader = o.reader();
  readers.push(reader);

  // Page GETs of live rooms, alternately through A and B, from before the kill until the end.
  const pages: { room: string; status: number; backend: string | null; ms: number; at: number }[] = [];
  let paging = true;
  const pageLoop = (async () => {
    for (let k = 0; paging; k++) {
      const rooms = fleet.rooms();
      const room = rooms[(k * 7) % rooms.length] as string;
      const gw = gateways[k % 2] as GatewayProc;
      const at = Date.now();
      void fetch(`${gw.url}/game/${room}/`, { signal: AbortSignal.timeout(5_000) }).then(
        async (res) => {
          await res.arrayBuffer();
          pages.push({ room, status: res.status, backend: res.headers.get('x-backend-id'), ms: Date.now() - at, at });
        },
        () => pages.push({ room, status: 0, backend: null, ms: Date.now() - at, at }),
      );
      await sleep(PAGE_EVERY_MS);
    }
  })();

  // Each gateway's degraded gauge and /readyz, every 100 ms.
  const timeline: Timeline = { degraded: new Map(gateways.map((g) => [String(g.port), []])), readyzFailures: 0, polls: 0 };
  let killedAt = 0;
  let polling = true;
  const pollLoop = (async () => {
    while (polling) {
      await Promise.all(
        gateways.map(async (gw) => {
          const [value, ready] = await Promise.all([
            metricValue(gw, 'roomgate_placement_degraded').catch(() => -1),
            fetch(`${gw.url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status, () => 0),
          ]);
          timeline.polls++;
          if (ready !== 200) timeline.readyzFailures++;
          const seen = timeline.degraded.get(String(gw.port)) as { at: number; value: number }[];
          if (killedAt > 0 && seen[seen.length - 1]?.value !== value) seen.push({ at: Date.now() - killedAt, value });
        }),
      );
      await sleep(100);
    }
  })();

  // A store of the test's own, configured as the gateways' are: how long each call waits while
  // Redis fails over (the fail-fast promise: no call waits longer than commandTimeoutMs).
  const probeStore = placement(o.redis, 'probe-gateway');
  await probeStore.connect({ timeoutMs: 5_000 });
  const callMs: number[] = [];
  let probing = true;
  const callLoop = (async () => {
    while (probing) {
      const t = Date.now();
      await probeStore.get('probe-room').catch(() => null);
      if (killedAt > 0) callMs.push(Date.now() - t);
      await sleep(50);
    }
  })();

  const existing = [...fleet.clients];
  await sleep(500);
  const linesAtKill = gateways.map((g) => g.lines.length);
  killedAt = Date.now();
  await o.kill();

  // New rooms keep joining, and fresh rooms' page GETs probe when writes reach the new primary.
  const newRooms: string[] = [];
  let joining = true;
  const joinLoop = (async () => {
    for (let k = 0; joining; k++) {
      const room = `new-${k}`;
      newRooms.push(room);
      fleet.add(room, k % 2 === 0 ? A : B);
      fleet.add(room, k % 2 === 0 ? B : A);
      await sleep(NEW_ROOM_EVERY_MS);
    }
  })();
  let writesBackMs = -1;
  let promotedMs = -1;
  const probe = async (): Promise<void> => {
    for (let k = 0; writesBackMs < 0; k++) {
      if (promotedMs < 0 && (await o.promoted().catch(() => false))) promotedMs = Date.now() - killedAt;
      const room = `probe-${k}`;
      const sent = Date.now();
      const res = await fetch(`${gwA!.url}/game/${room}/`, { signal: AbortSignal.timeout(5_000) }).catch(() => null);
      await res?.arrayBuffer();
      // Stored by the request itself (not by a later reconciliation): read at once.
      if (res?.status === 200 && promotedMs >= 0 && (await storedBackend(reader, room).catch(() => null)) === res.headers.get('x-backend-id')) {
        writesBackMs = sent - killedAt;
      }
      await sleep(100);
    }
  };
  await Promise.race([probe(), sleep(25_000).then(() => Promise.reject(new Error('writes did not succeed again within 25 s of the kill')))]);
  probing = false;
  await callLoop;

  await Promise.all(
    gateways.map((gw) => waitFor('gateway back from degraded mode', 15_000, async () => (await metricValue(gw, 'roomgate_placement_degraded')) === 0, 100)),
  );
  const recoverMs = Date.now() - killedAt;
  // A few more rooms join with Redis back, then the stream stops.
  await sleep(500);
  joining = false;
  await joinLoop;
  await waitFor(`${fleet.size} clients live`, 20_000, () => fleet.liveCount() === fleet.size, 100);

  // Every room's stored placement (in the new primary) is where its clients live.
  let mismatched: string[] = [];
  await waitFor('every room stored in the new primary where it lives', 15_000, async () => {
    const where = fleet.roomBackends();
    const stored = await Promise.all([...where].map(async ([room, set]) => [room, [...set].join('+'), await storedBackend(reader, room)] as const));
    mismatched = stored.filter(([, live, s]) => live !== s).map(([room, live, s]) => `${room}: live on ${live}, stored ${s}`);
    return mismatched.length === 0;
  }).catch((err: Error) => {
    throw new Error(`${err.message}:\n${mismatched.slice(0, 20).join('\n')}`);
  });
  const reconciledMs = Date.now() - killedAt;
  paging = false;
  polling = false;
  await Promise.all([pageLoop, pollLoop]);
  await sleep(300); // the last page GETs answer
  await watcher.stop();

  // Rooms joined while their gateway was degraded (the writes the reconciliation had to make).
  const backAt = new Map([...timeline.degraded].map(([port, seen]) => [port, seen.find((s) => s.value === 0 && seen.some((x) => x.value === 1 && x.at < s.at))?.at ?? 0]));
  const newRoomsWhileDegraded = newRooms.filter((room) =>
    fleet.ofRoom(room).some((c) => (c.connections[0]?.mountedAt ?? Infinity) - killedAt < (backAt.get(new URL(c.gateway.wsUrl).port) ?? 0)),
  ).length;

  const dropped = existing.flatMap((c) => c.closesSince(killedAt).map(() => c.room));
  const allCloses = fleet.closesSince(killedAt);
  const after = fleet.roomBackends();
  const moved = [...before].filter(([room, b]) => [...(after.get(room) ?? [])].join('+') !== b);
  const failed = pages.filter((p) => p.status !== 200);
  const misrouted = pages.filter((p) => p.status === 200 && p.backend !== [...(after.get(p.room) ?? [])].join('+'));
  const splits = watcher.since(killedAt);
  const lostProbe = newRooms.filter((r) => fleet.ofRoom(r).length !== 2);
  // Connection errors are logged once per message and outage, not on every reconnect attempt.
  const errorLines = gateways.map((g, i) => logsFrom(g, linesAtKill[i] as number).filter((l) => String(l.msg).endsWith('connection error')).length);
  // REDIS_HA_TEST_LOGS=DIR keeps both gateways' logs there, for investigating a failure.
  const logDir = process.env.REDIS_HA_TEST_LOGS;
  if (logDir) {
    mkdirSync(logDir, { recursive: true });
    for (const [name, gw] of [['A', gwA], ['B', gwB]] as const) writeFileSync(join(logDir, `gateway-${name}.log`), `killed at ${new Date(killedAt).toISOString()}\n${gw!.lines.join('\n')}\n`);
  }

  expect(timeline.degraded.get(String(gwA!.port))?.some((s) => s.value === 1), 'gateway A was seen degraded (the fault reached it)').toBe(true);
  expect(splits.map((v) => watcher!.describe([v], killedAt)), 'rooms held by two backends at once').toEqual([]);
  expect(allCloses.map(({ client, at }) => `${client.room} via ${client.gateway.name} closed at +${at - killedAt} ms`), 'sockets closed since the kill').toEqual([]);
  expect(dropped.length).toBe(0);
  expect(moved.map(([room, b]) => `${room}: ${b} -> ${[...(after.get(room) ?? [])].join('+')}`), 'rooms moved').toEqual([]);
  expect(failed.map((p) => `${p.room}: ${p.status} after ${p.ms} ms at +${p.at - killedAt} ms`), 'page GETs not answered 200').toEqual([]);
  expect(misrouted.map((p) => `${p.room}: served by ${p.backend}, lives on ${[...(after.get(p.room) ?? [])].join('+')}`), 'page GETs served by another backend than the room').toEqual([]);
  expect(timeline.readyzFailures, '/readyz answers other than 200').toBe(0);
  expect(Math.max(...errorLines), 'connection error lines a gateway logged during the failover').toBeLessThanOrEqual(16);
  expect(Math.max(...callMs), `the longest store call during the failover (commandTimeoutMs ${COMMAND_TIMEOUT_MS})`).toBeLessThanOrEqual(COMMAND_TIMEOUT_MS + 1_000);
  expect(lostProbe).toEqual([]);
  expect(newRoomsWhileDegraded, 'rooms joined while the gateways were degraded (the window the test is about)').toBeGreaterThan(0);

  const ms = pages.map((p) => p.ms);
  return {
    writesBackMs,
    recoverMs,
    reconciledMs,
    promotedMs,
    sockets: fleet.size,
    newRooms: newRooms.length,
    newRoomsWhileDegraded,
    pages: pages.length,
    pagesFailed: failed.length,
    pageP99Ms: percentile(ms, 99),
    pageMaxMs: Math.max(...ms),
    callMaxMs: Math.max(...callMs),
    errorLines: Math.max(...errorLines),
    roomsSplit: splits.length,
    socketsDropped: allCloses.length,
    roomsMoved: moved.length,
    lost: mismatched.length,
  };
}

function otherFigures(f: FailoverFigures): string[] {
  return [
    `writes back ${f.writesBackMs} ms after the kill (Redis promoted at ${f.promotedMs} ms)`,
    `every room stored where it lives ${f.reconciledMs} ms after the kill`,
    `${f.sockets} sockets; ${f.newRooms} rooms joined meanwhile, ${f.newRoomsWhileDegraded} while degraded`,
    `${f.pages} page GETs, p99 ${f.pageP99Ms} ms, max ${f.pageMaxMs} ms`,
    `longest store call during the failover ${f.callMaxMs} ms (commandTimeoutMs ${COMMAND_TIMEOUT_MS}); at most ${f.errorLines} connection-error log lines per gateway`,
  ];
}

describe('Redis high availability under load', () => {
  it('Sentinel: the primary is kill -9d; sockets, rooms and pages unaffected, placements reconciled into the promoted replica', async () => {
    const primary = await startRedis();
    const replica = await startReplica(primary.port);
    const sentinels = await startSentinels(primary.port, 3, 1, { quorum: 2, downAfterMs: 1000, failoverTimeoutMs: 3000 });
    const f = await failoverUnderLoad({
      redis: { sentinels: sentinels.map((s) => s.address), sentinelName: 'mymaster' },
      kill: () => primary.kill('SIGKILL'),
      promoted: async () => (await sentinelMaster(sentinels[0] as (typeof sentinels)[0])) === replica.address,
      reader: () => new Redis({ port: replica.port, host: '127.0.0.1', commandTimeout: 1000, maxRetriesPerRequest: 1 }),
    });
    recordChaos({
      id: 'redis-sentinel-failover',
      fault: 'Redis primary kill -9 under load (Sentinel: 1 replica, 3 sentinels, quorum 2, down-after 1 s)',
      promise: 'Routing and live sockets unaffected; rooms placed while there is no primary are written to the promoted replica; writes resume once Sentinel has promoted it',
      figures: { recoverMs: f.recoverMs, roomsMoved: f.roomsMoved, socketsDropped: f.socketsDropped, requestsFailed: f.pagesFailed, roomsSplit: f.roomsSplit, other: otherFigures(f) },
      file: import.meta.url,
      test: 'Sentinel: the primary is kill -9d; sockets, rooms and pages unaffected, placements reconciled into the promoted replica',
    });
  }, 60_000);

  it('Cluster: the master of the {rg} slot is kill -9d; sockets, rooms and pages unaffected, placements reconciled into its promoted replica', async () => {
    const cluster = await startCluster({ replicas: 1, nodeTimeoutMs: 1000 });
    const asker = cluster.servers[0] as RedisNode;
    const victim = await clusterMasterOf(cluster, asker, '{rg}');
    const survivor = cluster.servers.find((s) => s !== victim) as RedisNode;
    const f = await failoverUnderLoad({
      redis: { clusterNodes: cluster.nodes },
      kill: () => victim.kill('SIGKILL'),
      promoted: async () => (await clusterMasterOf(cluster, survivor, '{rg}').catch(() => victim)) !== victim,
      reader: () =>
        new Cluster(
          cluster.servers.filter((s) => s !== victim).map((s) => ({ host: '127.0.0.1', port: s.port })),
          { redisOptions: { commandTimeout: 1000 }, enableOfflineQueue: true },
        ),
    });
    const nodes = await clusterNodes(survivor);
    expect(nodes.find((n) => n.address === victim.address)?.failed, 'the killed master is marked failed').toBe(true);
    recordChaos({
      id: 'redis-cluster-master-down',
      fault: 'Redis Cluster master serving the {rg} slot kill -9 under load (3 masters + 3 replicas, cluster-node-timeout 1 s)',
      promise: 'Routing and live sockets unaffected; rooms placed while the slot has no master are written to the promoted replica; writes resume once the cluster has failed over',
      figures: { recoverMs: f.recoverMs, roomsMoved: f.roomsMoved, socketsDropped: f.socketsDropped, requestsFailed: f.pagesFailed, roomsSplit: f.roomsSplit, other: otherFigures(f) },
      file: import.meta.url,
      test: 'Cluster: the master of the {rg} slot is kill -9d; sockets, rooms and pages unaffected, placements reconciled into its promoted replica',
    });
  }, 60_000);
});

describe('rediss:// against a real TLS Redis (a private CA, a client certificate)', () => {
  let dir: string;
  let ca: CertFiles;
  let wrongCa: CertFiles;
  let server: CertFiles;
  let client: CertFiles;
  const pem = (path: string): string => readFileSync(path, 'utf8');

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'roomgate-redis-tls-'));
    ca = makeCa(dir, 'redis-ca');
    wrongCa = makeCa(dir, 'wrong-ca');
    server = makeSigned(dir, 'redis-server', ca, ['127.0.0.1']);
    client = makeSigned(dir, 'roomgate-client', ca, ['roomgate']);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const startServer = (): ReturnType<typeof startTlsRedis> => startTlsRedis({ cert: server.cert, key: server.key, ca: ca.cert }, { authClients: true });

  it('both stores work over TLS (the server requires a client certificate)', async () => {
    const redis = await startServer();
    await exerciseStores({ url: redis.url, tls: { ca: pem(ca.cert), cert: pem(client.cert), key: pem(client.key) } });
  }, 20_000);

  it('a gateway with a rediss:// url, redis.tlsCa and a client certificate keeps placements and presence in the TLS Redis', async () => {
    const redis = await startServer();
    const backends = await startBackends(['b1', 'b2']);
    const gw = await startGateway({
      config: { ...gatewayConfig(backends, { url: redis.url, tlsCa: ca.cert, tlsCert: client.cert, tlsKey: client.key }) },
    });
    await waitFor('gateway not degraded', 10_000, async () => (await metricValue(gw, 'roomgate_placement_degraded')) === 0, 100);
    const c = new RoomClient('tls-room', { name: 'gw', wsUrl: gw.wsUrl }).start();
    await waitFor('client live', 10_000, () => c.live);
    // The test's own TLS connection reads what the gateway wrote.
    const reader = new Redis(redis.url, { tls: { ca: pem(ca.cert), cert: pem(client.cert), key: pem(client.key) }, commandTimeout: 2000, maxRetriesPerRequest: 1 });
    readers.push(reader);
    expect(await storedBackend(reader, 'tls-room')).toBe(c.backend);
    await waitFor('presence counted through the TLS Redis', 10_000, async () => {
      const res = await fetch(`${gw.url}/_roomgate/api/online`, { signal: AbortSignal.timeout(2_000) });
      return res.status === 200 && ((await res.json()) as { total: number }).total === 1;
    });
  }, 30_000);

  it('a CA that did not sign the server fails at once with an error naming TLS and redis.tlsCa; the gateway routes on, degraded', async () => {
    const redis = await startServer();
    // The stores: connect() rejects on the first TLS failure, long before its timeout.
    const store = placement({ url: redis.url, tls: { ca: pem(wrongCa.cert), cert: pem(client.cert), key: pem(client.key) } }, 'gw-wrong-ca');
    const t0 = Date.now();
    const err = await store.connect({ timeoutMs: 10_000 }).then(() => null, (e: Error) => e);
    const failedAfterMs = Date.now() - t0;
    expect(err?.message).toMatch(/^redis placement store: Redis at rediss:\/\/127\.0\.0\.1:\d+: tls: (SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\b.*not trusted: set redis\.tlsCa to the CA that signs it/);
    expect(failedAfterMs, 'rejected on the TLS failure, not after the 10 s connect timeout').toBeLessThan(5_000);
    // No client certificate, and the server requires one: the other hint.
    const noCert = placement({ url: redis.url, tls: { ca: pem(ca.cert) } }, 'gw-no-cert');
    const err2 = await noCert.connect({ timeoutMs: 10_000 }).then(() => null, (e: Error) => e);
    expect(err2?.message).toMatch(/: tls: ERR_SSL_\w*CERTIFICATE_REQUIRED\b.*needs a client certificate \(redis\.tlsCert, redis\.tlsKey\)/);

    // A gateway: it starts, says why Redis is unreachable, and routes from the ring meanwhile.
    const backends = await startBackends(['b1']);
    const gw = await startGateway({ config: gatewayConfig(backends, { url: redis.url, tlsCa: wrongCa.cert, tlsCert: client.cert, tlsKey: client.key }) });
    const line = gw.logs().find((l) => l.msg === 'Redis unreachable at start: degraded mode');
    expect(String(line?.err)).toMatch(/tls: .*set redis\.tlsCa/);
    expect(await metricValue(gw, 'roomgate_placement_degraded')).toBe(1);
    const page = await fetch(`${gw.url}/game/room-1/`, { signal: AbortSignal.timeout(5_000) });
    expect(page.status).toBe(200);
  }, 30_000);

  it('redis.tlsCa and the client certificate: a bad file or no rediss:// url is a config error naming the field and the fix', async () => {
    const problems = (env: Record<string, string>): string[] => {
      try {
        loadRedisTls(loadConfig({ env }).redis);
        return [];
      } catch (err) {
        if (err instanceof ConfigError) return [...err.problems];
        throw err;
      }
    };
    expect(problems({ REDIS_URL: 'redis://127.0.0.1:6379', REDIS_TLS_CA: ca.cert, REDIS_TLS_CERT: client.cert })).toEqual([
      'redis.tlsKey: got null while redis.tlsCert is set; expected the PEM private key file of that certificate, or remove redis.tlsCert (no client certificate)',
      `redis.tlsCa: got ${JSON.stringify(ca.cert)} while redis.url is not a rediss:// URL; expected a rediss:// redis.url (env REDIS_URL) with it, e.g. "rediss://redis.internal:6380" (with Sentinel or Cluster only its scheme and password are used: "rediss://:PASSWORD@redis"), or remove redis.tlsCa`,
      `redis.tlsCert: got ${JSON.stringify(client.cert)} while redis.url is not a rediss:// URL; expected a rediss:// redis.url (env REDIS_URL) with it, e.g. "rediss://redis.internal:6380" (with Sentinel or Cluster only its scheme and password are used: "rediss://:PASSWORD@redis"), or remove redis.tlsCert`,
    ]);
    const missing = join(dir, 'missing.pem');
    const bad = problems({ REDIS_URL: 'rediss://127.0.0.1:6380', REDIS_TLS_CA: missing, REDIS_TLS_CERT: client.key, REDIS_TLS_KEY: client.key });
    expect(bad[0]).toBe(`redis.tlsCa: cannot read ${missing} (ENOENT); expected a readable PEM file of CA certificates, or null for Node's default trust store: fix the path or the file's permissions`);
    expect(bad[1]).toContain(`redis.tlsCert: ${client.key} is not a PEM certificate (`);
    expect(bad[1]).toContain('); expected the client certificate (its chain after it)');
    expect(bad).toHaveLength(2);
    expect(problems({ REDIS_URL: 'rediss://127.0.0.1:6380', REDIS_TLS_CA: client.key })).toEqual([
      `redis.tlsCa: ${client.key} holds no PEM certificate ("-----BEGIN CERTIFICATE-----"); expected the CA certificates that sign the Redis servers' certificates`,
    ]);
    expect(problems({ REDIS_URL: 'rediss://127.0.0.1:6380', REDIS_TLS_CA: ca.cert, REDIS_TLS_CERT: client.cert, REDIS_TLS_KEY: client.key })).toEqual([]);
    // check-config reads the files as start does (start's own path is the gateway tests above).
    const cli = await runCli(['check-config'], { REDIS_URL: 'rediss://127.0.0.1:6380', REDIS_TLS_CA: missing });
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain(`redis.tlsCa: cannot read ${missing} (ENOENT)`);
  });
});
