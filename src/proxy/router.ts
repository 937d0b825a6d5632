// Turns a request into a routing decision: the room key (pure extractor), then the Placer
// (placement lookup, pure decide(), compare-and-set). Counts and logs refused keys. Shared by the
// HTTP and the upgrade proxy.
import type { IncomingMessage } from 'node:http';
import type { Decision } from '../placement/decide.js';
import type { Placer } from '../placement/placer.js';
import type { KeyExtractor, KeyResult } from '../room/extract.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

export interface RouterOptions {
  readonly extractKey: KeyExtractor;
  readonly placer: Placer;
  /** Lower-case name of the room header. */
  readonly roomHeader: string;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export interface Routed {
  readonly key: KeyResult;
  readonly decision: Decision;
}

export class Router {
  constructor(private readonly o: RouterOptions) {}

  key(req: IncomingMessage, nowMs: number): KeyResult {
    const key = this.o.extractKey(
      { url: req.url ?? '/', cookieHeader: req.headers.cookie, roomHeader: req.headers[this.o.roomHeader] },
      nowMs,
    );
    if (key.rejected.length > 0) {
      for (const r of key.rejected) this.o.metrics.badRoomKeys.inc({ source: r.source, reason: r.reason });
      // Nothing of the URL or the value is logged: it may be 10 KB of garbage or a forged cookie.
      this.o.logger.debug({ rejected: key.rejected, method: req.method, urlLength: req.url?.length ?? 0 }, 'room key refused');
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
