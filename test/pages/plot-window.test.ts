// "Operator experience 3", item 5: the status page's plots in a fresh demo. A gateway that has run
// a minute plots that minute across the charts (the window is the shortest of 1, 2, 5, 10 or 15
// minutes holding every sample), not as spikes at the right edge of 15 minutes, and a chart with
// nothing to show says so over its axes (no samples yet; none of its events since the gateway
// started, or in the window). A real History fed readings on a fake clock (src/observability/
// history.ts), drawn by src/pages/charts.ts and the status page; test/browser/plots.test.ts checks
// that the page's script draws a fresh history as the server does.
import { describe, expect, it } from 'vitest';
import { History, HISTORY_POINTS, HISTORY_STEP_MS, type HistoryReading } from '../../src/observability/history.js';
import { CHART, chartSpecs, emptyText, plotWindow, renderCharts } from '../../src/pages/charts.js';

const STEP = HISTORY_STEP_MS;
const T0 = 1_800_000_000_000; // a slot boundary

/** A quiet gateway: one backend, no socket, no request; `upgrades` counted so far. */
function reading(upgrades = 0): HistoryReading {
  return { backends: [{ id: 'b1', sockets: 0, rooms: 0 }], upgrades, pages: 0, errors: 0, cache: { hits: 0, answers: 0 } };
}

/** A History sampled `samples` times (one a step from T0), and its snapshot just after the last. */
async function after(samples: number, read: (k: number) => HistoryReading = () => reading()) {
  let k = 0;
  const h = new History({ read: () => read(k) });
  for (; k < samples; k++) await h.sample(T0 + 100 + k * STEP);
  return h.snapshot(T0 + Math.max(0, samples - 1) * STEP + 200);
}

/** Each chart's words over its axes, by id. */
function emptyTexts(samples: Awaited<ReturnType<typeof after>>): Record<string, string> {
  const w = plotWindow(samples);
  return Object.fromEntries(chartSpecs(samples, true, w).map((c) => [c.id, emptyText(c, w)]));
}

/** The x of a path's first point. */
const firstX = (d: string): number => Number(/^M([\d.]+) /.exec(d)?.[1]);

describe('the plots of a fresh gateway', () => {
  it('before the first sample: a minute, and every chart says no samples yet', async () => {
    const s = await after(0);
    const w = plotWindow(s);
    expect(w).toMatchObject({ from: HISTORY_POINTS - 12, label: '1 minute', axis: '−1 min', sampled: false });
    expect(new Set(Object.values(emptyTexts(s)))).toEqual(new Set(['No samples yet: one every 5 s']));
    const page = String(renderCharts(chartSpecs(s, true, w), w));
    expect(page).toContain('data-axis="start">−1 min</text>');
    expect(page).toContain('data-empty="">No samples yet: one every 5 s</text>');
    expect(page).not.toContain('−15 min');
  });

  it('with no traffic: the first minute spans the charts, and each chart says nothing happened since the gateway started', async () => {
    const s = await after(4);
    const w = plotWindow(s);
    expect(w).toMatchObject({ from: HISTORY_POINTS - 12, label: '1 minute', sampled: true, sinceStart: true });
    const specs = chartSpecs(s, true, w);
    // Every series is cut to the window: 12 points, the last four sampled.
    for (const c of specs) for (const l of c.lines) expect(l.values, c.id).toHaveLength(12);
    expect(specs.find((c) => c.id === 'sockets')?.lines[0]?.values.slice(-5)).toEqual([null, 0, 0, 0, 0]);
    expect(emptyTexts(s)).toMatchObject({
      sockets: 'no live sockets since the gateway started',
      rooms: 'no rooms placed since the gateway started',
      upgrades: 'no WebSocket upgrades since the gateway started',
      pages: 'no page requests since the gateway started',
      cache: 'no answers from the page cache since the gateway started',
      errors: 'no 5xx answers since the gateway started',
    });
    // The four samples take the right quarter of the plot, not the last 2 % of 15 minutes.
    const plotWidth = CHART.width - CHART.left - CHART.right;
    const d = /<path class="line s0" d="([^"]*)"/.exec(String(renderCharts(specs, w)))?.[1] ?? '';
    expect(firstX(d)).toBeCloseTo(CHART.left + (8 / 11) * plotWidth, 0);
  });

  it('traffic ends the empty state of its chart only', async () => {
    const s = await after(3, (k) => reading(k * 10));
    const texts = emptyTexts(s);
    expect(texts.upgrades).toBe('');
    expect(texts.pages).toBe('no page requests since the gateway started');
  });

  it('the window grows with the samples: 12 slots a minute, 13 two, 6 minutes ten, then 15 minutes', async () => {
    expect(plotWindow(await after(12))).toMatchObject({ label: '1 minute', from: HISTORY_POINTS - 12 });
    expect(plotWindow(await after(13))).toMatchObject({ label: '2 minutes', axis: '−2 min', from: HISTORY_POINTS - 24 });
    expect(plotWindow(await after(61))).toMatchObject({ label: '10 minutes', from: HISTORY_POINTS - 120 });
    const long = await after(HISTORY_POINTS + 5);
    expect(plotWindow(long)).toMatchObject({ label: '15 minutes', axis: '−15 min', from: 0, sinceStart: false });
    // A gateway quiet for the whole window says so of the window, not of its start.
    expect(emptyTexts(long).upgrades).toBe('no WebSocket upgrades in the last 15 minutes');
  });
});
