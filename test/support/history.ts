// Histories for the status page's plots without waiting 15 minutes: a lively synthetic one (a
// backend dying half-way, traffic waves, a cache warming up) and an empty one, in the shape
// History.snapshot() gives (src/observability/history.ts).
import { HISTORY_POINTS, HISTORY_STEP_MS, type HistorySnapshot } from '../../src/observability/history.js';

const n = HISTORY_POINTS;
const slotEnd = (nowMs: number): number => Math.floor(nowMs / HISTORY_STEP_MS) * HISTORY_STEP_MS;

export function emptyHistory(ids: readonly string[] = [], nowMs = Date.now()): HistorySnapshot {
  const none = (): null[] => new Array<null>(n).fill(null);
  return {
    stepMs: HISTORY_STEP_MS,
    end: slotEnd(nowMs),
    upgrades: none(),
    pages: none(),
    errors: none(),
    cacheHits: none(),
    cacheAnswers: none(),
    lagP50: none(),
    lagP99: none(),
    backends: ids.map((id) => ({ id, sockets: none(), rooms: none() })),
  };
}

/**
 * 15 minutes of a gateway with three backends; `dies` stops its series two thirds of the way in
 * (its sockets and rooms go to the others), the first minute is empty (the gateway just started).
 */
export function syntheticHistory(ids: readonly string[] = ['b1', 'b2', 'b3'], nowMs = Date.now(), dies = ids[1]): HistorySnapshot {
  const r = (x: number): number => Math.round(x * 100) / 100;
  const at = <T>(f: (i: number) => T): (T | null)[] => Array.from({ length: n }, (_, i) => (i < 12 ? null : f(i)));
  const wave = (i: number, k: number): number => 1 + 0.3 * Math.sin(i / 9 + k) + 0.1 * Math.sin(i / 2.3 + k);
  const cut = Math.floor((n * 2) / 3);
  const others = ids.filter((id) => id !== dies).length || 1;
  return {
    ...emptyHistory(ids, nowMs),
    upgrades: at((i) => r((i === cut || i === cut + 1 ? 38 : 4) * wave(i, 1))),
    pages: at((i) => r(55 * wave(i, 2))),
    errors: at((i) => (i === cut ? 6 : i === cut + 1 ? 2.4 : i % 37 === 0 ? 0.2 : 0)),
    cacheHits: at((i) => Math.round(Math.min(0.93, 0.3 + i / 120) * 275 * wave(i, 2))),
    cacheAnswers: at((i) => Math.round(275 * wave(i, 2))),
    lagP50: at((i) => r(0.9 + 0.3 * wave(i, 3))),
    lagP99: at((i) => r((i === cut ? 24 : 3.5) * wave(i, 4))),
    backends: ids.map((id, k) => {
      const base = 40 + 12 * k;
      const alive = id !== dies;
      const sockets = at((i) => (i >= cut ? (alive ? Math.round(base * wave(i, k) + 45 / others) : null) : Math.round(base * wave(i, k))));
      const rooms = at((i) => (i >= cut ? (alive ? Math.round((base / 4) * 1.0 + 12 / others) : 0) : Math.round(base / 4)));
      return { id, sockets, rooms };
    }),
  };
}

/**
 * A gateway started `samples` steps ago with no traffic but one upgrade in its second step: what
 * a fresh demo's status page plots (rates need two samples, so their first slot is empty).
 */
export function freshHistory(ids: readonly string[] = ['b1', 'b2'], nowMs = Date.now(), samples = 4): HistorySnapshot {
  const last = <T>(f: (k: number) => T | null): (T | null)[] => Array.from({ length: n }, (_, i) => (i < n - samples ? null : f(i - (n - samples))));
  const rate = (k: number, v = 0): number | null => (k === 0 ? null : v);
  return {
    ...emptyHistory(ids, nowMs),
    upgrades: last((k) => rate(k, k === 1 ? 0.2 : 0)),
    pages: last((k) => rate(k)),
    errors: last((k) => rate(k)),
    lagP50: last(() => 1.1),
    lagP99: last(() => 3.2),
    backends: ids.map((id) => ({ id, sockets: last(() => 0), rooms: last(() => 0) })),
  };
}
