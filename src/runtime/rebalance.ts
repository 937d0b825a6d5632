// Rebalancing (docs/handoff.md, "Rebalancing"; off by default): when a backend joins or comes back
// (recovers, is undrained), live rooms move to it by handoff, with their state, one at a time at
// handoff.rebalance.roomsPerMinute, until the skew is under handoff.rebalance.skewFactor. What
// moves where is src/runtime/rebalance-plan.ts (pure); this is the driver: the timer, the reads,
// the moves, when to stop. No move without a working placement store; each move first takes the
// turn in the shared data store, so the gateways sharing it move at most one room per interval
// together, whichever of them has the turn.
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { HookSupport } from './handoff-hello.js';
import type { HandoffOutcome, HandoffRequest } from './handoff.js';
import type { BackendPool } from './pool.js';
import { planRebalance, type PlanBackend, type PlanIdle, type PlannedMove } from './rebalance-plan.js';

export interface RebalanceSettings {
  readonly enabled: boolean;
  readonly skewFactor: number;
  readonly roomsPerMinute: number;
}

export interface RebalancerOptions {
  readonly move: (req: HandoffRequest) => Promise<HandoffOutcome>;
  /** Whether the backend serves the handoff hooks (asked unless known). */
  readonly hooks: (backendId: string) => Promise<HookSupport>;
  readonly pool: BackendPool;
  /** The live rooms on a backend now (every gateway's, from presence, and this one's). */
  readonly liveRoomsOn: (backendId: string) => Promise<readonly string[]>;
  /** The placement store works now (and the placer is not degraded). */
  readonly storeWorks: () => boolean;
  /** Takes the turn of the gateways sharing the store for `ms`: false when another has it. */
  readonly takeTurn: (ms: number) => Promise<boolean>;
  readonly metrics: Pick<Metrics, 'rebalanceMoves'>;
  readonly logger: Logger;
  /** Runs `fn` (one step, resolved when it is over) after `ms`, returns its cancel; default an unref'd setTimeout (tests pass their own). */
  readonly after?: (ms: number, fn: () => Promise<void>) => () => void;
  readonly now?: () => number;
}

/** Rebalancing as a gateway that has not started one shows it (off, nothing moved). */
export const REBALANCE_OFF: RebalanceState = { enabled: false, skewFactor: 1.5, roomsPerMinute: 30, targets: [], moved: 0, failed: 0, last: '' };

/** What the admin API's events and the status page show of rebalancing on this gateway. */
export interface RebalanceState {
  readonly enabled: boolean;
  readonly skewFactor: number;
  readonly roomsPerMinute: number;
  /** Backends rooms move to now (joined or came back while the load is skewed). */
  readonly targets: readonly string[];
  /** Rooms this gateway moved by rebalancing, and moves that failed, since it started. */
  readonly moved: number;
  readonly failed: number;
  /** What the last rebalance step did or why rebalancing stopped; '' before any. */
  readonly last: string;
}

/**
 * Steps a target may not answer the hello (an app still starting when its port already accepts)
 * before rebalancing to it stops.
 */
const UNKNOWN_TRIES = 5;

const IDLE_WORDS: Record<PlanIdle, string> = {
  balanced: 'the load is within handoff.rebalance.skewFactor',
  'target-unavailable': 'it takes no new rooms now (down, draining or removed)',
  'target-without-hooks': 'it does not serve the handoff hooks',
  'target-hooks-unknown': `it did not answer whether it serves the handoff hooks (waited ${UNKNOWN_TRIES} intervals)`,
  'no-movable-room': 'no room left to move (each was tried)',
};

/** Rooms picked in one step that turn out gone from their backend before one is moved. */
const STALE_TRIES = 3;

function defaultAfter(ms: number, fn: () => Promise<void>): () => void {
  const t = setTimeout(() => void fn(), ms);
  t.unref();
  return () => clearTimeout(t);
}

export class Rebalancer {
  /** The backends rooms may move to, each with the steps it left the hello unanswered. */
  private readonly targets = new Map<string, number>();
  /** Rooms tried (moved or failed) in the current rebalance: never picked twice. */
  private readonly tried = new Set<string>();
  /** Rooms moved in the current rebalance: presence says where they were until its next heartbeat. */
  private readonly movedNow = new Map<string, PlannedMove>();
  private cancel: (() => void) | null = null;
  private stepping = false;
  private started = false;
  private stopped = false;
  private moved = 0;
  private failed = 0;
  private last = '';
  private readonly after: (ms: number, fn: () => Promise<void>) => () => void;
  private readonly now: () => number;

  constructor(
    private readonly o: RebalancerOptions,
    private settings: RebalanceSettings,
  ) {
    this.after = o.after ?? defaultAfter;
    this.now = o.now ?? Date.now;
  }

  /** Time between two moves. */
  get intervalMs(): number {
    return Math.ceil(60_000 / this.settings.roomsPerMinute);
  }

  /** The gateway started: backends that join or come back from now on are rebalanced to. */
  start(): void {
    this.started = true;
  }

  /** Gateway stop: no further step (a move running finishes). */
  stop(): void {
    this.stopped = true;
    this.end('the gateway is stopping');
  }

  /** A reload: new settings; off stops rebalancing at once. */
  configure(settings: RebalanceSettings): void {
    this.settings = settings;
    if (!settings.enabled) this.end('turned off (handoff.rebalance.enabled: false)');
  }

  /** A backend joined or came back (recovered, undrained): rooms may move to it. */
  backendBack(id: string): void {
    if (!this.started || this.stopped || !this.settings.enabled || this.targets.has(id)) return;
    if (!this.o.pool.get(id)?.acceptsNew(this.now())) return;
    this.targets.set(id, 0);
    this.o.logger.info({ backend: id, skewFactor: this.settings.skewFactor, roomsPerMinute: this.settings.roomsPerMinute }, 'rebalance: backend back, live rooms may move to it');
    this.schedule();
  }

  state(): RebalanceState {
    const { enabled, skewFactor, roomsPerMinute } = this.settings;
    return { enabled, skewFactor, roomsPerMinute, targets: [...this.targets.keys()], moved: this.moved, failed: this.failed, last: this.last };
  }

  /** Ends every rebalance now. */
  private end(why: string): void {
    this.cancel?.();
    this.cancel = null;
    if (this.targets.size > 0) this.o.logger.info({ targets: [...this.targets.keys()], reason: why }, 'rebalance stopped');
    this.targets.clear();
    this.forget();
    this.last = why;
  }

  private forget(): void {
    this.tried.clear();
    this.movedNow.clear();
  }

  private schedule(): void {
    if (this.cancel !== null || this.stepping || this.targets.size === 0 || this.stopped) return;
    this.cancel = this.after(this.intervalMs, () => {
      this.cancel = null;
      return this.step();
    });
  }

  private async step(): Promise<void> {
    this.stepping = true;
    try {
      await this.stepOnce();
    } catch (err) {
      this.last = `a step failed: ${(err as Error).message}`;
      this.o.logger.warn({ err: (err as Error).message }, 'rebalance: a step failed; trying again after the interval');
    } finally {
      this.stepping = false;
    }
    if (this.targets.size === 0) this.forget();
    this.schedule();
  }

  private async stepOnce(): Promise<void> {
    if (!this.settings.enabled || this.stopped) return;
    // Redis down: no moves (a handoff would be refused anyway); tried again after the interval.
    if (!this.o.storeWorks()) {
      this.last = 'the placement store is unavailable: no moves until it works';
      return;
    }
    // A room already gone from its backend (presence lags a heartbeat) costs no interval: the
    // next one is picked at once, in the same turn.
    for (let attempt = 0; attempt < STALE_TRIES; attempt++) {
      const plan = planRebalance({ backends: await this.view(), targets: [...this.targets.keys()], factor: this.settings.skewFactor, skip: this.tried });
      this.dropIdle(plan.idle);
      // A reload turned it off, or the gateway began stopping, while the view was read.
      if (plan.move === null || !this.settings.enabled || this.stopped) return;
      if (attempt === 0 && !(await this.o.takeTurn(this.intervalMs))) {
        this.last = 'another gateway moves a room this interval';
        return;
      }
      if ((await this.moveOne(plan.move)) !== 'gone') return;
    }
  }

  private dropIdle(idle: ReadonlyMap<string, PlanIdle>): void {
    for (const [id, why] of idle) {
      const unanswered = (this.targets.get(id) ?? 0) + 1;
      if (why === 'target-hooks-unknown' && unanswered < UNKNOWN_TRIES) {
        this.targets.set(id, unanswered);
        this.last = `waiting for ${id} to answer whether it serves the handoff hooks`;
        continue;
      }
      this.targets.delete(id);
      this.last = `stopped rebalancing to ${id}: ${IDLE_WORDS[why]}`;
      this.o.logger.info({ backend: id, reason: IDLE_WORDS[why], moved: this.moved }, 'rebalance: done for a backend');
    }
  }

  /** One handoff; 'gone' when the room had left its backend already. */
  private async moveOne(m: PlannedMove): Promise<'done' | 'gone'> {
    const out = await this.o.move({ room: m.room, to: m.to, from: m.from, trigger: 'rebalance' });
    const { result, reason } = out.event;
    this.o.metrics.rebalanceMoves.inc({ result: result ?? 'refused' });
    // Handoffs of other callers hold the slots (handoff.maxConcurrentPerBackend), or the store
    // went away since the step began: not an attempt, the room may be picked again.
    if (out.refusal === 'too-many' || out.refusal === 'store-unavailable') {
      this.last = `waiting: ${reason}`;
      return 'done';
    }
    this.tried.add(m.room);
    if (result === 'moved' || result === 'moved-empty') {
      this.moved++;
      this.movedNow.set(m.room, m);
      this.last = `moved ${m.room} from ${m.from} to ${m.to}`;
      this.o.logger.info({ room: m.room, from: m.from, to: m.to, result }, 'rebalance: room moved');
      return 'done';
    }
    // The room left the backend meanwhile: nothing was wrong.
    if (out.refusal === 'not-on-backend' || out.refusal === 'not-placed') return 'gone';
    this.failed++;
    this.last = `${m.room} stayed on ${m.from}: ${reason}`;
    this.o.logger.warn({ room: m.room, from: m.from, to: m.to, result, reason }, 'rebalance: room not moved');
    return 'done';
  }

  /** The backends as the plan needs them: live rooms (moves of this rebalance applied), hooks. */
  private async view(): Promise<PlanBackend[]> {
    const now = this.now();
    const listed = this.o.pool.backends.filter((b) => !b.removed);
    const read = await Promise.all(
      listed.map(async (b) => {
        const acceptsNew = b.acceptsNew(now);
        // Only backends that take new rooms give or take rooms: no need to ask the others.
        if (!acceptsNew) return { id: b.id, weight: b.config.weight, rooms: new Set<string>(), acceptsNew, hooks: 'unknown' as const };
        const [rooms, hooks] = await Promise.all([this.o.liveRoomsOn(b.id), this.o.hooks(b.id)]);
        return { id: b.id, weight: b.config.weight, rooms: new Set(rooms), acceptsNew, hooks };
      }),
    );
    for (const m of this.movedNow.values()) {
      const from = read.find((b) => b.id === m.from);
      const to = read.find((b) => b.id === m.to);
      from?.rooms.delete(m.room);
      to?.rooms.add(m.room);
    }
    return read.map((b) => ({ ...b, rooms: [...b.rooms].sort() }));
  }
}
