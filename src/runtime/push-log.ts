// The most recent pushes and fan-outs of this gateway, for the status page and the admin API's
// events (the metrics count them; this says which room, which backend and what became of each).
// Kept apart from the backend event log: that one counts room moves against its latest event,
// and a stream of pushes would take those counts.

export interface PushEvent {
  readonly at: string;
  /** 'room': one room's push; 'fanout': every live room (with a prefix). */
  readonly call: 'room' | 'fanout';
  /** The room; for a fan-out its prefix followed by '*' ('*' for every room). */
  readonly target: string;
  /** The outcome (delivered, not-live, unavailable, refused, timeout, moved; a fan-out: sent, too-many). */
  readonly result: string;
  /** The backend that got it (a fan-out: how many backends and rooms); '' when none did. */
  readonly backend: string;
  readonly sender: string;
  /** Time the call took in the gateway (ms, rounded). */
  readonly ms: number;
  /** How many sockets the receiver handed it to, when it said (a fan-out: the sum of those said); else null. */
  readonly sockets: number | null;
}

export class PushLog {
  private readonly events: PushEvent[] = [];

  constructor(private readonly max = 100) {}

  add(e: PushEvent): void {
    this.events.push(e);
    if (this.events.length > this.max) this.events.shift();
  }

  /** Oldest first. */
  list(): readonly PushEvent[] {
    return this.events;
  }
}
