// Room handoff (docs/handoff.md): a room moves to another backend with its state. The gateway
// that receives the command runs it: hello (does each backend serve the hooks), export on the old
// owner (the room frozen under a lease, its state as an opaque blob), import on the new owner at
// the room's new epoch, the placement moved by compare-and-set to that epoch, release on the old
// owner (it closes the room's sockets with 1012 and drops the state; if it does not answer in
// time, roomgate cuts them). Any failure before the move rolls back: resume on the old owner, the
// placement untouched. Without a working placement store nothing starts: a handoff is never half
// done. At most handoff.maxConcurrentPerBackend at once per backend; idempotent by handoff id.
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { PlacementRecord, PlacementStore } from '../placement/store.js';
import { describe as describeAnswer, succeeded, type HookAnswer, type HookCall, type HookStep } from './handoff-calls.js';
import type { OthersHeld } from './handoff-ask.js';
import { CLOSE_WAIT_MS, deliverHeld, flushHeld, holdRoom, type HeldOptions } from './handoff-held.js';
import { countSockets, resumeSockets, type ResumesDone } from './handoff-resume.js';
import { HelloCache, type HookSupport } from './handoff-hello.js';
import type { HandoffEvent, HandoffLog, HandoffResult, HandoffStage, HandoffSteps } from './handoff-log.js';
import { HANDOFF_STEPS, type HandoffPageWaits } from './handoff-pages.js';
import type { Placer } from './placer.js';
import type { Backend, BackendPool } from './pool.js';
import type { RoomHold, TunnelHold } from './room-hold.js';

/** Why a handoff did not start (the admin API's answer). */
export type HandoffRefusal =
  | 'unsigned'
  | 'store-unavailable'
  | 'unknown-backend'
  | 'target-unavailable'
  | 'not-placed'
  | 'not-on-backend'
  | 'same-backend'
  | 'no-hooks'
  | 'too-many'
  | 'id-conflict';

export interface HandoffOutcome {
  readonly event: HandoffEvent;
  /** Set when result is 'refused'. */
  readonly refusal: HandoffRefusal | null;
}

export interface HandoffRequest {
  readonly room: string;
  readonly to: string;
  /** Only if the room is on this backend now (a drain: presence may name rooms that just left). */
  readonly from?: string;
  /** The caller's id (a retry sends the same one); default a new one. */
  readonly id?: string;
  readonly trigger: 'move' | 'drain' | 'rebalance';
}

export interface HandoffOptions {
  readonly placer: Pick<Placer, 'handoffMove' | 'unhold' | 'isDegraded'>;
  readonly pool: BackendPool;
  readonly store: Pick<PlacementStore, 'available' | 'get' | 'reserveEpoch'>;
  /** Cuts a room's sockets that are not on `keep` (the release did not answer). */
  readonly tunnels: { closeRoom(room: string, keep: string | null): number };
  /** One hook call (src/runtime/handoff-calls.ts). */
  readonly call: (backend: Backend, call: HookCall) => Promise<HookAnswer>;
  /** A connection opened ahead for a later call (its `connection`; HookClient.connect); absent: each call connects itself. */
  readonly connect?: (backend: Backend) => Socket;
  readonly log: HandoffLog;
  readonly metrics: Pick<Metrics, 'handoffs' | 'handoffSeconds' | 'handoffHeld' | 'handoffSockets' | 'handoffHeldMessages' | 'handoffHeldBytes'>;
  readonly logger: Logger;
  readonly leaseMs: number;
  readonly maxConcurrentPerBackend: number;
  /** backendCalls.secrets is not empty now: the hook calls carry a proof (a reload may change it). */
  readonly signed: () => boolean;
  /** Version 2: where this gateway's sockets of a room are held (absent: no hold, version 1). */
  readonly held?: HeldOptions;
  /** Version 2 through every gateway (handoff-ask.ts, handoff-remote.ts): the others hold their sockets too. */
  readonly others?: {
    ask(id: string, room: string, from: string, to: string): Promise<OthersHeld>;
    end(id: string, room: string, outcome: 'moved' | 'flush' | 'lost', to: string, epoch: number): Promise<void>;
    /** This gateway holds the room for another gateway's handoff now. */
    holding(room: string): boolean;
  };
  /** Page requests of a room in handoff wait for its end (handoff-pages.ts). */
  readonly pages?: HandoffPageWaits;
  readonly now?: () => number;
  /** RELEASE_GRACE_MS unless a test says otherwise. */
  readonly releaseGraceMs?: number;
}

/**
 * How long, after the move, this gateway's sockets of the room stay on the old owner waiting for
 * its release to close them (with 1012, which the app's page tells apart). Every other gateway cuts
 * its own at the placement event (version 2: a gateway holding for this handoff waits this long
 * too, handoff-remote.ts), and a client through one of them can be on the new owner half a second
 * later (djust's first reconnect): past that, a slow release would leave the room on two
 * processes, so this gateway cuts its own sockets there too, well before handoff.timeoutMs.
 */
export const RELEASE_GRACE_MS = 250;

/** Steps still to run at each stage (a page request's wait, handoff-pages.ts). */
const REMAINING: Record<HandoffStage, number> = { hello: HANDOFF_STEPS, export: HANDOFF_STEPS, import: 4, move: 3, release: 2, done: 1 };

/** Handoff ids remembered (idempotency): a bound, oldest forgotten first. */
const IDS_MAX = 1_000;
/** How long a gateway's start waits for its backends' hellos (a tunnel opened before an answer is not followed). */
export const HELLOS_AT_START_MS = 2_000;

class Failure extends Error {}

/** A call's `connection` field, when one was opened ahead. */
function via(connection: Socket | undefined): { connection?: Socket } {
  return connection === undefined ? {} : { connection };
}

/** One handoff as it runs: its record, rewritten as it goes. */
interface Run {
  ev: HandoffEvent;
  readonly t0: number;
  /** Version 2: this gateway's sockets of the room held since before the export. */
  hold: RoomHold | null;
  /** Version 2: the other gateways were asked to hold theirs (they wait for the end). */
  asked: boolean;
  /** Its page requests wait (handoff-pages.ts) until finish. */
  pages: boolean;
  /** The held sockets' resumes on the new owner after the release (armed before it): connected as the release is asked for, sent (`go`, with the old stream's wait) once it answered. */
  resumes: { readonly go: (waitMs: number) => void; readonly done: Promise<ResumesDone> } | null;
  /** The steps' durations so far (the event's `steps`), and when the last one ended. */
  steps: { -readonly [K in keyof HandoffSteps]: number };
  lap: number;
  /** Connections opened ahead for the next calls: destroyed at the end (the ones no call took). */
  readonly ahead: Socket[];
}

export class Handoffs {
  readonly hello: HelloCache;
  private readonly now: () => number;
  /** Handoffs running through this gateway per backend (as old or new owner). */
  private readonly busy = new Map<string, number>();
  private readonly byId = new Map<string, { readonly key: string; readonly outcome: Promise<HandoffOutcome> }>();
  /** Rooms whose sockets a handoff of this gateway holds now: a second handoff of one does not hold (nor flush) them. */
  private readonly heldRooms = new Set<string>();

  constructor(private readonly o: HandoffOptions) {
    this.now = o.now ?? Date.now;
    this.hello = new HelloCache(o.call, this.now);
  }

  /** Whether the backend serves the hooks, as known now (asked in the background when unknown or old). */
  support(backendId: string): HookSupport {
    // Unsigned calls would all be refused: nothing to learn by asking.
    if (!this.o.signed()) return 'unknown';
    const b = this.o.pool.get(backendId);
    return b ? this.hello.peek(b) : 'unknown';
  }

  /** Whether the backend serves the hooks, asked now unless a fresh answer is known ('unknown' unsigned). */
  async hooks(backendId: string): Promise<HookSupport> {
    const b = this.o.pool.get(backendId);
    return this.o.signed() && b ? this.hello.get(b) : 'unknown';
  }

  /**
   * Whether a new tunnel to the backend is followed message by message: while this gateway can run
   * a handoff (its calls are signed) and the backend's hello said it takes held messages (version
   * 2, `messages`), the only tunnels a hold can use. Following costs CPU on every frame
   * (docs/handoff.md "What following costs"), so a tunnel to any other backend is not followed.
   * The hello is known before the first tunnel in most cases (askHellos at start); one not known
   * yet or old is asked in the background, and a tunnel opened before the answer is not followed:
   * version 1 behaviour for it (not held; the release closes it).
   */
  followsSockets(backendId: string): boolean {
    if (!this.canHold()) return false;
    const b = this.o.pool.get(backendId);
    return b !== undefined && this.hello.takesMessages(b);
  }

  /** Whether this gateway can hold sockets at all: a hold is configured and its calls are signed. */
  canHold(): boolean {
    return this.o.held !== undefined && this.o.signed();
  }

  /**
   * Asks every backend's hello (at start), so the first tunnels find the answer known; settles
   * when all answered or after HELLOS_AT_START_MS (the answers still land later). A backend that
   * joins later is asked when its first tunnel opens (that tunnel is not followed).
   */
  askHellos(): Promise<void> {
    if (this.o.held === undefined || !this.o.signed()) return Promise.resolve();
    const asks = this.o.pool.backends.map((b) => this.hello.refresh(b));
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, HELLOS_AT_START_MS);
      timer.unref();
    });
    return Promise.race([Promise.allSettled(asks).then(() => undefined), bound]).finally(() => clearTimeout(timer));
  }

  /** A handoff of this gateway holds the room's sockets now. */
  holdsRoom(room: string): boolean {
    return this.heldRooms.has(room);
  }

  /**
   * Whether a new followed tunnel to the backend is made ready for a resume: its last hello said
   * `resume` (not yet asked: no). Asks no backend anything, like followsSockets.
   */
  resumesOn(backendId: string): boolean {
    const b = this.o.pool.get(backendId);
    return b !== undefined && this.followsSockets(backendId) && this.o.held?.resume !== undefined && this.hello.resumes(b);
  }

  /** Handoffs running through this gateway that involve the backend. */
  running(backendId: string): number {
    return this.busy.get(backendId) ?? 0;
  }

  /**
   * Moves the room to `to` with its state. The same id again (a retry) gets the first call's
   * outcome, running or done; the same id for another room or target is refused.
   */
  move(req: HandoffRequest): Promise<HandoffOutcome> {
    const id = req.id ?? randomUUID();
    const key = `${req.room}\n${req.to}`;
    const known = this.byId.get(id);
    if (known) return known.key === key ? known.outcome : Promise.resolve(this.refuse(this.start(id, req), 'id-conflict', `handoff id ${id} was used for another room or backend`));
    const outcome = this.run(this.start(id, req), req.from);
    this.byId.set(id, { key, outcome });
    // A refusal changed nothing: the same id may be tried again (after a 'too-many', say).
    const forget = (): void => {
      if (this.byId.get(id)?.outcome === outcome) this.byId.delete(id);
    };
    void outcome.then((out) => (out.refusal === null ? undefined : forget()), forget);
    if (this.byId.size > IDS_MAX) this.byId.delete(this.byId.keys().next().value as string);
    return outcome;
  }

  private start(id: string, req: HandoffRequest): Run {
    const ev: HandoffEvent = {
      id,
      room: req.room,
      from: null,
      to: req.to,
      trigger: req.trigger,
      stage: 'hello',
      result: null,
      reason: '',
      epoch: null,
      release: null,
      bytes: null,
      at: new Date(this.now()).toISOString(),
      ms: null,
    };
    const t0 = performance.now();
    return { ev, t0, hold: null, asked: false, pages: false, resumes: null, steps: {}, lap: t0, ahead: [] };
  }

  private async run(r: Run, expectedFrom: string | undefined): Promise<HandoffOutcome> {
    const { o } = this;
    const { room, to } = r.ev;
    if (!o.signed()) return this.refuse(r, 'unsigned', 'backendCalls.secrets is empty: the hook calls cannot be signed');
    if (!o.store.available || o.placer.isDegraded) return this.refuse(r, 'store-unavailable', 'the placement store is unavailable: a handoff is never half done');
    const target = o.pool.get(to as string);
    if (!target) return this.refuse(r, 'unknown-backend', `no backend "${to}"`);
    if (!target.acceptsNew(this.now())) return this.refuse(r, 'target-unavailable', `backend ${target.id} takes no new rooms now (${target.unavailableReason(this.now()) ?? 'unavailable'})`);
    let placement: PlacementRecord | null;
    try {
      placement = await o.store.get(room);
    } catch {
      return this.refuse(r, 'store-unavailable', 'the placement store is unavailable: a handoff is never half done');
    }
    if (placement === null) return this.refuse(r, 'not-placed', 'the room has no placement: it is not live anywhere');
    r.ev = { ...r.ev, from: placement.backend };
    if (expectedFrom !== undefined && placement.backend !== expectedFrom) return this.refuse(r, 'not-on-backend', `the room is on ${placement.backend}, not ${expectedFrom}`);
    if (placement.backend === target.id) return this.refuse(r, 'same-backend', `the room is already on ${target.id}`);
    const source = o.pool.get(placement.backend);
    if (!source) return this.refuse(r, 'unknown-backend', `the room's backend ${placement.backend} is not in the list`);
    if (this.running(source.id) >= o.maxConcurrentPerBackend || this.running(target.id) >= o.maxConcurrentPerBackend) {
      return this.refuse(r, 'too-many', `handoff.maxConcurrentPerBackend (${o.maxConcurrentPerBackend}) handoffs already run on ${source.id} or ${target.id}`);
    }
    this.take(source.id, 1);
    this.take(target.id, 1);
    try {
      o.log.update(r.ev);
      const hooks = await Promise.all([this.hello.get(source), this.hello.get(target)]);
      const missing = [source, target].flatMap((b, i) => (hooks[i] === 'yes' ? [] : [`${b.id} (${hooks[i] === 'no' ? 'none' : 'could not be asked'})`]));
      if (missing.length > 0) return this.refuse(r, 'no-hooks', `no handoff hooks on ${missing.join(', ')}: the room stays (today's behaviour)`);
      return await this.steps(r, source, target, placement);
    } finally {
      // The connections opened ahead that no call took (a rollback, a step that threw): closed.
      for (const s of r.ahead) s.destroy();
      this.take(source.id, -1);
      this.take(target.id, -1);
    }
  }

  private take(id: string, n: number): void {
    const v = (this.busy.get(id) ?? 0) + n;
    if (v <= 0) this.busy.delete(id);
    else this.busy.set(id, v);
  }

  /** export, import, move, release: the handoff proper, both backends serving the hooks. */
  private async steps(r: Run, source: Backend, target: Backend, placement: PlacementRecord): Promise<HandoffOutcome> {
    const { o } = this;
    const { room, id } = r.ev;
    const old = String(placement.epoch);
    this.lap(r, 'hello');
    // The new epoch is reserved while the hold and the export run, not after them (one store round
    // trip off the path): any epoch above the room's current one will do, the move's
    // compare-and-set on the current one is the fence, and one left unused by a rollback is a gap.
    const reserved = o.store.reserveEpoch().then(
      (n) => n,
      () => null,
    );
    // Each call's connection is opened while the step before it runs: no connect on the path.
    const exportVia = this.ahead(r, source);
    // Version 2: nothing more reaches the old owner from any gateway's sockets, nothing is refused.
    if (o.held !== undefined && this.hello.takesMessages(target) && !this.heldRooms.has(room) && o.others?.holding(room) !== true) {
      await this.holdAll(r, o.held, source, target);
      this.lap(r, 'hold');
    }
    this.stage(r, 'export');
    const importVia = this.ahead(r, target);
    const exported = await o.call(source, { step: 'export', id, room, epoch: old, body: Buffer.from(JSON.stringify({ leaseMs: o.leaseMs })), ...via(exportVia) });
    this.lap(r, 'export');
    if (exported.kind === 'unreachable') return this.exportBroke(r, source, target, placement, exported, reserved);
    const empty = exported.kind === 'answer' && exported.status === 404;
    if (!empty && !succeeded(exported)) return this.rollBack(r, source, placement, describeAnswer('export', exported));
    const blob = empty ? null : (exported as { body: Buffer }).body;
    const epoch = await reserved;
    if (epoch === null) return this.rollBack(r, source, placement, 'the placement store became unavailable');
    r.ev = { ...r.ev, epoch, bytes: blob?.length ?? 0 };
    const releaseVia = this.ahead(r, source);
    if (blob !== null) {
      this.stage(r, 'import');
      const imported = await o.call(target, { step: 'import', id, room, epoch: String(epoch), body: blob, ...via(importVia) });
      this.lap(r, 'import');
      if (!succeeded(imported)) return this.rollBack(r, source, placement, describeAnswer('import', imported));
    }
    this.stage(r, 'move');
    try {
      const ok = await this.moved(r, source.id, target.id, placement.epoch, epoch);
      this.lap(r, 'move');
      if (!ok) {
        return this.rollBack(r, source, placement, "the room's placement changed meanwhile (another gateway moved it)");
      }
    } catch (err) {
      if (!(err instanceof Failure)) throw err;
      // The move may or may not have been written and the store cannot say: neither resumed (a
      // split if it was written) nor released. This gateway's sockets of the room on the old
      // backend are cut; the old owner resumes by itself when its lease ends.
      o.placer.unhold(room);
      o.tunnels.closeRoom(room, target.id);
      this.endOthers(r, 'lost', target.id, epoch);
      if (r.hold !== null) this.heldLost(r, 'the move\'s outcome is unknown');
      return this.finish(r, 'rolled-back', `${err.message}: the move's outcome is unknown; the old owner resumes when its lease ends`);
    }
    // The other gateways wait for the old owner's release as this one does, then deliver theirs.
    this.endOthers(r, 'moved', target.id, epoch);
    return this.release(r, source, target, placement, empty ? 'moved-empty' : 'moved', releaseVia);
  }

  /** A connection to `b` opened now for a later call of this handoff (none without `connect`). */
  private ahead(r: Run, b: Backend): Socket | undefined {
    const s = this.o.connect?.(b);
    if (s !== undefined) r.ahead.push(s);
    return s;
  }

  /** This gateway's sockets of the room held, and every other gateway's (asked over the store's channel). */
  private async holdAll(r: Run, held: HeldOptions, source: Backend, target: Backend): Promise<void> {
    const { room, id } = r.ev;
    this.heldRooms.add(room);
    if (this.o.pages) {
      this.o.pages.begin(room);
      r.pages = true;
    }
    r.asked = this.o.others !== undefined;
    const [hold, others] = await Promise.all([holdRoom(held, { id, room, source: source.id }, this.o.metrics, this.o.logger), this.o.others?.ask(id, room, source.id, target.id)]);
    r.hold = hold;
    if (r.hold === null) this.heldRooms.delete(room);
    if (others !== undefined && others.asked > 0) r.ev = { ...r.ev, gateways: { asked: others.asked, held: others.held, sockets: others.sockets, late: others.late } };
  }

  /** Version 2: what the other gateways do with what they held (once: the first outcome stands). */
  private endOthers(r: Run, outcome: 'moved' | 'flush' | 'lost', to: string, epoch: number): void {
    if (!r.asked) return;
    r.asked = false;
    void this.o.others?.end(r.ev.id, r.ev.room, outcome, to, epoch);
  }

  /**
   * The placement CAS to the reserved epoch: true when written (or found written after a store
   * error), false when the room changed meanwhile. Throws a Failure when the store cannot say.
   */
  private async moved(r: Run, from: string, to: string, expected: number, epoch: number): Promise<boolean> {
    const { room, trigger } = r.ev;
    try {
      return (await this.o.placer.handoffMove(room, from, to, expected, epoch, trigger)).ok;
    } catch {
      // A rejected call may still have been applied (a Redis timeout): read again.
      const now = await this.o.store.get(room).catch(() => undefined);
      if (now === undefined) throw new Failure('the placement store became unavailable during the move');
      return now !== null && now.backend === to && now.epoch === epoch;
    }
  }

  private async release(r: Run, source: Backend, target: Backend, placement: PlacementRecord, result: HandoffResult, connection: Socket | undefined): Promise<HandoffOutcome> {
    const { room, id } = r.ev;
    this.stage(r, 'release');
    // Armed before the release: the old owner's close then never reaches those clients.
    this.armResumes(r, target);
    let cut = 0;
    const slow = setTimeout(() => {
      cut += this.o.tunnels.closeRoom(room, target.id);
    }, this.o.releaseGraceMs ?? RELEASE_GRACE_MS);
    const answer = await this.o.call(source, { step: 'release', id, room, epoch: String(placement.epoch), body: Buffer.alloc(0), ...via(connection) });
    clearTimeout(slow);
    this.lap(r, 'release');
    this.o.placer.unhold(room);
    if (succeeded(answer)) {
      r.ev = { ...r.ev, release: 'released' };
      await this.deliver(r, target, CLOSE_WAIT_MS);
      return this.finish(r, result, '');
    }
    // The old owner did not close the room's sockets: they are cut here (its epoch fence refuses
    // whatever still reaches it); every other gateway cut its own at the placement event.
    cut += this.o.tunnels.closeRoom(room, target.id);
    r.ev = { ...r.ev, release: 'cut' };
    // No close will come from the old owner: its stream ends where it is.
    await this.deliver(r, target, 0);
    return this.finish(r, result, `${describeAnswer('release', answer)}: cut ${cut} socket${cut === 1 ? '' : 's'} of the room on ${source.id}`);
  }

  /**
   * The export's connection broke. If the old owner still answers, it is a failure like any
   * other (rolled back); if it does not, it died with the room's state: the room is placed on
   * the new owner with nothing to import (what a failover does today), and said so.
   */
  private async exportBroke(r: Run, source: Backend, target: Backend, placement: PlacementRecord, a: HookAnswer, reserved: Promise<number | null>): Promise<HandoffOutcome> {
    const { room, id } = r.ev;
    const resumed = await this.o.call(source, { step: 'resume', id, room, epoch: String(placement.epoch), body: Buffer.alloc(0) });
    if (resumed.kind !== 'unreachable') {
      if (r.hold !== null) flushHeld(r.hold, this.o.metrics);
      this.endOthers(r, 'flush', source.id, placement.epoch);
      return this.finish(r, 'rolled-back', describeAnswer('export', a), resumed);
    }
    const why = `the old owner ${source.id} died during the export (${describeAnswer('export', a)}); its state of the room is lost`;
    try {
      const epoch = (await reserved) ?? (await this.o.store.reserveEpoch());
      r.ev = { ...r.ev, epoch };
      this.stage(r, 'move');
      const ok = await this.moved(r, source.id, target.id, placement.epoch, epoch);
      this.o.placer.unhold(room);
      const cut = this.o.tunnels.closeRoom(room, target.id);
      this.endOthers(r, ok ? 'moved' : 'lost', target.id, epoch);
      if (!ok) {
        if (r.hold !== null) this.heldLost(r, 'another gateway placed the room meanwhile');
        return this.finish(r, 'owner-lost', `${why}; another gateway placed the room meanwhile`);
      }
      r.ev = { ...r.ev, release: 'cut' };
      await this.deliver(r, target, 0);
      return this.finish(r, 'owner-lost', `${why}; placed empty on ${target.id}, ${cut} socket${cut === 1 ? '' : 's'} cut`);
    } catch {
      this.o.placer.unhold(room);
      this.o.tunnels.closeRoom(room, target.id);
      this.endOthers(r, 'lost', target.id, 0);
      if (r.hold !== null) this.heldLost(r, 'the placement store became unavailable');
      return this.finish(r, 'owner-lost', `${why}; the placement store is unavailable: the room is re-placed as its clients reconnect`);
    }
  }

  /** A step before the move failed: the old owner resumes, the placement is untouched. */
  private async rollBack(r: Run, source: Backend, placement: PlacementRecord, why: string): Promise<HandoffOutcome> {
    const { room, id } = r.ev;
    this.o.placer.unhold(room);
    const resumed = await this.o.call(source, { step: 'resume', id, room, epoch: String(placement.epoch), body: Buffer.alloc(0) });
    // After the resume: what the held sockets sent reaches the old owner once it takes events again.
    if (r.hold !== null) flushHeld(r.hold, this.o.metrics);
    this.endOthers(r, 'flush', source.id, placement.epoch);
    return this.finish(r, 'rolled-back', why, resumed);
  }

  /**
   * Version 2 with `resume`, as the release is asked for: each held socket that can be resumed
   * counts on the new owner from now on (a cut of the room's sockets on the old one spares it) and
   * its old owner's close will not reach the client. Its connection to the new owner is opened now,
   * while the release runs; its resume handshake is sent once the release answered (deliver):
   * never while the old owner still has the room.
   */
  private armResumes(r: Run, target: Backend): void {
    const signer = this.o.held?.resume;
    if (r.hold === null || signer === undefined || !this.hello.resumes(target)) return;
    for (const t of r.hold.sockets) t.expectResume(target);
    let go: (waitMs: number) => void = () => undefined;
    const waitMs = new Promise<number>((resolve) => (go = resolve));
    const { id, room, epoch } = r.ev;
    const ids = { id, room, epoch: String(epoch) };
    const done = resumeSockets(r.hold.sockets, target, ids, signer, (this.o.held as HeldOptions).timeoutMs, this.o.logger, { go: waitMs.then(() => true), waitMs });
    r.resumes = { go, done };
  }

  /**
   * Version 2: the held sockets' messages to the new owner, once the room is there (and the event
   * says how many): the resumed ones spliced to their new upstream (the old owner's stream ending
   * within `waitMs`), the others through the `messages` hook.
   */
  private async deliver(r: Run, target: Backend, waitMs: number): Promise<void> {
    if (r.hold === null) return;
    const { id, room, epoch } = r.ev;
    const ids = { id, room, epoch: String(epoch) };
    // Each resumed socket on its own: its handshake sent now (connected while the release ran),
    // its old stream ended, its held messages written, spliced, without waiting for the others.
    r.resumes?.go(waitMs);
    const done = r.resumes === null ? { resumed: new Set<TunnelHold>(), messages: 0, failed: 0 } : await r.resumes.done;
    if (r.resumes !== null) this.lap(r, 'resume');
    const out = await deliverHeld(r.hold, target, ids, this.o.call, this.o.metrics, this.o.logger, done.resumed);
    if (done.resumed.size < r.hold.sockets.length) this.lap(r, 'deliver');
    const sockets = r.hold.sockets.length;
    countSockets(this.o.metrics, sockets, done);
    r.ev = { ...r.ev, held: { sockets, resumed: done.resumed.size, messages: out.messages + done.messages, lostSockets: out.lostSockets } };
  }

  /** The held sockets were cut and the room's owner cannot be told: their messages are lost, and said so. */
  private heldLost(r: Run, why: string): void {
    const hold = r.hold as RoomHold;
    hold.stop();
    this.o.metrics.handoffHeld.inc({ result: 'lost' }, hold.sockets.length);
    this.o.logger.error({ handoff: r.ev.id, room: r.ev.room, sockets: hold.sockets.length }, `held messages lost: ${why}`);
  }

  /** `step` ended now: its duration (since the last one ended) on the event. */
  private lap(r: Run, step: keyof HandoffSteps): void {
    const now = performance.now();
    r.steps[step] = Math.round(now - r.lap);
    r.lap = now;
    r.ev = { ...r.ev, steps: { ...r.steps } };
  }

  private stage(r: Run, stage: HandoffStage): void {
    r.ev = { ...r.ev, stage };
    if (r.pages) this.o.pages?.step(r.ev.room, REMAINING[stage]);
    this.o.log.update(r.ev);
  }

  private refuse(r: Run, refusal: HandoffRefusal, why: string): HandoffOutcome {
    return { ...this.finish(r, 'refused', why), refusal };
  }

  /** The end of a handoff: its record, the metrics, one log line (with the reason). */
  private finish(r: Run, result: HandoffResult, why: string, resumed?: HookAnswer): HandoffOutcome {
    const ms = performance.now() - r.t0;
    if (r.hold !== null) {
      r.hold.stop();
      this.heldRooms.delete(r.ev.room);
    }
    // Never reached with the others still holding (each way out of the steps ended them); a guard.
    this.endOthers(r, 'flush', r.ev.from ?? '', 0);
    if (r.pages) this.o.pages?.end(r.ev.room);
    // A resume that did not answer: the old owner's lease resumes the room by itself.
    const reason = resumed === undefined || succeeded(resumed) ? why : `${why}; ${describeAnswer('resume', resumed)} (the lease resumes the room)`;
    // A refused handoff keeps the stage it was refused at; any other ends 'done'.
    r.ev = { ...r.ev, stage: result === 'refused' ? r.ev.stage : 'done', result, reason, ms: Math.round(ms) };
    this.o.log.finish(r.ev);
    this.o.metrics.handoffs.inc({ result });
    this.o.metrics.handoffSeconds.observe({ result }, ms / 1000);
    const fields = { handoff: r.ev.id, room: r.ev.room, from: r.ev.from, to: r.ev.to, result, ...(reason ? { reason } : {}), ms: r.ev.ms };
    if (result === 'moved' || result === 'moved-empty') this.o.logger.info(fields, 'room handed off');
    else this.o.logger.warn(fields, result === 'refused' ? 'room handoff refused' : result === 'rolled-back' ? 'room handoff rolled back' : 'room handoff: old owner lost');
    return { event: r.ev, refusal: null };
  }
}
