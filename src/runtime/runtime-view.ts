// The RuntimeView the control plane takes: snapshots made from the runtime's own objects on each
// call, and the two commands it may give (drain/maintenance state, where-is-room).
import type { HistorySnapshot } from '../observability/history.js';
import type { Metrics } from '../observability/metrics.js';
import type { CachePurge } from '../shared-data/store.js';
import type { BackendAdminState, PlacementStore } from '../placement/store.js';
import type { EventLog } from './events.js';
import type { BackendCalls } from './backend-calls.js';
import type { PushLog } from './push-log.js';
import type { Placer } from './placer.js';
import type { PushDelivery } from './push.js';
import type { HandoffRuntime } from './handoff-setup.js';
import type { BackendPool } from './pool.js';
import type { TunnelRegistry } from './tunnels.js';
import type { BackendSnapshot, CacheSnapshot, GatewaySnapshot, HealthCheckResult, RuntimeView } from './views.js';

/** What the view reads of the page cache (src/cache/page-cache.ts). */
export interface CacheView {
  snapshot(): CacheSnapshot;
  purge(purge: CachePurge): number;
}

export interface RuntimeViewParts {
  readonly gatewayId: string;
  readonly pool: BackendPool;
  readonly tunnels: TunnelRegistry;
  readonly placer: Placer;
  readonly events: EventLog;
  readonly pushes: PushLog;
  readonly backendCalls: BackendCalls;
  readonly store: PlacementStore;
  readonly health: { history(id: string): readonly HealthCheckResult[] };
  readonly metrics: Pick<Metrics, 'registry'>;
  readonly isReady: () => boolean;
  /** The page cache, or null when it is off (a getter: it is built after the view). */
  readonly cache: () => CacheView | null;
  /** Carries a purge to the other gateways (the shared-data store's pub/sub). */
  readonly announcePurge: (purge: CachePurge) => Promise<void>;
  readonly push: PushDelivery;
  /** The sections the last reload left for a restart (Gateway.reload); absent: none. */
  readonly restartNeeded?: () => readonly string[];
  /** Which relay carries open tunnels (absent or null: not built yet). */
  readonly relay?: () => GatewaySnapshot['relay'] | null;
  readonly history: () => HistorySnapshot;
  readonly handoff: HandoffRuntime;
}

/** Sets a backend's administrative state for every gateway sharing the store, and here at once. */
export async function setAdminState(store: PlacementStore, pool: BackendPool, id: string, state: BackendAdminState | null): Promise<void> {
  await store.setBackendState(id, state);
  pool.setAdmin(id, state);
}

/** The relay line of /status: which one runs, as configured, and why. */
function relayOf(r: GatewaySnapshot['relay'] | null | undefined): { relay?: GatewaySnapshot['relay'] } {
  return r == null ? {} : { relay: { relay: r.relay, configured: r.configured, why: r.why } };
}

export function createRuntimeView(p: RuntimeViewParts): RuntimeView {
  const snapshot = (id: string, now: number): BackendSnapshot | null => {
    const b = p.pool.get(id);
    if (!b) return null;
    return {
      id: b.id,
      url: b.config.url,
      weight: b.config.weight,
      state: b.state(now),
      health: b.health,
      passiveDownUntil: b.downUntil > now ? b.downUntil : null,
      admin: b.admin,
      removed: b.removed,
      rooms: b.rooms,
      sockets: b.liveSockets,
      inflight: b.inflight,
      healthHistory: p.health.history(b.id),
      handoffHooks: p.handoff.support(b.id),
    };
  };
  return {
    gateway: () => ({
      gatewayId: p.gatewayId,
      store: p.store.kind,
      degraded: p.placer.isDegraded,
      ready: p.isReady(),
      sockets: p.tunnels.size,
      rooms: p.tunnels.roomCount,
      restartNeeded: p.restartNeeded?.() ?? [],
      ...relayOf(p.relay?.() ?? null),
    }),
    backends: (now) => p.pool.backends.map((b) => snapshot(b.id, now) as BackendSnapshot),
    backend: snapshot,
    events: () => p.events.list(),
    pushes: () => p.pushes.list(),
    backendCalls: () => p.backendCalls.recent(),
    explainRoom: async (room, now) => {
      const e = await p.placer.explain(room, now, false);
      const d = e.decision;
      return {
        room,
        placement: e.placement,
        cached: e.cached,
        backend: 'route' in d ? d.route : null,
        reason: d.reason,
        wouldPlace: 'route' in d && d.place !== undefined,
        socketsHere: p.tunnels.socketsInRoom(room),
      };
    },
    setAdminState: (id, state) => setAdminState(p.store, p.pool, id, state),
    metrics: async () => ({ contentType: p.metrics.registry.contentType, text: await p.metrics.registry.metrics() }),
    pushToRoom: (room, body, sender) => p.push.deliver(room, body, sender, Date.now()),
    pushToLiveRooms: (prefix, message, sender) => p.push.fanOut(prefix, message, sender, Date.now()),
    cache: () => p.cache()?.snapshot() ?? null,
    history: () => p.history(),
    purgeCache: async (purge) => {
      const purged = p.cache()?.purge(purge) ?? 0;
      const shared = await p.announcePurge(purge).then(
        () => true,
        () => false,
      );
      return { purged, shared };
    },
    handoffs: () => p.handoff.snapshot(),
    moveRoom: (room, to, id) => p.handoff.move(room, to, id),
    drainWithHandoff: (backend) => p.handoff.drain(backend),
  };
}
