// The runtime, the one owner of live state (src/runtime/): backends and their health, live
// sockets, placement, and the supervisor every change goes through. The parts report to each
// other in a circle (health and the pool tell the supervisor, which acts on them): the supervisor
// is made last and reached through late-bound callbacks, as the runtime's own tests wire it.
import { DnsDiscovery } from '../backends/discovery.js';
import { HealthChecker } from '../backends/health.js';
import { nativeProbe, socketProbe, type ProbeAddon } from '../backends/probe-link.js';
import type { BackendTls } from '../backends/backend-tls.js';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import type { BackendGaugeReading, Metrics } from '../observability/metrics.js';
import { EventLog } from '../runtime/events.js';
import { Placer } from '../runtime/placer.js';
import { BackendPool } from '../runtime/pool.js';
import { BackendCalls } from '../runtime/backend-calls.js';
import { PushLog } from '../runtime/push-log.js';
import { Supervisor } from '../runtime/supervisor.js';
import { TunnelRegistry } from '../runtime/tunnels.js';
import type { Stores } from './stores.js';

export interface Runtime {
  readonly health: HealthChecker;
  readonly pool: BackendPool;
  readonly tunnels: TunnelRegistry;
  readonly placer: Placer;
  readonly supervisor: Supervisor;
  readonly events: EventLog;
  readonly pushLog: PushLog;
  /** Signs and records every call to a backend's own endpoints (pushes, handoff hooks). */
  readonly backendCalls: BackendCalls;
}

export interface RuntimeDeps {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Health checks of https backends use it as pages and sockets do. */
  readonly backendTls: BackendTls;
  readonly stores: Stores;
  /** The addon when the native relay runs: plain checks of an address then use its probe. */
  readonly probeAddon: ProbeAddon | null;
}

export function buildRuntime(config: LoadedConfig, deps: RuntimeDeps): Runtime {
  const { logger, metrics, stores } = deps;
  // Assigned below, before anything can report: nothing runs until the pool gets its backends.
  let supervisor: Supervisor;
  const health = new HealthChecker(
    {
      path: config.health.path,
      intervalMs: config.health.intervalMs,
      timeoutMs: config.health.timeoutMs,
      rise: config.health.rise,
      fall: config.health.fall,
      hostHeader: config.health.host ?? undefined,
      tls: deps.backendTls,
      open: deps.probeAddon ? nativeProbe(deps.probeAddon) : socketProbe,
    },
    (ev) => supervisor.healthChanged(ev.id, ev.state, ev.reason),
  );
  const pool = new BackendPool([], config.proxy.passiveDownMs, {
    onPassive: (b, state, reason) => supervisor.passiveChanged(b, state, reason),
    onMembership: (added, removed) => supervisor.membershipChanged(added, removed),
  });
  const tunnels = new TunnelRegistry(pool);
  const placer = new Placer({
    store: stores.store,
    pool,
    tunnels,
    logger,
    noRoom: config.room.noRoom,
    boundFactor: config.placement.boundedLoadFactor,
    loadMetric: config.placement.loadMetric,
    retryAfterS: config.proxy.retryAfterS,
    onDown: config.health.onDown,
    cacheTtlMs: config.placement.cacheTtlMs,
    idleTtlMs: config.placement.idleTtlMs,
    maxIdleRooms: config.placement.maxIdleRooms,
    onEvicted: (n) => metrics.idleRoomsEvicted.inc({ where: 'cache' }, n),
    recoveryRingMs: config.placement.gatewayTtlMs,
    onPlaced: (room, from, to, forced, liveMoved, cause) => supervisor.placed(room, from, to, forced, liveMoved, cause),
    onMovedElsewhere: (room, from, to) => supervisor.movedElsewhere(room, from, to),
    onDegraded: (degraded) => metrics.degraded.set(degraded ? 1 : 0),
  });
  const events = new EventLog();
  supervisor = new Supervisor({
    pool,
    tunnels,
    placer,
    sharedData: stores.sharedData,
    events,
    health,
    metrics,
    logger,
    onDown: config.health.onDown,
    heartbeatMs: config.placement.heartbeatMs,
    presenceTtlMs: config.presence.ttlMs,
  });
  stores.store.subscribe((ev) => supervisor.storeEvent(ev));
  return { health, pool, tunnels, placer, supervisor, events, pushLog: new PushLog(), backendCalls: new BackendCalls(config.backendCalls.secrets, metrics.backendCalls) };
}

/** discovery.dns: the backend list from DNS, replacing the pool's on every change; null when not configured. */
export function buildDiscovery(config: LoadedConfig, pool: BackendPool, logger: Logger): DnsDiscovery | null {
  const dns = config.discovery.dns;
  if (!dns) return null;
  return new DnsDiscovery(
    { name: dns.name, type: dns.type, port: dns.port, scheme: dns.scheme, intervalMs: dns.intervalMs, servers: dns.servers },
    (backends) => pool.setBackends(backends),
    (err) => logger.warn({ err: err.message }, 'DNS discovery failed; keeping the last backend list'),
  );
}

/** Live sockets per backend, for the socket gauge (read at scrape time). */
export function backendSockets(pool: BackendPool): [string, number][] {
  return pool.backends.map((b) => [b.id, b.liveSockets] as [string, number]);
}

/** What the backend gauges report (read at scrape time). */
export function backendGaugeReadings(pool: BackendPool): BackendGaugeReading[] {
  const now = Date.now();
  return pool.backends.map((b) => ({
    id: b.id,
    state: b.state(now),
    rooms: b.rooms,
    drainDeadline: b.admin?.state === 'draining' ? b.admin.deadline : null,
  }));
}
