// The rules of shared data, pure and shared by both stores (memory and Redis): validation,
// aggregation of presence over gateways, lobby filter/sort/paging, member order. This file is the
// one definition of the semantics below; each store only keeps the data.
//
// Semantics shared by both stores (decisions the SharedDataStore interface leaves open):
// - Presence: each gateway's report replaces its previous one and counts until ttlMs after it was
//   published. Entries with sockets <= 0 are ignored; several entries of one room in one report
//   are merged (sockets summed, earliest since). Across gateways: sockets summed, since = min, and
//   the backend is the one with the most sockets of the room (ties: the smaller backend id). Two
//   backends for one room should not happen with sticky placements; if it does (a move racing a
//   heartbeat) the bigger side is where the room really is. Online.byBackend counts every socket
//   on the backend it was reported on (the truth per backend, even for such a split room).
// - Metadata: setMeta replaces (a JSON copy is kept; the returned objects are frozen). Pinned
//   metadata stays until deleteMeta. Unpinned metadata is kept while the room is live and for one
//   presence TTL after the last heartbeat that reported it live, or after setMeta, whichever is
//   later (so metadata set just before the first socket arrives survives). The TTL after setMeta
//   is the store's presenceTtlMs (the ttlMs the gateway passes to publishPresence).
// - room(): a live room (sockets > 0 in some unexpired report), else a room with metadata (pinned,
//   or unpinned and not yet expired) with sockets 0, backend '' (no backend holds it) and since =
//   when the metadata was last set. Otherwise null. The lobby lists live rooms only.
// - Listing: setMeta's `listed` (default true) is kept with the metadata and read back as
//   LobbyRoom.listed (false without metadata). A lobby query with `listing` (the public view) keeps
//   only rooms listed by it or by a key matching one of its globs (./listing.ts); without it, all.
// - Events: {type:'lobby', rooms} from the gateway that changed something: publishPresence sends
//   the rooms whose presence (appeared, gone, sockets, backend or since) differs from its previous
//   report, plus the rooms of other gateways whose reports it found expired (at most one heartbeat
//   late); nothing when nothing changed. withdrawPresence/close send the rooms withdrawn, setMeta
//   and deleteMeta (when something was deleted) the room. Expiry of metadata is silent.
// - Leaderboards: rank 1 = highest score; equal scores in ascending member order by Unicode code
//   point (= UTF-8 byte order = Redis's order of equal scores). Scores are finite doubles;
//   anything else, and an increment whose result would not be finite, is rejected (nothing written).
// - Keys (rooms, boards, members, backends, gateway ids) are plain strings everywhere: Maps, never
//   object lookups, so "__proto__" and "constructor" are ordinary names.
import { errorMessage } from '../http/errors.js';
import { isListed } from './listing.js';
import type {
  LobbyPage,
  LobbyQuery,
  LobbyRoom,
  Online,
  RoomMeta,
  PresenceDelta,
  RoomPresence,
  ScoreMode,
} from './store.js';

export interface SharedDataTiming {
  /**
   * The ttlMs this gateway passes to publishPresence. Unpinned metadata of a room that is not live
   * is kept this long after setMeta.
   */
  readonly presenceTtlMs: number;
}

export const MAX_LOBBY_LIMIT = 500;
const SCORE_MODES: ReadonlySet<string> = new Set<ScoreMode>(['set', 'incr', 'max']);
const SORTS: ReadonlySet<string> = new Set<LobbyQuery['sort']>(['sockets', 'since', 'room']);
const ORDERS: ReadonlySet<string> = new Set<LobbyQuery['order']>(['asc', 'desc']);

/** Maps a UTF-16 code unit so that comparing mapped units orders strings by code point. */
function codePointKey(c: number): number {
  // Surrogates (U+D800..DFFF, halves of code points >= U+10000) must sort above U+E000..FFFF.
  if (c < 0xd800) return c;
  return c >= 0xe000 ? c - 0x800 : c + 0x2000;
}

/**
 * Orders strings by Unicode code point, which is UTF-8 byte order: the order Redis gives members
 * of equal score. (JavaScript's `<` compares UTF-16 code units and differs for characters above
 * U+FFFF against U+E000..U+FFFF.)
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointKey(x) - codePointKey(y);
  }
  return a.length - b.length;
}

export function fail(store: string, msg: string): never {
  throw new Error(`${store} lobby store: ${msg}`);
}

/** A positive integer number of milliseconds, or an Error. */
export function checkTtl(store: string, ttlMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) fail(store, `ttlMs must be a positive integer (ms), got ${String(ttlMs)}`);
}

/**
 * One gateway's report, validated and merged by room (sockets <= 0 dropped; duplicates summed,
 * earliest since, backend of the bigger entry).
 */
export function normalizeReport(store: string, rooms: readonly RoomPresence[]): Map<string, RoomPresence> {
  const out = new Map<string, RoomPresence>();
  for (const r of rooms) {
    if (typeof r.room !== 'string' || typeof r.backend !== 'string') fail(store, 'presence room and backend must be strings');
    if (!Number.isSafeInteger(r.sockets)) fail(store, `presence sockets must be an integer, got ${String(r.sockets)} for room ${JSON.stringify(r.room)}`);
    if (!Number.isFinite(r.since)) fail(store, `presence since must be a finite number (ms), got ${String(r.since)} for room ${JSON.stringify(r.room)}`);
    if (r.sockets <= 0) continue;
    const prev = out.get(r.room);
    if (!prev) {
      out.set(r.room, { room: r.room, backend: r.backend, sockets: r.sockets, since: r.since });
    } else {
      out.set(r.room, {
        room: r.room,
        backend: r.sockets > prev.sockets ? r.backend : prev.backend,
        sockets: prev.sockets + r.sockets,
        since: Math.min(prev.since, r.since),
      });
    }
  }
  return out;
}

/** A whole presence report (a list), not a delta or null (unchanged). */
export function isPresenceList(rooms: readonly RoomPresence[] | PresenceDelta | null): rooms is readonly RoomPresence[] {
  return Array.isArray(rooms);
}

/** Rooms whose presence differs between two reports of one gateway (null: unknown, all of next). */
export function diffReports(prev: ReadonlyMap<string, RoomPresence> | null, next: ReadonlyMap<string, RoomPresence>): string[] {
  if (prev === null) return [...next.keys()];
  const changed: string[] = [];
  for (const [room, r] of next) {
    const p = prev.get(room);
    if (!p || p.sockets !== r.sockets || p.backend !== r.backend || p.since !== r.since) changed.push(room);
  }
  for (const room of prev.keys()) if (!next.has(room)) changed.push(room);
  return changed;
}

/** A room's presence summed over all gateways. */
export interface LivePresence {
  readonly room: string;
  /** The backend with the most sockets of the room (ties: the smaller id). */
  readonly backend: string;
  readonly sockets: number;
  /** Earliest since (ms). */
  readonly since: number;
}

/** Sums presence over gateways' (unexpired) reports. */
export class PresenceAggregator {
  private readonly rooms = new Map<string, { sockets: number; since: number; perBackend: Map<string, number> }>();
  private readonly perBackend = new Map<string, number>();
  private total = 0;

  add(r: RoomPresence): void {
    if (!(r.sockets > 0)) return;
    let acc = this.rooms.get(r.room);
    if (!acc) {
      acc = { sockets: 0, since: r.since, perBackend: new Map() };
      this.rooms.set(r.room, acc);
    }
    acc.sockets += r.sockets;
    acc.since = Math.min(acc.since, r.since);
    acc.perBackend.set(r.backend, (acc.perBackend.get(r.backend) ?? 0) + r.sockets);
    this.perBackend.set(r.backend, (this.perBackend.get(r.backend) ?? 0) + r.sockets);
    this.total += r.sockets;
  }

  live(): Map<string, LivePresence> {
    const out = new Map<string, LivePresence>();
    for (const [room, acc] of this.rooms) {
      // Different backends for one room should not happen with sticky placements (a move racing
      // a heartbeat): the room is where most of its sockets are; ties go to the smaller id.
      let backend = '';
      let best = -1;
      for (const [b, n] of acc.perBackend) {
        if (n > best || (n === best && compareKeys(b, backend) < 0)) {
          backend = b;
          best = n;
        }
      }
      out.set(room, { room, backend, sockets: acc.sockets, since: acc.since });
    }
    return out;
  }

  online(): Online {
    // Object.fromEntries defines own properties: a backend called "__proto__" is an ordinary key.
    return { total: this.total, rooms: this.rooms.size, byBackend: Object.fromEntries(this.perBackend) };
  }
}

/** A lobby entry before paging (since in ms, for sorting). */
export interface LobbyEntry {
  readonly room: string;
  readonly backend: string;
  readonly sockets: number;
  readonly since: number;
  readonly meta: RoomMeta | null;
  readonly pinned: boolean;
  /** Listed by its metadata (false without metadata). */
  readonly listed: boolean;
}

export function toLobbyRoom(e: LobbyEntry): LobbyRoom {
  return { room: e.room, backend: e.backend, sockets: e.sockets, since: new Date(e.since).toISOString(), meta: e.meta, pinned: e.pinned, listed: e.listed };
}

export function checkLobbyQuery(store: string, q: LobbyQuery): void {
  if (!SORTS.has(q.sort)) fail(store, `lobby sort must be sockets, since or room, got ${String(q.sort)}`);
  if (!ORDERS.has(q.order)) fail(store, `lobby order must be asc or desc, got ${String(q.order)}`);
  if (!Number.isSafeInteger(q.offset) || q.offset < 0) fail(store, `lobby offset must be an integer >= 0, got ${String(q.offset)}`);
  if (!Number.isSafeInteger(q.limit) || q.limit < 1 || q.limit > MAX_LOBBY_LIMIT) {
    fail(store, `lobby limit must be an integer 1..${MAX_LOBBY_LIMIT}, got ${String(q.limit)}`);
  }
  if (q.minSockets !== undefined && !Number.isFinite(q.minSockets)) fail(store, `lobby minSockets must be a finite number, got ${String(q.minSockets)}`);
  if (q.listing !== undefined && (!Array.isArray(q.listing.patterns) || !q.listing.patterns.every((p) => typeof p === 'string'))) {
    fail(store, 'lobby listing.patterns must be an array of strings (globs)');
  }
}

/**
 * Filter, sort, page. Ties (equal sockets or since) are broken by room key ascending whatever the
 * order, so that pages are stable while nothing changes.
 */
export function queryLobby(entries: Iterable<LobbyEntry>, q: LobbyQuery): LobbyPage {
  const matching: LobbyEntry[] = [];
  for (const e of entries) {
    if (!(e.sockets > 0)) continue;
    if (q.listing !== undefined && !isListed(q.listing, e.room, e.listed)) continue;
    if (q.status !== undefined && (e.meta === null || e.meta.status !== q.status)) continue;
    if (q.backend !== undefined && e.backend !== q.backend) continue;
    if (q.prefix !== undefined && !e.room.startsWith(q.prefix)) continue;
    if (q.minSockets !== undefined && e.sockets < q.minSockets) continue;
    matching.push(e);
  }
  const dir = q.order === 'desc' ? -1 : 1;
  const key = q.sort;
  matching.sort((a, b) => {
    if (key === 'room') return dir * compareKeys(a.room, b.room);
    const d = key === 'sockets' ? a.sockets - b.sockets : a.since - b.since;
    return d !== 0 ? dir * Math.sign(d) : compareKeys(a.room, b.room);
  });
  const page = matching.slice(q.offset, q.offset + q.limit);
  const end = q.offset + page.length;
  return { rooms: page.map(toLobbyRoom), total: matching.length, nextOffset: end < matching.length ? end : null };
}

/** A JSON copy of a metadata object, deeply frozen; an Error for anything that is not a JSON object. */
export function copyMeta(store: string, meta: RoomMeta): { json: string; meta: RoomMeta } {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) fail(store, 'room metadata must be a JSON object');
  let json: string;
  try {
    json = JSON.stringify(meta);
  } catch (err) {
    fail(store, `room metadata is not JSON: ${errorMessage(err)}`);
  }
  return { json, meta: parseMetaJson(json) };
}

/** Parses stored metadata (a JSON object) into a frozen object; throws if it is not one. */
export function parseMetaJson(json: string): RoomMeta {
  const v: unknown = JSON.parse(json);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('metadata is not a JSON object');
  return deepFreeze(v as Record<string, unknown>);
}

/** Freezes a parsed JSON value and everything in it. */
export function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

export function checkRoom(store: string, room: string): void {
  if (typeof room !== 'string') fail(store, 'room must be a string');
}

export function checkScoreArgs(store: string, board: string, member: string, value: number, mode: ScoreMode): void {
  if (typeof board !== 'string' || typeof member !== 'string') fail(store, 'board and member must be strings');
  if (typeof value !== 'number' || !Number.isFinite(value)) fail(store, `score must be a finite number, got ${String(value)}`);
  if (!SCORE_MODES.has(mode)) fail(store, `score mode must be set, incr or max, got ${String(mode)}`);
}

export function checkRange(store: string, what: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) fail(store, `${what} must be an integer >= 0, got ${String(n)}`);
}

