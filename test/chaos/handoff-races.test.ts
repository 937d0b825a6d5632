// Room handoffs raced and faulted, with real processes: a redis-server, three demo backends, two
// gateways sharing the Redis, each room played by two djust-like clients (one through each
// gateway, test/support/game-clients.ts). Each backend sits behind a HookGate
// (test/support/hook-gate.ts), an in-process proxy that holds a hook call at a chosen instant, so
// every timing window below is hit on purpose: three handoffs of one room at once (two moves
// through two gateways to two backends and a drain with handoff of its owner), a backend killed
// during the export, during the import and between the import and the placement's move, a gateway
// killed between the import and the release, and hooks that answer late or never.
// What roomgate promises in each, checked: no room on two backends at once (the SplitWatcher of
// test/support/room-clients.ts, sampling every backend 10 times a second), every move the app
// acknowledged still there after it, unless the handoff said the room was placed empty
// (`owner-lost`), and no room frozen past its lease (handoff.leaseMs).
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { GameClient, GameRoom, stopAllGameClients } from '../support/game-clients.js';
import { HookGate, type GateCall } from '../support/hook-gate.js';
import { runCli, startBackend, startBackends, startGateway, stop, stopAll, waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { Redis } from 'ioredis';
import { sentinelMaster, startRedis, startReplica, startSentinels, stopAllRedis } from '../support/redis.js';
import { SplitWatcher, adminBackends, adminGet, adminPost, sleep, witnessOf, type GatewayTarget } from '../support/room-clients.js';

const TOKEN = 'handoff-races-admin-token-0123456789';
const TIMEOUT_MS = 1_000;
const LEASE_MS = 3_000;
/** How late a freeze may end after its lease: the lease timer, and the sampling every 100 ms. */
const LEASE_SLACK_MS = 1_000;

let redisUrl = '';
let backends: BackendProc[] = [];
const gates = new Map<string, HookGate>();
let gwA: GatewayProc;
let gwB: GatewayProc;
let watcher: SplitWatcher;

function config(): Record<string, unknown> {
  return {
    backends: backends.map((b) => ({ id: b.id, url: (gates.get(b.id) as HookGate).url })),
    redis: { url: redisUrl, commandTimeoutMs: 500 },
    // An HTTP check: a TCP connect would reach the gate, which listens whether its backend lives or not.
    health: { path: '/healthz', intervalMs: 300, timeoutMs: 300 },
    placement: { heartbeatMs: 200, gatewayTtlMs: 1_000 },
    presence: { ttlMs: 2_000 },
    admin: { token: TOKEN },
    admission: { upgradesPerSecond: 0 },
    handoff: { timeoutMs: TIMEOUT_MS, leaseMs: LEASE_MS },
  };
}

async function connectedGateway(): Promise<GatewayProc> {
  const gw = await startGateway({ config: config() });
  await waitFor('gateway connected to Redis', 10_000, async () => (await adminGet<{ degraded: boolean }>(gw, '/status')).degraded === false, 50);
  return gw;
}

beforeAll(async () => {
  redisUrl = (await startRedis()).url;
  backends = await startBackends(['r1', 'r2', 'r3']);
  for (const b of backends) gates.set(b.id, await new HookGate(b.port).listen());
  [gwA, gwB] = await Promise.all([connectedGateway(), connectedGateway()]);
  watcher = new SplitWatcher(() => witnessOf(backends), 100);
  watcher.start();
}, 60_000);

afterAll(async () => {
  await watcher?.stop();
  stopAllGameClients();
  for (const b of backends) if (b.child.signalCode === null && b.child.exitCode === null) b.child.kill('SIGCONT');
  for (const g of gates.values()) await g.close();
  await stopAll();
  await stopAllRedis();
}, 30_000);

const via = (name: string, gw: () => GatewayProc): GatewayTarget => ({
  name,
  get wsUrl() {
    return gw().wsUrl;
  },
});
const byId = (id: string): BackendProc => backends.find((b) => b.id === id) as BackendProc;
const gateOf = (b: BackendProc): HookGate => gates.get(b.id) as HookGate;
const alive = (p: BackendProc | GatewayProc): boolean => p.child.exitCode === null && p.child.signalCode === null;

interface Handoff {
  id: string;
  result: string;
  reason: string;
  release: string | null;
  ms: number;
}

interface Played {
  game: GameRoom;
  clients: GameClient[];
  from: BackendProc;
  others: BackendProc[];
}

/** A room played by two clients (one through each gateway), a few moves acknowledged; its owner. */
async function playing(room: string): Promise<Played> {
  const game = new GameRoom(room);
  const clients = [new GameClient(0, game, via('A', () => gwA), { moveEveryMs: [100, 300] }).start(), new GameClient(1, game, via('B', () => gwB), { moveEveryMs: [100, 300] }).start()];
  await waitFor(`${room}: both clients mounted on one backend, moves acknowledged`, 15_000, () => clients.every((c) => c.backend !== null && c.backend === clients[0]?.backend) && game.acks.size >= 4, 50);
  const from = byId(clients[0]?.backend as string);
  return { game, clients, from, others: backends.filter((b) => b !== from) };
}

async function move(gw: GatewayProc, room: string, to: string): Promise<Handoff> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/${room}/move`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to }),
    signal: AbortSignal.timeout(6 * TIMEOUT_MS + 5_000),
  });
  const body = (await res.json()) as { handoff?: Handoff; error?: { handoff?: Handoff; message?: string } };
  const handoff = body.handoff ?? body.error?.handoff;
  if (handoff === undefined) throw new Error(`move ${room} to ${to}: ${res.status} ${JSON.stringify(body)}`);
  return handoff;
}

interface Held {
  moves: number;
  frozen: boolean;
}

async function held(b: BackendProc, room: string): Promise<Held | null> {
  if (!alive(b)) return null;
  try {
    return (await (await fetch(`${b.url}/_backend/moves/${room}`, { signal: AbortSignal.timeout(2_000) })).json()) as Held;
  } catch {
    return null;
  }
}

/** ms from `since` until no live backend holds the room frozen. */
async function unfrozenAfter(room: string, since: number): Promise<number> {
  return waitFor(
    `${room} frozen nowhere`,
    LEASE_MS + 10_000,
    async () => {
      const h = await Promise.all(backends.map((b) => held(b, room)));
      return h.some((x) => x?.frozen === true) ? null : Date.now() - since;
    },
    50,
  );
}

/** Restarts a killed backend on its port (behind the same gate) and waits until both gateways see it up. */
async function restart(b: BackendProc): Promise<void> {
  if (alive(b)) await stop(b, 'SIGKILL');
  const fresh = await startBackend(b.id, ['--port', String(b.port)]);
  backends[backends.indexOf(b)] = fresh;
  for (const gw of [gwA, gwB]) await waitFor(`${b.id} up for the gateway`, 15_000, async () => (await adminBackends(gw)).get(b.id)?.health === 'up', 100);
}

interface Outcome {
  /** Where the room's clients all ended. */
  owner: string;
  /** Acknowledged moves missing from the room's final count, numbered twice, or a short mount. */
  lost: string[];
  /** Closes of the room's sockets after t0. */
  dropped: number;
  splits: number;
  /** ms from t0 to every client mounted on one backend. */
  settledMs: number;
}

/**
 * The room once the fault is over: the clients quiet, mounted on one backend; what it holds
 * against what was acknowledged, and the splits the watcher saw since t0. Stops the clients.
 */
async function outcome(p: Played, t0: number): Promise<Outcome> {
  const settledMs = await waitFor(`${p.game.room}: every client mounted on one backend`, 20_000, () => p.clients.every((c) => c.backend !== null && c.backend === p.clients[0]?.backend) && Date.now() - t0, 50);
  for (const c of p.clients) c.quiet();
  await sleep(800); // answers of the moves in flight
  const owner = byId(p.clients[0]?.backend as string);
  const h = await held(owner, p.game.room);
  const lost: string[] = [];
  for (const d of p.game.duplicates) lost.push(`move ${d.first.n} acknowledged twice`);
  for (const s of p.game.shortMounts) lost.push(`a mount on ${s.backend} told ${s.told} moves, ${s.acknowledged} acknowledged`);
  if (h === null || p.game.highest > h.moves) lost.push(`${p.game.highest} moves acknowledged, ${h?.moves ?? 'none'} held on ${owner.id}`);
  const dropped = p.clients.reduce((n, c) => n + c.gaps.filter((g) => g.closedAt >= t0).length, 0);
  for (const c of p.clients) c.stop();
  const splits = watcher.since(t0 - 100).filter((v) => v.room === p.game.room);
  expect(splits, watcher.describe(splits)).toEqual([]);
  return { owner: owner.id, lost, dropped, splits: splits.length, settledMs };
}

function record(id: string, fault: string, promise: string, test: string, o: Outcome, handoffs: readonly Handoff[], extra: readonly string[], roomsMoved: number, lostLine?: string): void {
  recordChaos({
    id,
    fault,
    promise,
    figures: {
      recoverMs: o.settledMs,
      roomsMoved,
      socketsDropped: o.dropped,
      roomsSplit: o.splits,
      other: [...handoffs.map((h) => `${h.result}${h.release ? ` (release ${h.release})` : ''} in ${h.ms} ms${h.reason ? `: ${h.reason}` : ''}`), lostLine ?? `acknowledged moves lost: ${o.lost.length}`, ...extra],
    },
    file: import.meta.url,
    test,
  });
}

/** Resolves the n-th caller and every earlier one together (or all after ms): one instant for n calls. */
function barrier(n: number, ms: number): () => Promise<void> {
  let waiting: (() => void)[] = [];
  let timer: NodeJS.Timeout | null = null;
  const open = (): void => {
    if (timer) clearTimeout(timer);
    const w = waiting;
    waiting = [];
    for (const r of w) r();
  };
  return () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      timer ??= setTimeout(open, ms);
      if (waiting.length >= n) open();
    });
}

const RACE = 'room handoffs raced: two moves through two gateways and a drain with handoff at once';

describe(RACE, () => {
  it('one room, three handoffs at once (A: move to one backend, B: move to the other, drain --handoff of its owner): one wins, 0 splits, 0 lost, nothing frozen past its lease', async () => {
    const p = await playing('race-three');
    const [t1, t2] = p.others as [BackendProc, BackendProc];
    const gate = gateOf(p.from);
    // The three exports reach the owner in the same instant: each is held until all three arrived
    // (at most 700 ms, under handoff.timeoutMs). The drain's CLI starts first (a node process),
    // the two moves as soon as its export is at the gate.
    const together = barrier(3, 700);
    const exports: GateCall[] = [];
    gate.holds.set('export', {
      before: async (c) => {
        if (c.room !== p.game.room) return;
        exports.push(c);
        await together();
      },
    });
    const t0 = Date.now();
    let drain: Promise<{ code: number; stderr: string }>;
    let moves: Handoff[];
    try {
      drain = runCli(['drain', p.from.id, '--handoff', '--deadline', '10m'], { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gwB.adminPort}`, ROOMGATE_ADMIN_TOKEN: TOKEN });
      await waitFor("the drain's export at the owner", 15_000, () => exports.length >= 1, 5);
      moves = await Promise.all([move(gwA, p.game.room, t1.id), move(gwB, p.game.room, t2.id)]);
      const d = await drain;
      expect(d.code, d.stderr).toBe(0);
      await waitFor(`the drain with handoff of ${p.from.id} done`, 30_000, async () => {
        const ev = await adminGet<{ handoffs: { drains: { backend: string; done: boolean; startedAt: string }[] } }>(gwB, '/events');
        return ev.handoffs.drains.some((x) => x.backend === p.from.id && x.done && Date.parse(x.startedAt) >= t0 - 1_000);
      }, 100);
    } finally {
      gate.holds.delete('export');
    }
    const drained = (await adminGet<{ handoffs: { recent: (Handoff & { room: string; trigger: string; at: string })[] } }>(gwB, '/events')).handoffs.recent.filter((h) => h.room === p.game.room && h.trigger === 'drain' && Date.parse(h.at) >= t0 - 1_000);
    const unfrozenMs = await unfrozenAfter(p.game.room, t0);
    const o = await outcome(p, t0);
    const all = [...moves, ...drained];
    const won = all.filter((h) => h.result === 'moved');
    expect(exports.length, 'the three handoffs each asked for the export').toBeGreaterThanOrEqual(3);
    expect(won.length, JSON.stringify(all)).toBe(1);
    expect(all.filter((h) => h.result !== 'moved' && h.result !== 'rolled-back' && h.result !== 'refused'), JSON.stringify(all)).toEqual([]);
    expect(o.owner).not.toBe(p.from.id);
    expect(o.lost).toEqual([]);
    expect(unfrozenMs).toBeLessThanOrEqual(LEASE_MS + LEASE_SLACK_MS);
    const r = await adminPost(gwA, `/backends/${p.from.id}/undrain`, TOKEN);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    record(
      'handoff-race-three-at-once',
      'three handoffs of one room in the same instant: a move through gateway A to one backend, a move through gateway B to another, and `roomgate drain --handoff` of its owner (the three exports held until all arrived)',
      'one handoff moves the room; the others roll back (the owner refuses a second export while frozen) or are refused; never on two backends; nothing acknowledged lost; nothing frozen past its lease',
      RACE,
      o,
      all,
      [`exports asked: ${exports.length}`, `room frozen nowhere ${unfrozenMs} ms after the start (leaseMs ${LEASE_MS})`, `ended on ${o.owner}`],
      1,
    );
  }, 90_000);
});

const KILLS = 'room handoffs with a backend killed at each step (SIGKILL at a chosen instant)';

interface KillCase {
  readonly id: string;
  readonly title: string;
  /** The step whose call the gate holds, at the old owner ('old') or the new one ('new'). */
  readonly step: 'export' | 'import';
  readonly at: 'old' | 'new';
  /** Which backend dies once it has acted on that call. */
  readonly kill: 'old' | 'new';
  /** drop: its answer never reaches the gateway; pass: the answer it gave is relayed, then nothing more. */
  readonly answer: 'drop' | 'pass';
  readonly result: string;
  /** Where the room ends: on the old owner, or the new one. */
  readonly ends: 'old' | 'new' | 'elsewhere';
  /** The state is kept (nothing acknowledged lost); false: lost, and said so. */
  readonly kept: boolean;
  readonly fault: string;
  readonly promise: string;
}

const KILL_CASES: readonly KillCase[] = [
  {
    id: 'handoff-kill-old-during-export',
    title: 'the old owner killed during the export (it froze the room, its answer never arrives): the room placed empty on the new owner, and said so',
    step: 'export',
    at: 'old',
    kill: 'old',
    answer: 'drop',
    result: 'owner-lost',
    ends: 'new',
    kept: false,
    fault: 'room handoff: the old owner killed (SIGKILL) during the export, after it froze the room and before its answer arrived',
    promise: 'the room is placed empty on the new owner and the handoff says so (owner-lost): its state died with the process; never on two backends',
  },
  {
    id: 'handoff-kill-new-during-import',
    title: 'the new owner killed during the import (it imported, its answer never arrives): rolled back, the room stays, nothing lost, resumed at once',
    step: 'import',
    at: 'new',
    kill: 'new',
    answer: 'drop',
    result: 'rolled-back',
    ends: 'old',
    kept: true,
    fault: 'room handoff: the new owner killed (SIGKILL) during the import, after it imported and before its answer arrived',
    promise: 'rolled back: the room stays on its owner, resumed by the resume call (not the lease), nothing acknowledged lost; never on two backends',
  },
  {
    id: 'handoff-kill-old-before-move',
    title: 'the old owner killed between the import and the move: moved, its sockets cut, the state kept on the new owner',
    step: 'import',
    at: 'new',
    kill: 'old',
    answer: 'pass',
    result: 'moved',
    ends: 'new',
    kept: true,
    fault: 'room handoff: the old owner killed (SIGKILL) between the import and the placement\'s move',
    promise: 'moved: the state was imported before the death, the release finds no one and the gateway cuts the sockets; nothing acknowledged lost; never on two backends',
  },
  {
    id: 'handoff-kill-new-before-move',
    title: 'the new owner killed between the import and the move: moved to a dead backend, which is then down: the room re-placed empty, counted as moved by its death',
    step: 'import',
    at: 'new',
    kill: 'new',
    answer: 'pass',
    result: 'moved',
    ends: 'elsewhere',
    kept: false,
    fault: 'room handoff: the new owner killed (SIGKILL) between the import and the placement\'s move (its import answered 204)',
    promise: 'the handoff moved the room to the new owner, whose death then loses it as any owner\'s crash does: re-placed empty, the backend\'s down event counts the live room moved; never on two backends',
  },
];

describe(KILLS, () => {
  for (const k of KILL_CASES) {
    it(k.title, async () => {
      const p = await playing(k.id.replace('handoff-', ''));
      const [to] = p.others as [BackendProc];
      const side = (w: 'old' | 'new'): BackendProc => (w === 'old' ? p.from : to);
      const victim = side(k.kill);
      const gate = gateOf(side(k.at));
      const acked = p.game.highest;
      let killedAt = 0;
      gate.holds.set(k.step, {
        after: async (c) => {
          if (c.room !== p.game.room || killedAt !== 0) return;
          killedAt = Date.now();
          await stop(victim, 'SIGKILL');
          return k.answer;
        },
      });
      const t0 = Date.now();
      let h: Handoff;
      try {
        h = await move(gwA, p.game.room, to.id);
      } finally {
        gate.holds.delete(k.step);
      }
      expect(killedAt, `the gate saw the ${k.step}`).toBeGreaterThan(0);
      expect(h.result, JSON.stringify(h)).toBe(k.result);
      const unfrozenMs = await unfrozenAfter(p.game.room, t0);
      const o = await outcome(p, t0).catch(async (err: Error) => {
        const dump = { failures: p.clients.map((c) => c.failures.slice(-5)), refusals: p.clients.map((c) => c.refusals.slice(-5)), backends: [...(await adminBackends(gwA)).values()].map((b) => `${b.id} ${b.health} ${b.state}`), logs: gwA.lines.slice(-15) };
        throw new Error(`${err.message}\n${JSON.stringify(dump, null, 1)}`);
      });
      const downs = k.ends === 'elsewhere' ? await downEvents(victim.id, t0) : 0;
      await restart(victim);
      if (k.ends === 'elsewhere') {
        expect(o.owner).not.toBe(victim.id);
        expect(downs, `a down event of ${victim.id} counting the live room`).toBeGreaterThanOrEqual(1);
      } else expect(o.owner).toBe(side(k.ends).id);
      if (k.kept) expect(o.lost).toEqual([]);
      // Every freeze here ends by a call (release, resume) or with its process, well before the lease.
      expect(unfrozenMs).toBeLessThan(LEASE_MS);
      const lostLine = k.kept ? undefined : `acknowledged moves lost: the ${acked}+ before the kill, with the process that held them (reported: ${k.ends === 'elsewhere' ? `${victim.id} down, its live room counted as moved` : h.result})`;
      record(k.id, k.fault, k.promise, KILLS, o, [h], [`room frozen nowhere ${unfrozenMs} ms after the start (leaseMs ${LEASE_MS})`, `ended on ${o.owner}`], (h.result === 'moved' || h.result === 'owner-lost' ? 1 : 0) + (k.ends === 'elsewhere' ? 1 : 0), lostLine);
    }, 90_000);
  }
});

/** Live rooms counted as moved by `backend`'s down events since t0, on either gateway. */
async function downEvents(backend: string, t0: number): Promise<number> {
  return waitFor(`${backend} down with its live room counted`, 10_000, async () => {
    let n = 0;
    for (const gw of [gwA, gwB].filter(alive)) {
      const ev = await adminGet<{ events: { at: string; kind: string; backend: string; liveRoomsMoved: number }[] }>(gw, '/events');
      n += ev.events.filter((e) => e.backend === backend && e.kind === 'down' && Date.parse(e.at) >= t0 - 1_000).reduce((s, e) => s + e.liveRoomsMoved, 0);
    }
    return n > 0 ? n : null;
  }, 200).catch(() => 0);
}

const GATEWAY_DEATH = 'room handoffs with the gateway running them killed (SIGKILL) between the import and the release';

interface GatewayKill {
  readonly id: string;
  readonly title: string;
  /** The call at which gateway A dies: the import answered (before the move), or the release asked (after it). */
  readonly step: 'import' | 'release';
  readonly ends: 'old' | 'new';
  readonly fault: string;
  readonly promise: string;
}

const GATEWAY_KILLS: readonly GatewayKill[] = [
  {
    id: 'handoff-gateway-killed-before-move',
    title: 'killed once the import answered, before the move: the room stays, frozen until its lease, nothing lost',
    step: 'import',
    ends: 'old',
    fault: 'room handoff: the gateway running it killed (SIGKILL) once the import answered, before the placement\'s move',
    promise: 'the placement never moved: the room stays on its owner, which resumes it when its lease ends (events refused meanwhile, sent again); nothing acknowledged lost; never on two backends',
  },
  {
    id: 'handoff-gateway-killed-before-release',
    title: 'killed after the move, as it asks for the release: the room on the new owner with its state, the old owner resumes at its lease, nothing lost',
    step: 'release',
    ends: 'new',
    fault: 'room handoff: the gateway running it killed (SIGKILL) after the placement\'s move, before the release reached the old owner',
    promise: 'the room is on the new owner with its state (the other gateway cuts its sockets to the old one at the placement event); the old owner, never released, unfreezes at its lease; nothing acknowledged lost; never on two backends',
  },
];

describe(GATEWAY_DEATH, () => {
  for (const g of GATEWAY_KILLS) {
    it(g.title, async () => {
      const p = await playing(g.id.replace('handoff-', ''));
      const [to] = p.others as [BackendProc];
      const gate = gateOf(g.step === 'import' ? to : p.from);
      const dead = gwA;
      let killedAt = 0;
      const kill = async (c: GateCall): Promise<'drop' | undefined> => {
        if (c.room !== p.game.room || killedAt !== 0) return undefined;
        killedAt = Date.now();
        await stop(dead, 'SIGKILL');
        return 'drop';
      };
      gate.holds.set(g.step, g.step === 'import' ? { after: kill } : { before: kill });
      const t0 = Date.now();
      const asked = await move(dead, p.game.room, to.id).then(
        (h) => `answered ${h.result}`,
        (err: Error) => `no answer (${err.message})`,
      );
      gate.holds.delete(g.step);
      expect(killedAt, `the gate saw the ${g.step}`).toBeGreaterThan(0);
      // Watched from now, beside the restart of the killed gateway: the freeze's end is the old
      // owner's own (its lease), and a gateway start on a loaded machine (seconds) must not be
      // counted in it.
      const unfrozen = unfrozenAfter(p.game.room, t0);
      unfrozen.catch(() => undefined); // awaited below; not unhandled if the restart throws first
      gwA = await connectedGateway();
      const unfrozenMs = await unfrozen;
      const o = await outcome(p, t0);
      expect(o.owner).toBe(g.ends === 'old' ? p.from.id : to.id);
      expect(o.lost).toEqual([]);
      expect(unfrozenMs).toBeLessThanOrEqual(LEASE_MS + LEASE_SLACK_MS);
      const refused = p.clients.reduce((n, c) => n + c.refusedMoving, 0);
      record(g.id, g.fault, g.promise, GATEWAY_DEATH, o, [], [
        `the move's caller: ${asked}`,
        `room frozen nowhere ${unfrozenMs} ms after the start (leaseMs ${LEASE_MS})`,
        `client events refused while frozen (room-moving): ${refused}`,
        `ended on ${o.owner}`,
      ], g.ends === 'old' ? 0 : 1);
    }, 90_000);
  }
});

const SLOW = 'room handoffs whose hooks answer late or never';

interface SlowHook {
  readonly step: 'export' | 'import' | 'release';
  /** late: the call reaches the backend 2 x handoff.timeoutMs late (after the gateway gave up); never: it never does. */
  readonly mode: 'late' | 'never';
  readonly result: string;
  readonly ends: 'old' | 'new';
}

const SLOW_HOOKS: readonly SlowHook[] = (['export', 'import', 'release'] as const).flatMap((step) =>
  (['late', 'never'] as const).map((mode) => ({ step, mode, result: step === 'release' ? 'moved' : 'rolled-back', ends: step === 'release' ? ('new' as const) : ('old' as const) })),
);

describe(SLOW, () => {
  for (const s of SLOW_HOOKS) {
    it(`${s.step} answering ${s.mode === 'late' ? 'after the deadline' : 'never'}: ${s.result}, the room on the ${s.ends} owner, nothing lost, nothing frozen past its lease`, async () => {
      const p = await playing(`slow-${s.step}-${s.mode}`);
      const [to] = p.others as [BackendProc];
      const gate = gateOf(s.step === 'import' ? to : p.from);
      /** When each held call reached the backend (late), or was dropped (never). */
      const landed: number[] = [];
      gate.holds.set(s.step, {
        before: async (c) => {
          if (c.room !== p.game.room) return undefined;
          await sleep(2 * TIMEOUT_MS);
          landed.push(Date.now());
          return s.mode === 'late' ? 'pass' : 'drop';
        },
      });
      const t0 = Date.now();
      let h: Handoff;
      try {
        h = await move(gwA, p.game.room, to.id);
        // Every call the gateway made of that step has landed (or been dropped) before the checks.
        await waitFor(`the held ${s.step} calls let go`, 10_000, () => landed.length >= gate.seen(s.step, p.game.room).length, 50);
      } finally {
        gate.holds.delete(s.step);
      }
      expect(h.result, JSON.stringify(h)).toBe(s.result);
      // A late export freezes the room when it lands: its lease runs from there.
      const lastLanded = Math.max(...landed);
      const unfrozenMs = await unfrozenAfter(p.game.room, lastLanded);
      const o = await outcome(p, t0);
      expect(o.owner).toBe(s.ends === 'old' ? p.from.id : to.id);
      expect(o.lost).toEqual([]);
      expect(unfrozenMs).toBeLessThanOrEqual(LEASE_MS + LEASE_SLACK_MS);
      const refused = p.clients.reduce((n, c) => n + c.refusedMoving, 0);
      record(`handoff-hook-${s.step}-${s.mode}`, `room handoff: the ${s.step} hook ${s.mode === 'late' ? `answers late (reaches the backend ${2 * TIMEOUT_MS} ms after it was sent, past handoff.timeoutMs ${TIMEOUT_MS} ms)` : 'never answers'}`, s.step === 'release' ? 'moved: the state is on the new owner, the gateway cuts the old sockets; the old owner unfreezes at its lease at the latest; nothing acknowledged lost' : 'rolled back: the room stays on its owner; a freeze the late call makes ends at its lease; nothing acknowledged lost', SLOW, o, [h], [
        `${s.step} calls held: ${landed.length}`,
        `room frozen nowhere ${unfrozenMs} ms after the last held call ${s.mode === 'late' ? 'landed' : 'was dropped'} (leaseMs ${LEASE_MS})`,
        `client events refused while frozen (room-moving): ${refused}`,
      ], s.ends === 'old' ? 0 : 1);
    }, 90_000);
  }
});

const STORM = 'a backend that never answers (SIGSTOP) under 1,000 WebSocket handshakes in flight';
const HANDSHAKES = 1_000;
const CONNECT_MS = 1_000;
const RESPONSE_MS = 3_000;

/** A process's resident memory (bytes). */
function rss(p: GatewayProc): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p.child.pid}/status`, 'utf8'));
  if (!m) throw new Error('no VmRSS');
  return Number(m[1]) * 1024;
}

/** One handshake through the gateway: the status it was answered (101 if it opened), or what broke. */
function handshake(gw: GatewayProc, room: string): Promise<{ status: number | null; error: string | null; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const ws = new WebSocket(`${gw.wsUrl}/ws/live/?room=${room}`, { handshakeTimeout: 4 * (CONNECT_MS + RESPONSE_MS) });
    const done = (status: number | null, error: string | null): void => {
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      resolve({ status, error, ms: Date.now() - t0 });
    };
    ws.once('open', () => done(101, null));
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      done(res.statusCode ?? 0, null);
    });
    ws.once('error', (err) => done(null, err.message));
  });
}

describe(STORM, () => {
  it('every handshake gets a defined answer within the proxy timeouts, the gateway stays responsive, its memory bounded', async () => {
    const stuck = await startBackend('s1');
    const gw = await startGateway({
      config: {
        backends: [{ id: stuck.id, url: stuck.url }],
        proxy: { connectTimeoutMs: CONNECT_MS, responseTimeoutMs: RESPONSE_MS },
        health: { intervalMs: 500, timeoutMs: 400 },
        admission: { upgradesPerSecond: 0 },
      },
    });
    try {
      const before = rss(gw);
      stuck.child.kill('SIGSTOP');
      let peak = before;
      const probes: number[] = [];
      let probing = true;
      const prober = (async () => {
        while (probing) {
          const t = Date.now();
          const res = await fetch(`http://127.0.0.1:${gw.adminPort}/status`, { signal: AbortSignal.timeout(3_000) });
          await res.arrayBuffer();
          expect(res.status).toBe(200);
          probes.push(Date.now() - t);
          peak = Math.max(peak, rss(gw));
          await sleep(100);
        }
      })();
      // This process's own lateness (1,000 clients on 2 shared cores): a handshake's time is
      // measured here, so a timer or a read run late here adds to it without the gateway being late.
      const lag = monitorEventLoopDelay({ resolution: 10 });
      lag.enable();
      const t0 = Date.now();
      const answers = await Promise.all(Array.from({ length: HANDSHAKES }, (_, i) => sleep(i % 100).then(() => handshake(gw, `storm-${i}`))));
      const allMs = Date.now() - t0;
      lag.disable();
      const ownLagMs = Math.round(lag.max / 1e6);
      probing = false;
      await prober;
      stuck.child.kill('SIGCONT');
      const statuses = new Map<string, number>();
      for (const a of answers) statuses.set(a.status === null ? `error ${a.error}` : String(a.status), (statuses.get(a.status === null ? `error ${a.error}` : String(a.status)) ?? 0) + 1);
      const undefinedAnswers = answers.filter((a) => a.status === null || a.status === 101);
      expect(undefinedAnswers.length, JSON.stringify([...statuses])).toBe(0);
      expect(answers.every((a) => [502, 503, 504].includes(a.status as number)), JSON.stringify([...statuses])).toBe(true);
      const slowest = Math.max(...answers.map((a) => a.ms));
      // The answer's bound: the connect and the response deadlines, with a second of scheduling,
      // plus the longest this test's own event loop ran late (up to a second more: beyond that the
      // machine, not the gateway, is measured, and the test says so by failing).
      expect(slowest, `slowest answer; this process's event loop ran up to ${ownLagMs} ms late`).toBeLessThanOrEqual(CONNECT_MS + RESPONSE_MS + 1_000 + Math.min(ownLagMs, 1_000));
      const grew = peak - before;
      expect(grew, 'gateway RSS growth under the storm').toBeLessThan(100 * 1024 * 1024);
      // Once it answers again, it is used again.
      await waitFor('a room served once the backend runs again', 20_000, async () => (await handshake(gw, 'storm-after')).status === 101, 250);
      recordChaos({
        id: 'handoff-storm-stuck-backend',
        fault: `${HANDSHAKES} WebSocket handshakes in flight to a backend that never answers (SIGSTOP; proxy.connectTimeoutMs ${CONNECT_MS}, responseTimeoutMs ${RESPONSE_MS})`,
        promise: 'every handshake answered with a defined status (502/503/504) within the connect and response deadlines; the admin API answers throughout; the gateway memory bounded; the backend used again once it runs',
        figures: {
          recoverMs: slowest,
          roomsMoved: 0,
          socketsDropped: 0,
          requestsFailed: answers.length,
          other: [
            `answers: ${[...statuses].sort().map(([s, n]) => `${s} x${n}`).join(', ')}; all in ${allMs} ms, slowest ${slowest} ms (the clients' own event loop up to ${ownLagMs} ms late)`,
            `admin /status during the storm: ${probes.length} probes, max ${Math.max(...probes)} ms`,
            `gateway RSS ${(before / 1048576).toFixed(1)} MB before, peak ${(peak / 1048576).toFixed(1)} MB (+${(grew / 1024 / HANDSHAKES).toFixed(1)} KB per handshake)`,
          ],
        },
        file: import.meta.url,
        test: STORM,
      });
    } finally {
      stuck.child.kill('SIGCONT');
      await stop(gw, 'SIGKILL');
      await stop(stuck, 'SIGKILL');
    }
  }, 120_000);
});

const FAILOVER = 'room handoffs with the Redis primary killed mid-handoff (Sentinel fails over)';

interface FailoverCase {
  readonly id: string;
  readonly title: string;
  /** import: the primary dies once the import answered (before the move's CAS); release: after the CAS, as the release is asked. */
  readonly step: 'import' | 'release';
  readonly fault: string;
  readonly promise: string;
}

const FAILOVER_CASES: readonly FailoverCase[] = [
  {
    id: 'handoff-redis-failover-before-move',
    title: 'the primary killed once the import answered, before the move: never on two backends, nothing lost, nothing frozen past its lease',
    step: 'import',
    fault: 'room handoff: the Redis primary killed (SIGKILL) once the import answered, before the placement\'s move (Sentinel: 1 replica, 3 sentinels, quorum 2, down-after 1 s)',
    promise: 'the move\'s outcome cannot be known: rolled back, the gateway cuts its sockets on the old owner, which resumes at its lease; the room where the promoted replica says; never on two backends; nothing acknowledged lost',
  },
  {
    id: 'handoff-redis-failover-before-release',
    title: 'the primary killed after the move, as the release is asked: never on two backends, nothing lost, nothing frozen past its lease',
    step: 'release',
    fault: 'room handoff: the Redis primary killed (SIGKILL) after the placement\'s move, as the release is asked (Sentinel: 1 replica, 3 sentinels, quorum 2, down-after 1 s)',
    promise: 'moved: the state on the new owner; the room where the promoted replica says once the gateways reconcile; never on two backends; nothing acknowledged lost',
  },
];

describe(FAILOVER, () => {
  for (const f of FAILOVER_CASES) {
    it(f.title, async () => {
      const primary = await startRedis();
      const replica = await startReplica(primary.port);
      const sentinels = await startSentinels(primary.port, 3, 1, { quorum: 2, downAfterMs: 1_000, failoverTimeoutMs: 3_000 });
      const redis = { sentinels: sentinels.map((s) => s.address), sentinelName: 'mymaster', keyPrefix: `${f.step}:`, commandTimeoutMs: 500 };
      const saved = [gwA, gwB] as const;
      const ha = await Promise.all([0, 1].map(async () => {
        const gw = await startGateway({ config: { ...config(), redis } });
        await waitFor('gateway connected to Redis', 10_000, async () => (await adminGet<{ degraded: boolean }>(gw, '/status')).degraded === false, 50);
        return gw;
      }));
      [gwA, gwB] = ha as [GatewayProc, GatewayProc];
      try {
        const p = await playing(f.id.replace('handoff-', ''));
        const [to] = p.others as [BackendProc];
        const gate = gateOf(f.step === 'import' ? to : p.from);
        let killedAt = 0;
        gate.holds.set(f.step, {
          [f.step === 'import' ? 'after' : 'before']: async (c: GateCall) => {
            if (c.room !== p.game.room || killedAt !== 0) return;
            killedAt = Date.now();
            await primary.kill('SIGKILL');
          },
        });
        const t0 = Date.now();
        let h: Handoff;
        try {
          h = await move(gwA, p.game.room, to.id);
        } finally {
          gate.holds.delete(f.step);
        }
        expect(killedAt, `the gate saw the ${f.step}`).toBeGreaterThan(0);
        const unfrozenMs = await unfrozenAfter(p.game.room, t0);
        const promotedMs = await waitFor('the replica promoted', 20_000, async () => (await sentinelMaster(sentinels[0] as (typeof sentinels)[0])) === replica.address && Date.now() - killedAt, 100);
        const o = await outcome(p, t0);
        const reader = new Redis({ port: replica.port, host: '127.0.0.1', commandTimeout: 1_000, maxRetriesPerRequest: 1 });
        const stored = await waitFor('the room stored where it lives', 15_000, async () => (await reader.hget(`${f.step}:{rg}:p:${p.game.room}`, 'backend')) === o.owner && o.owner, 100).catch(async () => `${await reader.hget(`${f.step}:{rg}:p:${p.game.room}`, 'backend')} (lives on ${o.owner})`);
        reader.disconnect();
        expect(o.lost).toEqual([]);
        expect(unfrozenMs).toBeLessThanOrEqual(LEASE_MS + LEASE_SLACK_MS);
        expect(stored).toBe(o.owner);
        record(f.id, f.fault, f.promise, FAILOVER, o, [h], [
          `replica promoted ${promotedMs} ms after the kill`,
          `room frozen nowhere ${unfrozenMs} ms after the start (leaseMs ${LEASE_MS})`,
          `ended on ${o.owner} (${o.owner === p.from.id ? 'the old owner' : 'the new owner'}), stored there in the promoted replica`,
        ], o.owner === p.from.id ? 0 : 1);
      } finally {
        [gwA, gwB] = saved;
        for (const gw of ha) await stop(gw, 'SIGKILL');
      }
    }, 120_000);
  }
});
