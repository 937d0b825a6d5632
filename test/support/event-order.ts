// "Did the call settle before a timer of N ms?" as an order of events in one event loop, for tests
// that would otherwise assert a bound on elapsed real time (which a loaded machine breaks, and
// speed is bench/'s). Node keeps one clock per event-loop turn: two timers started in the same turn
// expire in the order of their durations, due timers fire earliest first, and the microtasks a
// timer callback queues (a rejection travelling up an await chain) run before the next timer
// callback. So when the code under test starts its own timer in the same turn as the call (no I/O
// in between), "settled before a longer sentinel timer" holds however slowly the machine runs,
// and fails when the code waits for anything else (a reconnect, a queue, a longer default).

export interface Settled {
  /** Which came first: the call settling, or the sentinel timer firing. */
  readonly first: 'call' | 'sentinel';
  /** What the call rejected with (undefined: it resolved, or had not settled yet). */
  readonly error: unknown;
}

/** Starts a sentinel timer of `sentinelMs` in this turn and reports whether `call()` settled first. */
export async function settleOrder(call: () => Promise<unknown>, sentinelMs: number): Promise<Settled> {
  let timer: NodeJS.Timeout | undefined;
  const sentinel = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => resolve({ first: 'sentinel', error: undefined }), sentinelMs);
  });
  const settled = call().then(
    (): Settled => ({ first: 'call', error: undefined }),
    (error: unknown): Settled => ({ first: 'call', error }),
  );
  try {
    return await Promise.race([settled, sentinel]);
  } finally {
    clearTimeout(timer);
  }
}
