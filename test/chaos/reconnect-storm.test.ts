// A reconnect storm: the backend holding 3,000 sockets of 300 rooms is killed (kill -9), and its
// clients reconnect on djust's own schedule (test/support/djust-clients.ts: reconnect attempt n
// waits max(500, rand * min(1000 * 2^(n-1), 30000)) ms, a 503 is a failed attempt, 10 failed
// attempts in a row and the client gives up). Real processes: a redis-server, three demo
// backends, two gateways sharing it, with the default admission limits, health checks and
// heartbeats; each room's clients go through both gateways, so both place the room again at once.
// What roomgate promises: every client is back within djust's schedule (none gives up; the target
// is p99 <= 5 s from its socket's close to mounted again), each room lands on one survivor (never
// on two backends at once), and the other rooms' sockets are not touched. The times are the chaos
// table's figure, with where they went (djust's drawn waits, refused attempts, handshakes, the
// clients' own lag, CPU), not asserted: they move with the machine's load (p99 3 s at load 5, 12 s
// at load 24 with no attempt refused). What is asserted of time is roomgate's part of it: the p99
// of djust's drawn waits (the back-off that refused attempts add) within the target, and every
// client back within STORM_BOUND_MS.
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { treeCpuMs } from '../../bench/suite/cpu.js';
import { configSchema } from '../../src/config/schema.js';
import { recordChaos } from '../support/chaos.js';
import { DJUST_MAX_ATTEMPTS, DjustClient, attemptsHistogram, failedAttempts, stopAllDjustClients, type AttemptRecord } from '../support/djust-clients.js';
import { stop, waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { SplitWatcher, percentile, sampleRooms, sleep, type GatewayTarget } from '../support/room-clients.js';
import { startTwoGateways, stopTwoGateways, type TwoGateways } from '../support/two-gateways.js';

/** Rooms of the backend that is killed, and clients per room: 3,000 sockets. */
const ROOMS = 300;
const PER_ROOM = 10;
/** Rooms opened with one client each, to find ROOMS of them on one backend (a third land on each). */
const CANDIDATE_ROOMS = 1_050;
/** Clients opened per batch, and the pause between batches, while the rooms fill (before the fault). */
const OPEN_BATCH = 100;
const OPEN_EVERY_MS = 150;
/** The target (issue 30): p99 of close -> mounted again (the figure), and of djust's drawn waits (asserted). */
const TARGET_P99_MS = 5_000;
/** Longest wait for the storm to end: every client back or given up. */
const STORM_BOUND_MS = 45_000;

const DEFAULTS = configSchema.parse({});
/** The gateways log at info, as deployed (the harness's debug level adds lines per upgrade). */
const LOG = { ROOMGATE_LOG_LEVEL: 'info' };

let backends: BackendProc[];
let gwA: GatewayProc;
let gwB: GatewayProc;
let watcher: SplitWatcher;
let cluster: TwoGateways | undefined;
const clients: DjustClient[] = [];

const target = (name: string, gw: () => GatewayProc): GatewayTarget => ({
  name,
  get wsUrl() {
    return gw().wsUrl;
  },
});
const A = target('A', () => gwA);
const B = target('B', () => gwB);

function config(redisUrl: string, bs: readonly BackendProc[]): Record<string, unknown> {
  // Everything at its default (boundedLoadFactor too: the harness turns it off for routing tests).
  return {
    backends: bs.map((b) => ({ id: b.id, url: b.url })),
    redis: { url: redisUrl },
    placement: { boundedLoadFactor: DEFAULTS.placement.boundedLoadFactor },
  };
}

beforeAll(async () => {
  cluster = await startTwoGateways(['b1', 'b2', 'b3'], config, LOG);
  ({ backends, gwA, gwB, watcher } = cluster);
}, 60_000);

afterAll(async () => {
  await stopTwoGateways(cluster, stopAllDjustClients);
}, 30_000);

/** A client of the room; a room's clients alternate between the two gateways. */
function newClient(room: string, i: number): DjustClient {
  const c = new DjustClient(room, i % 2 === 0 ? A : B);
  clients.push(c);
  return c;
}

/** Starts the clients a batch at a time (a page load each), as users arriving would. */
async function openPaced(list: readonly DjustClient[]): Promise<void> {
  for (let i = 0; i < list.length; i += OPEN_BATCH) {
    if (i > 0) await sleep(OPEN_EVERY_MS);
    for (const c of list.slice(i, i + OPEN_BATCH)) c.start();
  }
}

/** room -> backend, once every client given is mounted and each room's clients share one backend. */
function settled(list: readonly DjustClient[], what: string, timeoutMs: number): Promise<Map<string, string>> {
  return waitFor(
    what,
    timeoutMs,
    () => {
      const out = new Map<string, string>();
      for (const c of list) {
        if (c.backend === null) return null;
        const b = out.get(c.room);
        if (b !== undefined && b !== c.backend) return null;
        out.set(c.room, c.backend);
      }
      return out;
    },
    100,
  );
}

interface Scene {
  readonly victim: BackendProc;
  readonly rooms: readonly string[];
  /** The victim's clients: ROOMS x PER_ROOM. */
  readonly storm: readonly DjustClient[];
  /** One client in each room of the survivors. */
  readonly others: readonly DjustClient[];
  readonly before: Map<string, string>;
  readonly victimSockets: number;
}

/**
 * Candidate rooms with one client each; ROOMS of the rooms on the backend most of them landed on
 * get PER_ROOM clients (that backend is the victim); its other rooms leave; the survivors' rooms
 * keep their one client.
 */
async function fillRooms(): Promise<Scene> {
  const candidates = Array.from({ length: CANDIDATE_ROOMS }, (_, r) => newClient(`s-${r}`, r));
  await openPaced(candidates);
  await settled(candidates, 'every candidate room mounted', 30_000);
  const byBackend = new Map<string, string[]>();
  for (const c of candidates) byBackend.set(c.backend as string, [...(byBackend.get(c.backend as string) ?? []), c.room]);
  const [victimId, all] = [...byBackend].sort((a, b) => b[1].length - a[1].length)[0] as [string, string[]];
  expect(all.length, `candidate rooms on ${victimId}`).toBeGreaterThanOrEqual(ROOMS);
  const rooms = all.slice(0, ROOMS);
  const stormRooms = new Set(rooms);
  for (const c of candidates) if (c.backend === victimId && !stormRooms.has(c.room)) c.stop();
  const others = candidates.filter((c) => c.backend !== victimId);
  await openPaced(rooms.flatMap((room) => Array.from({ length: PER_ROOM - 1 }, (_, i) => newClient(room, i + 1))));
  const storm = clients.filter((c) => stormRooms.has(c.room) && c.state !== 'stopped');
  expect(storm.length).toBe(ROOMS * PER_ROOM);
  const before = await settled([...storm, ...others], 'every client mounted, each room on one backend', 40_000);
  for (const room of rooms) expect(before.get(room)).toBe(victimId);
  const victim = backends.find((b) => b.id === victimId) as BackendProc;
  // The witness: the victim itself says how many sockets it holds.
  const held = (await sampleRooms([victim])).rooms.get(victimId) ?? {};
  return { victim, rooms, storm, others, before, victimSockets: Object.values(held).reduce((a, b) => a + b, 0) };
}

interface Storm {
  readonly killedAt: number;
  /** Every storm client back or given up within STORM_BOUND_MS. */
  readonly ended: boolean;
  readonly endedAt: number;
  /** CPU used during the storm (ms): gateway A, gateway B, then the survivors in order, then this process. */
  readonly cpuMs: readonly number[];
  /** This process's event-loop delay p99 (ms): how late the emulated clients ran. */
  readonly loopP99Ms: number;
}

/** kill -9 of the victim; waits until each of its clients saw its socket close and is back (or gave up). */
async function killAndWait(s: Scene, survivors: readonly BackendProc[]): Promise<Storm> {
  const procs = [gwA, gwB, ...survivors];
  const cpuBefore = procs.map((p) => treeCpuMs(p.child.pid as number));
  const selfCpu = process.cpuUsage();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const killedAt = Date.now();
  await stop(s.victim, 'SIGKILL');
  const ended = await waitFor('every client of the killed backend back or given up', STORM_BOUND_MS, () => s.storm.every((c) => c.outagesSince(killedAt).length > 0 && (c.live || c.state === 'gave-up')), 100).then(
    () => true,
    () => false,
  );
  const endedAt = Date.now();
  loop.disable();
  const self = process.cpuUsage(selfCpu);
  const cpuMs = [...procs.map((p, i) => treeCpuMs(p.child.pid as number) - (cpuBefore[i] as number)), (self.user + self.system) / 1000];
  return { killedAt, ended, endedAt, cpuMs: cpuMs.map(Math.round), loopP99Ms: Math.round(loop.percentile(99) / 1e6) };
}

const p = (values: readonly number[], q: number): number => Math.round(percentile(values, q));

/** "kind n" per failed outcome, with when each kind came (ms after the kill). */
function failedLine(attempts: readonly AttemptRecord[], killedAt: number): string {
  const failed = failedAttempts(attempts);
  if (failed.length === 0) return 'failed attempts: none';
  const windows = failed.map(([kind]) => {
    const at = attempts.filter((a) => a.outcome === kind).map((a) => a.endedAt - killedAt);
    return `${kind} ${Math.min(...at)}-${Math.max(...at)} ms`;
  });
  return `failed attempts: ${failed.map(([k, n]) => `${k} ${n}`).join(', ')} (after the kill: ${windows.join(', ')})`;
}

describe('reconnect storm: the backend of 3,000 sockets killed, clients back on djust schedule', () => {
  it('every client back within djust schedule (none gives up), each room on one survivor, other rooms untouched', async () => {
    const s = await fillRooms();
    expect(s.victimSockets).toBe(ROOMS * PER_ROOM);
    const survivors = backends.filter((b) => b !== s.victim);
    const w = await killAndWait(s, survivors);
    const { killedAt } = w;

    // No room on two backends at once: asserted first, whatever else went wrong.
    const split = watcher.since(killedAt);
    expect(split.length, watcher.describe(split.slice(0, 10))).toBe(0);
    const gaveUp = s.storm.filter((c) => c.state === 'gave-up');
    expect(gaveUp.length, `clients that gave up after ${DJUST_MAX_ATTEMPTS} attempts`).toBe(0);
    const notBack = s.storm.filter((c) => !c.live);
    expect(w.ended, `every client back within ${STORM_BOUND_MS} ms; not back: ${notBack.length}, e.g. ${JSON.stringify(notBack[0]?.attempts.slice(-3))}`).toBe(true);
    const after = await settled([...s.storm, ...s.others], 'every room on one backend after the storm', 10_000);
    expect(s.rooms.filter((r) => after.get(r) === s.victim.id)).toEqual([]);
    const othersMoved = s.others.filter((c) => after.get(c.room) !== s.before.get(c.room)).map((c) => c.room);
    const othersClosed = s.others.filter((c) => c.outagesSince(killedAt).length > 0).map((c) => c.room);
    expect(othersMoved, 'rooms of the survivors that moved').toEqual([]);
    expect(othersClosed, 'sockets of the survivors closed').toEqual([]);

    const first = s.storm.map((c) => c.outagesSince(killedAt)[0]).filter((o) => o !== undefined);
    expect(first.length, 'every storm client saw its socket close').toBe(s.storm.length);
    const back = first.map((o) => (o.backAt as number) - o.closedAt);
    const scheduled = first.map((o) => o.scheduledMs);
    const rest = first.map((o, i) => (back[i] as number) - o.scheduledMs);
    const p99 = p(back, 99);
    // The back-off roomgate's refusals cost (one attempt: at most 1 s; a refused one adds up to 2 s, a second up to 4 s).
    expect(p(scheduled, 99), "p99 of djust's drawn waits until each client was back").toBeLessThanOrEqual(TARGET_P99_MS);

    const attempts = s.storm.flatMap((c) => c.attemptsSince(killedAt));
    const mounted = attempts.filter((a) => a.outcome === 'mounted');
    const upgrade = mounted.map((a) => a.openedAt - a.startedAt);
    const mount = mounted.map((a) => a.endedAt - a.openedAt);
    const late = attempts.map((a) => a.lateMs);
    const onSurvivors = survivors.map((b) => `${b.id} ${s.storm.filter((c) => c.backend === b.id).length}`).join(', ');
    const { admission } = DEFAULTS;
    recordChaos({
      id: 'reconnect-storm',
      fault: `reconnect storm: the backend of ${s.victimSockets} sockets (${ROOMS} rooms of ${PER_ROOM}, each room through both of 2 gateways sharing Redis) killed (kill -9); clients reconnect on djust's schedule (attempt n after max(500, rand x min(1000 x 2^(n-1), 30000)) ms, 10 attempts, a 503 is a failed attempt)`,
      promise: `every client back within djust's schedule (none gives up; target p99 <= ${TARGET_P99_MS / 1000} s from close to mounted again), each room on one survivor, never on two; other rooms untouched; admission at its defaults (${admission.maxInflightUpgrades} handshakes in flight and ${admission.upgradesPerSecond}/s per backend per gateway, Retry-After ${admission.retryAfterS} s)`,
      figures: {
        recoverMs: Math.max(...first.map((o) => (o.backAt as number) - killedAt)),
        roomsMoved: s.rooms.length,
        socketsDropped: s.storm.reduce((n, c) => n + c.outagesSince(killedAt).length, 0),
        requestsFailed: attempts.length - mounted.length,
        roomsSplit: split.length,
        other: [
          `close to mounted again: p50 ${p(back, 50)} ms, p99 ${p99} ms, max ${Math.max(...back)} ms (target p99 <= ${TARGET_P99_MS} ms: ${p99 <= TARGET_P99_MS ? 'met' : 'missed'}); gave up: ${gaveUp.length} of ${s.storm.length}`,
          `reconnect attempts per client (attempts: clients): ${attemptsHistogram(first)}; ${failedLine(attempts, killedAt)}`,
          `of the time back: djust's drawn waits p50 ${p(scheduled, 50)} ms, p99 ${p(scheduled, 99)} ms; the rest (attempts, the machine) p50 ${p(rest, 50)} ms, p99 ${p(rest, 99)} ms`,
          `attempts that mounted: 101 after p50 ${p(upgrade, 50)} ms, p99 ${p(upgrade, 99)} ms, mounted p50 ${p(mount, 50)} ms, p99 ${p(mount, 99)} ms after it; the clients' own lag (timers firing late) p50 ${p(late, 50)} ms, p99 ${p(late, 99)} ms`,
          `CPU over the ${w.endedAt - killedAt} ms of the storm (ms): gateways ${w.cpuMs.slice(0, 2).join(', ')}; survivors ${w.cpuMs.slice(2, 4).join(', ')}; the 3,000 clients' process ${w.cpuMs[4]} (event-loop delay p99 ${w.loopP99Ms} ms); load average ${loadAverage()}`,
          `every socket closed within ${Math.max(...first.map((o) => o.closedAt - killedAt))} ms of the kill; after: ${onSurvivors} sockets; other rooms' sockets closed: ${othersClosed.length} of ${s.others.length}`,
        ],
      },
      file: import.meta.url,
      test: 'reconnect storm: the backend of 3,000 sockets killed, clients back on djust schedule',
    });
  }, 150_000);
});

/** The machine's 1-minute load average (the runs share 2 cores with whatever else runs). */
function loadAverage(): string {
  return (loadavg()[0] ?? 0).toFixed(1);
}
