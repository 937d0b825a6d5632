// The last 15 minutes of a gateway's figures, for the status page's plots: one sample every
// HISTORY_STEP_MS on a timer (never per request: counters already kept are read and differenced),
// kept in fixed-size rings (HISTORY_POINTS slots per series), so memory is bounded whatever runs
// through the gateway. Slots are aligned to the wall clock (slot = floor(t / step)), so the
// workers of one roomgate sample the same slots and the primary can merge their histories.
import { openDelayWindow, type DelayWindow } from './event-loop-delay.js';

export const HISTORY_STEP_MS = 5_000;
/** 15 minutes of 5 s slots. */
export const HISTORY_POINTS = 180;
/** Samples are taken this long after a slot begins (timers fire late, never early). */
const SLOT_OFFSET_MS = 100;

/** What one sample reads of the gateway: figures now, and counters since start. */
export interface HistoryReading {
  readonly backends: readonly { readonly id: string; readonly sockets: number; readonly rooms: number }[];
  /** WebSocket upgrades that got their 101 (counter). */
  readonly upgrades: number;
  /** Proxied page requests answered, whatever the status (counter). */
  readonly pages: number;
  /** Answers with a 5xx status, pages and upgrades (counter). */
  readonly errors: number;
  /** Page cache: answers that cost the backend nothing, and all answers it gave (counters); null when off. */
  readonly cache: { readonly hits: number; readonly answers: number } | null;
}

type Series = readonly (number | null)[];

/** Oldest first, HISTORY_POINTS values ending at `end`; null where nothing was sampled. */
export interface HistorySnapshot {
  readonly stepMs: number;
  /** Start of the newest slot (ms since epoch); value i is the slot at end - (n - 1 - i) * stepMs. */
  readonly end: number;
  /** Per second, over each slot. */
  readonly upgrades: Series;
  readonly pages: Series;
  readonly errors: Series;
  /** Per slot: page-cache hits and answers (the ratio is hits / answers). */
  readonly cacheHits: Series;
  readonly cacheAnswers: Series;
  /** Event-loop delay over each slot, p50 and p99, ms: what roomgate adds to every request while busy. */
  readonly lagP50: Series;
  readonly lagP99: Series;
  /** Per backend: live sockets (through this gateway) and rooms placed (all gateways), at each slot. */
  readonly backends: readonly { readonly id: string; readonly sockets: Series; readonly rooms: Series }[];
}

const SCALARS = ['upgrades', 'pages', 'errors', 'cacheHits', 'cacheAnswers', 'lagP50', 'lagP99'] as const;
type Scalar = (typeof SCALARS)[number];

/** One series: a value per slot number, in a ring of `size` places. */
class Ring {
  private readonly slots: Float64Array;
  private readonly values: Float64Array;

  constructor(private readonly size: number) {
    this.slots = new Float64Array(size).fill(-1);
    this.values = new Float64Array(size);
  }

  set(slot: number, v: number): void {
    const i = slot % this.size;
    this.slots[i] = slot;
    this.values[i] = v;
  }

  /** `size` values, oldest first, the last at slot `endSlot`. */
  read(endSlot: number): (number | null)[] {
    const out: (number | null)[] = new Array<number | null>(this.size);
    for (let k = 0; k < this.size; k++) {
      const slot = endSlot - (this.size - 1 - k);
      const i = ((slot % this.size) + this.size) % this.size;
      out[k] = this.slots[i] === slot ? (this.values[i] as number) : null;
    }
    return out;
  }

  /** The newest slot this ring holds a value of (-1: none). */
  newest(): number {
    let best = -1;
    for (const s of this.slots) if (s > best) best = s;
    return best;
  }
}

/** Rounded for the page (and a smaller stream frame): 3 significant decimals are plenty for a plot. */
function round(v: number): number {
  return Math.round(v * 1000) / 1000;
}

export interface HistoryOptions {
  readonly read: () => HistoryReading | Promise<HistoryReading>;
  readonly stepMs?: number;
  readonly points?: number;
  readonly now?: () => number;
}

export class History {
  readonly stepMs: number;
  readonly points: number;
  private readonly now: () => number;
  private readonly scalars = new Map<Scalar, Ring>();
  /** Per backend; a backend is forgotten once its ring holds nothing in the window. */
  private readonly sockets = new Map<string, Ring>();
  private readonly rooms = new Map<string, Ring>();
  private last: { readonly at: number; readonly reading: HistoryReading } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lag: DelayWindow | null = null;
  private sampling = false;
  private merged: HistorySnapshot | null = null;

  constructor(private readonly o: HistoryOptions) {
    this.stepMs = o.stepMs ?? HISTORY_STEP_MS;
    this.points = o.points ?? HISTORY_POINTS;
    this.now = o.now ?? Date.now;
    for (const s of SCALARS) this.scalars.set(s, new Ring(this.points));
  }

  /** Samples every stepMs (and measures the event-loop delay in between) until stop(). */
  start(): void {
    if (this.timer) return;
    this.lag = openDelayWindow();
    // Just after each slot begins, so that every worker's sample of a slot lands in that slot.
    const first = this.stepMs - (this.now() % this.stepMs) + SLOT_OFFSET_MS;
    this.timer = setTimeout(() => {
      void this.sample();
      this.timer = setInterval(() => void this.sample(), this.stepMs);
      this.timer.unref();
    }, first);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer); // clears an interval too
    this.timer = null;
    this.lag?.close();
    this.lag = null;
  }

  /** One sample now: rates since the previous one, figures as they are. Never throws. */
  async sample(nowMs = this.now()): Promise<void> {
    if (this.sampling) return; // a read slower than a step: skip, never pile up
    this.sampling = true;
    try {
      const reading = await this.o.read();
      this.record(reading, nowMs);
    } catch {
      // A reading that fails leaves its slot empty (a gap in the plot), nothing more.
    } finally {
      this.sampling = false;
    }
  }

  private record(r: HistoryReading, nowMs: number): void {
    const slot = Math.floor(nowMs / this.stepMs);
    const prev = this.last;
    this.last = { at: nowMs, reading: r };
    for (const b of r.backends) {
      this.ring(this.sockets, b.id).set(slot, b.sockets);
      this.ring(this.rooms, b.id).set(slot, b.rooms);
    }
    this.recordLag(slot);
    if (prev === null || nowMs <= prev.at) return;
    const seconds = (nowMs - prev.at) / 1000;
    const rate = (name: 'upgrades' | 'pages' | 'errors'): void => {
      const d = r[name] - prev.reading[name];
      // A counter that went back (a registry reset) gives no rate for this slot.
      if (d >= 0) this.scalar(name).set(slot, round(d / seconds));
    };
    rate('upgrades');
    rate('pages');
    rate('errors');
    if (r.cache !== null && prev.reading.cache !== null) {
      const hits = r.cache.hits - prev.reading.cache.hits;
      const answers = r.cache.answers - prev.reading.cache.answers;
      if (hits >= 0 && answers >= hits) {
        this.scalar('cacheHits').set(slot, hits);
        this.scalar('cacheAnswers').set(slot, answers);
      }
    }
  }

  private recordLag(slot: number): void {
    const h = this.lag?.histogram;
    if (h === undefined || h.count === 0) return;
    this.scalar('lagP50').set(slot, round(h.percentile(50) / 1e6));
    this.scalar('lagP99').set(slot, round(h.percentile(99) / 1e6));
    h.reset();
  }

  private scalar(name: Scalar): Ring {
    return this.scalars.get(name) as Ring;
  }

  private ring(map: Map<string, Ring>, id: string): Ring {
    let r = map.get(id);
    if (!r) map.set(id, (r = new Ring(this.points)));
    return r;
  }

  /**
   * A history made elsewhere that stands for this one while fresh: with --workers N the primary
   * merges every worker's local() and hands the result back to each (so any worker's status page
   * plots the whole gateway).
   */
  useMerged(h: HistorySnapshot): void {
    this.merged = h;
  }

  /** The merged history while it is at most two slots old, else this process's own. */
  snapshot(nowMs = this.now()): HistorySnapshot {
    const m = this.merged;
    if (m !== null && m.stepMs === this.stepMs && nowMs - m.end < 3 * this.stepMs) return m;
    return this.local(nowMs);
  }

  /** This process's own samples. */
  local(nowMs = this.now()): HistorySnapshot {
    const endSlot = Math.floor(nowMs / this.stepMs);
    const oldest = endSlot - this.points + 1;
    for (const map of [this.sockets, this.rooms]) for (const [id, r] of map) if (r.newest() < oldest) map.delete(id);
    const scalar = (s: Scalar): Series => this.scalar(s).read(endSlot);
    return {
      stepMs: this.stepMs,
      end: endSlot * this.stepMs,
      upgrades: scalar('upgrades'),
      pages: scalar('pages'),
      errors: scalar('errors'),
      cacheHits: scalar('cacheHits'),
      cacheAnswers: scalar('cacheAnswers'),
      lagP50: scalar('lagP50'),
      lagP99: scalar('lagP99'),
      backends: [...this.sockets.keys()].map((id) => ({
        id,
        sockets: (this.sockets.get(id) as Ring).read(endSlot),
        rooms: this.rooms.get(id)?.read(endSlot) ?? new Array<null>(this.points).fill(null),
      })),
    };
  }
}

/** Adds two values of one slot (null: none); used for counts and rates. */
const sum = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : round(a + b));
/** The larger value: latency (the slowest worker), and rooms (every worker reads the same store). */
const max = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));

/** Values of `s` (ending at `end`) on the slots ending at `to`: shifted, gaps filled with null. */
function align(s: Series, end: number, to: number, stepMs: number): Series {
  const shift = Math.round((to - end) / stepMs);
  if (shift === 0) return s;
  return s.map((_, i) => s[i + shift] ?? null);
}

function combine(series: readonly Series[], f: (a: number | null, b: number | null) => number | null): Series {
  const n = series[0]?.length ?? 0;
  return Array.from({ length: n }, (_, i) => series.reduce<number | null>((acc, s) => f(acc, s[i] ?? null), null));
}

/**
 * The workers' histories as one (the primary's view with --workers N): sockets, rates and cache
 * counts add up; rooms (read from the shared store by every worker) and latency take the max.
 * Histories must share stepMs and length; each is aligned to the newest end first.
 */
export function mergeHistories(all: readonly HistorySnapshot[]): HistorySnapshot | null {
  const first = all[0];
  if (first === undefined) return null;
  const parts = all.filter((h) => h.stepMs === first.stepMs && h.upgrades.length === first.upgrades.length);
  const end = Math.max(...parts.map((h) => h.end));
  const at = (h: HistorySnapshot, s: Series): Series => align(s, h.end, end, h.stepMs);
  const scalar = (name: Scalar, f: typeof sum): Series => combine(parts.map((h) => at(h, h[name])), f);
  const ids = [...new Set(parts.flatMap((h) => h.backends.map((b) => b.id)))];
  return {
    stepMs: first.stepMs,
    end,
    upgrades: scalar('upgrades', sum),
    pages: scalar('pages', sum),
    errors: scalar('errors', sum),
    cacheHits: scalar('cacheHits', sum),
    cacheAnswers: scalar('cacheAnswers', sum),
    lagP50: scalar('lagP50', max),
    lagP99: scalar('lagP99', max),
    backends: ids.map((id) => {
      const of = parts.flatMap((h) => h.backends.filter((b) => b.id === id).map((b) => ({ h, b })));
      return {
        id,
        sockets: combine(
          of.map(({ h, b }) => at(h, b.sockets)),
          sum,
        ),
        rooms: combine(
          of.map(({ h, b }) => at(h, b.rooms)),
          max,
        ),
      };
    }),
  };
}
