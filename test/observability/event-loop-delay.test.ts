// The process's one event-loop delay monitor (src/observability/event-loop-delay.ts): a stall is
// measured at least as long as it was (a lower bound: a busy machine only adds to it), each reader's
// window is its own (one emptied, the other keeps its figures), and the timer runs only while a
// window is open (no test or gateway leaves it behind).
import { describe, expect, it } from 'vitest';
import { openDelayWindow, RESOLUTION_MS } from '../../src/observability/event-loop-delay.js';

function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

/** Resolves after the monitor ticked at least `ticks` more times into `w`. */
function ticks(w: ReturnType<typeof openDelayWindow>, n: number): Promise<void> {
  const target = w.histogram.count + n;
  return new Promise((resolve, reject) => {
    const give = setTimeout(() => reject(new Error(`no ${n} ticks in 10 s`)), 10_000);
    const poll = setInterval(() => {
      if (w.histogram.count < target) return;
      clearInterval(poll);
      clearTimeout(give);
      resolve();
    }, RESOLUTION_MS / 4);
  });
}

describe('the event-loop delay monitor', () => {
  it('measures a stall, into every open window; a window emptied leaves the others', async () => {
    const a = openDelayWindow();
    const b = openDelayWindow();
    try {
      await ticks(a, 1);
      // Longer than a period, so a tick falls due during it and fires when it ends, at least the
      // stall minus one period late.
      stall(RESOLUTION_MS + 300);
      await ticks(a, 1);
      expect(a.histogram.max / 1e6).toBeGreaterThanOrEqual(300);
      expect(b.histogram.max).toBe(a.histogram.max);
      a.reset();
      expect(a.histogram.count).toBe(0);
      expect(b.histogram.max / 1e6).toBeGreaterThanOrEqual(300);
    } finally {
      a.close();
      b.close();
    }
  });

  it('a closed window is fed no more', async () => {
    const kept = openDelayWindow();
    const closed = openDelayWindow();
    try {
      await ticks(kept, 1);
      closed.close();
      const before = closed.histogram.count;
      await ticks(kept, 2);
      expect(closed.histogram.count).toBe(before);
    } finally {
      kept.close();
    }
  });
});
