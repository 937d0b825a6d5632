// The demo backend's room state: a move counter and the last moves of each room, in this process's
// memory only, like a djust app without a channel layer. It is what a room handoff
// (docs/handoff.md) must carry to the new owner: the `mounted` frame reports `moves`, so a client
// (or a test) sees whether the game survived a move.
//
// The state outlives the room's sockets (players reconnect; an imported room has no socket yet),
// so the number of rooms kept is bounded: past the bound, the oldest room nobody is connected to
// is forgotten first.

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
}

/** The last moves each room keeps (and a handoff carries). */
export const LAST_MOVES_KEPT = 20;
/** A move's data is kept (and carried) only up to this size: the blob of a room stays small. */
export const MOVE_DATA_MAX_BYTES = 1024;
const SESSION_MAX_LENGTH = 64;
const BLOB_VERSION = 1;

export interface MoveStore {
  /** Records an event of `room`; the move it became. */
  record(room: string, from: string, data: unknown): Move;
  get(room: string): RoomMoves | undefined;
  /** How many moves `room` has had (0 for a room without state here). */
  count(room: string): number;
  drop(room: string): void;
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

  return {
    record(room, from, data) {
      const state = rooms.get(room) ?? { moves: 0, last: [] };
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
    serialize(room) {
      const state = rooms.get(room) ?? { moves: 0, last: [] };
      return Buffer.from(JSON.stringify({ v: BLOB_VERSION, room, moves: state.moves, last: state.last }));
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
  const b = parsed as { v?: unknown; room?: unknown; moves?: unknown; last?: unknown };
  if (b.v !== BLOB_VERSION || b.room !== room || !Number.isSafeInteger(b.moves) || (b.moves as number) < 0) return null;
  if (!Array.isArray(b.last) || b.last.length > LAST_MOVES_KEPT) return null;
  const last: Move[] = [];
  for (const m of b.last as unknown[]) {
    const move = typeof m === 'object' && m !== null ? (m as { n?: unknown; from?: unknown; data?: unknown }) : {};
    if (!Number.isSafeInteger(move.n) || typeof move.from !== 'string' || move.from.length > SESSION_MAX_LENGTH) return null;
    last.push({ n: move.n as number, from: move.from, data: move.data ?? null });
  }
  return { moves: b.moves as number, last };
}
