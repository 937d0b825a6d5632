// The in-memory placement store: the embedded default for one gateway. Several handles can share
// one MemoryPlacementState (several gateways in one process, as in tests), with the same semantics
// as the Redis store: compare-and-set on epochs, busy moves refused, idle expiry.
import type {
  BackendAdminState,
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
}

interface GatewayReport {
  at: number;
  /** room -> backend */
  rooms: Map<string, string>;
}

export class MemoryPlacementState {
  readonly placements = new Map<string, Entry>();
  readonly backendStates = new Map<string, BackendAdminState>();
  readonly gateways = new Map<string, GatewayReport>();
  readonly listeners = new Set<(ev: StoreEvent) => void>();
  /** Epochs come from one counter and never repeat, even for a room whose placement expired. */
  epoch = 0;

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
    if (e && e.expiresAt <= this.now()) {
      this.state.placements.delete(room);
      return undefined;
    }
    return e;
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
    this.state.placements.delete(room);
    this.state.placements.set(room, { ...placement, expiresAt: now + this.timing.idleTtlMs, placedAt: now });
    this.evictIdle(now);
    this.state.emit({ type: 'placement', room, placement });
    return placement;
  }

  /** Extends a placement's life and moves it to the end of the eviction order. */
  private keep(room: string, e: Entry, now: number): void {
    e.expiresAt = now + this.timing.idleTtlMs;
    this.state.placements.delete(room);
    this.state.placements.set(room, e);
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
      if (e.expiresAt > now) {
        if (others && now - e.placedAt < this.timing.gatewayTtlMs) break;
        if (this.reportedLive(room, now)) {
          placements.delete(room);
          placements.set(room, e); // kept, at the end: not walked over again
          continue;
        }
        evicted++;
      }
      placements.delete(room);
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

  async heartbeat(live: readonly LiveRoom[]): Promise<void> {
    const now = this.now();
    const rooms = new Map<string, string>();
    for (const r of live) {
      if (r.sockets <= 0) continue;
      rooms.set(r.room, r.backend);
      const e = this.live(r.room);
      if (e && e.backend === r.backend) this.keep(r.room, e, now);
      // A live room without a placement is re-created from the sockets' truth.
      else if (!e) this.write(r.room, r.backend, now);
    }
    this.state.gateways.set(this.gatewayId, { at: now, rooms });
  }

  async roomsPerBackend(): Promise<Map<string, number>> {
    const now = this.now();
    const out = new Map<string, number>();
    for (const [room, e] of this.state.placements) {
      if (e.expiresAt <= now) {
        this.state.placements.delete(room);
        continue;
      }
      out.set(e.backend, (out.get(e.backend) ?? 0) + 1);
    }
    return out;
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
    this.state.gateways.delete(this.gatewayId);
  }
}
