// Network faults, not process deaths: a FaultProxy (test/support/fault-proxy.ts) sits between the
// gateway and Redis, or between the gateway and one backend, and the link is black-holed (no RST,
// no FIN, nothing answers), reset, delayed; a backend is also stopped with SIGSTOP. Real processes
// throughout (redis-server, demo backends, gateways, reconnecting room clients); the backends' own
// /_backend/rooms is the witness of where a room is. Each test records its chaos row once its
// assertions passed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRing } from '../../src/placement/ring.js';
import { recordChaos } from '../support/chaos.js';
import { FaultProxy, closeAllFaultProxies } from '../support/fault-proxy.js';
import { Client, backendRooms, httpRequest, pingPong, startBackends, startGateway, stopAll, waitFor, withTimeout, type BackendProc, type GatewayProc } from '../support/processes.js';
import { startRedis, stopAllRedis } from '../support/redis.js';
import { RoomFleet, SplitWatcher, adminGet, logsFrom, sleep, stopAllRoomClients, witnessOf, type RoomClient } from '../support/room-clients.js';

// Each step bounded and named, and each run whatever another did: this hook once ran past vitest's
// 60 s (a clean-clone CI run; not seen again in 3 runs beside a CPU hog) in its first step, every
// process it would have stopped next was left running, and the failure did not say where. A
// fault proxy's close is bounded itself now (test/support/fault-proxy.ts); a step that still hangs
// fails the file with its name, and the steps after it run.
afterAll(async () => {
  stopAllRoomClients();
  const steps: [string, () => Promise<void>, number][] = [
    ['closing the fault proxies', closeAllFaultProxies, 15_000],
    ['stopping the gateways and backends', stopAll, 20_000],
    ['stopping redis-server', stopAllRedis, 15_000],
  ];
  const failed: string[] = [];
  for (const [what, step, ms] of steps) await withTimeout(step(), ms, what).catch((err: Error) => failed.push(err.message));
  expect(failed).toEqual([]);
}, 60_000);

// --- probes: what a user and a platform see while the fault lasts -----------------------------

interface Sample {
  readonly at: number;
  readonly ms: number;
  /** HTTP status, or 0 when no answer came (reset, timeout). */
  readonly status: number;
  readonly backend: string | null;
  readonly error?: string;
}

/** Runs `fn` again and again (everyMs apart) until stop(), recording each answer and its time. */
function probe(everyMs: number, fn: (k: number) => Promise<Omit<Sample, 'at' | 'ms'>>): { samples: Sample[]; stop: () => Promise<void> } {
  const samples: Sample[] = [];
  let running = true;
  const loop = (async () => {
    for (let k = 0; running; k++) {
      const at = Date.now();
      try {
        const r = await fn(k);
        samples.push({ at, ms: Date.now() - at, ...r });
      } catch (err) {
        samples.push({ at, ms: Date.now() - at, status: 0, backend: null, error: (err as Error).message });
      }
      await sleep(everyMs);
    }
  })();
  return {
    samples,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function page(gw: GatewayProc, path: string, timeoutMs = 5_000): Promise<Omit<Sample, 'at' | 'ms'>> {
  const res = await httpRequest(gw.port, path, { timeoutMs });
  return { status: res.status, backend: (res.headers['x-backend-id'] as string | undefined) ?? null };
}

const during = (samples: readonly Sample[], from: number, to: number): Sample[] => samples.filter((s) => s.at >= from && s.at < to);
const longest = (samples: readonly Sample[]): number => Math.max(0, ...samples.map((s) => s.ms));
const describeSamples = (samples: readonly Sample[]): string => samples.map((s) => `+${s.ms} ms ${s.status} ${s.backend ?? ''} ${s.error ?? ''}`).join('\n');

interface Status {
  degraded: boolean;
  ready: boolean;
}

// --- gateway <-> Redis ------------------------------------------------------------------------

describe('the gateway <-> Redis link: black-holed, reset, delayed', () => {
  const COMMAND_TIMEOUT_MS = 500;
  const HEARTBEAT_MS = 250;
  /** A bound on any answer that may wait on one Redis call, with room for a loaded 2-core machine. */
  const ANSWER_BOUND_MS = COMMAND_TIMEOUT_MS + 1_000;
  /**
   * Long enough for the silent connection to be replaced (4 command timeouts after the first
   * command the black hole swallowed, one heartbeat in at most) with a second to spare.
   */
  const HOLE_MS = HEARTBEAT_MS + 4 * COMMAND_TIMEOUT_MS + 1_000;
  let link: FaultProxy;
  let gw: GatewayProc;
  let backends: BackendProc[];
  const fleet = new RoomFleet();
  let watcher: SplitWatcher;
  /** A plain client to ping through a live socket. */
  let pinger: Client;

  beforeAll(async () => {
    const redis = await startRedis();
    link = await FaultProxy.start(redis.port);
    backends = await startBackends(['r1', 'r2']);
    gw = await startGateway({
      backends,
      config: {
        redis: { url: link.redisUrl, commandTimeoutMs: COMMAND_TIMEOUT_MS },
        placement: { heartbeatMs: HEARTBEAT_MS, gatewayTtlMs: 1_000 },
      },
    });
    const target = { name: 'gw', wsUrl: gw.wsUrl };
    for (let i = 0; i < 6; i++) for (let j = 0; j < 2; j++) fleet.add(`redis-room-${i}`, target);
    pinger = new Client(`${gw.wsUrl}/ws/live/?room=redis-room-0`);
    await withTimeout(pinger.join('redis-room-0'), 10_000, 'the pinger joins');
    await waitFor('every room client live', 10_000, () => fleet.liveCount() === fleet.size);
    watcher = new SplitWatcher(() => witnessOf(backends));
    watcher.start();
  });

  afterAll(async () => {
    await watcher?.stop();
    fleet.stop();
  });

  /**
   * The link broken by `start` for faultMs, then restored; meanwhile page GETs (live rooms, and a new room every other time), the shared-data API
   * (each answer is one Redis call), /readyz on the public port and /status on the admin port.
   */
  async function underFault(name: string, start: () => Promise<void>, faultMs: number) {
    const lines = gw.lines.length;
    const before = fleet.clients.map((c) => c.backend);
    const pages = probe(40, (k) => page(gw, k % 2 === 0 ? `/game/redis-room-${k % 6}/` : `/game/${name}-new-${k}/`));
    const api = probe(40, async () => ({ ...(await page(gw, '/_roomgate/api/online')), backend: null }));
    const ready = probe(50, async () => ({ ...(await page(gw, '/readyz')), backend: null }));
    const status: { at: number; s: Status }[] = [];
    const statusProbe = probe(25, async () => {
      status.push({ at: Date.now(), s: await adminGet<Status & Record<string, unknown>>(gw, '/status') });
      return { status: 200, backend: null };
    });
    await sleep(300);
    const faultAt = Date.now();
    await start();
    await sleep(faultMs);
    const restoredAt = Date.now();
    await link.restore();
    // Out of degraded mode: a heartbeat has written back the live rooms and reconciled.
    const back = await waitFor('the gateway out of degraded mode', 15_000, async () => {
      const s = await adminGet<Status>(gw, '/status');
      return s.degraded ? null : Date.now();
    }, 10);
    await sleep(300);
    await Promise.all([pages, api, ready, statusProbe].map((p) => p.stop()));
    const closes = fleet.closesSince(faultAt);
    const moved = fleet.clients.filter((c, i) => c.backend !== before[i]);
    const degradedAt = status.find((x) => x.at >= faultAt && x.s.degraded)?.at ?? null;
    return {
      lines,
      faultAt,
      restoredAt,
      recoverMs: back - restoredAt,
      degradedAfterMs: degradedAt === null ? null : degradedAt - faultAt,
      pages: during(pages.samples, faultAt, back),
      api: during(api.samples, faultAt, back),
      ready: ready.samples,
      status,
      closes,
      moved,
    };
  }

  /**
   * What the docs promise with Redis unreachable: page GETs answered (200) within one command
   * timeout, the API (one Redis call per answer) answered within it too, never hung, /readyz 200,
   * degraded mode entered, no socket closed, no client moved, no room split. Returns the failed GETs.
   */
  function expectDegradedRouting(r: Awaited<ReturnType<typeof underFault>>): Sample[] {
    const failed = r.pages.filter((s) => s.status !== 200);
    expect(failed, `page GETs not answered 200 during the fault:\n${describeSamples(failed)}`).toEqual([]);
    expect(r.pages.length).toBeGreaterThan(10);
    expect(longest(r.pages), 'the longest page GET during the fault').toBeLessThan(ANSWER_BOUND_MS);
    const apiLate = r.api.filter((s) => s.status === 0 || s.ms >= ANSWER_BOUND_MS);
    expect(apiLate, `API calls not answered within ${ANSWER_BOUND_MS} ms:\n${describeSamples(apiLate)}`).toEqual([]);
    expect(r.ready.filter((s) => s.status !== 200), 'readiness never depends on Redis').toEqual([]);
    expect(r.status.every((x) => x.s.ready)).toBe(true);
    expect(r.degradedAfterMs, 'the gateway went degraded').not.toBeNull();
    expect(r.closes.map((c) => c.client.room), 'sockets closed').toEqual([]);
    expect(r.moved.map((c) => c.room), 'clients on another backend').toEqual([]);
    expect(watcher.since(r.faultAt)).toEqual([]);
    return failed;
  }

  it('black-holed: every Redis call fails within commandTimeoutMs, routing goes on degraded, no socket dropped, /readyz stays 200', async () => {
    const r = await underFault('hole', () => link.blackhole(), HOLE_MS);
    const failed = expectDegradedRouting(r);
    expect(r.api.some((s) => s.status === 503), 'the API said the store is unavailable').toBe(true);
    await pingPong(pinger);
    // The silent connection was given up on (it stayed open and "ready": no RST, no FIN): the store
    // said unavailable during the fault, and from then on the gateway did not claim it reachable
    // again (a recovery attempt each heartbeat, each timing out) until the link healed.
    const logs = logsFrom(gw, r.lines);
    const inFault = logs.filter((l) => Date.parse(String(l.time)) < r.restoredAt);
    const givenUp = inFault.findIndex((l) => l.msg === 'redis placement store: unavailable');
    expect(givenUp, 'the black-holed connection reported unavailable').toBeGreaterThanOrEqual(0);
    const falseHopes = inFault.slice(givenUp).filter((l) => l.msg === 'placement store reachable again: restoring and reconciling');
    expect(falseHopes, 'recoveries started while the link was black-holed').toEqual([]);
    expect(logs.some((l) => l.msg === 'reconciliation done')).toBe(true);
    recordChaos({
      id: 'redis-black-hole',
      fault: `gateway <-> Redis link black-holed (no RST, no FIN) for ${HOLE_MS / 1000} s`,
      promise: 'No request waits on Redis longer than redis.commandTimeoutMs; the gateway routes degraded from cache and ring, keeps every socket and stays ready; a connection silent for 4 x commandTimeoutMs is replaced, and degraded mode ends once a fresh one answers after the link heals (reconnect back-off at most 2 s)',
      figures: {
        recoverMs: r.recoverMs,
        roomsMoved: r.moved.length,
        socketsDropped: r.closes.length,
        requestsFailed: failed.length + r.ready.filter((s) => s.status !== 200).length,
        roomsSplit: watcher.since(r.faultAt).length,
        other: [
          `longest page GET ${longest(r.pages)} ms (${r.pages.length} GETs)`,
          `longest API answer ${longest(r.api)} ms (commandTimeoutMs ${COMMAND_TIMEOUT_MS})`,
          `degraded after ${r.degradedAfterMs} ms`,
          `${inFault.filter((l) => l.msg === 'placement store reachable again: restoring and reconciling').length} recovery attempts while black-holed`,
        ],
      },
      file: import.meta.url,
      test: 'black-holed: every Redis call fails within commandTimeoutMs, routing goes on degraded, no socket dropped, /readyz stays 200',
    });
  });

  it('reset (RST on every connection, new ones too): degraded at once, no socket dropped, back after the link heals', async () => {
    const r = await underFault('rst', () => link.reset(), 1_500);
    const failed = expectDegradedRouting(r);
    await pingPong(pinger);
    recordChaos({
      id: 'redis-link-reset',
      fault: 'gateway <-> Redis connections reset (RST), reconnects reset too, for 1.5 s',
      promise: 'As with Redis down: routing goes on degraded, no socket dropped, readiness unaffected; reconnected and reconciled after the link heals',
      figures: {
        recoverMs: r.recoverMs,
        roomsMoved: r.moved.length,
        socketsDropped: r.closes.length,
        requestsFailed: failed.length,
        roomsSplit: watcher.since(r.faultAt).length,
        other: [`longest page GET ${longest(r.pages)} ms`, `degraded after ${r.degradedAfterMs} ms`],
      },
      file: import.meta.url,
      test: 'reset (RST on every connection, new ones too): degraded at once, no socket dropped, back after the link heals',
    });
  });

  it('delayed below commandTimeoutMs: no degraded mode at all', async () => {
    const DELAY_MS = 60; // each way: a 120 ms round trip, well under the 500 ms command timeout
    const lines = gw.lines.length;
    const pages = probe(40, (k) => page(gw, k % 2 === 0 ? `/game/redis-room-${k % 6}/` : `/game/slow-new-${k}/`));
    const api = probe(40, async () => ({ ...(await page(gw, '/_roomgate/api/online')), backend: null }));
    const status: boolean[] = [];
    const statusProbe = probe(25, async () => {
      status.push((await adminGet<Status>(gw, '/status')).degraded);
      return { status: 200, backend: null };
    });
    const faultAt = Date.now();
    await link.delay(DELAY_MS);
    await sleep(2_000);
    await link.restore();
    await Promise.all([pages, api, statusProbe].map((p) => p.stop()));
    const degradedLogs = logsFrom(gw, lines).filter((l) => String(l.msg).startsWith('placement store unreachable'));
    expect(status.filter((d) => d).length, 'samples of /status that said degraded').toBe(0);
    expect(degradedLogs).toEqual([]);
    expect(api.samples.filter((s) => s.status !== 200), describeSamples(api.samples)).toEqual([]);
    // The API waits on Redis: the delay shows in its answers (a check that the link was delayed).
    expect(Math.max(...api.samples.map((s) => s.ms))).toBeGreaterThanOrEqual(2 * DELAY_MS);
    const failed = pages.samples.filter((s) => s.status !== 200);
    expect(failed).toEqual([]);
    expect(fleet.closesSince(faultAt)).toEqual([]);
    recordChaos({
      id: 'redis-link-delay',
      fault: `gateway <-> Redis link delayed ${DELAY_MS} ms each way (below redis.commandTimeoutMs)`,
      promise: 'A slow Redis within commandTimeoutMs is no outage: no degraded mode, nothing refused',
      figures: {
        recoverMs: null,
        roomsMoved: 0,
        socketsDropped: fleet.closesSince(faultAt).length,
        requestsFailed: failed.length + api.samples.filter((s) => s.status !== 200).length,
        roomsSplit: watcher.since(faultAt).length,
        other: [`longest page GET ${longest(pages.samples)} ms`, `longest API answer ${longest(api.samples)} ms`, `${status.length} /status samples, none degraded`],
      },
      file: import.meta.url,
      test: 'delayed below commandTimeoutMs: no degraded mode at all',
    });
  });
});

// --- gateway <-> backend ----------------------------------------------------------------------

describe('a stalled backend: SIGSTOP, its link black-holed, its link reset', () => {
  // HTTP checks (a TCP connect check passes while the kernel accepts for a stopped process, and
  // through a black hole the injector accepts: see test/support/fault-proxy.ts), fast ones.
  const HEALTH = { path: '/healthz', intervalMs: 250, timeoutMs: 200, rise: 2, fall: 2 };
  /** The latest a check-driven verdict can come: `fall` checks, each up to one jittered interval apart, the last one timing out. */
  const VERDICT_MS = HEALTH.fall * HEALTH.intervalMs * 1.1 + HEALTH.timeoutMs;
  /** Slack for a loaded 2-core machine: the bound asserted is VERDICT_MS + this. */
  const SLACK_MS = 2_000;
  const RESPONSE_TIMEOUT_MS = 1_500;
  let n1: BackendProc;
  let n2: BackendProc;
  let link: FaultProxy;
  /** health.onDown keep (the default). */
  let gw: GatewayProc;
  /** health.onDown close, with rooms of its own (only in the black-hole test). */
  let gwClose: GatewayProc;
  const fleet = new RoomFleet();
  let watcher: SplitWatcher;
  const ring = buildRing([{ id: 'n1', weight: 1 }, { id: 'n2', weight: 1 }]);
  /** n rooms whose ring owner is `owner`. */
  const roomsOf = (owner: string, prefix: string, n: number): string[] =>
    Array.from({ length: 200 }, (_, i) => `${prefix}-${i}`).filter((r) => ring.first(r) === owner).slice(0, n);
  const onN1 = roomsOf('n1', 'net', 3);
  const onN2 = roomsOf('n2', 'net', 2);

  beforeAll(async () => {
    [n1, n2] = (await startBackends(['n1', 'n2'])) as [BackendProc, BackendProc];
    link = await FaultProxy.start(n1.port);
    const backends = [`n1=${link.url}`, `n2=${n2.url}`];
    const config = { proxy: { responseTimeoutMs: RESPONSE_TIMEOUT_MS }, placement: { heartbeatMs: 250, gatewayTtlMs: 1_000 } };
    [gw, gwClose] = await Promise.all([
      startGateway({ backends, config: { ...config, health: HEALTH } }),
      startGateway({ backends, config: { ...config, health: { ...HEALTH, onDown: 'close' } } }),
    ]);
    for (const room of [...onN1, ...onN2]) for (let j = 0; j < 2; j++) fleet.add(room, { name: 'keep', wsUrl: gw.wsUrl });
    await waitFor('every room client live', 10_000, () => fleet.liveCount() === fleet.size);
    expect(fleet.clients.filter((c) => c.backend !== ring.first(c.room)).map((c) => c.room), 'rooms off their ring owner').toEqual([]);
    watcher = new SplitWatcher(() => witnessOf([n1, n2]));
    watcher.start();
  });

  afterAll(async () => {
    await watcher?.stop();
    fleet.stop();
  });

  const healthOf = async (g: GatewayProc, id: string): Promise<string> => (await adminGet<{ state: string }>(g, `/backends/${id}`)).state;
  /** The time at which `g` first shows n1 in `state` (polled every 20 ms). */
  const n1Becomes = (g: GatewayProc, state: 'up' | 'down', ms = 15_000): Promise<number> =>
    waitFor(`n1 ${state} in the gateway's view`, ms, async () => ((await healthOf(g, 'n1')) === state ? Date.now() : null));
  /** A joined client of a room (to ping through, or to see where a new room goes). */
  const join = async (room: string): Promise<{ client: Client; backend: string }> => {
    const client = new Client(`${gw.wsUrl}/ws/live/?room=${room}`);
    return { client, backend: await withTimeout(client.join(room), 10_000, `join ${room}`) };
  };
  const on = (clients: readonly RoomClient[], backend: string): RoomClient[] => clients.filter((c) => c.backend === backend);

  it('SIGSTOP (keep): down within fall checks, its live sockets kept, new rooms elsewhere, its rooms whole; SIGCONT: up, sockets carry frames again', async () => {
    const pinger = await join(onN1[0] as string);
    expect(pinger.backend).toBe('n1');
    const before = fleet.clients.map((c) => c.backend);
    const t0 = Date.now();
    n1.child.kill('SIGSTOP');
    let detectMs: number;
    let stuck: Sample;
    let fresh: string[];
    try {
      detectMs = (await n1Becomes(gw, 'down')) - t0;
      // New rooms whose ring owner is n1 go to n2; a page of a live n1 room still goes to n1
      // (sticky-live: the room stays whole), where nobody answers: 504 after responseTimeoutMs.
      const [joined, stuckPage] = await Promise.all([
        Promise.all(roomsOf('n1', 'stop-new', 3).map(join)),
        (async (): Promise<Sample> => {
          const at = Date.now();
          return { at, ...(await page(gw, `/game/${onN1[1]}/`)), ms: Date.now() - at };
        })(),
      ]);
      fresh = joined.map((j) => j.backend);
      stuck = stuckPage;
      expect(await page(gw, `/game/${onN2[0]}/`)).toEqual({ status: 200, backend: 'n2' });
    } finally {
      n1.child.kill('SIGCONT');
    }
    const contAt = Date.now();
    const recoverMs = (await n1Becomes(gw, 'up')) - contAt;
    await pingPong(pinger.client);
    const closes = fleet.closesSince(t0);
    const moved = fleet.clients.filter((c, i) => c.backend !== before[i]);
    expect(detectMs, `down after ${detectMs} ms; checks every ${HEALTH.intervalMs} ms, fall ${HEALTH.fall}, timeout ${HEALTH.timeoutMs} ms`).toBeLessThan(VERDICT_MS + SLACK_MS);
    expect(fresh, 'new rooms of n1 while it is down').toEqual(['n2', 'n2', 'n2']);
    expect(stuck.status, 'a page of a live room of the stopped backend').toBe(504);
    expect(closes.map((c) => c.client.room), 'sockets closed (keep: none)').toEqual([]);
    expect(moved.map((c) => c.room)).toEqual([]);
    expect(watcher.since(t0)).toEqual([]);
    await pinger.client.close();
    recordChaos({
      id: 'backend-sigstop',
      fault: 'a backend stopped (SIGSTOP) for about 2 s: the kernel still accepts its connections, nothing answers',
      promise: "The HTTP health check marks it down within fall checks; health.onDown keep keeps its live sockets and sends its live rooms' requests there (the room stays whole); new rooms go elsewhere; after SIGCONT it is up after rise checks and its sockets carry frames again",
      figures: {
        recoverMs,
        roomsMoved: moved.length,
        socketsDropped: closes.length,
        requestsFailed: 1,
        roomsSplit: watcher.since(t0).length,
        other: [
          `down after ${detectMs} ms (fall ${HEALTH.fall} x interval ${HEALTH.intervalMs} ms, timeout ${HEALTH.timeoutMs} ms: at most ~${Math.round(VERDICT_MS)} ms)`,
          `a page of a live room there: ${stuck.status} after ${stuck.ms} ms (responseTimeoutMs ${RESPONSE_TIMEOUT_MS})`,
          `new rooms of its ring share: ${fresh.join(', ')}`,
        ],
      },
      file: import.meta.url,
      test: 'SIGSTOP (keep): down within fall checks, its live sockets kept, new rooms elsewhere, its rooms whole; SIGCONT: up, sockets carry frames again',
    });
  });

  it('link black-holed (keep and close): down within fall checks; keep holds its sockets and they carry frames after restore; close moves its rooms, the cut-off backend keeps stale copies until the link heals', async () => {
    // The SIGSTOP test before this one took n1 down in both gateways' views; the close gateway
    // must see it up again before its rooms are placed (a loaded run once placed them on n2).
    await Promise.all([n1Becomes(gw, 'up'), n1Becomes(gwClose, 'up')]);
    const pinger = await join(onN1[0] as string);
    expect(pinger.backend).toBe('n1');
    const closeFleet = new RoomFleet();
    for (const room of roomsOf('n1', 'close', 2)) for (let j = 0; j < 2; j++) closeFleet.add(room, { name: 'close', wsUrl: gwClose.wsUrl });
    await waitFor('the close gateway\'s clients live on n1', 10_000, () => closeFleet.clients.every((c) => c.backend === 'n1'));
    const before = fleet.clients.map((c) => c.backend);
    const closeRooms = closeFleet.rooms();
    const t0 = Date.now();
    await link.blackhole();
    const [downKeep, downClose] = await Promise.all([n1Becomes(gw, 'down'), n1Becomes(gwClose, 'down')]);
    // close: its sockets of n1 are closed, its clients reconnect and their rooms move to n2.
    const closeBackAt = await waitFor('the close gateway\'s clients live on n2', 15_000, () =>
      closeFleet.clients.every((c) => c.backend === 'n2') ? Date.now() : null,
    );
    const fresh = await Promise.all(roomsOf('n1', 'hole-new', 3).map(join));
    // The cut-off n1 never saw those sockets close (no FIN crosses a black hole): it still holds the
    // rooms the close gateway moved, while their clients are on n2.
    const stale = (await backendRooms([n1])).get('n1') ?? {};
    const staleRooms = closeRooms.filter((r) => stale[r] !== undefined);
    await sleep(Math.max(0, 2_000 - (Date.now() - t0)));
    const restoredAt = Date.now();
    await link.restore();
    const recoverMs = (await n1Becomes(gw, 'up')) - restoredAt;
    // What the black hole held is delivered: the kept socket carries frames again, and n1 learns that
    // the moved rooms' old sockets are gone.
    await pingPong(pinger.client);
    const staleGoneMs = (await waitFor('n1 to drop the moved rooms', 10_000, async () => {
      const rooms = (await backendRooms([n1])).get('n1') ?? {};
      return closeRooms.every((r) => rooms[r] === undefined) ? Date.now() : null;
    })) - restoredAt;
    const closes = fleet.closesSince(t0);
    const moved = fleet.clients.filter((c, i) => c.backend !== before[i]);
    const closeDropped = closeFleet.closesSince(t0).length;
    const splits = watcher.since(t0);
    const keepSplits = splits.filter((v) => !closeRooms.includes(v.room));
    for (const ms of [downKeep - t0, downClose - t0]) expect(ms).toBeLessThan(VERDICT_MS + SLACK_MS);
    expect(fresh.map((f) => f.backend), 'new rooms of n1 while it is down').toEqual(['n2', 'n2', 'n2']);
    expect(closes.map((c) => c.client.room), 'keep: sockets closed').toEqual([]);
    expect(moved.map((c) => c.room), 'keep: clients moved').toEqual([]);
    expect(keepSplits, watcher.describe(keepSplits)).toEqual([]);
    expect(closeDropped, 'close: every socket of n1 closed').toBe(closeFleet.size);
    expect(staleRooms, 'rooms the cut-off backend still held after they moved').toEqual(closeRooms);
    closeFleet.stop();
    await Promise.all([pinger.client.close(), ...fresh.map((f) => f.client.close())]);
    recordChaos({
      id: 'backend-link-black-hole',
      fault: 'gateway <-> backend link black-holed (no RST, no FIN, connects accepted and never answered) for 2 s',
      promise: 'The HTTP health check marks the backend down within fall checks; keep: its live sockets stay and carry frames once the link heals, its rooms never move; close: its sockets are closed and their rooms move; new rooms go elsewhere',
      figures: {
        recoverMs,
        roomsMoved: moved.length,
        socketsDropped: closes.length,
        requestsFailed: 0,
        roomsSplit: keepSplits.length,
        other: [
          `down after ${downKeep - t0} ms (keep gateway), ${downClose - t0} ms (close gateway); at most ~${Math.round(VERDICT_MS)} ms by the config`,
          `close: ${closeDropped} sockets closed, back on n2 ${closeBackAt - t0} ms after the fault began; n1 kept ${staleRooms.length} stale copies of those rooms until ${staleGoneMs} ms after the link healed`,
        ],
      },
      file: import.meta.url,
      test: 'link black-holed (keep and close): down within fall checks; keep holds its sockets and they carry frames after restore; close moves its rooms, the cut-off backend keeps stale copies until the link heals',
    });
  });

  it('link reset (RST): its sockets close at once, its rooms move once it is down, and stay moved after the link heals', async () => {
    await n1Becomes(gw, 'up');
    const ofN1 = on(fleet.clients, 'n1');
    const rooms = [...new Set(ofN1.map((c) => c.room))];
    expect(rooms.length).toBeGreaterThan(0);
    const pages = probe(40, (k) => page(gw, `/game/${rooms[k % rooms.length]}/`));
    const t0 = Date.now();
    await link.reset();
    const closedAt = await waitFor('every socket of n1 closed', 10_000, () =>
      ofN1.every((c) => c.closesSince(t0).length > 0) ? Math.max(...ofN1.map((c) => c.closesSince(t0)[0] as number)) : null,
    );
    const downAt = await n1Becomes(gw, 'down');
    const backAt = await waitFor("n1's clients live on n2", 15_000, () => (ofN1.every((c) => c.backend === 'n2') ? Date.now() : null));
    await sleep(Math.max(0, 1_500 - (Date.now() - t0)));
    const restoredAt = Date.now();
    await link.restore();
    await n1Becomes(gw, 'up');
    await sleep(500);
    await pages.stop();
    const failed = pages.samples.filter((s) => s.status !== 200);
    const others = fleet.clients.filter((c) => !ofN1.includes(c));
    const splits = watcher.since(t0);
    expect(closedAt - t0, 'sockets of the reset backend close at once').toBeLessThan(1_000 + SLACK_MS);
    expect(downAt - t0).toBeLessThan(VERDICT_MS + SLACK_MS);
    // Rooms never move back: n1 takes new rooms only.
    expect(ofN1.filter((c) => c.backend !== 'n2' || c.closesSince(restoredAt).length > 0).map((c) => c.room), 'clients that left n2 after the link healed').toEqual([]);
    expect(others.flatMap((c) => c.closesSince(t0)), 'sockets of other backends closed').toEqual([]);
    expect(splits, watcher.describe(splits)).toEqual([]);
    expect(pages.samples.filter((s) => s.at > backAt && s.status !== 200), 'page GETs failed after the rooms moved').toEqual([]);
    recordChaos({
      id: 'backend-link-reset',
      fault: 'gateway <-> backend connections reset (RST), new ones too, for 1.5 s',
      promise: "A reset connection closes its socket at once; the backend is down within fall checks and its rooms move on their clients' next socket; they stay on the new backend after the link heals",
      figures: {
        recoverMs: backAt - t0,
        roomsMoved: rooms.length,
        socketsDropped: ofN1.length,
        requestsFailed: failed.length,
        roomsSplit: splits.length,
        other: [
          `sockets closed ${closedAt - t0} ms after the reset; down after ${downAt - t0} ms`,
          `page GETs of its rooms: ${failed.length} of ${pages.samples.length} failed (${[...new Set(failed.map((s) => s.status))].join(', ')}), all before the rooms moved`,
          'after the link healed: 0 clients went back to it',
        ],
      },
      file: import.meta.url,
      test: 'link reset (RST): its sockets close at once, its rooms move once it is down, and stay moved after the link heals',
    });
  });
});
