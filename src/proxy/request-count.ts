// What both page paths (src/proxy/http-proxy.ts on node:http, src/proxy/lean-pages.ts on raw
// sockets) are given, and the log line of an answer the client stopped taking. The accounting of
// one proxied request is the forwarding core's (src/forward/request-count.ts).
import type { Forwarder } from '../forward/forwarder.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Backend, BackendPool } from '../runtime/pool.js';
import type { ClientRequest } from '../http/client-request.js';
import { locationTarget, type LocationTarget, type PublicOrigin } from '../http/location.js';
import type { Forwarding } from '../forward/forwarded.js';
import type { PinTagsFor } from '../http/pin-inject.js';
import type { PageCookies } from './page-cookie.js';
import type { Refuser } from './refuser.js';

export interface PagePathOptions {
  /** The forwarding core every attempt goes through (placement, passive health, retries). */
  readonly forwarder: Forwarder;
  readonly pool: BackendPool;
  readonly forwarding: Forwarding;
  readonly connectTimeoutMs: number;
  readonly responseTimeoutMs: number;
  readonly maxIdleSocketsPerBackend: number;
  /** An idle pooled connection is closed after this: before the backend closes it under a request. */
  readonly backendIdleTimeoutMs: number;
  /** An answer the client takes nothing of for this long is cut, with its backend connection; 0 = never. */
  readonly clientWriteTimeoutMs: number;
  /** The room cookie page answers set (cookie.setOnPages). */
  readonly cookies: PageCookies;
  /** roomgate's own answers (src/http/refusals.ts): rendered, logged and counted. */
  readonly refuser: Refuser;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** proxy.rewriteLocation: a Location or Refresh naming the backend's own address points at the public origin. */
  readonly rewriteLocation: boolean;
  /** room.pinInject: the pin's tags for a page of a room (src/http/pin-inject.ts), or null when off. */
  readonly pinTags?: PinTagsFor | null;
}

/** The pin's tags an answer to `r` of room `room` may get (room.pinInject: a GET with a room), or null. */
export function pinTagsOf(o: Pick<PagePathOptions, 'pinTags'>, r: ClientRequest, room: string | null): (() => Buffer) | null {
  const tags = o.pinTags ?? null;
  if (tags === null || room === null || r.method !== 'GET') return null;
  return () => tags(room);
}

/** Where proxy.rewriteLocation points an answer to `r` (src/http/location.ts), or null when it is off. */
export function publicOrigin(o: Pick<PagePathOptions, 'rewriteLocation' | 'forwarding'>, r: ClientRequest): PublicOrigin | null {
  if (!o.rewriteLocation) return null;
  // The scheme the client used, as the backend is told it in X-Forwarded-Proto.
  return { scheme: o.forwarding.proto(r.rawHeaders, { peer: r.peer, encrypted: r.encrypted, strippedPrefix: null }), host: r.host };
}

/** The Location rewrite for an answer of `backend` to `r` (src/http/location.ts), or null when proxy.rewriteLocation is off. */
export function pageLocationTarget(o: Pick<PagePathOptions, 'rewriteLocation' | 'forwarding'>, r: ClientRequest, backend: Backend): LocationTarget | null {
  const origin = publicOrigin(o, r);
  return origin === null ? null : locationTarget(backend.config, origin.scheme, origin.host);
}

/** A page answer the client took nothing of for clientWriteTimeoutMs: counted and logged before it is cut. */
export function clientStalled(o: Pick<PagePathOptions, 'metrics' | 'logger' | 'clientWriteTimeoutMs'>, room: string | null, backendId: string): void {
  o.metrics.clientErrors.inc({ code: 'write-timeout' });
  o.logger.info({ room, backend: backendId, ms: o.clientWriteTimeoutMs }, 'client did not read: connection closed');
}
