// The drain-scoped admin token (admin.drainTokens) over real HTTP: the control plane's admin
// listener and its public port on free loopback ports, over a fake RuntimeView (plain data,
// recorded commands). A drain token drains (with handoff too) and undrains its own backend; every
// other write answers it 403 (maintenance, activate, move, purge, an unknown action), the status
// page on the public port 401; a backend in maintenance or another backend's drain 403, with the
// detail in the log only; wrong tokens 401; admin.token still does everything; both token lists
// are compared in constant time on every request. The CLI's side: test/cli/admin-commands.test.ts.
import * as crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { fakeBackend, makeControl, memoryLogger, type FakeView } from '../support/control.js';

// The real timingSafeEqual, counted: every token check must go through it.
vi.mock('node:crypto', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:crypto')>();
  return { ...real, timingSafeEqual: vi.fn(real.timingSafeEqual) };
});

const TOKEN = 'admin-token-0123456789abcdef';
const DRAIN = 'drain-token-0123456789abcdef';
const DRAIN_OLD = 'drain-token-old-0123456789ab';
const WRONG = 'wrong-token-0123456789abcdef';

/** Backends: one on loopback (the test's own address), one named for it, one elsewhere, one that does not resolve. */
const BACKENDS = () => [
  fakeBackend('self', 'http://127.0.0.1:8000'),
  fakeBackend('named', 'http://self.test:8000'),
  fakeBackend('other', 'http://10.0.0.2:8000'),
  fakeBackend('gone', 'http://gone.test:8000'),
];
const lookup = async (host: string): Promise<readonly string[]> => {
  if (host === 'self.test') return ['::1', '127.0.0.1'];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};

interface Plane {
  control: ControlPlane;
  view: FakeView;
  lines: string[];
  admin: http.Server;
  pub: http.Server;
  adminUrl: string;
  pubUrl: string;
}
const planes: Plane[] = [];

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function plane(admin: Record<string, unknown>): Promise<Plane> {
  const store = new MemorySharedDataStore('gw-drain', { presenceTtlMs: 60_000 });
  const { logger, lines } = memoryLogger('info');
  const { control, view } = makeControl(store, { admin, status: { public: 'token' }, room: { pattern: '^[a-z0-9-]{1,20}$' } }, { logger, addressLookup: lookup });
  view.list = BACKENDS();
  await control.ready();
  const adminServer = control.adminServer as http.Server;
  const pub = http.createServer(control.handle);
  const p = { control, view, lines, admin: adminServer, pub, adminUrl: await listen(adminServer), pubUrl: await listen(pub) };
  planes.push(p);
  return p;
}

let main: Plane;

beforeAll(async () => {
  main = await plane({ token: TOKEN, drainTokens: [DRAIN, DRAIN_OLD] });
});

afterAll(async () => {
  for (const p of planes) {
    for (const s of [p.admin, p.pub]) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await p.control.close();
  }
});

async function call(p: Plane, method: string, path: string, token: string | undefined, body?: unknown, base = p.adminUrl): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(5000) });
  const text = await r.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // the status page answers text
  }
  return { status: r.status, json, text, headers: r.headers };
}

const stateOf = (p: Plane, id: string) => p.view.backend(id)?.state;

describe('a drain token', () => {
  it('drains its own backend, with handoff too, and undrains it; the older token of a rotation as well', async () => {
    const d = await call(main, 'POST', '/backends/self/drain', DRAIN, { deadlineMs: 60_000 });
    expect(d.status).toBe(200);
    expect(d.json).toMatchObject({ id: 'self', state: 'draining', admin: { state: 'draining' } });
    const h = await call(main, 'POST', '/backends/self/drain', DRAIN_OLD, { handoff: true });
    expect(h.status).toBe(200);
    expect(h.json.handoff).toMatchObject({ backend: 'self' });
    expect(main.view.handoffDrains).toEqual(['self']);
    const u = await call(main, 'POST', '/backends/self/undrain', DRAIN, undefined);
    expect(u.status).toBe(200);
    expect(u.json).toMatchObject({ id: 'self', state: 'up', admin: null });
    expect(main.view.commands.map((c) => [c.id, c.state?.state ?? null])).toEqual([
      ['self', 'draining'],
      ['self', 'draining'],
      ['self', null],
    ]);
  });

  it('drains a backend named by DNS when one of its addresses is the caller\'s', async () => {
    expect((await call(main, 'POST', '/backends/named/drain', DRAIN, {})).status).toBe(200);
    expect((await call(main, 'POST', '/backends/named/undrain', DRAIN)).status).toBe(200);
  });

  it('is refused 403 by every other admin write, nothing done, the detail in the log', async () => {
    const before = main.view.commands.length;
    const writes: [string, string, unknown][] = [
      ['POST', '/backends/self/maintenance', {}],
      ['POST', '/backends/self/activate', {}],
      ['POST', '/backends/self/restart', {}],
      ['POST', '/rooms/chess/move', { to: 'other' }],
      ['POST', '/cache/purge', { prefix: '/' }],
    ];
    for (const [method, path, body] of writes) {
      const r = await call(main, method, path, DRAIN, body);
      expect(r.status, path).toBe(403);
      expect(r.json, path).toEqual({ error: { code: 'forbidden', message: 'this token may only drain and undrain a backend; this write needs admin.token' } });
    }
    expect(main.view.commands.length).toBe(before);
    expect(main.view.moves).toEqual([]);
    const logged = main.lines.filter((l) => l.includes('a drain token was sent for a write it does not allow'));
    expect(logged.length).toBe(writes.length);
    expect(JSON.parse(logged[0] as string)).toMatchObject({ address: '127.0.0.1', method: 'POST', url: '/backends/self/maintenance' });
    // Not a guess: a refused drain token is never counted as a wrong token.
    expect(logged.join('')).not.toContain(DRAIN);
  });

  it('does not open the status page on the public port (401, as any token but admin.token); admin.token does', async () => {
    const r = await call(main, 'GET', '/_roomgate/', DRAIN, undefined, main.pubUrl);
    expect(r.status).toBe(401);
    expect((await call(main, 'GET', '/_roomgate/', TOKEN, undefined, main.pubUrl)).status).toBe(200);
  });

  it("is refused 403 for another backend's drain or undrain: the answer says what to do, the log says what was compared", async () => {
    for (const id of ['other', 'gone']) {
      for (const action of ['drain', 'undrain']) {
        const r = await call(main, 'POST', `/backends/${id}/${action}`, DRAIN, {});
        expect(r.status, `${action} ${id}`).toBe(403);
        expect(r.json.error.message).toBe(`a drain token drains and undrains only the backend the request comes from; send it from backend "${id}" itself, or use admin.token`);
        // Nothing internal in the answer: no address, no URL, no resolver error.
        expect(r.text).not.toMatch(/10\.0\.0\.2|127\.0\.0\.1|gone\.test|ENOTFOUND/);
      }
    }
    expect(stateOf(main, 'other')).toBe('up');
    const other = main.lines.map((l) => JSON.parse(l)).find((l) => l.backend === 'other' && /own address/.test(l.msg));
    expect(other).toMatchObject({ peer: '127.0.0.1', addresses: ['10.0.0.2'], action: 'drain' });
    const gone = main.lines.map((l) => JSON.parse(l)).find((l) => l.backend === 'gone');
    expect(gone).toMatchObject({ url: 'http://gone.test:8000', err: 'getaddrinfo ENOTFOUND gone.test' });
  });

  it('cannot change a backend in maintenance (only admin.token ends it)', async () => {
    expect((await call(main, 'POST', '/backends/self/maintenance', TOKEN, {})).status).toBe(200);
    for (const action of ['drain', 'undrain']) {
      const r = await call(main, 'POST', `/backends/self/${action}`, DRAIN, {});
      expect(r.status, action).toBe(403);
      expect(r.json.error.message).toBe('backend "self" is in maintenance: only admin.token changes it');
    }
    expect(stateOf(main, 'self')).toBe('maintenance');
    expect((await call(main, 'POST', '/backends/self/undrain', TOKEN)).status).toBe(200);
    expect(stateOf(main, 'self')).toBe('up');
  });

  it('with admin.drainFrom "anywhere": drains any backend, and still nothing else', async () => {
    const p = await plane({ token: TOKEN, drainTokens: [DRAIN], drainFrom: 'anywhere' });
    expect((await call(p, 'POST', '/backends/other/drain', DRAIN, {})).status).toBe(200);
    expect(stateOf(p, 'other')).toBe('draining');
    expect((await call(p, 'POST', '/backends/other/maintenance', DRAIN, {})).status).toBe(403);
  });

  it('drains without any admin.token configured, while every other write stays disabled (403)', async () => {
    const p = await plane({ token: '', drainTokens: [DRAIN] });
    expect((await call(p, 'POST', '/backends/self/drain', DRAIN, {})).status).toBe(200);
    expect((await call(p, 'POST', '/backends/self/drain', WRONG, {})).status).toBe(401);
    const m = await call(p, 'POST', '/backends/self/maintenance', DRAIN, {});
    expect(m.status).toBe(403);
    expect(m.json.error.message).toBe('admin writes are disabled: set admin.token (or ROOMGATE_ADMIN_TOKEN)');
  });
});

describe('other tokens', () => {
  it('a wrong or missing token: 401 with the challenge, on drain and on every other write', async () => {
    for (const [path, token] of [
      ['/backends/self/drain', WRONG],
      ['/backends/self/drain', undefined],
      ['/backends/self/undrain', `${DRAIN}x`],
      ['/backends/self/maintenance', WRONG],
      ['/rooms/chess/move', DRAIN.slice(0, -1)],
    ] as const) {
      const r = await call(main, 'POST', path, token, {});
      expect(r.status, `${path} ${token}`).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer realm="roomgate admin"');
      expect(r.json.error.code).toBe('unauthorized');
    }
    expect((await call(main, 'POST', '/backends/self/drain', WRONG, {})).json.error.message).toBe(
      'missing or wrong bearer token: send Authorization: Bearer <admin.token> or a drain token (admin.drainTokens)',
    );
  });

  it('admin.token still does everything, from anywhere, to any backend', async () => {
    const p = await plane({ token: TOKEN, drainTokens: [DRAIN] });
    for (const [path, body, status] of [
      ['/backends/other/drain', { handoff: true }, 200],
      ['/backends/other/undrain', {}, 200],
      ['/backends/other/maintenance', {}, 200],
      ['/backends/other/activate', {}, 200],
      ['/rooms/chess/move', { to: 'other' }, 200],
      // The page cache is off here: the route itself answers, past the token.
      ['/cache/purge', { prefix: '/' }, 404],
    ] as const) {
      expect((await call(p, 'POST', path, TOKEN, body)).status, path).toBe(status);
    }
    expect(p.view.moves).toEqual([{ room: 'chess', to: 'other', id: undefined }]);
  });

  it('compares admin.token and every drain token in constant time, on every request, whichever matches', async () => {
    const spy = vi.mocked(crypto.timingSafeEqual);
    // admin.token and two drain tokens: three digests compared, whatever the header holds.
    for (const token of [TOKEN, DRAIN, DRAIN_OLD, WRONG]) {
      spy.mockClear();
      await call(main, 'POST', '/backends/self/undrain', token);
      expect(spy.mock.calls.length, token).toBe(3);
    }
  });
});

describe('the configuration', () => {
  it('reads ROOMGATE_DRAIN_TOKENS as a comma-separated list; drainFrom defaults to backend', () => {
    const c = loadConfig({ env: { ROOMGATE_DRAIN_TOKENS: `${DRAIN}, ${DRAIN_OLD}`, ROOMGATE_BACKENDS: 'http://127.0.0.1:8000' } });
    expect(c.admin.drainTokens).toEqual([DRAIN, DRAIN_OLD]);
    expect(c.admin.drainFrom).toBe('backend');
  });

  it('names the field and the fix: too short, the same as admin.token (from the environment too)', () => {
    expect(() => loadConfig({ env: { ROOMGATE_DRAIN_TOKENS: 'short', ROOMGATE_BACKENDS: 'http://127.0.0.1:8000' } })).toThrow(
      /admin\.drainTokens\.0: got <redacted, 5 characters> \(from ROOMGATE_DRAIN_TOKENS\); expected a token of at least 16 characters/,
    );
    expect(() => loadConfig({ env: { ROOMGATE_DRAIN_TOKENS: TOKEN, ROOMGATE_ADMIN_TOKEN: TOKEN, ROOMGATE_BACKENDS: 'http://127.0.0.1:8000' } })).toThrow(
      /admin\.drainTokens\.0: got <redacted>, the same token as admin\.token/,
    );
  });
});
