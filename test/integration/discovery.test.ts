// Backend-list changes at run time, against real processes: SIGHUP reload of the config file's
// static list, and DNS discovery (A and SRV records from a real UDP DNS server on 127.0.0.1,
// test/support/dns-server.ts). The gateways are processes (SIGHUP, exit codes); the demo backends,
// never signalled, run in this process (test/support/backends-here.ts). They are the witness: /_backend/rooms says where a
// room really is, and every client checks which backend mounted it.
//
// The documented behaviour under test (src/backends/pool.ts, src/placement/decide.ts,
// src/gateway.ts reload()):
//   - a new backend joins the ring and takes new rooms only; live rooms stay where they are;
//   - a removed backend leaves the ring and is "gone": nothing is closed by the change itself,
//     but the next socket of one of its rooms forces a move, and the room's old sockets are then
//     closed (its clients reconnect to the new owner); it is forgotten once no socket uses it;
//   - SIGHUP re-reads the same --config file; a bad file is refused (the running config stays);
//     keys other than `backends` are logged under needsRestart and not applied;
//   - DNS discovery: a failed poll keeps the last list; a name that does not exist stops `start`.
import { createServer, type Server } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { buildRing } from '../../src/placement/ring.js';
import { TestDnsServer } from '../support/dns-server.js';
import { freePortRange } from '../support/ports.js';
import { startBackendHere, startBackendsHere, stopBackendsHere, type BackendHere } from '../support/backends-here.js';
import { Client, backendRooms, startGateway, stop, stopAll, waitFor, type GatewayProc, pingPong } from '../support/processes.js';

// --- shared state and teardown ---------------------------------------------------------------

let dns: TestDnsServer;
/** Gateways that (because of the demo-backend bug below) may have demo backends as children. */
const dnsGateways: GatewayProc[] = [];
const heldServers: Server[] = [];

beforeAll(async () => {
  dns = await TestDnsServer.start();
});

afterAll(async () => {
  // SIGTERM first: a gateway stops its own demo backends only on a graceful stop; stopAll's
  // SIGKILL would orphan them.
  await Promise.all(dnsGateways.map((g) => stop(g, 'SIGTERM', 5_000)));
  await stopAll();
  await stopBackendsHere();
  for (const s of heldServers) s.close();
  await dns?.close();
});

// --- helpers ---------------------------------------------------------------------------------

interface BackendJson {
  id: string;
  url: string;
  state: string;
  removed: boolean;
  sockets: number;
}

interface EventJson {
  kind: string;
  backend: string;
  detail: string;
  roomsMoved: number;
  liveRoomsMoved: number;
}

async function admin<T>(gw: GatewayProc, path: string): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { signal: AbortSignal.timeout(5_000) });
  expect(res.status, `GET ${path}`).toBe(200);
  return (await res.json()) as T;
}

const backendsOf = async (gw: GatewayProc): Promise<BackendJson[]> => (await admin<{ backends: BackendJson[] }>(gw, '/backends')).backends;
const eventsOf = async (gw: GatewayProc): Promise<EventJson[]> => (await admin<{ events: EventJson[] }>(gw, '/events')).events;

/** Ids of the backends the gateway routes to (listed and not removed), sorted. */
async function activeIds(gw: GatewayProc): Promise<string[]> {
  return (await backendsOf(gw))
    .filter((b) => !b.removed)
    .map((b) => b.id)
    .sort();
}

/** A socket of `room` (query key), joined: resolves with the client and the backend that mounted it. */
async function join(gw: GatewayProc, room: string): Promise<{ client: Client; backend: string }> {
  const client = new Client(`${gw.wsUrl}/ws/live/?room=${encodeURIComponent(room)}`);
  const backend = await client.join(room);
  return { client, backend };
}

async function joinAll(gw: GatewayProc, rooms: readonly string[]): Promise<Map<string, { client: Client; backend: string }>> {
  const out = await Promise.all(rooms.map(async (r) => [r, await join(gw, r)] as const));
  return new Map(out);
}

/** Which backend holds each room, according to the backends themselves (a room on two = split). */
async function witness(backends: readonly BackendHere[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const [id, rooms] of await backendRooms(backends)) {
    for (const room of Object.keys(rooms)) {
      expect(out.has(room), `room ${room} is on ${out.get(room)} and ${id}`).toBe(false);
      out.set(room, id);
    }
  }
  return out;
}

/**
 * The witness restricted to some rooms. Rooms a test has just closed may linger for a moment on
 * their backend (the backend sees the close after the client does), so comparisons of "where are
 * the live rooms" look only at those.
 */
function only(seen: Map<string, string>, rooms: readonly string[]): Map<string, string> {
  return new Map(rooms.filter((r) => seen.has(r)).map((r) => [r, seen.get(r) as string]));
}

/**
 * Ring owner of each new room over these backend ids (weight 1), the rule the gateway uses with
 * bounded loads off (the harness default); the same ring `roomgate where` prints.
 */
function owners(rooms: readonly string[], ids: readonly string[]): Map<string, string> {
  const ring = buildRing(ids.map((id) => ({ id, weight: 1 })));
  return new Map(rooms.map((r) => [r, ring.first(r) as string]));
}

/** The --config file the harness wrote for this gateway. */
function configPath(gw: GatewayProc): string {
  const args = gw.child.spawnargs;
  const i = args.indexOf('--config');
  expect(i, 'gateway started with --config').toBeGreaterThan(0);
  return args[i + 1] as string;
}

function readConfig(gw: GatewayProc): Record<string, unknown> {
  return parseYaml(readFileSync(configPath(gw), 'utf8')) as Record<string, unknown>;
}

/** Log lines with this msg. */
const logsWith = (gw: GatewayProc, msg: string): Record<string, unknown>[] => gw.logs().filter((l) => l.msg === msg);

/** Rewrites the config file (or writes raw text), sends SIGHUP and waits for the reload's log line. */
async function reloadWith(gw: GatewayProc, content: Record<string, unknown> | string, expectMsg: string): Promise<Record<string, unknown>> {
  const before = logsWith(gw, expectMsg).length;
  writeFileSync(configPath(gw), typeof content === 'string' ? content : stringifyYaml(content));
  gw.child.kill('SIGHUP');
  return waitFor(`log "${expectMsg}" after SIGHUP`, 10_000, () => logsWith(gw, expectMsg)[before]);
}

/** A port held open on 127.0.0.1 until afterAll: anything else binding it gets EADDRINUSE. */
async function heldPort(): Promise<number> {
  const s = createServer();
  heldServers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as { port: number }).port;
}

/**
 * Config for a DNS-discovery gateway. WORKAROUND (see the "starts no demo backends" test): with
 * discovery and no static backends, `roomgate start` also starts demo backends; pointing them at
 * a free port keeps them from colliding with 8101-8103 (or with each other). Harmless once fixed.
 */
async function dnsConfig(dnsCfg: Record<string, unknown>): Promise<Record<string, unknown>> {
  return {
    discovery: { dns: { intervalMs: 200, servers: [dns.address], ...dnsCfg } },
    demo: { backends: 1, basePort: await freePortRange(1) },
    shutdown: { graceMs: 0 },
  };
}

async function startDnsGateway(dnsCfg: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<GatewayProc> {
  const gw = await startGateway({ config: { ...(await dnsConfig(dnsCfg)), ...extra } });
  dnsGateways.push(gw);
  return gw;
}

const range = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

// --- SIGHUP reload of the static list ----------------------------------------------------------

describe('SIGHUP reload (static list in the config file)', () => {
  let b1: BackendHere, b2: BackendHere, b3: BackendHere;
  let gw: GatewayProc;
  const liveRooms = range('hup-live', 20);
  let live: Map<string, { client: Client; backend: string }>;
  /** The last valid content of the config file (so one failing test does not break the next). */
  let current: Record<string, unknown>;

  beforeAll(async () => {
    [b1, b2, b3] = (await startBackendsHere(['b1', 'b2', 'b3'])) as [BackendHere, BackendHere, BackendHere];
    gw = await startGateway({
      config: { backends: [{ id: 'b1', url: b1.url }, { id: 'b2', url: b2.url }] },
    });
    live = await joinAll(gw, liveRooms);
    current = readConfig(gw);
  });

  it('adding b3 to the file: b3 joins, no socket is closed, live rooms stay, new rooms reach b3', async () => {
    expect(await activeIds(gw)).toEqual(['b1', 'b2']);
    const before = only(await witness([b1, b2, b3]), liveRooms);
    expect(before.size).toBe(20);
    for (const [room, { backend }] of live) expect(before.get(room), room).toBe(backend);
    expect(new Set(before.values())).toEqual(new Set(['b1', 'b2']));

    expect(current.backends).toEqual([{ id: 'b1', url: b1.url }, { id: 'b2', url: b2.url }]);
    current = { ...current, backends: [...(current.backends as unknown[]), { id: 'b3', url: b3.url }] };
    const reloaded = await reloadWith(gw, current, 'configuration reloaded');
    expect(reloaded.applied).toEqual(['backends']);
    expect(reloaded.needsRestart).toEqual([]);
    await waitFor('b3 in /backends', 5_000, async () => (await activeIds(gw)).includes('b3'));
    expect(await activeIds(gw)).toEqual(['b1', 'b2', 'b3']);
    const b3Json = (await backendsOf(gw)).find((b) => b.id === 'b3');
    expect(b3Json).toMatchObject({ url: b3.url, state: 'up', removed: false, sockets: 0 });

    // Nothing was closed, every socket still answers, every room is where it was.
    for (const [room, { client }] of live) expect(client.closeCode, room).toBeNull();
    await Promise.all([...live.values()].map(({ client }) => pingPong(client)));
    expect(only(await witness([b1, b2, b3]), liveRooms)).toEqual(before);

    // Sticky: live rooms whose ring owner is now b3 still get their next socket on the old backend.
    const ringOwners = owners(liveRooms, ['b1', 'b2', 'b3']);
    const wouldMove = liveRooms.filter((r) => ringOwners.get(r) === 'b3');
    expect(wouldMove.length, 'some live rooms have b3 as their new ring owner').toBeGreaterThan(0);
    const second = await joinAll(gw, wouldMove);
    for (const [room, { backend, client }] of second) {
      expect(backend, `second socket of live room ${room}`).toBe(live.get(room)?.backend);
      await client.close();
    }
    const joined = (await eventsOf(gw)).find((e) => e.kind === 'joined' && e.backend === 'b3');
    expect(joined, 'a "joined b3" event').toBeDefined();
    expect(joined?.liveRoomsMoved).toBe(0);

    // New rooms: placed by the ring over b1, b2, b3; some of 60 land on b3.
    const fresh = range('hup-fresh', 60);
    const placed = await joinAll(gw, fresh);
    const expected = owners(fresh, ['b1', 'b2', 'b3']);
    const onB3 = fresh.filter((r) => placed.get(r)?.backend === 'b3');
    expect(onB3.length).toBeGreaterThan(0);
    for (const r of fresh) expect(placed.get(r)?.backend, r).toBe(expected.get(r));
    await Promise.all([...placed.values()].map(({ client }) => client.close()));
    for (const [room, { client }] of live) expect(client.closeCode, room).toBeNull();
  });

  it('removing b2: its sockets stay up, it shows removed; its rooms move on their next socket; new rooms avoid it', async () => {
    const onB2 = liveRooms.filter((r) => live.get(r)?.backend === 'b2');
    expect(onB2.length, 'some live rooms are on b2').toBeGreaterThan(1);
    const before = only(await witness([b1, b2, b3]), liveRooms);

    current = { ...current, backends: [{ id: 'b1', url: b1.url }, { id: 'b3', url: b3.url }] };
    const reloaded = await reloadWith(gw, current, 'configuration reloaded');
    expect(reloaded.applied).toEqual(['backends']);
    await waitFor('b2 removed in /backends', 5_000, async () => (await backendsOf(gw)).find((b) => b.id === 'b2')?.removed === true);
    expect(await activeIds(gw)).toEqual(['b1', 'b3']);
    // Still listed while its sockets live, as removed and down, with its sockets counted.
    expect((await backendsOf(gw)).find((b) => b.id === 'b2')).toMatchObject({ removed: true, state: 'down', sockets: onB2.length });
    expect((await eventsOf(gw)).some((e) => e.kind === 'removed' && e.backend === 'b2')).toBe(true);

    // The reload itself closed nothing: b2's sockets (and everyone else's) still answer.
    for (const [room, { client }] of live) expect(client.closeCode, room).toBeNull();
    await Promise.all([...live.values()].map(({ client }) => pingPong(client)));
    expect(only(await witness([b1, b2, b3]), liveRooms)).toEqual(before);

    // A new socket of one of b2's rooms forces the move: it goes to the ring owner over b1, b3 ...
    const [moved] = onB2 as [string, ...string[]];
    const owner = owners([moved], ['b1', 'b3']).get(moved);
    const newcomer = await join(gw, moved);
    expect(newcomer.backend).toBe(owner);
    // ... and the room's old socket on b2 is closed, so the room never runs in two processes.
    const old = live.get(moved)!.client;
    await waitFor(`old socket of ${moved} closed`, 5_000, () => old.closeCode !== null);
    await waitFor(`b2 no longer holds ${moved}`, 5_000, async () => (await backendRooms([b2])).get('b2')?.[moved] === undefined);
    // Its client reconnects and lands with the newcomer.
    const reconnected = await join(gw, moved);
    expect(reconnected.backend).toBe(owner);
    const after = await witness([b1, b2, b3]);
    expect(after.get(moved)).toBe(owner);
    const rooms = await backendRooms([b1, b2, b3]);
    expect(rooms.get(owner!)?.[moved]).toBe(2);
    const removedEvent = (await eventsOf(gw)).filter((e) => e.kind === 'removed' && e.backend === 'b2').pop();
    expect(removedEvent?.liveRoomsMoved).toBeGreaterThanOrEqual(1);

    // The other b2 rooms were not touched by that move.
    for (const r of onB2.slice(1)) {
      expect(live.get(r)?.client.closeCode, r).toBeNull();
      expect(after.get(r), r).toBe('b2');
    }

    // New rooms never go to b2.
    const fresh = range('hup-after-remove', 40);
    const placed = await joinAll(gw, fresh);
    for (const r of fresh) expect(['b1', 'b3'], r).toContain(placed.get(r)?.backend);
    expect(Object.keys((await backendRooms([b2])).get('b2') ?? {}).some((r) => r.startsWith('hup-after-remove'))).toBe(false);
    await Promise.all([...placed.values(), newcomer, reconnected].map(({ client }) => client.close()));

    // Once no socket uses b2 any more it is forgotten.
    await Promise.all(onB2.slice(1).map((r) => live.get(r)!.client.close()));
    await waitFor('b2 gone from /backends', 5_000, async () => !(await backendsOf(gw)).some((b) => b.id === 'b2'));
  });

  it('an invalid config file: "reload refused", the running configuration stays and keeps routing', async () => {
    const valid = current;
    const backendsBefore = await backendsOf(gw);
    const refused = await reloadWith(gw, { ...valid, backends: [{ id: 'b1', url: 'ftp://nope:1' }], room: { noRoom: 'random' } }, 'reload refused: the running configuration stays');
    expect(refused.level).toBe('error');
    expect(String(refused.err)).toMatch(/backends\.0\.url/);
    expect(String(refused.err)).toMatch(/room\.noRoom/);
    // Not YAML at all: refused too.
    const refused2 = await reloadWith(gw, 'backends: [ {id: b1\n  ::: not yaml', 'reload refused: the running configuration stays');
    expect(String(refused2.err)).toMatch(/not valid YAML/);

    expect((await backendsOf(gw)).map((b) => [b.id, b.removed])).toEqual(backendsBefore.map((b) => [b.id, b.removed]));
    const rooms = range('hup-after-bad', 10);
    const placed = await joinAll(gw, rooms);
    const expected = owners(rooms, ['b1', 'b3']);
    for (const r of rooms) expect(placed.get(r)?.backend, r).toBe(expected.get(r));
    const page = await fetch(`${gw.url}/game/hup-after-bad-0/`, { signal: AbortSignal.timeout(5_000) });
    expect(page.status).toBe(200);
    expect(page.headers.get('x-backend-id')).toBe(expected.get('hup-after-bad-0'));
    await Promise.all([...placed.values()].map(({ client }) => client.close()));
    for (const [room, { client }] of live) if (live.get(room)?.backend !== 'b2') expect(client.closeCode, room).toBeNull();

    // A valid file again: accepted, nothing to apply.
    const ok = await reloadWith(gw, valid, 'configuration reloaded');
    expect(ok).toMatchObject({ applied: [], needsRestart: [] });
  });

  it('a key that needs a restart (listen.maxHeaderBytes) is logged under needsRestart and not applied', async () => {
    const r = await reloadWith(gw, { ...current, listen: { maxHeaderBytes: 2048 } }, 'configuration reloaded');
    expect(r.applied).toEqual([]);
    expect(r.needsRestart).toEqual(['listen']);
    // Still the old limit (16 KiB): an 8 KiB head is routed, not refused with 431.
    const res = await fetch(`${gw.url}/game/hup-big-head/`, { headers: { 'X-Filler': 'x'.repeat(8_000) }, signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(200);
    expect(await activeIds(gw)).toEqual(['b1', 'b3']);
  });
});

// --- DNS discovery -------------------------------------------------------------------------------

describe('DNS discovery, A records (backends on 127.0.0.1-3, one port)', () => {
  const NAME = 'app.test';
  let d: BackendHere[] = [];
  let port = 0;
  let gw: GatewayProc;
  const ids = (...n: number[]): string[] => n.map((i) => `127.0.0.${i}:${port}`).sort();
  const id = (i: number): string => `127.0.0.${i}:${port}`;
  const liveRooms = range('dns-live', 20);
  let live: Map<string, { client: Client; backend: string }>;

  beforeAll(async () => {
    // The first backend picks the port; the others listen on the same port on other loopback addresses.
    const first = await startBackendHere('pending');
    port = first.port;
    await first.backend.close();
    d = await Promise.all([1, 2, 3].map((i) => startBackendHere(id(i), { host: `127.0.0.${i}`, port })));
    dns.setRecords({ [NAME]: { A: ['127.0.0.1', '127.0.0.2'] } });
    gw = await startDnsGateway({ name: NAME, type: 'A', port });
    live = await joinAll(gw, liveRooms);
  });
  // Stop polling before later tests replace the DNS table (gracefully: see afterAll at the top).
  afterAll(() => stop(gw, 'SIGTERM', 5_000));

  it('routes rooms to the discovered backends', async () => {
    expect(await activeIds(gw)).toEqual(ids(1, 2));
    const listed = (await backendsOf(gw)).find((b) => b.id === id(2));
    expect(listed).toMatchObject({ url: `http://${id(2)}`, state: 'up', removed: false });
    const expected = owners(liveRooms, ids(1, 2));
    const seen = await witness(d);
    for (const [room, { backend }] of live) {
      expect(backend, room).toBe(expected.get(room));
      expect(seen.get(room), room).toBe(backend);
    }
    expect(new Set(seen.values())).toEqual(new Set(ids(1, 2)));
  });

  it('a new record: the backend appears and takes only new rooms; live rooms stay', async () => {
    const before = only(await witness(d), liveRooms);
    dns.setRecords({ [NAME]: { A: ['127.0.0.1', '127.0.0.2', '127.0.0.3'] } });
    await waitFor('127.0.0.3 in /backends', 5_000, async () => (await activeIds(gw)).includes(id(3)));
    expect(await activeIds(gw)).toEqual(ids(1, 2, 3));
    expect(logsWith(gw, 'backend list changed').some((l) => (l.added as string[]).includes(id(3)))).toBe(true);

    for (const [room, { client }] of live) expect(client.closeCode, room).toBeNull();
    await Promise.all([...live.values()].map(({ client }) => pingPong(client)));
    expect(only(await witness(d), liveRooms)).toEqual(before);
    const ringOwners = owners(liveRooms, ids(1, 2, 3));
    const wouldMove = liveRooms.filter((r) => ringOwners.get(r) === id(3));
    expect(wouldMove.length).toBeGreaterThan(0);
    for (const [room, s] of await joinAll(gw, wouldMove)) {
      expect(s.backend, `second socket of live room ${room}`).toBe(live.get(room)?.backend);
      await s.client.close();
    }

    const fresh = range('dns-fresh', 60);
    const placed = await joinAll(gw, fresh);
    const expected = owners(fresh, ids(1, 2, 3));
    for (const r of fresh) expect(placed.get(r)?.backend, r).toBe(expected.get(r));
    expect(fresh.some((r) => placed.get(r)?.backend === id(3))).toBe(true);
    await Promise.all([...placed.values()].map(({ client }) => client.close()));
  });

  it('a record removed: that backend is removed (its rooms move on their next socket); other sockets untouched', async () => {
    const onD2 = liveRooms.filter((r) => live.get(r)?.backend === id(2));
    expect(onD2.length).toBeGreaterThan(0);
    dns.setRecords({ [NAME]: { A: ['127.0.0.1', '127.0.0.3'] } });
    await waitFor('127.0.0.2 removed', 5_000, async () => (await backendsOf(gw)).find((b) => b.id === id(2))?.removed === true);
    expect(await activeIds(gw)).toEqual(ids(1, 3));
    expect((await backendsOf(gw)).find((b) => b.id === id(2))).toMatchObject({ state: 'down', sockets: onD2.length });

    // Nothing closed by the change; every socket answers.
    for (const [room, { client }] of live) expect(client.closeCode, room).toBeNull();
    await Promise.all([...live.values()].map(({ client }) => pingPong(client)));

    // The next socket of a room of the removed backend moves it; its old socket is closed.
    const [moved] = onD2 as [string, ...string[]];
    const owner = owners([moved], ids(1, 3)).get(moved);
    const newcomer = await join(gw, moved);
    expect(newcomer.backend).toBe(owner);
    await waitFor(`old socket of ${moved} closed`, 5_000, () => live.get(moved)!.client.closeCode !== null);
    const d2 = d[1]!;
    await waitFor(`${id(2)} no longer holds ${moved}`, 5_000, async () => (await backendRooms([d2])).get(d2.id)?.[moved] === undefined);
    expect((await witness(d)).get(moved)).toBe(owner);
    await newcomer.client.close();

    // Live sockets on the remaining backends were never touched.
    for (const [room, { client, backend }] of live) if (backend !== id(2)) expect(client.closeCode, room).toBeNull();
    const fresh = range('dns-after-remove', 30);
    const placed = await joinAll(gw, fresh);
    for (const r of fresh) expect(ids(1, 3), r).toContain(placed.get(r)?.backend);
    await Promise.all([...placed.values()].map(({ client }) => client.close()));
  });

  it('SIGHUP in DNS mode: the discovered list stays; static backends and discovery changes need a restart', async () => {
    const listBefore = await activeIds(gw);
    const cfg = readConfig(gw);
    const same = await reloadWith(gw, cfg, 'configuration reloaded');
    expect(same).toMatchObject({ applied: [], needsRestart: [] });
    const changed = await reloadWith(
      gw,
      { ...cfg, backends: [{ id: 'static', url: 'http://127.0.0.1:1' }], discovery: { dns: { ...(cfg.discovery as { dns: object }).dns, intervalMs: 300 } } },
      'configuration reloaded',
    );
    expect(changed.applied).toEqual([]);
    expect([...(changed.needsRestart as string[])].sort()).toEqual(['backends', 'discovery']);
    expect(await activeIds(gw)).toEqual(listBefore);
    expect((await backendsOf(gw)).some((b) => b.id === 'static')).toBe(false);
    await reloadWith(gw, cfg, 'configuration reloaded');
  });

  it('the DNS server stops answering: the last list is kept and the gateway keeps routing', async () => {
    const listBefore = await activeIds(gw);
    const failuresBefore = logsWith(gw, 'DNS discovery failed; keeping the last backend list').length;
    dns.setMode('drop');
    try {
      const failed = await waitFor('a failed poll logged', 15_000, () => logsWith(gw, 'DNS discovery failed; keeping the last backend list')[failuresBefore], 50);
      expect(String(failed.err)).toMatch(/app\.test/);
      expect(String(failed.err)).toMatch(/ETIMEOUT/);
      expect(await activeIds(gw)).toEqual(listBefore);
      const rooms = range('dns-silent', 10);
      const placed = await joinAll(gw, rooms);
      const expected = owners(rooms, ids(1, 3));
      for (const r of rooms) expect(placed.get(r)?.backend, r).toBe(expected.get(r));
      await Promise.all([...placed.values()].map(({ client }) => client.close()));
      const others = [...live.values()].filter(({ backend }) => backend !== id(2));
      for (const { client } of others) expect(client.closeCode).toBeNull();
      await Promise.all(others.map(({ client }) => pingPong(client)));
    } finally {
      dns.setMode('answer');
    }
  });
});

describe('DNS discovery, SRV records', () => {
  it('ids from the target name and port; the gateway connects to the target by name', async () => {
    // Only "localhost" resolves on every machine without a resolver for custom names; distinct
    // ports keep the ids ("localhost:PORT") distinct.
    const backends = await startBackendsHere(['srv-a', 'srv-b']);
    const SRV_NAME = '_http._tcp.app.test';
    // Target names are case-insensitive and may end with a dot: both give the same id and URL.
    const targets = ['LocalHost.', 'localhost'];
    dns.setRecords({ [SRV_NAME]: { SRV: backends.map((b, i) => ({ target: targets[i]!, port: b.port, weight: 10 + i, priority: i })) } });
    const gw = await startDnsGateway({ name: SRV_NAME, type: 'SRV' });
    const want = backends.map((b) => `localhost:${b.port}`).sort();
    expect(await activeIds(gw)).toEqual(want);
    for (const b of backends) {
      expect((await backendsOf(gw)).find((x) => x.id === `localhost:${b.port}`)).toMatchObject({ url: `http://localhost:${b.port}`, state: 'up' });
    }
    const rooms = range('srv', 12);
    const placed = await joinAll(gw, rooms);
    const expected = owners(rooms, backends.map((b) => `localhost:${b.port}`));
    const byPort = new Map(backends.map((b) => [b.id, `localhost:${b.port}`]));
    const seen = await witness(backends);
    for (const r of rooms) {
      // The demo backend names itself srv-a / srv-b; the gateway's id for it is localhost:PORT.
      expect(byPort.get(placed.get(r)!.backend), r).toBe(expected.get(r));
      expect(seen.get(r), r).toBe(placed.get(r)?.backend);
    }
    expect(new Set(seen.values()).size, 'both SRV backends got rooms').toBe(2);
    await Promise.all([...placed.values()].map(({ client }) => client.close()));
    await stop(gw, 'SIGTERM', 5_000);
  });
});

describe('DNS discovery at start', () => {
  it('a name that does not exist: start fails, naming the DNS name, with a non-zero exit', async () => {
    let err: Error | undefined;
    try {
      await startDnsGateway({ name: 'nope.app.test', type: 'A', port: 8000 });
    } catch (e) {
      err = e as Error;
    }
    expect(err, 'the gateway must not start').toBeDefined();
    expect(err!.message).toMatch(/exited early \(1\)/);
    expect(err!.message).toMatch(/DNS discovery of A nope\.app\.test failed: ENOTFOUND \(the name does not exist\)/);
  });

  // BUG: src/main.ts start() runs the demo backends whenever config.backends is empty, even when
  // discovery.dns supplies the backends; they join the pool until the first DNS answer replaces
  // them, and when their ports are taken the gateway does not start at all.
  it('with discovery and no static backends, start runs no demo backends', async () => {
    const b = await startBackendHere('only');
    dns.setRecords({ 'demo-check.app.test': { A: ['127.0.0.1'] } });
    const taken = await heldPort();
    const gw = await startGateway({
      config: {
        discovery: { dns: { name: 'demo-check.app.test', type: 'A', port: b.port, intervalMs: 200, servers: [dns.address] } },
        // Where demo backends would go: held by this test, so starting one fails.
        demo: { backends: 1, basePort: taken },
        shutdown: { graceMs: 0 },
      },
    }).then(
      (g) => {
        dnsGateways.push(g);
        return g;
      },
      (e: Error) => e,
    );
    expect(gw instanceof Error ? gw.message : '', 'the gateway starts').toBe('');
    const g = gw as GatewayProc;
    expect(logsWith(g, 'demo backend started')).toEqual([]);
    expect((await eventsOf(g)).filter((e) => e.backend.startsWith('demo-'))).toEqual([]);
    expect((await backendsOf(g)).map((x) => x.id)).toEqual([`127.0.0.1:${b.port}`]);
  });
});
