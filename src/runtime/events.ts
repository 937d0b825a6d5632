// Recent membership and health events, each with the rooms that left its backend while it was
// that backend's latest event (how many rooms a change moved), and of those the live ones: rooms
// with sockets through this gateway on the backend when they moved or a moment before (a backend
// that dies drops its sockets before their clients reconnect and move the room). For the admin
// API and the status page.

export interface BackendEvent {
  readonly at: string;
  readonly kind: 'joined' | 'removed' | 'up' | 'down' | 'draining' | 'maintenance' | 'active' | 'drain-deadline';
  readonly backend: string;
  readonly detail: string;
  /** Rooms that left this event's backend after it (until its next event). */
  roomsMoved: number;
  /** Of those, rooms that had live sockets there (see tunnels.ts, wasLive). */
  liveRoomsMoved: number;
}

export class EventLog {
  private readonly events: BackendEvent[] = [];

  constructor(private readonly max = 100) {}

  add(kind: BackendEvent['kind'], backend: string, detail: string, nowMs = Date.now()): void {
    this.events.push({ at: new Date(nowMs).toISOString(), kind, backend, detail, roomsMoved: 0, liveRoomsMoved: 0 });
    if (this.events.length > this.max) this.events.shift();
  }

  /**
   * A room left backend `from`: counted against that backend's latest event (what made it leave),
   * not the latest event of all, which may be another backend's. Uncounted when the log holds none.
   */
  moved(from: string, live: boolean): void {
    for (let i = this.events.length - 1; i >= 0; i--) {
      const e = this.events[i] as BackendEvent;
      if (e.backend !== from) continue;
      e.roomsMoved++;
      if (live) e.liveRoomsMoved++;
      return;
    }
  }

  list(): readonly BackendEvent[] {
    return this.events;
  }
}
