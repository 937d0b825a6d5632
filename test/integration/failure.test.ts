// Failure handling: a backend killed under live sockets, HTTP answers for dead, absent and silent
// backends, passive-mark expiry, idle sockets and large streamed bodies. The demo backends are the
// witness: /_backend/rooms says where a room really is. A backend stopped (SIGSTOP) or killed
// (kill -9) under live sockets is a process; the gateways and the other backends run in the test's
// process (test/support/here.ts), and a backend that is merely gone (a refusing port) is one closed
// here. `roomgate where` runs in this process too (test/cli/in-process.ts).
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { runCliHere } from '../cli/in-process.js';
import { startBackendHere, startBackendsHere, startGatewayHere, stopAllHere, type GatewayHere } from '../support/here.js';
import { Client, backendRooms, metricValue, startBackend, startBackends, stop, stopAll, waitFor, type BackendProc, pingPong, withTimeout } from '../support/processes.js';

// Polls an async check (the harness's waitFor awaits it).
const poll = waitFor;

afterAll(async () => {
  await stopAll();
  await stopAllHere();
});

/**
 * The active checks run once, at start: what the tests that use this count is passive marks (a
 * refused connection), and a TCP check every 2 s (the default) adds failures of its own (a third
 * one marks the backend down once more) at times that depend on how loaded the machine is.
 */
const CHECK_AT_START_ONLY = { health: { intervalMs: 3_600_000 } };

/** A backend as `roomgate where` and the gateway know it. */
type Member = { readonly id: string; readonly url: string };

// --- helpers -------------------------------------------------------------------------------

interface Answer {
  status: number;
  headers: Headers;
  body: string;
  ms: number;
}

/** A fetch that can never hang: the whole exchange (head and body) is bounded by timeoutMs. */
async function request(url: string, init: RequestInit = {}, timeoutMs = 5_000): Promise<Answer> {
  const t0 = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const body = await res.text();
  return { status: res.status, headers: res.headers, body, ms: performance.now() - t0 };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `roomgate where ROOM... --json` with the given backends (the same ids and URLs the gateway has). */
async function where(rooms: readonly string[], backends: readonly Member[]): Promise<Map<string, string>> {
  const args = ['where', ...rooms, '--json'];
  for (const b of backends) args.push('--backend', `${b.id}=${b.url}`);
  const r = await runCliHere(args);
  expect(r.code, r.stderr).toBe(0);
  const rows = JSON.parse(r.stdout) as { room: string; backend?: string; error?: string }[];
  expect(rows).toHaveLength(rooms.length);
  return new Map(rows.map((row) => [row.room, String(row.backend)]));
}

/**
 * n rooms the ring gives to `owner`, and where each goes when `owner` is left out of the --backend
 * list (the next member on the ring), both from `roomgate where` (the two runs go in parallel).
 */
async function roomsOwnedBy(
  owner: string,
  backends: readonly Member[],
  n: number,
  prefix: string,
): Promise<{ rooms: string[]; fallback: Map<string, string> }> {
  const candidates = Array.from({ length: 60 }, (_, i) => `${prefix}-${i}`);
  const [placed, without] = await Promise.all([
    where(candidates, backends),
    where(candidates, backends.filter((b) => b.id !== owner)),
  ]);
  const rooms = candidates.filter((r) => placed.get(r) === owner).slice(0, n);
  expect(rooms.length, `rooms of ${owner} among 60 candidates`).toBe(n);
  // Rooms of other backends do not move when `owner` is left out: consistent hashing.
  for (const r of candidates) if (placed.get(r) !== owner) expect(without.get(r), r).toBe(placed.get(r));
  return { rooms, fallback: without };
}

async function backendsView(gw: GatewayHere): Promise<Record<string, { state: string; downUntil: string | null; sockets: number }>> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/backends`, { signal: AbortSignal.timeout(5_000) });
  const body = (await res.json()) as { backends: { id: string; state: string; downUntil: string | null; sockets: number }[] };
  return Object.fromEntries(body.backends.map((b) => [b.id, b]));
}

// --- a backend that stops answering (SIGSTOP): hung, not dead ---------------------------------

describe('a backend that stops answering its health checks (health.onDown: close)', () => {
  // The HTTP check: a stopped process still has its connections accepted by the kernel, so only a
  // check that waits for an answer sees it hung. onDown close: its sockets are closed (the default,
  // keep, is tested in health.test.ts).
  const health = { health: { path: '/healthz', intervalMs: 200, timeoutMs: 200, rise: 1, fall: 2, onDown: 'close' } };
  /** Whether a socket is still open after ms (its `closed` promise has not settled). */
  const stillOpen = async (c: Client, ms: number): Promise<boolean> =>
    (await Promise.race([c.closed.then(() => false), sleep(ms).then(() => true)]));
  const downInView = async (gw: GatewayHere, id: string): Promise<boolean> => (await backendsView(gw))[id]?.state === 'down';

  it('has its sockets closed when another backend can take its rooms', async () => {
    // h1 is stopped with a signal: a process. h2 only takes the rooms.
    const [h1, h2] = await Promise.all([startBackend('h1'), startBackendHere('h2')]);
    const gw = await startGatewayHere({ backends: [h1, h2], config: health });
    const { rooms } = await roomsOwnedBy('h1', [h1, h2], 1, 'hung');
    const c = new Client(`${gw.wsUrl}/ws/live/?room=${rooms[0]}`);
    expect(await c.join(rooms[0]!)).toBe('h1');
    h1.child.kill('SIGSTOP');
    try {
      // Two failed checks, about 0.6 s; generous, as a loaded machine once took over 10 s.
      await poll('h1 down in the gateway view', 30_000, () => downInView(gw, 'h1'));
      expect(await withTimeout(c.closed, 5_000, 'the hung backend socket to close')).toBe(1006);
    } finally {
      h1.child.kill('SIGCONT');
    }
  });

  it('keeps its live sockets when no other backend is up (panic guard), and they carry traffic again once it answers', async () => {
    const [only] = (await startBackends(['only'])) as [BackendProc];
    const gw = await startGatewayHere({ backends: [only], config: health });
    const c = new Client(`${gw.wsUrl}/ws/live/?room=panic-room`);
    expect(await c.join('panic-room')).toBe('only');
    only.child.kill('SIGSTOP');
    try {
      await poll('the only backend down in the gateway view', 30_000, () => downInView(gw, 'only'));
      // Several more failed checks: the socket stays.
      expect(await stillOpen(c, 1_000)).toBe(true);
      expect(gw.logs().some((l) => l.msg === 'backend down but no other backend is up: its live sockets are kept')).toBe(true);
    } finally {
      only.child.kill('SIGCONT');
    }
    await poll('the backend up again', 30_000, async () => !(await downInView(gw, 'only')));
    await pingPong(c);
    await c.close();
  });
});

// --- a backend killed under live sockets ----------------------------------------------------

describe('a backend killed with kill -9', () => {
  let b1: Member, b2: BackendProc, b3: Member;
  let gw: GatewayHere;
  /** Gateways that never talk to b2 before the kill: their first b2 request finds it dead. */
  let cold: GatewayHere;
  let coldPage: GatewayHere;
  let rooms: string[];
  let fallback: Map<string, string>;

  it('closes the sockets of its rooms and sends their new sockets and pages to the next backend on the ring', async () => {
    // b2 is the one killed: a process.
    [b1, b2, b3] = await Promise.all([startBackendHere('b1'), startBackend('b2'), startBackendHere('b3')]);
    [gw, cold, coldPage] = (await Promise.all([0, 1, 2].map(() => startGatewayHere({ backends: [b1, b2, b3], config: CHECK_AT_START_ONLY })))) as [GatewayHere, GatewayHere, GatewayHere];
    // The ring without b2 is where b2's rooms must go: the next member on the ring.
    ({ rooms, fallback } = await roomsOwnedBy('b2', [b1, b2, b3], 4, 'kill'));
    for (const r of rooms) expect(['b1', 'b3']).toContain(fallback.get(r));

    const live = rooms.slice(0, 3).map((r) => new Client(`${gw.wsUrl}/ws/live/?room=${r}`));
    for (const [i, c] of live.entries()) expect(await c.join(rooms[i]!)).toBe('b2');
    // A page of one of them too, so the gateway holds a keep-alive connection to b2.
    const page = await request(`${gw.url}/game/${rooms[3]}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('x-backend-id')).toBe('b2');
    const before = await backendRooms([b1, b2, b3]);
    expect(before.get('b2')).toEqual({ [rooms[0]!]: 1, [rooms[1]!]: 1, [rooms[2]!]: 1 });

    expect(await stop(b2, 'SIGKILL')).toBe('SIGKILL');
    // Every live socket of b2 is closed; the backend could not say goodbye, so it is abnormal (1006).
    const codes = await withTimeout(Promise.all(live.map((c) => c.closed)), 5_000, 'b2 sockets to close');
    expect(codes).toEqual([1006, 1006, 1006]);
    await poll('b2 sockets gone from /backends', 3_000, async () => (await backendsView(gw)).b2?.sockets === 0);

    // Losing live sockets does not mark b2 down: the gateway has not yet tried to connect.
    expect((await backendsView(gw)).b2?.state).toBe('up');
    expect(await metricValue(gw, 'roomgate_backend_state_changes_total', { backend: 'b2' })).toBe(0);

    // The very first attempt after the kill: refused by b2, retried on the fallback, invisible to the client.
    const first = new Client(`${gw.wsUrl}/ws/live/?room=${rooms[0]}`);
    expect(await first.join(rooms[0]!)).toBe(fallback.get(rooms[0]!));
    expect(await metricValue(gw, 'roomgate_proxy_errors_total', { backend: 'b2', kind: 'refused' })).toBe(1);
    expect(await metricValue(gw, 'roomgate_backend_state_changes_total', { backend: 'b2', state: 'down' })).toBe(1);
    expect((await backendsView(gw)).b2?.state).toBe('down');

    // The rest of b2's rooms: sockets and pages go straight to the fallback now.
    const again = rooms.slice(1).map((r) => new Client(`${gw.wsUrl}/ws/live/?room=${r}`));
    for (const [i, c] of again.entries()) expect(await c.join(rooms[i + 1]!)).toBe(fallback.get(rooms[i + 1]!));
    for (const r of rooms) {
      const res = await request(`${gw.url}/game/${r}/`);
      expect(res.status, r).toBe(200);
      expect(res.headers.get('x-backend-id'), r).toBe(fallback.get(r));
      expect(res.body).toContain(`Served by backend <strong>${fallback.get(r)}</strong>`);
    }
    // The witness: each room is on its fallback backend, once, and nowhere else.
    const after = await backendRooms([b1, b3]);
    for (const r of rooms) {
      const other = fallback.get(r) === 'b1' ? 'b3' : 'b1';
      expect(after.get(fallback.get(r)!)?.[r], r).toBe(1);
      expect(after.get(other)?.[r], r).toBeUndefined();
    }
    // One refusal in all: once b2 was marked down no request tried it again.
    expect(await metricValue(gw, 'roomgate_proxy_errors_total', { backend: 'b2', kind: 'refused' })).toBe(1);
    await Promise.all([first, ...again].map((c) => c.close()));
  });

  it('retries a page GET refused by the dead backend on the next backend of the ring', async () => {
    const res = await request(`${coldPage.url}/game/${rooms[1]}/`, {}, 3_000);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-backend-id')).toBe(fallback.get(rooms[1]!));
    expect(await metricValue(coldPage, 'roomgate_proxy_errors_total', { backend: 'b2', kind: 'refused' })).toBe(1);
    expect(await metricValue(coldPage, 'roomgate_backend_state_changes_total', { backend: 'b2', state: 'down' })).toBe(1);
    expect(await metricValue(coldPage, 'roomgate_http_requests_total', { backend: fallback.get(rooms[1]!)!, status: '200' })).toBe(1);
  });

  it('a POST whose body was read whole (proxy.bufferBodyBytes) is sent to the fallback when the dead backend refuses the connection: nothing of it had been sent', async () => {
    const room = rooms[0]!;
    const payload = 'a body read whole before any connection';
    const res = await request(`${cold.url}/r/${room}/_backend/echo`, { method: 'POST', body: payload }, 3_000);
    expect(res.status).toBe(200);
    const first = JSON.parse(res.body) as { id: string; bodyBytes: number };
    expect(first.id).toBe(fallback.get(room));
    expect(first.bodyBytes).toBe(payload.length);
    expect(await metricValue(cold, 'roomgate_proxy_errors_total', { backend: 'b2', kind: 'refused' })).toBe(1);
    expect(await metricValue(cold, 'roomgate_backend_state_changes_total', { backend: 'b2', state: 'down' })).toBe(1);
    // Delivered once, at the fallback only.
    expect(await metricValue(cold, 'roomgate_http_requests_total', { backend: fallback.get(room)!, status: '200' })).toBe(1);

    // Now that b2 is known down, the same POST goes to the fallback and arrives whole.
    const ok = await request(`${cold.url}/r/${room}/_backend/echo`, { method: 'POST', body: payload }, 3_000);
    expect(ok.status).toBe(200);
    const echo = JSON.parse(ok.body) as { id: string; url: string; bodyBytes: number; bodySha256: string };
    expect(echo.id).toBe(fallback.get(room));
    expect(echo.url).toBe('/_backend/echo');
    expect(echo.bodyBytes).toBe(payload.length);
    expect(echo.bodySha256).toBe(createHash('sha256').update(payload).digest('hex'));
  });
});

// --- no backend, silent backend -------------------------------------------------------------

describe('HTTP answers when no backend can serve', () => {
  let dead: Member[];
  let gw: GatewayHere;

  it('answers 503 with Retry-After when every backend is marked down, for pages and sockets', async () => {
    // Backends that are gone: closed before the gateway starts, their ports refuse.
    const gone = await startBackendsHere(['d1', 'd2']);
    await Promise.all(gone.map((d) => d.backend.close()));
    dead = gone;
    gw = await startGatewayHere({ backends: dead, config: { ...CHECK_AT_START_ONLY, proxy: { retryAfterS: 7 } } });
    // Discover the deaths (this first request's answer is checked in the next test).
    await request(`${gw.url}/game/discover/`, {}, 3_000);
    const view = await backendsView(gw);
    expect(view.d1?.state).toBe('down');
    expect(view.d2?.state).toBe('down');

    const res = await request(`${gw.url}/game/nobody/`, {}, 3_000);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(res.body.length).toBeLessThan(200);
    const post = await request(`${gw.url}/r/nobody/_backend/echo`, { method: 'POST', body: 'x' }, 3_000);
    expect(post.status).toBe(503);
    expect(post.headers.get('retry-after')).toBe('7');

    const c = new Client(`${gw.wsUrl}/ws/live/?room=nobody`);
    await expect(withTimeout(c.opened, 3_000, 'upgrade answer')).rejects.toThrow('unexpected response 503');

    // Three 503s: the discovering request (it found both refusing), the page and the POST.
    expect(await metricValue(gw, 'roomgate_http_requests_total', { backend: 'none', status: '503' })).toBe(3);
    expect(await metricValue(gw, 'roomgate_upgrades_total', { backend: 'none', result: '503' })).toBe(1);
    expect(await metricValue(gw, 'roomgate_backend_state_changes_total', { state: 'down' })).toBe(2);
    expect(await metricValue(gw, 'roomgate_proxy_errors_total', { kind: 'refused' })).toBe(2);
  });

  // BUG (see report): the request that finds the last routable backend refusing gets the
  // 502 "backend unavailable" + Retry-After: 1 of a single failed backend, not the 503 +
  // Retry-After: retryAfterS every later request gets, although at that moment the gateway
  // knows no backend is routable (router.decide returned reject 503 and the answer was dropped).
  it('answers 503 + Retry-After already to the request that discovers every backend refusing', async () => {
    // Short marks, so the socket below discovers the deaths afresh.
    const fresh = await startGatewayHere({ backends: dead, config: { ...CHECK_AT_START_ONLY, proxy: { retryAfterS: 7, passiveDownMs: 300 } } });
    const res = await request(`${fresh.url}/game/first/`, {}, 3_000);
    expect(await metricValue(fresh, 'roomgate_proxy_errors_total', { kind: 'refused' })).toBe(2); // both tried
    expect.soft(res.status).toBe(503);
    expect.soft(res.headers.get('retry-after')).toBe('7');

    await poll('marks to expire', 10_000, async () => Object.values(await backendsView(fresh)).every((b) => b.state === 'up'));
    const c = new Client(`${fresh.wsUrl}/ws/live/?room=first`);
    await expect.soft(withTimeout(c.opened, 3_000, 'upgrade answer')).rejects.toThrow('unexpected response 503');
    expect(await metricValue(fresh, 'roomgate_proxy_errors_total', { kind: 'refused' })).toBe(4); // both tried again
    await fresh.stop();
  });

  let slow: Awaited<ReturnType<typeof startBackendHere>>;
  let tgw: GatewayHere;

  it('answers 504 promptly when a backend accepts but does not answer within responseTimeoutMs', async () => {
    slow = await startBackendHere('t1');
    tgw = await startGatewayHere({ backends: [slow], config: { proxy: { responseTimeoutMs: 500 } } });
    // The backend would answer after 60 s, and the default responseTimeoutMs is 60 s: a 504 before
    // the request's guard (a hang guard, a quarter of that) is the configured 500 ms at work.
    const res = await request(`${tgw.url}/r/sleepy/_backend/slow?ms=60000`, {}, 15_000);
    expect(res.status).toBe(504);
    expect(res.body.length).toBeLessThan(200);
    // Not before the timeout (a lower bound, which no slow machine breaks).
    expect(res.ms).toBeGreaterThanOrEqual(450);
    expect(await metricValue(tgw, 'roomgate_proxy_errors_total', { backend: 't1', kind: 'timeout' })).toBe(1);
    // A slow answer is not a dead backend: no passive mark, and the next request is served.
    expect(await metricValue(tgw, 'roomgate_backend_state_changes_total')).toBe(0);
    expect((await backendsView(tgw)).t1?.state).toBe('up');
    const fast = await request(`${tgw.url}/r/sleepy/_backend/slow?ms=100`, {}, 3_000);
    expect(fast.status).toBe(200);
    expect(fast.headers.get('x-backend-id')).toBe('t1');
  });

  // BUG (see report): roomgate_http_requests_total's help says it counts responses by status
  // "including roomgate-made 502/503/504", but a roomgate-made 502 or 504 is counted under the
  // error kind (status="refused", status="timeout"), so a 5xx dashboard never sees them.
  it('counts roomgate-made 502 and 504 answers under their status in roomgate_http_requests_total', async () => {
    // tgw (previous test) answered one 504; now one 502 for a body request to its dead backend (a
    // body over proxy.bufferBodyBytes streams, so it is not sent again).
    // Gone: the backend closes every connection it has and its port.
    await slow.backend.close();
    expect((await request(`${tgw.url}/r/sleepy/_backend/echo`, { method: 'POST', body: 'x'.repeat(70_000) }, 3_000)).status).toBe(502);
    expect(await metricValue(tgw, 'roomgate_proxy_errors_total', { kind: 'timeout' })).toBe(1);
    expect(await metricValue(tgw, 'roomgate_proxy_errors_total', { kind: 'refused' })).toBe(1);
    expect.soft(await metricValue(tgw, 'roomgate_http_requests_total', { status: '504' })).toBe(1);
    expect.soft(await metricValue(tgw, 'roomgate_http_requests_total', { status: '502' })).toBe(1);
  });
});

// --- passive mark expiry ------------------------------------------------------------------------

describe('passive down mark', () => {
  it('expires after passiveDownMs: a backend restarted on the same port takes new rooms, while rooms placed elsewhere meanwhile stay there', async () => {
    const [p1, p2, p3] = await startBackendsHere(['p1', 'p2', 'p3']);
    const gw = await startGatewayHere({ backends: [p1!, p2!, p3!], config: { ...CHECK_AT_START_ONLY, proxy: { passiveDownMs: 1000 } } });
    const { rooms, fallback } = await roomsOwnedBy('p2', [p1!, p2!, p3!], 3, 'expiry');
    const [r1, r2, r3] = rooms as [string, string, string];

    // Gone: every connection and the port closed.
    await p2!.backend.close();
    const markedAt = Date.now(); // the mark is set during the next request, so it expires after markedAt + 1000
    const during = await request(`${gw.url}/game/${r1}/`);
    expect(during.status).toBe(200);
    expect(during.headers.get('x-backend-id')).toBe(fallback.get(r1));
    expect((await backendsView(gw)).p2?.state).toBe('down');

    const p2b = await startBackendHere('p2', { port: p2!.port });
    expect(p2b.port).toBe(p2!.port);
    // While the mark lasts the restarted backend gets nothing, even though it would accept.
    if (Date.now() - markedAt < 700) {
      const still = await request(`${gw.url}/game/${r2}/`);
      expect(still.headers.get('x-backend-id')).toBe(fallback.get(r2));
    }

    await poll('p2 mark to expire', 10_000, async () => (await backendsView(gw)).p2?.state === 'up');
    expect(Date.now() - markedAt).toBeGreaterThanOrEqual(990);
    // Rooms placed on the fallback while p2 was down keep their placement (sticky: a returning
    // backend never takes rooms back); a room never placed goes to p2, its ring owner.
    const placedMeanwhile = [r1];
    if (Date.now() - markedAt < 700) placedMeanwhile.push(r2);
    for (const r of placedMeanwhile) {
      const res = await request(`${gw.url}/game/${r}/`);
      expect(res.status, r).toBe(200);
      expect(res.headers.get('x-backend-id'), r).toBe(fallback.get(r));
    }
    const fresh = await request(`${gw.url}/game/${r3}/`);
    expect(fresh.headers.get('x-backend-id'), r3).toBe('p2');
    const c = new Client(`${gw.wsUrl}/ws/live/?room=${r3}`);
    expect(await c.join(r3)).toBe('p2');
    expect((await backendRooms([p2b])).get('p2')).toEqual({ [r3]: 1 });
    expect(await metricValue(gw, 'roomgate_backend_state_changes_total', { backend: 'p2', state: 'down' })).toBe(1);
    expect(await metricValue(gw, 'roomgate_backend_state_changes_total', { backend: 'p2', state: 'up' })).toBe(1);
    await c.close();
  });
});

// --- idle sockets ---------------------------------------------------------------------------------

describe('idle WebSockets', () => {
  it('are kept by default and closed after proxy.websocketIdleTimeoutMs when set', async () => {
    const i1 = await startBackendHere('i1');
    const [keep, cut] = await Promise.all([
      startGatewayHere({ backends: [i1] }),
      startGatewayHere({ backends: [i1], config: { proxy: { websocketIdleTimeoutMs: 500 } } }),
    ]);
    const idleDefault = new Client(`${keep.wsUrl}/ws/live/?room=idle-a`);
    const idleCut = new Client(`${cut.wsUrl}/ws/live/?room=idle-b`);
    const busy = new Client(`${cut.wsUrl}/ws/live/?room=idle-c`);
    // The idle clock starts with the last frame, the "mounted" answer.
    const [, lastFrameAt] = await Promise.all([idleDefault.join('idle-a'), idleCut.join('idle-b').then(() => Date.now()), busy.join('idle-c')]);
    const t0 = Date.now();

    // A socket with traffic every 200 ms outlives the 500 ms idle limit.
    const busyLoop = (async () => {
      while (Date.now() - t0 < 1_500) {
        await pingPong(busy);
        await sleep(200);
      }
    })();
    const code = await withTimeout(idleCut.closed, 10_000, 'idle socket to be closed');
    const idleMs = Date.now() - lastFrameAt;
    expect(code).toBe(1006);
    // Not before the idle limit (a lower bound, which no slow machine breaks)...
    expect(idleMs).toBeGreaterThanOrEqual(300);
    await busyLoop;
    expect(busy.closeCode).toBeNull();
    // ...and by it: the gateway says it closed that socket for being idle, and only that one.
    const idleClosed = cut.logs().filter((l) => l.msg === 'idle socket closed');
    expect(idleClosed.map((l) => l.room)).toEqual(['idle-b']);
    await pingPong(busy);
    await busy.close();
    // The backend side of the cut socket is closed too.
    await poll('idle-b to leave the backend', 3_000, async () => (await backendRooms([i1])).get('i1')?.['idle-b'] === undefined);

    // Default: no idle limit. 3 s without a frame, and the socket still works.
    await sleep(Math.max(0, 3_000 - (Date.now() - t0)));
    expect(idleDefault.closeCode).toBeNull();
    await pingPong(idleDefault);
    expect((await backendRooms([i1])).get('i1')).toEqual({ 'idle-a': 1 });
    await idleDefault.close();
  });
});

// --- large bodies -----------------------------------------------------------------------------------

describe('large bodies', () => {
  it('streams a 5 MB upload and a 5000 KB download whole', async () => {
    const l1 = await startBackendHere('l1');
    const gw = await startGatewayHere({ backends: [l1] });

    const upload = randomBytes(5 * 1024 * 1024);
    const up = await request(`${gw.url}/r/big/_backend/echo`, { method: 'POST', body: upload }, 15_000);
    expect(up.status).toBe(200);
    const echo = JSON.parse(up.body) as { bodyBytes: number; bodySha256: string };
    expect(echo.bodyBytes).toBe(upload.length);
    expect(echo.bodySha256).toBe(createHash('sha256').update(upload).digest('hex'));

    const res = await fetch(`${gw.url}/r/big/_backend/big?kb=5000`, { signal: AbortSignal.timeout(15_000) });
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    // What the demo backend sends: 64 KiB chunks of a repeated line, the last one cut short.
    const chunk = Buffer.alloc(64 * 1024, 'roomgate-demo-big-body\n');
    const expected = createHash('sha256');
    for (let left = 5000 * 1024; left > 0; left -= chunk.length) expected.update(chunk.subarray(0, Math.min(left, chunk.length)));
    expect(body.length).toBe(5000 * 1024);
    expect(Number(res.headers.get('content-length'))).toBe(5000 * 1024);
    expect(createHash('sha256').update(body).digest('hex')).toBe(expected.digest('hex'));
  });
});
