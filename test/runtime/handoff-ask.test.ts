// The runner's ask to the other gateways (src/runtime/handoff-ask.ts): `hold` is published while
// the live gateways are counted, so an answer can come before the count does; it is kept, and the
// ask ends once every counted gateway answered, not at its bound. A store that cannot count: only
// this gateway holds (asked 0), at once. The store here is a stand-in whose answers the test
// releases in the order it wants (the real stores' channels: test/cluster/ipc-stores.test.ts).
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import type { HandoffSignal, SharedDataEvent } from '../../src/shared-data/store.js';
import { HoldAsk } from '../../src/runtime/handoff-ask.js';

const logger = createLogger('silent', { write: () => undefined });
/** Far past any test's own timeout: an ask that waited for its bound would fail the test. */
const BOUND_MS = 60_000;

function store(others: () => Promise<string[]>) {
  const listeners = new Set<(ev: SharedDataEvent) => void>();
  const published: HandoffSignal[] = [];
  return {
    published,
    emit: (signal: HandoffSignal) => {
      for (const l of listeners) l({ type: 'handoff', signal });
    },
    s: {
      publishHandoff: async (signal: HandoffSignal) => {
        published.push(signal);
      },
      otherGateways: others,
      subscribe: (l: (ev: SharedDataEvent) => void) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    },
  };
}

/** An ask whose store counts the gateways only when the test says (`count`). */
function counted() {
  let count: (ids: string[]) => void = () => undefined;
  const st = store(() => new Promise((r) => (count = r)));
  const ask = new HoldAsk({ gatewayId: 'gw-a', store: st.s, timeoutMs: BOUND_MS, logger });
  return { st, ask, count: (ids: string[]) => count(ids) };
}

describe('the hold asked of the other gateways', () => {
  it('an answer that comes before the gateways are counted is kept: the ask ends when the last counted one answered', async () => {
    const { st, ask, count } = counted();
    const out = ask.ask('h-1', 'room-1', 'b1', 'b2');
    await Promise.resolve();
    // The hold went out before the count came back, and gateway B answered it already.
    expect(st.published).toEqual([{ kind: 'hold', id: 'h-1', room: 'room-1', from: 'b1', to: 'b2', gateway: 'gw-a' }]);
    st.emit({ kind: 'held', id: 'h-1', gateway: 'gw-b', sockets: 2 });
    st.emit({ kind: 'held', id: 'h-1', gateway: 'gw-a', sockets: 9 }); // its own echo: not an answer
    count(['gw-b', 'gw-c']);
    await new Promise((r) => setImmediate(r));
    st.emit({ kind: 'held', id: 'h-1', gateway: 'gw-c', sockets: 1 });
    expect(await out).toEqual({ asked: 2, held: 2, sockets: 3, late: 0 });
    ask.close();
  });

  it('every counted gateway answered before the count came back: the ask ends with the count', async () => {
    const { st, ask, count } = counted();
    const out = ask.ask('h-2', 'room-2', 'b1', 'b2');
    await Promise.resolve();
    st.emit({ kind: 'held', id: 'h-2', gateway: 'gw-b', sockets: 1 });
    count(['gw-b']);
    expect(await out).toEqual({ asked: 1, held: 1, sockets: 1, late: 0 });
    ask.close();
  });

  it('a store that cannot count the gateways: only this one holds, at once', async () => {
    const st = store(() => Promise.reject(new Error('store down')));
    const ask = new HoldAsk({ gatewayId: 'gw-a', store: st.s, timeoutMs: BOUND_MS, logger });
    expect(await ask.ask('h-3', 'room-3', 'b1', 'b2')).toEqual({ asked: 0, held: 0, sockets: 0, late: 0 });
    ask.close();
  });
});
