// The Django Channels example's room handoff hooks (examples/django-channels/rooms/handoff.py,
// docs/handoff.md) held to the receiver's guarantees of test/support/handoff-receiver.ts, the same
// list the demo backend passes: two daphne processes (Debian's Django 3.2, Channels 4.0, daphne
// 4.0) sharing roomgate's call secret, calls and sockets straight to them; both killed in afterAll.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DJANGO_APP, startDaphne, stopDaphnes, type DaphneApp } from '../support/daphne.js';
import { HANDOFF_GUARANTEES, type HandoffContract } from '../support/handoff-receiver.js';
import { backendEnv, ROOT, stopAll } from '../support/processes.js';

const env = (id: string): Record<string, string> => ({ DJANGO_ALLOWED_HOSTS: 'localhost,127.0.0.1', ...backendEnv(id) });
const backend = (app: DaphneApp, id: string): { id: string; url: string; wsUrl: string } => ({ id, url: app.url, wsUrl: `ws://127.0.0.1:${app.port}/ws/live/` });
let k: HandoffContract;

beforeAll(async () => {
  const [a, b] = await Promise.all([startDaphne(env('dj-ho-a')), startDaphne(env('dj-ho-b'))]);
  k = {
    a: backend(a as DaphneApp, 'dj-ho-a'),
    b: backend(b as DaphneApp, 'dj-ho-b'),
    path: '/_roomgate/handoff',
    pushPath: '/_roomgate/push',
    prefix: 'dj',
    // Autobahn (Daphne's WebSocket library) refuses to send 1012 from a server: the example falls
    // back to 1000 there (rooms/handoff.py, close_moved); djust's client reconnects after either.
    releaseCloseCode: 1000,
    hello: { version: 1 },
    heldMoves: async (be, room) => ((await (await fetch(`${be.url}/_example/rooms/${room}/`, { signal: AbortSignal.timeout(5_000) })).json()) as { moves: number }).moves,
  };
}, 60_000);

afterAll(async () => {
  await stopAll(); // the test's sockets
  await stopDaphnes();
});

describe('the Django Channels example: the receiver side of the room handoff', () => {
  for (const g of HANDOFF_GUARANTEES) it(g.name, () => g.check(k), 30_000);

  it("every python block of docs/handoff.md is in the example's files as written", () => {
    const doc = readFileSync(join(ROOT, 'docs/handoff.md'), 'utf8');
    const blocks = [...doc.matchAll(/```python\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    const files = ['rooms/handoff.py', 'rooms/state.py', 'rooms/consumers.py', 'liveapp/urls.py'].map((f) => readFileSync(join(DJANGO_APP, f), 'utf8'));
    for (const block of blocks) expect(files.some((f) => f.includes(block)), block).toBe(true);
  });
});
