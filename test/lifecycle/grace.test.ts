// The graceful stop's wait (src/lifecycle/grace.ts): it ends as soon as the live sockets are gone,
// or at graceMs with what is left. Fake timers move the clock; nothing here sleeps.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GRACE_POLL_MS, waitForDrain } from '../../src/lifecycle/grace.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Settles `p` into a readable state without awaiting it. */
function track<T>(p: Promise<T>): { done: boolean; value: T | undefined } {
  const s: { done: boolean; value: T | undefined } = { done: false, value: undefined };
  void p.then((v) => {
    s.done = true;
    s.value = v;
  });
  return s;
}

describe('waitForDrain', () => {
  it('resolves at once with 0 when nothing is live', async () => {
    await expect(waitForDrain(() => 0, 10_000)).resolves.toBe(0);
  });

  it('ends at the first poll after the last socket ended, before the grace period is over', async () => {
    let live = 3;
    const wait = track(waitForDrain(() => live, 10_000));
    await vi.advanceTimersByTimeAsync(GRACE_POLL_MS * 5);
    expect(wait.done).toBe(false);
    live = 0;
    await vi.advanceTimersByTimeAsync(GRACE_POLL_MS);
    expect(wait).toEqual({ done: true, value: 0 });
  });

  it('gives up at graceMs with what is left', async () => {
    const wait = track(waitForDrain(() => 2, 1_050));
    await vi.advanceTimersByTimeAsync(1_049);
    expect(wait.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(wait).toEqual({ done: true, value: 2 });
  });

  it('does not wait with a grace period of 0', async () => {
    await expect(waitForDrain(() => 5, 0)).resolves.toBe(5);
  });
});
