// Guarantee 4 of a version-2 handoff (docs/handoff.md, "Page requests during a handoff"): a page
// request (or a new WebSocket handshake) of a room whose handoff this gateway runs or has been told to hold waits for the
// handoff's end, then goes to the room's owner at that moment (the request pipeline routes it
// after the wait), never to a frozen owner and never refused because of the move. The wait is
// bounded by handoff.timeoutMs per step still to run when the request arrives: each step (a hook
// call, the move) is bounded by it, so a handoff that runs as designed always ends first.

/** A handoff's steps after the hold: export, import, move, release, the held messages' delivery. */
export const HANDOFF_STEPS = 5;

interface Moving {
  /** Steps still to run. */
  steps: number;
  /** How many handoffs (this gateway's own and another's hold) keep the room waiting. */
  count: number;
  readonly waiters: Set<(ended: boolean) => void>;
}

export class HandoffPageWaits {
  private readonly rooms = new Map<string, Moving>();

  constructor(private readonly timeoutMs: number) {}

  /** A handoff of `room` begins here (its runner, or a gateway told to hold): its pages wait from now. */
  begin(room: string, steps = HANDOFF_STEPS): void {
    const m = this.rooms.get(room);
    if (m) {
      m.count++;
      m.steps = Math.max(m.steps, steps);
    } else this.rooms.set(room, { steps, count: 1, waiters: new Set() });
  }

  /** Steps still to run (a later request waits less). */
  step(room: string, steps: number): void {
    const m = this.rooms.get(room);
    if (m) m.steps = steps;
  }

  /** One handoff of the room ended: once none is left its waiting pages go on. */
  end(room: string): void {
    const m = this.rooms.get(room);
    if (!m || --m.count > 0) return;
    this.rooms.delete(room);
    for (const w of m.waiters) w(true);
  }

  /**
   * Null when the room is in no handoff here (the request goes on at once); else resolves true at
   * the handoff's end, false past the bound (handoff.timeoutMs per step still to run).
   */
  wait(room: string | null): Promise<boolean> | null {
    if (room === null) return null;
    const m = this.rooms.get(room);
    if (!m) return null;
    return new Promise<boolean>((resolve) => {
      const done = (ended: boolean): void => {
        clearTimeout(timer);
        m.waiters.delete(done);
        resolve(ended);
      };
      const timer = setTimeout(() => done(false), this.timeoutMs * Math.max(1, m.steps));
      m.waiters.add(done);
    });
  }

  /** Rooms whose pages wait now (the status page, the tests). */
  get size(): number {
    return this.rooms.size;
  }

  /** Requests (pages and WebSocket handshakes) waiting now for a handoff of their room (/events, the status page). */
  get waiting(): number {
    let n = 0;
    for (const m of this.rooms.values()) n += m.waiters.size;
    return n;
  }
}
