// A push through one gateway reaches the room whose sockets came through another: two gateways (in
// the test's process: test/support/here.ts) on one real redis-server, three demo backend processes
// (one is killed; examples/demo-backend, whose push
// receiver hands the message to the room's sockets), real WebSocket clients. After the room's
// backend is killed and the room is placed again by its clients' reconnect, the next push follows it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHere, stopAllHere, type GatewayHere } from '../support/here.js';
import { Client, startBackends, stop, stopAll, waitFor, type BackendProc } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';

const TOKEN = 'push-token-0123456789abcdef';
let redis: RedisServer;
let backends: BackendProc[];
let gwA: GatewayHere;
let gwB: GatewayHere;

async function push(gw: GatewayHere, room: string, message: unknown, sender?: string, extra: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${gw.url}/_roomgate/api/rooms/${encodeURIComponent(room)}/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', ...(sender ? { 'X-Roomgate-Sender': sender } : {}), ...extra },
    body: JSON.stringify(message),
    signal: AbortSignal.timeout(5_000),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

/**
 * Joins as a browser does after its backend died: a 503 (the room is busy until no gateway
 * reports it live on the dead backend, at the next heartbeats) is retried after a pause.
 */
async function rejoin(gw: GatewayHere, room: string): Promise<{ client: Client; backend: string }> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const client = new Client(`${gw.wsUrl}/ws/live/?room=${room}`);
    try {
      return { client, backend: await client.join(room) };
    } catch (err) {
      if (client.refusal?.status !== 503 || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

beforeAll(async () => {
  redis = await startRedis();
  backends = await startBackends(['pb1', 'pb2', 'pb3']);
  const list = backends.map((b) => `${b.id}=${b.url}`);
  // TCP health checks every 200 ms: a killed backend refuses each at once, so it is down for both
  // gateways within 3 checks; a live one on a loaded machine is not marked down by one slow check.
  const config = { push: { tokens: [TOKEN] }, health: { intervalMs: 200, timeoutMs: 200, fall: 3 } };
  [gwA, gwB] = await Promise.all([
    startGatewayHere({ backends: list, config, env: { REDIS_URL: redis.url } }),
    startGatewayHere({ backends: list, config, env: { REDIS_URL: redis.url } }),
  ]);
});

afterAll(async () => {
  await stopAll();
  await stopAllHere();
  await stopAllRedis();
});

describe('push across gateways', () => {
  it("through gateway A to a room whose sockets came through gateway B; after its backend dies and the room is placed again, the next push follows it", async () => {
    const room = 'push-across';
    const players = [new Client(`${gwB.wsUrl}/ws/live/?room=${room}`), new Client(`${gwB.wsUrl}/ws/live/?room=${room}`)];
    const held = await players[0]!.join(room);
    expect(await players[1]!.join(room)).toBe(held);

    const first = await push(gwA, room, { type: 'announce', n: 1 }, 'job:test');
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({ room, backend: held });
    for (const p of players) {
      const m = await p.next('push');
      expect(m).toMatchObject({ room, id: first.json.id, sender: 'job:test', message: { type: 'announce', n: 1 } });
    }

    // The room's backend dies: its sockets close; the clients reconnect through B and the room
    // is placed on a live backend; A hears of the new placement through Redis.
    const dead = backends.find((b) => b.id === held) as BackendProc;
    await stop(dead, 'SIGKILL');
    await Promise.all(players.map((p) => p.closed));
    const r1 = await rejoin(gwB, room);
    const r2 = await rejoin(gwB, room);
    const now = r1.backend;
    expect(now).not.toBe(held);
    expect(r2.backend).toBe(now);
    const again = [r1.client, r2.client];

    const second = await push(gwA, room, { type: 'announce', n: 2 });
    expect(second.status).toBe(202);
    expect(second.json.backend).toBe(now);
    expect(Number(second.json.epoch)).toBeGreaterThan(Number(first.json.epoch));
    for (const p of again) expect(await p.next('push')).toMatchObject({ sender: 'api', message: { n: 2 } });
    // Nothing reached the old clients after their backend died.
    for (const p of players) expect(p.messages.filter((m) => m.type === 'push')).toHaveLength(1);
    await Promise.all(again.map((p) => p.close()));
  });

  it('an Idempotency-Key holds across gateways: a retry through the other gateway is answered, not delivered again', async () => {
    const room = 'push-idem';
    const player = new Client(`${gwB.wsUrl}/ws/live/?room=${room}`);
    await player.join(room);
    const key = { 'Idempotency-Key': 'retry-across-1' };
    const push1 = await push(gwA, room, { once: true }, undefined, key);
    expect(push1.status).toBe(202);
    const push2 = await push(gwB, room, { once: true }, undefined, key);
    expect(push2.status).toBe(202);
    expect(push2.headers.get('idempotent-replayed')).toBe('true');
    expect(push2.json).toEqual(push1.json);
    await player.next('push');
    await new Promise((r) => setTimeout(r, 200));
    expect(player.messages.filter((m) => m.type === 'push')).toHaveLength(1);
    await player.close();
  });

  it('a fan-out through A reaches every live room (or those with a prefix), one request per backend, rooms whose sockets came through B included', async () => {
    const rooms = ['fan-a-1', 'fan-a-2', 'fan-b-1'];
    const players = await Promise.all(
      rooms.map(async (room) => {
        const c = new Client(`${gwB.wsUrl}/ws/live/?room=${room}`);
        return { room, c, backend: await c.join(room) };
      }),
    );
    const fanout = async (query: string, message: unknown, extra: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> => {
      const res = await fetch(`${gwA.url}/_roomgate/api/messages${query}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', ...extra },
        body: JSON.stringify(message),
        signal: AbortSignal.timeout(5_000),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    // Presence reaches A with B's next heartbeat: until then the rooms are not live for A.
    let first: { status: number; json: Record<string, unknown> } | undefined;
    const deadline = Date.now() + 10_000;
    for (;;) {
      first = await fanout('?prefix=fan-a-', { to: 'a' });
      if (first.json.rooms === 2 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({ rooms: 2, unplaced: 0 });
    const parts = first.json.backends as Record<string, { rooms: number; result: string }>;
    const expected: Record<string, number> = {};
    for (const p of players.slice(0, 2)) expected[p.backend] = (expected[p.backend] ?? 0) + 1;
    expect(Object.fromEntries(Object.entries(parts).map(([b, v]) => [b, v.rooms]))).toEqual(expected);
    for (const v of Object.values(parts)) expect(v.result).toBe('delivered');
    for (const p of players.slice(0, 2)) expect(await p.c.next('push')).toMatchObject({ room: p.room, id: first.json.id, message: { to: 'a' } });

    const all = await fanout('', { to: 'all' });
    expect(all.json).toMatchObject({ rooms: expect.any(Number) as number, unplaced: 0 });
    expect(Number(all.json.rooms)).toBeGreaterThanOrEqual(3);
    await waitFor('every room got the second message', 5_000, () =>
      players.every((p) => p.c.messages.some((m) => m.type === 'push' && (m.message as { to?: string }).to === 'all')),
    );
    // fan-b-1 got only the message for all.
    expect(players[2]!.c.messages.filter((m) => m.type === 'push')).toHaveLength(1);

    expect((await fanout('?prefix=bad prefix', {})).status).toBe(400);
    expect((await fanout('', {}, { 'Idempotency-Key': 'k' })).status).toBe(400);
    await Promise.all(players.map((p) => p.c.close()));
  });

  it('push.requireLive: a placed room without live sockets is 404 too; one with sockets through another gateway is delivered', async () => {
    const list = backends.filter((b) => b.child.exitCode === null && b.child.signalCode === null).map((b) => `${b.id}=${b.url}`);
    const gwC = await startGatewayHere({ backends: list, config: { push: { tokens: [TOKEN], requireLive: true }, health: { intervalMs: 200, timeoutMs: 150, fall: 1 } }, env: { REDIS_URL: redis.url } });
    try {
      // Placed by a page request, never a socket.
      const page = await fetch(`${gwB.url}/game/quiet-room/?room=quiet-room`, { signal: AbortSignal.timeout(5_000) });
      expect(page.status).toBe(200);
      const quiet = await push(gwC, 'quiet-room', {});
      expect(quiet.status).toBe(404);
      expect(quiet.json.error).toMatchObject({ code: 'room_not_live' });
      // Through A (requireLive off) the placement is enough.
      expect((await push(gwA, 'quiet-room', {})).status).toBe(202);

      const player = new Client(`${gwB.wsUrl}/ws/live/?room=lively-room`);
      await player.join('lively-room');
      // Live once B's next heartbeat reported it.
      await waitFor('lively-room delivered through C', 10_000, async () => (await push(gwC, 'lively-room', { hi: 1 })).status === 202, 200);
      expect(await player.next('push')).toMatchObject({ message: { hi: 1 } });
      await player.close();
    } finally {
      await gwC.stop();
    }
  });

  it('a room nobody holds, through either gateway, is 404; neither gateway places it', async () => {
    for (const gw of [gwA, gwB]) {
      const a = await push(gw, 'nobody-here', {});
      expect(a.status).toBe(404);
      expect(a.json.error).toMatchObject({ code: 'room_not_live' });
    }
    const where = await fetch(`http://127.0.0.1:${gwA.adminPort}/rooms/nobody-here`, { signal: AbortSignal.timeout(5_000) });
    expect(((await where.json()) as { placement: unknown }).placement).toBeNull();
  });
});
