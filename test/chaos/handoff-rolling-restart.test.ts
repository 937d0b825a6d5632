// A rolling restart of three demo backends with room handoff, under 300 live rooms playing the
// game (real processes: a redis-server, three demo backends, two gateways sharing it). Each backend
// in turn is drained with handoff (b1 and b3 through gateway A's admin API, b2 with
// `roomgate drain --handoff` against gateway B), stopped once it holds no room, started again on
// its port, and undrained. Every room has a client through each gateway, emulating djust's client
// (test/support/game-clients.ts): it reconnects after any close with djust's jitter and keeps
// playing. What roomgate promises: every move the app acknowledged is still there after each
// handoff (a mount is never told fewer moves than were acknowledged before it started, no move
// number is acknowledged twice, and each room's final count holds every acknowledged move), and no
// room is ever held by two backends. The client-visible gap per room (a close to its clients
// mounted again) is measured for the chaos table, not asserted (target p99 <= 2 s).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { GameClient, GameRoom, roomGaps, stopAllGameClients, type GameClientOptions } from '../support/game-clients.js';
import { runCli, startBackend, stop, waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { SplitWatcher, adminBackends, adminGet, adminPost, percentile, sleep, type GatewayTarget } from '../support/room-clients.js';
import { startTwoGateways, stopTwoGateways, type TwoGateways } from '../support/two-gateways.js';

const ROOMS = 300;
const TOKEN = 'handoff-chaos-admin-token-0123456789';
const PLAY: GameClientOptions = { moveEveryMs: [1_000, 3_000] };
/** The drain's deadline: far beyond the test, so a room is only ever moved by its handoff. */
const DEADLINE_MS = 600_000;

let backends: BackendProc[];
let gwA: GatewayProc;
let gwB: GatewayProc;
let watcher: SplitWatcher;
let cluster: TwoGateways | undefined;
const games = new Map<string, GameRoom>();
const clients: GameClient[] = [];

const target = (name: string, gw: () => GatewayProc): GatewayTarget => ({
  name,
  get wsUrl() {
    return gw().wsUrl;
  },
});

function config(redisUrl: string, bs: readonly BackendProc[]): Record<string, unknown> {
  return {
    backends: bs.map((b) => ({ id: b.id, url: b.url })),
    redis: { url: redisUrl, commandTimeoutMs: 500 },
    health: { intervalMs: 500, timeoutMs: 400 },
    placement: { heartbeatMs: 200, gatewayTtlMs: 1_000 },
    presence: { ttlMs: 2_000 },
    admin: { token: TOKEN },
    // 600 sockets reconnecting in waves are the point here, not admission control.
    admission: { upgradesPerSecond: 0 },
  };
}

beforeAll(async () => {
  cluster = await startTwoGateways(['b1', 'b2', 'b3'], config);
  ({ backends, gwA, gwB, watcher } = cluster);
}, 60_000);

afterAll(async () => {
  await stopTwoGateways(cluster, stopAllGameClients);
}, 30_000);

/** room -> its backend, once every client is mounted and each room's clients share one backend. */
function settled(what: string, timeoutMs: number): Promise<Map<string, string>> {
  return waitFor(
    what,
    timeoutMs,
    () => {
      const out = new Map<string, string>();
      for (const c of clients) {
        if (c.backend === null) return null;
        const b = out.get(c.game.room);
        if (b !== undefined && b !== c.backend) return null;
        out.set(c.game.room, c.backend);
      }
      return out;
    },
    100,
  );
}

async function roomsOn(b: BackendProc): Promise<number> {
  const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(2_000) });
  return Object.keys(((await res.json()) as { rooms: Record<string, number> }).rooms).length;
}

interface DrainFigures {
  backend: string;
  via: string;
  moved: number;
  failed: number;
  ms: number;
  reissued: number;
}

interface DrainProgress {
  backend: string;
  startedAt: string;
  moved: number;
  failed: number;
  done: boolean;
  reason: string;
}

async function drainDone(gw: GatewayProc, backend: string, since: number): Promise<DrainProgress> {
  return waitFor(
    `the drain with handoff of ${backend} done`,
    60_000,
    async () => {
      const ev = await adminGet<{ handoffs: { drains: DrainProgress[] } }>(gw, '/events');
      return ev.handoffs.drains.find((d) => d.backend === backend && d.done && Date.parse(d.startedAt) >= since - 1_000);
    },
    100,
  );
}

/** Drains `b` with handoff through `gw` (the admin API, or the CLI), until it holds no room. */
async function drainWithHandoff(b: BackendProc, gw: GatewayProc, via: 'api' | 'cli'): Promise<DrainFigures> {
  const t0 = Date.now();
  let reissued = 0;
  const issue = async (): Promise<void> => {
    if (via === 'api') {
      const r = await adminPost(gw, `/backends/${b.id}/drain`, TOKEN, { handoff: true, deadlineMs: DEADLINE_MS });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    } else {
      const r = await runCli(['drain', b.id, '--handoff', '--deadline', '10m'], { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gw.adminPort}`, ROOMGATE_ADMIN_TOKEN: TOKEN });
      expect(r.code, r.stderr).toBe(0);
    }
  };
  await issue();
  let moved = 0;
  let failed = 0;
  for (;;) {
    const since = Date.now();
    const d = await drainDone(gw, b.id, reissued === 0 ? t0 : since);
    moved += d.moved;
    failed += d.failed;
    // Presence lags a heartbeat: a room it had not reported yet is moved by the drain's next count,
    // or, once the drain is over, by issuing it again (counted: the table says how often).
    const empty = await waitFor(`${b.id} holding no room`, 5_000, async () => (await roomsOn(b)) === 0, 100).catch(() => false);
    if (empty) break;
    if (++reissued > 3) {
      const recent = (await adminGet<{ handoffs: { recent: unknown[] } }>(gw, '/events')).handoffs.recent.slice(-5);
      throw new Error(`${b.id} still holds ${await roomsOn(b)} rooms after ${reissued} drains with handoff (last: ${JSON.stringify(d)}); recent handoffs: ${JSON.stringify(recent)}`);
    }
    await issue();
  }
  return { backend: b.id, via: `${via === 'api' ? 'admin API' : 'CLI'} of gateway ${gw === gwA ? 'A' : 'B'}`, moved, failed, ms: Date.now() - t0, reissued };
}

/** Stops `b` (SIGTERM), starts it again on its port, waits until both gateways see it up, undrains it. */
async function restart(i: number): Promise<number> {
  const old = backends[i] as BackendProc;
  const t0 = Date.now();
  await stop(old, 'SIGTERM');
  const fresh = await startBackend(old.id, ['--port', String(old.port)]);
  backends[i] = fresh;
  for (const gw of [gwA, gwB]) await waitFor(`${old.id} up for the gateway`, 15_000, async () => (await adminBackends(gw)).get(old.id)?.health === 'up', 100);
  const r = await adminPost(gwA, `/backends/${old.id}/undrain`, TOKEN);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return Date.now() - t0;
}

interface Tally {
  acked: number;
  lost: string[];
}

/** Every room's final count, from its backend, against what its clients were acknowledged. */
async function tally(placed: Map<string, string>): Promise<Tally> {
  const url = new Map(backends.map((b) => [b.id, b.url]));
  const lost: string[] = [];
  let acked = 0;
  for (const [room, game] of games) {
    const res = await fetch(`${url.get(placed.get(room) as string)}/_backend/moves/${room}`, { signal: AbortSignal.timeout(5_000) });
    const held = (await res.json()) as { moves: number; last: { n: number; data: { c?: number; k?: number } | null }[] };
    acked += game.acks.size;
    for (const d of game.duplicates) lost.push(`${room}: move ${d.first.n} acknowledged twice (the room restarted empty)`);
    if (game.highest > held.moves) lost.push(`${room}: ${game.highest} moves acknowledged, ${held.moves} held`);
    for (const m of held.last) {
      const a = game.acks.get(m.n);
      if (a !== undefined && (m.data?.c !== a.client || m.data?.k !== a.k)) lost.push(`${room}: move ${m.n} holds ${JSON.stringify(m.data)}, acknowledged for ${a.client}/${a.k}`);
    }
  }
  return { acked, lost };
}

describe('rolling restart of 3 backends with room handoff, 300 rooms playing, 2 gateways', () => {
  it('every acknowledged move survives every handoff; no room is ever on two backends; the gap per room is measured', async () => {
    const A = target('A', () => gwA);
    const B = target('B', () => gwB);
    for (let r = 0; r < ROOMS; r++) {
      if (r > 0 && r % 50 === 0) await sleep(200);
      const game = new GameRoom(`game-${r}`);
      games.set(game.room, game);
      clients.push(new GameClient(2 * r, game, A, PLAY).start(), new GameClient(2 * r + 1, game, B, PLAY).start());
    }
    const before = await settled('every client mounted, each room on one backend', 60_000);
    // A few moves in every room before the first handoff.
    await sleep(4_000);
    const startedAt = Date.now();

    const drains: DrainFigures[] = [];
    const restarts: number[] = [];
    const plan: readonly (readonly [number, GatewayProc, 'api' | 'cli'])[] = [
      [0, gwA, 'api'],
      [1, gwB, 'cli'],
      [2, gwA, 'api'],
    ];
    for (const [i, gw, via] of plan) {
      drains.push(await drainWithHandoff(backends[i] as BackendProc, gw, via));
      restarts.push(await restart(i));
      // The game goes on between two restarts.
      await settled(`every client mounted again after ${backends[i]?.id}`, 30_000);
      await sleep(2_000);
    }
    const rollingMs = Date.now() - startedAt;
    // One handoff, hello to release, as each gateway recorded its latest (100 each): what sizes a
    // drain's batches (docs/deployment.md).
    const handoffMs = (await Promise.all([gwA, gwB].map((gw) => adminGet<{ handoffs: { recent: { result: string; ms: number }[] } }>(gw, '/events'))))
      .flatMap((e) => e.handoffs.recent)
      .filter((h) => h.result === 'moved')
      .map((h) => h.ms);

    for (const c of clients) c.quiet();
    await sleep(1_500); // answers of the last moves in flight
    const after = await settled('every client mounted at the end', 30_000);
    const { acked, lost } = await tally(after);
    const shortMounts = [...games.values()].flatMap((g) => g.shortMounts);
    const split = watcher.since(startedAt);
    const gaps = [...games.values()].flatMap((g) => roomGaps(clients.filter((c) => c.game === g).flatMap((c) => c.gaps), startedAt));
    const closes = clients.flatMap((c) => c.gaps.filter((g) => g.closedAt >= startedAt));
    // By the gateway the socket went through: the one running the drain relays the old owner's
    // 1012; the other cuts its tunnels of the room when it hears of the move.
    const codes = new Map<string, number>();
    for (const c of clients) for (const g of c.gaps.filter((x) => x.closedAt >= startedAt)) codes.set(`${g.code} via ${c.gateway.name}`, (codes.get(`${g.code} via ${c.gateway.name}`) ?? 0) + 1);
    const refused = clients.reduce((n, c) => n + c.refusals.filter((r) => r.at >= startedAt).length, 0);
    const failedAttempts = clients.reduce((n, c) => n + c.failures.filter((f) => f.at >= startedAt).length, 0);
    const resent = clients.reduce((n, c) => n + c.refusedMoving, 0);
    const moved = drains.reduce((n, d) => n + d.moved, 0);
    const roomsChanged = [...before].filter(([room, b]) => after.get(room) !== b).length;

    expect(lost.slice(0, 10), 'acknowledged moves missing').toEqual([]);
    expect(shortMounts.slice(0, 10), 'mounts told fewer moves than were acknowledged before they started').toEqual([]);
    expect(split.length, watcher.describe(split.slice(0, 10))).toBe(0);
    expect(drains.map((d) => d.failed)).toEqual([0, 0, 0]);
    expect(acked).toBeGreaterThan(ROOMS);
    expect(moved).toBeGreaterThanOrEqual(ROOMS);
    expect(gaps.length).toBeGreaterThan(0);

    const p50 = percentile(gaps, 50);
    const p99 = percentile(gaps, 99);
    const max = Math.max(...gaps);
    const perDrain = drains.map((d) => `${d.backend} ${d.moved} rooms in ${(d.ms / 1000).toFixed(1)} s (${d.via}${d.reissued ? `, issued ${d.reissued + 1} times` : ''})`);
    recordChaos({
      id: 'handoff-rolling-restart',
      fault: `rolling restart of 3 backends, each drained with handoff, stopped, started, undrained, under ${ROOMS} rooms playing (${clients.length} djust-like sockets through 2 gateways sharing Redis)`,
      promise: 'every move the app acknowledged before an export is there after it (0 lost); no room on two backends at once; clients reconnect (1012) to the new owner and find the game',
      figures: {
        recoverMs: max,
        roomsMoved: moved,
        socketsDropped: closes.length,
        requestsFailed: refused + failedAttempts,
        roomsSplit: split.length,
        other: [
          `moves lost: ${lost.length + shortMounts.length} of ${acked} acknowledged`,
          `gap per room (close to every client mounted again): p50 ${p50} ms, p99 ${p99} ms, max ${max} ms over ${gaps.length} gaps; target p99 <= 2 s ${p99 <= 2_000 ? 'met' : 'NOT met'} (djust's first reconnect waits 500-1000 ms of it)`,
          `drains: ${perDrain.join('; ')}`,
          `one handoff (hello to release, the latest ${handoffMs.length}): p50 ${percentile(handoffMs, 50)} ms, p99 ${percentile(handoffMs, 99)} ms`,
          `restart to undrained: ${restarts.map((ms) => `${ms} ms`).join(', ')}; whole rolling restart ${(rollingMs / 1000).toFixed(1)} s`,
          `close codes (b1, b3 drained through A, b2 through B): ${[...codes].sort().map(([c, n]) => `${c} x${n}`).join(', ')}`,
          `moves refused while frozen (room-moving) and sent again: ${resent}`,
          `rooms on another backend than before: ${roomsChanged} of ${ROOMS}`,
        ],
      },
      file: import.meta.url,
      test: 'rolling restart of 3 backends with room handoff, 300 rooms playing, 2 gateways',
    });
  }, 300_000);
});
