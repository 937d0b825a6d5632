// The runner's half of a version-2 handoff's hold on the OTHER gateways (docs/handoff.md, "Hold"):
// before the export, the gateway that runs the handoff publishes `hold` on the shared-data store's
// channel and waits, at most handoff.timeoutMs, for as many `held` answers as there are other
// gateways whose presence counts now (every gateway publishes presence each heartbeat, rooms or
// none: a room list can lag a heartbeat, the set of gateways does not, so no gateway that may have
// just got a socket of the room is left out). Answers are counted, not matched by name: a store
// names a gateway its own way (a cluster worker's differs from its gateway id). Past the bound,
// `late` names the gateways that answered; every other one cuts its sockets of the room, and the
// handoff goes on. After the move or a rollback, `end` says what to do with what was
// held. The store's channel is the one the cache purge takes: Redis pub/sub, the cluster's IPC,
// or in memory (one gateway: nobody else answers, the same code runs).
import type { Logger } from '../observability/logger.js';
import type { HandoffSignal, SharedDataStore } from '../shared-data/store.js';

export interface OthersHeld {
  /** Gateways asked (every live gateway but this one). */
  readonly asked: number;
  /** Gateways that answered `held` in time, and the sockets they hold together. */
  readonly held: number;
  readonly sockets: number;
  /** Answers missing at the bound (the gateways that did not answer cut their sockets of the room). */
  readonly late: number;
}

export interface HoldAskOptions {
  readonly gatewayId: string;
  readonly store: Pick<SharedDataStore, 'publishHandoff' | 'otherGateways' | 'subscribe'>;
  /** handoff.timeoutMs: the bound on the wait for every answer. */
  readonly timeoutMs: number;
  readonly logger: Logger;
}

interface Waiting {
  /** Infinity until the live gateways are counted. */
  expected: number;
  /** The gateways that answered, by the id they sign with. */
  readonly answered: Set<string>;
  sockets: number;
  readonly done: () => void;
}

export class HoldAsk {
  private readonly waiting = new Map<string, Waiting>();
  private readonly unsubscribe: () => void;

  constructor(private readonly o: HoldAskOptions) {
    this.unsubscribe = o.store.subscribe((ev) => {
      if (ev.type === 'handoff' && ev.signal.kind === 'held') this.onHeld(ev.signal.id, ev.signal.gateway, ev.signal.sockets);
    });
  }

  /**
   * Asks every other gateway to hold its sockets of `room` on `from`; resolves once all did, or at
   * the bound. The `hold` is published while the live gateways are counted (not after: one store
   * round trip less on the handoff's path); answers that come before the count are kept.
   */
  async ask(id: string, room: string, from: string, to: string): Promise<OthersHeld> {
    const { o } = this;
    let done = (): void => undefined;
    const finished = new Promise<void>((resolve) => (done = resolve));
    const w: Waiting = { expected: Infinity, answered: new Set(), sockets: 0, done };
    this.waiting.set(id, w);
    const timer = setTimeout(done, o.timeoutMs);
    try {
      // Published even when no other gateway is live: one that has not reported yet holds too.
      const [others] = await Promise.all([
        o.store.otherGateways().then(
          (g) => g.length,
          (err: Error) => err,
        ),
        this.publish({ kind: 'hold', id, room, from, to, gateway: o.gatewayId }),
      ]);
      if (others instanceof Error) {
        // Nobody can be counted: the answers are not waited for, the gateways that heard the hold
        // settle at the end (or at their own bound), the others' sockets get version 1's behaviour.
        o.logger.warn({ handoff: id, room, err: others.message }, 'handoff hold: the shared-data store cannot say which gateways to ask; only this one holds');
        return { asked: 0, held: 0, sockets: 0, late: 0 };
      }
      w.expected = others;
      if (w.answered.size < others) await finished;
    } finally {
      clearTimeout(timer);
      this.waiting.delete(id);
    }
    const expected = w.expected;
    const late = Math.max(0, expected - w.answered.size);
    if (late > 0) {
      o.logger.warn({ handoff: id, room, late, answered: [...w.answered] }, 'handoff hold: gateways did not answer in time; they cut their sockets of the room');
      await this.publish({ kind: 'late', id, room, gateway: o.gatewayId, answered: [...w.answered] });
    }
    return { asked: expected, held: w.answered.size, sockets: w.sockets, late };
  }

  /** The handoff is over: what every holding gateway does with what it held. */
  end(id: string, room: string, outcome: 'moved' | 'flush' | 'lost', to: string, epoch: number): Promise<void> {
    return this.publish({ kind: 'end', id, room, outcome, to, epoch });
  }

  close(): void {
    this.unsubscribe();
    for (const w of this.waiting.values()) w.done();
  }

  private onHeld(id: string, gateway: string, sockets: number): void {
    const w = this.waiting.get(id);
    if (w === undefined || gateway === this.o.gatewayId || w.answered.has(gateway)) return;
    w.answered.add(gateway);
    w.sockets += sockets;
    if (w.answered.size >= w.expected) w.done();
  }

  /** A failed publish is logged: the gateways that miss it fall back on their own bound. */
  private async publish(signal: HandoffSignal): Promise<void> {
    try {
      await this.o.store.publishHandoff(signal);
    } catch (err) {
      this.o.logger.warn({ handoff: signal.id, signal: signal.kind, err: (err as Error).message }, 'handoff hold: could not publish to the other gateways');
    }
  }
}
