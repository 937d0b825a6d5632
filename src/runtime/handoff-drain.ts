// A drain with handoff (`roomgate drain BACKEND --handoff`): instead of waiting for the draining
// backend's rooms to empty, every live room of it moves now, with its state, a batch at a time
// (handoff.drainBatch, never more at once than handoff.maxConcurrentPerBackend). A room whose
// handoff fails is tried once more, then left to the drain as today (it empties, or its deadline
// closes it). The drain is done when no room is left to try; the backend's state stays
// 'draining' (undrain it, or stop it), as for any drain.
import type { Logger } from '../observability/logger.js';
import type { HandoffOutcome, HandoffRequest } from './handoff.js';
import type { HookSupport } from './handoff-hello.js';
import type { BackendPool } from './pool.js';

export interface DrainProgress {
  readonly backend: string;
  /** ISO 8601. */
  readonly startedAt: string;
  /** Rooms handed off (with their state or, when the old owner held none, without). */
  moved: number;
  /** Rooms whose handoff failed twice (they stay, as in a drain without handoff) or whose owner was lost. */
  failed: number;
  /** Live rooms of the backend at the last count (from presence). */
  left: number;
  /**
   * Version 2, this gateway's sockets of the moved rooms: kept open (resumed on the new owner) or
   * closed to reconnect, and the held messages the new owners took.
   */
  sockets: { resumed: number; reconnected: number; messages: number };
  done: boolean;
  /** Why it ended early ('' while running or when every room was tried). */
  reason: string;
}

export interface HandoffDrainOptions {
  readonly move: (req: HandoffRequest) => Promise<HandoffOutcome>;
  readonly support: (backendId: string) => HookSupport;
  /** Handoffs running through this gateway per backend (spreads a drain's rooms). */
  readonly running: (backendId: string) => number;
  readonly pool: BackendPool;
  /** The live rooms on a backend now (every gateway's, from presence, and this one's). */
  readonly liveRoomsOn: (backendId: string) => Promise<readonly string[]>;
  readonly batch: number;
  readonly maxConcurrentPerBackend: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

/** Attempts per room (a failed handoff is tried once more). */
const TRIES = 2;

export class HandoffDrains {
  private readonly drains = new Map<string, { progress: DrainProgress; done: Promise<void> }>();
  private stopped = false;
  private readonly now: () => number;

  constructor(private readonly o: HandoffDrainOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Starts moving the backend's rooms (once: a drain already running is returned as it is). */
  start(backend: string): { progress: DrainProgress; done: Promise<void> } {
    const running = this.drains.get(backend);
    if (running && !running.progress.done) return running;
    const progress: DrainProgress = { backend, startedAt: new Date(this.now()).toISOString(), moved: 0, failed: 0, left: 0, sockets: { resumed: 0, reconnected: 0, messages: 0 }, done: false, reason: '' };
    const entry = { progress, done: this.run(progress) };
    this.drains.set(backend, entry);
    return entry;
  }

  /** Every drain with handoff this gateway ran or runs (one per backend, the latest). */
  list(): readonly DrainProgress[] {
    return [...this.drains.values()].map((d) => d.progress);
  }

  /** Gateway stop: running drains end after their current batch. */
  stop(): void {
    this.stopped = true;
  }

  private async run(d: DrainProgress): Promise<void> {
    const tries = new Map<string, number>();
    try {
      for (;;) {
        const why = this.interrupted(d.backend);
        if (why !== null) {
          d.reason = why;
          break;
        }
        const rooms = await this.o.liveRoomsOn(d.backend);
        d.left = rooms.length;
        const todo = rooms.filter((room) => (tries.get(room) ?? 0) < TRIES);
        if (todo.length === 0) break;
        await this.batches(d, todo, tries);
      }
    } catch (err) {
      d.reason = `live rooms could not be read: ${(err as Error).message}`;
    }
    d.done = true;
    const fields = { backend: d.backend, moved: d.moved, failed: d.failed, left: d.left, sockets: d.sockets, ...(d.reason ? { reason: d.reason } : {}) };
    if (d.reason || d.failed > 0) this.o.logger.warn(fields, 'drain with handoff ended');
    else this.o.logger.info(fields, 'drain with handoff done');
  }

  /** Why the drain stops now, or null. */
  private interrupted(backend: string): string | null {
    if (this.stopped) return 'the gateway is stopping';
    const b = this.o.pool.get(backend);
    if (!b) return `backend ${backend} left the list`;
    if (b.admin?.state !== 'draining') return `backend ${backend} is no longer draining`;
    return null;
  }

  private async batches(d: DrainProgress, rooms: readonly string[], tries: Map<string, number>): Promise<void> {
    const size = Math.max(1, Math.min(this.o.batch, this.o.maxConcurrentPerBackend));
    for (let i = 0; i < rooms.length && this.interrupted(d.backend) === null; i += size) {
      await Promise.all(rooms.slice(i, i + size).map((room) => this.one(d, room, tries)));
    }
  }

  private async one(d: DrainProgress, room: string, tries: Map<string, number>): Promise<void> {
    const to = this.target(d.backend);
    if (to === null) {
      tries.set(room, TRIES);
      d.failed++;
      d.reason = 'no other backend takes new rooms';
      return;
    }
    const out = await this.o.move({ room, to, from: d.backend, trigger: 'drain' });
    const result = out.event.result;
    if (result === 'moved' || result === 'moved-empty') {
      tries.set(room, TRIES);
      d.moved++;
      const held = out.event.held;
      if (held !== undefined) {
        d.sockets.resumed += held.resumed;
        d.sockets.reconnected += held.sockets - held.resumed;
        d.sockets.messages += held.messages;
      }
      return;
    }
    // Another gateway's handoffs took the slots: not an attempt.
    if (out.refusal === 'too-many') return;
    // Already gone from the backend (presence lags a heartbeat behind): nothing to do.
    if (out.refusal === 'not-on-backend' || out.refusal === 'not-placed') {
      tries.set(room, TRIES);
      return;
    }
    const n = (tries.get(room) ?? 0) + 1;
    tries.set(room, result === 'owner-lost' ? TRIES : n);
    if (result === 'owner-lost' || n >= TRIES) d.failed++;
  }

  /** The backend that takes the room: accepts new rooms, may serve the hooks, fewest rooms. */
  private target(from: string): string | null {
    const now = this.now();
    let best: { id: string; load: number } | null = null;
    for (const b of this.o.pool.backends) {
      if (b.id === from || !b.acceptsNew(now) || this.o.support(b.id) === 'no') continue;
      const load = b.rooms + this.o.running(b.id);
      if (best === null || load < best.load) best = { id: b.id, load };
    }
    return best?.id ?? null;
  }
}
