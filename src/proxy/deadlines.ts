// Deadlines for many short waits at once (a page request's connect and answer-head timeouts): one
// interval sweeps them, instead of a timer armed and cancelled per request (a fifth of the
// JavaScript time of a byte-level page was timer bookkeeping). A wait expires up to one tick late;
// the tick is a quarter of the shortest timeout (at least 50 ms, at most 1 s).
export interface Expiring {
  expire(): void;
}

export class Deadlines {
  private readonly due = new Map<Expiring, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly tickMs: number) {}

  static tickFor(...timeoutsMs: number[]): number {
    return Math.max(50, Math.min(1_000, Math.floor(Math.min(...timeoutsMs) / 4)));
  }

  /** Calls item.expire() at about atMs, unless cleared first; a second set moves the deadline. */
  set(item: Expiring, atMs: number): void {
    this.due.set(item, atMs);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.tickMs);
      this.timer.unref();
    }
  }

  clear(item: Expiring): void {
    this.due.delete(item);
  }

  get size(): number {
    return this.due.size;
  }

  private sweep(): void {
    if (this.due.size === 0) {
      // Idle: the interval goes until the next wait.
      clearInterval(this.timer as NodeJS.Timeout);
      this.timer = null;
      return;
    }
    const now = Date.now();
    for (const [item, at] of this.due) {
      if (at > now) continue;
      this.due.delete(item);
      item.expire();
    }
  }

  close(): void {
    this.due.clear();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
