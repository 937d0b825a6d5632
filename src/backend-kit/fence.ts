// The room and placement epoch roomgate routed a request or socket by (X-Roomgate-Room,
// X-Roomgate-Epoch: docs/ownership.md), the socket's id (X-Roomgate-Socket, protocol version 2),
// and the fence that holds sockets to them:
// - a socket under an epoch a handoff released here is accepted and closed at once with 1012, so
//   its client reconnects to the room's new owner;
// - a socket under an older epoch than the room is held under is refused before accept (403);
// - a mount of another room than the socket was routed for is refused once with close code 4400
//   (CLOSE_WRONG_ROOM): djust's client would reconnect to the same place after any close, so the
//   app's page must not reconnect after 4400, and a wrong mount never becomes a reconnect storm.
import type { IncomingHttpHeaders } from 'node:http';
import { field } from './proofs.js';
import type { RoomSocket, RoomTable } from './rooms.js';

/**
 * A room key as roomgate sends one: it checked it against room.pattern (default
 * ^[A-Za-z0-9_.:-]{1,128}$, configurable) and its 1024-character bound; checked again here for what
 * any pattern allows in a header, so a key is never used unchecked.
 */
export const ROOM_KEY = /^[\x21-\x7e]{1,1024}$/;
/** X-Roomgate-Socket: 22 base64url characters. */
export const SOCKET_ID = /^[A-Za-z0-9_-]{22}$/;
/** "Service restart": djust's client reconnects after it, and lands on the room's new owner. */
export const CLOSE_SERVICE_RESTART = 1012;
/** A mount of another room than the socket was routed for; the page must not reconnect after it. */
export const CLOSE_WRONG_ROOM = 4400;
/** The close reason of a room's sockets when a handoff moved the room (with 1012). */
export const ROOM_MOVED = 'room moved';

export interface Owner {
  /** null: the request came without a valid room key. */
  readonly room: string | null;
  /** 0 without a stored placement (or without a room). */
  readonly epoch: number;
}

/** The room and epoch roomgate routed by, from the two fields' text. */
export function ownerOf(headers: IncomingHttpHeaders): Owner {
  const room = field(headers, 'x-roomgate-room');
  if (room === undefined || !ROOM_KEY.test(room)) return { room: null, epoch: 0 };
  const epoch = field(headers, 'x-roomgate-epoch') ?? '';
  return { room, epoch: /^\d{1,16}$/.test(epoch) && Number.isSafeInteger(Number(epoch)) ? Number(epoch) : 0 };
}

/** X-Roomgate-Socket when it is one, else null (before protocol version 2, or not through roomgate). */
export function socketIdOf(headers: IncomingHttpHeaders): string | null {
  const id = field(headers, 'x-roomgate-socket');
  return id !== undefined && SOCKET_ID.test(id) ? id : null;
}

/** 'moved' (fenced: accept, close 1012), 'older' (refuse the handshake) or 'ok' for a socket of `o`. */
export function verdict(rooms: RoomTable<RoomSocket>, o: Owner): 'ok' | 'moved' | 'older' {
  if (o.room === null) return 'ok';
  if (rooms.fenced(o.room, o.epoch)) return 'moved';
  return rooms.note(o.room, o.epoch) === null ? 'older' : 'ok';
}

/**
 * Why a mount of room `wanted` (null: the page named none) is refused on a socket routed for
 * `routed`, or null. `requireRoute`: a socket that came without a room key is refused too (an app
 * behind roomgate only; off for an app that also takes sockets directly). The app sends its own
 * error frame with the text, then closes with CLOSE_WRONG_ROOM, once.
 */
export function mountRefusal(routed: string | null, wanted: string | null, requireRoute = true): string | null {
  if (routed === null) return requireRoute ? 'this socket came without a room key (no room cookie, /r/ROOM/ prefix or ?room=): reload the page' : null;
  if (wanted !== null && wanted !== routed) return `this socket was routed for room ${routed}, not ${wanted}`;
  return null;
}
