// Which rooms the public reads may name (docs/security.md, "The lobby lists only listed rooms"): a
// room is listed when the app listed it through its metadata (PUT /_roomgate/api/rooms/{room}/meta,
// `listed` true, the default) or when its key matches one of the operator's globs (api.listRooms).
// Every other room key stays private: a per-tab key used as a capability is never enumerable. This
// file is the one definition of that rule; the stores (lobby filter), the public API (one room,
// the stream) and the lobby page all ask it, and show a room or the online counts without backend ids.
import type { Listing, LobbyPage, LobbyRoom, Online } from './store.js';

export type { Listing };

const compiled = new Map<string, RegExp>();
/** Compiled globs kept at most (they come from the configuration: a handful). */
const MAX_COMPILED = 1_000;

/** A glob as an anchored regular expression: `*` is `.*`, everything else literal. */
export function globRegExp(glob: string): RegExp {
  let re = compiled.get(glob);
  if (!re) {
    const body = glob
      .split('*')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&'))
      .join('.*');
    re = new RegExp(`^${body}$`, 's');
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(glob, re);
  }
  return re;
}

/** Whether a room key matches one of the globs. */
export function keyListed(patterns: readonly string[], room: string): boolean {
  for (const p of patterns) if (globRegExp(p).test(room)) return true;
  return false;
}

/** Whether the public reads may show a room: listed by its metadata, or its key matches a glob. */
export function isListed(listing: Listing, room: string, metaListed: boolean): boolean {
  return metaListed || keyListed(listing.patterns, room);
}

/** A room as the public reads show it: no backend id (the admin port has it). */
export type PublicRoom = Omit<LobbyRoom, 'backend'>;

/** The online counts as the public reads show them: no backend id. */
export interface PublicOnline {
  readonly total: number;
  readonly rooms: number;
}

/** A listed room without its backend (built field by field: nothing new in LobbyRoom leaks by itself). */
export function publicRoom(r: LobbyRoom): PublicRoom {
  return { room: r.room, sockets: r.sockets, since: r.since, meta: r.meta, pinned: r.pinned, listed: r.listed };
}

export function publicOnline(o: Online): PublicOnline {
  return { total: o.total, rooms: o.rooms };
}

/** One lobby page (read with a `listing`) without backend ids. */
export function publicPage(p: LobbyPage): { readonly rooms: readonly PublicRoom[]; readonly total: number; readonly nextOffset: number | null } {
  return { rooms: p.rooms.map(publicRoom), total: p.total, nextOffset: p.nextOffset };
}
