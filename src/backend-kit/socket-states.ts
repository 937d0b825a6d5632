// Per-socket state for the resume of protocol version 2 (docs/handoff.md, "Resume"): when the app
// gives a socket's own state, an export carries each socket's (by X-Roomgate-Socket) beside the
// room's; the import keeps them until the resumed socket arrives. The blob stays opaque to
// roomgate: the kit's envelope is {"roomgateKit": 1, "room": <the app's blob, base64>,
// "sockets": {<socket id>: <the app's value>}}. Without resume the blob is the app's own, as is.
import { remember, REMEMBERED } from './remember.js';
import { SOCKET_ID } from './fence.js';

const ENVELOPE = 1;

export function wrap(room: Buffer, sockets: ReadonlyMap<string, unknown>): Buffer {
  return Buffer.from(JSON.stringify({ roomgateKit: ENVELOPE, room: room.toString('base64'), sockets: Object.fromEntries(sockets) }));
}

/** The app's blob and the sockets' states of an envelope, or null when the blob is not one. */
export function unwrap(blob: Buffer): { room: Buffer; sockets: Map<string, unknown> } | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(blob.toString('utf8'));
  } catch {
    return null;
  }
  const p = parsed as { roomgateKit?: unknown; room?: unknown; sockets?: unknown } | null;
  if (p === null || typeof p !== 'object' || p.roomgateKit !== ENVELOPE || typeof p.room !== 'string') return null;
  if (typeof p.sockets !== 'object' || p.sockets === null || Array.isArray(p.sockets)) return null;
  const sockets = new Map<string, unknown>();
  for (const [id, state] of Object.entries(p.sockets as Record<string, unknown>)) {
    if (!SOCKET_ID.test(id)) return null;
    sockets.set(id, state);
  }
  return { room: Buffer.from(p.room, 'base64'), sockets };
}

export interface Resumable {
  readonly handoffId: string;
  readonly epoch: number;
  readonly state: unknown;
}

/** The imported sockets' states, by room and socket id, until each is resumed (once) or the room goes. */
export class SocketStates {
  private readonly states = new Map<string, Resumable>();
  private key = (room: string, socket: string): string => `${room}\n${socket}`;

  keep(room: string, handoffId: string, epoch: number, sockets: ReadonlyMap<string, unknown>): void {
    for (const [id, state] of sockets) remember(this.states, this.key(room, id), { handoffId, epoch, state }, REMEMBERED);
  }

  /** The state of `socket` imported by `handoffId` under `epoch`, taken out (a socket resumes once). */
  take(room: string, socket: string, handoffId: string, epoch: number): Resumable | null {
    const k = this.key(room, socket);
    const r = this.states.get(k);
    if (r === undefined || r.handoffId !== handoffId || r.epoch !== epoch) return null;
    this.states.delete(k);
    return r;
  }

  drop(room: string): void {
    const prefix = `${room}\n`;
    for (const k of [...this.states.keys()]) if (k.startsWith(prefix)) this.states.delete(k);
  }
}
