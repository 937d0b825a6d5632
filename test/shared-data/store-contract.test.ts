// One contract for both shared stores (presence, lobby, metadata, leaderboards, events): every test
// runs against the in-memory store (handles on one MemorySharedDataState, a controlled clock) and the
// Redis store (RedisSharedDataStore handles on one real redis-server, real waits). Each handle plays
// one gateway.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemorySharedDataState, MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { RedisSharedDataStore } from '../../src/shared-data/redis-store.js';
import type { LobbyQuery, LobbyRoom, Ranked, RoomPresence, SharedDataEvent, SharedDataStore } from '../../src/shared-data/store.js';
import { waitFor } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';

interface Harness {
  /** A handle for one gateway; all handles of one harness share one state. */
  open(gatewayId: string): Promise<SharedDataStore>;
  /** Lets time pass: the memory clock jumps, for Redis the test really waits. */
  advance(ms: number): Promise<void>;
  /** The store's clock (ms). */
  now(): number;
  dispose(): Promise<void>;
}

/** The presence TTL of these tests, and how long to wait for something to be past it. */
const TTL = 400;
const PAST_TTL = 650;
const LONG_TTL = 20_000;
const T0 = Date.UTC(2025, 0, 1);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function memoryHarness(): Harness {
  const state = new MemorySharedDataState();
  let clock = 1_700_000_000_000;
  const stores: SharedDataStore[] = [];
  return {
    async open(gatewayId) {
      const s = new MemorySharedDataStore(gatewayId, { presenceTtlMs: TTL }, state, () => clock);
      stores.push(s);
      return s;
    },
    async advance(ms) {
      clock += ms;
    },
    now: () => clock,
    async dispose() {
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}

let redis: RedisServer | undefined;
let harnessSeq = 0;

function redisHarness(): Harness {
  if (!redis) throw new Error('redis-server not started');
  const url = redis.url;
  // A fresh key prefix per test: tests share the server, never state.
  const keyPrefix = `lobby-contract-${process.pid}-${++harnessSeq}:`;
  const stores: RedisSharedDataStore[] = [];
  return {
    async open(gatewayId) {
      // No aggregate cache: the contract is about what is stored (the cache is tested in redis-store.test.ts).
      const s = new RedisSharedDataStore({ url, keyPrefix, gatewayId, presenceTtlMs: TTL, commandTimeoutMs: 2000, aggregateCacheMs: 0 });
      stores.push(s);
      await s.connect({ timeoutMs: 5000 });
      return s;
    },
    advance: sleep,
    now: () => Date.now(),
    async dispose() {
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}

function record(store: SharedDataStore): SharedDataEvent[] {
  const events: SharedDataEvent[] = [];
  store.subscribe((ev) => events.push(ev));
  return events;
}

/** Rooms named in the lobby events so far. */
function lobbyRooms(events: readonly SharedDataEvent[]): string[] {
  return events.flatMap((e) => (e.type === 'lobby' ? e.rooms : []));
}

function p(room: string, backend: string, sockets: number, since = T0): RoomPresence {
  return { room, backend, sockets, since };
}

const iso = (ms: number): string => new Date(ms).toISOString();

function q(over: Partial<LobbyQuery> = {}): LobbyQuery {
  return { sort: 'sockets', order: 'desc', offset: 0, limit: 100, ...over };
}

const names = (rooms: readonly LobbyRoom[]): string[] => rooms.map((r) => r.room);

/** Code point order, written independently of the store's helper. */
function byCodePoint(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0) ?? 0);
  const y = [...b].map((c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
  return x.length - y.length;
}

function contract(kind: 'memory' | 'redis', makeHarness: () => Harness): void {
  describe(`SharedDataStore contract: ${kind}`, () => {
    let h: Harness;
    let a: SharedDataStore;
    let b: SharedDataStore;

    const setup = async (): Promise<void> => {
      h = makeHarness();
      a = await h.open('gw-a');
      b = await h.open('gw-b');
    };
    afterEach(async () => {
      await h?.dispose();
    });

    describe('presence', () => {
      it('sums sockets over gateways: since = earliest, backend = the one with most sockets', async () => {
        await setup();
        expect(a.kind).toBe(kind);
        expect(a.available).toBe(true);
        expect(await a.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
        await a.publishPresence([p('r1', 'b1', 3, T0 + 100), p('r2', 'b2', 1, T0)], LONG_TTL);
        await b.publishPresence([p('r1', 'b1', 2, T0), p('r3', 'b1', 4, T0 + 5), p('empty', 'b1', 0)], LONG_TTL);
        for (const s of [a, b]) {
          expect(await s.online()).toEqual({ total: 10, rooms: 3, byBackend: { b1: 9, b2: 1 } });
          expect(await s.room('r1')).toEqual({ room: 'r1', backend: 'b1', sockets: 5, since: iso(T0), meta: null, pinned: false, listed: false });
        }
        expect(await a.room('empty')).toBeNull();
        expect(await a.room('nowhere')).toBeNull();

        // A report replaces the gateway's whole contribution.
        await a.publishPresence([p('r1', 'b1', 1, T0 + 100)], LONG_TTL);
        expect(await b.online()).toEqual({ total: 7, rooms: 2, byBackend: { b1: 7 } });
        expect(await b.room('r2')).toBeNull();
        expect((await b.room('r1'))?.sockets).toBe(3);

        // Two backends for one room (should not happen): the one with more sockets; both counted per backend.
        await a.publishPresence([p('r3', 'b2', 1, T0 - 50)], LONG_TTL);
        expect(await a.room('r3')).toMatchObject({ backend: 'b1', sockets: 5, since: iso(T0 - 50) });
        await a.publishPresence([p('r3', 'b2', 6, T0 - 50)], LONG_TTL);
        expect(await a.room('r3')).toMatchObject({ backend: 'b2', sockets: 10 });
        expect(await a.online()).toEqual({ total: 12, rooms: 2, byBackend: { b1: 6, b2: 6 } });
        // Duplicate entries of one room in one report are merged.
        await a.publishPresence([p('d', 'b1', 2, T0 + 9), p('d', 'b1', 3, T0 + 1)], LONG_TTL);
        expect(await a.room('d')).toMatchObject({ sockets: 5, since: iso(T0 + 1) });
      });

      it('a gateway that stops heartbeating vanishes after its ttl; withdrawPresence removes at once', async () => {
        await setup();
        const events = record(b);
        await a.publishPresence([p('only-a', 'b1', 2), p('shared', 'b1', 1)], TTL);
        await b.publishPresence([p('shared', 'b1', 3), p('only-b', 'b2', 1)], LONG_TTL);
        expect(await b.online()).toEqual({ total: 7, rooms: 3, byBackend: { b1: 6, b2: 1 } });

        await h.advance(PAST_TTL); // a is "kill -9'd": no more heartbeats
        expect(await b.online()).toEqual({ total: 4, rooms: 2, byBackend: { b1: 3, b2: 1 } });
        expect(await b.room('only-a')).toBeNull();
        expect((await b.room('shared'))?.sockets).toBe(3);
        expect((await b.lobby(q())).total).toBe(2);

        // The next heartbeat of another gateway announces the rooms the dead one took along.
        const before = events.length;
        await b.publishPresence([p('shared', 'b1', 3), p('only-b', 'b2', 1)], LONG_TTL);
        await waitFor('obituary event', 3000, () => lobbyRooms(events.slice(before)).includes('only-a'));
        expect(lobbyRooms(events.slice(before))).toContain('shared');

        // It comes back: counted again at once.
        await a.publishPresence([p('only-a', 'b1', 1)], LONG_TTL);
        expect((await b.online()).total).toBe(5);
        await a.withdrawPresence();
        expect(await b.online()).toEqual({ total: 4, rooms: 2, byBackend: { b1: 3, b2: 1 } });
        await b.withdrawPresence();
        expect(await a.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
        expect(await a.lobby(q())).toEqual({ rooms: [], total: 0, nextOffset: null });
      });

      it('an unchanged report (null) keeps the presence past its ttl; a delta changes only the rooms it names; without a report both answer resync', async () => {
        await setup();
        const events = record(b);
        // A ttl with margins for Redis's real clock on a busy machine: steps of a third of it.
        const ttl = 1_500;
        expect(await a.publishPresence(null, ttl)).toBe('resync');
        expect(await a.publishPresence({ rooms: [p('x', 'b1', 1)], gone: [] }, ttl)).toBe('resync');
        expect(await b.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
        await a.publishPresence([p('r1', 'b1', 2), p('r2', 'b2', 1), p('r3', 'b1', 1)], ttl);
        // Two ttls of unchanged reports: still counted.
        for (let i = 0; i < 6; i++) {
          await h.advance(ttl / 3);
          expect(await a.publishPresence(null, ttl)).toBeUndefined();
        }
        expect(await b.online()).toEqual({ total: 4, rooms: 3, byBackend: { b1: 3, b2: 1 } });
        // r1 gains a socket, r2 ends, r4 starts; r3 is not named and stays as it was.
        const before = events.length;
        await a.publishPresence({ rooms: [p('r1', 'b1', 3), p('r4', 'b2', 2, T0 + 7)], gone: ['r2'] }, ttl);
        expect(await b.online()).toEqual({ total: 6, rooms: 3, byBackend: { b1: 4, b2: 2 } });
        expect(await b.room('r2')).toBeNull();
        expect(await b.room('r4')).toMatchObject({ backend: 'b2', sockets: 2, since: iso(T0 + 7) });
        expect((await b.room('r3'))?.sockets).toBe(1);
        await waitFor('the delta event', 3000, () => lobbyRooms(events.slice(before)).includes('r4'));
        expect(lobbyRooms(events.slice(before)).sort()).toEqual(['r1', 'r2', 'r4']);
        // Silent past its ttl: gone, and then neither null nor a delta can revive it.
        await h.advance(ttl + 250);
        expect(await b.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
        expect(await a.publishPresence(null, ttl)).toBe('resync');
        expect(await a.publishPresence({ rooms: [], gone: ['r1'] }, ttl)).toBe('resync');
        await a.publishPresence([p('r3', 'b1', 1)], ttl);
        expect(await b.online()).toEqual({ total: 1, rooms: 1, byBackend: { b1: 1 } });
      });

      it('rejects a bad ttl or a non-finite count', async () => {
        await setup();
        await expect(a.publishPresence([], 0)).rejects.toThrow(/ttlMs/);
        await expect(a.publishPresence([p('r', 'b1', Number.NaN)], TTL)).rejects.toThrow(/sockets/);
        await expect(a.publishPresence([p('r', 'b1', 1, Number.POSITIVE_INFINITY)], TTL)).rejects.toThrow(/since/);
      });
    });

    describe('lobby', () => {
      const setupLobby = async (): Promise<void> => {
        await setup();
        // game:* on b1, chat:* on b2; some rooms split over both gateways.
        await a.publishPresence([p('game:1', 'b1', 3, T0 + 3), p('game:2', 'b1', 5, T0 + 1), p('chat:1', 'b2', 7, T0 + 2), p('game:4', 'b1', 1, T0 + 7)], LONG_TTL);
        await b.publishPresence([p('game:1', 'b1', 2, T0 + 30), p('game:3', 'b1', 2, T0 + 1), p('chat:2', 'b2', 1, T0 + 4), p('game:4', 'b1', 4, T0)], LONG_TTL);
        await a.setMeta('game:1', { status: 'open', title: 'One' }, false);
        await b.setMeta('game:2', { status: 'full' }, false);
        await a.setMeta('game:3', { status: 'open' }, true);
        await b.setMeta('chat:1', { status: 'open', n: 1 }, false);
        await a.setMeta('not-live', { status: 'open' }, true);
      };
      // sockets: chat:1 7, game:1 5, game:2 5, game:4 5, game:3 2, chat:2 1
      // since:   game:4 0, game:2 1, game:3 1, chat:1 2, game:1 3, chat:2 4

      it('lists live rooms with metadata, sorted by sockets with ties by room key, paged', async () => {
        await setupLobby();
        const all = await b.lobby(q());
        expect(all.total).toBe(6);
        expect(all.nextOffset).toBeNull();
        expect(names(all.rooms)).toEqual(['chat:1', 'game:1', 'game:2', 'game:4', 'game:3', 'chat:2']);
        expect(all.rooms[1]).toEqual({ room: 'game:1', backend: 'b1', sockets: 5, since: iso(T0 + 3), meta: { status: 'open', title: 'One' }, pinned: false, listed: true });
        expect(all.rooms[4]).toEqual({ room: 'game:3', backend: 'b1', sockets: 2, since: iso(T0 + 1), meta: { status: 'open' }, pinned: true, listed: true });
        expect(all.rooms[5]).toEqual({ room: 'chat:2', backend: 'b2', sockets: 1, since: iso(T0 + 4), meta: null, pinned: false, listed: false });

        const pages: string[][] = [];
        let offset: number | null = 0;
        while (offset !== null) {
          const page = await a.lobby(q({ offset, limit: 2 }));
          expect(page.total).toBe(6);
          pages.push(names(page.rooms));
          offset = page.nextOffset;
        }
        expect(pages).toEqual([['chat:1', 'game:1'], ['game:2', 'game:4'], ['game:3', 'chat:2']]);
        expect(await a.lobby(q({ offset: 6, limit: 2 }))).toEqual({ rooms: [], total: 6, nextOffset: null });
        expect(await a.lobby(q({ offset: 50, limit: 2 }))).toEqual({ rooms: [], total: 6, nextOffset: null });
        expect((await a.lobby(q({ offset: 5, limit: 1 }))).nextOffset).toBeNull();
        expect((await a.lobby(q({ offset: 4, limit: 1 }))).nextOffset).toBe(5);

        expect(names((await a.lobby(q({ order: 'asc' }))).rooms)).toEqual(['chat:2', 'game:3', 'game:1', 'game:2', 'game:4', 'chat:1']);
        expect(names((await a.lobby(q({ sort: 'since', order: 'asc' }))).rooms)).toEqual(['game:4', 'game:2', 'game:3', 'chat:1', 'game:1', 'chat:2']);
        expect(names((await a.lobby(q({ sort: 'since', order: 'desc' }))).rooms)).toEqual(['chat:2', 'game:1', 'chat:1', 'game:2', 'game:3', 'game:4']);
        expect(names((await a.lobby(q({ sort: 'room', order: 'asc' }))).rooms)).toEqual(['chat:1', 'chat:2', 'game:1', 'game:2', 'game:3', 'game:4']);
        expect(names((await a.lobby(q({ sort: 'room', order: 'desc' }))).rooms)).toEqual(['game:4', 'game:3', 'game:2', 'game:1', 'chat:2', 'chat:1']);
      });

      it('filters by status, backend, key prefix and minimum sockets', async () => {
        await setupLobby();
        expect(names((await a.lobby(q({ status: 'open' }))).rooms)).toEqual(['chat:1', 'game:1', 'game:3']);
        expect(names((await a.lobby(q({ status: 'full' }))).rooms)).toEqual(['game:2']);
        expect((await a.lobby(q({ status: 'nope' }))).total).toBe(0);
        expect(names((await a.lobby(q({ backend: 'b2' }))).rooms)).toEqual(['chat:1', 'chat:2']);
        expect(names((await a.lobby(q({ prefix: 'game:' }))).rooms)).toEqual(['game:1', 'game:2', 'game:4', 'game:3']);
        expect(names((await a.lobby(q({ minSockets: 5 }))).rooms)).toEqual(['chat:1', 'game:1', 'game:2', 'game:4']);
        const combined = await a.lobby(q({ status: 'open', prefix: 'game:', backend: 'b1', minSockets: 2, sort: 'room', order: 'asc', limit: 1 }));
        expect(combined).toMatchObject({ total: 2, nextOffset: 1 });
        expect(names(combined.rooms)).toEqual(['game:1']);
        // Pinned metadata of a room that is not live: in room(), never in the lobby.
        expect((await a.lobby(q({ prefix: 'not-live' }))).total).toBe(0);
      });

      it('the public view (a query with listing) keeps rooms listed by their metadata or a key glob; listed=false keeps one private', async () => {
        await setupLobby();
        // Metadata lists game:1, chat:1, game:3 (default listed); game:2's metadata says not listed; game:4 and chat:2 have none.
        await b.setMeta('game:2', { status: 'full' }, false, false);
        const pub = async (patterns: string[], extra: Partial<LobbyQuery> = {}): Promise<string[]> => names((await a.lobby(q({ listing: { patterns }, ...extra }))).rooms);
        expect(await pub([])).toEqual(['chat:1', 'game:1', 'game:3']);
        // Paging and the total count listed rooms only: nothing says how many private ones there are.
        expect(await a.lobby(q({ listing: { patterns: [] }, limit: 2 }))).toMatchObject({ total: 3, nextOffset: 2 });
        expect(await pub(['chat:*'])).toEqual(['chat:1', 'game:1', 'game:3', 'chat:2']);
        expect(await pub(['*4'])).toEqual(['chat:1', 'game:1', 'game:4', 'game:3']);
        expect(await pub(['*'])).toEqual(['chat:1', 'game:1', 'game:2', 'game:4', 'game:3', 'chat:2']);
        // A glob is anchored at both ends and its other characters are literal ("." is a dot, not any character).
        expect(await pub(['game', 'game:', 'game:.', 'ame:4', '.*'])).toEqual(['chat:1', 'game:1', 'game:3']);
        // Filters still apply inside the public view; the admin view (no listing) keeps every live room.
        expect(await pub([], { status: 'full' })).toEqual([]);
        expect((await a.lobby(q({ status: 'full' }))).total).toBe(1);
        expect((await a.lobby(q())).total).toBe(6);
        // The flag is read back with the room, on every gateway.
        expect(await a.room('game:2')).toMatchObject({ meta: { status: 'full' }, listed: false });
        expect(await a.room('game:1')).toMatchObject({ listed: true });
        expect(await a.room('game:4')).toMatchObject({ meta: null, listed: false });
        // Metadata set again without listed=false lists it; deleted metadata unlists.
        await a.setMeta('game:2', { status: 'full' }, false);
        expect(await pub([])).toEqual(['chat:1', 'game:1', 'game:2', 'game:3']);
        await a.deleteMeta('game:1');
        expect(await pub([])).toEqual(['chat:1', 'game:2', 'game:3']);
        await expect(a.lobby(q({ listing: { patterns: 'x' as unknown as string[] } }))).rejects.toThrow(/listing/);
      });

      it('rejects a bad query', async () => {
        await setup();
        for (const bad of [q({ limit: 0 }), q({ limit: 501 }), q({ offset: -1 }), q({ offset: 1.5 }), q({ sort: 'x' as 'room' }), q({ order: 'up' as 'asc' })]) {
          await expect(a.lobby(bad)).rejects.toThrow(Error);
        }
        expect((await a.lobby(q({ limit: 500 }))).total).toBe(0);
      });
    });

    describe('metadata', () => {
      it('set replaces, delete removes, both are announced', async () => {
        await setup();
        const events = record(b);
        await a.publishPresence([p('r', 'b1', 1)], LONG_TTL);
        await a.setMeta('r', { status: 'open', nested: { list: [1, 'x', null], ok: true } }, false);
        expect(await b.room('r')).toEqual({
          room: 'r',
          backend: 'b1',
          sockets: 1,
          since: iso(T0),
          meta: { status: 'open', nested: { list: [1, 'x', null], ok: true } },
          pinned: false,
          listed: true,
        });
        await b.setMeta('r', { other: 1 }, true);
        expect(await a.room('r')).toMatchObject({ meta: { other: 1 }, pinned: true });
        await waitFor('meta events', 3000, () => lobbyRooms(events).filter((r) => r === 'r').length >= 3);
        expect(await a.deleteMeta('r')).toBe(true);
        expect(await a.deleteMeta('r')).toBe(false);
        expect(await b.room('r')).toMatchObject({ meta: null, pinned: false, sockets: 1 });
        expect(await b.deleteMeta('never')).toBe(false);
        await expect(a.setMeta('r', [1, 2] as unknown as Record<string, unknown>, false)).rejects.toThrow(/JSON object/);
      });

      it('unpinned metadata goes away with the room; pinned metadata stays (sockets 0, backend "", since = set time)', async () => {
        await setup();
        await a.publishPresence([p('u', 'b1', 2), p('pin', 'b1', 1)], TTL);
        // The set times bracketed by the clock before and after each call (not a tolerance of
        // elapsed time, which a slow machine stretches).
        const setFrom = h.now();
        await a.setMeta('u', { status: 'open' }, false);
        const setAt = h.now();
        const pinnedFrom = h.now();
        await b.setMeta('pin', { status: 'kept' }, true);
        const pinnedAt = h.now();
        // The room empties on this gateway: its metadata stays for one presence TTL...
        await a.publishPresence([], TTL);
        expect(await b.room('u')).toMatchObject({ room: 'u', sockets: 0, backend: '', meta: { status: 'open' }, pinned: false });
        const since = Date.parse((await b.room('u'))?.since ?? '');
        expect(since).toBeGreaterThanOrEqual(setFrom);
        expect(since).toBeLessThanOrEqual(setAt);
        expect((await b.lobby(q())).total).toBe(0);
        // ... and is gone after it.
        await h.advance(PAST_TTL);
        await b.publishPresence([], TTL); // any gateway's heartbeat collects it
        expect(await b.room('u')).toBeNull();
        expect(await a.deleteMeta('u')).toBe(false);
        const pinned = await b.room('pin');
        expect(pinned).toMatchObject({ room: 'pin', sockets: 0, backend: '', meta: { status: 'kept' }, pinned: true });
        expect(Date.parse(pinned?.since ?? '')).toBeGreaterThanOrEqual(pinnedFrom);
        expect(Date.parse(pinned?.since ?? '')).toBeLessThanOrEqual(pinnedAt);
        expect((await b.lobby(q())).total).toBe(0);
        // Live again: listed with its metadata and the live since.
        await a.publishPresence([p('pin', 'b2', 4, T0 + 1)], TTL);
        expect(await b.room('pin')).toEqual({ room: 'pin', backend: 'b2', sockets: 4, since: iso(T0 + 1), meta: { status: 'kept' }, pinned: true, listed: true });
        expect(names((await b.lobby(q())).rooms)).toEqual(['pin']);
      });

      it('unpinned metadata of a room that stays live outlives many TTLs; set before the first socket it waits one TTL', async () => {
        await setup();
        await a.setMeta('early', { status: 'soon' }, false);
        await a.publishPresence([p('live', 'b1', 1)], TTL);
        await b.setMeta('live', { status: 'open' }, false);
        await h.advance(TTL / 2);
        expect(await b.room('early')).toMatchObject({ sockets: 0, meta: { status: 'soon' } });
        await a.publishPresence([p('live', 'b1', 1), p('early', 'b1', 1)], TTL);
        for (let i = 0; i < 5; i++) {
          await h.advance(TTL / 2);
          await a.publishPresence([p('live', 'b1', 1), p('early', 'b1', 1)], TTL);
        }
        // 3 TTLs later, both still live and with their metadata (also after another gateway's collection).
        await b.publishPresence([], TTL);
        expect(await b.room('live')).toMatchObject({ sockets: 1, meta: { status: 'open' } });
        expect(await b.room('early')).toMatchObject({ sockets: 1, meta: { status: 'soon' } });
        const page = await b.lobby(q({ sort: 'room', order: 'asc' }));
        expect(page.rooms.map((r) => [r.room, r.meta])).toEqual([
          ['early', { status: 'soon' }],
          ['live', { status: 'open' }],
        ]);
        // The gateway dies: rooms and their unpinned metadata are gone after the TTL.
        await h.advance(PAST_TTL);
        await b.publishPresence([], TTL);
        expect(await b.room('live')).toBeNull();
        expect(await b.room('early')).toBeNull();
      });
      it('unpinned metadata of a room reported live by unchanged reports stays; once a delta drops the room it goes after one ttl', async () => {
        await setup();
        // A ttl with margins for Redis's real clock on a busy machine: steps of a third of it.
        const ttl = 1_500;
        await a.publishPresence([p('live', 'b1', 1), p('other', 'b1', 1)], ttl);
        await b.setMeta('live', { status: 'open' }, false);
        for (let i = 0; i < 6; i++) {
          await h.advance(ttl / 3);
          await a.publishPresence(null, ttl);
        }
        await b.publishPresence([], ttl);
        expect(await b.room('live')).toMatchObject({ sockets: 1, meta: { status: 'open' } });
        await a.publishPresence({ rooms: [], gone: ['live'] }, ttl);
        await h.advance(ttl / 3);
        await a.publishPresence(null, ttl);
        expect(await b.room('live')).toMatchObject({ sockets: 0, meta: { status: 'open' } });
        await h.advance(ttl + 250);
        await a.publishPresence([p('other', 'b1', 1)], ttl);
        await b.publishPresence([], ttl);
        expect(await b.room('live')).toBeNull();
      });
    });

    describe('leaderboards', () => {
      it('10,000 members: top, member and around are right, also at the edges', async () => {
        await setup();
        const n = 10_000;
        // Ties: every score is shared by ~7 members; negative and fractional scores.
        const scoreOf = (i: number): number => (i % 500) - 250 + (i % 3) * 0.5;
        const entries = Array.from({ length: n }, (_, i) => ({ member: `p${i}`, score: scoreOf(i) }));
        for (let i = 0; i < n; i += 1000) {
          await Promise.all(entries.slice(i, i + 1000).map((e, j) => (j % 2 ? a : b).score('big', e.member, e.score, 'set')));
        }
        const expected: Ranked[] = [...entries]
          .sort((x, y) => y.score - x.score || byCodePoint(x.member, y.member))
          .map((e, i) => ({ ...e, rank: i + 1 }));
        const first = expected[0];
        const last = expected[n - 1];
        if (!first || !last) throw new Error('unreachable');
        expect(await a.boardSize('big')).toBe(n);
        expect(await b.boardExists('big')).toBe(true);
        expect(await a.top('big', 0, n)).toEqual(expected);
        expect(await a.top('big', 0, 3)).toEqual(expected.slice(0, 3));
        expect(await b.top('big', 4321, 7)).toEqual(expected.slice(4321, 4328));
        expect(await b.top('big', n - 5, 10)).toEqual(expected.slice(n - 5));
        expect(await b.top('big', n, 10)).toEqual([]);
        expect(await b.top('big', 0, 0)).toEqual([]);
        expect(await a.member('big', first.member)).toEqual(first);
        expect(await a.member('big', last.member)).toEqual(last);
        expect(await a.member('big', 'p5000')).toEqual(expected.find((e) => e.member === 'p5000'));
        expect(await a.member('big', 'nobody')).toBeNull();
        expect(await a.around('big', first.member, 3)).toEqual(expected.slice(0, 4));
        expect(await a.around('big', last.member, 3)).toEqual(expected.slice(n - 4));
        expect(await a.around('big', last.member, 0)).toEqual([last]);
        const mid = expected[5000];
        expect(await b.around('big', mid?.member ?? '', 2)).toEqual(expected.slice(4998, 5003));
        expect(await b.around('big', expected[1]?.member ?? '', 5)).toEqual(expected.slice(0, 7));
        expect(await b.around('big', mid?.member ?? '', 2 * n)).toEqual(expected);
        expect(await b.around('big', 'nobody', 3)).toEqual([]);
      });

      it('ties are in ascending member order (code points), whatever the insertion order', async () => {
        await setup();
        const members = ['😀', 'b', '\uFFFD', 'ä', 'a', '', 'A', 'ab', 'B'];
        for (const m of members) await a.score('ties', m, 1, 'set');
        await a.score('ties', 'high', 2, 'set');
        await a.score('ties', 'low', -1, 'set');
        const tied = [...members].sort(byCodePoint);
        expect(tied).toEqual(['', 'A', 'B', 'a', 'ab', 'b', 'ä', '\uFFFD', '😀']);
        const top = await b.top('ties', 0, 100);
        expect(top.map((r) => r.member)).toEqual(['high', ...tied, 'low']);
        expect(top.map((r) => r.rank)).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
        expect(await b.member('ties', '😀')).toEqual({ member: '😀', score: 1, rank: 10 });
        expect((await b.around('ties', 'ä', 1)).map((r) => r.member)).toEqual(['b', 'ä', '\uFFFD']);
      });

      it('set, incr and max; negative and fractional scores; non-finite numbers rejected', async () => {
        await setup();
        expect(await a.score('m', 'x', 10, 'set')).toBe(10);
        expect(await a.score('m', 'x', 5, 'set')).toBe(5);
        expect(await a.score('m', 'x', 2.5, 'incr')).toBe(7.5);
        expect(await a.score('m', 'x', -10.25, 'incr')).toBe(-2.75);
        expect(await a.score('m', 'x', -3, 'max')).toBe(-2.75);
        expect(await a.score('m', 'x', 9, 'max')).toBe(9);
        expect(await a.score('m', 'new-incr', -0.5, 'incr')).toBe(-0.5);
        expect(await a.score('m', 'new-max', -7, 'max')).toBe(-7);
        expect(Object.is(await a.score('m', 'zero', -0, 'set'), 0)).toBe(true);
        expect(await a.score('m', 'tiny', 0.1, 'set')).toBe(0.1);
        expect(await a.score('m', 'tiny', 0.2, 'incr')).toBe(0.1 + 0.2);
        expect(await a.score('m', 'huge', -1.5e300, 'set')).toBe(-1.5e300);
        expect(await b.top('m', 0, 10)).toEqual([
          { member: 'x', score: 9, rank: 1 },
          { member: 'tiny', score: 0.1 + 0.2, rank: 2 },
          { member: 'zero', score: 0, rank: 3 },
          { member: 'new-incr', score: -0.5, rank: 4 },
          { member: 'new-max', score: -7, rank: 5 },
          { member: 'huge', score: -1.5e300, rank: 6 },
        ]);
        for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
          for (const mode of ['set', 'incr', 'max'] as const) {
            await expect(a.score('bad', 'x', bad, mode)).rejects.toThrow(Error);
          }
        }
        await expect(a.score('bad', 'x', 1, 'add' as 'set')).rejects.toThrow(Error);
        expect(await a.boardExists('bad')).toBe(false);
        // An increment whose result would overflow is refused and writes nothing.
        await a.score('m', 'big', 1.7e308, 'set');
        await expect(a.score('m', 'big', 1.7e308, 'incr')).rejects.toThrow(/finite/);
        expect(await a.member('m', 'big')).toEqual({ member: 'big', score: 1.7e308, rank: 1 });
      });

      it('concurrent increments from several gateways lose nothing', async () => {
        await setup();
        const handles = [a, b, await h.open('gw-c'), await h.open('gw-d')];
        await Promise.all(
          Array.from({ length: 20 }, (_, w) =>
            (async () => {
              const s = handles[w % handles.length];
              if (!s) throw new Error('unreachable');
              for (let i = 0; i < 50; i++) {
                await Promise.all([s.score('inc', 'total', 0.25, 'incr'), s.score('inc', `w${w % 4}`, 1, 'incr'), s.score('inc', 'max', w * 100 + i, 'max')]);
              }
            })(),
          ),
        );
        expect(await a.member('inc', 'total')).toEqual({ member: 'total', score: 250, rank: 2 });
        expect(await a.member('inc', 'max')).toEqual({ member: 'max', score: 1949, rank: 1 });
        for (let w = 0; w < 4; w++) expect((await b.member('inc', `w${w}`))?.score).toBe(250);
        expect(await b.boardSize('inc')).toBe(6);
      });

      it('an unknown board is empty everywhere', async () => {
        await setup();
        expect(await a.boardExists('nope')).toBe(false);
        expect(await a.boardSize('nope')).toBe(0);
        expect(await a.top('nope', 0, 10)).toEqual([]);
        expect(await a.member('nope', 'x')).toBeNull();
        expect(await a.around('nope', 'x', 5)).toEqual([]);
      });
    });

    describe('events', () => {
      it('presence changes reach the other gateway, batched, only when something changed', async () => {
        await setup();
        const events = record(b);
        const marker = async (name: string): Promise<void> => {
          await a.setMeta(name, {}, false);
          await waitFor(`marker ${name}`, 3000, () => lobbyRooms(events).includes(name));
        };
        await a.publishPresence([p('r1', 'b1', 1), p('r2', 'b1', 2)], LONG_TTL);
        await waitFor('first report', 3000, () => events.length > 0);
        await marker('m1');
        expect(events.filter((e) => e.type === 'lobby')).toEqual([
          { type: 'lobby', rooms: expect.arrayContaining(['r1', 'r2']) },
          { type: 'lobby', rooms: ['m1'] },
        ]);
        // Same report again: no event. One count changes, one room appears, one goes: one event.
        await a.publishPresence([p('r2', 'b1', 2), p('r1', 'b1', 1)], LONG_TTL);
        await a.publishPresence([p('r1', 'b1', 5), p('r2', 'b1', 2), p('r3', 'b1', 1)], LONG_TTL);
        await a.publishPresence([p('r1', 'b1', 5), p('r3', 'b1', 1)], LONG_TTL);
        await marker('m2');
        const after = events.filter((e) => e.type === 'lobby').slice(2);
        expect(after).toHaveLength(3);
        expect(after[0]).toEqual({ type: 'lobby', rooms: expect.arrayContaining(['r1', 'r3']) });
        expect(after[0]?.type === 'lobby' && after[0].rooms.length).toBe(2);
        expect(after[1]).toEqual({ type: 'lobby', rooms: ['r2'] });
        expect(after[2]).toEqual({ type: 'lobby', rooms: ['m2'] });
        // The other gateway's own reports are announced too, and withdrawing announces its rooms.
        await a.withdrawPresence();
        await waitFor('withdraw event', 3000, () => lobbyRooms(events.slice(-1)).includes('r3'));
        expect(events.at(-1)).toEqual({ type: 'lobby', rooms: expect.arrayContaining(['r1', 'r3']) });
        expect(events.some((e) => e.type === 'available')).toBe(false);
      });

      it('unsubscribing stops the events; closing a handle withdraws its presence', async () => {
        await setup();
        const seen: SharedDataEvent[] = [];
        const stop = b.subscribe((ev) => seen.push(ev));
        const kept = record(b);
        stop();
        await a.publishPresence([p('x', 'b1', 1)], LONG_TTL);
        await waitFor('event on the kept listener', 3000, () => kept.length > 0);
        expect(seen).toEqual([]);
        await a.close();
        expect(await b.online()).toEqual({ total: 0, rooms: 0, byBackend: {} });
        await waitFor('close event', 3000, () => lobbyRooms(kept).filter((r) => r === 'x').length === 2);
        await expect(a.online()).rejects.toThrow(/closed/);
      });
    });

    it("a handoff's messages reach every gateway, the sender too; the other gateways are those whose presence counts, rooms or none", async () => {
      await setup();
      const c = await h.open('gw-c');
      await a.publishPresence([], TTL);
      await b.publishPresence([p('r1', 'b1', 1)], TTL);
      expect((await a.otherGateways()).sort()).toEqual(['gw-b']);
      expect((await b.otherGateways()).sort()).toEqual(['gw-a']);
      // gw-c never published presence: not counted, yet it hears the messages.
      expect((await c.otherGateways()).sort()).toEqual(['gw-a', 'gw-b']);
      const seenA = record(a);
      const seenC = record(c);
      const hold = { kind: 'hold', id: 'h1', room: 'r1', from: 'b1', to: 'b2', gateway: 'gw-a' } as const;
      await a.publishHandoff(hold);
      await waitFor('the hold everywhere', 3000, () => seenA.length > 0 && seenC.length > 0);
      expect(seenA).toEqual([{ type: 'handoff', signal: hold }]);
      expect(seenC).toEqual([{ type: 'handoff', signal: hold }]);
      // A gateway whose presence expired is no longer counted.
      await h.advance(PAST_TTL);
      expect(await a.otherGateways()).toEqual([]);
    });

    it('keys like __proto__ and constructor are plain keys everywhere', async () => {
      await setup();
      const evil = JSON.parse('{"__proto__": {"polluted": 1}, "constructor": "c", "status": "open"}') as Record<string, unknown>;
      await a.publishPresence([p('__proto__', '__proto__', 2), p('constructor', 'toString', 1)], LONG_TTL);
      await b.publishPresence([p('__proto__', '__proto__', 1)], LONG_TTL);
      await b.setMeta('__proto__', evil, false);
      const online = await a.online();
      expect(online.total).toBe(4);
      expect(Object.prototype.hasOwnProperty.call(online.byBackend, '__proto__')).toBe(true);
      expect(online.byBackend['__proto__']).toBe(3);
      expect(online.byBackend['toString']).toBe(1);
      const room = await a.room('__proto__');
      expect(room).toMatchObject({ room: '__proto__', backend: '__proto__', sockets: 3 });
      expect(Object.prototype.hasOwnProperty.call(room?.meta ?? {}, '__proto__')).toBe(true);
      expect(JSON.stringify(room?.meta)).toBe(JSON.stringify(evil));
      expect(names((await a.lobby(q({ status: 'open' }))).rooms)).toEqual(['__proto__']);
      expect(await a.room('hasOwnProperty')).toBeNull();
      expect(await a.room('toString')).toBeNull();
      for (const m of ['__proto__', 'constructor', 'toString']) await b.score('__proto__', m, 1, 'incr');
      expect((await a.top('__proto__', 0, 10)).map((r) => r.member)).toEqual(['__proto__', 'constructor', 'toString']);
      expect(await a.member('constructor', '__proto__')).toBeNull();
      expect(await a.boardExists('constructor')).toBe(false);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(await a.deleteMeta('__proto__')).toBe(true);
    });
  });
}

contract('memory', memoryHarness);

describe('redis-server for the contract', () => {
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await stopAllRedis();
  });
  contract('redis', redisHarness);
});
