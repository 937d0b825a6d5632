// The routing decision: which backend a request goes to, and whether the room must be placed.
// Pure and synchronous: no I/O, no clock reads, no randomness (the tie-break seed is passed in),
// so every rule below is tested without sockets.
//
// 1. A room whose placement is on a routable backend goes there, always ("sticky"): live rooms
//    never move when backends join, recover or change weight, and bounded loads never apply.
// 2. A room without a usable placement is placed by walking the ring from hash(room) over
//    backends that accept new rooms, skipping those at or above their bounded-load capacity
//    ceil(c * (total + 1) * weight / totalWeight) (Mirrokni, Thorup, Zadimoghaddam).
// 3. The caller writes the placement with compare-and-set; a move away from a backend that is
//    only unreachable in this gateway's view is not forced, so the store refuses it while other
//    gateways still hold the room's sockets there (no split across gateways with different views).
// 4. Rooms stay whole (health.onDown: keep): a room whose backend is down only by its active
//    health checks, and of which this gateway still holds live sockets there, keeps going there.
//    Those sockets carry frames, which is better evidence than a failed check; placing the
//    room's next socket elsewhere would split the room.
import type { Ring } from './ring.js';
import type { PlacementRecord } from './store.js';

export interface BackendView {
  readonly id: string;
  /** May carry traffic of rooms already placed on it. */
  readonly routable: boolean;
  /** May be given new rooms (routable, not draining, weight > 0). */
  readonly acceptsNew: boolean;
  /** Gone for every gateway (maintenance, removed, drain deadline passed): its rooms may be moved while live. */
  readonly gone: boolean;
  /** Removed from the list: it keeps its sockets (no gateway closes them), so moves off it do not wait for them. */
  readonly removed: boolean;
  /**
   * Not routable only because its active health checks failed: no passive mark (a refused
   * connection), not gone.
   */
  readonly checksDownOnly: boolean;
  readonly weight: number;
  /** Bounded-load figure: rooms (all gateways) or sockets, as configured. */
  readonly load: number;
  /** This gateway's live sockets and in-flight requests: what "least loaded" compares. */
  readonly busy: number;
}

export interface DecideView {
  readonly ring: Ring;
  /** Views in a stable order (configuration order). */
  readonly backends: readonly BackendView[];
  /** The room's current placement, as fetched from the store or cache; null if none. */
  readonly placement: PlacementRecord | null;
  /** This gateway holds live sockets of the room on the placement's backend. */
  readonly liveOnPlacement: boolean;
  /** health.onDown: 'keep' routes a room with live sockets here to its checks-down backend (rule 4). */
  readonly onDown: 'keep' | 'close';
  readonly noRoom: 'least-loaded' | 'reject';
  /** Bounded-load factor c (>= 1); 0 turns bounded loads off (pure ring). */
  readonly boundFactor: number;
  /** Rotates the start of the least-loaded search so ties do not all land on the first backend. */
  readonly tieBreak: number;
  readonly retryAfterS: number;
}

/** sticky-live: rule 4, the backend fails its health checks but the room's live sockets here are there. */
export type RouteReason = 'sticky' | 'sticky-live' | 'ring' | 'ring-skip' | 'bounded-skip' | 'no-room';

export interface PlaceIntent {
  /** Compare-and-set against this epoch (0: the room has no placement). */
  readonly expectedEpoch: number;
  /** The backend the room leaves, if it had one. */
  readonly from: string | null;
  /** `from` is gone for everyone (maintenance, removed, unknown, drain deadline passed): a forced move, even of a live room. */
  readonly force: boolean;
  /**
   * Move at once, even while gateways (this one included) hold live sockets of the room on `from`:
   * only when no gateway will close them (a backend removed from the list keeps its sockets; an
   * unknown one is nobody's to close). Every other move waits (room-busy) until no gateway reports
   * the room live there. At a drain deadline or maintenance each gateway closes its sockets on the
   * backend in its next heartbeat and reports the room gone in the same heartbeat, so the moved
   * room's new sockets never meet old ones still open through a gateway that has not got there yet.
   */
  readonly overrideLive: boolean;
}

export type Decision =
  | {
      readonly route: string;
      readonly reason: RouteReason;
      readonly place?: PlaceIntent;
      /**
       * Set by the Placer for a room's request: the epoch of the placement that sends the room to
       * `route` (what the backend is told, X-Roomgate-Epoch), 0 when no stored placement does
       * (routed by the ring while the store is unreachable, before any placement was known).
       */
      readonly epoch?: number;
    }
  | { readonly reject: 503; readonly reason: 'no-backend' | 'room-busy'; readonly retryAfterS: number }
  | { readonly reject: 400; readonly reason: 'no-room' };

export function decide(room: string | null, view: DecideView): Decision {
  if (room === null) {
    if (view.noRoom === 'reject') return { reject: 400, reason: 'no-room' };
    const id = leastBusy(view.backends, view.tieBreak);
    return id === undefined ? noBackend(view) : { route: id, reason: 'no-room' };
  }
  const p = view.placement;
  let from: BackendView | undefined;
  if (p !== null) {
    from = find(view.backends, p.backend);
    if (from?.routable) return { route: p.backend, reason: 'sticky' };
    if (from?.checksDownOnly && view.onDown === 'keep' && view.liveOnPlacement) return { route: p.backend, reason: 'sticky-live' };
  }
  // A placement on a backend nobody knows any more is as gone as a removed one.
  const unclosed = p !== null && (from === undefined || from.removed);
  const place: PlaceIntent = {
    expectedEpoch: p?.epoch ?? 0,
    from: p?.backend ?? null,
    force: unclosed || from?.gone === true,
    overrideLive: unclosed,
  };
  const chosen = placeOnRing(room, view);
  if (chosen === undefined) return noBackend(view);
  return { route: chosen.id, reason: chosen.reason, place };
}

function placeOnRing(room: string, view: DecideView): { id: string; reason: RouteReason } | undefined {
  const { backends, ring } = view;
  const owner = ring.first(room);
  const firstAccepting = ring.first(room, (id) => find(backends, id)?.acceptsNew === true);
  if (firstAccepting === undefined) return undefined;
  const baseReason: RouteReason = firstAccepting === owner ? 'ring' : 'ring-skip';
  if (view.boundFactor <= 0) return { id: firstAccepting, reason: baseReason };

  let total = 0;
  let totalWeight = 0;
  for (const b of backends) {
    if (!b.acceptsNew) continue;
    total += b.load;
    totalWeight += b.weight;
  }
  const fits = (id: string): boolean => {
    const b = find(backends, id);
    if (b === undefined || !b.acceptsNew) return false;
    const capacity = Math.ceil((view.boundFactor * (total + 1) * b.weight) / totalWeight);
    return b.load + 1 <= capacity;
  };
  const bounded = ring.first(room, fits);
  // With c >= 1 some backend always fits; if rounding says otherwise, fall back to the ring.
  if (bounded === undefined || bounded === firstAccepting) return { id: firstAccepting, reason: baseReason };
  return { id: bounded, reason: 'bounded-skip' };
}

function noBackend(view: DecideView): Decision {
  return { reject: 503, reason: 'no-backend', retryAfterS: view.retryAfterS };
}

function find(backends: readonly BackendView[], id: string): BackendView | undefined {
  for (const b of backends) if (b.id === id) return b;
  return undefined;
}

function leastBusy(backends: readonly BackendView[], tieBreak: number): string | undefined {
  const n = backends.length;
  let best: BackendView | undefined;
  for (let k = 0; k < n; k++) {
    const b = backends[(k + tieBreak) % n];
    if (b === undefined || !b.acceptsNew) continue;
    if (best === undefined || b.busy < best.busy) best = b;
  }
  return best?.id;
}
