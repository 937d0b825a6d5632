// One of two gateways killed with kill -9 while 1,000 sockets go through it (real processes: a
// redis-server, three demo backends, two gateways). What roomgate promises: the other gateway's
// sockets are not touched; the dead gateway's presence counts vanish within presence.ttlMs; its
// clients, sent to the survivor the way a load balancer would once its health check fails,
// reconnect to the same backends (placements live in Redis, not in the dead process), and no room
// is ever on two backends. Page requests through the survivor keep being answered throughout.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { stop, waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { RoomFleet, SplitWatcher, adminGet, percentile, sleep, stopAllRoomClients, type GatewayTarget, type RoomClient } from '../support/room-clients.js';
import { startTwoGateways, stopTwoGateways, type TwoGateways } from '../support/two-gateways.js';

const PRESENCE_TTL_MS = 2_000;
const HEARTBEAT_MS = 200;
/** Rooms whose every client goes through the gateway that dies (4 sockets each: 1,000 sockets). */
const B_ROOMS = 250;
/** Rooms of the survivor alone, and rooms with clients through both. */
const A_ROOMS = 40;
const MIXED_ROOMS = 20;

let backends: BackendProc[];
let gwA: GatewayProc;
let gwB: GatewayProc;
let bAlive = true;
let watcher: SplitWatcher;
let cluster: TwoGateways | undefined;
/** A plain client of the test's Redis: reads which gateways' presence still counts. */
let redisClient: Redis;
const fleet = new RoomFleet();

const A: GatewayTarget = {
  name: 'A',
  get wsUrl() {
    return gwA.wsUrl;
  },
};
// B's clients reach B while it lives, then the survivor: what a load balancer in front of both
// does once B fails its health check (the test switches at the kill: the balancer's detection
// time is the balancer's, not roomgate's).
const B: GatewayTarget = {
  name: 'B',
  get wsUrl() {
    return bAlive ? gwB.wsUrl : gwA.wsUrl;
  },
};

function config(redisUrl: string, bs: readonly BackendProc[]): Record<string, unknown> {
  return {
    backends: bs.map((b) => ({ id: b.id, url: b.url })),
    redis: { url: redisUrl, commandTimeoutMs: 500 },
    health: { intervalMs: 500, timeoutMs: 400 },
    placement: { heartbeatMs: HEARTBEAT_MS, gatewayTtlMs: 1_000 },
    presence: { ttlMs: PRESENCE_TTL_MS },
    // The reconnect wave of 1,000 sockets is the point here, not admission control.
    admission: { upgradesPerSecond: 0 },
  };
}

beforeAll(async () => {
  cluster = await startTwoGateways(['b1', 'b2', 'b3'], config);
  ({ backends, gwA, gwB, watcher } = cluster);
  redisClient = new Redis(cluster.redisUrl, { maxRetriesPerRequest: 1, commandTimeout: 2_000, lazyConnect: true });
  await redisClient.connect();
}, 60_000);

afterAll(async () => {
  await stopTwoGateways(cluster, () => {
    fleet.stop();
    stopAllRoomClients();
    redisClient?.disconnect();
  });
}, 30_000);

/** room -> backend of its live clients, once every client is live and each room is on one backend. */
async function settled(what: string, timeoutMs: number): Promise<Map<string, string>> {
  return waitFor(
    what,
    timeoutMs,
    () => {
      if (fleet.notLive().length > 0) return null;
      const out = new Map<string, string>();
      for (const [room, set] of fleet.roomBackends()) {
        if (set.size !== 1) return null;
        out.set(room, [...set][0] as string);
      }
      return out;
    },
    100,
  );
}

async function online(gw: GatewayProc): Promise<number> {
  const res = await fetch(`${gw.url}/_roomgate/api/online`, { signal: AbortSignal.timeout(2_000) });
  return ((await res.json()) as { total: number }).total;
}

describe('kill -9 of one of two gateways under load', () => {
  it("the survivor's sockets stay, the dead one's presence goes within presence.ttlMs, its clients reconnect through the survivor to the same backends", async () => {
    // A's clients start first, then the 1,000 through B, a few rooms at a time.
    const aClients: RoomClient[] = [];
    for (let r = 0; r < A_ROOMS; r++) for (let i = 0; i < 2; i++) aClients.push(fleet.add(`a-${r}`, A));
    for (let r = 0; r < MIXED_ROOMS; r++) {
      aClients.push(fleet.add(`m-${r}`, A));
      fleet.add(`m-${r}`, B);
    }
    for (let r = 0; r < B_ROOMS; r++) {
      if (r > 0 && r % 50 === 0) await sleep(100);
      for (let i = 0; i < 4; i++) fleet.add(`b-${r}`, B);
    }
    const before = await settled('every client live, each room on one backend', 40_000);
    const bClients = fleet.clients.filter((c) => c.gateway === B);
    expect(bClients.length).toBe(B_ROOMS * 4 + MIXED_ROOMS);
    const bSockets = (await adminGet<{ sockets: number }>(gwB, '/status')).sockets;
    expect(bSockets).toBe(bClients.length);
    await waitFor('presence counts every socket', 5_000, async () => (await online(gwA)) === fleet.size, 100);

    // Page requests through the survivor the whole time (rooms of both kinds).
    let paging = true;
    let pages = 0;
    const failedPages: string[] = [];
    const pageLoop = (async () => {
      for (let k = 0; paging; k++) {
        const room = k % 2 === 0 ? `b-${k % B_ROOMS}` : `a-${k % A_ROOMS}`;
        try {
          const res = await fetch(`${gwA.url}/game/${room}/`, { signal: AbortSignal.timeout(5_000) });
          await res.arrayBuffer();
          pages++;
          if (res.status !== 200 || res.headers.get('x-backend-id') !== before.get(room)) failedPages.push(`${room}: ${res.status} from ${res.headers.get('x-backend-id')}`);
        } catch (err) {
          failedPages.push(`${room}: ${(err as Error).message}`);
        }
        await sleep(10);
      }
    })();

    const bId = (await adminGet<{ gatewayId: string }>(gwB, '/status')).gatewayId;
    const killedAt = Date.now();
    await stop(gwB, 'SIGKILL');
    bAlive = false;
    // Presence: a gateway's report counts while its expiry (score in pres:gws, Redis clock) is
    // ahead of Redis's time: the rule every read applies (src/shared-data/redis-store.ts).
    const presenceGoneMs = await waitFor(
      "the dead gateway's presence gone",
      PRESENCE_TTL_MS + 5_000,
      async () => {
        const [score, [sec, usec]] = await Promise.all([redisClient.zscore('roomgate:{rg}:pres:gws', bId), redisClient.time()]);
        return score === null || Number(score) <= Number(sec) * 1000 + Math.floor(Number(usec) / 1000) ? Date.now() - killedAt : null;
      },
      20,
    );
    const after = await settled("the dead gateway's clients live again through the survivor", 30_000);
    const back = bClients.map((c) => (c.connectedSince(killedAt)?.mountedAt ?? NaN) - killedAt);
    const recoverMs = Math.max(...back);
    const refusals = fleet.refusalsSince(killedAt).map(({ refusal }) => `${refusal.status} ${refusal.body.trim().slice(0, 40)}`);
    paging = false;
    await pageLoop;

    const moved = [...before].filter(([room, b]) => after.get(room) !== b).map(([room, b]) => `${room}: ${b} -> ${after.get(room)}`);
    const aClosed = aClients.filter((c) => c.closesSince(killedAt).length > 0).map((c) => c.room);
    const bDropped = bClients.filter((c) => c.closesSince(killedAt).length > 0).length;
    const split = watcher.since(killedAt);
    expect(moved, 'rooms that changed backend').toEqual([]);
    expect(aClosed, "the survivor's clients closed").toEqual([]);
    expect(split.length, watcher.describe(split.slice(0, 10))).toBe(0);
    expect(failedPages.slice(0, 10), 'page requests through the survivor that failed or went to another backend').toEqual([]);
    expect(pages).toBeGreaterThan(0);
    expect(Number.isFinite(recoverMs)).toBe(true);
    // Presence: at most presence.ttlMs after B's last report, which was at most one heartbeat before the kill.
    expect(presenceGoneMs).toBeLessThanOrEqual(PRESENCE_TTL_MS + HEARTBEAT_MS + 1_500);
    // Presence counts the reconnected sockets once the survivor's next heartbeats report them.
    await waitFor('presence counts every socket again', 5_000, async () => (await online(gwA)) === fleet.size, 100);

    recordChaos({
      id: 'gateway-kill-9',
      fault: `one of two gateways killed (kill -9) with ${bSockets} sockets through it`,
      promise:
        "the other gateway's sockets and pages are untouched; the dead one's clients reconnect through the survivor to the same backends; its presence counts vanish within presence.ttlMs",
      figures: {
        recoverMs,
        roomsMoved: moved.length,
        socketsDropped: bDropped,
        requestsFailed: failedPages.length,
        roomsSplit: split.length,
        other: [
          `survivor's sockets closed: ${aClosed.length} of ${aClients.length}`,
          `dead gateway's presence gone after ${presenceGoneMs} ms (presence.ttlMs ${PRESENCE_TTL_MS})`,
          `reconnected: median ${percentile(back, 50)} ms, p95 ${percentile(back, 95)} ms`,
          `handshakes refused during the wave: ${refusals.length}${refusals.length > 0 ? ` (e.g. ${refusals[0]})` : ''}`,
          `${pages} page requests through the survivor during it`,
        ],
      },
      file: import.meta.url,
      test: 'kill -9 of one of two gateways under load',
    });
  }, 90_000);
});
