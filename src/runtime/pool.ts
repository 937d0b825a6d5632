// The backends and what this gateway knows of each right now: health (active checks and passive
// marks), administrative state (draining, maintenance: shared by all gateways through the store),
// whether discovery still lists it, and load counters. The pool is the one owner of this state:
// everyone else reads Backend views, and every change is one of the named mutations below
// (setHealth, markDown/markUp, setAdmin, noteMove, applyLoads, socketOpened/Closed,
// requestStarted/Ended, setBackends). Owns no sockets. The list changes at run time (SIGHUP
// reload, DNS discovery) without dropping sockets.
import type { ResolvedBackend } from '../config/load.js';
import type { BackendView } from '../placement/decide.js';
import { buildRing, type Ring } from '../placement/ring.js';
import type { BackendAdminState } from '../placement/store.js';

export type BackendState = 'up' | 'down' | 'draining' | 'maintenance';

/** Backends named in BackendPool.unavailableReason; the rest are counted, so the line stays short. */
const REASON_DETAILS = 4;

/** A backend as everyone but the pool sees it: read-only; every change goes through BackendPool. */
export interface Backend {
  readonly id: string;
  readonly config: ResolvedBackend;
  /** Upgraded sockets currently piped to this backend through this gateway. */
  readonly liveSockets: number;
  /** HTTP requests currently being proxied to this backend. */
  readonly inflight: number;
  /** Passively marked down (refused a connection) until this time (ms since epoch). */
  readonly downUntil: number;
  /** Active health checks' verdict. */
  readonly health: 'up' | 'down';
  /** Draining / maintenance, as set through the admin API on any gateway. */
  readonly admin: BackendAdminState | null;
  /** Gone from the configured or discovered list; kept while sockets still use it. */
  readonly removed: boolean;
  /** Rooms placed on it (all gateways): the bounded-load figure. */
  readonly rooms: number;
  /** Gone for every gateway alike: its rooms may be moved even while they have live sockets. */
  gone(nowMs: number): boolean;
  /** May carry traffic of rooms already placed on it (a draining backend still does). */
  routable(nowMs: number): boolean;
  /** Not routable only because its active health checks failed (no passive mark, not gone). */
  checksDownOnly(nowMs: number): boolean;
  /** May be given new rooms. */
  acceptsNew(nowMs: number): boolean;
  /** Why it takes no new rooms now, in a few words; null when it does. */
  unavailableReason(nowMs: number): string | null;
  state(nowMs: number): BackendState;
}

/** The pool's own record: mutable, never handed out as such (callers get the Backend view). */
class Entry implements Backend {
  liveSockets = 0;
  inflight = 0;
  downUntil = 0;
  health: 'up' | 'down' = 'up';
  /** Why the checks last changed the verdict, e.g. "3 failed checks: ECONNREFUSED". */
  healthReason = '';
  /** Why it was last passively marked down, e.g. "refused". */
  passiveReason = '';
  admin: BackendAdminState | null = null;
  removed = false;
  rooms = 0;

  constructor(public config: ResolvedBackend) {}

  get id(): string {
    return this.config.id;
  }

  gone(nowMs: number): boolean {
    if (this.removed || this.admin?.state === 'maintenance') return true;
    return this.admin?.state === 'draining' && this.admin.deadline !== null && this.admin.deadline <= nowMs;
  }

  routable(nowMs: number): boolean {
    return this.health === 'up' && this.downUntil <= nowMs && !this.gone(nowMs);
  }

  checksDownOnly(nowMs: number): boolean {
    return this.health === 'down' && this.downUntil <= nowMs && !this.gone(nowMs);
  }

  acceptsNew(nowMs: number): boolean {
    return this.config.weight > 0 && this.admin?.state !== 'draining' && this.routable(nowMs);
  }

  unavailableReason(nowMs: number): string | null {
    if (this.removed) return 'removed from the list';
    if (this.admin?.state === 'maintenance') return 'maintenance';
    if (this.gone(nowMs)) return 'drain deadline passed';
    if (this.downUntil > nowMs) return `failed a connection (${this.passiveReason || 'refused'}), no new traffic for ${Math.ceil((this.downUntil - nowMs) / 1000)} s`;
    if (this.health === 'down') return this.healthReason || 'failed its health checks';
    if (this.admin?.state === 'draining') return 'draining';
    if (this.config.weight === 0) return 'weight 0';
    return null;
  }

  state(nowMs: number): BackendState {
    if (this.admin?.state === 'maintenance') return 'maintenance';
    if (this.health === 'down' || this.downUntil > nowMs || this.removed) return 'down';
    return this.admin?.state === 'draining' ? 'draining' : 'up';
  }
}

/** A room placed (+1) or moved away (-1) since a heartbeat's load read began. */
interface RoomDelta {
  readonly seq: number;
  readonly id: string;
  readonly d: 1 | -1;
}

export interface PoolEvents {
  /** A backend went from routable to passively down, or back. */
  onPassive?(backend: Backend, state: 'down' | 'up', reason: string): void;
  /** Backends added to or removed from the list. */
  onMembership?(added: readonly Backend[], removed: readonly Backend[]): void;
}

export class BackendPool {
  private currentRing: Ring;
  private readonly byId = new Map<string, Entry>();
  private list: readonly Entry[] = [];
  /** Room placements made by this gateway since the last load read began; see applyLoads. */
  private loadSeq = 0;
  private deltas: RoomDelta[] = [];

  constructor(
    configs: readonly ResolvedBackend[],
    private readonly passiveDownMs: number,
    private readonly events: PoolEvents = {},
  ) {
    this.currentRing = buildRing([]);
    this.setBackends(configs);
  }

  /** Every known backend, removed ones included while they have sockets; configuration order. */
  get backends(): readonly Backend[] {
    return this.list;
  }

  /** The ring over the listed (not removed) backends. */
  get ring(): Ring {
    return this.currentRing;
  }

  get(id: string): Backend | undefined {
    return this.byId.get(id);
  }

  /**
   * Applies a new list (reload, discovery). New backends join the ring (they take new rooms only:
   * live rooms stay where their placement says); missing ones are marked removed and leave the
   * ring; a removed backend is forgotten once no socket uses it. Weights and URLs update in place.
   */
  setBackends(configs: readonly ResolvedBackend[]): void {
    const next = new Set(configs.map((c) => c.id));
    const added: Entry[] = [];
    const removed: Entry[] = [];
    for (const c of configs) {
      const b = this.byId.get(c.id);
      if (b) {
        if (b.removed) added.push(b);
        b.config = c;
        b.removed = false;
      } else {
        const nb = new Entry(c);
        this.byId.set(c.id, nb);
        added.push(nb);
      }
    }
    for (const b of this.byId.values()) {
      if (!next.has(b.id) && !b.removed) {
        b.removed = true;
        removed.push(b);
      }
    }
    this.rebuild();
    if (added.length || removed.length) this.events.onMembership?.(added, removed);
  }

  /** Drops removed backends that no longer carry sockets or requests. */
  sweep(): void {
    let changed = false;
    for (const b of this.byId.values()) {
      if (b.removed && b.liveSockets === 0 && b.inflight === 0) {
        this.byId.delete(b.id);
        changed = true;
      }
    }
    if (changed) this.rebuild();
  }

  private rebuild(): void {
    this.list = [...this.byId.values()];
    this.currentRing = buildRing(this.list.filter((b) => !b.removed).map((b) => ({ id: b.id, weight: b.config.weight })));
  }

  /** The active health checks' verdict changed. */
  setHealth(id: string, state: 'up' | 'down', reason: string): void {
    const b = this.byId.get(id);
    if (!b) return;
    b.health = state;
    b.healthReason = reason;
  }

  /** Draining, maintenance or active, as the store says (set through any gateway). */
  setAdmin(id: string, state: BackendAdminState | null): void {
    const b = this.byId.get(id);
    if (b) b.admin = state;
  }

  /** An upgraded socket to the backend opened through this gateway, or closed. */
  socketOpened(id: string): void {
    const b = this.byId.get(id);
    if (b) b.liveSockets++;
  }

  socketClosed(id: string): void {
    const b = this.byId.get(id);
    if (b && b.liveSockets > 0) b.liveSockets--;
  }

  /** An HTTP request to the backend started, or ended. */
  requestStarted(id: string): void {
    const b = this.byId.get(id);
    if (b) b.inflight++;
  }

  requestEnded(id: string): void {
    const b = this.byId.get(id);
    if (b && b.inflight > 0) b.inflight--;
  }

  /**
   * This gateway placed a room on `to` (moving it from `from`, if it had a backend): counted at
   * once, so a burst of new rooms before the next heartbeat already sees it for bounded loads.
   */
  noteMove(from: string | null, to: string): void {
    const seq = ++this.loadSeq;
    const t = this.byId.get(to);
    if (t) {
      t.rooms++;
      this.deltas.push({ seq, id: to, d: 1 });
    }
    const f = from === null ? undefined : this.byId.get(from);
    if (f && f.rooms > 0) {
      f.rooms--;
      this.deltas.push({ seq, id: f.id, d: -1 });
    }
  }

  /** Taken before a heartbeat reads room counts from the store; handed back to applyLoads. */
  loadMark(): number {
    return this.loadSeq;
  }

  /**
   * The store's room counts per backend, read after `mark` was taken. Placements this gateway
   * made after the mark may be missing from the read (it raced them), so they are added again
   * rather than overwritten; at worst one is counted twice until the next heartbeat, never lost.
   */
  applyLoads(rooms: ReadonlyMap<string, number>, mark: number): void {
    this.deltas = this.deltas.filter((x) => x.seq > mark);
    for (const b of this.list) b.rooms = rooms.get(b.id) ?? 0;
    for (const x of this.deltas) {
      const b = this.byId.get(x.id);
      if (b) b.rooms = Math.max(0, b.rooms + x.d);
    }
  }

  /** A connection was refused or timed out: no new traffic for passiveDownMs. */
  markDown(id: string, nowMs: number, reason: string): void {
    const b = this.byId.get(id);
    if (!b) return;
    const wasRoutable = b.downUntil <= nowMs;
    b.downUntil = nowMs + this.passiveDownMs;
    b.passiveReason = reason;
    if (wasRoutable) this.events.onPassive?.(b, 'down', reason);
  }

  /** A connection to the backend succeeded: clear a passive mark (early, or after it ran out). */
  markUp(id: string): void {
    const b = this.byId.get(id);
    if (!b || b.downUntil === 0) return;
    b.downUntil = 0;
    this.events.onPassive?.(b, 'up', 'connected');
  }

  /**
   * One short line saying why no backend can take a request now (for 503 bodies and logs), e.g.
   * "all 3 backends are down (b1: 3 failed checks: ECONNREFUSED; b2: ...)". Names at most
   * REASON_DETAILS backends; the rest are counted.
   */
  unavailableReason(nowMs: number): string {
    const listed = this.backends.filter((b) => !b.removed);
    if (listed.length === 0) return 'no backends configured';
    const open = listed.filter((b) => b.acceptsNew(nowMs));
    if (open.length > 0) {
      const ids = open.map((b) => b.id);
      const named = `${ids.slice(0, REASON_DETAILS).join(', ')}${ids.length > REASON_DETAILS ? ` and ${ids.length - REASON_DETAILS} more` : ''}`;
      return `${named} ${ids.length === 1 ? 'takes' : 'take'} new rooms again (${ids.length} of ${listed.length} backends)`;
    }
    const why = listed.map((b) => `${b.id}: ${b.unavailableReason(nowMs) ?? 'unknown'}`);
    const more = why.length > REASON_DETAILS ? `; and ${why.length - REASON_DETAILS} more` : '';
    const details = `(${why.slice(0, REASON_DETAILS).join('; ')}${more})`;
    const n = listed.length;
    if (listed.every((b) => b.state(nowMs) === 'down')) return n === 1 ? `the only backend is down ${details}` : `all ${n} backends are down ${details}`;
    if (listed.every((b) => b.admin !== null)) return `every backend is draining or in maintenance ${details}`;
    return `no backend takes new rooms ${details}`;
  }

  views(nowMs: number, loadMetric: 'rooms' | 'sockets'): BackendView[] {
    return this.backends.map((b) => ({
      id: b.id,
      routable: b.routable(nowMs),
      acceptsNew: b.acceptsNew(nowMs),
      gone: b.gone(nowMs),
      removed: b.removed,
      checksDownOnly: b.checksDownOnly(nowMs),
      weight: b.config.weight,
      load: loadMetric === 'rooms' ? b.rooms : b.liveSockets,
      busy: b.liveSockets + b.inflight,
    }));
  }
}
