// What the control plane (admin API, public API, pages) may see of the running gateway and the
// few things it may ask of it. The control plane takes a RuntimeView, never the Gateway or the
// live objects behind it: snapshots are plain data made on each call, commands are named.
import type { BackendCallRecord } from './backend-calls.js';
import type { BackendAdminState, PlacementRecord } from '../placement/store.js';
import type { CachePurge } from '../shared-data/store.js';
import type { FanoutOutcome, PushOutcome } from './push.js';
import type { PushEvent } from './push-log.js';
import type { HistorySnapshot } from '../observability/history.js';
import type { DrainProgress } from './handoff-drain.js';
import type { HookSupport } from './handoff-hello.js';
import type { HandoffEvent } from './handoff-log.js';
import type { HandoffSnapshot } from './handoff-setup.js';
import type { RebalanceState } from './rebalance.js';
import type { HandoffOutcome } from './handoff.js';

export type { PushEvent, DrainProgress, HandoffEvent, HandoffOutcome, HandoffSnapshot, HookSupport, RebalanceState };

export type BackendStateName = 'up' | 'down' | 'draining' | 'maintenance';

export interface HealthCheckResult {
  readonly at: number;
  readonly ok: boolean;
  readonly ms: number;
  readonly error?: string;
}

/** One backend as this gateway knows it now. */
export interface BackendSnapshot {
  readonly id: string;
  /** Internal address: shown on the admin port only. */
  readonly url: string;
  readonly weight: number;
  readonly state: BackendStateName;
  /** The active health checks' verdict. */
  readonly health: 'up' | 'down';
  /** Passively marked down (refused a connection) until then, ms since epoch; null when not. */
  readonly passiveDownUntil: number | null;
  /** Draining / maintenance, shared by every gateway through the store. */
  readonly admin: BackendAdminState | null;
  /** Gone from the configured or discovered list, kept while sockets use it. */
  readonly removed: boolean;
  /** Rooms placed on it (all gateways). */
  readonly rooms: number;
  /** Live sockets through this gateway. */
  readonly sockets: number;
  /** HTTP requests in flight through this gateway. */
  readonly inflight: number;
  readonly healthHistory: readonly HealthCheckResult[];
  /** Whether it serves the room handoff hooks (its hello answer, asked when unknown or old). */
  readonly handoffHooks: HookSupport;
}

export interface GatewaySnapshot {
  readonly gatewayId: string;
  readonly store: 'memory' | 'redis';
  /** The placement store is unreachable: routing from cache and ring. */
  readonly degraded: boolean;
  readonly ready: boolean;
  /** This gateway's live sockets and the rooms they belong to. */
  readonly sockets: number;
  readonly rooms: number;
  /** Configuration sections a reload (SIGHUP) changed that only a restart applies ("cache", "listen"); absent: none. */
  readonly restartNeeded?: readonly string[];
  /** Which relay carries open tunnels (proxy.relay): native or javascript, as configured, and why. */
  readonly relay?: { readonly relay: 'native' | 'javascript'; readonly configured: 'auto' | 'native' | 'javascript'; readonly why: string };
}

/** The page cache's figures (per process). */
export interface CacheSnapshot {
  readonly enabled: boolean;
  readonly objects: number;
  readonly bytes: number;
  readonly maxBytes: number;
  /** Answers that cost the backend nothing (hits fresh or stale, coalesced) over all answers given by the cache; null before any. */
  readonly hitRatio: number | null;
  readonly counts: Readonly<Record<'hit' | 'stale' | 'stale-if-error' | 'miss' | 'coalesced' | 'bypass', number>>;
  /** Backend fetches in flight. */
  readonly fetching: number;
}

export type BackendEventKind = 'joined' | 'removed' | 'up' | 'down' | 'draining' | 'maintenance' | 'active' | 'drain-deadline' | 'handoff' | 'rebalance';

export interface BackendEventView {
  /** ISO 8601. */
  readonly at: string;
  readonly kind: BackendEventKind;
  readonly backend: string;
  readonly detail: string;
  /** Rooms that left this event's backend after it (until its next event). */
  readonly roomsMoved: number;
  /** Of those, rooms with live sockets there through this gateway when they moved or in the minute before (a failover). */
  readonly liveRoomsMoved: number;
}

/** Where a room is and why, without placing it. */
export interface RoomExplanation {
  readonly room: string;
  readonly placement: PlacementRecord | null;
  /** The answer came from this gateway's cache, not the store. */
  readonly cached: boolean;
  /** Where its next request would go; null when it would be refused. */
  readonly backend: string | null;
  readonly reason: string;
  /** The next request would place (or move) the room. */
  readonly wouldPlace: boolean;
  /** Live sockets of the room through this gateway. */
  readonly socketsHere: number;
}

export interface RuntimeView {
  gateway(): GatewaySnapshot;
  /** Configuration order; removed backends included while they carry sockets. */
  backends(nowMs: number): readonly BackendSnapshot[];
  backend(id: string, nowMs: number): BackendSnapshot | null;
  /** Oldest first. */
  events(): readonly BackendEventView[];
  /** The most recent pushes and fan-outs through this gateway, oldest first. */
  pushes(): readonly PushEvent[];
  /** The latest signed calls this gateway made to backends (pushes, handoff hooks), oldest first. */
  backendCalls(): readonly BackendCallRecord[];
  explainRoom(room: string, nowMs: number): Promise<RoomExplanation>;
  /** Drain, maintenance or back to active, for every gateway sharing the store. Rejects when the store is unreachable. */
  setAdminState(id: string, state: BackendAdminState | null): Promise<void>;
  /** Prometheus text exposition. */
  metrics(): Promise<{ readonly contentType: string; readonly text: string }>;
  /** Delivers a message to the backend that holds the room (never places it). */
  pushToRoom(room: string, body: Buffer, sender: string): Promise<PushOutcome>;
  /** Delivers a message to every live room (with the prefix): one request per backend. */
  pushToLiveRooms(prefix: string | undefined, message: string, sender: string): Promise<FanoutOutcome>;
  /** The page cache's figures; null when it is off. */
  cache(): CacheSnapshot | null;
  /** The last 15 minutes of figures, for the status page's plots (the whole gateway with --workers). */
  history(): HistorySnapshot;
  /**
   * Removes page cache answers here and announces the purge to every gateway sharing the store.
   * `shared` is false when the store could not carry it (then only this gateway purged).
   */
  purgeCache(purge: CachePurge): Promise<{ readonly purged: number; readonly shared: boolean }>;
  /** Room handoffs through this gateway: running, recent, drains with handoff. */
  handoffs(): HandoffSnapshot;
  /** Moves a room to `to` with its state (docs/handoff.md); `id` makes a retry the same handoff. */
  moveRoom(room: string, to: string, id?: string): Promise<HandoffOutcome>;
  /** Starts handing off every live room of a draining backend (once; a running one is returned). */
  drainWithHandoff(backend: string): DrainProgress;
}
