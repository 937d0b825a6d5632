// The two ends of a version-2 handoff's hold, for Handoffs (handoff.ts): before the export, this
// gateway's sockets of the room on the old owner are held at a message boundary (room-hold.ts);
// after the move and the release, each socket is ended, and once it has closed its messages go to
// the new owner in one `messages` call (tried twice). What could not be delivered is counted and
// logged with the room and socket, never dropped silently.
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { succeeded, type HookAnswer, type HookCall } from './handoff-calls.js';
import type { Backend } from './pool.js';
import type { ResumeSigner } from './handoff-resume.js';
import { RoomHold, type HoldLimits, type TunnelHold } from './room-hold.js';

export interface HeldOptions {
  readonly tunnels: { holdable(room: string, backend: string): { holds: TunnelHold[]; others: number } };
  readonly limits: HoldLimits;
  /** handoff.timeoutMs: how long a socket has to reach a message boundary (and a resumed one its 101). */
  readonly timeoutMs: number;
  /** Signs the resume handshakes (absent: no socket is resumed). */
  readonly resume?: ResumeSigner;
}

/** The metrics a hold and its delivery count in. */
export type HeldMetrics = Pick<Metrics, 'handoffHeld' | 'handoffHeldMessages' | 'handoffHeldBytes'>;

/** How long the released sockets have to close before they are ended (their late bytes are still kept). */
export const CLOSE_WAIT_MS = 1_000;

/**
 * Holds this gateway's sockets of `room` on `source` for handoff `id`; null when none of them can be
 * held. A socket past a hold limit is counted (`over-limit`) and logged when it passes it.
 */
export async function holdRoom(o: HeldOptions, h: { readonly id: string; readonly room: string; readonly source: string }, metrics: HeldMetrics, logger: Logger): Promise<RoomHold | null> {
  const { room } = h;
  const { holds } = o.tunnels.holdable(room, h.source);
  if (holds.length === 0) return null;
  const overLimit = (t: TunnelHold, roomBytes: number): void => {
    metrics.handoffHeld.inc({ result: 'over-limit' });
    const limits = { perSocketBytes: o.limits.perSocketBytes, perRoomBytes: o.limits.perRoomBytes };
    logger.warn({ handoff: h.id, room, socket: t.socketId, heldBytes: t.heldBytes, roomBytes, ...limits }, 'handoff hold: a socket passed its hold limit: closed with 1012 (its client reconnects), its held messages kept for the new owner');
  };
  const hold = new RoomHold(room, holds, o.limits, { overLimit, heldBytes: (delta) => metrics.handoffHeldBytes.inc(delta) });
  await hold.begin(o.timeoutMs, (t) => t.endSocket());
  if (hold.holdTimeouts > 0) metrics.handoffHeld.inc({ result: 'hold-timeout' }, hold.holdTimeouts);
  return hold;
}

/** A rollback: the held sockets pass again, what they kept written on to the old owner. */
export function flushHeld(hold: RoomHold, metrics: Pick<Metrics, 'handoffHeld'>): void {
  hold.flush();
  metrics.handoffHeld.inc({ result: 'flushed' }, hold.sockets.length);
}

export interface Delivered {
  /** Messages the new owner took. */
  readonly messages: number;
  /** Sockets whose messages it did not take. */
  readonly lostSockets: number;
}

/**
 * The room moved and its old owner was released: ends each held socket, waits for them to close
 * (a client still sends until it sees the end), then hands each one's messages to `target`.
 */
export async function deliverHeld(
  hold: RoomHold,
  target: Backend,
  h: { readonly id: string; readonly room: string; readonly epoch: string },
  call: (backend: Backend, call: HookCall) => Promise<HookAnswer>,
  metrics: HeldMetrics,
  logger: Logger,
  /** Sockets resumed on the new owner: their messages went to its new upstream, they stay open. */
  resumed: ReadonlySet<TunnelHold> = new Set(),
): Promise<Delivered> {
  hold.stop();
  // The old owner's release closes each socket (its close handshake passes the hold); one it did
  // not close in time is ended here. Either way the client's bytes are kept until it closes.
  await hold.closed(CLOSE_WAIT_MS, (t) => t.endSocket(), resumed);
  let messages = 0;
  let lostSockets = 0;
  for (const t of hold.sockets) {
    if (resumed.has(t)) continue;
    const held = t.messages();
    if (held.unreadable > 0) logger.warn({ handoff: h.id, room: h.room, socket: t.socketId, messages: held.unreadable }, 'held messages that could not be read (compressed with context): not delivered');
    if (held.messages.length === 0) continue;
    const body = Buffer.from(JSON.stringify({ socket: t.socketId, messages: held.messages }));
    const one: HookCall = { step: 'messages', id: h.id, room: h.room, epoch: h.epoch, body, socket: t.socketId };
    let answer = await call(target, one);
    if (!succeeded(answer)) answer = await call(target, one);
    if (succeeded(answer)) {
      messages += held.messages.length;
      metrics.handoffHeld.inc({ result: 'delivered' });
      metrics.handoffHeldMessages.inc({ result: 'delivered' }, held.messages.length);
    } else {
      lostSockets++;
      metrics.handoffHeld.inc({ result: 'lost' });
      metrics.handoffHeldMessages.inc({ result: 'lost' }, held.messages.length);
      logger.error({ handoff: h.id, room: h.room, socket: t.socketId, messages: held.messages.length, backend: target.id, answer: answer.kind === 'answer' ? answer.status : answer.kind }, 'held messages not taken by the new owner: lost');
    }
  }
  return { messages, lostSockets };
}
