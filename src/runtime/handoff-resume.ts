// The resumed sockets of a version-2 handoff, the runtime's side (docs/handoff.md, "Deliver", item
// 1): for a new owner whose hello said `resume`, each held socket that can be resumed gets a new
// upstream there, armed as the release is asked for and opened once it answered (the resume
// handshake, signed for `handoff-resume-socket` over the socket id and bound to that backend like
// every call), then spliced to it, each socket on its own: the client sees no close. A socket whose resume fails goes the `messages` way
// (handoff-held.ts) and closes as in version 1. The sockets themselves are the data plane's
// (src/proxy/tunnel-resume.ts behind TunnelHold).
import type { CallClaims } from '../http/call-proof.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Backend } from './pool.js';
import type { TunnelHold } from './room-hold.js';

/** What signs a resume handshake: this gateway's id and the call proof (src/http/call-proof.ts). */
export interface ResumeSigner {
  readonly sender: string;
  sign(claims: CallClaims): string[];
}

export interface HandoffIds {
  readonly id: string;
  readonly room: string;
  /** The room's new epoch. */
  readonly epoch: string;
}

/**
 * The resume handshake's own fields for one socket: the ownership fields at the new epoch, the
 * socket, the handoff (X-Roomgate-Resume, and X-Roomgate-Message-Id for the proof's message id),
 * the sender and the proof for `handoff-resume-socket` whose body is the socket id.
 */
export function resumeFields(s: ResumeSigner, to: Backend, h: HandoffIds, socketId: string): string[] {
  const fields = ['X-Roomgate-Room', h.room, 'X-Roomgate-Epoch', h.epoch, 'X-Roomgate-Socket', socketId, 'X-Roomgate-Resume', h.id, 'X-Roomgate-Message-Id', h.id, 'X-Roomgate-Sender', s.sender];
  const claims: CallClaims = { purpose: 'handoff-resume-socket', destination: to.id, id: h.id, room: h.room, epoch: h.epoch, sender: s.sender, body: Buffer.from(socketId, 'utf8') };
  return [...fields, ...s.sign(claims)];
}

export interface ResumesDone {
  /** Spliced to the new owner: their clients saw no close. */
  readonly resumed: ReadonlySet<TunnelHold>;
  /** Held messages the resumed sockets' new upstreams got. */
  readonly messages: number;
  readonly failed: number;
}

/** When the resumes go on (resumeSockets). */
export interface ResumeOrder {
  /**
   * The handshakes are sent once this resolves true (the old owner released the room): the
   * connections to the new owner are opened before, while the release runs, so no connect is left
   * on the path. Absent: at once.
   */
  readonly go?: Promise<boolean>;
  /** How long each socket's old stream has to end once its 101 came (known after the release). */
  readonly waitMs: number | Promise<number>;
  /** A socket not resumable (not tried). */
  readonly notTried?: (t: TunnelHold) => void;
}

/**
 * Each held socket that can be resumed, on its own and all at once (no socket waits for another's
 * 101): its new upstream opened on `to` (the handshake sent at `go`, its 101 within `timeoutMs`),
 * then, once the old owner's stream ended, its held messages written to it in order and the client
 * spliced to it, at once. One whose resume failed is ended (1012) for the `messages` way; one not
 * resumable is left to `notTried`. Resolves once every socket is spliced or failed.
 */
export async function resumeSockets(sockets: readonly TunnelHold[], to: Backend, h: HandoffIds, s: ResumeSigner, timeoutMs: number, logger: Logger, order: ResumeOrder): Promise<ResumesDone> {
  const resumed = new Set<TunnelHold>();
  let messages = 0;
  let failed = 0;
  const one = async (t: TunnelHold): Promise<void> => {
    if (!t.resumable) return order.notTried?.(t);
    const opened = await t.openResume(to, resumeFields(s, to, h, t.socketId), timeoutMs, order.go);
    // A failed open is ended by completeResume (the `messages` way), as any failed step; one that
    // failed before `go` (its connection refused) not before the old owner released the room.
    if (!opened.ok && order.go !== undefined) await order.go;
    const step = await t.completeResume(await order.waitMs);
    if (step.ok) {
      resumed.add(t);
      messages += step.messages;
      return;
    }
    failed++;
    logger.warn({ handoff: h.id, room: h.room, socket: t.socketId, why: step.why }, 'socket resume failed: its messages go through the messages hook, the client reconnects');
  };
  await Promise.all(sockets.map(one));
  return { resumed, messages, failed };
}

/** Counts how a held room's sockets ended up (resumed, resume failed, reconnected) in the metrics; on the runner and on every gateway that held. */
export function countSockets(metrics: Pick<Metrics, 'handoffSockets' | 'handoffHeld' | 'handoffHeldMessages'>, sockets: number, done: ResumesDone): void {
  const m = metrics.handoffSockets;
  const resumed = done.resumed.size;
  if (resumed > 0) m.inc({ result: 'resumed' }, resumed);
  if (done.failed > 0) m.inc({ result: 'resume-failed' }, done.failed);
  if (sockets - resumed - done.failed > 0) m.inc({ result: 'reconnected' }, sockets - resumed - done.failed);
  if (resumed > 0) metrics.handoffHeld.inc({ result: 'resumed' }, resumed);
  if (done.messages > 0) metrics.handoffHeldMessages.inc({ result: 'resumed' }, done.messages);
}
