// The room cookie a page answer sets: when the room came from somewhere else than the cookie
// (query, path prefix, page path, header), on GET and HEAD only, so the page's later requests and
// its WebSocket carry the room by themselves. Shared by both page paths.
import type { ClientRequest } from '../http/client-request.js';
import type { Forwarding } from '../forward/forwarded.js';
import type { Logger } from '../observability/logger.js';
import type { KeyResult } from '../room/extract.js';
import { serializeRoomCookie } from '../room/cookie.js';

export interface RoomCookieSettings {
  readonly name: string;
  readonly maxAgeS: number;
  /** Signs (or not) the room. */
  readonly encode: (room: string, nowMs: number) => string;
}

const COOKIE_SOURCES = new Set(['query', 'path-prefix', 'page-path', 'header']);

/** The Set-Cookie value for a page answer, or null when none is due. */
export function roomCookieFor(rc: RoomCookieSettings | null, method: string, key: KeyResult, secure: boolean, logger: Logger): string | null {
  if (rc === null || key.room === null || key.source === null) return null;
  if (method !== 'GET' && method !== 'HEAD') return null;
  if (!COOKIE_SOURCES.has(key.source) || key.cookieRoom === key.room) return null;
  try {
    return serializeRoomCookie(rc.name, rc.encode(key.room, Date.now()), { maxAgeS: rc.maxAgeS, secure });
  } catch (err) {
    // A configured room pattern may allow characters a cookie cannot carry: skip the cookie.
    logger.debug({ room: key.room, err: (err as Error).message }, 'room cookie not set');
    return null;
  }
}

/**
 * The room cookie of page answers, asked by the request pipeline when the cache answers and by
 * both page paths when the backend does: Secure when the client's scheme (its own, or a trusted
 * proxy's X-Forwarded-Proto) is https.
 */
export class PageCookies {
  constructor(
    private readonly rc: RoomCookieSettings | null,
    private readonly forwarding: Forwarding,
    private readonly logger: Logger,
  ) {}

  /** The Set-Cookie value due on the answer to `r`, or null. */
  for(r: ClientRequest, key: KeyResult): string | null {
    if (this.rc === null) return null;
    const https = this.forwarding.proto(r.rawHeaders, { peer: r.peer, encrypted: r.encrypted, strippedPrefix: key.strippedPrefix }) === 'https';
    return roomCookieFor(this.rc, r.method, key, https, this.logger);
  }
}
