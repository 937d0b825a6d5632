// What the control plane (admin API, public API, pages: src/control/) is given: the runtime view,
// its one port onto the running gateway (snapshots, push delivery, named commands), and the
// status page's history of figures.
import type { BackendTls } from '../backends/backend-tls.js';
import type { PageCache } from '../cache/page-cache.js';
import type { RelayChoice } from '../proxy/native-relay.js';
import type { LoadedConfig } from '../config/load.js';
import { ControlPlane } from '../control/control-plane.js';
import { counterTotals } from '../observability/history-reading.js';
import { History, type HistoryReading } from '../observability/history.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { createHandoffRuntime, type HandoffRuntime } from '../runtime/handoff-setup.js';
import { isLiveRoom, liveRoomsOf } from '../runtime/live-rooms.js';
import type { BackendPool } from '../runtime/pool.js';
import { PushDelivery } from '../runtime/push.js';
import { createRuntimeView } from '../runtime/runtime-view.js';
import type { RuntimeView } from '../runtime/views.js';
import type { Runtime } from './runtime.js';
import type { Stores } from './stores.js';

export interface ControlDeps {
  readonly gatewayId: string;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly backendTls: BackendTls;
  readonly stores: Stores;
  readonly runtime: Runtime;
  /** The page cache, made later with the data plane (null when off). */
  readonly cache: () => PageCache | null;
  /** Which relay carries open tunnels, made later with the data plane. */
  readonly relay: () => RelayChoice | null;
  /** Sections the last reload changed that only a restart applies (the status page says so). */
  readonly restartNeeded: () => readonly string[];
  readonly isReady: () => boolean;
  /** A cluster worker: the key of the client address its primary forwards (src/http/forwarded-peer.ts). */
  readonly adminPeerKey?: string;
}

export interface ControlSide {
  readonly history: History;
  readonly view: RuntimeView;
  /** The admin API, the public API and the pages, on fastify; proxied traffic never reaches it. */
  readonly control: ControlPlane;
  /** Room handoffs: moves and drains with the rooms' state (src/runtime/handoff*.ts). */
  readonly handoff: HandoffRuntime;
}

export function buildControlSide(config: LoadedConfig, deps: ControlDeps): ControlSide {
  const { metrics, logger, runtime, stores } = deps;
  const history = new History({ read: () => historyReading(metrics, runtime.pool, deps.cache) });
  const handoff = createHandoffRuntime(config, {
    placer: runtime.placer,
    pool: runtime.pool,
    store: stores.store,
    tunnels: runtime.tunnels,
    sharedData: stores.sharedData,
    backendTls: deps.backendTls,
    gatewayId: deps.gatewayId,
    calls: runtime.backendCalls,
    metrics,
    logger,
  });
  // Rebalancing moves rooms to a backend that joins or comes back.
  runtime.supervisor.onBackendBack((id) => handoff.backendBack(id));
  const view = createRuntimeView({
    history: () => history.snapshot(),
    handoff,
    push: buildPushDelivery(config, deps),
    cache: deps.cache,
    relay: deps.relay,
    restartNeeded: deps.restartNeeded,
    announcePurge: (purge) => stores.sharedData.publishCachePurge(purge),
    gatewayId: deps.gatewayId,
    pool: runtime.pool,
    tunnels: runtime.tunnels,
    placer: runtime.placer,
    events: runtime.events,
    pushes: runtime.pushLog,
    backendCalls: runtime.backendCalls,
    store: stores.store,
    health: runtime.health,
    metrics,
    isReady: deps.isReady,
  });
  const control = new ControlPlane({ config, view, sharedData: stores.sharedData, logger, onAuthThrottled: (surface) => metrics.authThrottled.inc({ surface }), adminPeerKey: deps.adminPeerKey });
  return { history, view, control, handoff };
}

function buildPushDelivery(config: LoadedConfig, deps: ControlDeps): PushDelivery {
  const { runtime, stores } = deps;
  return new PushDelivery({
    placer: runtime.placer,
    pool: runtime.pool,
    backendTls: deps.backendTls,
    path: config.push.path,
    calls: runtime.backendCalls,
    timeoutMs: config.push.timeoutMs,
    retryAfterS: config.proxy.retryAfterS,
    metrics: deps.metrics,
    logger: deps.logger,
    maxFanoutRooms: config.push.maxFanoutRooms,
    requireLive: config.push.requireLive,
    log: runtime.pushLog,
    isLive: isLiveRoom(stores.sharedData),
    liveRooms: liveRoomsOf(stores.sharedData),
  });
}

/** One sample of the status page's history: counters kept anyway, figures as they are now. */
async function historyReading(metrics: Metrics, pool: BackendPool, cache: () => PageCache | null): Promise<HistoryReading> {
  const totals = await counterTotals(metrics);
  const c = cache()?.snapshot();
  const hits = c ? c.counts.hit + c.counts.stale + c.counts['stale-if-error'] + c.counts.coalesced : 0;
  return {
    ...totals,
    backends: pool.backends.map((b) => ({ id: b.id, sockets: b.liveSockets, rooms: b.rooms })),
    cache: c ? { hits, answers: hits + c.counts.miss } : null,
  };
}
