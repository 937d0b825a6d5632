// The offline answer of `roomgate where` (src/cli/commands/where.ts): the ring owner a NEW room
// would get with every backend up, from the configuration. Loaded only when no gateway answers
// (or with --offline, --backend): the configuration's schema is most of what a CLI call loads.
import { withDemoBackends } from '../../demo/demo-mode.js';
import { decide } from '../../placement/decide.js';
import { buildRing } from '../../placement/ring.js';
import { createRoomValidator } from '../../room/validate.js';
import type { Values } from '../args.js';
import { configSource, loadFrom } from '../config.js';
import { invalidRoomMessage } from '../rooms.js';

/** Where a room is (source "gateway") or would go as a new room (source "ring"). */
export interface Placed {
  readonly room: string;
  readonly backend: string | null;
  readonly url: string | null;
  /** decide()'s reason: sticky, sticky-live, ring, ring-skip, bounded-skip, no-backend, room-busy. */
  readonly reason: string;
  /** The room's placement in the store ({backend, epoch}), null if it has none (or offline). */
  readonly placement: { readonly backend: string; readonly epoch: number } | null;
  /** The room's next request would write a placement (it has none, or it must move). */
  readonly wouldPlace: boolean;
  /** This gateway's live sockets of the room (null offline). */
  readonly socketsHere: number | null;
  readonly source: 'gateway' | 'ring';
}

export interface Failed {
  readonly room: string;
  readonly error: string;
  /** 2: the key is invalid; 1: the gateway failed to answer. */
  readonly code: 1 | 2;
}

export type Row = Placed | Failed;

/** The ring owner a new room would get, every backend up and no load (what `start` would do first). */
export function ringOwners(values: Values, rooms: readonly string[]): Row[] {
  const c = withDemoBackends(loadFrom(configSource(values)));
  const ring = buildRing(c.backends.map((b) => ({ id: b.id, weight: b.weight })));
  const valid = createRoomValidator(c.room.pattern);
  const backends = c.backends.map((b) => ({ id: b.id, routable: true, acceptsNew: b.weight > 0, gone: false, removed: false, checksDownOnly: false, weight: b.weight, load: 0, busy: 0 }));
  return rooms.map((room): Row => {
    if (!valid(room)) return { room, error: invalidRoomMessage(c.room.pattern), code: 2 };
    const d = decide(room, { ring, backends, placement: null, liveOnPlacement: false, onDown: c.health.onDown, noRoom: 'reject', boundFactor: 0, tieBreak: 0, retryAfterS: 1 });
    if (!('route' in d)) return { room, error: 'no backend available', code: 1 };
    const url = c.backends.find((b) => b.id === d.route)?.url ?? null;
    return { room, backend: d.route, url, reason: d.reason, placement: null, wouldPlace: true, socketsHere: null, source: 'ring' };
  });
}
