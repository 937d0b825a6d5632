// The in-memory shared-data store: presence, lobby and leaderboards of one gateway (the embedded
// default). Several handles can share one MemorySharedDataState (several gateways in one process,
// as in tests), with the same semantics as the Redis store; the semantics are in ./rules.ts.
import { IDEMPOTENCY_PENDING } from './store.js';
import type {
  CachePurge,
  HandoffSignal,
  LobbyPage,
  LobbyQuery,
  LobbyRoom,
  Online,
  Ranked,
  RoomMeta,
  PresenceAnswer,
  PresenceDelta,
  RoomPresence,
  ScoreMode,
  SharedDataEvent,
  SharedDataStore,
} from './store.js';

import {
  PresenceAggregator,
  checkLobbyQuery,
  checkRange,
  checkRoom,
  checkScoreArgs,
  checkTtl,
  compareKeys,
  copyMeta,
  diffReports,
  isPresenceList,
  fail,
  normalizeReport,
  queryLobby,
  toLobbyRoom,
  type LobbyEntry,
  type SharedDataTiming,
} from './rules.js';

// ---------------------------------------------------------------------------------------------
// The in-memory store.

interface GatewayReport {
  expiresAt: number;
  rooms: Map<string, RoomPresence>;
}

interface MetaEntry {
  readonly meta: RoomMeta;
  readonly pinned: boolean;
  /** The public reads may name the room (./listing.ts). */
  readonly listed: boolean;
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

export class MemorySharedDataState {
  readonly gateways = new Map<string, GatewayReport>();
  readonly meta = new Map<string, MetaEntry>();
  readonly boards = new Map<string, Board>();
  /** Idempotency keys: what each holds and until when (insertion order is claim order). */
  readonly idempotency = new Map<string, { value: string; expiresAt: number }>();
  readonly listeners = new Set<(ev: SharedDataEvent) => void>();

  emit(ev: SharedDataEvent): void {
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
/** Idempotency keys kept at most in memory. */
const MAX_IDEMPOTENCY_KEYS = 100_000;

export class MemorySharedDataStore implements SharedDataStore {
  readonly kind = 'memory' as const;

  /** Nothing to connect: in memory. */
  connect(): Promise<void> {
    return Promise.resolve();
  }
  readonly available = true;
  private readonly own = new Set<(ev: SharedDataEvent) => void>();
  private closed = false;

  constructor(
    private readonly gatewayId: string,
    private readonly timing: SharedDataTiming,
    private readonly state: MemorySharedDataState = new MemorySharedDataState(),
    private readonly now: () => number = Date.now,
  ) {
    if (gatewayId === '') throw new Error('memory lobby store: gatewayId must not be empty');
    checkTtl(STORE, timing.presenceTtlMs);
  }

  async publishPresence(rooms: readonly RoomPresence[] | PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer> {
    this.ensureOpen();
    checkTtl(STORE, ttlMs);
    const now = this.now();
    const prev = this.state.gateways.get(this.gatewayId);
    if (!isPresenceList(rooms)) {
      // Unchanged, or changes: the report is kept, changed room by room, and counts ttlMs more
      // (its rooms keep their metadata: they are live). Its cost is the rooms named.
      if (!prev || prev.expiresAt <= now) return 'resync';
      const changed = new Set<string>(this.sweepGateways(now));
      if (rooms !== null) {
        for (const room of rooms.gone) {
          if (!prev.rooms.delete(room)) continue;
          changed.add(room);
          const m = this.state.meta.get(room);
          if (m && !m.pinned) m.expiresAt = Math.max(m.expiresAt, prev.expiresAt);
        }
        for (const [room, r] of normalizeReport(STORE, rooms.rooms)) {
          const p = prev.rooms.get(room);
          if (!p || p.sockets !== r.sockets || p.backend !== r.backend || p.since !== r.since) changed.add(room);
          prev.rooms.set(room, r);
        }
      }
      prev.expiresAt = now + ttlMs;
      if (now >= this.nextMetaSweep) this.sweepMeta(now);
      if (changed.size > 0) this.state.emit({ type: 'lobby', rooms: [...changed] });
      return;
    }
    const next = normalizeReport(STORE, rooms);
    const changed = new Set<string>(this.sweepGateways(now));
    if (prev && prev.expiresAt > now) {
      for (const room of diffReports(prev.rooms, next)) {
        changed.add(room);
        // A room that left the report keeps unpinned metadata ttlMs after it was last live.
        const m = next.has(room) ? undefined : this.state.meta.get(room);
        if (m && !m.pinned) m.expiresAt = Math.max(m.expiresAt, prev.expiresAt);
      }
    } else {
      // No report, or an expired one (it stopped counting silently): every room is news, as in the
      // Redis store when it does not know what Redis has.
      for (const room of prev?.rooms.keys() ?? []) {
        changed.add(room);
        const m = prev && !next.has(room) ? this.state.meta.get(room) : undefined;
        if (m && prev && !m.pinned) m.expiresAt = Math.max(m.expiresAt, prev.expiresAt);
      }
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
      entries.push({ ...p, meta: m?.meta ?? null, pinned: m?.pinned ?? false, listed: m?.listed ?? false });
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
    if (p) return toLobbyRoom({ ...p, meta: m?.meta ?? null, pinned: m?.pinned ?? false, listed: m?.listed ?? false });
    if (!m) return null;
    return toLobbyRoom({ room, backend: '', sockets: 0, since: m.setAt, meta: m.meta, pinned: m.pinned, listed: m.listed });
  }

  async claimIdempotency(key: string, ttlMs: number): Promise<string | null> {
    this.ensureOpen();
    const now = this.now();
    const held = this.state.idempotency.get(key);
    if (held !== undefined && held.expiresAt > now) return held.value;
    this.state.idempotency.delete(key);
    this.state.idempotency.set(key, { value: IDEMPOTENCY_PENDING, expiresAt: now + ttlMs });
    // Bounded: expired keys go first, then the oldest (a retry that late is a new call).
    for (const [k, v] of this.state.idempotency) {
      if (this.state.idempotency.size <= MAX_IDEMPOTENCY_KEYS && v.expiresAt > now) break;
      this.state.idempotency.delete(k);
    }
    return null;
  }

  async settleIdempotency(key: string, answer: string, ttlMs: number): Promise<void> {
    this.ensureOpen();
    this.state.idempotency.set(key, { value: answer, expiresAt: this.now() + ttlMs });
  }

  async releaseIdempotency(key: string): Promise<void> {
    this.ensureOpen();
    this.state.idempotency.delete(key);
  }

  async publishCachePurge(purge: CachePurge): Promise<void> {
    this.ensureOpen();
    this.state.emit({ type: 'cache-purge', purge: { ...purge } });
  }

  async publishHandoff(signal: HandoffSignal): Promise<void> {
    this.ensureOpen();
    this.state.emit({ type: 'handoff', signal: structuredClone(signal) });
  }

  async otherGateways(): Promise<string[]> {
    this.ensureOpen();
    const now = this.now();
    return [...this.state.gateways].flatMap(([id, g]) => (id !== this.gatewayId && g.expiresAt > now ? [id] : []));
  }

  async setMeta(room: string, meta: RoomMeta, pinned: boolean, listed = true): Promise<void> {
    this.ensureOpen();
    checkRoom(STORE, room);
    const copy = copyMeta(STORE, meta).meta;
    const now = this.now();
    const prev = this.state.meta.get(room);
    const keep = prev && !prev.pinned ? prev.expiresAt : 0;
    this.state.meta.set(room, { meta: copy, pinned: pinned === true, listed: listed !== false, setAt: now, expiresAt: Math.max(keep, now + this.timing.presenceTtlMs) });
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

  subscribe(listener: (ev: SharedDataEvent) => void): () => void {
    if (this.closed) return () => undefined;
    // A wrapper, so that subscribing one function twice gives two independent subscriptions.
    const l = (ev: SharedDataEvent): void => listener(ev);
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
  /** An unchanged report sweeps metadata at most once per presence TTL (reads check expiry anyway). */
  private nextMetaSweep = 0;

  private sweepMeta(now: number): void {
    this.nextMetaSweep = now + this.timing.presenceTtlMs;
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
