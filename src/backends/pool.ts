// The backends and what this gateway knows of each right now: health (active checks and passive
// marks), administrative state (draining, maintenance: shared by all gateways through the store),
// whether discovery still lists it, and load counters. Owns no sockets; the proxies update the
// counters. The list changes at run time (SIGHUP reload, DNS discovery) without dropping sockets.
import type { ResolvedBackend } from '../config/load.js';
import type { BackendView } from '../placement/decide.js';
import { buildRing, type Ring } from '../placement/ring.js';
import type { BackendAdminState } from '../placement/store.js';

export type BackendState = 'up' | 'down' | 'draining' | 'maintenance';

/** Backends named in BackendPool.unavailableReason; the rest are counted, so the line stays short. */
const REASON_DETAILS = 4;

export class Backend {
  /** Upgraded sockets currently piped to this backend through this gateway. */
  liveSockets = 0;
  /** HTTP requests currently being proxied to this backend. */
  inflight = 0;
  /** Passively marked down (refused a connection) until this time (ms since epoch). */
  downUntil = 0;
  /** Active health checks' verdict. */
  health: 'up' | 'down' = 'up';
  /** Why the checks last changed the verdict, e.g. "3 failed checks: ECONNREFUSED". */
  healthReason = '';
  /** Why it was last passively marked down, e.g. "refused". */
  passiveReason = '';
  /** Draining / maintenance, as set through the admin API on any gateway. */
  admin: BackendAdminState | null = null;
  /** Gone from the configured or discovered list; kept while sockets still use it. */
  removed = false;
  /** Rooms placed on it (all gateways), refreshed every heartbeat: the bounded-load figure. */
  rooms = 0;

  constructor(public config: ResolvedBackend) {}

  get id(): string {
    return this.config.id;
  }

  /** Gone for every gateway alike: its rooms may be moved even while they have live sockets. */
  gone(nowMs: number): boolean {
    if (this.removed || this.admin?.state === 'maintenance') return true;
    return this.admin?.state === 'draining' && this.admin.deadline !== null && this.admin.deadline <= nowMs;
  }

  /** May carry traffic of rooms already placed on it (a draining backend still does). */
  routable(nowMs: number): boolean {
    return this.health === 'up' && this.downUntil <= nowMs && !this.gone(nowMs);
  }

  /** Not routable only because its active health checks failed (no passive mark, not gone). */
  checksDownOnly(nowMs: number): boolean {
    return this.health === 'down' && this.downUntil <= nowMs && !this.gone(nowMs);
  }

  /** May be given new rooms. */
  acceptsNew(nowMs: number): boolean {
    return this.config.weight > 0 && this.admin?.state !== 'draining' && this.routable(nowMs);
  }

  /** Why it takes no new rooms now, in a few words; null when it does. */
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

export interface PoolEvents {
  /** A backend went from routable to passively down, or back. */
  onPassive?(backend: Backend, state: 'down' | 'up', reason: string): void;
  /** Backends added to or removed from the list. */
  onMembership?(added: readonly Backend[], removed: readonly Backend[]): void;
}

export class BackendPool {
  ring: Ring;
  private readonly byId = new Map<string, Backend>();
  /** Every known backend, removed ones included while they have sockets; configuration order. */
  backends: readonly Backend[] = [];

  constructor(
    configs: readonly ResolvedBackend[],
    private readonly passiveDownMs: number,
    private readonly events: PoolEvents = {},
  ) {
    this.ring = buildRing([]);
    this.setBackends(configs);
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
    const added: Backend[] = [];
    const removed: Backend[] = [];
    for (const c of configs) {
      const b = this.byId.get(c.id);
      if (b) {
        if (b.removed) added.push(b);
        b.config = c;
        b.removed = false;
      } else {
        const nb = new Backend(c);
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
    this.backends = [...this.byId.values()];
    this.ring = buildRing(this.backends.filter((b) => !b.removed).map((b) => ({ id: b.id, weight: b.config.weight })));
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
      checksDownOnly: b.checksDownOnly(nowMs),
      weight: b.config.weight,
      load: loadMetric === 'rooms' ? b.rooms : b.liveSockets,
      busy: b.liveSockets + b.inflight,
    }));
  }
}
