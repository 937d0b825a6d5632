// Recent membership and health events, each with the rooms that left its backend while it was
// that backend's latest event (how many rooms a change moved), and of those the live ones: rooms
// with sockets through this gateway on the backend when they moved or a moment before (a backend
// that dies drops its sockets before their clients reconnect and move the room). A room handoff
// is a cause of its own: a `roomgate move` gets its own 'handoff' event, rebalancing's moves off
// a backend add up under one 'rebalance' event, and a drain with handoff's under the drain's
// event; none is credited to whatever happened to the backend last (its start-up 'joined', say).
// For the admin API and the status page.

export interface BackendEvent {
  readonly at: string;
  readonly kind: 'joined' | 'removed' | 'up' | 'down' | 'draining' | 'maintenance' | 'active' | 'drain-deadline' | 'handoff' | 'rebalance';
  readonly backend: string;
  readonly detail: string;
  /** Rooms that left this event's backend after it (until its next event). */
  roomsMoved: number;
  /** Of those, rooms that had live sockets there (see tunnels.ts, wasLive). */
  liveRoomsMoved: number;
}

/** What moved a room when a room handoff did: its trigger and the backend it went to. */
export interface MoveCause {
  readonly trigger: 'move' | 'drain' | 'rebalance';
  readonly to: string;
}

export class EventLog {
  private readonly events: BackendEvent[] = [];

  constructor(private readonly max = 100) {}

  add(kind: BackendEvent['kind'], backend: string, detail: string, nowMs = Date.now()): BackendEvent {
    const e: BackendEvent = { at: new Date(nowMs).toISOString(), kind, backend, detail, roomsMoved: 0, liveRoomsMoved: 0 };
    this.events.push(e);
    if (this.events.length > this.max) this.events.shift();
    return e;
  }

  /**
   * A room left backend `from`. Without a cause: counted against that backend's latest event (what
   * made it leave), not the latest event of all, which may be another backend's; uncounted when
   * the log holds none. With a handoff's: against the handoff's own event (causeOf).
   */
  moved(from: string, live: boolean, cause?: MoveCause, nowMs = Date.now()): void {
    const e = cause === undefined ? this.latestOf(from) : this.causeOf(from, cause, nowMs);
    if (e === undefined) return;
    e.roomsMoved++;
    if (live) e.liveRoomsMoved++;
  }

  /**
   * The event a handoff's move counts against: a drain's moves under the backend's 'draining'
   * event while it is the latest; rebalancing's under its latest 'rebalance' event to the same
   * backend, while nothing else happened to it; anything else (every `roomgate move`) a new event.
   */
  private causeOf(from: string, cause: MoveCause, nowMs: number): BackendEvent {
    const latest = this.latestOf(from);
    if (cause.trigger === 'drain' && latest?.kind === 'draining') return latest;
    const detail = cause.trigger === 'rebalance' ? `rebalancing to ${cause.to}` : cause.trigger === 'drain' ? `drain with handoff to ${cause.to}` : `roomgate move to ${cause.to}`;
    if (cause.trigger === 'rebalance' && latest?.kind === 'rebalance' && latest.detail === detail) return latest;
    return this.add(cause.trigger === 'rebalance' ? 'rebalance' : 'handoff', from, detail, nowMs);
  }

  private latestOf(backend: string): BackendEvent | undefined {
    for (let i = this.events.length - 1; i >= 0; i--) if ((this.events[i] as BackendEvent).backend === backend) return this.events[i];
    return undefined;
  }

  list(): readonly BackendEvent[] {
    return this.events;
  }
}
