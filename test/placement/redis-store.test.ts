// Redis-only behaviour of RedisPlacementStore: failing fast while Redis is down or hung, recovering
// by itself (connections, pub/sub, scripts) when it is back, key prefix isolation and key layout,
// and a close() that leaves nothing behind. The shared semantics are in store-contract.test.ts.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisPlacementStore, type RedisStoreOptions } from '../../src/placement/redis-store.js';
import type { PlacementStore, StoreEvent } from '../../src/placement/store.js';
import { settleOrder } from '../support/event-order.js';
import { waitFor } from '../support/processes.js';
import { commandCounts, startRedis, stopAllRedis, sumCounts, type RedisServer } from '../support/redis.js';

const TIMING = { idleTtlMs: 5000, gatewayTtlMs: 5000 };
const COMMAND_TIMEOUT_MS = 300;
const NOT_FORCED = { force: false } as const;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const stores = new Set<RedisPlacementStore>();
const admins = new Set<Redis>();

function open(server: RedisServer, over: Partial<RedisStoreOptions> = {}): RedisPlacementStore {
  const logs: string[] = [];
  const s = new RedisPlacementStore({
    url: server.url,
    keyPrefix: 'rt:',
    gatewayId: 'gw-1',
    timing: TIMING,
    commandTimeoutMs: COMMAND_TIMEOUT_MS,
    onLog: (level, msg) => logs.push(`${level} ${msg}`),
    ...over,
  });
  stores.add(s);
  return s;
}

/** A plain client to look at the server. */
function admin(server: RedisServer): Redis {
  const r = new Redis(server.url, { maxRetriesPerRequest: 1, lazyConnect: false });
  r.on('error', () => undefined); // reconnect noise while a test has the server down
  admins.add(r);
  return r;
}

function record(store: PlacementStore): StoreEvent[] {
  const events: StoreEvent[] = [];
  store.subscribe((ev) => events.push(ev));
  return events;
}

/**
 * Calls every PlacementStore method; each must reject at once (no queue waiting for a reconnect):
 * before a timer of one command timeout started with the call.
 */
async function expectAllRejectFast(s: PlacementStore, pattern: RegExp): Promise<void> {
  const calls: Record<string, () => Promise<unknown>> = {
    get: () => s.get('r'),
    place: () => s.place('r', 'b1', 0, NOT_FORCED),
    heartbeat: () => s.heartbeat([{ room: 'r', backend: 'b1', sockets: 1 }]),
    roomsPerBackend: () => s.roomsPerBackend(),
    setBackendState: () => s.setBackendState('b1', { state: 'draining', deadline: null, since: 1 }),
    backendStates: () => s.backendStates(),
  };
  for (const [name, call] of Object.entries(calls)) {
    const { first, error } = await settleOrder(call, COMMAND_TIMEOUT_MS);
    expect(first, `${name} rejected before a ${COMMAND_TIMEOUT_MS} ms timer started with it`).toBe('call');
    expect(error, `${name} must reject`).toBeInstanceOf(Error);
    expect((error as Error).message, name).toMatch(pattern);
  }
}

/** The Redis Cluster hash tag of a key, by Redis's rule (first '{', then the first '}' after it, non-empty). */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

async function eventually(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function allKeys(r: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await r.scan(cursor, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys.sort();
}

afterEach(async () => {
  await Promise.all([...stores].map((s) => s.close()));
  stores.clear();
  await Promise.all([...admins].map((r) => r.quit().catch(() => r.disconnect())));
  admins.clear();
});
afterAll(async () => {
  await stopAllRedis();
});

describe('RedisPlacementStore when Redis goes away and comes back', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });

  it('goes unavailable, rejects every call fast, and recovers by itself (pub/sub and scripts included)', async () => {
    const s1 = open(server, { gatewayId: 'gw-1' });
    const s2 = open(server, { gatewayId: 'gw-2' });
    const events1 = record(s1);
    await Promise.all([s1.connect(), s2.connect()]);
    expect(s1.available).toBe(true);
    expect(events1).toEqual([{ type: 'available', available: true }]);
    await s1.place('before', 'b1', 0, NOT_FORCED);

    await server.kill('SIGKILL');
    await waitFor('s1 unavailable', 5000, () => !s1.available);
    expect(events1.filter((e) => e.type === 'available')).toEqual([
      { type: 'available', available: true },
      { type: 'available', available: false },
    ]);
    await expectAllRejectFast(s1, /Redis unavailable/);

    // Still down a while later (reconnect attempts in between): still fast.
    await new Promise((r) => setTimeout(r, 700));
    await expectAllRejectFast(s2, /Redis unavailable/);

    await server.restart();
    await waitFor('both stores available again', 10_000, () => s1.available && s2.available);
    expect(events1.filter((e) => e.type === 'available')).toEqual([
      { type: 'available', available: true },
      { type: 'available', available: false },
      { type: 'available', available: true },
    ]);
    // The server lost its data (no persistence) and its script cache: place() loads the script again.
    expect(await s1.get('before')).toBeNull();
    const after = await s2.place('after', 'b2', 0, NOT_FORCED);
    expect(after).toEqual({ ok: true, placement: { backend: 'b2', epoch: expect.any(Number) } });
    expect(await s1.get('after')).toEqual(after.ok ? after.placement : undefined);
    // The heartbeat script is loaded again too, and re-creates a live room's lost placement.
    await s1.heartbeat([{ room: 'before', backend: 'b1', sockets: 1 }]);
    expect(await s2.get('before')).toMatchObject({ backend: 'b1' });
    // Events flow again (the subscription was renewed on the new connection).
    await waitFor('placement event after restart', 3000, () => events1.some((e) => e.type === 'placement' && e.room === 'after'));
    await s1.setBackendState('b2', { state: 'draining', deadline: null, since: 5 });
    await waitFor('backend-state event after restart', 3000, () => events1.some((e) => e.type === 'backend-state' && e.id === 'b2'));
  });

  it('losing only the subscriber connection makes the store unavailable until events flow again', async () => {
    const a = admin(server);
    const s = open(server, { keyPrefix: 'subkill:', gatewayId: 'gw-sub' });
    const events = record(s);
    await s.connect();
    await a.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitFor('unavailable', 5000, () => !s.available);
    await waitFor('available again', 10_000, () => s.available);
    expect(events.filter((e) => e.type === 'available').map((e) => e.type === 'available' && e.available)).toEqual([true, false, true]);
    // Available again means subscribed again: the next change arrives.
    await s.place('r', 'b1', 0, NOT_FORCED);
    await waitFor('placement event', 3000, () => events.some((e) => e.type === 'placement' && e.room === 'r'));
  });

  it('a hung Redis (SIGSTOP): calls time out after commandTimeoutMs; replies stay matched after it resumes', async () => {
    // A short gatewayTtlMs: the move below is not refused for the placement's youth. (It runs only
    // once Redis resumes, after three command timeouts: long past 200 ms.)
    const s = open(server, { keyPrefix: 'hung:', timing: { ...TIMING, gatewayTtlMs: 200 } });
    await s.connect();
    const first = await s.place('hung', 'b1', 0, NOT_FORCED);
    if (!first.ok) throw new Error(`first place failed: ${JSON.stringify(first)}`);
    process.kill(server.pid, 'SIGSTOP');
    try {
      for (const call of [() => s.get('hung'), () => s.place('hung', 'b2', first.placement.epoch, NOT_FORCED), () => s.roomsPerBackend()]) {
        // Waited for the timeout (not rejected at once): a lower bound, which no slow machine breaks.
        const t0 = performance.now();
        // Rejected by the store's own commandTimeoutMs timer, not a longer default: before a timer
        // of twice that started with the call (an order of events, not a figure of elapsed time).
        const { first, error } = await settleOrder(call, 2 * COMMAND_TIMEOUT_MS);
        expect(first, 'rejected by the command timeout').toBe('call');
        expect((error as Error | undefined)?.message).toMatch(/timed out/i);
        expect(performance.now() - t0).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 20);
      }
    } finally {
      process.kill(server.pid, 'SIGCONT');
    }
    // The late replies to the timed-out commands are dropped, not handed to the next calls.
    // (The timed-out place() did run once Redis resumed: a timeout means "unknown", read again.)
    const moved = await s.get('hung');
    expect(moved).toEqual({ backend: 'b2', epoch: expect.any(Number) });
    expect(moved!.epoch).toBeGreaterThan(first.placement.epoch);
    expect(await s.get('nothing')).toBeNull();
    expect(Object.fromEntries(await s.roomsPerBackend())).toEqual({ b2: 1 });
  });

  it('connect() to a dead Redis rejects after its timeout with a clear message, without the password', async () => {
    await server.kill('SIGKILL');
    const url = `redis://:s3cret-pw@127.0.0.1:${server.port}`;
    const s = open(server, { url });
    // Rejected by its own 600 ms timer (the message names it), before a timer of twice that.
    const { first, error } = await settleOrder(() => s.connect({ timeoutMs: 600 }), 1200);
    expect(first).toBe('call');
    expect((error as Error).message).toMatch(/not reachable within 600 ms/);
    expect((error as Error).message).toMatch(/ECONNREFUSED/);
    expect((error as Error).message).not.toContain('s3cret-pw');
    expect(s.available).toBe(false);
    await expectAllRejectFast(s, /Redis unavailable/);
    await s.close();
    await server.restart();
  });

  it('a store whose connect() timed out keeps retrying and becomes available by itself', async () => {
    await server.kill('SIGKILL');
    const s = open(server);
    const events = record(s);
    await expect(s.connect({ timeoutMs: 300 })).rejects.toThrow(/not reachable/);
    await server.restart();
    await waitFor('available by itself', 10_000, () => s.available);
    expect(events).toEqual([{ type: 'available', available: true }]);
    expect(await s.place('late', 'b1', 0, NOT_FORCED)).toMatchObject({ ok: true });
    await s.connect(); // resolves at once now
  });

  it('close() is bounded and leaves no connection behind, also while Redis is down', async () => {
    const a = admin(server);
    const s = open(server, { gatewayId: 'gw-close' });
    await s.connect();
    await s.heartbeat([{ room: 'r', backend: 'b1', sockets: 1 }]);
    const names = async (): Promise<string[]> =>
      ((await a.client('LIST')) as string)
        .split('\n')
        .map((l) => /\bname=(\S*)/.exec(l)?.[1] ?? '')
        .filter((n) => n.startsWith('roomgate-gw-close'));
    expect((await names()).sort()).toEqual(['roomgate-gw-close', 'roomgate-gw-close-sub']);
    expect(await a.zscore('rt:{rg}:gw', 'gw-close')).not.toBeNull();
    await s.close(); // bounded by the command timeout (a hang fails the test by its timeout)
    await eventually('connections gone', 3000, async () => (await names()).length === 0);
    // Deregistered: its report no longer counts.
    expect(await a.zscore('rt:{rg}:gw', 'gw-close')).toBeNull();
    expect(await a.exists('rt:{rg}:gw:gw-close')).toBe(0);
    await expect(s.get('r')).rejects.toThrow(/closed/);
    await s.close(); // idempotent

    const down = open(server, { gatewayId: 'gw-down' });
    await down.connect();
    await server.kill('SIGKILL');
    await waitFor('unavailable', 5000, () => !down.available);
    // Does not wait for the reconnect: its only timer (one command timeout) started with the call.
    expect((await settleOrder(() => down.close(), 2 * COMMAND_TIMEOUT_MS)).first).toBe('call');
    await server.restart();
  });
});

describe('RedisPlacementStore keys', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });

  it('two stores with different key prefixes on one Redis do not see each other', async () => {
    const one = open(server, { keyPrefix: 'app1:', gatewayId: 'gw' });
    // app2 with a short gatewayTtlMs, so that its placement is soon old enough to be moved.
    const app2Timing = { ...TIMING, gatewayTtlMs: 200 };
    const two = open(server, { keyPrefix: 'app2:', gatewayId: 'gw', timing: app2Timing });
    const twoOther = open(server, { keyPrefix: 'app2:', gatewayId: 'gw-other', timing: app2Timing });
    await Promise.all([one.connect(), two.connect(), twoOther.connect()]);
    const eventsTwo = record(two);
    const inOne = await one.place('r', 'b1', 0, NOT_FORCED);
    expect(inOne).toEqual({ ok: true, placement: { backend: 'b1', epoch: expect.any(Number) } });
    expect(await two.get('r')).toBeNull();
    const inTwo = await two.place('r', 'b2', 0, NOT_FORCED);
    expect(inTwo).toEqual({ ok: true, placement: { backend: 'b2', epoch: expect.any(Number) } });
    expect(await one.get('r')).toEqual(inOne.ok ? inOne.placement : undefined);
    expect(await two.get('r')).toEqual(inTwo.ok ? inTwo.placement : undefined);
    expect(Object.fromEntries(await one.roomsPerBackend())).toEqual({ b1: 1 });
    expect(Object.fromEntries(await two.roomsPerBackend())).toEqual({ b2: 1 });
    // app1's gateway report does not make app2's room busy (app2's move: its own event). The room
    // is old enough to be moved first, so only a report could refuse the move.
    await sleep(app2Timing.gatewayTtlMs + 100);
    await one.heartbeat([{ room: 'r', backend: 'b2', sockets: 3 }]);
    expect(await twoOther.place('r', 'b3', inTwo.ok ? inTwo.placement.epoch : -1, NOT_FORCED)).toMatchObject({ ok: true });
    await one.setBackendState('b1', { state: 'maintenance', deadline: null, since: 1 });
    expect(await two.backendStates()).toEqual(new Map());
    await two.place('marker', 'b1', 0, NOT_FORCED);
    await waitFor('own marker', 3000, () => eventsTwo.some((e) => e.type === 'placement' && e.room === 'marker'));
    expect(eventsTwo.filter((e) => e.type === 'backend-state')).toEqual([]);
    expect(eventsTwo.filter((e) => e.type === 'placement').map((e) => (e.type === 'placement' ? e.room : ''))).toEqual(['r', 'r', 'marker']);
  });

  it('every key written starts with the prefix and carries the one {rg} hash tag', async () => {
    const fresh = await startRedis();
    const a = admin(fresh);
    const s1 = open(fresh, { keyPrefix: 'myapp:', gatewayId: 'gw-1', timing: { idleTtlMs: 60_000, gatewayTtlMs: 60_000 } });
    const s2 = open(fresh, { keyPrefix: 'myapp:', gatewayId: 'gw-2', timing: { idleTtlMs: 60_000, gatewayTtlMs: 60_000 } });
    await Promise.all([s1.connect(), s2.connect()]);
    const epochs: number[] = [];
    for (const room of ['room-1', 'a:b.c', '__proto__']) {
      const r = await s1.place(room, 'b1', 0, NOT_FORCED);
      if (!r.ok) throw new Error(`place failed: ${JSON.stringify(r)}`);
      epochs.push(r.placement.epoch);
    }
    const beforeMove = Date.now();
    const move = await s2.place('room-1', 'b2', epochs[0]!, { force: true });
    const afterMove = Date.now();
    if (!move.ok) throw new Error(`move failed: ${JSON.stringify(move)}`);
    epochs.push(move.placement.epoch);
    await s1.heartbeat([{ room: 'a:b.c', backend: 'b1', sockets: 2 }]);
    await s2.heartbeat([{ room: 'room-1', backend: 'b2', sockets: 1 }]);
    await s1.setBackendState('b1', { state: 'draining', deadline: 10, since: 1 });
    await s1.roomsPerBackend();
    const keys = await allKeys(a);
    expect(keys).toEqual([
      'myapp:{rg}:backends',
      'myapp:{rg}:bstate',
      'myapp:{rg}:epoch',
      'myapp:{rg}:gw',
      'myapp:{rg}:gw-live',
      'myapp:{rg}:gw:gw-1',
      'myapp:{rg}:gw:gw-2',
      'myapp:{rg}:p:__proto__',
      'myapp:{rg}:p:a:b.c',
      'myapp:{rg}:p:room-1',
      'myapp:{rg}:rooms:b1',
      'myapp:{rg}:rooms:b2',
    ]);
    for (const k of keys) {
      expect(k.startsWith('myapp:')).toBe(true);
      expect(hashTag(k)).toBe('rg');
    }
    // Placements of idle rooms expire by themselves; those a live report holds on their backend
    // (a:b.c, room-1) are kept live without a TTL until the report drops them or its gateway is
    // reaped. Reports have no TTL: they go with their gateway (close(), or trimmed once silent).
    for (const k of keys.filter((k) => k.includes(':p:') || k.includes(':gw:'))) {
      const ttl = await a.pttl(k);
      if (k.endsWith(':p:a:b.c') || k.endsWith(':p:room-1') || k.includes(':gw:')) {
        expect(ttl, k).toBe(-1);
        continue;
      }
      expect(ttl, k).toBeGreaterThan(0);
      expect(ttl, k).toBeLessThanOrEqual(60_000);
    }
    // A placement hash: backend, epoch, and when it was written (ms, Redis's clock; this machine's).
    for (const k of keys.filter((k) => k.includes(':p:'))) {
      expect(Object.keys(await a.hgetall(k)).sort(), k).toEqual(['at', 'backend', 'epoch']);
    }
    const moved = await a.hgetall('myapp:{rg}:p:room-1');
    expect(moved).toEqual({ backend: 'b2', epoch: String(move.placement.epoch), at: expect.stringMatching(/^\d+$/) });
    expect(Number(moved.at)).toBeGreaterThanOrEqual(beforeMove - 100);
    expect(Number(moved.at)).toBeLessThanOrEqual(afterMove + 100);
    // The epoch counter never expires (an expired counter would give out old epochs again) and is
    // at least every epoch given out.
    expect(await a.pttl('myapp:{rg}:epoch')).toBe(-1);
    expect(Number(await a.get('myapp:{rg}:epoch'))).toBeGreaterThanOrEqual(Math.max(...epochs));
  });

  it('epochs stay above every epoch handed out when the counter went back (a failover lost its last increments)', async () => {
    const fresh = await startRedis();
    const a = admin(fresh);
    const s1 = open(fresh, { keyPrefix: 'fo:', gatewayId: 'gw-1', timing: { idleTtlMs: 60_000, gatewayTtlMs: 60_000 } });
    await s1.connect();
    const given: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await s1.place(`fo-${i}`, 'b1', 0, NOT_FORCED);
      if (!r.ok) throw new Error(`place failed: ${JSON.stringify(r)}`);
      given.push(r.placement.epoch);
    }
    // What a promoted replica may hold: the counter as it was a few placements ago.
    await a.set('fo:{rg}:epoch', String(given[1]));
    await new Promise((r) => setTimeout(r, 5));
    const next = await s1.place('fo-new', 'b2', 0, NOT_FORCED);
    if (!next.ok) throw new Error(`place failed: ${JSON.stringify(next)}`);
    expect(next.placement.epoch).toBeGreaterThan(Math.max(...given));
    // And a move of a room placed before gets a larger epoch than its old one, never an old number.
    const moved = await s1.place('fo-4', 'b2', given[4] as number, { force: true });
    expect(moved.ok && moved.placement.epoch > next.placement.epoch).toBe(true);
  });

  it('a report of changes over a stamp that is not its own last one (a lost write, a late report) answers resync', async () => {
    const a = admin(server);
    const s1 = open(server, { keyPrefix: 'st:', gatewayId: 'gw-1', timing: { idleTtlMs: 60_000, gatewayTtlMs: 60_000 } });
    await s1.connect();
    expect(await s1.heartbeat([{ room: 'one', backend: 'b1', sockets: 1 }])).toBe('ok');
    const first = await a.zscore('st:{rg}:gw-live', 'gw-1');
    await sleep(5);
    expect(await s1.heartbeat({ rooms: [{ room: 'two', backend: 'b1', sockets: 1 }], gone: [] })).toBe('ok');
    // What a promoted replica that missed the last write holds, the connection kept: the stamp
    // (fresh) and the report of the heartbeat before; the room of the lost delta is not there.
    await a.zadd('st:{rg}:gw-live', String(first), 'gw-1');
    await a.hdel('st:{rg}:gw:gw-1', 'two');
    expect(await s1.heartbeat(null)).toBe('resync');
    expect(await s1.heartbeat({ rooms: [{ room: 'three', backend: 'b1', sockets: 1 }], gone: [] })).toBe('resync');
    // The whole list puts it right, and reports of changes go on from its stamp.
    const whole = [{ room: 'one', backend: 'b1', sockets: 1 }, { room: 'two', backend: 'b1', sockets: 1 }, { room: 'three', backend: 'b1', sockets: 1 }];
    expect(await s1.heartbeat(whole)).toBe('ok');
    expect(Object.keys(await a.hgetall('st:{rg}:gw:gw-1')).sort()).toEqual(['one', 'three', 'two']);
    expect(await s1.heartbeat(null)).toBe('ok');
  });

  it('a heartbeat of 10000 live rooms is one call and reports every room', async () => {
    // This heartbeat also creates the 9999 missing placements (about the cost of refreshing 10000;
    // a few hundred ms on a loaded 2-core machine): latency is not what this test is about.
    // A shorter gatewayTtlMs (still far above the heartbeat's duration, also on a machine busy
    // with other work: at 1 s the report expired before the check once): the placement below can
    // age past it, so that only the report makes it busy.
    const slow = { commandTimeoutMs: 5000, timing: { ...TIMING, gatewayTtlMs: 3000 } };
    const s1 = open(server, { keyPrefix: 'big:', gatewayId: 'gw-1', ...slow });
    const s2 = open(server, { keyPrefix: 'big:', gatewayId: 'gw-2', ...slow });
    await Promise.all([s1.connect(), s2.connect()]);
    const live = Array.from({ length: 10_000 }, (_, i) => ({ room: `room-${i}`, backend: 'b1', sockets: 1 }));
    const placed = await s1.place('room-9999', 'b1', 0, NOT_FORCED);
    if (!placed.ok) throw new Error(`place failed: ${JSON.stringify(placed)}`);
    await sleep(slow.timing.gatewayTtlMs + 100);
    await s1.heartbeat(live);
    expect(await s2.place('room-9999', 'b2', placed.placement.epoch, NOT_FORCED)).toEqual({ ok: false, reason: 'busy', current: placed.placement });
    expect(await admin(server).hlen('big:{rg}:gw:gw-1')).toBe(10_000);
    // Every live room has a placement where its sockets are; the existing one kept its epoch.
    expect(Object.fromEntries(await s2.roomsPerBackend())).toEqual({ b1: 10_000 });
    expect(await s2.get('room-0')).toEqual({ backend: 'b1', epoch: expect.any(Number) });
    expect(await s2.get('room-9999')).toEqual(placed.placement);
    // The next heartbeats send what changed: nothing (null), or one room each way; their Redis
    // commands do not grow with the 10,000 rooms (counted, not timed).
    const a = admin(server);
    await a.config('RESETSTAT');
    expect(await s1.heartbeat(null)).toBe('ok');
    const idle = await commandCounts(a);
    expect(idle.evalsha).toBe(1);
    expect(sumCounts(idle)).toBeLessThanOrEqual(10);
    await a.config('RESETSTAT');
    expect(await s1.heartbeat({ rooms: [{ room: 'new', backend: 'b2', sockets: 1 }], gone: ['room-0'] })).toBe('ok');
    expect(sumCounts(await commandCounts(a))).toBeLessThanOrEqual(30);
    expect(await s2.get('new')).toEqual({ backend: 'b2', epoch: expect.any(Number) });
    expect(await admin(server).hlen('big:{rg}:gw:gw-1')).toBe(10_000);
    expect(Object.fromEntries(await s2.roomsPerBackend())).toEqual({ b1: 10_000, b2: 1 });
  });

  it('rejects a key prefix that would change the hash tag', () => {
    expect(() => open(server, { keyPrefix: 'app{x}:' })).toThrow(/keyPrefix must not contain/);
  });
});
