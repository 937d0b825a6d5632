// roomgate's push receiver (docs/push.md): push.path on the backend's own address. The proof first
// (403, before anything of the message is used), then the room and its epoch (409 without a room,
// or under an older or released epoch: roomgate then resolves the room again), then the app's
// `deliver`, and 204 with X-Roomgate-Sockets: how many sockets got it. A fan-out
// (X-Roomgate-Fanout: 1, purpose push-fanout) carries {"rooms": [{"room", "epoch"}, ...],
// "message": ...}: each room held here under that epoch gets the message; the others are skipped.
import type { IncomingHttpHeaders } from 'node:http';
import { error, type Answer } from './answers.js';
import { ownerOf, ROOM_KEY } from './fence.js';
import { field, type Verifier } from './proofs.js';
import type { RoomSocket, RoomTable } from './rooms.js';

export interface PushMeta {
  /** X-Roomgate-Message-Id ('' when absent). */
  readonly id: string;
  /** X-Roomgate-Sender ('' when absent). */
  readonly sender: string;
}

/** Sends `message` to the room's sockets here; how many got it. */
export type Deliver = (room: string, message: unknown, meta: PushMeta) => number | Promise<number>;

function parsed(body: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) as unknown };
  } catch {
    return { ok: false };
  }
}

export async function receivePush(rooms: RoomTable<RoomSocket>, verify: Verifier, deliver: Deliver, method: string | undefined, headers: IncomingHttpHeaders, body: Buffer): Promise<Answer> {
  if (method !== 'POST') return error(405, 'POST only');
  const fanout = field(headers, 'x-roomgate-fanout') === '1';
  const refused = verify(headers, body, fanout ? 'push-fanout' : 'push');
  if (refused !== null) return error(403, `push refused: ${refused}`);
  const message = parsed(body);
  if (!message.ok) return error(400, 'not JSON');
  const meta = { id: field(headers, 'x-roomgate-message-id') ?? '', sender: field(headers, 'x-roomgate-sender') ?? '' };
  if (fanout) return { status: 204, sockets: await fanOut(rooms, deliver, message.value, meta) };
  const { room, epoch } = ownerOf(headers);
  if (room === null) return error(409, 'no room');
  if (rooms.note(room, epoch) === null) return error(409, 'this room is held under a newer epoch, or was handed off from here');
  return { status: 204, sockets: await deliver(room, message.value, meta) };
}

async function fanOut(rooms: RoomTable<RoomSocket>, deliver: Deliver, body: unknown, meta: PushMeta): Promise<number> {
  const listed = typeof body === 'object' && body !== null ? (body as { rooms?: unknown; message?: unknown }) : {};
  let sent = 0;
  for (const r of Array.isArray(listed.rooms) ? (listed.rooms as unknown[]) : []) {
    const one = typeof r === 'object' && r !== null ? (r as { room?: unknown; epoch?: unknown }) : {};
    if (typeof one.room !== 'string' || !ROOM_KEY.test(one.room)) continue;
    if (!Number.isSafeInteger(one.epoch) || (one.epoch as number) < 0) continue;
    if (rooms.note(one.room, one.epoch as number) !== null) sent += await deliver(one.room, listed.message, meta);
  }
  return sent;
}
