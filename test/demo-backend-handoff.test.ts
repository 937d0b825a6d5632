// The demo backend's room handoff hooks (examples/demo-backend/handoff.ts, docs/handoff.md) held
// to the receiver's guarantees of test/support/handoff-receiver.ts: two demo backends as child
// processes, as roomgate runs them, calls and sockets straight to them. Plus what is the demo's
// own: the handoff path is an option, and /_backend/moves shows a room's state.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callHook, HANDOFF_GUARANTEES, joinRoom, move, type HandoffContract } from './support/handoff-receiver.js';
import { startBackend, stopAll, type BackendProc } from './support/processes.js';

const backend = (b: BackendProc): { id: string; url: string; wsUrl: string } => ({ id: b.id, url: b.url, wsUrl: `ws://127.0.0.1:${b.port}/ws/live/` });
let k: HandoffContract;
let a: BackendProc;

beforeAll(async () => {
  const [first, second] = await Promise.all([startBackend('ho-a', ['--handoff-resume', 'on']), startBackend('ho-b', ['--handoff-resume', 'on'])]);
  a = first as BackendProc;
  k = {
    a: backend(a),
    b: backend(second as BackendProc),
    path: '/_roomgate/handoff',
    pushPath: '/_roomgate/push',
    prefix: 'demo',
    releaseCloseCode: 1012,
    hello: { version: 2, messages: true, resume: true },
    heldMoves: async (be, room) => ((await (await fetch(`${be.url}/_backend/moves/${room}`, { signal: AbortSignal.timeout(5_000) })).json()) as { moves: number }).moves,
  };
}, 20_000);

afterAll(stopAll);

describe('demo backend: the receiver side of the room handoff', () => {
  for (const g of HANDOFF_GUARANTEES) it(g.name, () => g.check(k), 30_000);
});

describe('demo backend: its own side of the handoff', () => {
  it('serves the hooks under --handoff-path, and nothing under the default one then', async () => {
    const custom = await startBackend('ho-custom', ['--handoff-path', '/internal/moves']);
    const be = backend(custom);
    expect((await callHook(be, '/internal/moves', 'hello')).status).toBe(200);
    expect((await callHook(be, '/_roomgate/handoff', 'hello')).status).toBe(404);
  });

  it('/_backend/moves shows the moves a room holds, the last 20 kept, and whether it is frozen', async () => {
    const { c } = await joinRoom(k.a, 'demo-shown', 1);
    for (let i = 1; i <= 25; i++) await move(c, { i });
    const state = (await (await fetch(`${a.url}/_backend/moves/demo-shown`, { signal: AbortSignal.timeout(5_000) })).json()) as { moves: number; last: { n: number; data: unknown }[]; frozen: boolean; epoch: number };
    expect(state).toMatchObject({ moves: 25, frozen: false, epoch: 1 });
    expect(state.last.map((m) => m.n)).toEqual(Array.from({ length: 20 }, (_, i) => i + 6));
    expect(state.last.at(-1)?.data).toEqual({ i: 25 });
    await c.close();
  });
});
