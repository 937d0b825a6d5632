// The routing decision: which backend a request goes to. Pure and synchronous: no I/O, no clock
// reads, no randomness (the tie-break seed is passed in), so it is tested without sockets.
import type { Ring } from './ring.js';

export interface BackendView {
  readonly id: string;
  /** Up and not passively marked down: may receive traffic. */
  readonly routable: boolean;
  /** Live sockets plus in-flight requests: what "least loaded" compares. */
  readonly load: number;
}

export interface DecideView {
  readonly ring: Ring;
  /** Views in a stable order (configuration order). */
  readonly backends: readonly BackendView[];
  readonly noRoom: 'least-loaded' | 'reject';
  /** Rotates the start of the least-loaded search so ties do not all land on the first backend. */
  readonly tieBreak: number;
  readonly retryAfterS: number;
}

export type RouteReason = 'ring' | 'ring-skip' | 'no-room';
export type Decision =
  | { readonly route: string; readonly reason: RouteReason }
  | { readonly reject: 503; readonly reason: 'no-backend'; readonly retryAfterS: number }
  | { readonly reject: 400; readonly reason: 'no-room' };

export function decide(room: string | null, view: DecideView): Decision {
  if (room === null) {
    if (view.noRoom === 'reject') return { reject: 400, reason: 'no-room' };
    const id = leastLoaded(view.backends, view.tieBreak);
    return id === undefined ? noBackend(view) : { route: id, reason: 'no-room' };
  }
  const owner = view.ring.first(room);
  if (owner === undefined) return noBackend(view);
  if (isRoutable(view.backends, owner)) return { route: owner, reason: 'ring' };
  // The owner cannot take traffic: the next routable backend on the ring does, so a room's
  // fallback is the same on every gateway.
  const next = view.ring.first(room, (id) => isRoutable(view.backends, id));
  return next === undefined ? noBackend(view) : { route: next, reason: 'ring-skip' };
}

function noBackend(view: DecideView): Decision {
  return { reject: 503, reason: 'no-backend', retryAfterS: view.retryAfterS };
}

function isRoutable(backends: readonly BackendView[], id: string): boolean {
  for (const b of backends) if (b.id === id) return b.routable;
  return false;
}

function leastLoaded(backends: readonly BackendView[], tieBreak: number): string | undefined {
  const n = backends.length;
  let best: BackendView | undefined;
  for (let k = 0; k < n; k++) {
    const b = backends[(k + tieBreak) % n];
    if (b === undefined || !b.routable) continue;
    if (best === undefined || b.load < best.load) best = b;
  }
  return best?.id;
}
