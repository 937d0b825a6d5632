// `roomgate start --workers 2`: N processes on one port (Node's cluster module) that still send every
// socket and page of a room to one backend.
//
// Real processes: the gateway's primary and its two workers (and the demo mode's demo backends),
// redis-server for the Redis part. The backends the tests never signal are demo backends in this
// process (test/support/backends-here.ts): a process each would cost its module loading. Clients are djust-like reconnecting room clients; each connection is a new TCP
// connection, which the cluster hands to the workers in turn, so nearly every room has sockets
// through both workers. The witness is the backends' own /_backend/rooms, sampled about every
// 100 ms by the split checker for the whole file. Which worker holds what is asked of each worker
// through the primary's admin port (X-Roomgate-Worker: N).
//
// Without Redis the placements live in the primary (IPC): a room placed off its ring owner (its
// owner in maintenance) must stay there through both workers, after the owner is back, and through
// a worker started again after kill -9; with per-worker stores those rooms would split. Then:
// SIGHUP reaches every worker, SIGTERM stops everything, with Redis every worker is a gateway of
// its own, a dead primary takes its workers along, demo mode starts the demo backends once, and
// --workers is validated.
import { runCliHere } from '../cli/in-process.js';
import { readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { startBackendHere, startBackendsHere, stopBackendsHere, type BackendHere } from '../support/backends-here.js';
import { Client, backendRooms, httpRequest, metricValue, runCli, startGateway, stop, stopAllWith, waitFor, withTimeout, type GatewayProc } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';
import { freePortRange } from '../support/ports.js';
import { RoomFleet, SplitWatcher, adminPost, holders, logsFrom, sampleRooms, stopAllRoomClients, type GatewayTarget, type WitnessBackend } from '../support/room-clients.js';

const TOKEN = 'workers-test-admin-token-0123456789';
/** The primary's "listening" line (the workers log one each too, before it). */
const PRIMARY_LISTENING = (l: string): boolean => l.includes('"msg":"listening"') && l.includes('"role":"primary"');

/** Every worker, demo backend and primary pid seen: afterAll makes sure none is left. */
const seenPids = new Set<number>();
const primaries = new Set<number>();
const watchers: SplitWatcher[] = [];
const fleets: RoomFleet[] = [];

interface WorkersJson {
  primaryPid: number;
  balance: 'kernel' | 'primary';
  store: string;
  workers: { worker: number; state: string; pid: number | null; gatewayId: string | null; restarts: number }[];
}

function baseConfig(extra: Record<string, unknown>): Record<string, unknown> {
  return {
    admin: { token: TOKEN, allowedHosts: ['roomgate-admin'] },
    health: { intervalMs: 500, timeoutMs: 400 },
    placement: { boundedLoadFactor: 1.25, heartbeatMs: 200, gatewayTtlMs: 1000, cacheTtlMs: 1000 },
    presence: { ttlMs: 1000 },
    shutdown: { graceMs: 1000 },
    // Every room listed, so the public per-room read can count a room's sockets.
    api: { listRooms: ['*'] },
    ...extra,
  };
}

async function startCluster(config: Record<string, unknown>, workers = '2', extraArgs: string[] = []): Promise<GatewayProc> {
  // The primary, its workers (and demo backends) start before it listens: 30 s was once not enough at load 20.
  const gw = await startGateway({ config, args: ['--workers', workers, ...extraArgs], readyLine: PRIMARY_LISTENING, readyTimeoutMs: 90_000 });
  if (gw.child.pid) primaries.add(gw.child.pid);
  const line = JSON.parse(gw.lines.find(PRIMARY_LISTENING)!) as { workerPids: number[] };
  for (const p of line.workerPids) seenPids.add(p);
  return gw;
}

/** GET on the primary's admin port, answered by worker `worker` (or the primary's choice). */
async function admin<T = Record<string, unknown>>(gw: GatewayProc, path: string, worker?: number): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
    headers: worker === undefined ? {} : { 'x-roomgate-worker': String(worker) },
    signal: AbortSignal.timeout(5_000),
  });
  const body = (await res.json()) as T;
  if (!res.ok) throw new Error(`GET ${path} (worker ${worker}): ${res.status} ${JSON.stringify(body)}`);
  if (worker !== undefined) expect(res.headers.get('x-roomgate-worker')).toBe(String(worker));
  return body;
}

async function workersOf(gw: GatewayProc): Promise<WorkersJson> {
  const w = await admin<WorkersJson>(gw, '/workers');
  for (const x of w.workers) if (x.pid) seenPids.add(x.pid);
  return w;
}

async function readyWorkers(gw: GatewayProc, n = 2): Promise<WorkersJson['workers']> {
  return (await waitFor(`${n} workers ready`, 15_000, async () => {
    const w = await workersOf(gw);
    return w.workers.length === n && w.workers.every((x) => x.state === 'ready') ? w : null;
  })).workers;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Alive and still a roomgate or demo-backend process (not a reused pid). */
function isOurs(pid: number): boolean {
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmd.includes('dist/src/main.js') || cmd.includes('demo-backend/server.js');
  } catch {
    return false;
  }
}

/** Processes whose parent is `pid` (workers, demo backends of a primary). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((p) => {
      try {
        return parentOf(p) === pid;
      } catch {
        return false; // gone meanwhile
      }
    });
}

function parentOf(pid: number): number {
  // /proc/PID/stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after ")".
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/**
 * The processes holding a listening TCP socket on `port`: the socket inodes of /proc/net/tcp(6)
 * in LISTEN state, matched against each process's open file descriptors.
 */
function listenersOf(port: number, pids: readonly number[]): number[] {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; state 0A is LISTEN; the inode is the tenth field.
      if (f.length > 9 && f[3] === '0A' && parseInt(f[1]!.split(':')[1]!, 16) === port) inodes.add(f[9]!);
    }
  }
  return pids.filter((pid) => {
    try {
      return readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
          return m !== null && inodes.has(m[1]!);
        } catch {
          return false; // closed meanwhile
        }
      });
    } catch {
      return false;
    }
  });
}

function witnessHere(backends: Iterable<BackendHere>): WitnessBackend[] {
  return [...backends].map((b) => ({ id: b.id, url: b.url }));
}

async function allDead(pids: readonly number[], timeoutMs: number, what: string): Promise<void> {
  await waitFor(what, timeoutMs, () => pids.every((p) => !isAlive(p)), 50);
}

/** A page GET on a fresh connection (so the cluster hands it to the next worker); the backend that served it. */
function pageBackend(gw: GatewayProc, room: string): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port: gw.port, path: `/game/${room}/`, agent: false }, (res) => {
        res.resume();
        if (res.statusCode !== 200) return reject(new Error(`GET /game/${room}/: ${res.statusCode}`));
        resolve(String(res.headers['x-backend-id']));
      });
      req.on('error', reject);
    }),
    5_000,
    `GET /game/${room}/`,
  );
}

/**
 * Waits until every client of the fleet is live and the witness shows each room on exactly one
 * backend holding all its clients. Returns room -> backend.
 */
async function settle(fleet: RoomFleet, backends: () => readonly BackendHere[], what: string, timeoutMs = 25_000): Promise<Map<string, string>> {
  let last = '';
  try {
    return await waitFor(
      `${what}: every client live, every room on one backend`,
      timeoutMs,
      async () => {
        const gaveUp = fleet.gaveUp();
        if (gaveUp.length > 0) throw new Error(`${gaveUp.length} clients gave up, e.g. room ${gaveUp[0]?.room}`);
        const notLive = fleet.notLive();
        if (notLive.length > 0) {
          const c = notLive[0]!;
          const r = c.refusals[c.refusals.length - 1];
          last = `${notLive.length} clients not live, e.g. room ${c.room} (${c.state}, last refusal ${r ? `${r.status} ${r.body.trim()}` : 'none'})`;
          return null;
        }
        const held = holders(await backendRooms(backends()));
        const byClients = fleet.roomBackends();
        const map = new Map<string, string>();
        for (const room of fleet.rooms()) {
          const h = Object.entries(held.get(room) ?? {});
          const members = fleet.ofRoom(room).length;
          const seen = [...(byClients.get(room) ?? [])];
          if (h.length !== 1 || h[0]?.[1] !== members || seen.length !== 1 || seen[0] !== h[0]?.[0]) {
            last = `room ${room}: witness ${JSON.stringify(Object.fromEntries(h))}, ${members} clients on ${JSON.stringify(seen)}`;
            return null;
          }
          map.set(room, h[0][0]);
        }
        return map;
      },
      100,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last: ${last}`);
  }
}

function expectNoSplit(watcher: SplitWatcher, since: number, what: string): void {
  const v = watcher.since(since);
  expect(v.length, `${what}: rooms held by two backends at once:\n${watcher.describe(v.slice(0, 20))}`).toBe(0);
}

/** Rooms with live sockets through every worker (asked of each worker). */
async function roomsThroughAllWorkers(gw: GatewayProc, rooms: readonly string[], workers: readonly number[]): Promise<string[]> {
  const out: string[] = [];
  for (const room of rooms) {
    const here = await Promise.all(workers.map((w) => admin<{ socketsHere: number }>(gw, `/rooms/${room}`, w).then((r) => r.socketsHere)));
    if (here.every((n) => n > 0)) out.push(room);
  }
  return out;
}

async function socketsPerWorker(gw: GatewayProc, workers: readonly number[]): Promise<number[]> {
  return Promise.all(workers.map((w) => admin<{ sockets: number }>(gw, '/status', w).then((s) => s.sockets)));
}

async function online(gw: GatewayProc): Promise<{ total: number; rooms: number }> {
  const res = await fetch(`${gw.url}/_roomgate/api/online`, { signal: AbortSignal.timeout(5_000) });
  return (await res.json()) as { total: number; rooms: number };
}


afterAll(async () => {
  for (const f of fleets) f.stop();
  stopAllRoomClients();
  await Promise.all(watchers.map((w) => w.stop()));
  // Workers and demo backends are grandchildren: they exit by themselves once their primary is
  // gone; make sure of it, also of those started after the last look.
  for (const p of primaries) if (isAlive(p)) for (const c of childrenOf(p)) seenPids.add(c);
  // Gracefully: a primary whose start timed out is not in `primaries` and still has its children.
  await stopAllWith({ graceful: true });
  for (const pid of seenPids) if (isOurs(pid)) process.kill(pid, 'SIGKILL');
  await waitFor('every process started by these tests to exit', 10_000, () => [...seenPids].every((p) => !isOurs(p)), 50).catch(() => undefined);
  await stopAllRedis();
  await stopBackendsHere();
});

describe('--workers 2 without Redis: the primary owns placements and presence', () => {
  const alive = new Map<string, BackendHere>();
  const fleet = new RoomFleet();
  fleets.push(fleet);
  const watcher = new SplitWatcher(() => witnessHere(alive.values()));
  watchers.push(watcher);
  let gw: GatewayProc;
  let target: GatewayTarget;
  const ROOMS = 48;
  let placedMap = new Map<string, string>();

  beforeAll(async () => {
    for (const b of await startBackendsHere(['b1', 'b2', 'b3'])) alive.set(b.id, b);
    gw = await startCluster(baseConfig({ backends: [...alive.values()].map((b) => ({ id: b.id, url: b.url })) }));
    target = { name: 'cluster', wsUrl: gw.wsUrl };
    watcher.start();
  }, 120_000);

  it('runs two worker processes under the primary, each a gateway of its own', async () => {
    const line = JSON.parse(gw.lines.find(PRIMARY_LISTENING)!) as { workers: number; workerPids: number[]; gatewayIds: string[]; store: string; port: number };
    expect(line.workers).toBe(2);
    expect(line.store).toBe('memory (primary)');
    const workers = await readyWorkers(gw);
    expect(workers.map((w) => w.pid)).toEqual(line.workerPids);
    expect(new Set(line.workerPids).size).toBe(2);
    expect(new Set(line.gatewayIds).size).toBe(2);
    for (const w of workers) {
      expect(w.pid).not.toBe(gw.child.pid);
      expect(parentOf(w.pid!)).toBe(gw.child.pid);
      const status = await admin<{ gatewayId: string; store: string }>(gw, '/status', w.worker);
      expect(status.gatewayId).toBe(w.gatewayId);
      expect(status.store).toBe('memory');
    }
    // Each worker logged its own "listening" on the one port.
    const workerLines = gw.logs().filter((l) => l.msg === 'listening' && typeof l.worker === 'number');
    expect(workerLines.map((l) => l.port)).toEqual([line.port, line.port]);
    // The default on Linux: each worker holds its own listening socket (SO_REUSEPORT); the primary
    // holds none, so no connection passes through it.
    expect((line as { balance?: string }).balance).toBe('kernel');
    expect((await workersOf(gw)).balance).toBe('kernel');
    expect(listenersOf(line.port, [gw.child.pid!, ...line.workerPids]).sort()).toEqual([...line.workerPids].sort());
    // The backend's push receiver is out of reach through every worker (new connections land on
    // either): 404, as on a single gateway.
    for (let i = 0; i < 6; i++) {
      const target = i % 2 === 0 ? '/_roomgate/push?room=victim' : '/r/victim/_roomgate/%70ush/';
      expect((await httpRequest(gw.port, target, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status, target).toBe(404);
    }
  });

  it('a second roomgate with workers on the same port exits naming the port, instead of sharing it', async () => {
    // Sockets with SO_REUSEPORT of one user would share the port silently; the primary checks first.
    const r = await runCli(['start', '--workers', '2', '--port', String(gw.port), '--backend', 'x=http://127.0.0.1:1']);
    expect(r.code).not.toBe(0);
    expect(r.stderr + r.stdout).toMatch(new RegExp(`EADDRINUSE|in use`));
    expect(r.stderr + r.stdout).toContain(String(gw.port));
    const line = JSON.parse(gw.lines.find(PRIMARY_LISTENING)!) as { workerPids: number[] };
    expect(listenersOf(gw.port, line.workerPids).length).toBe(2);
  });

  it('a room is never split across backends, although its sockets come through both workers', async () => {
    const t0 = Date.now();
    // b1 in maintenance (asked of one worker, stored in the primary): rooms whose ring owner is b1
    // are placed elsewhere. Every worker must know it, and later keep those rooms where they are.
    expect((await adminPost(gw, '/backends/b1/maintenance', TOKEN)).status).toBe(200);
    for (const w of [1, 2]) {
      await waitFor(`worker ${w} sees b1 in maintenance`, 5_000, async () => (await admin<{ admin: { state: string } | null }>(gw, '/backends/b1', w)).admin?.state === 'maintenance');
    }
    const rooms = Array.from({ length: ROOMS }, (_, i) => `w-${i}`);
    for (const room of rooms) for (let k = 0; k < 4; k++) fleet.add(room, target);
    const before = await settle(fleet, () => [...alive.values()], 'rooms placed with b1 in maintenance');
    expect([...before.values()].filter((b) => b === 'b1')).toEqual([]);
    const where = await runCliHere(['where', '--json', ...rooms, ...[...alive.values()].flatMap((b) => ['--backend', `${b.id}=${b.url}`])]);
    const offRing = (JSON.parse(where.stdout) as { room: string; backend: string }[]).filter((r) => r.backend === 'b1').map((r) => r.room);
    expect(offRing.length, 'some rooms have b1 as ring owner').toBeGreaterThan(3);

    expect((await adminPost(gw, '/backends/b1/undrain', TOKEN)).status).toBe(200);
    for (const w of [1, 2]) await waitFor(`worker ${w} sees b1 active`, 5_000, async () => (await admin<{ admin: unknown }>(gw, '/backends/b1', w)).admin === null);
    // More sockets of every room, through both workers: sticky, b1 gets none of them.
    for (const room of rooms) for (let k = 0; k < 2; k++) fleet.add(room, target);
    placedMap = await settle(fleet, () => [...alive.values()], 'more sockets after b1 is back');
    expect([...placedMap].filter(([room, b]) => before.get(room) !== b)).toEqual([]);

    const both = await roomsThroughAllWorkers(gw, rooms, [1, 2]);
    expect(both.length, 'rooms with sockets through both workers').toBeGreaterThanOrEqual(ROOMS / 4);
    expect(offRing.filter((r) => both.includes(r)).length, 'off-ring rooms through both workers').toBeGreaterThan(0);
    const perWorker = await socketsPerWorker(gw, [1, 2]);
    expect(perWorker.every((n) => n > 0), `sockets per worker ${perWorker}`).toBe(true);
    expect(perWorker[0]! + perWorker[1]!).toBe(fleet.size);

    // Pages, each on a new connection (so both workers serve some): the room's backend.
    for (const room of rooms.slice(0, 12)) {
      for (let k = 0; k < 2; k++) expect(await pageBackend(gw, room), `page of ${room}`).toBe(placedMap.get(room));
    }
    expectNoSplit(watcher, t0, 'placing and adding sockets');
  });

  it('presence and metrics of both workers add up', async () => {
    await waitFor('online count of all sockets', 5_000, async () => {
      const o = await online(gw);
      return o.total === fleet.size && o.rooms === ROOMS;
    });
    const room = fleet.rooms()[0]!;
    const res = await fetch(`${gw.url}/_roomgate/api/rooms/${room}`, { signal: AbortSignal.timeout(5_000) });
    expect(((await res.json()) as { sockets: number; backend: string }).sockets).toBe(fleet.ofRoom(room).length);
    expect(await metricValue(gw, 'roomgate_live_sockets')).toBe(fleet.size);
    expect(await metricValue(gw, 'roomgate_workers')).toBe(2);
    // Each room was placed once, by one worker, whichever got its first socket.
    expect(await metricValue(gw, 'roomgate_placements_total', { kind: 'new' })).toBe(ROOMS);
    expect(await metricValue(gw, 'roomgate_primary_process_cpu_seconds_total')).toBeGreaterThan(0);
  });

  it("the primary's admin port checks Host like a single gateway's (DNS rebinding), for its own routes and forwarded ones", async () => {
    // /metrics and /workers are the primary's; /status and the status page are forwarded to a worker.
    for (const path of ['/metrics', '/workers', '/status', '/_roomgate/']) {
      for (const host of [`127.0.0.1:${gw.adminPort}`, `localhost:${gw.adminPort}`, 'roomgate-admin']) {
        expect((await httpRequest(gw.adminPort, path, { headers: { host } })).status, `${path} ${host}`).toBe(200);
      }
      const r = await httpRequest(gw.adminPort, path, { headers: { host: 'evil.example' } });
      expect(r.status, path).toBe(421);
      expect(JSON.parse(r.body).error, path).toEqual({ code: 'misdirected_request', message: expect.stringMatching(/admin\.allowedHosts/) });
    }
  });

  it('a worker killed with kill -9 is started again; its clients come back to the same backends', async () => {
    const t0 = Date.now();
    const [, w2] = await readyWorkers(gw);
    const oldPid = w2!.pid!;
    const from = gw.lines.length;
    process.kill(oldPid, 'SIGKILL');
    // A new node process loading the gateway: about a second idle, 15 s was once not enough at load 30.
    const restarted = await waitFor('worker 2 running again with another pid', 45_000, async () => {
      const w = (await workersOf(gw)).workers[1]!;
      return w.state === 'ready' && w.pid !== oldPid ? w : null;
    });
    expect(restarted.restarts).toBe(1);
    expect(parentOf(restarted.pid!)).toBe(gw.child.pid);
    const exitLine = logsFrom(gw, from).find((l) => l.msg === 'worker exited unexpectedly: starting it again');
    expect(exitLine).toMatchObject({ worker: 2, workerPid: oldPid, signal: 'SIGKILL' });
    const after = await settle(fleet, () => [...alive.values()], 'clients of the killed worker back');
    expect([...after].filter(([room, b]) => placedMap.get(room) !== b)).toEqual([]);
    // The restarted worker takes new connections and knows the placements from the primary.
    const rooms = fleet.rooms().slice(0, 16);
    for (const room of rooms) for (let k = 0; k < 2; k++) fleet.add(room, target);
    const again = await settle(fleet, () => [...alive.values()], 'more sockets after the restart');
    expect([...again].filter(([room, b]) => placedMap.get(room) !== b)).toEqual([]);
    expect((await socketsPerWorker(gw, [2]))[0]).toBeGreaterThan(0);
    expect((await roomsThroughAllWorkers(gw, rooms, [1, 2])).length).toBeGreaterThan(0);
    await waitFor('online count right again', 5_000, async () => (await online(gw)).total === fleet.size);
    expect(await metricValue(gw, 'roomgate_worker_restarts_total')).toBe(1);
    expectNoSplit(watcher, t0, 'a worker killed and started again');
  }, 120_000);

  it('SIGHUP: the primary reads the configuration once and every worker applies it', async () => {
    const b4 = await startBackendHere('b4');
    alive.set(b4.id, b4);
    const file = gw.child.spawnargs[gw.child.spawnargs.indexOf('--config') + 1]!;
    const doc = parse(readFileSync(file, 'utf8')) as { backends: { id: string; url: string }[] };
    doc.backends.push({ id: b4.id, url: b4.url });
    writeFileSync(file, stringify(doc));
    const from = gw.lines.length;
    gw.child.kill('SIGHUP');
    const line = await waitFor('the primary reports the reload', 10_000, () => logsFrom(gw, from).find((l) => l.msg === 'configuration reloaded: sent to every worker'));
    expect(line.workers).toEqual([
      { worker: 1, applied: ['backends'], needsRestart: [] },
      { worker: 2, applied: ['backends'], needsRestart: [] },
    ]);
    for (const w of [1, 2]) expect((await admin<{ id: string }>(gw, '/backends/b4', w)).id).toBe('b4');
    const after = await settle(fleet, () => [...alive.values()], 'after the reload');
    expect([...after].filter(([room, b]) => placedMap.get(room) !== b)).toEqual([]);
  });

  it('SIGTERM: every worker stops gracefully, then the primary exits 0; no process is left', async () => {
    const pids = (await readyWorkers(gw)).map((w) => w.pid!);
    const from = gw.lines.length;
    expect(await stop(gw, 'SIGTERM', 20_000)).toBe(0);
    const logs = logsFrom(gw, from);
    const stopped = logs.filter((l) => l.msg === 'worker stopped');
    expect(stopped.map((l) => [l.worker, l.code]).sort()).toEqual([
      [1, 0],
      [2, 0],
    ]);
    // Each worker ran the gateway's own graceful stop.
    expect(logs.filter((l) => l.msg === 'stopping: readiness is now false').map((l) => l.worker).sort()).toEqual([1, 2]);
    await allDead(pids, 5_000, 'the workers to be gone');
    await waitFor('every client closed', 5_000, () => fleet.liveCount() === 0);
    fleet.stop();
    await expect(fetch(`${gw.url}/healthz`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
    await watcher.stop();
  });
});

describe('--workers 2 --balance primary, with Redis: every worker is a gateway of its own', () => {
  let redis: RedisServer;
  const alive = new Map<string, BackendHere>();
  const fleet = new RoomFleet();
  fleets.push(fleet);
  const watcher = new SplitWatcher(() => witnessHere(alive.values()));
  watchers.push(watcher);
  let gw: GatewayProc;
  const ROOMS = 24;

  beforeAll(async () => {
    redis = await startRedis();
    for (const b of await startBackendsHere(['r1', 'r2', 'r3'])) alive.set(b.id, b);
    gw = await startCluster(baseConfig({ backends: [...alive.values()].map((b) => ({ id: b.id, url: b.url })), redis: { url: redis.url } }), '2', ['--balance', 'primary']);
    watcher.start();
  }, 120_000);

  it('the primary holds the one listening socket and hands connections to the workers', async () => {
    const workers = await readyWorkers(gw);
    expect((await workersOf(gw)).balance).toBe('primary');
    expect(listenersOf(gw.port, [gw.child.pid!, ...workers.map((w) => w.pid!)])).toEqual([gw.child.pid]);
  });

  it('each worker heartbeats into Redis under its own gateway id', async () => {
    const workers = await readyWorkers(gw);
    expect((await workersOf(gw)).store).toBe('redis');
    const ids = workers.map((w) => w.gatewayId!);
    expect(new Set(ids).size).toBe(2);
    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await client.connect();
      await waitFor('both gateway ids in Redis', 5_000, async () => {
        const members = await client.zrange('roomgate:{rg}:gw', '0', '-1');
        return ids.every((id) => members.includes(id));
      });
    } finally {
      client.disconnect();
    }
    for (const w of workers) expect((await admin<{ store: string }>(gw, '/status', w.worker)).store).toBe('redis');
  });

  it('rooms are not split and presence adds up over the workers', async () => {
    const t0 = Date.now();
    const target: GatewayTarget = { name: 'cluster', wsUrl: gw.wsUrl };
    const rooms = Array.from({ length: ROOMS }, (_, i) => `rw-${i}`);
    for (const room of rooms) for (let k = 0; k < 4; k++) fleet.add(room, target);
    await settle(fleet, () => [...alive.values()], 'rooms through both workers');
    expect((await roomsThroughAllWorkers(gw, rooms, [1, 2])).length).toBeGreaterThanOrEqual(ROOMS / 4);
    await waitFor('online count of all sockets', 5_000, async () => {
      const o = await online(gw);
      return o.total === fleet.size && o.rooms === ROOMS;
    });
    expect(await metricValue(gw, 'roomgate_placements_total', { kind: 'new' })).toBe(ROOMS);
    expectNoSplit(watcher, t0, 'rooms through both workers');
  });

  it('when the primary dies, its workers exit too', async () => {
    const pids = (await readyWorkers(gw)).map((w) => w.pid!);
    process.kill(gw.child.pid!, 'SIGKILL');
    await gw.exited;
    // Node's cluster module exits a worker once its IPC channel to the primary closes.
    await allDead(pids, 10_000, 'the workers of a dead primary to exit');
    await waitFor('every client closed', 5_000, () => fleet.liveCount() === 0);
    fleet.stop();
    await watcher.stop();
  });
});

describe('--workers 2 in demo mode', () => {
  it('the primary starts the demo backends once; every worker routes to them; SIGTERM stops them all', async () => {
    const basePort = await freePortRange(2);
    const gw = await startCluster(baseConfig({ demo: { backends: 2, basePort } }));
    const started = gw.logs().filter((l) => l.msg === 'demo backend started');
    expect(started.map((l) => [l.backend, l.role])).toEqual([
      ['demo-1', 'primary'],
      ['demo-2', 'primary'],
    ]);
    const demoPids = started.map((l) => l.backendPid as number);
    for (const p of demoPids) seenPids.add(p);
    const workers = await readyWorkers(gw);
    for (const w of workers) {
      const { backends } = await admin<{ backends: { id: string; url: string }[] }>(gw, '/backends', w.worker);
      expect(backends.map((b) => [b.id, b.url])).toEqual([
        ['demo-1', `http://127.0.0.1:${basePort}`],
        ['demo-2', `http://127.0.0.1:${basePort + 1}`],
      ]);
    }
    const clients = Array.from({ length: 4 }, () => new Client(`${gw.wsUrl}/ws/live/?room=demo-room`));
    const on = await Promise.all(clients.map((c) => c.join('demo-room')));
    expect(new Set(on).size).toBe(1);
    const demo = [0, 1].map((i) => ({ id: `demo-${i + 1}`, url: `http://127.0.0.1:${basePort + i}` }));
    const held = holders((await sampleRooms(demo)).rooms);
    expect(held.get('demo-room')).toEqual({ [on[0]!]: 4 });

    expect(await stop(gw, 'SIGTERM', 20_000)).toBe(0);
    await allDead([...workers.map((w) => w.pid!), ...demoPids], 5_000, 'workers and demo backends to be gone');
    await expect(fetch(`http://127.0.0.1:${basePort}/healthz`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
  }, 120_000);
});

describe('--workers values', () => {
  // In this process (test/cli/in-process.ts): each refusal comes before anything starts or forks.
  it('refuses values outside 1..64 / auto before starting anything', async () => {
    for (const bad of ['0', '65', 'abc', '1.5']) {
      const r = await runCliHere(['start', '--workers', bad, '--port', '0']);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain(`--workers: got ${JSON.stringify(bad)}; expected a whole number from 1 to 64, or "auto"`);
    }
    const env = await runCliHere(['start', '--port', '0'], { ROOMGATE_WORKERS: 'lots' });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('ROOMGATE_WORKERS: got "lots"');
    for (const bad of ['both', 'KERNEL', '1']) {
      const r = await runCliHere(['start', '--balance', bad, '--port', '0']);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain(`--balance: got ${JSON.stringify(bad)}; expected "kernel"`);
    }
    const balanceEnv = await runCliHere(['start', '--port', '0'], { ROOMGATE_BALANCE: 'rr' });
    expect(balanceEnv.code).toBe(2);
    expect(balanceEnv.stderr).toContain('ROOMGATE_BALANCE: got "rr"');
    const where = await runCliHere(['where', 'room1', '--workers', '2']);
    expect(where.code).toBe(2);
    expect(where.stderr).toContain('--workers is for start only');
  });

  it('--workers 1 is the single process of old: no cluster, no primary', async () => {
    const b = await startBackendHere('s1');
    const gw = await startGateway({ backends: [`${b.id}=${b.url}`], args: ['--workers', '1'] });
    const line = gw.logs().find((l) => l.msg === 'listening')!;
    expect(line.pid).toBe(gw.child.pid);
    expect(line.worker).toBeUndefined();
    expect(gw.lines.some(PRIMARY_LISTENING)).toBe(false);
    const res = await fetch(`http://127.0.0.1:${gw.adminPort}/workers`, { signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(404);
    await res.body?.cancel();
    expect(await stop(gw, 'SIGTERM')).toBe(0);
    await b.backend.close();
  });
});
