// The demo backend's room state: a move counter and the last moves of each room, in this process's
// memory only, like a djust app without a channel layer. It is what a room handoff
// (docs/handoff.md) must carry to the new owner: the `mounted` frame reports `moves`, so a client
// (or a test) sees whether the game survived a move.
//
// The state outlives the room's sockets (players reconnect; an imported room has no socket yet),
// so the number of rooms kept is bounded: past the bound, the oldest room nobody is connected to
// is forgotten first.
//
// It also holds each page view's version, as a djust app does: the last version of the view the
// room sent to a page (a tab, known by its page key: its session cookie, or its socket when it has
// none). A frame of the view and djust's HTTP fallback answer both take the page's next one, so a
// page that reconnects on another process, or clicks over HTTP while its socket is closed, gets
// the version that follows the last it was sent, whatever moves the room made meanwhile (a held
// click applied through the handoff's `messages` hook sends no page a frame: no page skips one).
// The views travel in the export; at most MAX_VIEWS_PER_ROOM a room, the least recently sent
// evicted first.

export interface Move {
  /** The room's move number (1, 2, ...): what the sender's `patch` acknowledges. */
  readonly n: number;
  /** The session that sent it. */
  readonly from: string;
  /** The event's data as sent, or null when it was larger than MOVE_DATA_MAX_BYTES. */
  readonly data: unknown;
}

export interface RoomMoves {
  moves: number;
  last: Move[];
  /** Page key -> the last version of the view sent to that page; least recently sent first. */
  views: Map<string, number>;
}

/** The last moves each room keeps (and a handoff carries). */
export const LAST_MOVES_KEPT = 20;
/** A move's data is kept (and carried) only up to this size: the blob of a room stays small. */
export const MOVE_DATA_MAX_BYTES = 1024;
const SESSION_MAX_LENGTH = 64;
/** The page views a room keeps (and a handoff carries); past it the least recently sent is forgotten. */
export const MAX_VIEWS_PER_ROOM = 1_000;
/** A page key's length, at most (the game makes them 24 to 26 characters). */
export const PAGE_KEY_MAX_LENGTH = 64;
// Still 1: a blob with views is read by a demo that knows none (it ignores them), and a blob
// without them (an export of an older demo) is read here as a room with no view yet.
const BLOB_VERSION = 1;

export interface MoveStore {
  /** Records an event of `room`; the move it became. */
  record(room: string, from: string, data: unknown): Move;
  get(room: string): RoomMoves | undefined;
  /** How many moves `room` has had (0 for a room without state here). */
  count(room: string): number;
  drop(room: string): void;
  /**
   * The page's next version in `room` (the last one sent to it, or `floor` when that is higher or
   * the page is unknown, plus one), recorded as sent: for a frame of the view or an HTTP answer.
   */
  nextVersion(room: string, page: string, floor?: number): number;
  /** A mount: the page's view starts again at version 1 (djust's mount starts the sequence again). */
  startView(room: string, page: string): number;
  /** Records that the page was sent `version` (a resumed socket's own), unless it was sent a later one. */
  sawVersion(room: string, page: string, version: number): void;
  /** The last version `room` sent to `page`, or undefined for a page it has no view of. */
  version(room: string, page: string): number | undefined;
  /** Forgets the page's view (a page that was its socket only, once that socket left). */
  forgetView(room: string, page: string): void;
  /** The room's state as an opaque blob (JSON inside), for an export. */
  serialize(room: string): Buffer;
  /** Replaces the room's state by a blob `serialize` made; false (nothing changed) when it is not one, or is for another room. */
  restore(room: string, blob: Buffer): boolean;
}

/** `live(room)`: whether the room has sockets or is frozen here; such a room is never evicted. */
export function createMoveStore(maxRooms: number, live: (room: string) => boolean): MoveStore {
  const rooms = new Map<string, RoomMoves>();

  function put(room: string, state: RoomMoves): void {
    rooms.delete(room); // re-inserted last: the map's order is "least recently written first"
    rooms.set(room, state);
    if (rooms.size <= maxRooms) return;
    for (const name of rooms.keys()) {
      if (name !== room && !live(name)) {
        rooms.delete(name);
        return;
      }
    }
  }

  /** Sets the page's last version (moved last in the room's views), evicting the least recent past the bound. */
  function setView(room: string, page: string, version: number): number {
    const state = rooms.get(room) ?? { moves: 0, last: [], views: new Map<string, number>() };
    state.views.delete(page);
    state.views.set(page, version);
    if (state.views.size > MAX_VIEWS_PER_ROOM) {
      const oldest = state.views.keys().next();
      if (!oldest.done) state.views.delete(oldest.value);
    }
    put(room, state);
    return version;
  }

  return {
    record(room, from, data) {
      const state = rooms.get(room) ?? { moves: 0, last: [], views: new Map<string, number>() };
      const text = JSON.stringify(data ?? null);
      const move: Move = { n: state.moves + 1, from: from.slice(0, SESSION_MAX_LENGTH), data: Buffer.byteLength(text) <= MOVE_DATA_MAX_BYTES ? (data ?? null) : null };
      state.moves = move.n;
      state.last.push(move);
      if (state.last.length > LAST_MOVES_KEPT) state.last.splice(0, state.last.length - LAST_MOVES_KEPT);
      put(room, state);
      return move;
    },
    get: (room) => rooms.get(room),
    count: (room) => rooms.get(room)?.moves ?? 0,
    drop(room) {
      rooms.delete(room);
    },
    nextVersion: (room, page, floor = 0) => setView(room, page, Math.max(rooms.get(room)?.views.get(page) ?? 0, floor) + 1),
    startView: (room, page) => setView(room, page, 1),
    sawVersion(room, page, version) {
      setView(room, page, Math.max(rooms.get(room)?.views.get(page) ?? 0, version));
    },
    version: (room, page) => rooms.get(room)?.views.get(page),
    forgetView(room, page) {
      rooms.get(room)?.views.delete(page);
    },
    serialize(room) {
      const state = rooms.get(room) ?? { moves: 0, last: [], views: new Map<string, number>() };
      return Buffer.from(JSON.stringify({ v: BLOB_VERSION, room, moves: state.moves, last: state.last, views: [...state.views] }));
    },
    restore(room, blob) {
      const state = parseBlob(room, blob);
      if (state === null) return false;
      put(room, state);
      return true;
    },
  };
}

/** The state a blob carries, or null for anything that is not a well-formed blob of `room`. */
function parseBlob(room: string, blob: Buffer): RoomMoves | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(blob.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const b = parsed as { v?: unknown; room?: unknown; moves?: unknown; last?: unknown; views?: unknown };
  if (b.v !== BLOB_VERSION || b.room !== room || !Number.isSafeInteger(b.moves) || (b.moves as number) < 0) return null;
  if (!Array.isArray(b.last) || b.last.length > LAST_MOVES_KEPT) return null;
  const last: Move[] = [];
  for (const m of b.last as unknown[]) {
    const move = typeof m === 'object' && m !== null ? (m as { n?: unknown; from?: unknown; data?: unknown }) : {};
    if (!Number.isSafeInteger(move.n) || typeof move.from !== 'string' || move.from.length > SESSION_MAX_LENGTH) return null;
    last.push({ n: move.n as number, from: move.from, data: move.data ?? null });
  }
  const views = viewsOf(b.views);
  return views === null ? null : { moves: b.moves as number, last, views };
}

/** A blob's page views ([page, version] pairs, least recent first); none in an older blob; null when malformed. */
function viewsOf(value: unknown): Map<string, number> | null {
  const views = new Map<string, number>();
  if (value === undefined) return views;
  if (!Array.isArray(value) || value.length > MAX_VIEWS_PER_ROOM) return null;
  for (const entry of value as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 2) return null;
    const [page, version] = entry as [unknown, unknown];
    if (typeof page !== 'string' || page.length === 0 || page.length > PAGE_KEY_MAX_LENGTH || !Number.isSafeInteger(version) || (version as number) < 0) return null;
    views.delete(page);
    views.set(page, version as number);
  }
  return views;
}
