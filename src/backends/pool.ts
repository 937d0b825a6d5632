// The configured backends and what roomgate knows of each right now: passive "down" marks and
// load counters. Owns no sockets; the proxies update the counters.
import type { ResolvedBackend } from '../config/load.js';
import type { BackendView } from '../placement/decide.js';
import { buildRing, type Ring } from '../placement/ring.js';

export class Backend {
  /** Upgraded sockets currently piped to this backend. */
  liveSockets = 0;
  /** HTTP requests currently being proxied to this backend. */
  inflight = 0;
  /** Passively marked down (refused a connection) until this time (ms since epoch). */
  downUntil = 0;

  constructor(readonly config: ResolvedBackend) {}

  get id(): string {
    return this.config.id;
  }

  routable(nowMs: number): boolean {
    return this.config.weight > 0 && this.downUntil <= nowMs;
  }
}

export interface PoolEvents {
  /** A backend went from routable to passively down, or back. */
  onStateChange?(backend: Backend, state: 'down' | 'up', reason: string): void;
}

export class BackendPool {
  readonly ring: Ring;
  private readonly byId = new Map<string, Backend>();
  readonly backends: readonly Backend[];

  constructor(
    configs: readonly ResolvedBackend[],
    private readonly passiveDownMs: number,
    private readonly events: PoolEvents = {},
  ) {
    this.backends = configs.map((c) => new Backend(c));
    for (const b of this.backends) this.byId.set(b.id, b);
    this.ring = buildRing(configs.map((c) => ({ id: c.id, weight: c.weight })));
  }

  get(id: string): Backend | undefined {
    return this.byId.get(id);
  }

  /** A connection was refused or timed out: no new traffic for passiveDownMs. */
  markDown(id: string, nowMs: number, reason: string): void {
    const b = this.byId.get(id);
    if (!b) return;
    const wasRoutable = b.routable(nowMs);
    b.downUntil = nowMs + this.passiveDownMs;
    if (wasRoutable) this.events.onStateChange?.(b, 'down', reason);
  }

  /** A connection to the backend succeeded: clear a passive mark (early, or after it ran out). */
  markUp(id: string): void {
    const b = this.byId.get(id);
    if (!b || b.downUntil === 0) return;
    b.downUntil = 0;
    this.events.onStateChange?.(b, 'up', 'connected');
  }

  views(nowMs: number): BackendView[] {
    return this.backends.map((b) => ({ id: b.id, routable: b.routable(nowMs), load: b.liveSockets + b.inflight }));
  }
}
