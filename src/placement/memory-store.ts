// The in-memory placement store: the embedded default for one gateway. Several handles can share
// one MemoryPlacementState (several gateways in one process, as in tests), with the same semantics
// as the Redis store: compare-and-set on epochs, busy moves refused, idle expiry.
//
// Liveness follows changes: a heartbeat touches only the rooms its report names (a delta), and an
// unchanged report only stamps the gateway alive. A placement past its expiry is still live while
// a gateway's report holds the room on its backend and that gateway's last stamp is less than
// idleTtlMs old (checked when the placement is read): the same expiry as refreshing every live
// room on every heartbeat, without the walk over them.
import { isFullReport } from './store.js';
import type {
  BackendAdminState,
  HeartbeatAnswer,
  LiveReport,
  LiveRoom,
  PlaceOptions,
  PlaceResult,
  PlacementRecord,
  PlacementStore,
  StoreEvent,
  StoreTiming,
} from './store.js';

interface Entry {
  backend: string;
  epoch: number;
  expiresAt: number;
  placedAt: number;
  /**
   * When roomsPerBackend() looks at the entry again (its expiry when it was last put at the end of
   * the Map's order): the order is (about) this one, earliest first, so the walk for expired
   * entries stops at the first entry not due.
   */
  checkAt: number;
}

interface GatewayReport {
  /** The gateway's last heartbeat (its liveness stamp): keeps every room of its report live. */
  at: number;
  /** room -> backend */
  rooms: Map<string, string>;
}

export class MemoryPlacementState {
  /** Room -> placement, least recently placed or kept alive first (the eviction order). */
  readonly placements = new Map<string, Entry>();
  /** Placements per backend (expired ones included until roomsPerBackend() or a read drops them). */
  readonly counts = new Map<string, number>();
  readonly backendStates = new Map<string, BackendAdminState>();
  readonly gateways = new Map<string, GatewayReport>();
  readonly listeners = new Set<(ev: StoreEvent) => void>();
  /** Epochs come from one counter and never repeat, even for a room whose placement expired. */
  epoch = 0;

  /** Puts (or replaces) a room's placement at the end of the order, counted. */
  put(room: string, e: Entry): void {
    this.delete(room);
    this.placements.set(room, e);
    this.counts.set(e.backend, (this.counts.get(e.backend) ?? 0) + 1);
  }

  delete(room: string): void {
    const e = this.placements.get(room);
    if (e === undefined) return;
    this.placements.delete(room);
    const n = (this.counts.get(e.backend) ?? 1) - 1;
    if (n > 0) this.counts.set(e.backend, n);
    else this.counts.delete(e.backend);
  }

  emit(ev: StoreEvent): void {
    for (const l of this.listeners) l(ev);
  }
}

export class MemoryPlacementStore implements PlacementStore {
  readonly kind = 'memory' as const;

  /** Nothing to connect: in memory. */
  connect(): Promise<void> {
    return Promise.resolve();
  }
  readonly available = true;
  private readonly own = new Set<(ev: StoreEvent) => void>();

  constructor(
    private readonly gatewayId: string,
    private readonly timing: StoreTiming,
    private readonly state: MemoryPlacementState = new MemoryPlacementState(),
    private readonly now: () => number = Date.now,
  ) {}

  private live(room: string): Entry | undefined {
    const e = this.state.placements.get(room);
    if (e && this.expired(room, e, this.now())) {
      this.drop(room);
      return undefined;
    }
    return e;
  }

  /**
   * Past its expiry and no gateway's report keeps it: a report holding the room on the placement's
   * backend extends it to idleTtlMs after that gateway's last stamp (written into the entry).
   */
  private expired(room: string, e: Entry, now: number): boolean {
    if (e.expiresAt > now) return false;
    for (const report of this.state.gateways.values()) {
      if (report.rooms.get(room) === e.backend) e.expiresAt = Math.max(e.expiresAt, report.at + this.timing.idleTtlMs);
    }
    return e.expiresAt <= now;
  }

  private drop(room: string): void {
    this.state.delete(room);
  }

  async get(room: string): Promise<PlacementRecord | null> {
    const e = this.live(room);
    return e ? { backend: e.backend, epoch: e.epoch } : null;
  }

  async place(room: string, backend: string, expectedEpoch: number, opts: PlaceOptions): Promise<PlaceResult> {
    const now = this.now();
    const cur = this.live(room);
    const curEpoch = cur?.epoch ?? 0;
    if (curEpoch !== expectedEpoch) return { ok: false, reason: 'lost-race', current: cur ? { backend: cur.backend, epoch: cur.epoch } : null };
    // With another gateway alive, a placement younger than one gateway TTL may have sockets there
    // that no heartbeat has reported yet. (Alone, this gateway knows its own sockets exactly.)
    const young = cur !== undefined && now - cur.placedAt < this.timing.gatewayTtlMs && this.othersAlive(now);
    if (cur && cur.backend !== backend && !opts.force && (young || this.busyElsewhere(room, cur.backend, now))) {
      return { ok: false, reason: 'busy', current: { backend: cur.backend, epoch: cur.epoch } };
    }
    if (cur && cur.backend === backend) {
      this.keep(room, cur, now);
      return { ok: true, placement: { backend, epoch: cur.epoch } };
    }
    if (!cur) {
      // No placement, yet another gateway reports live sockets of the room (its placement expired
      // under a stalled heartbeat): adopt that backend rather than split the room.
      const live = this.liveElsewhere(room, now);
      if (live !== undefined && live !== backend) return { ok: false, reason: 'lost-race', current: this.write(room, live, now) };
    }
    return { ok: true, placement: this.write(room, backend, now, opts.epoch) };
  }

  async reserveEpoch(): Promise<number> {
    return ++this.state.epoch;
  }

  private write(room: string, backend: string, now: number, epoch?: number): PlacementRecord {
    const placement = { backend, epoch: epoch ?? ++this.state.epoch };
    const expiresAt = now + this.timing.idleTtlMs;
    this.state.put(room, { ...placement, expiresAt, placedAt: now, checkAt: expiresAt });
    this.evictIdle(now);
    this.state.emit({ type: 'placement', room, placement });
    return placement;
  }

  /** Extends a placement's life and moves it to the end of the eviction order. */
  private keep(room: string, e: Entry, now: number): void {
    e.expiresAt = Math.max(e.expiresAt, now + this.timing.idleTtlMs);
    e.checkAt = e.expiresAt;
    this.state.put(room, e);
  }

  /**
   * maxIdleRooms: drops expired placements and the least recently kept idle ones from the front
   * of the Map's order until the idle ones fit. Stops at a young placement (see StoreTiming).
   */
  private evictIdle(now: number): void {
    const max = this.timing.maxIdleRooms;
    const { placements } = this.state;
    if (max === undefined || placements.size <= max) return;
    let live = 0;
    for (const [id, report] of this.state.gateways) if (report.at + this.timing.gatewayTtlMs > now || id === this.gatewayId) live += report.rooms.size;
    let excess = placements.size - max - live;
    let evicted = 0;
    const others = this.othersAlive(now);
    for (let seen = placements.size; excess > 0 && seen > 0; seen--) {
      const first = placements.entries().next();
      if (first.done === true) break;
      const [room, e] = first.value;
      if (!this.expired(room, e, now)) {
        if (others && now - e.placedAt < this.timing.gatewayTtlMs) break;
        if (this.reportedLive(room, now)) {
          this.state.put(room, e); // kept, at the end: not walked over again
          continue;
        }
        evicted++;
      }
      this.drop(room);
      excess--;
    }
    if (evicted > 0) this.timing.onEvicted?.(evicted);
  }

  private reportedLive(room: string, now: number): boolean {
    for (const [id, report] of this.state.gateways) {
      if ((id === this.gatewayId || report.at + this.timing.gatewayTtlMs > now) && report.rooms.has(room)) return true;
    }
    return false;
  }

  private liveElsewhere(room: string, now: number): string | undefined {
    for (const [id, report] of this.state.gateways) {
      if (id === this.gatewayId || report.at + this.timing.gatewayTtlMs <= now) continue;
      const b = report.rooms.get(room);
      if (b !== undefined) return b;
    }
    return undefined;
  }

  private othersAlive(now: number): boolean {
    for (const [id, report] of this.state.gateways) if (id !== this.gatewayId && report.at + this.timing.gatewayTtlMs > now) return true;
    return false;
  }

  private busyElsewhere(room: string, backend: string, now: number): boolean {
    for (const [id, report] of this.state.gateways) {
      if (id === this.gatewayId || report.at + this.timing.gatewayTtlMs <= now) continue;
      if (report.rooms.get(room) === backend) return true;
    }
    return false;
  }

  async heartbeat(report: LiveReport): Promise<HeartbeatAnswer> {
    const now = this.now();
    const prev = this.state.gateways.get(this.gatewayId);
    if (isFullReport(report)) {
      const rooms = new Map<string, string>();
      for (const r of report) {
        if (r.sockets <= 0) continue;
        rooms.set(r.room, r.backend);
        this.touch(r.room, r.backend, now);
      }
      // Rooms that left the report stay placed idleTtlMs after they were last reported live.
      if (prev) for (const [room, backend] of prev.rooms) if (rooms.get(room) !== backend) this.release(room, backend, prev.at);
      this.state.gateways.set(this.gatewayId, { at: now, rooms });
      return 'ok';
    }
    // A delta or an unchanged report needs the previous report, still counting: a gateway silent
    // for longer than gatewayTtlMs no longer counted, and after idleTtlMs its placements expired.
    if (!prev || prev.at + Math.min(this.timing.gatewayTtlMs, this.timing.idleTtlMs) <= now) return 'resync';
    if (report !== null) {
      for (const room of report.gone) {
        const backend = prev.rooms.get(room);
        if (backend === undefined) continue;
        prev.rooms.delete(room);
        this.release(room, backend, now);
      }
      for (const r of report.rooms) {
        if (r.sockets <= 0) continue;
        const before = prev.rooms.get(r.room);
        if (before !== undefined && before !== r.backend) this.release(r.room, before, now);
        prev.rooms.set(r.room, r.backend);
        this.touch(r.room, r.backend, now);
      }
    }
    prev.at = now;
    return 'ok';
  }

  /** A room reported live on `backend`: its placement kept alive, or re-created from the sockets' truth. */
  private touch(room: string, backend: string, now: number): void {
    const e = this.live(room);
    if (e && e.backend === backend) this.keep(room, e, now);
    else if (!e) this.write(room, backend, now);
  }

  /** A room no longer reported live on `backend` (last so at `at`): its placement expires idleTtlMs after that. */
  private release(room: string, backend: string, at: number): void {
    const e = this.state.placements.get(room);
    if (e && e.backend === backend) e.expiresAt = Math.max(e.expiresAt, at + this.timing.idleTtlMs);
  }

  /**
   * Placed, unexpired rooms per backend: the counts kept on every write, after dropping the
   * placements that expired. Walks only the entries due (see Entry.checkAt): a live room's is
   * pushed idleTtlMs on each time, so a heartbeat's call costs what expired, not every room.
   */
  async roomsPerBackend(): Promise<Map<string, number>> {
    const now = this.now();
    const { placements } = this.state;
    for (let seen = placements.size; seen > 0; seen--) {
      const first = placements.entries().next();
      if (first.done === true) break;
      const [room, e] = first.value;
      if (e.checkAt > now) break;
      if (this.expired(room, e, now)) {
        this.state.delete(room);
        continue;
      }
      e.checkAt = e.expiresAt;
      this.state.put(room, e);
    }
    return new Map(this.state.counts);
  }

  async setBackendState(id: string, state: BackendAdminState | null): Promise<void> {
    if (state === null) this.state.backendStates.delete(id);
    else this.state.backendStates.set(id, state);
    this.state.emit({ type: 'backend-state', id, state });
  }

  async backendStates(): Promise<Map<string, BackendAdminState>> {
    return new Map(this.state.backendStates);
  }

  subscribe(listener: (ev: StoreEvent) => void): () => void {
    this.state.listeners.add(listener);
    this.own.add(listener);
    return () => {
      this.state.listeners.delete(listener);
      this.own.delete(listener);
    };
  }

  async close(): Promise<void> {
    for (const l of this.own) this.state.listeners.delete(l);
    this.own.clear();
    const report = this.state.gateways.get(this.gatewayId);
    // Its rooms stay placed idleTtlMs after its last report, as if it had stopped heartbeating.
    if (report) for (const [room, backend] of report.rooms) this.release(room, backend, report.at);
    this.state.gateways.delete(this.gatewayId);
  }
}
