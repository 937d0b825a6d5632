// The room handoffs of this gateway, running and recent (status page, admin API events): which
// room, from where to where, how far it got and what became of it. Kept apart from the backend
// event log (whose room-move counts a stream of handoffs would take) like the push log.

/**
 * moved: the room's state went to the new owner and the placement followed; moved-empty: the old
 * owner held no state for the room (export 404), the placement moved with nothing to import;
 * rolled-back: a step before the move failed, the old owner resumed the room, placement untouched;
 * owner-lost: the old owner died during the export, the room was placed empty on the new owner;
 * refused: not started (no hooks, store unavailable, too many at once, ...).
 */
export type HandoffResult = 'moved' | 'moved-empty' | 'rolled-back' | 'owner-lost' | 'refused';
export const HANDOFF_RESULTS: readonly HandoffResult[] = ['moved', 'moved-empty', 'rolled-back', 'owner-lost', 'refused'];

/** How far a handoff got: the step running now, or the last one it reached. */
export type HandoffStage = 'hello' | 'export' | 'import' | 'move' | 'release' | 'done';

/**
 * How long each step took (ms, rounded), as the gateway that ran the handoff timed it; a step that
 * did not run is absent. hello: from the start to the hold (the placement read, the hellos); hold:
 * until every socket of the room, through every gateway, was held; export, import, move (the
 * placement's compare-and-set), release: each call until its answer; resume: from the release's
 * answer until every resumed socket was spliced to the new owner (its held messages written);
 * deliver: until the held messages of the sockets not resumed were delivered (the `messages` way).
 */
export interface HandoffSteps {
  readonly hello?: number;
  readonly hold?: number;
  readonly export?: number;
  readonly import?: number;
  readonly move?: number;
  readonly release?: number;
  readonly resume?: number;
  readonly deliver?: number;
}

export interface HandoffEvent {
  readonly id: string;
  readonly room: string;
  /** The old owner; null when the room had no placement. */
  readonly from: string | null;
  readonly to: string | null;
  /** What asked for it: an operator's move, a drain with handoff, or rebalancing. */
  readonly trigger: 'move' | 'drain' | 'rebalance';
  readonly stage: HandoffStage;
  /** null while it runs. */
  readonly result: HandoffResult | null;
  /** Why it was refused or rolled back, or what went wrong after the move; '' when nothing did. */
  readonly reason: string;
  /** The room's epoch on the new owner, once reserved. */
  readonly epoch: number | null;
  /** After the move: the old owner closed the room's sockets itself (released), or roomgate cut them. */
  readonly release: 'released' | 'cut' | null;
  /** Bytes of state handed over. */
  readonly bytes: number | null;
  /**
   * Version 2: this gateway's sockets of the room held during the handoff, those of them resumed
   * on the new owner (their clients saw no close; the others reconnected), the messages the new
   * owner took from them, and the sockets whose messages it did not take (absent: nothing held).
   */
  readonly held?: { readonly sockets: number; readonly resumed: number; readonly messages: number; readonly lostSockets: number };
  /**
   * Version 2 through every gateway: the other gateways asked to hold their sockets of the room,
   * how many answered in time with how many sockets, and how many did not (absent: none asked).
   */
  readonly gateways?: { readonly asked: number; readonly held: number; readonly sockets: number; readonly late: number };
  /** The steps' durations so far (see HandoffSteps). */
  readonly steps?: HandoffSteps;
  /** ISO 8601. */
  readonly at: string;
  /** Time it took (ms, rounded); null while it runs. */
  readonly ms: number | null;
}

export class HandoffLog {
  private readonly running = new Map<string, HandoffEvent>();
  private readonly done: HandoffEvent[] = [];

  constructor(private readonly max = 100) {}

  /** A handoff started, or moved on to another step. */
  update(e: HandoffEvent): void {
    this.running.set(e.id, e);
  }

  finish(e: HandoffEvent): void {
    this.running.delete(e.id);
    this.done.push(e);
    if (this.done.length > this.max) this.done.shift();
  }

  /** Running ones, oldest first. */
  inProgress(): readonly HandoffEvent[] {
    return [...this.running.values()];
  }

  /** Finished ones, oldest first. */
  recent(): readonly HandoffEvent[] {
    return this.done;
  }
}
