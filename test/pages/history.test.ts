// The status page's history (src/observability/history.ts): bounded rings aligned to the wall
// clock, rates from counters, the cache's hits, the worker merge (sums, max for rooms and latency,
// alignment), and the charts made of it (src/pages/charts.ts). With a fake clock and readings.
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observability/metrics.js';
import { History, HISTORY_POINTS, HISTORY_STEP_MS, mergeHistories, type HistoryReading } from '../../src/observability/history.js';
import { counterTotals } from '../../src/observability/history-reading.js';
import { chartSpecs, formatValue, latest, niceTop, pathOf } from '../../src/pages/charts.js';

const STEP = HISTORY_STEP_MS;
const T0 = 1_800_000_000_000; // a slot boundary (divisible by 5000)

function reading(o: Partial<HistoryReading> = {}): HistoryReading {
  return { backends: [{ id: 'b1', sockets: 0, rooms: 0 }], upgrades: 0, pages: 0, errors: 0, cache: null, ...o };
}

/** A History fed by `readings` in turn, sampled at T0 + 100 ms + k steps. */
async function fed(readings: HistoryReading[]): Promise<History> {
  let next = 0;
  const h = new History({ read: () => readings[next++] ?? reading() });
  for (let k = 0; k < readings.length; k++) await h.sample(T0 + 100 + k * STEP);
  return h;
}

describe('History', () => {
  it('turns counters into rates per second and keeps figures per backend, one slot per step', async () => {
    const h = await fed([
      reading({ upgrades: 10, pages: 100, errors: 1, backends: [{ id: 'b1', sockets: 3, rooms: 2 }] }),
      reading({ upgrades: 20, pages: 600, errors: 1, backends: [{ id: 'b1', sockets: 5, rooms: 2 }, { id: 'b2', sockets: 1, rooms: 1 }] }),
      reading({ upgrades: 20, pages: 600, errors: 11, backends: [{ id: 'b1', sockets: 4, rooms: 3 }, { id: 'b2', sockets: 0, rooms: 1 }] }),
    ]);
    const s = h.snapshot(T0 + 2 * STEP + 200);
    expect(s.stepMs).toBe(STEP);
    expect(s.end).toBe(T0 + 2 * STEP);
    expect(s.upgrades).toHaveLength(HISTORY_POINTS);
    // The first sample has nothing to difference against: no rate.
    expect(s.upgrades.slice(-3)).toEqual([null, 2, 0]);
    expect(s.pages.slice(-3)).toEqual([null, 100, 0]);
    expect(s.errors.slice(-3)).toEqual([null, 0, 2]);
    expect(s.backends.map((b) => [b.id, b.sockets.slice(-3), b.rooms.slice(-3)])).toEqual([
      ['b1', [3, 5, 4], [2, 2, 3]],
      ['b2', [null, 1, 0], [null, 1, 1]],
    ]);
    expect(s.upgrades.slice(0, -3).every((v) => v === null)).toBe(true);
    // Not started: no event-loop delay measured, nothing invented.
    expect(s.lagP99.every((v) => v === null)).toBe(true);
  });

  it('is bounded: after more than HISTORY_POINTS steps only the last window is kept, and a gone backend is forgotten', async () => {
    let k = 0;
    const h = new History({ read: () => reading({ pages: k * 5, backends: k < 3 ? [{ id: 'old', sockets: 1, rooms: 1 }] : [] }) });
    for (k = 0; k < HISTORY_POINTS + 20; k++) await h.sample(T0 + 100 + k * STEP);
    const s = h.snapshot(T0 + (HISTORY_POINTS + 19) * STEP + 100);
    expect(s.pages).toHaveLength(HISTORY_POINTS);
    expect(s.pages.every((v) => v === 1)).toBe(true);
    expect(s.backends).toEqual([]);
    // A clock past the window: every value is null again (old slots are never shown as new).
    const later = h.snapshot(T0 + (2 * HISTORY_POINTS + 40) * STEP);
    expect(later.pages.every((v) => v === null)).toBe(true);
  });

  it('records the page cache hits and answers per slot; a counter that goes back gives no rate', async () => {
    const h = await fed([
      reading({ pages: 50, cache: { hits: 10, answers: 20 } }),
      reading({ pages: 40, cache: { hits: 28, answers: 40 } }),
    ]);
    const s = h.snapshot(T0 + STEP + 100);
    expect(s.cacheHits.slice(-2)).toEqual([null, 18]);
    expect(s.cacheAnswers.slice(-2)).toEqual([null, 20]);
    expect(s.pages.slice(-2)).toEqual([null, null]);
    expect(chartSpecs(s, true).find((c) => c.id === 'cache')?.lines[0]?.values.slice(-2)).toEqual([null, 90]);
  });

  it('a reading that throws leaves a gap, never an exception', async () => {
    const h = new History({ read: () => Promise.reject(new Error('registry gone')) });
    await expect(h.sample(T0)).resolves.toBeUndefined();
    expect(h.snapshot(T0).pages.every((v) => v === null)).toBe(true);
  });

  it('stands in a fresh merged history for its own, and falls back when it is stale', async () => {
    const h = await fed([reading({ pages: 0 }), reading({ pages: 5 })]);
    const own = h.local(T0 + STEP + 100);
    const merged = { ...own, pages: own.pages.map((v) => (v === null ? null : v * 3)) };
    h.useMerged(merged);
    expect(h.snapshot(T0 + STEP + 100).pages.at(-1)).toBe(3);
    // Three slots later the merged one is stale: this process's own values again.
    expect(h.snapshot(T0 + 4 * STEP).pages.filter((v) => v !== null)).toEqual([1]);
  });
});

describe('mergeHistories (--workers)', () => {
  it('adds sockets, rates and cache counts; takes the max of rooms and latency; aligns the ends', async () => {
    const a = (await fed([reading({ pages: 0, backends: [{ id: 'b1', sockets: 2, rooms: 7 }] }), reading({ pages: 50, backends: [{ id: 'b1', sockets: 3, rooms: 7 }] })])).local(T0 + STEP + 100);
    const b = (await fed([reading({ pages: 0, backends: [{ id: 'b1', sockets: 4, rooms: 6 }, { id: 'b2', sockets: 1, rooms: 2 }] })])).local(T0 + 100);
    const lagged = { ...a, lagP50: a.lagP50.map((_, i) => (i === HISTORY_POINTS - 1 ? 2 : null)), lagP99: a.lagP99.map((_, i) => (i === HISTORY_POINTS - 1 ? 9 : null)) };
    const other = { ...b, lagP50: b.lagP50.map((_, i) => (i === HISTORY_POINTS - 2 ? 3 : null)), lagP99: b.lagP99.map((_, i) => (i === HISTORY_POINTS - 1 ? 30 : null)) };
    const m = mergeHistories([lagged, other]);
    expect(m?.end).toBe(T0 + STEP);
    expect(m?.pages.slice(-2)).toEqual([null, 10]);
    const b1 = m?.backends.find((x) => x.id === 'b1');
    // b's one sample (slot T0) lines up with a's first slot.
    expect(b1?.sockets.slice(-2)).toEqual([6, 3]);
    expect(b1?.rooms.slice(-2)).toEqual([7, 7]);
    expect(m?.backends.find((x) => x.id === 'b2')?.sockets.slice(-2)).toEqual([1, null]);
    // b's values shift one slot left (its end is a step earlier): its p99 of 30 lands on T0.
    expect(m?.lagP99.slice(-2)).toEqual([30, 9]);
    expect(m?.lagP50.slice(-3)).toEqual([3, null, 2]);
    expect(mergeHistories([])).toBeNull();
  });
});

describe('the counters the history reads', () => {
  it('upgrades answered 101, every page answer, and 5xx answers of both', async () => {
    const m = createMetrics(() => []);
    m.upgrades.inc({ backend: 'b1', result: '101' }, 4);
    m.upgrades.inc({ backend: 'b1', result: '503' }, 2);
    m.upgrades.inc({ backend: 'none', result: '400' });
    m.httpRequests.inc({ backend: 'b1', status: '200' }, 10);
    m.httpRequests.inc({ backend: 'b1', status: '502' }, 3);
    m.httpRequests.inc({ backend: 'cache', status: '200' }, 5);
    expect(await counterTotals(m)).toEqual({ upgrades: 4, pages: 18, errors: 5 });
  });
});

describe('chart geometry', () => {
  it('scales to 1, 2 or 5 times a power of ten, draws runs and lone points, formats values', () => {
    expect([0, 0.5, 1, 1.2, 3, 7, 10, 11, 99, 240].map((v) => niceTop([v]))).toEqual([1, 1, 1, 2, 5, 10, 10, 20, 100, 500]);
    expect(pathOf([null, 0, 1, null, 1], 1)).toBe('M104.5 102.0 L175.0 8.0 M316.0 8.0h0.1');
    expect(pathOf([null, null], 1)).toBe('');
    expect(pathOf([5], 1)).toBe('M34.0 8.0h0.1'); // clamped to the top
    expect([null, 3, 2.5, 12.345].map(formatValue)).toEqual(['–', '3', '2.50', '12.3']);
    expect(latest([1, 2, null])).toBe(2);
    expect(latest([1, null, null])).toBeNull();
  });
});
