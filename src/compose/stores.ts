// The stores a gateway keeps its shared state in: placements, and presence/lobby/leaderboards.
// Redis when any Redis address is configured (both stores share its options), else in memory; a
// test or a cluster worker hands its own (shared in-memory state, the IPC stores).
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { MemoryPlacementStore } from '../placement/memory-store.js';
import { RedisPlacementStore } from '../placement/redis-store.js';
import type { PlacementStore } from '../placement/store.js';
import { loadRedisTls } from '../redis/redis-tls.js';
import { MemorySharedDataStore } from '../shared-data/memory-store.js';
import { RedisSharedDataStore } from '../shared-data/redis-store.js';
import type { SharedDataStore } from '../shared-data/store.js';

export interface Stores {
  readonly store: PlacementStore;
  /** Presence, lobby and leaderboards. */
  readonly sharedData: SharedDataStore;
}

export interface StoreDeps {
  readonly gatewayId: string;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Given stores win over the configuration's choice. */
  readonly store?: PlacementStore;
  readonly sharedData?: SharedDataStore;
}

/** Whether the configuration names a Redis (a URL, sentinels or cluster nodes). */
export function redisConfigured(config: LoadedConfig): boolean {
  return Boolean(config.redis.url) || config.redis.sentinels.length > 0 || config.redis.clusterNodes.length > 0;
}

export function chooseStores(config: LoadedConfig, deps: StoreDeps): Stores {
  const { gatewayId, logger, metrics } = deps;
  const useRedis = redisConfigured(config);
  // What both Redis stores share: where Redis is, the key prefix, fail-fast timing, logging.
  const redis = {
    url: config.redis.url,
    sentinels: config.redis.sentinels,
    sentinelName: config.redis.sentinelName,
    clusterNodes: config.redis.clusterNodes,
    tls: loadRedisTls(config.redis),
    keyPrefix: config.redis.keyPrefix,
    gatewayId,
    commandTimeoutMs: config.redis.commandTimeoutMs,
    onLog: (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => logger[level](fields ?? {}, msg),
  };
  const storeTiming = {
    idleTtlMs: config.placement.idleTtlMs,
    gatewayTtlMs: config.placement.gatewayTtlMs,
    maxIdleRooms: config.placement.maxIdleRooms,
    onEvicted: (n: number) => metrics.idleRoomsEvicted.inc({ where: 'store' }, n),
  };
  const store = deps.store ?? (useRedis ? new RedisPlacementStore({ ...redis, timing: storeTiming }) : new MemoryPlacementStore(gatewayId, storeTiming));
  const sharedData =
    deps.sharedData ??
    (useRedis
      ? new RedisSharedDataStore({ ...redis, presenceTtlMs: config.presence.ttlMs })
      : new MemorySharedDataStore(gatewayId, { presenceTtlMs: config.presence.ttlMs }));
  return { store, sharedData };
}
