// The room handoff's failure cases with real processes (a redis-server, two demo backends, one
// gateway), each on its own room with two djust-like clients playing through the gateway
// (test/support/game-clients.ts): the new owner refuses the import (it holds a newer copy), the old
// owner stops answering the export (SIGSTOP), the new owner is dead before the move (kill -9), the
// old owner dies in the middle of the export (SIGSTOP, then kill -9). What roomgate promises: the
// first three roll back (the room stays on its owner, its sockets are not touched, nothing the app
// acknowledged is lost); the last places the room empty on the new owner and says so. The same
// cases against in-process fakes, step by step, are test/runtime/handoff.test.ts.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { GameClient, GameRoom, stopAllGameClients } from '../support/game-clients.js';
import { startBackend, startBackends, startGateway, stop, stopAll, waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { startRedis, stopAllRedis } from '../support/redis.js';
import { sleep } from '../support/room-clients.js';

const TOKEN = 'handoff-failures-admin-token-0123456789';
const TIMEOUT_MS = 1_000;
const LEASE_MS = 4_000;

let backends: BackendProc[];
let gw: GatewayProc;

beforeAll(async () => {
  const redis = await startRedis();
  backends = await startBackends(['f1', 'f2']);
  gw = await startGateway({
    config: {
      backends: backends.map((b) => ({ id: b.id, url: b.url })),
      redis: { url: redis.url },
      admin: { token: TOKEN },
      handoff: { timeoutMs: TIMEOUT_MS, leaseMs: LEASE_MS },
      placement: { heartbeatMs: 200 },
    },
  });
}, 60_000);

afterAll(async () => {
  stopAllGameClients();
  for (const b of backends ?? []) if (b.child.signalCode === null && b.child.exitCode === null) b.child.kill('SIGCONT');
  await stopAll();
  await stopAllRedis();
}, 30_000);

interface Handoff {
  result: string;
  reason: string;
  ms: number;
}

async function move(room: string, to: string): Promise<{ status: number; handoff: Handoff }> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/${room}/move`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to }),
    signal: AbortSignal.timeout(6 * TIMEOUT_MS + 5_000),
  });
  // 200: {handoff}; an error: {error: {code, message, handoff}}.
  const body = (await res.json()) as { handoff?: Handoff; error?: { handoff?: Handoff } };
  const handoff = body.handoff ?? body.error?.handoff;
  if (handoff === undefined) throw new Error(`move ${room}: ${res.status} ${JSON.stringify(body)}`);
  return { status: res.status, handoff };
}

const byId = (id: string): BackendProc => backends.find((b) => b.id === id) as BackendProc;

async function held(b: BackendProc, room: string): Promise<{ moves: number; frozen: boolean }> {
  return (await (await fetch(`${b.url}/_backend/moves/${room}`, { signal: AbortSignal.timeout(3_000) })).json()) as { moves: number; frozen: boolean };
}

/** A room with two clients playing through the gateway, a few moves acknowledged; its backend. */
async function playing(room: string): Promise<{ game: GameRoom; clients: GameClient[]; from: BackendProc; to: BackendProc }> {
  const game = new GameRoom(room);
  const target = { name: 'gw', wsUrl: gw.wsUrl };
  const clients = [0, 1].map((i) => new GameClient(i, game, target, { moveEveryMs: [100, 300] }).start());
  await waitFor(`${room}: both clients mounted on one backend, moves acknowledged`, 15_000, () => clients.every((c) => c.backend !== null && c.backend === clients[0]?.backend) && game.acks.size >= 4, 50);
  const from = byId(clients[0]?.backend as string);
  return { game, clients, from, to: backends.find((b) => b !== from) as BackendProc };
}

/** Moves of the room lost: acknowledged ones its owner no longer holds, or numbered twice. */
async function lostMoves(game: GameRoom, owner: BackendProc): Promise<number> {
  const h = await held(owner, game.room);
  return game.duplicates.length + Math.max(0, game.highest - h.moves) + game.shortMounts.length;
}

function closesOf(clients: readonly GameClient[], since: number): number {
  return clients.reduce((n, c) => n + c.gaps.filter((g) => g.closedAt >= since).length, 0);
}

function record(id: string, fault: string, promise: string, h: Handoff, figures: { roomsMoved: number; socketsDropped: number; lost: number; recoverMs?: number; extra?: string }): void {
  recordChaos({
    id,
    fault,
    promise,
    figures: {
      recoverMs: figures.recoverMs ?? null,
      roomsMoved: figures.roomsMoved,
      socketsDropped: figures.socketsDropped,
      other: [`result ${h.result} in ${h.ms} ms: ${h.reason}`, `acknowledged moves lost: ${figures.lost}`, ...(figures.extra ? [figures.extra] : [])],
    },
    file: import.meta.url,
    test: 'room handoff failures with real processes',
  });
}

describe('room handoff failures with real processes', () => {
  it('import refused (the new owner holds a newer copy): rolled back, the room stays, nothing lost', async () => {
    const { game, clients, from, to } = await playing('fail-import');
    // The new owner has seen the room under an epoch above any the store will reserve: it refuses
    // the import (409), as an app refuses a blob it cannot read.
    const ws = new WebSocket(`ws://127.0.0.1:${to.port}/ws/live/`, { headers: { 'X-Roomgate-Room': game.room, 'X-Roomgate-Epoch': '9007199254740000' } });
    await new Promise<void>((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.terminate();
    const t0 = Date.now();
    const r = await move(game.room, to.id);
    expect(r.status).toBe(502);
    expect(r.handoff).toMatchObject({ result: 'rolled-back' });
    expect(r.handoff.reason).toContain('import answered 409');
    await sleep(500); // the game goes on where it was
    expect((await held(from, game.room)).frozen).toBe(false);
    const lost = await lostMoves(game, from);
    const dropped = closesOf(clients, t0);
    expect([lost, dropped, clients.map((c) => c.backend)]).toEqual([0, 0, [from.id, from.id]]);
    for (const c of clients) c.stop();
    record('handoff-import-refused', 'room handoff: the new owner refuses the import', 'rolled back: the room stays on its owner, resumed, its sockets untouched, nothing lost', r.handoff, { roomsMoved: 0, socketsDropped: dropped, lost });
  }, 60_000);

  it('export not answered in time (old owner SIGSTOPped): rolled back, the lease resumes the room, nothing lost', async () => {
    const { game, clients, from, to } = await playing('fail-export');
    const t0 = Date.now();
    from.child.kill('SIGSTOP');
    let r: { status: number; handoff: Handoff };
    try {
      r = await move(game.room, to.id);
    } finally {
      from.child.kill('SIGCONT');
    }
    expect(r.status).toBe(502);
    expect(r.handoff).toMatchObject({ result: 'rolled-back' });
    expect(r.handoff.reason).toContain('export');
    // The export and the resume reach it once it runs again, in either order: at worst the lease lifts the freeze.
    const resumedMs = await waitFor('the room unfrozen', LEASE_MS + 5_000, async () => ((await held(from, game.room)).frozen ? null : Date.now() - t0), 100);
    await sleep(500);
    const lost = await lostMoves(game, from);
    const dropped = closesOf(clients, t0);
    expect([lost, dropped, clients.map((c) => c.backend)]).toEqual([0, 0, [from.id, from.id]]);
    for (const c of clients) c.stop();
    record('handoff-export-timeout', `room handoff: the old owner does not answer the export (SIGSTOP, handoff.timeoutMs ${TIMEOUT_MS} ms)`, 'rolled back: the room stays, resumed by the resume call or at worst by its lease; nothing lost', r.handoff, {
      roomsMoved: 0,
      socketsDropped: dropped,
      lost,
      extra: `room unfrozen ${resumedMs} ms after the stop (leaseMs ${LEASE_MS})`,
    });
  }, 60_000);

  it('the new owner dead before the move (kill -9): rolled back, the room stays, nothing lost', async () => {
    const { game, clients, from, to } = await playing('fail-target');
    const t0 = Date.now();
    await stop(to, 'SIGKILL');
    const r = await move(game.room, to.id);
    // Restarted on its port for the next case.
    backends[backends.indexOf(to)] = await startBackend(to.id, ['--port', String(to.port)]);
    expect(r.status).toBe(502);
    expect(r.handoff).toMatchObject({ result: 'rolled-back' });
    await sleep(500);
    expect((await held(from, game.room)).frozen).toBe(false);
    const lost = await lostMoves(game, from);
    const dropped = closesOf(clients, t0);
    expect([lost, dropped, clients.map((c) => c.backend)]).toEqual([0, 0, [from.id, from.id]]);
    for (const c of clients) c.stop();
    record('handoff-target-dead', 'room handoff: the new owner is dead before the move (kill -9)', 'rolled back: the room stays on its owner, resumed, nothing lost', r.handoff, { roomsMoved: 0, socketsDropped: dropped, lost });
  }, 60_000);

  it('the old owner dying mid-export (SIGSTOP, then kill -9): the room placed empty on the new owner, and said so', async () => {
    const { game, clients, from, to } = await playing('fail-owner');
    const acked = game.highest;
    const t0 = Date.now();
    from.child.kill('SIGSTOP');
    const moving = move(game.room, to.id);
    await sleep(TIMEOUT_MS / 2); // the export is sent and waits for its answer
    await stop(from, 'SIGKILL');
    const r = await moving;
    backends[backends.indexOf(from)] = await startBackend(from.id, ['--port', String(from.port)]);
    expect(r.status).toBe(502);
    expect(r.handoff).toMatchObject({ result: 'owner-lost' });
    expect(r.handoff.reason).toContain('died during the export');
    const back = await waitFor('both clients mounted on the new owner', 15_000, () => clients.every((c) => c.backend === to.id) && Date.now() - t0, 50);
    for (const c of clients) c.stop();
    record('handoff-owner-dead-mid-export', 'room handoff: the old owner dies in the middle of the export (kill -9)', 'the room is placed empty on the new owner and the handoff says so (owner-lost): its state died with the process, as without handoff', r.handoff, {
      roomsMoved: 1,
      socketsDropped: closesOf(clients, t0),
      lost: acked,
      recoverMs: back,
      extra: `clients mounted on the new owner ${back} ms after the stop, told 0 moves (the old owner's died with it, by design)`,
    });
  }, 60_000);
});
