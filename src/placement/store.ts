// The placement store: where rooms live (room -> backend, with an epoch), the administrative
// state of backends (draining, maintenance), and which rooms each gateway holds live sockets of.
// In memory for a single gateway (the embedded default), Redis for several.

export interface PlacementRecord {
  readonly backend: string;
  /** Taken from one counter on every change of the room's backend, never repeating; compare-and-set is on this. */
  readonly epoch: number;
}

export type PlaceResult =
  | { readonly ok: true; readonly placement: PlacementRecord }
  /** Someone else changed the room first: route to `current` (decide again with it). */
  | { readonly ok: false; readonly reason: 'lost-race'; readonly current: PlacementRecord | null }
  /** A move away from a backend that another gateway still holds (or may hold: a young placement) live sockets of the room on. */
  | { readonly ok: false; readonly reason: 'busy'; readonly current: PlacementRecord };

export type AdminState = 'active' | 'draining' | 'maintenance';
export interface BackendAdminState {
  readonly state: AdminState;
  /** Draining: when remaining sockets are closed and the rooms placed elsewhere (ms since epoch). */
  readonly deadline: number | null;
  readonly since: number;
}

export type StoreEvent =
  | { readonly type: 'placement'; readonly room: string; readonly placement: PlacementRecord | null }
  | { readonly type: 'backend-state'; readonly id: string; readonly state: BackendAdminState | null }
  | { readonly type: 'available'; readonly available: boolean };

/** A room this gateway holds live sockets of, and on which backend. */
export interface LiveRoom {
  readonly room: string;
  readonly backend: string;
  readonly sockets: number;
}

/**
 * The changes of a gateway's live rooms since its previous report: `rooms` replace those rooms'
 * entries (a room is reported on the backend of its last entry), `gone` are rooms with no live
 * socket left through the gateway.
 */
export interface LiveDelta {
  readonly rooms: readonly LiveRoom[];
  readonly gone: readonly string[];
}

/**
 * A heartbeat's report: every live room (an array: replaces the previous report), the changes
 * since the previous report (a LiveDelta), or null: nothing changed.
 */
export type LiveReport = readonly LiveRoom[] | LiveDelta | null;

/**
 * What a heartbeat answers: 'ok', or 'resync' when the store does not hold this gateway's
 * previous report (it expired, Redis lost it, or a reconnect may have lost a write), so a delta or
 * an unchanged report cannot be applied: the caller sends a full report (an array) at once.
 */
export type HeartbeatAnswer = 'ok' | 'resync';

export function isFullReport(report: LiveReport): report is readonly LiveRoom[] {
  return Array.isArray(report);
}

export interface PlaceOptions {
  /**
   * Move even if other gateways hold live sockets on the current backend: used only when no
   * gateway will close them (the backend was removed from the list, or is unknown), never for a
   * local view. A drain deadline or maintenance does not force: every gateway closes its sockets
   * there and reports the room gone, and the move waits for that.
   */
  readonly force: boolean;
  /**
   * The epoch to write, taken before with reserveEpoch(): a room handoff tells the new owner its
   * epoch before the move (docs/handoff.md). Absent: the next one from the counter.
   */
  readonly epoch?: number;
}

export interface PlacementStore {
  readonly kind: 'memory' | 'redis';
  /** False while the store cannot be reached (Redis down); every call then rejects fast. */
  readonly available: boolean;
  /** Opens connections (Redis); resolves at once for stores that have none. Rejects if unreachable now: not fatal, the store keeps trying. */
  connect(): Promise<void>;
  get(room: string): Promise<PlacementRecord | null>;
  /**
   * Compare-and-set: puts the room on `backend` if its current epoch is `expectedEpoch`
   * (0 = no placement). A move (current backend differs and is not expired) is refused as 'busy'
   * while another live gateway reports sockets of the room on the current backend, unless forced.
   * With no placement but another gateway reporting the room live on another backend, that
   * backend is adopted and returned as 'lost-race'. Epochs never repeat. A rejected call may
   * still have been applied (a Redis timeout): callers read again rather than assume.
   */
  place(room: string, backend: string, expectedEpoch: number, opts: PlaceOptions): Promise<PlaceResult>;
  /**
   * Takes the next epoch from the counter without placing anything, for a place() that follows
   * (PlaceOptions.epoch). Above every epoch handed out before, so a room's epoch still only grows.
   */
  reserveEpoch(): Promise<number>;
  /**
   * This gateway's live rooms, sent every heartbeat: keeps their placements from expiring,
   * re-creates missing ones (data loss), and tells other gateways which rooms are busy where.
   * A full report (an array) replaces the previous one; a delta changes only the rooms it names;
   * null (unchanged) only stamps this gateway alive, which keeps every room of its report live.
   * Its cost follows the rooms it names, not the number of live rooms. Answers 'resync' when the
   * store cannot apply a delta or null (it does not hold the previous report): send a full one.
   */
  heartbeat(report: LiveReport): Promise<HeartbeatAnswer>;
  /** Placed, unexpired rooms per backend (bounded loads). */
  roomsPerBackend(): Promise<Map<string, number>>;
  setBackendState(id: string, state: BackendAdminState | null): Promise<void>;
  backendStates(): Promise<Map<string, BackendAdminState>>;
  /** Changes made by any gateway (including this one) and availability changes. */
  subscribe(listener: (ev: StoreEvent) => void): () => void;
  close(): Promise<void>;
}

export interface StoreTiming {
  /** A placement with no live socket anywhere expires this long after it was last live or placed. */
  readonly idleTtlMs: number;
  /** A gateway that has not sent a heartbeat for this long no longer counts (its sockets are gone). */
  readonly gatewayTtlMs: number;
  /**
   * placement.maxIdleRooms: placements of rooms no gateway reports live are evicted beyond this
   * many, least recently placed or kept alive first (absent: no cap). A room reported live, or
   * placed less than gatewayTtlMs ago while another gateway is alive (its sockets may not be
   * reported yet), is never evicted: the count can exceed the cap by those.
   */
  readonly maxIdleRooms?: number;
  /** Called with the number of placements a write of this handle evicted (metrics). */
  readonly onEvicted?: (count: number) => void;
}
