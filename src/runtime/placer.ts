// Places rooms: fetches the room's placement (local cache, else the store), asks the pure
// decide(), writes new placements with compare-and-set, and keeps this gateway in step with the
// others (store events, heartbeats). With the store unreachable it keeps routing from its cache
// and the ring (degraded), and reconciles when the store is back.
import type { Logger } from '../observability/logger.js';
import { decide, type Decision } from '../placement/decide.js';
import type { LiveReport, LiveRoom, PlaceResult, PlacementRecord, PlacementStore, StoreEvent } from '../placement/store.js';
import type { MoveCause } from './events.js';
import type { BackendPool } from './pool.js';
import { RECENTLY_LIVE_MS, type LiveChanges, type LiveSockets, type LiveWatcher } from './tunnels.js';

export interface PlacerOptions {
  readonly store: PlacementStore;
  readonly pool: BackendPool;
  readonly tunnels: LiveSockets;
  readonly logger: Logger;
  readonly noRoom: 'least-loaded' | 'reject';
  readonly boundFactor: number;
  readonly loadMetric: 'rooms' | 'sockets';
  readonly retryAfterS: number;
  /** health.onDown: with 'keep', a room with live sockets here stays on its health-checks-down backend. */
  readonly onDown: 'keep' | 'close';
  /** A cached placement is trusted this long before it is read again from the store. */
  readonly cacheTtlMs: number;
  /** Cached placements of rooms without live sockets here are forgotten after this long. */
  readonly idleTtlMs: number;
  /**
   * At most this many cached placements of rooms without live sockets here (placement.maxIdleRooms):
   * beyond it the least recently placed or read are forgotten first, so a flood of distinct room
   * keys cannot grow the cache. Rooms with live sockets here and provisional placements (to be
   * handed to the store when it is back) are never forgotten.
   */
  readonly maxIdleRooms: number;
  /** Called with the number of cache entries forgotten by the cap (metrics). */
  readonly onEvicted?: (count: number) => void;
  /**
   * After the store is back, new rooms still go to their ring owner (bounded loads off) this long
   * (placement.gatewayTtlMs): other gateways may still be degraded, placing by the ring alone.
   */
  readonly recoveryRingMs: number;
  /** Called for each placement written (for metrics and the membership-event log). */
  /** `cause`: set when a room handoff moved it (its own event on the status page, not the backend's last). */
  readonly onPlaced?: (room: string, from: string | null, to: string, forced: boolean, liveMoved: boolean, cause?: MoveCause) => void;
  /**
   * Another gateway moved a room whose sockets through this gateway were on its old backend (a
   * failover's clients reconnecting through another gateway): for this gateway's event log.
   */
  readonly onMovedElsewhere?: (room: string, from: string, to: string) => void;
  /** Called when the store's availability changes. */
  readonly onDegraded?: (degraded: boolean) => void;
  /** The clock (tests pass a fake one). */
  readonly now?: () => number;
}

interface Cached {
  placement: PlacementRecord;
  at: number;
  /**
   * When the entry was last put at the end of the cache's order (remembered, or looked at by the
   * heartbeat's sweep): the order is (about) this one, oldest first, so a sweep stops at the first
   * entry looked at less than idleTtlMs ago.
   */
  checked: number;
  /** Placed while the store was unreachable: to be written when it is back. */
  provisional: boolean;
}

export interface Explained {
  readonly decision: Decision;
  readonly placement: PlacementRecord | null;
  readonly cached: boolean;
}

const MAX_ATTEMPTS = 3;
/** Rooms remembered as refused busy (see busySeen). */
const BUSY_SEEN_MAX = 10_000;

export class Placer {
  private readonly cache = new Map<string, Cached>();
  private tieBreak = 0;
  private degraded = false;
  /** Bounded loads stay off until then (see recoveryRingMs). */
  private ringOnlyUntil = 0;
  private readonly unsubscribe: () => void;
  /** Rooms this gateway is writing a placement of now: their store event is its own move. */
  private readonly placing = new Set<string>();
  /**
   * Rooms whose move the store refused as busy (another gateway reported them live on `backend`),
   * and when: such a room moved within RECENTLY_LIVE_MS was live there. Oldest first, bounded.
   */
  private readonly busySeen = new Map<string, { readonly backend: string; readonly at: number }>();
  /**
   * Rooms a handoff of this gateway moved whose old owner closes their sockets itself (release,
   * close code 1012): their placement event does not cut those sockets (see handoffMove).
   */
  private readonly held = new Set<string>();

  private readonly now: () => number;
  /** The live rooms' changes since the last heartbeat's report (null: tunnels that cannot tell). */
  private readonly watcher: LiveWatcher | null;

  constructor(private readonly o: PlacerOptions) {
    this.now = o.now ?? Date.now;
    // The whole list at least every idleTtlMs / 2: a report of changes rebuilds a placement only
    // for the rooms it names, so one lost under a live, unchanged room comes back before anyone
    // could have placed the room elsewhere for long (one whole list per 90 s by default).
    this.watcher = o.tunnels.watch?.(o.idleTtlMs / 2) ?? null;
    this.unsubscribe = o.store.subscribe((ev) => this.onStoreEvent(ev));
    this.degraded = !o.store.available;
  }

  get isDegraded(): boolean {
    return this.degraded;
  }

  /** The backend for a request of `room` (null: no key), placing the room when it needs it. */
  async resolve(room: string | null, nowMs: number): Promise<Decision> {
    const { decision: d, placement } = await this.explain(room, nowMs, true);
    if (room === null || !('route' in d)) return d;
    // The fencing token the backend gets: the epoch of the placement behind this route.
    return { ...d, epoch: placement !== null && placement.backend === d.route ? placement.epoch : 0 };
  }

  /**
   * Same as resolve, with what it was based on (admin API "where is this room and why").
   * write=false decides without placing anything.
   */
  async explain(room: string | null, nowMs: number, write: boolean): Promise<Explained> {
    if (room === null) return { decision: this.decideWith(null, null, nowMs), placement: null, cached: false };
    let { placement, cached } = await this.lookup(room, nowMs);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const d = this.decideWith(room, placement, nowMs);
      if (!('route' in d) || d.place === undefined || !write) return { decision: d, placement, cached };
      const { place } = d;
      // Our own sockets are known exactly: never move a room we hold live sockets of elsewhere,
      // unless nobody will ever close them (removed or unknown backend). At a drain deadline or
      // maintenance our heartbeat closes them first (Supervisor.tick).
      if (place.from !== null && place.from !== d.route && !place.overrideLive && this.o.tunnels.socketsInRoom(room, place.from) > 0) {
        return { decision: this.busy(), placement, cached };
      }
      if (this.degraded) return { decision: this.placeProvisionally(room, d.route, placement, nowMs, d), placement, cached };
      let result;
      this.placing.add(room);
      try {
        result = await this.o.store.place(room, d.route, place.expectedEpoch, { force: place.overrideLive });
      } catch (err) {
        this.setDegraded(true, (err as Error).message);
        return { decision: this.placeProvisionally(room, d.route, placement, nowMs, d), placement, cached };
      } finally {
        this.placing.delete(room);
      }
      if (result.ok) {
        this.remember(room, result.placement, nowMs, false);
        // A room that was live on the backend it leaves: a forced move (maintenance, drain deadline,
        // removal: another gateway may hold its sockets there, which this one cannot see), or its
        // sockets through this gateway are there now or ended a moment ago (the backend died, and
        // its clients reconnecting here are what moves the room).
        const liveMoved = place.from !== null && place.from !== d.route && (place.force || this.o.tunnels.wasLive(room, place.from) || this.busyOn(room, place.from, nowMs));
        this.busySeen.delete(room);
        if (place.from !== d.route) {
          // Count the room now: the store's figures arrive with the next heartbeat, and a burst of
          // new rooms before it must already see this one for bounded loads.
          this.o.pool.noteMove(place.from, d.route);
          this.o.onPlaced?.(room, place.from, d.route, place.force, liveMoved);
        }
        return { decision: d, placement: result.placement, cached: false };
      }
      if (result.reason === 'busy') {
        if (place.from !== null) this.noteBusy(room, place.from, nowMs);
        this.remember(room, result.current, nowMs, false);
        return { decision: this.busy(), placement: result.current, cached: false };
      }
      // Lost a race: the winner's placement decides (usually sticky to the winner's choice).
      placement = result.current;
      cached = false;
      if (placement) this.remember(room, placement, nowMs, false);
      else this.cache.delete(room);
    }
    return { decision: this.busy(), placement, cached };
  }

  /**
   * explain(write=false) from what the store says now: this gateway's cached placement of the
   * room is marked stale, so it is read again (a push that found the room's backend gone re-reads
   * it once, since another gateway may have moved the room). Provisional and degraded-mode entries
   * are trusted as they are: they are all there is while the store is unreachable.
   */
  async explainFresh(room: string, nowMs: number): Promise<Explained> {
    const c = this.cache.get(room);
    // Marked stale rather than dropped: lookup() then asks the store, and if the store does not
    // answer (this read is what finds it gone, entering degraded mode), the last known placement
    // is still there to route the room by. Dropped, the room's next request went to its ring
    // owner in degraded mode while its sockets stayed on its placed backend: a split.
    if (c && !c.provisional && !this.degraded) c.at = Number.NEGATIVE_INFINITY;
    return this.explain(room, nowMs, false);
  }

  private decideWith(room: string | null, placement: PlacementRecord | null, nowMs: number): Decision {
    this.tieBreak = (this.tieBreak + 1) % 1_000_000;
    return decide(room, {
      ring: this.o.pool.ring,
      backends: this.o.pool.views(nowMs, this.o.loadMetric),
      placement,
      liveOnPlacement: room !== null && placement !== null && this.o.tunnels.socketsInRoom(room, placement.backend) > 0,
      onDown: this.o.onDown,
      noRoom: this.o.noRoom,
      // With the store down every gateway must reach the same answer from the ring alone;
      // load figures differ between gateways, so bounded loads are off until it is back, and a
      // while longer: gateways leave degraded mode one after the other (each reconnects on its own
      // schedule, e.g. after a failover), and a room placed here by bounded loads while another
      // gateway still places it by the ring would be split until that one reconciles.
      boundFactor: this.degraded || nowMs < this.ringOnlyUntil ? 0 : this.o.boundFactor,
      tieBreak: this.tieBreak,
      retryAfterS: this.o.retryAfterS,
    });
  }

  private busy(): Decision {
    return { reject: 503, reason: 'room-busy', retryAfterS: this.o.retryAfterS };
  }

  private async lookup(room: string, nowMs: number): Promise<{ placement: PlacementRecord | null; cached: boolean }> {
    const c = this.cache.get(room);
    if (c && (c.provisional || this.degraded || nowMs - c.at < this.o.cacheTtlMs)) return { placement: c.placement, cached: true };
    if (!this.degraded) {
      try {
        const placement = await this.o.store.get(room);
        if (placement) {
          this.remember(room, placement, nowMs, false);
          return { placement, cached: false };
        }
        this.cache.delete(room);
        // The store lost the placement (Redis restarted empty) but we hold live sockets of the room:
        // they are the truth, and the next heartbeat writes it back. Never place such a room anew.
        const live = this.liveBackend(room);
        return { placement: live === null ? null : { backend: live, epoch: 0 }, cached: false };
      } catch (err) {
        this.setDegraded(true, (err as Error).message);
      }
    }
    // Degraded: the last known placement, however old, beats the ring.
    return { placement: c?.placement ?? null, cached: c !== undefined };
  }

  /** The backend this gateway holds live sockets of the room on, if any. */
  private liveBackend(room: string): string | null {
    for (const b of this.o.pool.backends) if (this.o.tunnels.socketsInRoom(room, b.id) > 0) return b.id;
    return null;
  }

  private placeProvisionally(room: string, backend: string, current: PlacementRecord | null, nowMs: number, d: Decision): Decision {
    this.remember(room, { backend, epoch: current?.epoch ?? 0 }, nowMs, true);
    return d;
  }

  private remember(room: string, placement: PlacementRecord, nowMs: number, provisional: boolean): void {
    // Deleted first so the room moves to the end: the Map's order is then least recently placed or
    // read from the store first (a cache hit does not reorder: the hot path stays two lookups, and
    // a room in use is read again every cacheTtlMs).
    this.cache.delete(room);
    this.cache.set(room, { placement, at: nowMs, checked: nowMs, provisional });
    if (this.cache.size > this.o.maxIdleRooms) this.evictIdle();
  }

  /**
   * Forgets the oldest entries of rooms without live sockets here until at most maxIdleRooms of
   * them are left. Rooms with live sockets and provisional entries met on the way are moved to the
   * end (kept), so a later call does not walk over them again.
   */
  private evictIdle(): void {
    let excess = this.cache.size - this.o.maxIdleRooms - this.o.tunnels.roomCount;
    let evicted = 0;
    for (let seen = this.cache.size; excess > 0 && seen > 0; seen--) {
      const first = this.cache.entries().next();
      if (first.done === true) break;
      const [room, c] = first.value;
      this.cache.delete(room);
      if (c.provisional || this.o.tunnels.socketsInRoom(room) > 0) {
        this.cache.set(room, c);
        continue;
      }
      evicted++;
      excess--;
    }
    if (evicted > 0) this.o.onEvicted?.(evicted);
  }

  private onStoreEvent(ev: StoreEvent): void {
    switch (ev.type) {
      case 'available':
        this.setDegraded(!ev.available, ev.available ? 'store reachable' : 'store unreachable');
        break;
      case 'placement': {
        const now = this.now();
        const prev = this.cache.get(ev.room);
        this.noteMovedElsewhere(ev.room, prev?.placement ?? null, ev.placement);
        if (ev.placement === null) this.cache.delete(ev.room);
        else if (!prev || prev.placement.epoch <= ev.placement.epoch) this.remember(ev.room, ev.placement, now, false);
        // The room moved: its sockets elsewhere reconnect and land on the new owner.
        const closed = this.held.has(ev.room) ? 0 : this.o.tunnels.closeRoom(ev.room, ev.placement?.backend ?? null);
        if (closed > 0) this.o.logger.info({ room: ev.room, backend: ev.placement?.backend, closed }, 'room moved: closed its sockets on the old backend');
        break;
      }
      case 'backend-state': {
        this.o.pool.setAdmin(ev.id, ev.state);
        break;
      }
    }
  }

  private noteBusy(room: string, backend: string, nowMs: number): void {
    this.busySeen.delete(room); // re-inserted at the end: oldest first
    this.busySeen.set(room, { backend, at: nowMs });
    if (this.busySeen.size > BUSY_SEEN_MAX) {
      const oldest = this.busySeen.keys().next();
      if (!oldest.done) this.busySeen.delete(oldest.value);
    }
  }

  /** Another gateway held the room live on `backend` a moment ago (the store said busy). */
  private busyOn(room: string, backend: string, nowMs: number): boolean {
    const b = this.busySeen.get(room);
    return b !== undefined && b.backend === backend && nowMs - b.at < RECENTLY_LIVE_MS;
  }

  /**
   * A placement event of another gateway's move (never this gateway's own: those are being written
   * now, or already cached at the new epoch) of a room this gateway had live on the backend it left.
   */
  private noteMovedElsewhere(room: string, prev: PlacementRecord | null, next: PlacementRecord | null): void {
    if (prev === null || next === null || this.placing.has(room)) return;
    if (prev.backend === next.backend || prev.epoch >= next.epoch) return;
    if (this.o.tunnels.wasLive(room, prev.backend)) this.o.onMovedElsewhere?.(room, prev.backend, next.backend);
  }

  private setDegraded(degraded: boolean, why: string): void {
    if (degraded) {
      if (this.degraded) return;
      this.degraded = true;
      this.o.onDegraded?.(true);
      this.o.logger.error({ why }, 'placement store unreachable: degraded mode, routing from cache and ring');
      return;
    }
    // Reachable again: leave degraded mode only after a heartbeat has written back what the store
    // may have lost (live rooms, drain states), so no decision reads an empty store.
    if (this.degraded) void this.recover(why);
  }

  private recovering: Promise<void> | null = null;

  private recover(why: string): Promise<void> {
    this.recovering ??= (async () => {
      try {
        // Good news (info); a failure to recover is logged at warn below.
        this.o.logger.info({ why }, 'placement store reachable again: restoring and reconciling');
        await this.restoreAdminStates();
        // Whole: the store may have lost everything while it was away.
        this.watcher?.resync();
        await this.o.store.heartbeat(this.watcher?.take(this.now())?.rooms ?? this.o.tunnels.liveRooms());
        this.ringOnlyUntil = this.now() + this.o.recoveryRingMs;
        this.degraded = false;
        this.o.onDegraded?.(false);
      } catch (err) {
        this.o.logger.warn({ err: (err as Error).message }, 'recovery interrupted: store unreachable again');
        return;
      } finally {
        this.recovering = null;
      }
      // Not awaited by recover()'s callers: a heartbeat that lands during a recovery awaits it
      // (heartbeat()), and the supervisor runs one heartbeat at a time. Reconciling takes a round
      // trip or two per room placed during the outage; awaited, it held every report of this
      // gateway back for that long, past placement.gatewayTtlMs, and the store then counted this
      // gateway (and its live rooms) as gone. One reconcile at a time, in order.
      this.reconciling = this.reconciling.then(() => this.reconcile()).then(
        () => undefined,
        (err: unknown) => this.o.logger.warn({ err: (err as Error).message }, 'reconcile failed'),
      );
    })();
    return this.recovering;
  }

  /** The reconciles after recoveries, one after the other. */
  private reconciling: Promise<void> = Promise.resolve();

  /**
   * Drain and maintenance states this gateway knows but the store lacks (it restarted empty) are
   * written back: a drain must survive a Redis restart.
   */
  private async restoreAdminStates(): Promise<void> {
    const stored = await this.o.store.backendStates();
    for (const b of this.o.pool.backends) {
      if (b.admin !== null && !stored.has(b.id)) {
        await this.o.store.setBackendState(b.id, b.admin);
        this.o.logger.warn({ backend: b.id, state: b.admin.state }, 'restored a backend state the store had lost');
      }
    }
  }

  /** Writes provisional placements made while the store was down; the store's answer wins conflicts. */
  async reconcile(): Promise<{ written: number; agreed: number; conflicts: number }> {
    let written = 0;
    let agreed = 0;
    let conflicts = 0;
    for (const [room, c] of [...this.cache]) {
      if (!c.provisional) continue;
      try {
        const current = await this.o.store.get(room);
        let winner = current;
        if (current === null) {
          const r = await this.o.store.place(room, c.placement.backend, 0, { force: false });
          if (r.ok) {
            written++;
            this.remember(room, r.placement, this.now(), false);
            continue;
          }
          winner = r.current;
        }
        if (winner === null) continue; // nothing to agree or disagree with; the next request places it
        this.remember(room, winner, this.now(), false);
        if (winner.backend === c.placement.backend) {
          agreed++;
          continue;
        }
        conflicts++;
        const closed = this.o.tunnels.closeRoom(room, winner.backend);
        this.o.logger.warn({ room, ours: c.placement.backend, theirs: winner.backend, closed }, 'reconcile: another placement won; our sockets of the room were closed');
      } catch (err) {
        this.o.logger.warn({ err: (err as Error).message }, 'reconcile interrupted: store unreachable again');
        return { written, agreed, conflicts };
      }
    }
    // Nothing provisional (the usual start): not worth a warning.
    const level = written + agreed + conflicts === 0 ? 'debug' : 'warn';
    this.o.logger[level]({ written, agreed, conflicts }, 'reconciliation done');
    return { written, agreed, conflicts };
  }

  /**
   * One heartbeat: report live rooms (keeps their placements alive, marks them busy), refresh
   * room counts per backend and administrative states, forget idle cache entries. Reports only
   * what changed since the last heartbeat (nothing when nothing did; the whole list the first time,
   * after a failure or when the store asks for it); `live`: this whole list instead.
   */
  async heartbeat(nowMs: number, live?: readonly LiveRoom[]): Promise<void> {
    let changes = this.takeChanges(live, nowMs);
    if (live !== undefined) this.watcher?.resync();
    if (changes !== null) {
      // Live rooms stay cached; rooms that just ended, idleTtlMs from now.
      const keep = (room: string): void => {
        const c = this.cache.get(room);
        if (c) c.at = Math.max(c.at, nowMs - this.o.cacheTtlMs);
      };
      for (const r of changes.rooms) keep(r.room);
      for (const room of changes.gone) keep(room);
    }
    this.sweepCache(nowMs);
    if (this.degraded) {
      // What this heartbeat would have said is not lost: recover() sends the whole list.
      this.watcher?.resync();
      if (this.o.store.available) await this.recover('store available');
      if (this.degraded) return;
      // recover() sent the whole list, taken after `changes` (it reads the drain states first):
      // sent after it, `changes` would put an older report over it (a room that opened meanwhile
      // left out, its placement expiring under live sockets; one that ended kept live for good).
      // What is left to say is what changed since that list.
      changes = this.takeChanges(live, nowMs);
    }
    try {
      const report: LiveReport = changes === null ? null : changes.full ? changes.rooms : { rooms: changes.rooms, gone: changes.gone };
      if ((await this.o.store.heartbeat(report)) === 'resync') {
        this.watcher?.resync();
        await this.o.store.heartbeat(this.watcher?.take(nowMs)?.rooms ?? this.o.tunnels.liveRooms());
      }
      const mark = this.o.pool.loadMark();
      const [rooms, states] = await Promise.all([this.o.store.roomsPerBackend(), this.o.store.backendStates()]);
      this.o.pool.applyLoads(rooms, mark);
      for (const b of this.o.pool.backends) this.o.pool.setAdmin(b.id, states.get(b.id) ?? null);
    } catch (err) {
      // The store may not have what this report said: the next one is whole.
      this.watcher?.resync();
      this.setDegraded(true, (err as Error).message);
    }
  }

  /** What this heartbeat reports: `live` whole, else the watcher's changes (null: none), else the whole list. */
  private takeChanges(live: readonly LiveRoom[] | undefined, nowMs: number): (Pick<LiveChanges, 'full' | 'gone'> & { readonly rooms: readonly LiveRoom[] }) | null {
    if (live !== undefined) return { full: true, rooms: live, gone: [] };
    return this.watcher !== null ? this.watcher.take(nowMs) : { full: true, rooms: this.o.tunnels.liveRooms(), gone: [] };
  }

  /**
   * Forgets cache entries of rooms idle here for idleTtlMs. Walks from the front of the cache's
   * order only the entries not looked at for idleTtlMs (each kept one goes to the end), so a
   * heartbeat's sweep costs the entries it may forget, not the whole cache.
   */
  private sweepCache(nowMs: number): void {
    for (let seen = this.cache.size; seen > 0; seen--) {
      const first = this.cache.entries().next();
      if (first.done === true) break;
      const [room, c] = first.value;
      if (nowMs - c.checked <= this.o.idleTtlMs) break;
      this.cache.delete(room);
      if (!c.provisional && nowMs - c.at > this.o.idleTtlMs && this.o.tunnels.socketsInRoom(room) === 0) continue;
      c.checked = nowMs;
      this.cache.set(room, c);
    }
  }

  /**
   * A room handoff's move (src/runtime/handoff.ts): compare-and-set from `from` at `expectedEpoch`
   * to `to` at the `epoch` reserved for it (the new owner already holds the room at that epoch).
   * Forced: the room is live on `from` by design. This gateway's sockets of the room on `from` are
   * left for the old owner to close (release) until unhold(room), which the handoff calls after
   * the release or after cutting them itself. Rejects when the store does (the caller reads again).
   */
  async handoffMove(room: string, from: string, to: string, expectedEpoch: number, epoch: number, trigger: MoveCause['trigger']): Promise<PlaceResult> {
    this.placing.add(room);
    this.held.add(room);
    try {
      const result = await this.o.store.place(room, to, expectedEpoch, { force: true, epoch });
      const now = this.now();
      if (result.ok) {
        this.remember(room, result.placement, now, false);
        this.o.pool.noteMove(from, to);
        this.o.onPlaced?.(room, from, to, false, this.o.tunnels.wasLive(room, from), { trigger, to });
      } else if (result.current) this.remember(room, result.current, now, false);
      return result;
    } finally {
      this.placing.delete(room);
    }
  }

  /** Another gateway's handoff holds this gateway's sockets of the room: its move's event leaves them to the release (handoff-remote.ts). */
  keepSockets(room: string): void {
    this.held.add(room);
  }

  /** The room moved by another gateway's handoff (its `end`): cached as the move's placement event would be. */
  learnMove(room: string, placement: PlacementRecord): void {
    const prev = this.cache.get(room);
    if (!prev || prev.placement.epoch <= placement.epoch) this.remember(room, placement, this.now(), false);
  }

  /** The handoff of the room is over: its placement events cut sockets on old backends again. */
  unhold(room: string): void {
    this.held.delete(room);
  }

  /** Cached placement of a room, if any (admin API). */
  cachedPlacement(room: string): PlacementRecord | null {
    return this.cache.get(room)?.placement ?? null;
  }

  close(): void {
    this.unsubscribe();
  }
}
