// Turns a request into a routing decision: the room key (pure extractor; step 7 of the request
// pipeline), then the Placer (placement lookup, pure decide(), compare-and-set: the forwarding
// core's placement). Counts and logs refused keys.
import type { ClientRequest } from '../http/client-request.js';
import type { Decision } from '../placement/decide.js';
import type { Refusal } from '../http/refusals.js';
import type { Placer } from '../runtime/placer.js';
import type { BackendPool } from '../runtime/pool.js';
import type { KeyExtractor, KeyResult } from '../room/extract.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

export interface RouterOptions {
  readonly extractKey: KeyExtractor;
  readonly placer: Placer;
  readonly pool: BackendPool;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

// The "no backend" warning is logged when its reason changes, else at most this often: a 503
// storm must not become a log storm.
const UNAVAILABLE_LOG_EVERY_MS = 10_000;

export class Router {
  private lastUnavailable = '';
  private lastUnavailableLog = 0;

  constructor(private readonly o: RouterOptions) {}

  /**
   * The refusal for "no backend can take this". Why (every backend down with its reason, draining,
   * none configured) is for the operator: the log (a warning when it changes, at most every 10 s)
   * and the refusal's log line; the client is told only to retry.
   */
  noBackend(nowMs: number, retryAfterS = 1): Refusal {
    const why = this.o.pool.unavailableReason(nowMs);
    if (why !== this.lastUnavailable || nowMs - this.lastUnavailableLog >= UNAVAILABLE_LOG_EVERY_MS) {
      this.lastUnavailable = why;
      this.lastUnavailableLog = nowMs;
      this.o.logger.warn({ why }, 'no backend available: answering 503');
    }
    return { code: 'no-backend', retryAfterS, detail: why };
  }

  /** The refusal for a decision that routes nowhere: no room key (400), the room being placed, no backend. */
  refusalFor(decision: Extract<Decision, { reject: unknown }>, nowMs: number): Refusal {
    if (decision.reject === 400) return { code: 'no-room-key' };
    if (decision.reason === 'room-busy') return { code: 'room-moving', retryAfterS: decision.retryAfterS };
    return this.noBackend(nowMs, decision.retryAfterS);
  }

  /** The room key of a request (step 7 of the pipeline); refused values are counted and logged. */
  keyFor(r: ClientRequest, nowMs: number): KeyResult {
    const key = this.o.extractKey({ url: r.target, cookieHeader: r.cookie, roomHeader: r.roomHeader }, nowMs);
    if (key.rejected.length > 0) {
      for (const x of key.rejected) this.o.metrics.badRoomKeys.inc({ source: x.source, reason: x.reason });
      // Nothing of the URL or the value is logged: it may be 10 KB of garbage or a forged cookie.
      this.o.logger.debug({ rejected: key.rejected, method: r.method, urlLength: r.target.length }, 'room key refused');
    }
    return key;
  }

  /** Decide (again, e.g. after the chosen backend refused the connection and was marked down). */
  decide(room: string | null, nowMs: number): Promise<Decision> {
    return this.o.placer.resolve(room, nowMs);
  }
}
