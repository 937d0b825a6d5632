/**
 * The soak's verdict: did the gateway's memory or open files grow while the work stayed the same?
 * Pure (samples in, verdict out): `npm run soak` and test/chaos/soak.test.ts call the same function.
 *
 * The window is the second half of the soak: by then the held sockets are open, the heap has
 * grown to its working size and state kept for a while (placements of empty rooms) is expired as
 * fast as it is made, so what still grows is what the work leaves behind. Over the window, a least-squares slope per minute of three series
 * must stay under the limits below; no held socket may have been dropped; SETTLE_S after the
 * clients closed every socket (and gave up on every handshake) the gateway must count none live:
 * each tunnel ends by its own deadlines (the half-close linger, 5 s, is the longest that applies
 * to a closed client), so one still live then is stuck, not slow (a run on an overloaded machine
 * left 21 live 200 s after; docs/performance.md); and once every socket is closed the gateway's
 * open fds must be back where they were before the first one (exact, so an fd kept per upgrade
 * fails even a short run).
 *
 *  - Live memory: V8 heap used plus external memory (the backing stores of Buffers, which live
 *    outside the heap), read right after a full collection (the soak asks for one every few
 *    samples, inspector.ts). Heap used alone is no measure: between two mark-compacts it also
 *    counts the garbage promoted since the last one, and V8 lets that grow for a minute or more
 *    (+50 MB in 45 s of a healthy 1-minute run, as steep as a real leak), then drops it at once.
 *  - RSS (MB), as read: memory V8 does not see (native allocations), with the noise of pages
 *    the allocator and the young generation take and give back, hence a looser limit.
 *  - Open fds beyond 2 per live socket (a proxied socket holds its client's and its backend's):
 *    the churn's sockets come and go between two readings, the rest must not grow.
 *
 * Limits. A leak is something kept per unit of work, and the unit that comes and goes in a soak is
 * the upgrade (a held socket stays): the churn opens and closes ~10,000 upgrades a minute, so a
 * limit of 10 MB/min of live memory is about 1 KB kept per upgrade, 20 MB/min of RSS about 2 KB.
 * On a 2-core machine with a load average of 6-12 (other test suites running), 1-minute runs of a
 * healthy gateway gave live heap -0.3 to +1.7 MB/min and RSS +0.7 to +9.4 MB/min; a gateway that
 * kept each upgrade's request in a module-level array (the request with its headers and socket
 * objects) gave live heap +51 and RSS +67 MB/min. Open fds beyond the sockets moved by a few
 * dozen between readings (upgrades in flight); one that kept an fd per upgrade gave +9,800
 * fds/min and 11,700 fds left after close, hence 60 fds/min and 16 fds.
 */

export interface Sample {
  /** before (no socket yet), ramp (opening the held sockets), soak, after (all closed). */
  readonly phase: 'before' | 'ramp' | 'soak' | 'after';
  /** Seconds since the soak phase began (negative before it). */
  readonly t: number;
  readonly rssMb: number;
  /** V8 heap used (nodejs_heap_size_used_bytes). */
  readonly heapMb: number;
  /** Memory of Buffers and other ArrayBuffers outside the V8 heap (nodejs_external_memory_bytes). */
  readonly externalMb: number;
  readonly fds: number;
  /** Event-loop delay p99 since the previous sample (prom-client's nodejs_eventloop_lag_p99_seconds), ms. */
  readonly lagP99Ms: number;
  /** Upgraded sockets the gateway pipes (roomgate_live_sockets). */
  readonly sockets: number;
  /** Frames the clients received per second since the previous sample. */
  readonly framesPerS: number;
  /** Churn upgrades done so far (opened, mounted, closed). */
  readonly upgrades: number;
  /** 1 when heapMb and externalMb were read right after a full collection (what is live), else 0. */
  readonly gc: number;
  /** Upgrades that failed so far (churn, and held sockets that did not open after 3 tries). */
  readonly failed: number;
  /** Held sockets that closed without the clients closing them. */
  readonly dropped: number;
  /** The machine's 1-minute load average. */
  readonly load1: number;
}

/** The series the verdict fits. */
export type Fitted = 'rssMb' | 'liveMb' | 'fdsBeyondSockets';

/** Each fitted series at each sample; NaN where it has no value (the live heap between collections). */
export function fitted(samples: readonly Sample[]): Record<Fitted, number[]> {
  return {
    rssMb: samples.map((s) => s.rssMb),
    liveMb: samples.map((s) => (s.gc === 1 ? s.heapMb + s.externalMb : Number.NaN)),
    fdsBeyondSockets: samples.map((s) => s.fds - 2 * s.sockets),
  };
}

export interface Tolerance {
  readonly rssMbPerMin: number;
  readonly liveMbPerMin: number;
  readonly fdsPerMin: number;
  /** Open fds after every socket closed minus before the first: listeners come and go (health checks). */
  readonly fdsSettle: number;
}

export const TOLERANCE: Tolerance = { rssMbPerMin: 20, liveMbPerMin: 10, fdsPerMin: 60, fdsSettle: 16 };

/**
 * Seconds after the clients closed everything by which the gateway must count no socket live:
 * the 'after' sample is read then, or as soon as none is (bench/soak/run.ts).
 */
export const SETTLE_S = 30;

export interface Check {
  readonly name: string;
  readonly value: number;
  readonly limit: number;
  readonly unit: string;
  readonly ok: boolean;
}

export interface Verdict {
  readonly ok: boolean;
  /** The window the slopes are fitted over (seconds of the soak phase). */
  readonly from: number;
  readonly to: number;
  readonly checks: readonly Check[];
  /** Slope (per minute) and value at t = 0 of each fitted series, to draw the fit. */
  readonly fits: Readonly<Record<Fitted, { perMin: number; at0: number }>>;
}

/** Least-squares line through (x, y): slope and intercept; slope 0 with fewer than 2 distinct x. */
export function leastSquares(xs: readonly number[], ys: readonly number[]): { slope: number; intercept: number } {
  const n = Math.min(xs.length, ys.length);
  if (n === 0) return { slope: 0, intercept: 0 };
  let mx = 0;
  let my = 0;
  for (let i = 0; i < n; i++) {
    mx += xs[i]!;
    my += ys[i]!;
  }
  mx /= n;
  my /= n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  const slope = sxx > 0 ? sxy / sxx : 0;
  return { slope, intercept: my - slope * mx };
}

export function verdict(samples: readonly Sample[], tol: Tolerance = TOLERANCE): Verdict {
  const soak = samples.filter((s) => s.phase === 'soak');
  const end = soak.length > 0 ? soak[soak.length - 1]!.t : 0;
  const from = end / 2;
  const series = fitted(samples);
  const inWindow = (k: Fitted): number[] => samples.flatMap((s, i) => (s.phase === 'soak' && s.t >= from && Number.isFinite(series[k][i]) ? [i] : []));
  const fit = (k: Fitted): { perMin: number; at0: number } => {
    const idx = inWindow(k);
    const { slope, intercept } = leastSquares(
      idx.map((i) => samples[i]!.t / 60),
      idx.map((i) => series[k][i]!),
    );
    return { perMin: slope, at0: intercept };
  };
  const fits = { rssMb: fit('rssMb'), liveMb: fit('liveMb'), fdsBeyondSockets: fit('fdsBeyondSockets') };
  const before = samples.find((s) => s.phase === 'before');
  const after = [...samples].reverse().find((s) => s.phase === 'after');
  const check = (name: string, value: number, limit: number, unit: string): Check => ({ name, value, limit, unit, ok: Number.isFinite(value) && value <= limit });
  const checks: Check[] = [
    check('RSS slope', fits.rssMb.perMin, tol.rssMbPerMin, 'MB/min'),
    check('live memory (heap + Buffers) slope', fits.liveMb.perMin, tol.liveMbPerMin, 'MB/min'),
    check('open fds beyond the sockets, slope', fits.fdsBeyondSockets.perMin, tol.fdsPerMin, 'fds/min'),
    check('held sockets dropped', soak.length > 0 ? soak[soak.length - 1]!.dropped : Number.NaN, 0, 'sockets'),
    check(`sockets live ${SETTLE_S} s after the clients closed`, after ? after.sockets : Number.NaN, 0, 'sockets'),
    check('open fds after close - before', before && after ? after.fds - before.fds : Number.NaN, tol.fdsSettle, 'fds'),
  ];
  // Too few points for a slope is no verdict at all.
  const live = inWindow('liveMb').length;
  if (live < 3) checks.push({ name: 'live-memory readings in the window', value: live, limit: 3, unit: '(at least)', ok: false });
  if (inWindow('rssMb').length < 5) checks.push({ name: 'samples in the window', value: inWindow('rssMb').length, limit: 5, unit: '(at least)', ok: false });
  return { ok: checks.every((c) => c.ok), from, to: end, checks, fits };
}
