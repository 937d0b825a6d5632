/**
 * Small statistics: a log-bucketed latency histogram that load generator processes fill and the
 * orchestrator merges, and median / min / max over rounds.
 */

/** Bucket i holds values in [BASE * GROWTH^i, BASE * GROWTH^(i+1)): 1 % wide, from 1 µs up. */
const BASE_MS = 0.001;
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);

export interface HistogramData {
  /** [bucket, count] pairs, sparse. */
  readonly buckets: [number, number][];
  readonly count: number;
  readonly sum: number;
  readonly max: number;
  /** Values below BASE_MS (a clock step backwards can give a tiny or negative latency). */
  readonly under: number;
}

/** Buckets up to BASE_MS * GROWTH^MAX_BUCKET: about 1,000 s. */
const MAX_BUCKET = 2_800;

export class Histogram {
  private counts = new Float64Array(MAX_BUCKET + 1);
  count = 0;
  sum = 0;
  max = 0;
  under = 0;

  record(ms: number): void {
    if (!Number.isFinite(ms)) return;
    this.count++;
    this.sum += ms;
    if (ms > this.max) this.max = ms;
    if (ms < BASE_MS) {
      this.under++;
      return;
    }
    const b = Math.min(MAX_BUCKET, Math.floor(Math.log(ms / BASE_MS) / LOG_GROWTH));
    this.counts[b]!++;
  }

  merge(d: HistogramData): this {
    for (const [b, n] of d.buckets) this.counts[Math.min(MAX_BUCKET, b)]! += n;
    this.count += d.count;
    this.sum += d.sum;
    this.max = Math.max(this.max, d.max);
    this.under += d.under;
    return this;
  }

  /** The p-th percentile (0-100) in ms, to within 1 %; NaN when empty. */
  percentile(p: number): number {
    if (this.count === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = this.under;
    if (seen >= rank) return 0;
    for (let b = 0; b <= MAX_BUCKET; b++) {
      seen += this.counts[b]!;
      // The bucket's geometric middle.
      if (seen >= rank) return Math.min(this.max, BASE_MS * GROWTH ** (b + 0.5));
    }
    return this.max;
  }

  toJSON(): HistogramData {
    const buckets: [number, number][] = [];
    this.counts.forEach((n, b) => {
      if (n > 0) buckets.push([b, n]);
    });
    return { buckets, count: this.count, sum: this.sum, max: this.max, under: this.under };
  }

  reset(): void {
    this.counts.fill(0);
    this.count = this.sum = this.max = this.under = 0;
  }
}

/** Finite values only. */
function finite(xs: readonly number[]): number[] {
  return xs.filter((x) => Number.isFinite(x));
}

export function median(xs: readonly number[]): number {
  const s = finite(xs).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function min(xs: readonly number[]): number {
  const s = finite(xs);
  return s.length ? Math.min(...s) : Number.NaN;
}

export function max(xs: readonly number[]): number {
  const s = finite(xs);
  return s.length ? Math.max(...s) : Number.NaN;
}

/** 3 significant figures, thousands separated; "—" for NaN. */
export function fmt(x: number): string {
  if (!Number.isFinite(x)) return '—';
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  if (a === 0) return '0';
  return x.toPrecision(2);
}

/** "median (min–max)", or just the value when all rounds agree or there is one round. */
export function cell(xs: readonly number[]): string {
  const f = finite(xs);
  if (f.length === 0) return '—';
  const lo = fmt(min(f));
  const hi = fmt(max(f));
  const med = fmt(median(f));
  return f.length === 1 || lo === hi ? med : `${med} (${lo}–${hi})`;
}
