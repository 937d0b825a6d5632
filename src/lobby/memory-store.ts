// The in-memory shared store: presence, lobby and leaderboards of one gateway (the embedded
// default). Several handles can share one MemorySharedState (several gateways in one process, as in
// tests), with the same semantics as RedisSharedStore. The pure helpers exported here (validation,
// aggregation over gateways, lobby filter/sort/paging, member order) are the one definition of
// those semantics: the Redis store uses them too.
//
// Semantics shared by both stores (decisions the SharedStore interface leaves open):
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
import type {
  LobbyPage,
  LobbyQuery,
  LobbyRoom,
  Online,
  Ranked,
  RoomMeta,
  RoomPresence,
  ScoreMode,
  SharedEvent,
  SharedStore,
} from './store.js';

export interface SharedStoreTiming {
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

// ---------------------------------------------------------------------------------------------
// Shared pure helpers (also used by the Redis store).

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

function fail(store: string, msg: string): never {
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
}

export function toLobbyRoom(e: LobbyEntry): LobbyRoom {
  return { room: e.room, backend: e.backend, sockets: e.sockets, since: new Date(e.since).toISOString(), meta: e.meta, pinned: e.pinned };
}

export function checkLobbyQuery(store: string, q: LobbyQuery): void {
  if (!SORTS.has(q.sort)) fail(store, `lobby sort must be sockets, since or room, got ${String(q.sort)}`);
  if (!ORDERS.has(q.order)) fail(store, `lobby order must be asc or desc, got ${String(q.order)}`);
  if (!Number.isSafeInteger(q.offset) || q.offset < 0) fail(store, `lobby offset must be an integer >= 0, got ${String(q.offset)}`);
  if (!Number.isSafeInteger(q.limit) || q.limit < 1 || q.limit > MAX_LOBBY_LIMIT) {
    fail(store, `lobby limit must be an integer 1..${MAX_LOBBY_LIMIT}, got ${String(q.limit)}`);
  }
  if (q.minSockets !== undefined && !Number.isFinite(q.minSockets)) fail(store, `lobby minSockets must be a finite number, got ${String(q.minSockets)}`);
}

/**
 * Filter, sort, page. Ties (equal sockets or since) are broken by room key ascending whatever the
 * order, so that pages are stable while nothing changes.
 */
export function queryLobby(entries: Iterable<LobbyEntry>, q: LobbyQuery): LobbyPage {
  const matching: LobbyEntry[] = [];
  for (const e of entries) {
    if (!(e.sockets > 0)) continue;
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
    fail(store, `room metadata is not JSON: ${err instanceof Error ? err.message : String(err)}`);
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

// ---------------------------------------------------------------------------------------------
// The in-memory store.

interface GatewayReport {
  expiresAt: number;
  rooms: Map<string, RoomPresence>;
}

interface MetaEntry {
  readonly meta: RoomMeta;
  readonly pinned: boolean;
  readonly setAt: number;
  /** Unpinned: kept until then (or while the room is live). */
  expiresAt: number;
}

class Board {
  readonly scores = new Map<string, number>();
  /** Highest first, ties by member; rebuilt on the first read after a write. */
  private sorted: { readonly order: [string, number][]; readonly index: Map<string, number> } | null = null;

  set(member: string, score: number): void {
    if (this.scores.get(member) === score) return;
    this.scores.set(member, score);
    this.sorted = null;
  }

  view(): { readonly order: [string, number][]; readonly index: Map<string, number> } {
    if (!this.sorted) {
      const order = [...this.scores].sort(([ma, sa], [mb, sb]) => (sa !== sb ? (sb > sa ? 1 : -1) : compareKeys(ma, mb)));
      const index = new Map<string, number>();
      order.forEach(([m], i) => index.set(m, i));
      this.sorted = { order, index };
    }
    return this.sorted;
  }
}

export class MemorySharedState {
  readonly gateways = new Map<string, GatewayReport>();
  readonly meta = new Map<string, MetaEntry>();
  readonly boards = new Map<string, Board>();
  readonly listeners = new Set<(ev: SharedEvent) => void>();

  emit(ev: SharedEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(ev);
      } catch {
        // A listener's failure is its own; the others still get the event.
      }
    }
  }
}

const STORE = 'memory';

export class MemorySharedStore implements SharedStore {
  readonly kind = 'memory' as const;
  readonly available = true;
  private readonly own = new Set<(ev: SharedEvent) => void>();
  private closed = false;

  constructor(
    private readonly gatewayId: string,
    private readonly timing: SharedStoreTiming,
    private readonly state: MemorySharedState = new MemorySharedState(),
    private readonly now: () => number = Date.now,
  ) {
    if (gatewayId === '') throw new Error('memory lobby store: gatewayId must not be empty');
    checkTtl(STORE, timing.presenceTtlMs);
  }

  async publishPresence(rooms: readonly RoomPresence[], ttlMs: number): Promise<void> {
    this.ensureOpen();
    checkTtl(STORE, ttlMs);
    const next = normalizeReport(STORE, rooms);
    const now = this.now();
    const changed = new Set<string>(this.sweepGateways(now));
    const prev = this.state.gateways.get(this.gatewayId);
    if (prev && prev.expiresAt > now) {
      for (const room of diffReports(prev.rooms, next)) changed.add(room);
    } else {
      // No report, or an expired one (it stopped counting silently): every room is news, as in the
      // Redis store when it does not know what Redis has.
      for (const room of prev?.rooms.keys() ?? []) changed.add(room);
      for (const room of next.keys()) changed.add(room);
    }
    const expiresAt = now + ttlMs;
    this.state.gateways.set(this.gatewayId, { expiresAt, rooms: next });
    for (const room of next.keys()) {
      const m = this.state.meta.get(room);
      if (m && !m.pinned) m.expiresAt = Math.max(m.expiresAt, expiresAt);
    }
    this.sweepMeta(now);
    if (changed.size > 0) this.state.emit({ type: 'lobby', rooms: [...changed] });
  }

  async withdrawPresence(): Promise<void> {
    this.ensureOpen();
    this.withdraw();
  }

  async online(): Promise<Online> {
    this.ensureOpen();
    return this.aggregate(this.now()).online();
  }

  async lobby(q: LobbyQuery): Promise<LobbyPage> {
    this.ensureOpen();
    checkLobbyQuery(STORE, q);
    const now = this.now();
    const live = this.aggregate(now).live();
    const entries: LobbyEntry[] = [];
    for (const p of live.values()) {
      const m = this.state.meta.get(p.room);
      entries.push({ ...p, meta: m?.meta ?? null, pinned: m?.pinned ?? false });
    }
    return queryLobby(entries, q);
  }

  async room(room: string): Promise<LobbyRoom | null> {
    this.ensureOpen();
    checkRoom(STORE, room);
    const now = this.now();
    const agg = new PresenceAggregator();
    for (const g of this.state.gateways.values()) {
      const r = g.expiresAt > now ? g.rooms.get(room) : undefined;
      if (r) agg.add(r);
    }
    const p = agg.live().get(room);
    const m = this.liveMeta(room, now, p !== undefined);
    if (p) return toLobbyRoom({ ...p, meta: m?.meta ?? null, pinned: m?.pinned ?? false });
    if (!m) return null;
    return toLobbyRoom({ room, backend: '', sockets: 0, since: m.setAt, meta: m.meta, pinned: m.pinned });
  }

  async setMeta(room: string, meta: RoomMeta, pinned: boolean): Promise<void> {
    this.ensureOpen();
    checkRoom(STORE, room);
    const copy = copyMeta(STORE, meta).meta;
    const now = this.now();
    const prev = this.state.meta.get(room);
    const keep = prev && !prev.pinned ? prev.expiresAt : 0;
    this.state.meta.set(room, { meta: copy, pinned: pinned === true, setAt: now, expiresAt: Math.max(keep, now + this.timing.presenceTtlMs) });
    this.state.emit({ type: 'lobby', rooms: [room] });
  }

  async deleteMeta(room: string): Promise<boolean> {
    this.ensureOpen();
    checkRoom(STORE, room);
    const now = this.now();
    // Expired metadata counts as already gone.
    const existed = this.liveMeta(room, now, this.isLive(room, now)) !== undefined;
    this.state.meta.delete(room);
    if (existed) this.state.emit({ type: 'lobby', rooms: [room] });
    return existed;
  }

  async score(board: string, member: string, value: number, mode: ScoreMode): Promise<number> {
    this.ensureOpen();
    checkScoreArgs(STORE, board, member, value, mode);
    let b = this.state.boards.get(board);
    const cur = b?.scores.get(member);
    let next: number;
    if (mode === 'set') next = value;
    else if (mode === 'incr') next = (cur ?? 0) + value;
    else next = cur === undefined ? value : Math.max(cur, value);
    if (!Number.isFinite(next)) fail(STORE, `score of ${JSON.stringify(member)} would not be finite (${cur ?? 0} + ${value})`);
    next = next === 0 ? 0 : next; // no -0
    if (!b) {
      b = new Board();
      this.state.boards.set(board, b);
    }
    b.set(member, next);
    return next;
  }

  async top(board: string, offset: number, limit: number): Promise<Ranked[]> {
    this.ensureOpen();
    checkRange(STORE, 'offset', offset);
    checkRange(STORE, 'limit', limit);
    const b = this.state.boards.get(board);
    if (!b) return [];
    return b
      .view()
      .order.slice(offset, offset + limit)
      .map(([member, score], i) => ({ member, score, rank: offset + i + 1 }));
  }

  async member(board: string, member: string): Promise<Ranked | null> {
    this.ensureOpen();
    const b = this.state.boards.get(board);
    const score = b?.scores.get(member);
    if (!b || score === undefined) return null;
    const i = b.view().index.get(member);
    return i === undefined ? null : { member, score, rank: i + 1 };
  }

  async around(board: string, member: string, n: number): Promise<Ranked[]> {
    this.ensureOpen();
    checkRange(STORE, 'n', n);
    const b = this.state.boards.get(board);
    if (!b) return [];
    const { order, index } = b.view();
    const i = index.get(member);
    if (i === undefined) return [];
    const start = Math.max(0, i - n);
    return order.slice(start, i + n + 1).map(([m, score], j) => ({ member: m, score, rank: start + j + 1 }));
  }

  async boardExists(board: string): Promise<boolean> {
    this.ensureOpen();
    return (this.state.boards.get(board)?.scores.size ?? 0) > 0;
  }

  async boardSize(board: string): Promise<number> {
    this.ensureOpen();
    return this.state.boards.get(board)?.scores.size ?? 0;
  }

  subscribe(listener: (ev: SharedEvent) => void): () => void {
    if (this.closed) return () => undefined;
    // A wrapper, so that subscribing one function twice gives two independent subscriptions.
    const l = (ev: SharedEvent): void => listener(ev);
    this.state.listeners.add(l);
    this.own.add(l);
    return () => {
      this.state.listeners.delete(l);
      this.own.delete(l);
    };
  }

  /** Withdraws this gateway's presence (the other handles get the event) and drops its listeners. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const l of this.own) this.state.listeners.delete(l);
    this.own.clear();
    this.withdraw();
  }

  private withdraw(): void {
    const prev = this.state.gateways.get(this.gatewayId);
    this.state.gateways.delete(this.gatewayId);
    if (prev && prev.rooms.size > 0 && prev.expiresAt > this.now()) this.state.emit({ type: 'lobby', rooms: [...prev.rooms.keys()] });
  }

  private ensureOpen(): void {
    if (this.closed) fail(STORE, 'closed');
  }

  /** Drops expired reports of other gateways; returns their rooms (they just disappeared). */
  private sweepGateways(now: number): string[] {
    const gone: string[] = [];
    for (const [id, g] of this.state.gateways) {
      if (id === this.gatewayId || g.expiresAt > now) continue;
      this.state.gateways.delete(id);
      gone.push(...g.rooms.keys());
    }
    return gone;
  }

  /** Drops unpinned metadata that has expired and whose room is not live. */
  private sweepMeta(now: number): void {
    for (const [room, m] of this.state.meta) {
      if (!m.pinned && m.expiresAt <= now && !this.isLive(room, now)) this.state.meta.delete(room);
    }
  }

  private isLive(room: string, now: number): boolean {
    for (const g of this.state.gateways.values()) if (g.expiresAt > now && g.rooms.has(room)) return true;
    return false;
  }

  private liveMeta(room: string, now: number, live: boolean): MetaEntry | undefined {
    const m = this.state.meta.get(room);
    if (!m || m.pinned || live || m.expiresAt > now) return m;
    this.state.meta.delete(room);
    return undefined;
  }

  private aggregate(now: number): PresenceAggregator {
    const agg = new PresenceAggregator();
    for (const g of this.state.gateways.values()) {
      if (g.expiresAt <= now) continue;
      for (const r of g.rooms.values()) agg.add(r);
    }
    return agg;
  }
}
