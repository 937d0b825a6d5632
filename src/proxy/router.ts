// Turns a request into a routing decision: room key (pure extractor) + backend views + the pure
// decide(). Counts and logs refused keys. Shared by the HTTP and the upgrade proxy.
import type { IncomingMessage } from 'node:http';
import type { BackendPool } from '../backends/pool.js';
import { decide, type Decision } from '../placement/decide.js';
import type { KeyExtractor, KeyResult } from '../room/extract.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

export interface RouterOptions {
  readonly extractKey: KeyExtractor;
  readonly pool: BackendPool;
  /** Lower-case name of the room header. */
  readonly roomHeader: string;
  readonly noRoom: 'least-loaded' | 'reject';
  readonly retryAfterS: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export interface Routed {
  readonly key: KeyResult;
  readonly decision: Decision;
}

export class Router {
  private tieBreak = 0;

  constructor(private readonly o: RouterOptions) {}

  route(req: IncomingMessage, nowMs: number): Routed {
    const key = this.o.extractKey(
      { url: req.url ?? '/', cookieHeader: req.headers.cookie, roomHeader: req.headers[this.o.roomHeader] },
      nowMs,
    );
    if (key.rejected.length > 0) {
      for (const r of key.rejected) this.o.metrics.badRoomKeys.inc({ source: r.source, reason: r.reason });
      // The raw value is not logged: it may be 10 KB of garbage or someone's forged cookie.
      this.o.logger.debug({ rejected: key.rejected, url: (req.url ?? '').slice(0, 200) }, 'room key refused');
    }
    return { key, decision: this.decide(key.room, nowMs) };
  }

  /** Decide again, e.g. after the chosen backend refused the connection and was marked down. */
  decide(room: string | null, nowMs: number): Decision {
    const { pool } = this.o;
    this.tieBreak = (this.tieBreak + 1) % 1_000_000;
    return decide(room, {
      ring: pool.ring,
      backends: pool.views(nowMs),
      noRoom: this.o.noRoom,
      tieBreak: this.tieBreak,
      retryAfterS: this.o.retryAfterS,
    });
  }
}
