// The rooms this process holds for roomgate: each room's placement epoch, its sockets, whether a
// handoff has it frozen, and the epoch fence (docs/ownership.md, docs/handoff.md). The app's own
// state of a room stays the app's: the table tells it when to drop it (`onDrop`: a release, or a
// newer placement of a room with no sockets here). Node runs one thing at a time, so where the
// app's state changes it checks `live(room)` and changes it in the same turn: an event is either
// in an export or refused, never both and never neither.
import { remember, REMEMBERED } from './remember.js';

/** A socket of a room: anything the release can close (a `ws` WebSocket). */
export interface RoomSocket {
  close(code?: number, reason?: string): void;
}

export interface Room<S extends RoomSocket = RoomSocket> {
  /** The placement epoch the room is held under (0: routed without a stored placement). */
  epoch: number;
  readonly sockets: Set<S>;
  /** The handoff id whose export froze the room, or null. */
  frozenBy: string | null;
}

export class RoomTable<S extends RoomSocket = RoomSocket> {
  private readonly rooms = new Map<string, Room<S>>();
  /** Room -> the highest epoch released from here. */
  private readonly fences = new Map<string, number>();

  constructor(
    private readonly onDrop: (room: string) => void = () => {},
    private readonly remembered: number = REMEMBERED,
  ) {}

  /** Whether `epoch` of `room` was handed off from here: its sockets and pushes belong elsewhere. */
  fenced(room: string, epoch: number): boolean {
    return epoch > 0 && (this.fences.get(room) ?? 0) >= epoch;
  }

  /**
   * The room under this epoch (held from now on); null when the epoch is older than the one it is
   * held under, or released from here (the fence). A newer epoch for a room with no sockets here
   * and no freeze is a new placement (it may have moved away and back): the copy here is stale,
   * dropped, and the room starts again; with sockets here the placement was written again in
   * place. Epoch 0 (roomgate's store was unreachable) is neither newer nor older.
   */
  note(room: string, epoch: number): Room<S> | null {
    if (this.fenced(room, epoch)) return null;
    const held = this.rooms.get(room);
    if (held === undefined) return this.fresh(room, epoch);
    if (epoch > 0 && epoch < held.epoch) return null;
    if (epoch > held.epoch) {
      if (held.sockets.size === 0 && held.frozenBy === null) {
        this.onDrop(room);
        return this.fresh(room, epoch);
      }
      held.epoch = epoch;
    }
    return held;
  }

  /** The room held here under at least `epoch`, without the new-placement rule (an export, an import). */
  hold(room: string, epoch: number): Room<S> {
    const held = this.rooms.get(room) ?? this.fresh(room, epoch);
    held.epoch = Math.max(held.epoch, epoch);
    return held;
  }

  private fresh(room: string, epoch: number): Room<S> {
    const r: Room<S> = { epoch, sockets: new Set(), frozenBy: null };
    this.rooms.set(room, r);
    // Bounded like every table a caller can grow: past it the oldest room nobody uses is forgotten.
    if (this.rooms.size > this.remembered) {
      for (const [name, old] of this.rooms) {
        if (name === room || old.sockets.size > 0 || old.frozenBy !== null) continue;
        this.rooms.delete(name);
        this.onDrop(name);
        break;
      }
    }
    return r;
  }

  get(room: string): Room<S> | undefined {
    return this.rooms.get(room);
  }

  /** Whether the room's state may change now: held here and not frozen by a handoff. */
  live(room: string): boolean {
    const held = this.rooms.get(room);
    return held !== undefined && held.frozenBy === null;
  }

  /** Whether a handoff has the room frozen (its events are refused with `room-moving`). */
  frozen(room: string): boolean {
    return (this.rooms.get(room)?.frozenBy ?? null) !== null;
  }

  join(room: string, socket: S): void {
    (this.rooms.get(room) ?? this.fresh(room, 0)).sockets.add(socket);
  }

  /** The socket leaves; a room with no socket, no freeze and no state of the app stays noted (its epoch). */
  leave(room: string, socket: S): void {
    this.rooms.get(room)?.sockets.delete(socket);
  }

  sockets(room: string): S[] {
    return [...(this.rooms.get(room)?.sockets ?? [])];
  }

  /** The rooms held here (noted, imported or with sockets). */
  names(): string[] {
    return [...this.rooms.keys()];
  }

  /**
   * Fences `epoch` and drops the room; its sockets (for the caller to close). The fence first, so a
   * socket that arrives while the others close is refused too.
   */
  release(room: string, epoch: number): S[] {
    remember(this.fences, room, Math.max(epoch, this.fences.get(room) ?? 0), this.remembered);
    const held = this.rooms.get(room);
    this.rooms.delete(room);
    this.onDrop(room);
    return [...(held?.sockets ?? [])];
  }
}
