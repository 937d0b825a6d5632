// The other gateways' half of a version-2 handoff's hold (docs/handoff.md, "Hold"): a gateway that
// hears `hold` from the one running a handoff holds its own sockets of the room on the old owner
// (the same RoomHold path and limits as the runner's, handoff-held.ts) and answers `held`. Its page
// requests of the room wait (handoff-pages.ts). Its placement event of the move does not cut those
// sockets: the old owner's release closes them (1012), bounded as on the runner, then this gateway
// delivers its sockets' held messages to the new owner with the signed `messages` hook; where the
// new owner resumes, it resumes its ready sockets there itself (their clients see no close), as the
// runner does with its own: armed at the hold (the release may come before this gateway hears the
// move, and its close must not reach those clients), opened once it heard `end moved` and the old
// owner's release closed them. A rollback's
// `end` flushes them to the old owner; `late` (it did not answer in time) cuts them. A gateway that
// never hears the end decides by itself after a bound: the placement says where the room is.
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { PlacementRecord, PlacementStore } from '../placement/store.js';
import type { HandoffSignal, SharedDataStore } from '../shared-data/store.js';
import type { HookAnswer, HookCall } from './handoff-calls.js';
import { CLOSE_WAIT_MS, deliverHeld, flushHeld, holdRoom, type HeldOptions } from './handoff-held.js';
import { countSockets, resumeSockets, type HandoffIds, type ResumesDone } from './handoff-resume.js';
import { HANDOFF_STEPS, type HandoffPageWaits } from './handoff-pages.js';
import type { Backend, BackendPool } from './pool.js';
import type { RoomHold } from './room-hold.js';

export interface RemoteHoldOptions {
  readonly gatewayId: string;
  readonly store: Pick<SharedDataStore, 'publishHandoff' | 'subscribe'>;
  readonly placements: Pick<PlacementStore, 'get'>;
  readonly held: HeldOptions;
  /** This gateway follows its tunnels (its calls are signed): only then can it hold. */
  readonly follows: () => boolean;
  /** This gateway's own handoff holds the room now: it does not hold it twice. */
  readonly holdsLocally: (room: string) => boolean;
  /** The placer: its placement events leave the room's sockets to the release while held. */
  readonly placer: { keepSockets(room: string): void; unhold(room: string): void; learnMove(room: string, placement: PlacementRecord): void };
  readonly tunnels: { closeRoom(room: string, keep: string | null): number };
  readonly pool: Pick<BackendPool, 'get'>;
  readonly call: (backend: Backend, call: HookCall) => Promise<HookAnswer>;
  readonly pages: HandoffPageWaits;
  readonly metrics: Pick<Metrics, 'handoffHeld' | 'handoffHeldMessages' | 'handoffHeldBytes' | 'handoffSockets'>;
  readonly logger: Logger;
  /** Whether the backend's last hello (as this gateway knows it) said `resume`; absent: no socket is resumed here. */
  readonly resumes?: (backendId: string) => boolean;
  /** RELEASE_GRACE_MS (handoff.ts): how long the old owner's release has to close the held sockets. */
  readonly releaseGraceMs: number;
}

interface Entry {
  readonly id: string;
  readonly room: string;
  readonly from: string;
  hold: RoomHold | null;
  /** Resolves once the hold has begun (or was not taken). */
  ready: Promise<void>;
  ended: boolean;
  timer: NodeJS.Timeout | null;
}

type Outcome = 'moved' | 'flush' | 'lost';

export class RemoteHolds {
  private readonly entries = new Map<string, Entry>();
  private readonly rooms = new Set<string>();
  private readonly unsubscribe: () => void;

  constructor(private readonly o: RemoteHoldOptions) {
    this.unsubscribe = o.store.subscribe((ev) => {
      if (ev.type === 'handoff') this.onSignal(ev.signal);
    });
  }

  /** This gateway holds the room for another gateway's handoff now. */
  holding(room: string): boolean {
    return this.rooms.has(room);
  }

  /** Stops listening; what is held is flushed to the old owner (the gateway stops: its sockets end anyway). */
  close(): void {
    this.unsubscribe();
    for (const e of [...this.entries.values()]) void this.finish(e, 'flush', e.from, 0);
  }

  private onSignal(s: HandoffSignal): void {
    if (s.kind === 'hold' && s.gateway !== this.o.gatewayId && !this.entries.has(s.id)) this.hold(s.id, s.room, s.from, s.to);
    else if (s.kind === 'late' && s.gateway !== this.o.gatewayId && !s.answered.includes(this.o.gatewayId)) this.late(s.id, s.room);
    else if (s.kind === 'end') {
      const e = this.entries.get(s.id);
      if (e !== undefined && !e.ended) void this.finish(e, s.outcome, s.to, s.epoch);
    }
  }

  private hold(id: string, room: string, from: string, to: string): void {
    const { o } = this;
    const e: Entry = { id, room, from, hold: null, ready: Promise.resolve(), ended: false, timer: null };
    this.entries.set(id, e);
    o.pages.begin(room);
    // Every step of the runner is bounded by handoff.timeoutMs; one more for the hold itself.
    e.timer = setTimeout(() => void this.unheard(e), o.held.timeoutMs * (HANDOFF_STEPS + 1));
    const take = o.follows() && !this.rooms.has(room) && !o.holdsLocally(room);
    if (take) {
      this.rooms.add(room);
      o.placer.keepSockets(room);
    }
    // Half the bound to reach a boundary, so the answer (with a mid-message socket cut) is in time.
    const held = take ? holdRoom({ ...o.held, timeoutMs: o.held.timeoutMs / 2 }, { id, room, source: from }, o.metrics, o.logger) : Promise.resolve(null);
    e.ready = held.then(async (hold) => {
      e.hold = hold;
      if (take && hold === null) this.letGo(room);
      // Armed before `held` is answered: the runner's release follows its move at once.
      if (hold !== null && o.held.resume !== undefined && o.resumes?.(to) === true) for (const t of hold.sockets) t.expectResume();
      await o.store.publishHandoff({ kind: 'held', id, gateway: o.gatewayId, sockets: hold?.sockets.length ?? 0 }).catch((err: Error) => o.logger.warn({ handoff: id, room, err: err.message }, 'handoff hold: could not answer held'));
    });
  }

  /** The runner did not hear this gateway in time: its sockets of the room are cut (what they held is still delivered). */
  private late(id: string, room: string): void {
    const e = this.entries.get(id);
    if (e === undefined) {
      const cut = this.o.tunnels.closeRoom(room, null);
      if (cut > 0) this.o.metrics.handoffHeld.inc({ result: 'hold-timeout' }, cut);
      return;
    }
    void e.ready.then(() => {
      if (e.hold === null || e.ended) return;
      for (const t of e.hold.sockets) t.endSocket();
      this.o.metrics.handoffHeld.inc({ result: 'hold-timeout' }, e.hold.sockets.length);
      this.o.logger.warn({ handoff: id, room, sockets: e.hold.sockets.length }, 'handoff hold: answered too late; the room\'s sockets cut, their held messages kept');
    });
  }

  /** No `end` within the bound: the placement says whether the room moved. */
  private async unheard(e: Entry): Promise<void> {
    if (e.ended) return;
    let outcome: Outcome = 'lost';
    // No backend is named '': a lost room's sockets are all cut.
    let to = '';
    let epoch = 0;
    try {
      const p = await this.o.placements.get(e.room);
      if (p !== null) ({ backend: to, epoch } = p);
      if (p !== null) outcome = p.backend === e.from ? 'flush' : 'moved';
    } catch {
      // The store cannot say: the room's sockets are cut, their messages counted lost.
    }
    this.o.logger.warn({ handoff: e.id, room: e.room, outcome }, 'handoff hold: the end of the handoff was not heard in time; decided from the placement');
    await this.finish(e, outcome, to, epoch);
  }

  private async finish(e: Entry, outcome: Outcome, to: string, epoch: number): Promise<void> {
    if (e.ended) return;
    e.ended = true;
    if (e.timer !== null) clearTimeout(e.timer);
    try {
      await e.ready;
      if (e.hold !== null) await this.settle(e, e.hold, outcome, to, epoch);
    } finally {
      if (e.hold !== null) this.letGo(e.room);
      this.entries.delete(e.id);
      // Routed after the wait by the move the runner made, as its placement event would say. Not by
      // re-reading the store: after a Redis failover the promoted replica may not have the move yet,
      // and this gateway would then route the room's clients to the old owner while the runner
      // routes them to the new one (a split until the gateways reconcile; the chaos row
      // handoff-redis-failover-before-release caught it).
      if (outcome === 'moved' && to !== '') this.o.placer.learnMove(e.room, { backend: to, epoch });
      this.o.pages.end(e.room);
    }
  }

  /** What the held sockets' messages become: delivered to the new owner, written on to the old, or lost. */
  private async settle(e: Entry, hold: RoomHold, outcome: Outcome, to: string, epoch: number): Promise<void> {
    const { o } = this;
    const target = outcome === 'moved' ? o.pool.get(to) : undefined;
    if (outcome === 'flush' || target === undefined) for (const t of hold.sockets) t.cancelResume();
    if (outcome === 'flush') return flushHeld(hold, o.metrics);
    if (target === undefined) {
      hold.stop();
      o.tunnels.closeRoom(e.room, to);
      o.metrics.handoffHeld.inc({ result: 'lost' }, hold.sockets.length);
      o.logger.error({ handoff: e.id, room: e.room, sockets: hold.sockets.length, to }, 'held messages lost: the room\'s new owner cannot be told');
      return;
    }
    const ids = { id: e.id, room: e.room, epoch: String(epoch) };
    const done = await this.resume(hold, target, ids);
    // As on the runner: the old owner's release closes the others (1012); past the grace they are ended.
    await hold.closed(o.releaseGraceMs, (t) => t.endSocket(), done.resumed);
    o.tunnels.closeRoom(e.room, to);
    const out = await deliverHeld(hold, target, ids, o.call, o.metrics, o.logger, done.resumed);
    countSockets(o.metrics, hold.sockets.length, done);
    o.logger.info({ handoff: e.id, room: e.room, sockets: hold.sockets.length, resumed: done.resumed.size, messages: out.messages + done.messages, lostSockets: out.lostSockets }, 'held messages of this gateway delivered to the new owner');
  }

  /**
   * The moved room's sockets armed at the hold, resumed on the new owner: opened once the old
   * owner's release closed them (its close swallowed since the hold; at most the release's grace,
   * as the runner cuts its own), so a socket never counts on the new owner while the old one still
   * has the room (the runner publishes the move before it asks for the release), then spliced.
   */
  private async resume(hold: RoomHold, target: Backend, ids: HandoffIds): Promise<ResumesDone> {
    const { o } = this;
    const none: ResumesDone = { resumed: new Set(), messages: 0, failed: 0 };
    const signer = o.held.resume;
    if (signer === undefined || o.resumes?.(target.id) !== true) return none;
    // The connections to the new owner opened now, each handshake sent once every old stream
    // ended, then each socket on its own (no socket waits for another's 101). Armed but not tried
    // (no longer resumable): the old owner's close reaches the client again.
    const released = Promise.all(hold.sockets.map((t) => t.oldStreamEnded(o.releaseGraceMs))).then(() => true);
    return resumeSockets(hold.sockets, target, ids, signer, o.held.timeoutMs, o.logger, { go: released, waitMs: CLOSE_WAIT_MS, notTried: (t) => t.cancelResume() });
  }

  private letGo(room: string): void {
    this.rooms.delete(room);
    this.o.placer.unhold(room);
  }
}
