// Cross-room data: presence (live sockets per room, per backend, in total, summed over every
// gateway sharing the store), the lobby (rooms with live sockets and app metadata) and
// leaderboards. In memory for one gateway (the embedded default), Redis for several. Each
// gateway's presence is its own contribution and vanishes when that gateway stops heartbeating.
import type { HandoffSignal } from './handoff-signal.js';

export type { HandoffSignal } from './handoff-signal.js';

/** One room as this gateway sees it, sent every heartbeat (batched: no store call per socket). */
export interface RoomPresence {
  readonly room: string;
  readonly backend: string;
  /** Live sockets of the room through this gateway (> 0). */
  readonly sockets: number;
  /** When this gateway first had a live socket of the room (ms since epoch). */
  readonly since: number;
}

/**
 * The changes of a gateway's presence since its previous report: `rooms` are every entry of the
 * rooms that changed (replacing those rooms), `gone` the rooms with no live socket left.
 */
export interface PresenceDelta {
  readonly rooms: readonly RoomPresence[];
  readonly gone: readonly string[];
}

/** What publishPresence answers: nothing, or 'resync' (send the whole list; see there). */
export type PresenceAnswer = void | 'resync';

/** App-set metadata of a room (JSON object, size-limited by the API). */
export type RoomMeta = Readonly<Record<string, unknown>>;

export interface LobbyRoom {
  readonly room: string;
  /** Backend holding the room's sockets (from the gateways' reports). */
  readonly backend: string;
  /** Live sockets summed over all gateways. */
  readonly sockets: number;
  /** Earliest `since` over all gateways (ISO 8601). */
  readonly since: string;
  readonly meta: RoomMeta | null;
  /** Metadata kept after the room empties. */
  readonly pinned: boolean;
  /** The app listed the room through its metadata (setMeta's `listed`); false without metadata. */
  readonly listed: boolean;
}

/** What the public reads show: rooms listed by their metadata, or by a key matching one of these globs (./listing.ts). */
export interface Listing {
  /** Globs over room keys (api.listRooms): `*` matches any run of characters, every other character itself. */
  readonly patterns: readonly string[];
}

export interface LobbyQuery {
  /** Only rooms whose meta.status equals this. */
  readonly status?: string;
  readonly backend?: string;
  /** Only rooms whose key starts with this. */
  readonly prefix?: string;
  readonly minSockets?: number;
  /** The public view: only listed rooms (src/shared-data/listing.ts). Absent: every live room (the admin port). */
  readonly listing?: Listing;
  readonly sort: 'sockets' | 'since' | 'room';
  readonly order: 'asc' | 'desc';
  readonly offset: number;
  /** 1..500 */
  readonly limit: number;
}

export interface LobbyPage {
  readonly rooms: readonly LobbyRoom[];
  /** Rooms matching the filter, before offset/limit. */
  readonly total: number;
  /** Offset of the next page, or null on the last one. */
  readonly nextOffset: number | null;
}

export interface Online {
  readonly total: number;
  readonly rooms: number;
  readonly byBackend: Readonly<Record<string, number>>;
}

export type ScoreMode = 'set' | 'incr' | 'max';

export interface Ranked {
  readonly member: string;
  readonly score: number;
  /** 1 = highest score. Ties share order by member name (ascending), never a random order. */
  readonly rank: number;
}

/** What a claimed idempotency key holds while its first call runs. */
export const IDEMPOTENCY_PENDING = 'pending';

/** Page cache answers to remove on every gateway (each field narrows; at least one is set). */
export interface CachePurge {
  readonly url?: string;
  readonly prefix?: string;
  readonly room?: string;
}

export type SharedDataEvent =
  /** Presence or metadata of these rooms changed (any gateway): the lobby stream pushes them. */
  | { readonly type: 'lobby'; readonly rooms: readonly string[] }
  /** An operator purged page cache answers (any gateway, this one included). */
  | { readonly type: 'cache-purge'; readonly purge: CachePurge }
  /** A version-2 handoff's message between gateways (any gateway, this one included). */
  | { readonly type: 'handoff'; readonly signal: HandoffSignal }
  | { readonly type: 'available'; readonly available: boolean };

export interface SharedDataStore {
  readonly kind: 'memory' | 'redis';
  /** False while the store cannot be reached; every call then rejects fast. */
  readonly available: boolean;
  /** Opens connections (Redis); resolves at once for stores that have none. Rejects if unreachable now: not fatal, the store keeps trying. */
  connect(): Promise<void>;

  /**
   * Claims an idempotency key for ttlMs, for every gateway sharing the store: null when this call
   * got it (nobody had it), else what is stored under it (IDEMPOTENCY_PENDING while its first call
   * runs, then that call's recorded answer).
   */
  claimIdempotency(key: string, ttlMs: number): Promise<string | null>;
  /** Records the answer of the call that claimed the key (kept ttlMs). */
  settleIdempotency(key: string, answer: string, ttlMs: number): Promise<void>;
  /** Gives a claimed key up (the call changed nothing: a retry may run it again). */
  releaseIdempotency(key: string): Promise<void>;

  /** Announces a page cache purge to every gateway sharing the store (this one hears it too). */
  publishCachePurge(purge: CachePurge): Promise<void>;

  /** Sends a version-2 handoff's message to every gateway sharing the store (this one hears it too). */
  publishHandoff(signal: HandoffSignal): Promise<void>;
  /**
   * The other gateways whose presence counts now (each publishes it every heartbeat, rooms or
   * none), by their id in the store (which need not be the id they sign their messages with).
   */
  otherGateways(): Promise<string[]>;

  /**
   * Replaces this gateway's presence (a list), or changes the rooms a delta names; it expires
   * ttlMs after the last call (crash, kill -9). null: unchanged since the last call (only keeps it
   * from expiring). Answers 'resync' when the store cannot apply a delta or null to a report it
   * does not hold (never sent, expired, lost): send the whole list.
   */
  publishPresence(rooms: readonly RoomPresence[] | PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer>;
  /** Removes this gateway's presence at once (clean shutdown). */
  withdrawPresence(): Promise<void>;
  online(): Promise<Online>;
  lobby(q: LobbyQuery): Promise<LobbyPage>;
  /** One room: live (from presence) or pinned metadata only; null when neither. */
  room(room: string): Promise<LobbyRoom | null>;

  /**
   * Sets (replaces) a room's metadata. Unpinned metadata goes away once the room has no live socket.
   * `listed` (default true): the public reads may name the room (src/shared-data/listing.ts).
   */
  setMeta(room: string, meta: RoomMeta, pinned: boolean, listed?: boolean): Promise<void>;
  deleteMeta(room: string): Promise<boolean>;

  /** Writes a score; returns the member's score afterwards. */
  score(board: string, member: string, value: number, mode: ScoreMode): Promise<number>;
  /** Highest first; offset 0-based. */
  top(board: string, offset: number, limit: number): Promise<Ranked[]>;
  member(board: string, member: string): Promise<Ranked | null>;
  /** The member and up to `n` neighbours on each side. */
  around(board: string, member: string, n: number): Promise<Ranked[]>;
  /** Whether a board has any member (unknown boards are 404 in the API). */
  boardExists(board: string): Promise<boolean>;
  boardSize(board: string): Promise<number>;

  subscribe(listener: (ev: SharedDataEvent) => void): () => void;
  close(): Promise<void>;
}
