// Which rooms a push reaches (src/runtime/live-rooms.ts), read from presence in a real in-memory
// shared-data store: the live check of one room, and a fan-out's rooms read a lobby page at a time,
// in key order, under a prefix, stopping once past the cap.
import { describe, expect, it } from 'vitest';
import { isLiveRoom, LIVE_ROOMS_PAGE, liveRoomsOf } from '../../src/runtime/live-rooms.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import type { LobbyQuery } from '../../src/shared-data/store.js';

const TTL = 60_000;

/** A store with `n` live rooms named `<prefix>0000`.. (and a few others), counting its lobby reads. */
async function storeWith(n: number, prefix: string): Promise<{ store: MemorySharedDataStore; reads: LobbyQuery[] }> {
  const store = new MemorySharedDataStore('gw-1', { presenceTtlMs: TTL });
  const rooms = Array.from({ length: n }, (_, i) => ({ room: `${prefix}${String(i).padStart(4, '0')}`, backend: 'b1', sockets: 1, since: Date.now() }));
  rooms.push({ room: 'other-1', backend: 'b1', sockets: 2, since: Date.now() });
  await store.publishPresence(rooms, TTL);
  const reads: LobbyQuery[] = [];
  const lobby = store.lobby.bind(store);
  store.lobby = (q) => {
    reads.push(q);
    return lobby(q);
  };
  return { store, reads };
}

describe('liveRoomsOf', () => {
  it('reads every live room under the prefix, a page at a time, in key order', async () => {
    const n = LIVE_ROOMS_PAGE * 2 + 7;
    const { store, reads } = await storeWith(n, 'game-');
    const rooms = await liveRoomsOf(store)('game-', 10_000);
    expect(rooms).toHaveLength(n);
    expect(rooms).toEqual([...rooms].sort());
    expect(rooms.every((r) => r.startsWith('game-'))).toBe(true);
    expect(reads.map((q) => q.offset)).toEqual([0, LIVE_ROOMS_PAGE, LIVE_ROOMS_PAGE * 2]);
    expect(reads.every((q) => q.limit === LIVE_ROOMS_PAGE && q.sort === 'room' && q.order === 'asc' && q.prefix === 'game-')).toBe(true);
  });

  it('reads every live room without a prefix', async () => {
    const { store, reads } = await storeWith(3, 'game-');
    expect(await liveRoomsOf(store)(undefined, 100)).toEqual(['game-0000', 'game-0001', 'game-0002', 'other-1']);
    expect('prefix' in (reads[0] as object)).toBe(false);
  });

  it('stops reading once it holds more than the cap', async () => {
    const { store, reads } = await storeWith(LIVE_ROOMS_PAGE * 3, 'game-');
    const rooms = await liveRoomsOf(store)('game-', 10);
    expect(rooms.length).toBeGreaterThan(10);
    expect(reads).toHaveLength(1);
  });

  it('reads on while it holds exactly the cap', async () => {
    const { store, reads } = await storeWith(LIVE_ROOMS_PAGE + 1, 'game-');
    const rooms = await liveRoomsOf(store)('game-', LIVE_ROOMS_PAGE);
    expect(rooms).toHaveLength(LIVE_ROOMS_PAGE + 1);
    expect(reads).toHaveLength(2);
  });
});

describe('isLiveRoom', () => {
  it('is true for a room with sockets on any gateway, false for an unknown one', async () => {
    const { store } = await storeWith(1, 'game-');
    const isLive = isLiveRoom(store);
    expect(await isLive('game-0000')).toBe(true);
    expect(await isLive('nobody-here')).toBe(false);
  });
});
