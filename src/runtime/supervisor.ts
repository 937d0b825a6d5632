// The runtime's rules over time: what happens when a backend's health changes, when a connection
// to it fails, when the list changes, when an operator drains it; and the heartbeat that keeps
// this gateway in step with the others (placements kept alive, loads read, presence published,
// drain deadlines enforced). It owns no sockets and reads no clock but the one it is given, so
// every rule here is tested with a fake clock and plain tunnel objects.
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { BackendAdminState, StoreEvent } from '../placement/store.js';
import type { SharedDataStore } from '../shared-data/store.js';
import type { EventLog, MoveCause } from './events.js';
import type { Placer } from './placer.js';
import type { Backend, BackendPool } from './pool.js';
import type { LiveWatcher, TunnelRegistry } from './tunnels.js';

/** A whole presence report at least this often (see publishPresence). */
export const WHOLE_PRESENCE_EVERY_MS = 60_000;

/** What the supervisor asks of the active health checks. */
export interface HealthControl {
  /** Passive evidence (a refused connection) counts towards the checks' `fall`. */
  reportFailure(id: string, reason: string): void;
  setTargets(targets: readonly { id: string; host: string; port: number; tls?: boolean }[]): void;
}

export interface SupervisorOptions {
  readonly pool: BackendPool;
  readonly tunnels: TunnelRegistry;
  readonly placer: Placer;
  readonly sharedData: SharedDataStore;
  readonly events: EventLog;
  readonly health: HealthControl;
  readonly metrics: Pick<Metrics, 'backendStateChanges' | 'placements' | 'degraded'>;
  readonly logger: Logger;
  /** health.onDown: keep the sockets of a backend its checks mark down, or close them. */
  readonly onDown: 'keep' | 'close';
  readonly heartbeatMs: number;
  /** presence.ttlMs: this gateway's presence expires this long after its last heartbeat. */
  readonly presenceTtlMs: number;
  readonly now?: () => number;
}

/** setTimeout's longest delay; a deadline further away is left to the heartbeat. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class Supervisor {
  private timer: NodeJS.Timeout | null = null;
  /** One timer per draining backend, at its deadline. */
  private readonly deadlineTimers = new Map<string, NodeJS.Timeout>();
  private presenceFailing = false;
  private readonly now: () => number;
  /** The live rooms' changes since the last presence report. */
  private readonly presence: LiveWatcher;

  /** The heartbeat running now, if any (see tick). */
  private ticking: Promise<void> | null = null;
  /** tick() was called while one ran: run once more after it. */
  private tickAgain = false;
  /** Told when a backend joins or comes back (rebalancing). */
  private readonly backListeners: ((id: string) => void)[] = [];

  constructor(private readonly o: SupervisorOptions) {
    this.now = o.now ?? Date.now;
    // The whole list at least every WHOLE_PRESENCE_EVERY_MS: a report of changes names only the
    // rooms that changed, so a count the store lost without telling (a write lost in a failover,
    // the connection kept) would stay wrong, and a push to that room refused as not live, for as
    // long as the room did not change.
    this.presence = o.tunnels.watch(WHOLE_PRESENCE_EVERY_MS);
  }

  /**
   * `listener` is told each time a backend may take new rooms again: it joined the list, its
   * checks or a connection found it up, or its drain or maintenance was lifted (any gateway).
   */
  onBackendBack(listener: (id: string) => void): void {
    this.backListeners.push(listener);
  }

  private back(id: string): void {
    for (const l of this.backListeners) l(id);
  }

  /** Starts the heartbeat (one at once, then every heartbeatMs). */
  start(): void {
    this.o.metrics.degraded.set(this.o.placer.isDegraded ? 1 : 0);
    this.timer = setInterval(() => void this.tick(), this.o.heartbeatMs);
    this.timer.unref();
    void this.tick();
  }

  stop(): void {
    this.tickAgain = false;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const t of this.deadlineTimers.values()) clearTimeout(t);
    this.deadlineTimers.clear();
  }

  /**
   * One heartbeat: exchange live rooms and loads with the store, publish presence, enforce drain
   * deadlines. Never two at once: a heartbeat slower than heartbeatMs (a slow or unreachable
   * store: each call may take commandTimeoutMs) would otherwise overlap the next, and an older
   * report could land after a newer one. Calls while one runs are folded into one more run after
   * it, which the caller's promise includes.
   */
  tick(): Promise<void> {
    // Local and at once, even while a heartbeat waits on the store: a maintenance or a passed
    // drain deadline closes its sockets now (the report without them follows with the next run).
    this.enforceDeadlines(this.now());
    if (this.ticking !== null) {
      this.tickAgain = true;
      return this.ticking;
    }
    this.ticking = this.ticks().finally(() => {
      this.ticking = null;
    });
    return this.ticking;
  }

  private async ticks(): Promise<void> {
    do {
      this.tickAgain = false;
      await this.tickOnce();
    } while (this.tickAgain);
  }

  private async tickOnce(): Promise<void> {
    // Deadlines first, so this heartbeat's report already leaves out the rooms just closed: a room
    // leaving a gone backend is placed elsewhere only once no gateway reports it live there
    // (PlaceIntent.overrideLive), and this is what ends the wait.
    this.enforceDeadlines(this.now());
    await Promise.all([this.o.placer.heartbeat(this.now()), this.publishPresence()]);
    // Again with the administrative states the heartbeat just read (a drain set by another
    // gateway whose store event was missed); those rooms leave the next report.
    this.enforceDeadlines(this.now());
    this.o.pool.sweep();
  }

  private enforceDeadlines(now: number): void {
    for (const b of this.o.pool.backends) this.enforceDeadline(b, now);
  }

  /**
   * One batched write per heartbeat, whatever the number of sockets: the socket path itself never
   * talks to the store. Only the rooms whose sockets opened or closed since the last report (a
   * delta), or null when none did, which only keeps this gateway's presence from expiring. After
   * an outage, or when the store does not hold the previous report, the whole list.
   */
  private async publishPresence(): Promise<void> {
    try {
      const changes = this.presence.take(this.now());
      const rooms = changes === null ? null : changes.full ? changes.rooms : { rooms: changes.rooms, gone: changes.gone };
      if ((await this.o.sharedData.publishPresence(rooms, this.o.presenceTtlMs)) === 'resync') {
        this.presence.resync();
        await this.o.sharedData.publishPresence(this.presence.take(this.now())?.rooms ?? [], this.o.presenceTtlMs);
      }
      if (this.presenceFailing) this.o.logger.info('presence published again: shared data store reachable');
      this.presenceFailing = false;
    } catch (err) {
      this.presence.resync();
      if (!this.presenceFailing) this.o.logger.error({ err: (err as Error).message }, 'presence not published: shared data store unreachable (routing is unaffected)');
      this.presenceFailing = true;
    }
  }

  /**
   * A drain deadline that passed, or maintenance: the backend is gone for every gateway, so its
   * remaining sockets are closed and their rooms placed elsewhere on reconnect. (A backend only
   * removed from the list keeps its sockets: a reload never drops one by itself.)
   */
  private enforceDeadline(b: Backend, now: number): void {
    if (b.liveSockets === 0 || b.removed || !b.gone(now)) return;
    const closed = this.o.tunnels.closeBackend(b.id);
    const maintenance = b.admin?.state === 'maintenance';
    this.o.events.add(maintenance ? 'maintenance' : 'drain-deadline', b.id, `closed ${closed} sockets`, now);
    this.o.logger.warn({ backend: b.id, closed }, `${maintenance ? 'maintenance' : 'drain deadline passed'}: closed the remaining sockets; their rooms are placed elsewhere`);
  }

  /** The active health checks changed their verdict on a backend. */
  healthChanged(id: string, state: 'up' | 'down', reason: string): void {
    const { o } = this;
    const b = o.pool.get(id);
    if (!b) return;
    o.pool.setHealth(id, state, reason);
    o.metrics.backendStateChanges.inc({ backend: id, state, via: 'active' });
    o.events.add(state, id, reason, this.now());
    // A backend going down is worth a warning; one that recovers is good news: info.
    if (state === 'up') {
      o.logger.info({ backend: id, state, reason }, 'backend up');
      this.back(id);
    } else o.logger.warn({ backend: id, state, reason }, 'backend down');
    if (state !== 'down') return;
    this.applyOnDown(b);
    // After applyOnDown: with onDown close, the report already leaves out the sockets it closed.
    this.reportNow();
  }

  /** health.onDown for a backend its checks marked down: its live sockets kept, or closed. */
  private applyOnDown(b: Backend): void {
    const { o } = this;
    const { id } = b;
    if (b.liveSockets === 0) return;
    // health.onDown 'keep' (default): a failed check is weaker evidence than sockets that carry
    // frames; they live until they end by themselves (a dead backend's connections fail and close
    // at once) or the operator drains the backend, and decide() keeps their rooms' new sockets
    // with them.
    if (o.onDown === 'keep') {
      o.logger.warn({ backend: id, sockets: b.liveSockets }, 'backend down by its health checks: no new rooms; its live sockets are kept (health.onDown: keep)');
      return;
    }
    // 'close': a backend that fails its checks is dead or hung for this gateway: closing its
    // sockets lets their clients reconnect once the room is re-placed.
    // Panic guard: with no other backend routable, the fault is likelier on this side (this
    // gateway overloaded, its network) than in every backend at once, and closed clients could
    // only reconnect into 503s: the sockets are kept until a backend is routable again.
    const now = this.now();
    if (!o.pool.backends.some((other) => other.id !== id && other.routable(now))) {
      o.logger.warn({ backend: id, sockets: b.liveSockets }, 'backend down but no other backend is up: its live sockets are kept');
    } else {
      const closed = o.tunnels.closeBackend(id);
      o.logger.warn({ backend: id, closed }, 'closed sockets of a down backend');
    }
  }

  /** A connection to a backend failed (passive down) or succeeded again (passive up). */
  passiveChanged(b: Backend, state: 'down' | 'up', reason: string): void {
    const { o } = this;
    o.metrics.backendStateChanges.inc({ backend: b.id, state, via: 'passive' });
    if (state === 'up') {
      o.logger.info({ backend: b.id, state, reason }, 'backend passively marked up');
      this.back(b.id);
    } else o.logger.warn({ backend: b.id, state, reason }, 'backend passively marked down');
    if (state === 'down') {
      o.health.reportFailure(b.id, reason);
      o.events.add('down', b.id, `passive: ${reason}`, this.now());
      this.reportNow();
    }
  }

  /**
   * A backend went down: a heartbeat now rather than at the next one. A dead backend's sockets
   * closed with it, but until this gateway reports its live rooms without them, the store refuses
   * every other gateway's move of those rooms (a room is moved only once no gateway reports it
   * live on the backend it leaves), and their clients get 503 room-moving for up to heartbeatMs.
   * Measured in the reconnect storm (test/chaos/reconnect-storm.test.ts, docs/performance.md):
   * with the report left to the next heartbeat, 0-65 % of a dead backend's clients were refused
   * once, each paying a step of djust's back-off. The report is the truth either way: sockets that
   * are still open (a backend only this gateway cannot reach) are reported live as before.
   */
  private reportNow(): void {
    if (this.timer !== null) void this.tick();
  }

  /** Backends joined or left the list (reload, discovery). */
  membershipChanged(added: readonly Backend[], removed: readonly Backend[]): void {
    const { o } = this;
    const now = this.now();
    for (const b of added) o.events.add('joined', b.id, b.config.url, now);
    for (const b of removed) o.events.add('removed', b.id, b.config.url, now);
    if (added.length || removed.length) {
      o.logger.info({ added: added.map((b) => b.id), removed: removed.map((b) => b.id) }, 'backend list changed');
    }
    o.health.setTargets(o.pool.backends.filter((b) => !b.removed).map((b) => ({ id: b.id, host: b.config.host, port: b.config.port, tls: b.config.tls === true })));
    for (const b of added) this.back(b.id);
  }

  /** A room was placed (new) or moved by this gateway; `cause`: by a room handoff. */
  placed(room: string, from: string | null, to: string, forced: boolean, liveMoved: boolean, cause?: MoveCause): void {
    this.o.metrics.placements.inc({ kind: from === null ? 'new' : forced ? 'forced-move' : 'move' });
    if (from === null) return;
    this.o.events.moved(from, liveMoved, cause, this.now());
    this.o.logger.info({ room, from, to, forced }, 'room placed on another backend');
  }

  /**
   * Another gateway moved a room whose sockets through this one were on `from` (they ended with
   * it): this gateway's page counts it as a live room that left `from`, as the mover's does.
   */
  movedElsewhere(room: string, from: string, to: string): void {
    this.o.events.moved(from, true);
    this.o.logger.info({ room, from, to }, 'room placed on another backend by another gateway');
  }

  /** The placement store announced a change made by any gateway. */
  storeEvent(ev: StoreEvent): void {
    if (ev.type !== 'backend-state') return;
    const kind = ev.state?.state ?? 'active';
    this.o.events.add(kind, ev.id, ev.state?.deadline ? `deadline ${new Date(ev.state.deadline).toISOString()}` : '', this.now());
    this.o.logger.warn({ backend: ev.id, state: kind, deadline: ev.state?.deadline ?? null }, 'backend administrative state changed');
    this.scheduleEnforcement(ev.id, ev.state);
    if (ev.state === null) this.back(ev.id);
  }

  /**
   * The rooms of a gone backend move only once no gateway reports them live there, and a gateway
   * stops reporting them in the heartbeat that closes them. Waiting for the next regular heartbeat
   * would keep their clients in 503s for up to heartbeatMs: maintenance runs one at once, a drain
   * deadline at the deadline itself. The regular heartbeat remains the fallback (a missed event, a
   * deadline beyond a timer's range, a state read at start).
   */
  private scheduleEnforcement(id: string, state: BackendAdminState | null): void {
    const pending = this.deadlineTimers.get(id);
    if (pending) clearTimeout(pending);
    this.deadlineTimers.delete(id);
    if (this.timer === null) return; // not started, or stopped
    if (state?.state === 'maintenance') {
      void this.tick();
      return;
    }
    if (state?.state !== 'draining' || state.deadline === null) return;
    const delay = Math.max(0, state.deadline - this.now() + 1); // +1: never a millisecond early
    if (delay > MAX_TIMER_MS) return;
    const t = setTimeout(() => {
      this.deadlineTimers.delete(id);
      void this.tick();
    }, delay);
    t.unref();
    this.deadlineTimers.set(id, t);
  }
}
