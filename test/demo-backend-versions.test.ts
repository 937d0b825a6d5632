// The demo backend's version model (examples/demo-backend/room-moves.ts, game.ts): as a djust app,
// it keeps each page view's version, the page known by its `djust_session` cookie, which the
// browser sends with the socket's handshake and with djust's HTTP fallback alike. The views live in
// the room's state and travel in the handoff's export, so a page that clicks over HTTP on the new
// owner, with its socket closed by the release, is answered with the version that follows the last
// one it was sent, even when a click held during the handoff was applied through the `messages`
// hook meanwhile (the old model, the room's move number as every page's version, skipped one there:
// djust's client reloads the page on a skip). A POST from a page the room has no view of is never
// refused. In process: two demo backends, the hooks called as roomgate calls them.
import { describe, expect, it } from 'vitest';
import { createMoveStore, MAX_VIEWS_PER_ROOM } from '../examples/demo-backend/room-moves.js';
import { backendAt, hook, post, SECRETS, type Client } from './backend-kit/clients.js';
import { demoInProcess } from './support/demo-in-process.js';

const SOCKET_P = 'PPPPPPPPPPPPPPPPPPPPPP';
const SOCKET_Q = 'QQQQQQQQQQQQQQQQQQQQQQ';
const COOKIE_P = 'djust_session=page-p-0123456789abcdef';
const COOKIE_Q = 'djust_session=page-q-0123456789abcdef';
const { demo, open } = demoInProcess();

/** A page's socket, routed by roomgate for `room` under `epoch`, with the page's cookie; mounted. */
async function page(port: number, room: string, epoch: number, socket: string, cookie: string | null): Promise<Client> {
  const c = open(port, { 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': String(epoch), 'X-Roomgate-Socket': socket, ...(cookie === null ? {} : { Cookie: cookie }) });
  await c.next('connect');
  c.send({ type: 'mount', room });
  return c;
}

/** djust's HTTP fallback: the click POSTed to the page's URL with X-Djust-Event (and the page's cookie, if it has one). */
async function fallback(port: number, room: string, cookie: string | null, data: unknown): Promise<{ status: number; answer: { move?: number; version?: number } }> {
  const r = await post(port, `/game/${room}/`, { 'X-Djust-Event': 'click', 'X-CSRFToken': '', ...(cookie === null ? {} : { Cookie: cookie }) }, JSON.stringify(data));
  return { status: r.status, answer: JSON.parse(r.text) as { move?: number; version?: number } };
}

describe('demo backend: each page view keeps its own version', () => {
  it('through a handoff without resume: a held click applied through the messages hook skips no page; the HTTP fallback follows the page\'s last version', async () => {
    const [a, b] = [await demo('v1'), await demo('v2')];
    // Q mounts and moves first, so P's versions and the room's move numbers differ from the start.
    const q = await page(a.port, 'go', 3, SOCKET_Q, COOKIE_Q);
    expect(await q.next('mounted')).toMatchObject({ version: 1, moves: 0 });
    q.send({ type: 'event', data: { k: 1 } });
    expect(await q.next('patch')).toMatchObject({ move: 1, version: 2 });
    const p = await page(a.port, 'go', 3, SOCKET_P, COOKIE_P);
    expect(await p.next('mounted')).toMatchObject({ version: 1, moves: 1 });
    // Each page's view gets each patch with its own next version.
    p.send({ type: 'event', data: { k: 2 } });
    expect(await p.next('patch')).toMatchObject({ move: 2, version: 2 });
    expect(await q.next('patch')).toMatchObject({ move: 2, version: 3 });
    q.send({ type: 'event', data: { k: 3 } });
    expect(await p.next('patch')).toMatchObject({ move: 3, version: 3 });
    expect(await q.next('patch')).toMatchObject({ move: 3, version: 4 });

    // The handoff: export (the views go with the moves), import, P's held click through the
    // messages hook on the new owner, release (P's and Q's sockets closed on the old one).
    const exported = await hook(SECRETS, backendAt('v1', a.port), 'export', { id: 'h1', room: 'go', epoch: 3, body: '{"leaseMs":5000}' });
    const blob = exported.kind === 'answer' ? exported.body.toString() : '';
    expect((JSON.parse(blob) as { views: [string, number][] }).views.map(([, v]) => v)).toEqual([4, 3]);
    expect(await hook(SECRETS, backendAt('v2', b.port), 'import', { id: 'h1', room: 'go', epoch: 4, body: blob })).toMatchObject({ status: 204 });
    const held = JSON.stringify({ socket: SOCKET_P, messages: [{ text: JSON.stringify({ type: 'event', data: { k: 4 } }) }] });
    expect(await hook(SECRETS, backendAt('v2', b.port), 'messages', { id: 'h2', room: 'go', epoch: 4, body: held, socket: SOCKET_P })).toMatchObject({ status: 204 });
    expect(await hook(SECRETS, backendAt('v1', a.port), 'release', { id: 'h1', room: 'go', epoch: 3 })).toMatchObject({ status: 204 });
    expect(await p.closed).toBe(1012);
    await q.closed;

    // P, its socket closed, clicks over HTTP on the new owner: the room's fifth move, answered with
    // the version after P's 3. (The old model answered every page the room's move number: 5, a
    // skip from the 3 P last saw, and djust's client reloads the page.)
    expect(await fallback(b.port, 'go', COOKIE_P, { k: 5 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 5, version: 4 }) as unknown });
    expect(await fallback(b.port, 'go', COOKIE_P, { k: 6 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 6, version: 5 }) as unknown });
    // Q too: the version after its own last one (4), whatever the room did meanwhile.
    expect(await fallback(b.port, 'go', COOKIE_Q, { k: 7 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 7, version: 5 }) as unknown });
    // A page the room has no view of (a cookie never seen here, or none) is not refused: its click
    // is applied and answered with a fresh view's version; the next follows it.
    expect(await fallback(b.port, 'go', 'djust_session=never-seen-here-0123', { k: 8 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 8, version: 1 }) as unknown });
    expect(await fallback(b.port, 'go', 'djust_session=never-seen-here-0123', { k: 9 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 9, version: 2 }) as unknown });
    expect(await fallback(b.port, 'go', null, { k: 10 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 10, version: 1 }) as unknown });

    // P reconnects on the new owner: its mount starts its view again at 1, the patches follow, and
    // a later HTTP click follows the socket's last version.
    const again = await page(b.port, 'go', 4, SOCKET_P, COOKIE_P);
    expect(await again.next('mounted')).toMatchObject({ version: 1, moves: 10 });
    again.send({ type: 'event', data: { k: 11 } });
    expect(await again.next('patch')).toMatchObject({ move: 11, version: 2 });
    again.ws.close();
    await again.closed;
    expect(await fallback(b.port, 'go', COOKIE_P, { k: 12 })).toEqual({ status: 200, answer: expect.objectContaining({ move: 12, version: 3 }) as unknown });
    const moves = (await (await fetch(`http://127.0.0.1:${b.port}/_backend/moves/go`, { signal: AbortSignal.timeout(5_000) })).json()) as { moves: number; last: { data: { k: number } }[] };
    expect(moves.last.map((m) => m.data.k)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it('sockets without the cookie are each their own page, as before, forgotten with their socket', async () => {
    const a = await demo('v1');
    const x = await page(a.port, 'solo', 1, SOCKET_P, null);
    const y = await page(a.port, 'solo', 1, SOCKET_Q, null);
    expect((await x.next('mounted')).version).toBe(1);
    expect((await y.next('mounted')).version).toBe(1);
    x.send({ type: 'event', data: 1 });
    expect(await x.next('patch')).toMatchObject({ move: 1, version: 2 });
    expect(await y.next('patch')).toMatchObject({ move: 1, version: 2 });
    // x leaves: no later request can name its view, so the room's state (and its export) drops it.
    x.ws.close();
    expect(await y.next('presence')).toMatchObject({ members: 1 });
    const exported = await hook(SECRETS, backendAt('v1', a.port), 'export', { id: 'h1', room: 'solo', epoch: 1, body: '{"leaseMs":5000}' });
    expect((JSON.parse(exported.kind === 'answer' ? exported.body.toString() : '{}') as { views: [string, number][] }).views.map(([, v]) => v)).toEqual([2]);
  });
});

describe("demo backend: a room's page views, bounded and carried", () => {
  it(`keeps at most ${MAX_VIEWS_PER_ROOM} pages a room, the least recently sent forgotten first; the export carries them`, () => {
    const store = createMoveStore(10, () => false);
    expect(store.startView('r', 'p0')).toBe(1);
    expect(store.nextVersion('r', 'p0')).toBe(2);
    for (let i = 1; i <= MAX_VIEWS_PER_ROOM; i++) store.nextVersion('r', `p${i}`);
    // p0 was the least recently sent: gone; p1 is the oldest kept. A forgotten page starts again at 1.
    expect([store.version('r', 'p0'), store.version('r', 'p1'), store.version('r', `p${MAX_VIEWS_PER_ROOM}`)]).toEqual([undefined, 1, 1]);
    // A socket's own last version is the floor when its page was forgotten.
    expect(store.nextVersion('r', 'p0', 7)).toBe(8);
    const blob = store.serialize('r');
    const views = (JSON.parse(blob.toString()) as { views: [string, number][] }).views;
    expect(views.length).toBe(MAX_VIEWS_PER_ROOM);
    expect(views.at(-1)).toEqual(['p0', 8]);
    const other = createMoveStore(10, () => false);
    expect(other.restore('r', blob)).toBe(true);
    expect([other.version('r', 'p0'), other.version('r', 'p1'), other.nextVersion('r', 'p0')]).toEqual([8, undefined, 9]);
    // A resumed socket's own version never moves a page's view back.
    other.sawVersion('r', 'p0', 3);
    expect(other.version('r', 'p0')).toBe(9);
    other.forgetView('r', 'p0');
    expect(other.version('r', 'p0')).toBeUndefined();
  });

  it('imports an older export without views (its pages start again), and refuses malformed views', () => {
    const store = createMoveStore(10, () => false);
    const old = Buffer.from(JSON.stringify({ v: 1, room: 'r', moves: 2, last: [{ n: 1, from: 's', data: 1 }, { n: 2, from: 's', data: 2 }] }));
    expect(store.restore('r', old)).toBe(true);
    expect([store.count('r'), store.version('r', 'p')]).toEqual([2, undefined]);
    expect(store.nextVersion('r', 'p')).toBe(1);
    const bad = (views: unknown): Buffer => Buffer.from(JSON.stringify({ v: 1, room: 'r', moves: 0, last: [], views }));
    expect(store.restore('r', bad({ p: 1 }))).toBe(false);
    expect(store.restore('r', bad([['p', -1]]))).toBe(false);
    expect(store.restore('r', bad([['', 1]]))).toBe(false);
    expect(store.restore('r', bad([['x'.repeat(65), 1]]))).toBe(false);
    expect(store.restore('r', bad(Array.from({ length: MAX_VIEWS_PER_ROOM + 1 }, (_, i) => [`p${i}`, 1])))).toBe(false);
    expect(store.count('r')).toBe(2);
  });
});
