/**
 * Benchmark: CPU of one heartbeat (Supervisor.tick: the placement report and the presence report)
 * at a number of live sockets, in process, with the in-memory stores.
 *
 *   npm run build && node dist/bench/heartbeat-cost.js [--sockets 8750,20000] [--room-size 1]
 *                                                      [--ticks 200] [--churn 0,10] [--store memory,redis]
 *
 * Builds the runtime as a gateway wires it (a BackendPool of 3 backends, the TunnelRegistry, the
 * Placer over a placement store, the Supervisor, a shared-data store: in memory, or --store redis:
 * the Redis stores on a redis-server this bench starts on a free port and stops), opens --sockets
 * tunnels (plain objects: no sockets; rooms of --room-size) spread over the backends, places every
 * room, then runs --ticks heartbeats with a fake clock advanced by the heartbeat interval between
 * them and measures the CPU (process.cpuUsage, user + system) of each. --churn N: N tunnels close
 * and N open in new rooms before each heartbeat (a gateway whose sockets change a little between
 * heartbeats); 0: nothing changes (an idle gateway). Prints the median and the 10th-90th percentile
 * per heartbeat of this process's CPU, and with Redis the redis-server's CPU per heartbeat (its
 * /proc ticks over all the heartbeats, divided by their number), with the CPU model. A benchmark,
 * not a test: it asserts nothing.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { ResolvedBackend } from '../src/config/load.js';
import { createLogger } from '../src/observability/logger.js';
import { createMetrics } from '../src/observability/metrics.js';
import { stopChild } from '../src/demo/child.js';
import { startRedisServer, type LocalRedis } from '../src/demo/redis-server.js';
import { MemoryPlacementStore } from '../src/placement/memory-store.js';
import { RedisPlacementStore } from '../src/placement/redis-store.js';
import type { PlacementStore } from '../src/placement/store.js';
import { EventLog } from '../src/runtime/events.js';
import { Placer } from '../src/runtime/placer.js';
import { BackendPool } from '../src/runtime/pool.js';
import { Supervisor } from '../src/runtime/supervisor.js';
import { TunnelRegistry, type Tunnel } from '../src/runtime/tunnels.js';
import { MemorySharedDataStore } from '../src/shared-data/memory-store.js';
import { RedisSharedDataStore } from '../src/shared-data/redis-store.js';
import type { SharedDataStore } from '../src/shared-data/store.js';
import { treeCpuMs } from './suite/cpu.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);

const { values } = parseArgs({
  options: {
    sockets: { type: 'string', default: '8750,20000' },
    'room-size': { type: 'string', default: '1' },
    ticks: { type: 'string', default: '200' },
    churn: { type: 'string', default: '0,10' },
    store: { type: 'string', default: 'memory' },
  },
});
const list = (s: string): number[] => s.split(',').map((x) => Number(x.trim()));
const SOCKETS = list(values.sockets);
const ROOM_SIZE = Number(values['room-size']);
const TICKS = Number(values.ticks);
const CHURNS = list(values.churn);
const STORES = values.store.split(',').map((x) => x.trim());
const HEARTBEAT_MS = 1_000;

const backend = (i: number): ResolvedBackend => ({ id: `b${i}`, url: `http://10.0.0.1:${8000 + i}`, host: '10.0.0.1', port: 8000 + i, weight: 1 });

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] ?? Number.NaN;
}

interface Figures {
  readonly median: number;
  readonly p10: number;
  readonly p90: number;
  /** redis-server CPU per heartbeat (ms), with the Redis stores. */
  readonly redisMs: number | null;
}

let benchSeq = 0;

async function run(sockets: number, churn: number, redis: LocalRedis | null): Promise<Figures> {
  let now = 1_700_000_000_000;
  const clock = (): number => now;
  const logger = createLogger('silent');
  const pool = new BackendPool([], 10_000, {});
  pool.setBackends([backend(1), backend(2), backend(3)]);
  const tunnels = new TunnelRegistry(pool, clock);
  const timing = { idleTtlMs: 180_000, gatewayTtlMs: 5_000 };
  // A fresh key prefix per run: runs share the server, never state.
  const keyPrefix = `bench-${++benchSeq}:`;
  let store: PlacementStore;
  let sharedData: SharedDataStore;
  if (redis === null) {
    store = new MemoryPlacementStore('gw-bench', timing, undefined, clock);
    sharedData = new MemorySharedDataStore('gw-bench', { presenceTtlMs: 10_000 }, undefined, clock);
  } else {
    const r = new RedisPlacementStore({ url: redis.url, keyPrefix, gatewayId: 'gw-bench', timing, commandTimeoutMs: 10_000 });
    const d = new RedisSharedDataStore({ url: redis.url, keyPrefix, gatewayId: 'gw-bench', presenceTtlMs: 10_000, commandTimeoutMs: 10_000 });
    await Promise.all([r.connect(), d.connect()]);
    store = r;
    sharedData = d;
  }
  const placer = new Placer({
    store,
    pool,
    tunnels,
    logger,
    noRoom: 'least-loaded',
    boundFactor: 0,
    loadMetric: 'rooms',
    retryAfterS: 1,
    onDown: 'keep',
    cacheTtlMs: 5_000,
    idleTtlMs: 180_000,
    maxIdleRooms: 100_000,
    recoveryRingMs: 5_000,
    now: clock,
  });
  const supervisor = new Supervisor({
    pool,
    tunnels,
    placer,
    sharedData,
    events: new EventLog(),
    health: { reportFailure: () => undefined, setTargets: () => undefined },
    metrics: createMetrics(() => []),
    logger,
    onDown: 'keep',
    heartbeatMs: HEARTBEAT_MS,
    presenceTtlMs: 10_000,
    now: clock,
  });
  const open: Tunnel[] = [];
  let roomSeq = 0;
  const openRoom = async (size: number): Promise<void> => {
    const room = `room-${roomSeq++}`;
    const d = await placer.resolve(room, now);
    if (!('route' in d)) throw new Error(`heartbeat bench: room ${room} not placed`);
    for (let i = 0; i < size; i++) {
      const t: Tunnel = { room, backendId: d.route, close: () => undefined };
      tunnels.add(t);
      open.push(t);
    }
  };
  for (let n = 0; n < sockets; n += ROOM_SIZE) await openRoom(Math.min(ROOM_SIZE, sockets - n));
  // Two heartbeats first: the first full report, and one to settle.
  await supervisor.tick();
  now += HEARTBEAT_MS;
  await supervisor.tick();
  const cpu: number[] = [];
  const redisPid = redis?.child.process.pid;
  const redisBefore = redisPid === undefined ? 0 : treeCpuMs(redisPid);
  for (let i = 0; i < TICKS; i++) {
    now += HEARTBEAT_MS;
    for (let c = 0; c < churn; c++) {
      const t = open.shift();
      if (t) tunnels.remove(t);
      await openRoom(1);
    }
    const before = process.cpuUsage();
    await supervisor.tick();
    const used = process.cpuUsage(before);
    cpu.push((used.user + used.system) / 1000);
  }
  const redisMs = redisPid === undefined ? null : (treeCpuMs(redisPid) - redisBefore) / TICKS;
  if (tunnels.size !== sockets) throw new Error(`heartbeat bench: ${tunnels.size} tunnels, expected ${sockets}`);
  placer.close();
  await store.close();
  await sharedData.close();
  cpu.sort((a, b) => a - b);
  return { median: percentile(cpu, 0.5), p10: percentile(cpu, 0.1), p90: percentile(cpu, 0.9), redisMs };
}

async function main(): Promise<void> {
  const cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown CPU';
  say(`CPU: ${cpuModel}; Node ${process.version}; rooms of ${ROOM_SIZE}; ${TICKS} heartbeats each`);
  say();
  say('| store | live sockets | changes per heartbeat | gateway CPU per heartbeat, median (ms) | 10th-90th percentile (ms) | redis-server CPU per heartbeat (ms) |');
  say('|---|---|---|---|---|---|');
  for (const kind of STORES) {
    const redis = kind === 'redis' ? await startRedisServer(0) : null;
    try {
      for (const sockets of SOCKETS) {
        for (const churn of CHURNS) {
          const f = await run(sockets, churn, redis);
          const changes = churn === 0 ? 'none' : `${churn} closed + ${churn} opened`;
          say(`| ${kind} | ${sockets.toLocaleString('en-US')} | ${changes} | ${f.median.toFixed(3)} | ${f.p10.toFixed(3)}-${f.p90.toFixed(3)} | ${f.redisMs === null ? '-' : f.redisMs.toFixed(2)} |`);
        }
      }
    } finally {
      if (redis) await stopChild(redis.child);
    }
  }
}

await main();
