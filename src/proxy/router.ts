// Turns a request into a routing decision: the room key (pure extractor), then the Placer
// (placement lookup, pure decide(), compare-and-set). Counts and logs refused keys. Shared by the
// HTTP and the upgrade proxy.
import type { IncomingMessage } from 'node:http';
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
  /** Lower-case name of the room header. */
  readonly roomHeader: string;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export interface Routed {
  readonly key: KeyResult;
  readonly decision: Decision;
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

  key(req: IncomingMessage, nowMs: number): KeyResult {
    return this.keyOf(req.method ?? '', req.url ?? '/', req.headers.cookie, req.headers[this.o.roomHeader], nowMs);
  }

  /** The same from a head read without node:http (the byte-level page path). */
  keyOf(method: string, url: string, cookieHeader: string | undefined, roomHeader: string | string[] | undefined, nowMs: number): KeyResult {
    const key = this.o.extractKey({ url, cookieHeader, roomHeader }, nowMs);
    if (key.rejected.length > 0) {
      for (const r of key.rejected) this.o.metrics.badRoomKeys.inc({ source: r.source, reason: r.reason });
      // Nothing of the URL or the value is logged: it may be 10 KB of garbage or a forged cookie.
      this.o.logger.debug({ rejected: key.rejected, method, urlLength: url.length }, 'room key refused');
    }
    return key;
  }

  async route(req: IncomingMessage, nowMs: number): Promise<Routed> {
    const key = this.key(req, nowMs);
    return { key, decision: await this.decide(key.room, nowMs) };
  }

  /** Decide (again, e.g. after the chosen backend refused the connection and was marked down). */
  decide(room: string | null, nowMs: number): Promise<Decision> {
    return this.o.placer.resolve(room, nowMs);
  }
}
