// The resumed sockets of a version-2 handoff, the runtime's side (docs/handoff.md, "Deliver", item
// 1): for a new owner whose hello said `resume`, each held socket that can be resumed gets a new
// upstream there, opened as the release is asked for (the resume handshake, signed for
// `handoff-resume-socket` over the socket id and bound to that backend like every call), and after
// the release it is spliced to it: the client sees no close. A socket whose resume fails goes the `messages` way
// (handoff-held.ts) and closes as in version 1. The sockets themselves are the data plane's
// (src/proxy/tunnel-resume.ts behind TunnelHold).
import type { CallClaims } from '../http/call-proof.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Backend } from './pool.js';
import type { RoomHold, TunnelHold } from './room-hold.js';

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

/**
 * Right before the release: the resume of each held socket that can be resumed is started (from
 * now on the old owner's close does not reach those clients), each 101 awaited within
 * `timeoutMs`, all at once. Resolves with the sockets tried, once each 101 came or failed.
 */
export async function startResumes(hold: RoomHold, to: Backend, h: HandoffIds, s: ResumeSigner, timeoutMs: number): Promise<TunnelHold[]> {
  const tried = hold.sockets.filter((t) => t.resumable);
  await Promise.all(tried.map((t) => t.openResume(to, resumeFields(s, to, h, t.socketId), timeoutMs)));
  return tried;
}

export interface ResumesDone {
  /** Spliced to the new owner: their clients saw no close. */
  readonly resumed: ReadonlySet<TunnelHold>;
  /** Held messages the resumed sockets' new upstreams got. */
  readonly messages: number;
  readonly failed: number;
}

/**
 * After the release: each socket tried spliced to its new upstream (the old owner's stream ended
 * within `waitMs`); one whose resume failed is ended (1012) for the `messages` way.
 */
export async function completeResumes(tried: readonly TunnelHold[], waitMs: number, h: HandoffIds, logger: Logger): Promise<ResumesDone> {
  const steps = await Promise.all(tried.map((t) => t.completeResume(waitMs)));
  const resumed = new Set<TunnelHold>();
  let messages = 0;
  let failed = 0;
  steps.forEach((step, i) => {
    const t = tried[i] as TunnelHold;
    if (step.ok) {
      resumed.add(t);
      messages += step.messages;
      return;
    }
    failed++;
    logger.warn({ handoff: h.id, room: h.room, socket: t.socketId, why: step.why }, 'socket resume failed: its messages go through the messages hook, the client reconnects');
  });
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
