// The admin API and the admin CLI against a real gateway and 3 demo backends (in the test's
// process, test/support/here.ts, as are the CLI runs, test/cli/in-process.ts): the read
// routes (/backends, /status, /rooms/R, /events), the bearer token on writes, drain / undrain /
// maintenance with their effect on real sockets, request validation, and `roomgate drain|undrain|
// status` talking to the running gateway. The demo backends are the witness of where a socket is.
import http from 'node:http';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildRing } from '../../src/placement/ring.js';
import { runCliHere } from '../cli/in-process.js';
import { startBackendsHere, startGatewayHere, stopAllHere, type BackendHere, type GatewayHere } from '../support/here.js';
import { Client, backendRooms, httpRequest, stopAll, waitFor, withTimeout } from '../support/processes.js';

afterAll(async () => {
  await stopAll();
  await stopAllHere();
});

const TOKEN = 'admin-token-for-tests-0123456789';
const WRONG = 'admin-token-for-tests-012345678X';
/** In gw's admin.allowedHosts. */
const ALLOWED_NAME = 'roomgate-admin.internal';
/** readOnly's room.pattern (gw has the default, ^[A-Za-z0-9_.:-]{1,128}$). */
const NARROW_PATTERN = '^game-[0-9]{1,6}$';

// --- helpers -------------------------------------------------------------------------------

interface Answer {
  status: number;
  json: Record<string, unknown>;
  text: string;
}

/** One admin API call; the whole exchange is bounded by 5 s. */
async function admin(gw: GatewayHere, method: string, path: string, o: { token?: string; body?: string; auth?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.auth !== undefined) headers.authorization = o.auth;
  else if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { method, headers, body: o.body, signal: AbortSignal.timeout(5_000) });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // /metrics and plain-text answers
  }
  return { status: res.status, json, text };
}

interface BackendJson {
  id: string;
  url: string;
  weight: number;
  state: string;
  health: string;
  admin: { state: string; deadline: string | null; since: string } | null;
  rooms: number;
  sockets: number;
  healthHistory: { at: number; ok: boolean; ms: number; error?: string }[];
}

async function backendsOf(gw: GatewayHere): Promise<Map<string, BackendJson>> {
  const r = await admin(gw, 'GET', '/backends');
  expect(r.status).toBe(200);
  return new Map((r.json.backends as BackendJson[]).map((b) => [b.id, b]));
}

interface RoomJson {
  room: string;
  placement: { backend: string; epoch: number } | null;
  backend: string | null;
  reason: string;
  wouldPlace: boolean;
  socketsHere: number;
}

async function roomOf(gw: GatewayHere, room: string): Promise<RoomJson> {
  const r = await admin(gw, 'GET', `/rooms/${encodeURIComponent(room)}`);
  expect(r.status).toBe(200);
  return r.json as unknown as RoomJson;
}

/**
 * Where each new room goes with the gateway's ring (the same ring `roomgate where` builds, built
 * here in process to save two process starts): its owner, and the first backend after it that is
 * not `skip` (where it goes while `skip` takes no new rooms).
 */
function ringPlaces(rooms: readonly string[], backends: readonly BackendHere[], skip: string): { owners: Map<string, string>; without: Map<string, string> } {
  const ring = buildRing(backends.map((b) => ({ id: b.id, weight: 1 })));
  return {
    owners: new Map(rooms.map((r) => [r, ring.first(r)!])),
    without: new Map(rooms.map((r) => [r, ring.first(r, (id) => id !== skip)!])),
  };
}

/** Runs fn over items with at most `limit` in flight; results in input order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const clients: Client[] = [];
/** Opens a socket of `room` through the gateway and mounts it; resolves with the serving backend. */
async function join(gw: GatewayHere, room: string): Promise<{ client: Client; backend: string }> {
  const client = new Client(`${gw.wsUrl}/ws/live/?room=${encodeURIComponent(room)}`);
  clients.push(client);
  const backend = await withTimeout(client.join(room), 10_000, `socket of ${room}`);
  return { client, backend };
}

/**
 * Joins like djust's client: a refused handshake (503 with Retry-After) is retried after a short
 * pause until `boundMs`. Returns the refusals met on the way.
 */
async function joinRetrying(gw: GatewayHere, room: string, boundMs: number): Promise<{ client: Client; backend: string; refusals: { status: number; retryAfter: string | null }[] }> {
  const refusals: { status: number; retryAfter: string | null }[] = [];
  const end = Date.now() + boundMs;
  for (;;) {
    const client = new Client(`${gw.wsUrl}/ws/live/?room=${encodeURIComponent(room)}`);
    clients.push(client);
    try {
      const backend = await withTimeout(client.join(room), 10_000, `socket of ${room}`);
      return { client, backend, refusals };
    } catch (err) {
      if (client.refusal === null || Date.now() > end) throw new Error(`${(err as Error).message} (after ${JSON.stringify(refusals)})`);
      refusals.push(client.refusal);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/** A port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** A POST with a raw body over node:http; resolves with the answer or the client-side error. */
function rawPost(port: number, path: string, body: Buffer, token: string): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': body.length }, timeout: 5_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => resolve({ error: `response: ${err.message}` }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out after 5000 ms')));
    req.on('error', (err) => resolve({ error: `${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}` }));
    req.end(body);
  });
}

// --- setup ---------------------------------------------------------------------------------

let backends: BackendHere[];
let gw: GatewayHere;
/** Same backends, no admin.token: every write is refused. */
let readOnly: GatewayHere;
let b1Rooms: string[];
/** Where each candidate room goes when b1 takes no new rooms (the next backend on the ring). */
let withoutB1: Map<string, string>;
let owners: Map<string, string>;

/**
 * The first check's result is read (it passed): a 5 s limit, as under load the 1 s default timed
 * a connect out (red once, "ok: false").
 */
const HEALTH = { intervalMs: 5_000, timeoutMs: 5_000 };

beforeAll(async () => {
  backends = await startBackendsHere(['b1', 'b2', 'b3']);
  [gw, readOnly] = await Promise.all([startGatewayHere({ backends, config: { admin: { token: TOKEN, allowedHosts: [ALLOWED_NAME] }, health: HEALTH } }), startGatewayHere({ backends, config: { room: { pattern: NARROW_PATTERN } } })]);
  const candidates = ['adm-live', 'adm-never-seen', ...Array.from({ length: 120 }, (_, i) => `adm-${i}`)];
  ({ owners, without: withoutB1 } = ringPlaces(candidates, backends, 'b1'));
  // The CLI agrees with that ring (one spot check through `roomgate where`).
  const w = await runCliHere(['where', 'adm-live', 'adm-never-seen', ...backends.flatMap((b) => ['--backend', `${b.id}=${b.url}`])]);
  expect(w.code, w.stderr).toBe(0);
  expect(w.stdout).toContain(`adm-live\t${owners.get('adm-live')}\t`);
  expect(w.stdout).toContain(`adm-never-seen\t${owners.get('adm-never-seen')}\t`);
  b1Rooms = candidates.filter((r) => r.startsWith('adm-') && /\d$/.test(r) && owners.get(r) === 'b1');
  expect(b1Rooms.length).toBeGreaterThan(20);
});

afterAll(() => {
  for (const c of clients) c.ws.terminate();
});

// --- read routes ---------------------------------------------------------------------------

describe('admin API: read routes', () => {
  it('GET /backends lists every backend with its url, weight, state, health, rooms, sockets and health history', async () => {
    // The first active check runs at start; wait for its result.
    const list = await waitFor('a health check result for every backend', 10_000, async () => {
      const m = await backendsOf(gw);
      return [...m.values()].every((b) => b.healthHistory.length > 0) ? m : null;
    });
    expect([...list.keys()]).toEqual(['b1', 'b2', 'b3']);
    for (const b of backends) {
      const j = list.get(b.id)!;
      expect(j).toMatchObject({ id: b.id, url: b.url, weight: 1, state: 'up', health: 'up', admin: null, rooms: expect.any(Number), sockets: 0 });
      expect(j.healthHistory[0]).toMatchObject({ ok: true, at: expect.any(Number), ms: expect.any(Number) });
    }
    const all = await admin(gw, 'GET', '/backends');
    expect(all.json).toMatchObject({ sockets: 0, rooms: 0, degraded: false });

    const one = await admin(gw, 'GET', '/backends/b2');
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ id: 'b2', url: backends[1]!.url, state: 'up' });
    const none = await admin(gw, 'GET', '/backends/nope');
    expect(none.status).toBe(404);
    expect(none.json.error).toEqual({ code: 'not_found', message: expect.stringMatching(/no backend "nope"/) });
  });

  it('GET /status', async () => {
    const s = await admin(gw, 'GET', '/status');
    expect(s.status).toBe(200);
    expect(s.json).toMatchObject({ gatewayId: expect.any(String), store: 'memory', degraded: false, ready: true, sockets: 0, rooms: 0 });
    // Another gateway is another id.
    expect((await admin(readOnly, 'GET', '/status')).json.gatewayId).not.toBe(s.json.gatewayId);
  });

  it('GET /rooms/R: a live room is sticky on its backend with its placement; an unplaced room would be placed on its ring owner', async () => {
    const room = 'adm-live';
    const { backend } = await join(gw, room);
    expect(backend).toBe(owners.get(room));
    const r = await roomOf(gw, room);
    expect(r).toMatchObject({ room, backend, reason: 'sticky', wouldPlace: false, socketsHere: 1, placement: { backend, epoch: expect.any(Number) } });
    expect(r.placement!.epoch).toBeGreaterThanOrEqual(1);
    expect(await waitFor('the socket counted in /backends and /status', 5_000, async () => (await backendsOf(gw)).get(backend)!.sockets === 1)).toBe(true);
    expect((await admin(gw, 'GET', '/status')).json).toMatchObject({ sockets: 1, rooms: 1 });
    // The placed room is counted on its backend from the next heartbeat (1 s) on.
    await waitFor(`rooms of ${backend} in /backends`, 5_000, async () => (await backendsOf(gw)).get(backend)!.rooms >= 1);

    const unplaced = 'adm-never-seen';
    const u = await roomOf(gw, unplaced);
    expect(u).toMatchObject({ room: unplaced, backend: owners.get(unplaced), reason: 'ring', wouldPlace: true, placement: null, socketsHere: 0 });
    // Asking does not place it.
    expect(await roomOf(gw, unplaced)).toMatchObject({ reason: 'ring', wouldPlace: true, placement: null });
  });

  it('GET /events has a "joined" event per backend', async () => {
    const e = await admin(gw, 'GET', '/events');
    expect(e.status).toBe(200);
    const events = e.json.events as { kind: string; backend: string; detail: string; at: string }[];
    for (const b of backends) {
      expect(events.filter((x) => x.kind === 'joined' && x.backend === b.id), b.id).toEqual([expect.objectContaining({ detail: b.url, at: expect.any(String) })]);
    }
  });

  it('GET /rooms/R with a key that fails room.pattern: 400 saying the key is invalid and what the pattern is', async () => {
    const DEFAULT_PATTERN = '^[A-Za-z0-9_.:-]{1,128}$';
    const invalid = ['has space', 'a/b', '<img src=x>', 'caf\u00e9', 'x'.repeat(129), 'x'.repeat(2000), '\u0000'];
    for (const room of invalid) {
      const r = await admin(gw, 'GET', `/rooms/${encodeURIComponent(room)}`);
      expect(r.status, room).toBe(400);
      expect(r.json, room).toEqual({
        error: {
          code: 'invalid_room_key',
          message: `invalid room key: it must match room.pattern ${DEFAULT_PATTERN} and be 1 to 1024 characters`,
          pattern: DEFAULT_PATTERN,
          maxLength: 1024,
        },
      });
    }
    // The pattern is the gateway's own: a key the default accepts, refused by a narrower pattern.
    const narrow = await admin(readOnly, 'GET', '/rooms/adm-live');
    expect(narrow.status).toBe(400);
    expect(narrow.json).toMatchObject({ error: { code: 'invalid_room_key', message: expect.stringContaining(NARROW_PATTERN), pattern: NARROW_PATTERN } });
    expect(await roomOf(readOnly, 'game-42')).toMatchObject({ room: 'game-42', reason: 'ring', placement: null });
    // Nothing was placed, and valid keys still answer.
    expect(await roomOf(gw, 'x'.repeat(128))).toMatchObject({ placement: null, wouldPlace: true });
  });

  it('a malformed percent-encoding in the path is a client error (400), not a 500', async () => {
    for (const path of ['/rooms/%E0%A4%A', '/backends/%ZZ', '/backends/%/drain']) {
      const r = await admin(gw, 'GET', path);
      expect(r.status, `${path}: ${r.text}`).toBe(400);
    }
  });

  it('unknown routes and methods get 404', async () => {
    expect((await admin(gw, 'GET', '/nope')).status).toBe(404);
    expect((await admin(gw, 'DELETE', '/backends/b1')).status).toBe(404);
    expect((await admin(gw, 'POST', '/backends/b1/explode', { token: TOKEN })).status).toBe(404);
    expect((await backendsOf(gw)).get('b1')!.state).toBe('up');
  });
});

// --- Host check (DNS rebinding) ----------------------------------------------------------------

describe('admin API: Host check against DNS rebinding', () => {
  const withHost = (g: GatewayHere, path: string, host: string, o: { method?: string; auth?: string } = {}) =>
    httpRequest(g.adminPort, path, { method: o.method, headers: { host, ...(o.auth ? { authorization: o.auth } : {}) } });

  it('answers a Host that is an IP literal, localhost or in admin.allowedHosts (any port, any case)', async () => {
    const port = gw.adminPort;
    for (const host of [`127.0.0.1:${port}`, '127.0.0.1', '10.1.2.3:9090', `localhost:${port}`, 'LOCALHOST', `[::1]:${port}`, '[fe80::1]', ALLOWED_NAME, `ROOMGATE-Admin.internal:${port}`]) {
      const r = await withHost(gw, '/status', host);
      expect(r.status, host).toBe(200);
      expect(JSON.parse(r.body), host).toMatchObject({ gatewayId: expect.any(String) });
    }
  });

  it('answers any other Host with 421 naming admin.allowedHosts, on every route, the status page and writes included', async () => {
    const port = gw.adminPort;
    const hosts = ['evil.example', `evil.example:${port}`, 'localhost.evil.example', '127.0.0.1.nip.io', `${ALLOWED_NAME}.evil.example`, '2130706433', '[evil]', '127.0.0.1:port'];
    for (const host of hosts) {
      const r = await withHost(gw, '/status', host);
      expect(r.status, host).toBe(421);
      expect(r.headers['content-type'], host).toBe('application/json; charset=utf-8');
      expect(JSON.parse(r.body).error, host).toEqual({ code: 'misdirected_request', message: expect.stringMatching(/is not accepted on the admin port .*DNS rebinding.*admin\.allowedHosts/) });
    }
    for (const path of ['/metrics', '/backends', '/backends/b1', '/events', '/rooms/adm-live', '/', '/_roomgate/', '/_roomgate/status/stream', '/healthz', '/readyz', '/nope']) {
      const r = await withHost(gw, path, 'evil.example');
      expect(r.status, path).toBe(421);
      expect(r.body, path).not.toMatch(/gatewayId|roomgate_|<html/);
    }
    // A write with the right token through a rebound name does nothing.
    const w = await withHost(gw, '/backends/b1/drain', 'evil.example', { method: 'POST', auth: `Bearer ${TOKEN}` });
    expect(w.status).toBe(421);
    expect((await backendsOf(gw)).get('b1')).toMatchObject({ state: 'up', admin: null });
    // A name is accepted only where it is configured.
    expect((await withHost(readOnly, '/status', ALLOWED_NAME)).status).toBe(421);
    expect((await withHost(readOnly, '/status', `127.0.0.1:${readOnly.adminPort}`)).status).toBe(200);
  });
});

// --- writes: token, drain, undrain, maintenance --------------------------------------------

describe('admin API: writes', () => {
  // Each test starts with every backend active, whatever the previous one left behind.
  afterEach(async () => {
    for (const id of ['b1', 'b2', 'b3']) await admin(gw, 'POST', `/backends/${id}/undrain`, { token: TOKEN });
  });

  it('refuses writes without the right bearer token (401), and all writes without admin.token (403)', async () => {
    for (const o of [{}, { token: WRONG }, { token: '' }, { auth: TOKEN }, { auth: `Basic ${TOKEN}` }, { token: `${TOKEN}x` }]) {
      const r = await admin(gw, 'POST', '/backends/b1/drain', { ...o, body: '{}' });
      expect(r.status, JSON.stringify(o)).toBe(401);
      expect(r.json.error).toEqual({ code: 'unauthorized', message: expect.stringMatching(/bearer token/) });
    }
    // Refused before anything else: an unknown backend with a wrong token is still 401.
    expect((await admin(gw, 'POST', '/backends/nope/drain', { token: WRONG })).status).toBe(401);
    expect((await backendsOf(gw)).get('b1')).toMatchObject({ state: 'up', admin: null });

    const r = await admin(readOnly, 'POST', '/backends/b1/drain', { token: TOKEN, body: '{}' });
    expect(r.status).toBe(403);
    expect(r.json.error).toEqual({ code: 'forbidden', message: expect.stringMatching(/admin\.token/) });
    expect((await backendsOf(readOnly)).get('b1')).toMatchObject({ state: 'up', admin: null });
  });

  it('validates requests: unknown backend 404, bad deadlineMs 400, bad JSON 400, oversized body 413', async () => {
    const unknown = await admin(gw, 'POST', '/backends/nope/drain', { token: TOKEN, body: '{}' });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toEqual({ code: 'not_found', message: expect.stringMatching(/no backend "nope"/) });
    for (const body of ['{"deadlineMs":-1}', '{"deadlineMs":"10m"}', '{"deadlineMs":true}', '{"deadlineMs":1e999}', '[1]', 'not json', '"x"', 'null']) {
      const r = await admin(gw, 'POST', '/backends/b1/drain', { token: TOKEN, body });
      expect(r.status, body).toBe(400);
      expect(r.json.error, body).toEqual({ code: 'bad_request', message: expect.stringMatching(/deadlineMs|JSON object/) });
    }
    expect((await backendsOf(gw)).get('b1')).toMatchObject({ state: 'up', admin: null });
  });

  it('answers an oversized body with 413', async () => {
    const big = Buffer.from(JSON.stringify({ deadlineMs: 1000, pad: 'x'.repeat(64 * 1024) }));
    const r = await rawPost(gw.adminPort, '/backends/b1/drain', big, TOKEN);
    expect(r).toMatchObject({ status: 413 });
    expect('body' in r ? r.body : '').toMatch(/body over 4096 bytes/);
    expect((await backendsOf(gw)).get('b1')).toMatchObject({ state: 'up', admin: null });
    // The admin listener still answers afterwards.
    expect((await admin(gw, 'GET', '/status')).status).toBe(200);
  });

  it('drain: b1 gets no new rooms, its rooms keep their new sockets there; undrain makes it active again', async () => {
    const [kept, ...rest] = b1Rooms;
    const keep = await join(gw, kept!);
    expect(keep.backend).toBe('b1');
    const b1Before = Object.keys((await backendRooms(backends)).get('b1')!).sort();
    expect(b1Before).toContain(kept);

    const before = Date.now();
    const d = await admin(gw, 'POST', '/backends/b1/drain', { token: TOKEN, body: JSON.stringify({ deadlineMs: 120_000 }) });
    expect(d.status).toBe(200);
    expect(d.json).toMatchObject({ id: 'b1', state: 'draining', admin: { state: 'draining', deadline: expect.any(String), since: expect.any(String) } });
    const deadline = Date.parse((d.json.admin as { deadline: string }).deadline);
    expect(deadline).toBeGreaterThanOrEqual(before + 120_000 - 1_000);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 120_000 + 1_000);
    expect((await backendsOf(gw)).get('b1')).toMatchObject({ state: 'draining', admin: { state: 'draining' } });

    // 30 fresh rooms, at least 8 of them b1's on the ring: none lands on b1; b1's go to the next one.
    const fresh = [...rest.slice(0, 10), ...[...owners.keys()].filter((r) => owners.get(r) !== 'b1').slice(0, 20)];
    expect(fresh).toHaveLength(30);
    for (const room of fresh) {
      const { backend } = await join(gw, room);
      expect(backend, room).not.toBe('b1');
      expect(backend, room).toBe(withoutB1.get(room));
    }
    // The kept room's new sockets still go to b1, its placement unchanged.
    const placement = (await roomOf(gw, kept!)).placement;
    for (let i = 0; i < 3; i++) expect((await join(gw, kept!)).backend).toBe('b1');
    expect(await roomOf(gw, kept!)).toMatchObject({ backend: 'b1', reason: 'sticky', placement, socketsHere: 4 });
    // The witness: b1 holds the rooms it had before the drain, and no other.
    expect(Object.keys((await backendRooms(backends)).get('b1')!).sort()).toEqual(b1Before);
    expect(keep.client.closeCode).toBeNull();

    const events = (await admin(gw, 'GET', '/events')).json.events as { kind: string; backend: string; detail: string }[];
    expect(events.at(-1)).toMatchObject({ kind: 'draining', backend: 'b1', detail: expect.stringMatching(/^deadline /) });

    const u = await admin(gw, 'POST', '/backends/b1/undrain', { token: TOKEN });
    expect(u.status).toBe(200);
    expect(u.json).toMatchObject({ id: 'b1', state: 'up', admin: null });
    const after = (await admin(gw, 'GET', '/events')).json.events as { kind: string; backend: string }[];
    expect(after.at(-1)).toMatchObject({ kind: 'active', backend: 'b1' });
    // Active again: new rooms of b1 land there.
    for (const room of rest.slice(10, 13)) expect((await join(gw, room)).backend, room).toBe('b1');
  });

  it('maintenance: the old sockets of a room of b1 are closed at once, and the room moves (forced) on its next socket', async () => {
    const room = b1Rooms[14]!;
    const old = await join(gw, room);
    expect(old.backend).toBe('b1');
    const before = (await roomOf(gw, room)).placement!;

    const since = Date.now();
    const m = await admin(gw, 'POST', '/backends/b1/maintenance', { token: TOKEN });
    expect(m.status).toBe(200);
    expect(m.json).toMatchObject({ id: 'b1', state: 'maintenance', admin: { state: 'maintenance', deadline: null } });
    // Closed by the maintenance itself, not by the next heartbeat or the move: its client reconnects.
    await withTimeout(old.client.closed, 5_000, 'the old socket of the room on b1 to close');

    // The move waits while the placement is younger than placement.gatewayTtlMs (another gateway
    // might hold sockets of it not reported yet): 503 with Retry-After meanwhile, as djust retries.
    const moved = await joinRetrying(gw, room, 10_000);
    expect(moved.backend).toBe(withoutB1.get(room));
    expect(moved.refusals.filter((r) => !(r.status === 503 && r.retryAfter !== null)), 'refusals that were not 503 with Retry-After').toEqual([]);
    const now = await roomOf(gw, room);
    expect(now).toMatchObject({ backend: moved.backend, reason: 'sticky', socketsHere: 1 });
    expect(now.placement!.backend).toBe(moved.backend);
    expect(now.placement!.epoch).toBeGreaterThan(before.epoch);
    await waitFor('b1 no longer holds the room', 5_000, async () => (await backendRooms(backends)).get('b1')![room] === undefined);
    const events = (await admin(gw, 'GET', '/events')).json.events as { at: string; kind: string; backend: string; roomsMoved: number; liveRoomsMoved: number }[];
    // A heartbeat that finds b1's other sockets logs a second maintenance event ("closed N
    // sockets"), and later moves count there: on a busy machine it can fall after this move.
    const maint = events.filter((e) => e.kind === 'maintenance' && e.backend === 'b1' && Date.parse(e.at) >= since);
    expect(maint.reduce((n, e) => n + e.liveRoomsMoved, 0)).toBeGreaterThanOrEqual(1);
    // No new room goes to b1 either.
    for (const r of b1Rooms.slice(15, 18)) expect((await join(gw, r)).backend, r).toBe(withoutB1.get(r));
  });

  it('maintenance: the sockets of b1 whose rooms get no new request are closed too ("no traffic at all")', async () => {
    // Sockets of b1 (the drain test's room among them) whose rooms nobody asks for again.
    const idle = await join(gw, b1Rooms[21]!);
    expect(idle.backend).toBe('b1');
    const m = await admin(gw, 'POST', '/backends/b1/maintenance', { token: TOKEN });
    expect(m.json).toMatchObject({ state: 'maintenance' });
    // Three heartbeats (placement.heartbeatMs is 1 s) are plenty; the drain deadline path closes
    // its sockets on the first one.
    await withTimeout(idle.client.closed, 3_000, 'the socket of an idle room on b1 (in maintenance) to close').catch(async (err: Error) => {
      const b1 = (await backendsOf(gw)).get('b1')!;
      const witness = (await backendRooms(backends)).get('b1');
      throw new Error(`${err.message}: b1 is "${b1.state}" and still carries ${b1.sockets} sockets through the gateway; b1 holds rooms ${JSON.stringify(witness)}`);
    });
    await waitFor('b1 to carry no socket', 3_000, async () => (await backendsOf(gw)).get('b1')!.sockets === 0);
  });

  it('after maintenance, undrain brings b1 back for new rooms', async () => {
    const m = await admin(gw, 'POST', '/backends/b1/maintenance', { token: TOKEN });
    expect(m.json).toMatchObject({ state: 'maintenance' });
    const u = await admin(gw, 'POST', '/backends/b1/undrain', { token: TOKEN });
    expect(u.json).toMatchObject({ state: 'up', admin: null });
    expect((await join(gw, b1Rooms[20]!)).backend).toBe('b1');
  });
});

// --- the CLI -------------------------------------------------------------------------------

describe('roomgate drain / undrain / status', () => {
  const url = (): string => `http://127.0.0.1:${gw.adminPort}`;

  it('drain --deadline 90s prints the backend as draining; undrain prints it active; status lists the backends', async () => {
    const t0 = Date.now();
    const d = await runCliHere(['drain', 'b2', '--deadline', '90s', '--admin', url(), '--token', TOKEN, '--json']);
    expect(d.code, d.stderr).toBe(0);
    const dj = JSON.parse(d.stdout) as BackendJson;
    expect(dj).toMatchObject({ id: 'b2', state: 'draining', admin: { state: 'draining' } });
    const deadline = Date.parse(dj.admin!.deadline!);
    expect(deadline).toBeGreaterThanOrEqual(t0 + 90_000 - 1_000);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 90_000 + 1_000);
    expect((await backendsOf(gw)).get('b2')!.state).toBe('draining');

    const s = await runCliHere(['status', '--admin', `${url()}/`, '--json']);
    expect(s.code, s.stderr).toBe(0);
    const sj = JSON.parse(s.stdout) as { backends: BackendJson[] };
    expect(sj.backends.map((b) => [b.id, b.state])).toEqual([
      ['b1', 'up'],
      ['b2', 'draining'],
      ['b3', 'up'],
    ]);

    // The token from the environment works as well as --token.
    const u = await runCliHere(['undrain', 'b2', '--admin', url(), '--json'], { ROOMGATE_ADMIN_TOKEN: TOKEN });
    expect(u.code, u.stderr).toBe(0);
    expect(JSON.parse(u.stdout)).toMatchObject({ id: 'b2', state: 'up', admin: null });
    expect((await backendsOf(gw)).get('b2')).toMatchObject({ state: 'up', admin: null });
  });

  it('a wrong token exits 2 with the status in stderr; a gateway without admin.token: exit 2 with 403; no gateway at --admin: exit 1; a bad --deadline: exit 2', async () => {
    const port = await deadPort();
    const badDeadlines = ['soon'];
    // Independent runs (runCliHere runs them one at a time).
    const [w, ro, n, ...bad] = await mapLimit(
      [
        ['drain', 'b2', '--admin', url(), '--token', WRONG],
        ['maintenance', 'b2', '--admin', `http://127.0.0.1:${readOnly.adminPort}`, '--token', TOKEN],
        ['drain', 'b1', '--admin', `http://127.0.0.1:${port}`, '--token', TOKEN],
        ...badDeadlines.map((d) => ['drain', 'b1', `--deadline=${d}`, '--admin', url(), '--token', TOKEN]),
      ],
      2,
      (args) => runCliHere(args),
    );
    expect(w!.code, w!.stderr).toBe(2);
    expect(w!.stderr).toMatch(/401/);
    expect(w!.stdout).toBe('');

    expect(ro!.code, ro!.stderr).toBe(2);
    expect(ro!.stderr).toMatch(/403/);
    expect(ro!.stderr).toMatch(/admin\.token/);

    expect(n!.code, n!.stderr).toBe(1);
    expect(n!.stderr).toMatch(/cannot reach the admin API/);
    expect(n!.stderr).toContain(`127.0.0.1:${port}`);

    for (const [i, b] of bad.entries()) {
      expect(b.code, `${badDeadlines[i]}: ${b.stderr}`).toBe(2);
      expect(b.stderr, badDeadlines[i]).toMatch(/bad duration/);
    }
    // Nothing of it changed a backend.
    for (const g of [gw, readOnly]) {
      for (const b of (await backendsOf(g)).values()) expect(b, b.id).toMatchObject({ state: 'up', admin: null });
    }
  });
});
