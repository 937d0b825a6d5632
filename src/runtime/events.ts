// Recent membership and health events, each with the rooms placed anew while it was the latest
// event (how many rooms a change moved). Live rooms moved should be 0 except for forced moves
// (maintenance, removal, drain deadline). For the admin API and the status page.

export interface BackendEvent {
  readonly at: string;
  readonly kind: 'joined' | 'removed' | 'up' | 'down' | 'draining' | 'maintenance' | 'active' | 'drain-deadline';
  readonly backend: string;
  readonly detail: string;
  /** Rooms that changed backend after this event (until the next one). */
  roomsMoved: number;
  /** Of those, rooms that had live sockets (forced moves only). */
  liveRoomsMoved: number;
}

export class EventLog {
  private readonly events: BackendEvent[] = [];

  constructor(private readonly max = 100) {}

  add(kind: BackendEvent['kind'], backend: string, detail: string, nowMs = Date.now()): void {
    this.events.push({ at: new Date(nowMs).toISOString(), kind, backend, detail, roomsMoved: 0, liveRoomsMoved: 0 });
    if (this.events.length > this.max) this.events.shift();
  }

  /** A room changed backend: counted against the latest event. */
  moved(live: boolean): void {
    const last = this.events[this.events.length - 1];
    if (!last) return;
    last.roomsMoved++;
    if (live) last.liveRoomsMoved++;
  }

  list(): readonly BackendEvent[] {
    return this.events;
  }
}
