// The admin app with inject() (no port): a fake RuntimeView (our own port onto the gateway: plain
// data, recorded commands) and the real in-memory shared store. The Host check before everything,
// health, the read routes, the write routes with their token, order of checks and body rules, the
// one error shape (with invalid_room_key's fields inside it), 404 for unknown routes and methods,
// and the status page. The same routes through real gateway processes: test/integration/admin.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { FakeView, fakeBackend, makeControl } from '../support/control.js';

const TOKEN = 'admin-token-0123456789abcdef';
const HOST = { host: '127.0.0.1:9090' };

let control: ControlPlane;
let view: FakeView;
let noToken: ControlPlane;
let store: MemorySharedDataStore;

beforeAll(async () => {
  store = new MemorySharedDataStore('gw-admin', { presenceTtlMs: 60_000 });
  ({ control, view } = makeControl(store, { admin: { token: TOKEN, allowedHosts: ['roomgate-admin'] }, room: { pattern: '^[a-z0-9-]{1,20}$' } }));
  ({ control: noToken } = makeControl(store, { admin: { token: '' } }));
  await Promise.all([control.ready(), noToken.ready()]);
});

afterAll(async () => {
  await Promise.all([control.close(), noToken.close()]);
});

function admin(method: string, url: string, o: { token?: string; body?: string; headers?: Record<string, string>; cp?: ControlPlane } = {}) {
  const app = (o.cp ?? control).adminApp;
  if (!app) throw new Error('no admin app');
  return app.inject({
    method: method as 'GET',
    url,
    headers: { ...HOST, ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...o.headers },
    ...(o.body === undefined ? {} : { payload: o.body }),
  });
}

describe('admin app: before any route', () => {
  it('a Host that is not an IP, localhost or admin.allowedHosts gets 421 misdirected_request on everything, health, 404s and bad URLs included', async () => {
    for (const url of ['/status', '/healthz', '/readyz', '/nope', '/backends/%ZZ', '/_roomgate/', '/']) {
      const r = await admin('GET', url, { headers: { host: 'evil.example' } });
      expect(r.statusCode, url).toBe(421);
      expect(r.headers['content-type'], url).toBe('application/json; charset=utf-8');
      expect(r.headers.connection, url).toBe('close');
      expect(r.json(), url).toEqual({ error: { code: 'misdirected_request', message: expect.stringMatching(/"evil\.example" is not accepted .*DNS rebinding.*admin\.allowedHosts/) } });
    }
    const w = await admin('POST', '/backends/b1/drain', { token: TOKEN, headers: { host: 'evil.example' }, body: '{}' });
    expect(w.statusCode).toBe(421);
    expect(view.commands).toEqual([]);
    for (const host of ['localhost:9090', '[::1]:9090', 'ROOMGATE-ADMIN:9090', '10.1.2.3']) expect((await admin('GET', '/status', { headers: { host } })).statusCode, host).toBe(200);
  });

  it('/healthz and /readyz as on the public port (any method, with a query); readyz 503 when not ready', async () => {
    const h = await admin('GET', '/healthz?probe=1');
    expect(h.statusCode).toBe(200);
    expect(h.body).toBe('ok\n');
    expect(h.headers['content-type']).toBe('text/plain');
    expect((await admin('POST', '/readyz')).body).toBe('ready\n');
    view.snapshot = { ...view.snapshot, ready: false };
    try {
      const r = await admin('GET', '/readyz');
      expect(r.statusCode).toBe(503);
      expect(r.body).toBe('shutting down\n');
    } finally {
      view.snapshot = { ...view.snapshot, ready: true };
    }
  });
});

describe('admin app: reads', () => {
  it('GET /lobby: every live room, listed or not, with its backend and the online counts per backend (the operator\'s view)', async () => {
    const since = Date.parse('2030-01-01T00:00:00Z');
    await store.publishPresence([{ room: 'private-7f3a9c2e', backend: 'b1', sockets: 2, since }, { room: 'chess', backend: 'b2', sockets: 1, since }], 60_000);
    await store.setMeta('chess', { title: 'Chess' }, false);
    try {
      const r = await admin('GET', '/lobby');
      expect(r.statusCode).toBe(200);
      expect(r.json()).toMatchObject({
        rooms: [
          { room: 'private-7f3a9c2e', backend: 'b1', sockets: 2, listed: false },
          { room: 'chess', backend: 'b2', sockets: 1, listed: true, meta: { title: 'Chess' } },
        ],
        total: 2,
        online: { total: 3, rooms: 2, byBackend: { b1: 2, b2: 1 } },
      });
      expect((await admin('GET', '/lobby?backend=b2')).json().rooms.map((x: { room: string }) => x.room)).toEqual(['chess']);
      expect((await admin('GET', '/lobby?limit=0')).statusCode).toBe(400);
      // The public port names neither the private room nor a backend.
      const pub = await control.publicApp.inject({ method: 'GET', url: '/_roomgate/api/lobby' });
      expect(pub.json()).toMatchObject({ rooms: [{ room: 'chess' }], total: 1 });
      expect(pub.body).not.toMatch(/private-7f3a9c2e|"backend"/);
    } finally {
      await store.withdrawPresence();
      await store.deleteMeta('chess');
    }
  });

  it('GET /status is the gateway snapshot, as indented JSON', async () => {
    const r = await admin('GET', '/status');
    expect(r.statusCode).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.json()).toEqual(view.snapshot);
    expect(r.body).toBe(`${JSON.stringify(view.snapshot, null, 2)}\n`);
  });

  it('GET /backends and /backends/ID: times as ISO strings; unknown ID 404', async () => {
    view.list = [
      fakeBackend('b1', 'http://10.0.0.1:8000', { passiveDownUntil: Date.parse('2030-01-01T00:00:10Z'), state: 'draining', admin: { state: 'draining', deadline: Date.parse('2030-01-01T01:00:00Z'), since: Date.parse('2030-01-01T00:00:00Z') } }),
      fakeBackend('b2', 'http://10.0.0.2:8000'),
    ];
    const all = await admin('GET', '/backends');
    expect(all.json()).toMatchObject({ sockets: 3, rooms: 2, degraded: false });
    expect(all.json().backends.map((b: { id: string }) => b.id)).toEqual(['b1', 'b2']);
    const one = await admin('GET', '/backends/b1');
    expect(one.json()).toMatchObject({
      id: 'b1',
      url: 'http://10.0.0.1:8000',
      state: 'draining',
      passiveDownUntil: '2030-01-01T00:00:10.000Z',
      admin: { state: 'draining', deadline: '2030-01-01T01:00:00.000Z', since: '2030-01-01T00:00:00.000Z' },
      healthHistory: [{ at: 1_700_000_000_000, ok: true, ms: 1 }],
    });
    expect((await admin('GET', '/backends/b2')).json()).toMatchObject({ passiveDownUntil: null, admin: null });
    const none = await admin('GET', '/backends/nope');
    expect(none.statusCode).toBe(404);
    expect(none.json()).toEqual({ error: { code: 'not_found', message: 'no backend "nope"' } });
  });

  it('GET /events, GET /metrics (the view\'s text and content type; a failure is 500 with its message)', async () => {
    expect((await admin('GET', '/events')).json()).toEqual({ events: view.eventList, pushes: [], handoffs: view.handoffData, backendCalls: [] });
    const m = await admin('GET', '/metrics');
    expect(m.statusCode).toBe(200);
    expect(m.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(m.body).toBe('roomgate_live_sockets{backend="b1"} 3\n');
    view.metricsFail = true;
    try {
      const f = await admin('GET', '/metrics');
      expect(f.statusCode).toBe(500);
      expect(f.json()).toEqual({ error: { code: 'internal', message: 'registry broke' } });
    } finally {
      view.metricsFail = false;
    }
  });

  it('GET /rooms/R: the explanation; a key the room pattern refuses: 400 invalid_room_key with pattern and maxLength inside the error', async () => {
    expect((await admin('GET', '/rooms/game-1')).json()).toMatchObject({ room: 'game-1', backend: 'b1', reason: 'ring', wouldPlace: true });
    for (const key of ['UPPER', 'a%20b', 'x'.repeat(21), '%2F']) {
      const r = await admin('GET', `/rooms/${key}`);
      expect(r.statusCode, key).toBe(400);
      expect(r.json(), key).toEqual({
        error: {
          code: 'invalid_room_key',
          message: 'invalid room key: it must match room.pattern ^[a-z0-9-]{1,20}$ and be 1 to 1024 characters',
          pattern: '^[a-z0-9-]{1,20}$',
          maxLength: 1024,
        },
      });
    }
    expect((await admin('GET', '/rooms/%E0%A4%A')).json()).toEqual({ error: { code: 'bad_request', message: 'malformed percent-encoding in the path' } });
  });

  it('unknown routes and other methods: 404 naming the routes', async () => {
    for (const [method, url] of [
      ['GET', '/nope'],
      ['DELETE', '/backends/b1'],
      ['PUT', '/status'],
      ['GET', '/backends/b1/drain'],
    ] as const) {
      const r = await admin(method, url);
      expect(r.statusCode, `${method} ${url}`).toBe(404);
      expect(r.json().error, `${method} ${url}`).toEqual({ code: 'not_found', message: expect.stringMatching(/^not found: GET \/metrics/) });
    }
  });
});

describe('admin app: writes', () => {
  beforeAll(() => {
    view.list = [fakeBackend('b1', 'http://10.0.0.1:8000'), fakeBackend('b2', 'http://10.0.0.2:8000')];
  });

  it('the token first: 401 with a Bearer challenge (even for an unknown backend or a bad body); 403 without admin.token', async () => {
    for (const o of [{}, { token: 'wrong-token-0123456789abcdef' }, { headers: { authorization: TOKEN } }]) {
      for (const [url, body] of [
        ['/backends/b1/drain', '{}'],
        ['/backends/nope/drain', 'not json'],
        ['/backends/b1/explode', `{"pad": "${'x'.repeat(10_000)}"}`],
      ] as const) {
        const r = await admin('POST', url, { ...o, body });
        expect(r.statusCode, url).toBe(401);
        expect(r.headers['www-authenticate']).toBe('Bearer realm="roomgate admin"');
        expect(r.json()).toEqual({ error: { code: 'unauthorized', message: 'missing or wrong bearer token: send Authorization: Bearer <admin.token>' } });
      }
    }
    const f = await admin('POST', '/backends/b1/drain', { cp: noToken, token: TOKEN, body: '{}' });
    expect(f.statusCode).toBe(403);
    expect(f.json()).toEqual({ error: { code: 'forbidden', message: 'admin writes are disabled: set admin.token (or ROOMGATE_ADMIN_TOKEN)' } });
    expect(view.commands).toEqual([]);
  });

  it('then the backend (404 before the body is looked at), then the body: a JSON object of at most 4096 bytes, deadlineMs >= 0 or null', async () => {
    const unknown = await admin('POST', '/backends/nope/drain', { token: TOKEN, body: 'not json' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toEqual({ code: 'not_found', message: 'no backend "nope"' });
    for (const body of ['{"deadlineMs":-1}', '{"deadlineMs":"10m"}', '{"deadlineMs":true}', '{"deadlineMs":1e999}']) {
      const r = await admin('POST', '/backends/b1/drain', { token: TOKEN, body });
      expect(r.statusCode, body).toBe(400);
      expect(r.json().error, body).toEqual({ code: 'bad_request', message: 'deadlineMs must be a number of milliseconds >= 0, or null for no deadline' });
    }
    for (const body of ['[1]', 'not json', '"x"', 'null']) {
      expect((await admin('POST', '/backends/b1/drain', { token: TOKEN, body })).json().error, body).toEqual({ code: 'bad_request', message: 'body must be a JSON object' });
    }
    const big = await admin('POST', '/backends/b1/drain', { token: TOKEN, body: JSON.stringify({ deadlineMs: 1, pad: 'x'.repeat(5000) }) });
    expect(big.statusCode).toBe(413);
    expect(big.json().error).toEqual({ code: 'payload_too_large', message: 'body over 4096 bytes' });
    const action = await admin('POST', '/backends/b1/explode', { token: TOKEN });
    expect(action.statusCode).toBe(404);
    expect(action.json().error.message).toBe('unknown action "explode": drain, undrain, maintenance');
    expect(view.commands).toEqual([]);
  });

  it('drain (default deadline 10 min, a deadline, or none), maintenance, undrain and its alias activate; each answers the backend', async () => {
    const t = Date.now();
    const d = await admin('POST', '/backends/b1/drain', { token: TOKEN });
    expect(d.statusCode).toBe(200);
    expect(d.json()).toMatchObject({ id: 'b1', state: 'draining', admin: { state: 'draining' } });
    const first = view.commands[0]?.state;
    expect(first?.deadline).toBeGreaterThanOrEqual(t + 600_000);
    expect(first?.deadline).toBeLessThanOrEqual(Date.now() + 600_000);
    await admin('POST', '/backends/b1/drain', { token: TOKEN, body: '{"deadlineMs": 1500}' });
    expect((view.commands[1]?.state?.deadline ?? 0) - (view.commands[1]?.state?.since ?? 0)).toBe(1500);
    const none = await admin('POST', '/backends/b1/drain', { token: TOKEN, body: '{"deadlineMs": null}' });
    expect(none.json().admin).toMatchObject({ state: 'draining', deadline: null });
    expect((await admin('POST', '/backends/b2/maintenance', { token: TOKEN })).json()).toMatchObject({ id: 'b2', state: 'maintenance', admin: { state: 'maintenance', deadline: null } });
    expect((await admin('POST', '/backends/b2/undrain', { token: TOKEN })).json()).toMatchObject({ id: 'b2', state: 'up', admin: null });
    expect((await admin('POST', '/backends/b1/activate', { token: TOKEN, headers: { authorization: `Basic ${Buffer.from(`any:${TOKEN}`).toString('base64')}` } })).json()).toMatchObject({ admin: null });
    expect(view.commands.map((c) => [c.id, c.state?.state ?? null])).toEqual([
      ['b1', 'draining'],
      ['b1', 'draining'],
      ['b1', 'draining'],
      ['b2', 'maintenance'],
      ['b2', null],
      ['b1', null],
    ]);
  });

  it('a store that cannot take the state: 503 store_unavailable naming the placement store', async () => {
    view.storeDown = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    try {
      const r = await admin('POST', '/backends/b1/maintenance', { token: TOKEN });
      expect(r.statusCode).toBe(503);
      expect(r.json()).toEqual({ error: { code: 'store_unavailable', message: 'placement store unavailable: connect ECONNREFUSED 127.0.0.1:6379' } });
    } finally {
      view.storeDown = null;
    }
  });
});

describe('admin app: the status page', () => {
  it('"/" leads to it; it shows backend URLs (internal); read-only', async () => {
    const root = await admin('GET', '/');
    expect(root.statusCode).toBe(302);
    expect(root.headers.location).toBe('/_roomgate/');
    const page = await admin('GET', '/_roomgate/');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toMatch(/default-src 'none'/);
    expect(page.body).toContain('http://10.0.0.1:8000');
    const head = await admin('HEAD', '/_roomgate');
    expect(head.statusCode).toBe(200);
    expect(head.body).toBe('');
    expect(Number(head.headers['content-length'])).toBeGreaterThan(1000);
    for (const url of ['/_roomgate/', '/_roomgate/status/stream', '/']) {
      const post = await admin('POST', url);
      expect(post.statusCode, url).toBe(405);
      expect(post.headers.allow).toBe('GET, HEAD');
      expect(post.body).toBe('read-only: GET or HEAD\n');
    }
  });
});
