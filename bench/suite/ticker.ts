/**
 * Spreads periodic work over a period: every member gets one call per `periodMs`, at its own
 * phase, from one timer per process instead of one per member. A backend's rooms (5 broadcasts/s)
 * and a load generator's clients (an input every 400 ms, a ping every 30 s) use it, so work
 * arrives evenly, as from independent game loops, not in one burst per period.
 *
 * The timer catches up on slots it missed (a busy event loop), so each member still gets its
 * calls per period on average.
 */
export class Ticker<T> {
  private readonly slots: Set<T>[];
  private readonly slotOf = new Map<T, number>();
  private next = 0;
  private last: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    periodMs: number,
    private readonly fire: (member: T) => void,
    private readonly tickMs = 10,
  ) {
    const n = Math.max(1, Math.round(periodMs / tickMs));
    this.slots = Array.from({ length: n }, () => new Set<T>());
    this.last = Math.floor(performance.now() / tickMs);
  }

  /** Adds a member at the given phase (0..1 of the period), or round-robin when omitted. */
  add(member: T, phase?: number): void {
    if (this.slotOf.has(member)) return;
    const n = this.slots.length;
    const slot = phase === undefined ? this.next++ % n : Math.min(n - 1, Math.floor(phase * n));
    this.slots[slot]!.add(member);
    this.slotOf.set(member, slot);
    if (!this.timer) this.start();
  }

  delete(member: T): void {
    const slot = this.slotOf.get(member);
    if (slot === undefined) return;
    this.slotOf.delete(member);
    this.slots[slot]!.delete(member);
    if (this.slotOf.size === 0) this.stop();
  }

  get size(): number {
    return this.slotOf.size;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Removes every member (and stops). */
  clear(): void {
    for (const s of this.slots) s.clear();
    this.slotOf.clear();
    this.stop();
  }

  private start(): void {
    this.last = Math.floor(performance.now() / this.tickMs);
    this.timer = setInterval(() => this.run(), this.tickMs);
  }

  private run(): void {
    const now = Math.floor(performance.now() / this.tickMs);
    const n = this.slots.length;
    // At most one whole period of catching up.
    const from = Math.max(this.last + 1, now - n + 1);
    for (let t = from; t <= now; t++) {
      for (const m of this.slots[t % n]!) this.fire(m);
    }
    this.last = now;
  }
}
