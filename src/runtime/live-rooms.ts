// Which rooms are live, as push delivery asks it: read from presence (every gateway's reports in
// the shared-data store), so a push reaches rooms whose sockets are on another gateway too.
import type { SharedDataStore } from '../shared-data/store.js';

/** The lobby's largest page: the fan-out reads live rooms this many at a time. */
export const LIVE_ROOMS_PAGE = 500;

/** A single-room push with push.requireLive: does the room have live sockets on any gateway? */
export function isLiveRoom(sharedData: Pick<SharedDataStore, 'room'>): (room: string) => Promise<boolean> {
  return async (room) => ((await sharedData.room(room))?.sockets ?? 0) > 0;
}

/**
 * A fan-out's rooms: the live rooms (under `prefix` when given) in key order, a page at a time.
 * Stops as soon as it holds more than `cap` (the caller refuses a fan-out over its cap, so it needs
 * to know only that there are more), or at the last page.
 */
export function liveRoomsOf(sharedData: Pick<SharedDataStore, 'lobby'>): (prefix: string | undefined, cap: number) => Promise<string[]> {
  return async (prefix, cap) => {
    const out: string[] = [];
    for (let offset = 0; ; ) {
      const page = await sharedData.lobby({ ...(prefix === undefined ? {} : { prefix }), sort: 'room', order: 'asc', offset, limit: LIVE_ROOMS_PAGE });
      for (const r of page.rooms) out.push(r.room);
      if (page.nextOffset === null || out.length > cap) return out;
      offset = page.nextOffset;
    }
  };
}
