// Active health checks as an operator meets them, against real gateway and backend processes: the
// default check (TCP connect) keeps apps without a health route in service, the HTTP check is
// opt-in with its own Host header (Django's ALLOWED_HOSTS). The demo backend plays those apps
// (--healthz-status, --allowed-hosts) and is the witness of where a request went.
import http from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { startBackend, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';

afterAll(stopAll);

/** Short checks: a backend that fails them is down after 2 x 150 ms. */
const FAST = { intervalMs: 150, timeoutMs: 150, rise: 1, fall: 2 };

interface BackendJson {
  id: string;
  state: string;
  health: string;
  healthHistory: { ok: boolean; error?: string }[];
}

async function backendOf(gw: GatewayProc, id: string): Promise<BackendJson> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/backends/${id}`, { signal: AbortSignal.timeout(5_000) });
  expect(res.status).toBe(200);
  return (await res.json()) as BackendJson;
}

/** Waits until the backend has at least n check results in the gateway's view; returns that view. */
function afterChecks(gw: GatewayProc, id: string, n: number): Promise<BackendJson> {
  return waitFor(`${n} health checks of ${id}`, 10_000, async () => {
    const b = await backendOf(gw, id);
    return b.healthHistory.length >= n ? b : null;
  });
}

/** A GET through the gateway over node:http (fetch will not send another Host); bounded by 5 s. */
function page(gw: GatewayProc, path: string, headers: Record<string, string> = {}): Promise<{ status: number; backend: string | null }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: gw.port, path, headers, agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, backend: (res.headers['x-backend-id'] as string | undefined) ?? null }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: no answer within 5000 ms`)));
    req.on('error', reject);
  });
}

describe('health checks: the default and the opt-in HTTP check', () => {
  it('by default a TCP connect check: a backend without a /healthz route (404, like Django) stays up and serves', async () => {
    const app = await startBackend('noroute', ['--healthz-status', '404']);
    const gw = await startGateway({ backends: [app], config: { health: FAST } });
    // Well past `fall` checks: an HTTP check of /healthz would have failed every one of them.
    const view = await afterChecks(gw, 'noroute', 5);
    expect(view).toMatchObject({ state: 'up', health: 'up' });
    expect(view.healthHistory.every((r) => r.ok)).toBe(true);
    expect(await page(gw, '/game/tcp-default/')).toEqual({ status: 200, backend: 'noroute' });
  });

  it('health.path is opt-in; health.host is the Host it sends (Django answers 400 to a Host outside ALLOWED_HOSTS)', async () => {
    const app = await startBackend('django', ['--allowed-hosts', 'app.example']);
    const checks = { ...FAST, path: '/healthz' };
    const [plain, named] = await Promise.all([
      startGateway({ backends: [app], config: { health: checks } }),
      startGateway({ backends: [app], config: { health: { ...checks, host: 'app.example' } } }),
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
    expect(view.healthHistory.every((r) => r.ok)).toBe(true);
    expect(await page(named, '/game/named/', { host: 'app.example' })).toEqual({ status: 200, backend: 'django' });
  });
});
