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
import { waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { SplitWatcher, percentile, sleep, type GatewayTarget } from '../support/room-clients.js';
import { drainWithHandoff, handoffTimes, restartBackend, rollingConfig, rollingPlan, type DrainFigures, type RollingCluster } from '../support/rolling-restart.js';
import { startTwoGateways, stopTwoGateways, type TwoGateways } from '../support/two-gateways.js';

const ROOMS = 300;
const TOKEN = 'handoff-chaos-admin-token-0123456789';
const PLAY: GameClientOptions = { moveEveryMs: [1_000, 3_000] };

let backends: BackendProc[];
let gwA: GatewayProc;
let gwB: GatewayProc;
let watcher: SplitWatcher;
let cluster: TwoGateways | undefined;
let rolling: RollingCluster;
const games = new Map<string, GameRoom>();
const clients: GameClient[] = [];

const target = (name: string, gw: () => GatewayProc): GatewayTarget => ({
  name,
  get wsUrl() {
    return gw().wsUrl;
  },
});

beforeAll(async () => {
  cluster = await startTwoGateways(['b1', 'b2', 'b3'], rollingConfig(TOKEN));
  ({ backends, gwA, gwB, watcher } = cluster);
  rolling = { backends, gwA, gwB, token: TOKEN };
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
    for (const [i, gw, via] of rollingPlan(rolling)) {
      drains.push(await drainWithHandoff(rolling, i, gw, via));
      restarts.push(await restartBackend(rolling, i));
      // The game goes on between two restarts.
      await settled(`every client mounted again after ${backends[i]?.id}`, 30_000);
      await sleep(2_000);
    }
    const rollingMs = Date.now() - startedAt;
    // One handoff, hello to release: what sizes a drain's batches (docs/deployment.md).
    const handoffMs = await handoffTimes(rolling);

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
