// Live upgraded sockets ("tunnels"): per room and per backend, for loads, presence reports,
// closing a moved room's or a dead backend's sockets, and shutdown. Touched once when a tunnel
// opens and once when it closes; never per frame. A tunnel is anything that has a room, a
// backend and a way to be closed: the registry never sees a socket (the data plane owns those).
import type { LiveRoom } from '../placement/store.js';
import type { BackendPool } from './pool.js';
import type { TunnelHold } from './room-hold.js';

export interface Tunnel {
  readonly room: string | null;
  readonly backendId: string;
  /** Cuts both directions at once (the client sees its socket close and reconnects). */
  close(): void;
  /** What a version-2 handoff can hold of it; null (or absent): its messages cannot be held. */
  readonly messageHold?: TunnelHold | null;
}

/**
 * How long a room whose sockets on a backend all ended still counts as live there when it moves
 * off it (see TunnelRegistry.wasLive): a backend that dies closes its sockets before their
 * clients reconnect and move the room, so "live at the instant of the move" would never count
 * the rooms a failover really moved. A minute covers djust's reconnect back-off.
 */
export const RECENTLY_LIVE_MS = 60_000;
/** Rooms remembered as recently live (the oldest forgotten first): a bound, not a cache. */
const RECENTLY_LIVE_MAX = 10_000;
/** A watcher's changed rooms beyond the live rooms plus this many: its next report is whole. */
const DIRTY_SLACK = 1_000;

/** What the Placer needs of the live sockets: counts, the rooms, and closing a moved room. */
export interface LiveSockets {
  socketsInRoom(room: string, backend?: string): number;
  /** Live sockets of the room on the backend now, or ended there less than RECENTLY_LIVE_MS ago. */
  wasLive(room: string, backend: string): boolean;
  /** Rooms with at least one live socket here. */
  readonly roomCount: number;
  liveRooms(): readonly (LiveRoom & { since: number })[];
  closeRoom(room: string, keepBackend: string | null): number;
  /** A consumer of the live rooms' changes (absent: the heartbeat reports the whole list each time). */
  watch?(wholeEveryMs?: number): LiveWatcher;
}

/** A room live here on one backend, with when it became live here (presence "since"). */
export type LiveRoomSince = LiveRoom & { readonly since: number };

/**
 * What changed in the live rooms since a watcher's last report: either everything (`full`: the
 * rooms are every live room, replacing the previous report) or only the rooms that changed
 * (`rooms`: their entries now; `gone`: rooms with no live socket left here).
 */
export interface LiveChanges {
  readonly full: boolean;
  readonly rooms: readonly LiveRoomSince[];
  readonly gone: readonly string[];
}

/**
 * One consumer of the live rooms (the placement heartbeat, the presence report): what changed
 * since it last took them. Its cost follows the changes, never the number of live rooms, except
 * for a full report (the first one, after resync(), and at least every `wholeEveryMs`).
 */
export class LiveWatcher {
  /** Rooms changed since the last take(); null: the next take() is a full report. */
  dirty: Set<string> | null = null;
  /** The registry's version at the last take(). */
  private seen = -1;
  /** When the last full report was taken. */
  private wholeAt = 0;

  /**
   * `wholeEveryMs`: a full report at least this often, whatever changed. A report of changes
   * names only the rooms that changed, so what the store lost without telling (a write lost in a
   * failover, the connection kept; a placement an older gateway let expire) would stay lost as
   * long as its room did not change: the whole list puts it back.
   */
  constructor(
    private readonly registry: TunnelRegistry,
    private readonly wholeEveryMs = Infinity,
  ) {}

  /**
   * The changes since the last call, or null when nothing changed (the registry's version is the
   * one seen last time): an unchanged report. The first call, the first after resync(), and the
   * first `wholeEveryMs` after the last full one are full.
   */
  take(nowMs: number): LiveChanges | null {
    if (this.dirty !== null && nowMs - this.wholeAt >= this.wholeEveryMs) this.dirty = null;
    const version = this.registry.version;
    if (this.dirty !== null && this.seen === version) return null;
    this.seen = version;
    if (this.dirty === null) {
      this.dirty = new Set();
      this.wholeAt = nowMs;
      return { full: true, rooms: this.registry.liveRooms(), gone: [] };
    }
    const rooms: LiveRoomSince[] = [];
    const gone: string[] = [];
    for (const room of this.dirty) if (this.registry.roomEntries(room, rooms) === 0) gone.push(room);
    this.dirty.clear();
    return { full: false, rooms, gone };
  }

  /** The consumer lost what it sent (a failed call, a store that lost its data): the next take() is full. */
  resync(): void {
    this.dirty = null;
  }
}

export class TunnelRegistry implements LiveSockets {
  constructor(
    private readonly pool: BackendPool,
    private readonly now: () => number = Date.now,
  ) {}

  private readonly all = new Set<Tunnel>();
  private readonly byRoom = new Map<string, Set<Tunnel>>();
  /** When this gateway's first live socket of each room opened (presence "since"). */
  private readonly roomSince = new Map<string, number>();
  /** Room -> the backend its last sockets there ended on, and when (oldest first). */
  private readonly ended = new Map<string, { readonly backend: string; readonly at: number }>();
  private readonly watchers: LiveWatcher[] = [];
  private liveVersion = 0;

  /**
   * Bumped on every change of the live rooms (a socket of a room opened or closed): a report
   * whose version did not move is unchanged and is not sent again.
   */
  get version(): number {
    return this.liveVersion;
  }

  /** A new consumer of the live rooms' changes (its first take() is a full report; one at least every `wholeEveryMs`). */
  watch(wholeEveryMs?: number): LiveWatcher {
    const w = new LiveWatcher(this, wholeEveryMs);
    this.watchers.push(w);
    return w;
  }

  private changed(room: string): void {
    this.liveVersion++;
    for (const w of this.watchers) {
      if (w.dirty === null) continue;
      w.dirty.add(room);
      // More changed rooms than live ones (a consumer that has not reported for long, under churn):
      // the whole list is the cheaper report, and the set stops growing.
      if (w.dirty.size > this.byRoom.size + DIRTY_SLACK) w.dirty = null;
    }
  }

  get size(): number {
    return this.all.size;
  }

  get roomCount(): number {
    return this.byRoom.size;
  }

  add(t: Tunnel): void {
    if (this.all.has(t)) return;
    this.all.add(t);
    this.pool.socketOpened(t.backendId);
    if (t.room === null) return;
    let set = this.byRoom.get(t.room);
    if (!set) {
      this.byRoom.set(t.room, (set = new Set()));
      this.roomSince.set(t.room, this.now());
    }
    set.add(t);
    this.changed(t.room);
  }

  remove(t: Tunnel): void {
    if (!this.all.delete(t)) return;
    this.pool.socketClosed(t.backendId);
    if (t.room === null) return;
    const set = this.byRoom.get(t.room);
    set?.delete(t);
    if (set !== undefined && !this.hasOn(set, t.backendId)) this.noteEnded(t.room, t.backendId);
    if (set?.size === 0) {
      this.byRoom.delete(t.room);
      this.roomSince.delete(t.room);
    }
    this.changed(t.room);
  }

  /** Live sockets of a room through this gateway, on one backend or (backend omitted) any. */
  socketsInRoom(room: string, backend?: string): number {
    const set = this.byRoom.get(room);
    if (!set) return 0;
    if (backend === undefined) return set.size;
    let n = 0;
    for (const t of set) if (t.backendId === backend) n++;
    return n;
  }

  wasLive(room: string, backend: string): boolean {
    if (this.socketsInRoom(room, backend) > 0) return true;
    const e = this.ended.get(room);
    return e !== undefined && e.backend === backend && this.now() - e.at < RECENTLY_LIVE_MS;
  }

  private hasOn(set: ReadonlySet<Tunnel>, backend: string): boolean {
    for (const t of set) if (t.backendId === backend) return true;
    return false;
  }

  /** Once per room and backend, when its last socket there ends: never per frame. */
  private noteEnded(room: string, backend: string): void {
    this.ended.delete(room); // re-inserted at the end: the map stays oldest first
    this.ended.set(room, { backend, at: this.now() });
    if (this.ended.size > RECENTLY_LIVE_MAX) {
      const oldest = this.ended.keys().next();
      if (!oldest.done) this.ended.delete(oldest.value);
    }
  }

  /** The rooms this gateway holds live sockets of (for the heartbeats), with when each became live here. */
  liveRooms(): LiveRoomSince[] {
    const out: LiveRoomSince[] = [];
    for (const room of this.byRoom.keys()) this.roomEntries(room, out);
    return out;
  }

  /** Appends a room's entries (one per backend it is live on here) to `out`; returns how many. */
  roomEntries(room: string, out: LiveRoomSince[]): number {
    const set = this.byRoom.get(room);
    if (set === undefined || set.size === 0) return 0;
    const since = this.roomSince.get(room) ?? this.now();
    let first: string | undefined;
    let n = 0;
    for (const t of set) {
      // The usual room is on one backend: counted without a Map.
      if (first === undefined || t.backendId === first) {
        first = t.backendId;
        n++;
        continue;
      }
      const per = new Map<string, number>();
      for (const u of set) per.set(u.backendId, (per.get(u.backendId) ?? 0) + 1);
      for (const [backend, sockets] of per) out.push({ room, backend, sockets, since });
      return per.size;
    }
    out.push({ room, backend: first as string, sockets: n, since });
    return 1;
  }

  /**
   * Closes a room's sockets that are not on `keepBackend` (the room moved: its clients reconnect
   * and land on the new owner). Returns how many were closed.
   */
  closeRoom(room: string, keepBackend: string | null): number {
    const set = this.byRoom.get(room);
    if (!set) return 0;
    let n = 0;
    for (const t of [...set]) {
      if (t.backendId === keepBackend) continue;
      this.close(t);
      n++;
    }
    return n;
  }

  /**
   * A room's sockets on `backend` whose client messages can be held (version-2 handoff), and how
   * many of its sockets there cannot be (opened before the backend's hello was known, HTTP/2).
   */
  holdable(room: string, backend: string): { holds: TunnelHold[]; others: number } {
    const holds: TunnelHold[] = [];
    let others = 0;
    for (const t of this.byRoom.get(room) ?? []) {
      if (t.backendId !== backend) continue;
      if (t.messageHold) holds.push(t.messageHold);
      else others++;
    }
    return { holds, others };
  }

  /** Closes every socket on a backend (it is down or its drain deadline passed). */
  closeBackend(backendId: string): number {
    let n = 0;
    for (const t of [...this.all]) {
      if (t.backendId !== backendId) continue;
      this.close(t);
      n++;
    }
    return n;
  }

  // Both directions are cut at once: the client sees its socket close (djust reconnects on any
  // close) and nothing more reaches the old backend. Counted out now, not on the close event,
  // so a decision made right after sees the room empty.
  private close(t: Tunnel): void {
    this.remove(t);
    t.close();
  }

  /** Closes every tunnel at once (end of the shutdown grace period). */
  destroyAll(): void {
    for (const t of [...this.all]) this.close(t);
  }
}
