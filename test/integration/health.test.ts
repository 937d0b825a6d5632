// Active health checks as an operator meets them, against real gateways and demo backends (in the
// test's process: test/support/here.ts; none gets a signal): the
// default check (TCP connect) keeps apps without a health route in service, the HTTP check is
// opt-in with its own Host header (Django's ALLOWED_HOSTS), and what a backend marked down by its
// checks does to live rooms (health.onDown). The demo backend plays those apps (--healthz-status,
// allowedHosts, failHealth (its SIGUSR2) to fail its checks while it serves) and is the witness of where a
// request or a socket went.
import { afterAll, describe, expect, it } from 'vitest';
import { buildRing } from '../../src/placement/ring.js';
import { startBackendHere, startGatewayHere, stopAllHere, type GatewayHere } from '../support/here.js';
import { Client, backendRooms, httpRequest, pingPong, stopAll, waitFor, withTimeout } from '../support/processes.js';

afterAll(async () => {
  await stopAll();
  await stopAllHere();
});

/** Short checks: a backend that fails them is down after 2 x 150 ms. */
// Checks fast enough to watch in a test; a check may still time out on a machine busy with other
// work, so the assertions below look at what the backend answered, not at timeouts.
// A check times out after 1 s (at most intervalMs): the gateway, the backends and the test share one
// loaded worker, and two answers slower than 300 ms in a row once marked the healthy backend down
// too (503 for a new room in a CI run).
const FAST = { intervalMs: 1_000, timeoutMs: 1_000, rise: 1, fall: 2 };

interface BackendJson {
  id: string;
  state: string;
  health: string;
  healthHistory: { ok: boolean; error?: string }[];
}

async function backendOf(gw: GatewayHere, id: string): Promise<BackendJson> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/backends/${id}`, { signal: AbortSignal.timeout(5_000) });
  expect(res.status).toBe(200);
  return (await res.json()) as BackendJson;
}

/** Waits until the backend has at least n check results in the gateway's view; returns that view. */
function afterChecks(gw: GatewayHere, id: string, n: number): Promise<BackendJson> {
  return waitFor(`${n} health checks of ${id}`, 10_000, async () => {
    const b = await backendOf(gw, id);
    return b.healthHistory.length >= n ? b : null;
  });
}

/** A page GET through the gateway (with any Host): its status and the backend that answered. */
async function page(gw: GatewayHere, path: string, headers: Record<string, string> = {}): Promise<{ status: number; backend: string | null }> {
  const res = await httpRequest(gw.port, path, { headers });
  return { status: res.status, backend: (res.headers['x-backend-id'] as string | undefined) ?? null };
}

describe('health checks: the default and the opt-in HTTP check', () => {
  it('by default a TCP connect check: a backend without a /healthz route (404, like Django) stays up and serves', async () => {
    const app = await startBackendHere('noroute', { healthzStatus: 404 });
    const gw = await startGatewayHere({ backends: [app], config: { health: FAST } });
    // Well past `fall` checks: an HTTP check of /healthz would have failed every one of them.
    const view = await afterChecks(gw, 'noroute', 5);
    expect(view).toMatchObject({ state: 'up', health: 'up' });
    expect(view.healthHistory.filter((r) => !r.ok && !r.error?.startsWith('timeout'))).toEqual([]);
    expect(await page(gw, '/game/tcp-default/')).toEqual({ status: 200, backend: 'noroute' });
  });

  it('health.path is opt-in; health.host is the Host it sends (Django answers 400 to a Host outside ALLOWED_HOSTS)', async () => {
    const app = await startBackendHere('django', { allowedHosts: ['app.example'] });
    const checks = { ...FAST, path: '/healthz' };
    const [plain, named] = await Promise.all([
      startGatewayHere({ backends: [app], config: { health: checks } }),
      startGatewayHere({ backends: [app], config: { health: { ...checks, host: 'app.example' } } }),
    ]);
    // Without health.host the check sends Host: 127.0.0.1:PORT, which the app refuses.
    const refused = await waitFor('the backend down in the gateway without health.host', 10_000, async () => {
      const b = await backendOf(plain, 'django');
      return b.state === 'down' ? b : null;
    });
    expect(refused.healthHistory.at(-1)).toMatchObject({ ok: false, error: 'HTTP 400' });
    // With it, the same app passes every check and serves pages asked for by that name.
    const view = await afterChecks(named, 'django', 5);
    expect(view).toMatchObject({ state: 'up', health: 'up' });
    expect(view.healthHistory.filter((r) => !r.ok && !r.error?.startsWith('timeout')), JSON.stringify(view.healthHistory)).toEqual([]);
    expect(await page(named, '/game/named/', { host: 'app.example' })).toEqual({ status: 200, backend: 'django' });
  });
});

describe('a backend marked down by its health checks (health.onDown)', () => {
  it('keep (default): its live sockets carry frames, the same room\'s new socket and page go there, new rooms go elsewhere; close: its sockets are closed', async () => {
    const [k1, k2] = await Promise.all([startBackendHere('k1'), startBackendHere('k2')]);
    const checks = { ...FAST, path: '/healthz' };
    const [keep, close] = await Promise.all([
      startGatewayHere({ backends: [k1, k2], config: { health: checks } }),
      startGatewayHere({ backends: [k1, k2], config: { health: { ...checks, onDown: 'close' } } }),
    ]);
    const ring = buildRing([k1, k2].map((b) => ({ id: b.id, weight: 1 })));
    const [kept, closed, fresh] = Array.from({ length: 100 }, (_, i) => `ondown-${i}`).filter((r) => ring.first(r) === 'k1') as [string, string, string];
    const a = new Client(`${keep.wsUrl}/ws/live/?room=${kept}`);
    const b = new Client(`${close.wsUrl}/ws/live/?room=${closed}`);
    expect(await withTimeout(a.join(kept), 10_000, 'join through keep')).toBe('k1');
    expect(await withTimeout(b.join(closed), 10_000, 'join through close')).toBe('k1');

    // k1 keeps serving, but its /healthz answers 503 from now on.
    k1.backend.failHealth(true);
    for (const gw of [keep, close]) {
      await waitFor('k1 down by its checks', 10_000, async () => (await backendOf(gw, 'k1')).state === 'down');
    }
    expect((await backendOf(keep, 'k1')).healthHistory.at(-1)).toMatchObject({ ok: false, error: 'HTTP 503' });

    // close: the socket is closed (k2 is up, so the panic guard does not apply).
    expect(await withTimeout(b.closed, 5_000, 'the socket through the close gateway to close')).toBe(1006);

    // keep: the socket lives and carries frames both ways.
    await pingPong(a);
    // A new socket and the page of the same room go to k1 too: the room stays whole.
    const a2 = new Client(`${keep.wsUrl}/ws/live/?room=${kept}`);
    expect(await withTimeout(a2.join(kept), 10_000, 'a second socket of the kept room')).toBe('k1');
    expect(await page(keep, `/game/${kept}/`)).toEqual({ status: 200, backend: 'k1' });
    const where = await fetch(`http://127.0.0.1:${keep.adminPort}/rooms/${kept}`, { signal: AbortSignal.timeout(5_000) });
    expect(await where.json()).toMatchObject({ backend: 'k1', reason: 'sticky-live', wouldPlace: false, socketsHere: 2 });
    // A new room whose ring owner is k1 goes to k2: k1 takes no new rooms.
    const n = new Client(`${keep.wsUrl}/ws/live/?room=${fresh}`);
    expect(await withTimeout(n.join(fresh), 10_000, 'a new room')).toBe('k2');
    expect(await page(keep, `/game/${fresh}/`)).toEqual({ status: 200, backend: 'k2' });

    // The witness: the kept room is on k1 only, with both sockets; the closed one left k1.
    await waitFor('the closed socket to leave k1', 5_000, async () => (await backendRooms([k1])).get('k1')?.[closed] === undefined);
    const rooms = await backendRooms([k1, k2]);
    expect(rooms.get('k1')).toEqual({ [kept]: 2 });
    expect(rooms.get('k2')).toEqual({ [fresh]: 1 });
    expect(keep.logs().some((l) => l.msg === 'backend down by its health checks: no new rooms; its live sockets are kept (health.onDown: keep)')).toBe(true);
    await pingPong(a);
    expect(a.closeCode).toBeNull();
    await Promise.all([a.close(), a2.close(), n.close()]);
  });
});
