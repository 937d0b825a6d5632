// Finds WebSocket clients that went silent: a client whose network vanished without a close (a
// phone that lost coverage, a laptop lid shut) never says so, and while the backend keeps sending
// to it TCP retransmits for many minutes before giving up (its keep-alive probes only run on a
// quiet connection). A healthy client sends something often (djust pings every 30 s; browsers
// answer a server's pings), so a client that has sent nothing for the limit is gone.
//
// Cost per frame is one boolean written (`heard`); one interval per gateway sweeps the open
// sockets a few times per limit, instead of a timer re-armed per frame.
export interface Listened {
  /** Set by the data path on every read from the client; cleared by the sweep. */
  heard: boolean;
  /** When the sweep last found `heard` set (the client spoke before this). */
  quietSince: number;
  /** The client has sent nothing for the limit: close it. */
  silent(): void;
}

export class SilenceSweep {
  private readonly items = new Set<Listened>();
  private timer: NodeJS.Timeout | null = null;
  private readonly periodMs: number;

  /** limitMs 0: never (add does nothing). */
  constructor(
    private readonly limitMs: number,
    private readonly now: () => number = Date.now,
  ) {
    // A socket is closed between limitMs and limitMs + periodMs after its client's last byte.
    this.periodMs = Math.max(100, Math.min(5_000, Math.floor(limitMs / 4)));
  }

  add(item: Listened): void {
    if (this.limitMs <= 0) return;
    item.heard = false;
    item.quietSince = this.now();
    this.items.add(item);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.periodMs);
      this.timer.unref();
    }
  }

  delete(item: Listened): void {
    this.items.delete(item);
  }

  get size(): number {
    return this.items.size;
  }

  private sweep(): void {
    if (this.items.size === 0) {
      clearInterval(this.timer as NodeJS.Timeout);
      this.timer = null;
      return;
    }
    const now = this.now();
    for (const item of this.items) {
      if (item.heard) {
        item.heard = false;
        item.quietSince = now;
      } else if (now - item.quietSince >= this.limitMs) {
        this.items.delete(item);
        item.silent();
      }
    }
  }

  close(): void {
    this.items.clear();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
