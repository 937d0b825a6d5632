// The page requests' wait during a handoff (src/runtime/handoff-pages.ts), and the handoff
// messages between gateways parsed strictly (src/shared-data/handoff-signal.ts): what another
// gateway sends over Redis is input like any other.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HandoffPageWaits } from '../../src/runtime/handoff-pages.js';
import { parseHandoffSignal } from '../../src/shared-data/handoff-signal.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('page requests of a room in handoff', () => {
  it('go on at once when the room is in no handoff; else wait for its end', async () => {
    const w = new HandoffPageWaits(1_000);
    expect(w.wait('r1')).toBeNull();
    expect(w.wait(null)).toBeNull();
    w.begin('r1');
    const waiting = w.wait('r1');
    expect(waiting).not.toBeNull();
    expect(w.wait('r2')).toBeNull();
    w.end('r1');
    expect(await waiting).toBe(true);
    expect(w.size).toBe(0);
  });

  it('wait at most handoff.timeoutMs per step still to run, counted when the request arrives', async () => {
    vi.useFakeTimers();
    const w = new HandoffPageWaits(1_000);
    w.begin('r1');
    w.step('r1', 2);
    let early: boolean | undefined;
    void w.wait('r1')!.then((v) => (early = v));
    await vi.advanceTimersByTimeAsync(1_999);
    expect(early).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(early).toBe(false);
    // The room is still in handoff: a later request waits again, and the end releases it.
    const later = w.wait('r1')!;
    w.end('r1');
    expect(await later).toBe(true);
  });

  it('two handoffs of one room (this gateway runs one, holds for another): the pages go on after both', async () => {
    const w = new HandoffPageWaits(1_000);
    w.begin('r1');
    w.begin('r1');
    let ended = false;
    void w.wait('r1')!.then(() => (ended = true));
    w.end('r1');
    await Promise.resolve();
    expect(ended).toBe(false);
    w.end('r1');
    await vi.waitFor(() => expect(ended).toBe(true));
  });
});

describe('handoff messages between gateways', () => {
  it('are taken only whole and well-formed', () => {
    const hold = { kind: 'hold', id: 'h', room: 'r', from: 'b1', to: 'b2', gateway: 'g' };
    expect(parseHandoffSignal(hold)).toEqual(hold);
    expect(parseHandoffSignal({ kind: 'held', id: 'h', gateway: 'g', sockets: 3 })).toEqual({ kind: 'held', id: 'h', gateway: 'g', sockets: 3 });
    expect(parseHandoffSignal({ kind: 'late', id: 'h', room: 'r', gateway: 'g', answered: ['x'] })).toEqual({ kind: 'late', id: 'h', room: 'r', gateway: 'g', answered: ['x'] });
    expect(parseHandoffSignal({ kind: 'end', id: 'h', room: 'r', outcome: 'moved', to: 'b2', epoch: 7 })).toEqual({ kind: 'end', id: 'h', room: 'r', outcome: 'moved', to: 'b2', epoch: 7 });
    for (const bad of [
      null,
      'hold',
      [],
      { ...hold, kind: 'seize' },
      { ...hold, id: '' },
      { ...hold, room: 7 },
      { ...hold, from: 'x'.repeat(1025) },
      { kind: 'held', id: 'h', gateway: 'g', sockets: -1 },
      { kind: 'held', id: 'h', gateway: 'g', sockets: 1.5 },
      { kind: 'late', id: 'h', room: 'r', gateway: 'g', answered: [1] },
      { kind: 'late', id: 'h', room: 'r', answered: [] },
      { kind: 'end', id: 'h', room: 'r', outcome: 'maybe', to: 'b2', epoch: 1 },
      { kind: 'end', id: 'h', room: 'r', outcome: 'moved', to: 'b2', epoch: Number.NaN },
    ]) {
      expect(parseHandoffSignal(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });
});
