// Redis-only behaviour of RedisSharedDataStore: failing fast while Redis is down or hung, recovering by
// itself (connections, pub/sub, scripts, presence counts) when it is back, key prefix isolation and
// key layout, the cost of a heartbeat and of the aggregate read (counted with INFO commandstats),
// the aggregate cache, and a close() that leaves nothing behind. The shared semantics are in
// store-contract.test.ts.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisSharedDataStore, type RedisSharedDataStoreOptions } from '../../src/shared-data/redis-store.js';
import type { LobbyQuery, RoomPresence, SharedDataEvent, SharedDataStore } from '../../src/shared-data/store.js';
import { settleOrder } from '../support/event-order.js';
import { waitFor } from '../support/processes.js';
import { commandCounts, startRedis, stopAllRedis, sumCounts, type RedisServer } from '../support/redis.js';

/** The command timeout of the tests about a hung Redis. */
const COMMAND_TIMEOUT_MS = 300;
/** The other tests' command timeout: generous, for a loaded machine (they are not about timing). */
const RELAXED_TIMEOUT_MS = 2000;
const TTL = 5000;
const T0 = Date.UTC(2025, 0, 1);
const Q: LobbyQuery = { sort: 'sockets', order: 'desc', offset: 0, limit: 100 };

const stores = new Set<RedisSharedDataStore>();
const admins = new Set<Redis>();

function open(server: RedisServer, over: Partial<RedisSharedDataStoreOptions> = {}): RedisSharedDataStore {
  const s = new RedisSharedDataStore({
    url: server.url,
    keyPrefix: 'rt:',
    gatewayId: 'gw-1',
    presenceTtlMs: TTL,
    commandTimeoutMs: RELAXED_TIMEOUT_MS,
    aggregateCacheMs: 0,
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

function record(store: SharedDataStore): SharedDataEvent[] {
  const events: SharedDataEvent[] = [];
  store.subscribe((ev) => events.push(ev));
  return events;
}

const availability = (events: readonly SharedDataEvent[]): boolean[] => events.flatMap((e) => (e.type === 'available' ? [e.available] : []));
const lobbyRooms = (events: readonly SharedDataEvent[]): string[] => events.flatMap((e) => (e.type === 'lobby' ? e.rooms : []));

function p(room: string, backend: string, sockets: number, since = T0): RoomPresence {
  return { room, backend, sockets, since };
}

/**
 * Every SharedDataStore call; each must reject at once (no queue waiting for a reconnect): before a
 * timer of one (hung-Redis) command timeout started with the call.
 */
async function expectAllRejectFast(s: SharedDataStore, pattern: RegExp): Promise<void> {
  const calls: Record<string, () => Promise<unknown>> = {
    publishPresence: () => s.publishPresence([p('r', 'b1', 1)], TTL),
    withdrawPresence: () => s.withdrawPresence(),
    online: () => s.online(),
    lobby: () => s.lobby(Q),
    room: () => s.room('r'),
    setMeta: () => s.setMeta('r', { a: 1 }, false),
    deleteMeta: () => s.deleteMeta('r'),
    score: () => s.score('board', 'm', 1, 'incr'),
    top: () => s.top('board', 0, 10),
    member: () => s.member('board', 'm'),
    around: () => s.around('board', 'm', 2),
    boardExists: () => s.boardExists('board'),
    boardSize: () => s.boardSize('board'),
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
  const start = key.indexOf('{');
  if (start === -1) return key;
  const end = key.indexOf('}', start + 1);
  if (end === -1 || end === start + 1) return key;
  return key.slice(start + 1, end);
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

describe('RedisSharedDataStore when Redis goes away and comes back', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  // A test that failed while Redis was down must not fail the next ones with it.
  afterEach(async () => {
    if (!server.running) await server.restart();
  });

  it('goes unavailable, rejects every call fast, recovers by itself; the next heartbeats make the counts right', async () => {
    const s1 = open(server, { gatewayId: 'gw-1' });
    const s2 = open(server, { gatewayId: 'gw-2' });
    const events1 = record(s1);
    await Promise.all([s1.connect(), s2.connect()]);
    expect(s1.available).toBe(true);
    expect(events1).toEqual([{ type: 'available', available: true }]);
    await s1.publishPresence([p('r1', 'b1', 2)], TTL);
    await s2.publishPresence([p('r1', 'b1', 3), p('r2', 'b2', 1)], TTL);
    await s1.score('board', 'm', 1, 'incr');
    expect(await s1.online()).toEqual({ total: 6, rooms: 2, byBackend: { b1: 5, b2: 1 } });

    await server.kill('SIGKILL');
    await waitFor('s1 unavailable', 5000, () => !s1.available);
    expect(availability(events1)).toEqual([true, false]);
    await expectAllRejectFast(s1, /Redis unavailable/);

    // Still down a while later (reconnect attempts in between): still fast.
    await new Promise((r) => setTimeout(r, 700));
    await expectAllRejectFast(s2, /Redis unavailable/);

    await server.restart();
    await waitFor('both stores available again', 10_000, () => s1.available && s2.available);
    expect(availability(events1)).toEqual([true, false, true]);
    // The server lost its data (no persistence) and its script cache.
    expect(await s1.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
    const before = events1.length;
    // The next heartbeat of each gateway puts its whole report back, and announces it.
    await s1.publishPresence([p('r1', 'b1', 2)], TTL);
    expect(await s2.online()).toEqual({ total: 2, rooms: 1, byBackend: { b1: 2 } });
    await s2.publishPresence([p('r1', 'b1', 3), p('r2', 'b2', 1)], TTL);
    expect(await s1.online()).toEqual({ total: 6, rooms: 2, byBackend: { b1: 5, b2: 1 } });
    expect(await s1.room('r1')).toMatchObject({ sockets: 5, backend: 'b1' });
    await waitFor('lobby events after restart', 3000, () => ['r1', 'r2'].every((r) => lobbyRooms(events1.slice(before)).includes(r)));
    // Scripts work again (loaded again), leaderboards start empty.
    expect(await s2.member('board', 'm')).toBeNull();
    expect(await s2.score('board', 'm', 2, 'incr')).toBe(2);
    expect(await s1.around('board', 'm', 1)).toEqual([{ member: 'm', score: 2, rank: 1 }]);
  });

  it('losing only the subscriber connection makes the store unavailable until events flow again', async () => {
    const a = admin(server);
    const s = open(server, { keyPrefix: 'subkill:', gatewayId: 'gw-sub' });
    const events = record(s);
    await s.connect();
    await a.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitFor('unavailable', 5000, () => !s.available);
    await waitFor('available again', 10_000, () => s.available);
    expect(availability(events)).toEqual([true, false, true]);
    // Available again means subscribed again: the next change arrives.
    await s.setMeta('r', { x: 1 }, true);
    await waitFor('lobby event', 3000, () => lobbyRooms(events).includes('r'));
  });

  it('a hung Redis (SIGSTOP): calls time out after commandTimeoutMs; replies stay matched after it resumes', async () => {
    const s = open(server, { keyPrefix: 'hung:', commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await s.connect();
    await s.publishPresence([p('hung', 'b1', 1)], TTL);
    process.kill(server.pid, 'SIGSTOP');
    try {
      // In parallel: the stall stays shorter than the 4 command timeouts after which the link gives
      // up on a silent connection, so the late replies below arrive on this same connection.
      const calls = [() => s.online(), () => s.score('b', 'm', 5, 'set'), () => s.top('b', 0, 1), () => s.room('hung')];
      const t0 = performance.now();
      // Rejected by the store's own commandTimeoutMs timer, not a longer default: before a timer of
      // twice that started with the calls (an order of events, not a figure of elapsed time).
      for (const { first, error } of await Promise.all(calls.map((call) => settleOrder(call, 2 * COMMAND_TIMEOUT_MS)))) {
        expect(first, 'rejected by the command timeout').toBe('call');
        expect((error as Error | undefined)?.message).toMatch(/timed out/i);
      }
      // Waited for the timeout (not rejected at once): a lower bound, which no slow machine breaks.
      // Loose: Node's timers count from the event loop's cached clock and may fire tens of ms early.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS / 2);
    } finally {
      process.kill(server.pid, 'SIGCONT');
    }
    // The late replies to the timed-out commands are dropped, not handed to the next calls. (The
    // timed-out score() did run once Redis resumed: a timeout means "unknown", read again.)
    expect(await s.member('b', 'm')).toEqual({ member: 'm', score: 5, rank: 1 });
    expect(await s.room('nothing')).toBeNull();
    expect(await s.online()).toEqual({ total: 1, rooms: 1, byBackend: { b1: 1 } });
  });

  it('connect() to a dead Redis rejects after its timeout with a clear message, without the password; it then becomes available by itself', async () => {
    await server.kill('SIGKILL');
    const url = `redis://:s3cret-pw@127.0.0.1:${server.port}`;
    const s = open(server, { url });
    const events = record(s);
    // Rejected by its own 600 ms timer (the message names it), before a timer of twice that.
    const { first, error } = await settleOrder(() => s.connect({ timeoutMs: 600 }), 1200);
    expect(first).toBe('call');
    expect((error as Error).message).toMatch(/not reachable within 600 ms/);
    expect((error as Error).message).toMatch(/ECONNREFUSED/);
    expect((error as Error).message).not.toContain('s3cret-pw');
    expect(s.available).toBe(false);
    await expectAllRejectFast(s, /Redis unavailable/);
    await server.restart();
    await waitFor('available by itself', 10_000, () => s.available);
    expect(events).toEqual([{ type: 'available', available: true }]);
    await s.publishPresence([p('late', 'b1', 1)], TTL);
    expect((await s.online()).total).toBe(1);
    await s.connect(); // resolves at once now
  });

  it('close() is bounded, withdraws the presence and leaves no connection behind, also while Redis is down', async () => {
    const a = admin(server);
    const s = open(server, { keyPrefix: 'close:', gatewayId: 'gw-close' });
    const other = open(server, { keyPrefix: 'close:', gatewayId: 'gw-other' });
    await Promise.all([s.connect(), other.connect()]);
    await s.publishPresence([p('r', 'b1', 1)], TTL);
    const names = async (): Promise<string[]> =>
      ((await a.client('LIST')) as string)
        .split('\n')
        .map((l) => /\bname=(\S*)/.exec(l)?.[1] ?? '')
        .filter((n) => n.startsWith('roomgate-lobby-gw-close'));
    expect((await names()).sort()).toEqual(['roomgate-lobby-gw-close', 'roomgate-lobby-gw-close-sub']);
    expect((await other.online()).total).toBe(1);
    await s.close(); // bounded by the command timeout (a hang fails the test by its timeout)
    await waitFor('connections gone', 3000, async () => (await names()).length === 0);
    expect((await other.online()).total).toBe(0);
    expect(await a.exists('close:{rg}:pres:gw:gw-close')).toBe(0);
    await expect(s.online()).rejects.toThrow(/closed/);
    await s.close(); // idempotent

    const down = open(server, { gatewayId: 'gw-down', commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await down.connect();
    await server.kill('SIGKILL');
    await waitFor('unavailable', 5000, () => !down.available);
    // Does not wait for the reconnect: its only timer (one command timeout) started with the call.
    expect((await settleOrder(() => down.close(), 2 * COMMAND_TIMEOUT_MS)).first).toBe('call');
    await server.restart();
  });
});

describe('RedisSharedDataStore keys and cost', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });

  it('the listed flag is stored with the metadata; metadata written before it existed reads as listed', async () => {
    const s = open(server, { keyPrefix: 'listed:', gatewayId: 'gw' });
    await s.connect();
    const a = admin(server);
    await s.publishPresence([p('old', 'b1', 1), p('priv', 'b1', 2), p('bad', 'b1', 1)], TTL);
    await s.setMeta('priv', { status: 'open' }, true, false);
    expect(JSON.parse((await a.get('listed:{rg}:meta:priv')) ?? 'null')).toMatchObject({ pinned: true, listed: false, meta: { status: 'open' } });
    // As an older roomgate wrote it: no "listed" (the lobby then listed every room).
    await a.set('listed:{rg}:meta:old', JSON.stringify({ pinned: true, at: T0, meta: { status: 'legacy' } }));
    await a.set('listed:{rg}:meta:bad', JSON.stringify({ pinned: true, listed: 'yes', at: T0, meta: { status: 'odd' } }));
    expect(await s.room('old')).toMatchObject({ meta: { status: 'legacy' }, listed: true });
    expect(await s.room('priv')).toMatchObject({ meta: { status: 'open' }, listed: false });
    // A flag that is not a boolean: the metadata is malformed, ignored (not listed, no metadata).
    expect(await s.room('bad')).toMatchObject({ meta: null, listed: false });
    const listed = await s.lobby({ ...Q, listing: { patterns: [] } });
    expect(listed.rooms.map((r) => r.room)).toEqual(['old']);
  });

  it('two stores with different key prefixes on one Redis do not see each other', async () => {
    const one = open(server, { keyPrefix: 'app1:', gatewayId: 'gw' });
    const two = open(server, { keyPrefix: 'app2:', gatewayId: 'gw' });
    await Promise.all([one.connect(), two.connect()]);
    const eventsTwo = record(two);
    await one.publishPresence([p('r', 'b1', 4)], TTL);
    await one.setMeta('r', { status: 'open' }, true);
    await one.score('board', 'm', 3, 'set');
    expect(await two.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
    expect(await two.room('r')).toBeNull();
    expect(await two.boardExists('board')).toBe(false);
    await two.publishPresence([p('r', 'b2', 1)], TTL);
    expect(await one.room('r')).toMatchObject({ sockets: 4, backend: 'b1', meta: { status: 'open' } });
    expect(await two.room('r')).toMatchObject({ sockets: 1, backend: 'b2', meta: null });
    expect(await one.member('board', 'm')).toEqual({ member: 'm', score: 3, rank: 1 });
    // Events: app2 sees only its own change.
    await two.setMeta('marker', {}, false);
    await waitFor('own marker', 3000, () => lobbyRooms(eventsTwo).includes('marker'));
    expect(eventsTwo).toEqual([
      { type: 'lobby', rooms: ['r'] },
      { type: 'lobby', rooms: ['marker'] },
    ]);
  });

  it('every key written starts with the prefix and carries the one {rg} hash tag', async () => {
    const fresh = await startRedis();
    const a = admin(fresh);
    const s1 = open(fresh, { keyPrefix: 'myapp:', gatewayId: 'gw-1', presenceTtlMs: 60_000, commandTimeoutMs: 5000 });
    const s2 = open(fresh, { keyPrefix: 'myapp:', gatewayId: 'gw-2', presenceTtlMs: 60_000, commandTimeoutMs: 5000 });
    await Promise.all([s1.connect(), s2.connect()]);
    await s1.publishPresence([p('room-1', 'b1', 1), p('a:b.c', 'b1', 2), p('__proto__', 'b2', 1)], 60_000);
    await s2.publishPresence([p('room-1', 'b1', 3)], 60_000);
    await s1.setMeta('room-1', { status: 'open' }, false);
    await s2.setMeta('a:b.c', { status: 'pinned' }, true);
    await s1.setMeta('{x}', { odd: 'name' }, true);
    await s1.score('scores', 'alice', 5, 'set');
    await s2.score('{weird}:board', 'bob', 1, 'incr');
    await s1.lobby(Q);
    await s1.room('room-1');
    const keys = await allKeys(a);
    expect(keys).toEqual([
      'myapp:{rg}:lb:scores',
      'myapp:{rg}:lb:{weird}:board',
      'myapp:{rg}:meta-exp',
      'myapp:{rg}:meta:a:b.c',
      'myapp:{rg}:meta:room-1',
      'myapp:{rg}:meta:{x}',
      'myapp:{rg}:pres:gw:gw-1',
      'myapp:{rg}:pres:gw:gw-2',
      'myapp:{rg}:pres:gws',
    ]);
    for (const k of keys) {
      expect(k.startsWith('myapp:')).toBe(true);
      expect(hashTag(k)).toBe('rg');
    }
    // Reports expire by themselves; metadata and boards have no TTL (unpinned metadata is collected).
    for (const k of keys.filter((k) => k.includes(':pres:gw:'))) {
      const ttl = await a.pttl(k);
      expect(ttl, k).toBeGreaterThan(60_000);
      expect(ttl, k).toBeLessThanOrEqual(120_000);
    }
    expect(await a.pttl('myapp:{rg}:meta:room-1')).toBe(-1);
    expect(await a.zrange('myapp:{rg}:meta-exp', '0', '-1')).toEqual(['room-1']);
    // Scores are stored negated (ties then come in ascending member order with ZRANGE).
    expect(await a.zscore('myapp:{rg}:lb:scores', 'alice')).toBe('-5');
    expect(JSON.parse((await a.hget('myapp:{rg}:pres:gw:gw-1', 'a:b.c')) ?? '')).toEqual({ backend: 'b1', sockets: 2, since: T0 });
  });

  it('a heartbeat is one round trip of 8 + 2*ceil(rooms/500) Redis commands; the aggregate read is one too', async () => {
    const fresh = await startRedis();
    const a = admin(fresh);
    // Counting, not timing: a generous timeout for a loaded machine.
    const s = open(fresh, { keyPrefix: 'cost:', gatewayId: 'gw-1', commandTimeoutMs: 5000 });
    await s.connect();
    // 10,000 sockets in 2,500 rooms; a few with unpinned metadata.
    const report = Array.from({ length: 2500 }, (_, i) => p(`room-${i}`, `b${i % 3}`, 4, T0 + i));
    await s.publishPresence(report, TTL);
    for (let i = 0; i < 10; i++) await s.setMeta(`room-${i}`, { status: 'open' }, false);

    await a.config('RESETSTAT');
    report[7] = p('room-7', 'b1', 5, T0 + 7);
    await s.publishPresence(report, TTL);
    const counts = await commandCounts(a);
    expect(counts.evalsha).toBe(1); // one round trip
    expect(counts.eval).toBeUndefined();
    expect(sumCounts(counts)).toBe(8 + 2 * 5);
    expect(counts).toMatchObject({ hset: 5, zadd: 6, publish: 1 });

    // Nothing changed: no PUBLISH.
    await a.config('RESETSTAT');
    await s.publishPresence(report, TTL);
    expect(sumCounts(await commandCounts(a))).toBe(8 + 2 * 5 - 1);

    // Sent as unchanged (null), whatever the number of rooms: TIME, ZSCORE, PEXPIRE, ZADD,
    // 2 ZRANGEBYSCORE in one EVALSHA.
    await a.config('RESETSTAT');
    expect(await s.publishPresence(null, TTL)).toBeUndefined();
    expect(await commandCounts(a)).toEqual({ evalsha: 1, time: 1, zscore: 1, pexpire: 1, zadd: 1, zrangebyscore: 2 });
    // A delta of one room: that room's HSET and metadata ZADD, and the change's PUBLISH, more.
    await a.config('RESETSTAT');
    await s.publishPresence({ rooms: [p('room-8', 'b2', 4, T0 + 1)], gone: [] }, TTL);
    expect(await commandCounts(a)).toEqual({ evalsha: 1, time: 1, zscore: 1, pexpire: 1, zadd: 2, hset: 1, zrangebyscore: 2, publish: 1 });
    expect((await s.room('room-8'))?.since).toBe(new Date(T0 + 1).toISOString());

    // The aggregate read: one EVALSHA (TIME, ZRANGEBYSCORE, 1 HGETALL, 5 MGET).
    await a.config('RESETSTAT');
    const page = await s.lobby({ ...Q, limit: 500, status: 'open' });
    expect(page.total).toBe(10);
    expect(await s.online()).toEqual({ total: 10_001, rooms: 2500, byBackend: { b0: 3336, b1: 3333, b2: 3332 } });
    const readCounts = await commandCounts(a);
    expect(readCounts.evalsha).toBe(2); // no cache in this test
    expect(sumCounts(readCounts)).toBe(2 * 9);
  });

  it('lobby()/online() share one aggregate read, cached up to aggregateCacheMs (3 s here, for a loaded machine); own writes and events drop it', async () => {
    const fresh = await startRedis();
    const a = admin(fresh);
    // 3 s: the cached read below must come within it; 1 s was once exceeded on 2 loaded cores.
    const reader = open(fresh, { keyPrefix: 'cache:', gatewayId: 'gw-r', aggregateCacheMs: 3000, commandTimeoutMs: 5000 });
    const writer = open(fresh, { keyPrefix: 'cache:', gatewayId: 'gw-w', commandTimeoutMs: 5000 });
    await Promise.all([reader.connect(), writer.connect()]);
    const events = record(reader);
    await writer.publishPresence([p('r', 'b1', 1)], TTL);
    await waitFor('event', 3000, () => events.length > 0);

    await a.config('RESETSTAT');
    const polls = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? reader.online() : reader.lobby(Q))));
    for (let i = 0; i < 10; i++) polls.push(await reader.online());
    expect((await commandCounts(a)).evalsha).toBe(1);
    expect(polls.every((x) => ('total' in x ? x.total === 1 : false))).toBe(true);

    // Own write: seen at once.
    await reader.publishPresence([p('mine', 'b2', 2)], TTL);
    expect((await reader.online()).total).toBe(3);
    // Another gateway's write: seen once its event has arrived.
    const before = events.length;
    await writer.publishPresence([p('r', 'b1', 5)], TTL);
    await waitFor('event', 3000, () => events.length > before);
    expect((await reader.online()).total).toBe(7);
    // Without any event, a change made behind its back (admin) shows after the cache time.
    await a.hset('cache:{rg}:pres:gw:gw-w', 'r', JSON.stringify({ backend: 'b1', sockets: 9, since: T0 }));
    expect((await reader.online()).total).toBe(7);
    await new Promise((r) => setTimeout(r, 3100));
    expect((await reader.online()).total).toBe(11);
  });

  it('rejects a key prefix that would change the hash tag', () => {
    expect(() => open(server, { keyPrefix: 'app{x}:' })).toThrow(/keyPrefix must not contain/);
  });
});
