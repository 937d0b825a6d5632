// The one limit on the Server-Sent Event streams roomgate serves itself (the lobby stream and the
// status page's stream): each holds a connection, a file descriptor and up to 1 MiB of unread
// frames for as long as the client stays, so anyone who can reach the port could otherwise open
// them until the process runs out of either. One StreamSlots per port (api.maxStreams each): on
// the public port the lobby and the public status streams share it; the admin port has its own,
// so public clients can never take the operator's status page away. A slot is freed when its
// response closes, however that happens (the client leaves, a slow client is dropped, shutdown).
// A request past the limit gets 503 with Retry-After and the API's error shape.
import type { ServerResponse } from 'node:http';

/** Retry-After (seconds) of a 503 when every slot is taken: a slot frees only when a client leaves. */
export const STREAMS_FULL_RETRY_AFTER_S = 5;

export class StreamSlots {
  private used = 0;

  /** max: api.maxStreams, concurrent streams of this port. */
  constructor(readonly max: number) {}

  /** Streams holding a slot now. */
  get size(): number {
    return this.used;
  }

  /**
   * Takes a slot for `res` until it closes. False (nothing changed) when every slot is taken, or
   * when `res` is already closed (its 'close' would never free the slot; the 503 the caller then
   * sends goes nowhere).
   */
  take(res: ServerResponse): boolean {
    if (this.used >= this.max || res.destroyed) return false;
    this.used++;
    res.once('close', () => this.used--);
    return true;
  }
}

/** The API's error shape for a full port; the caller sends it with status 503. */
export function streamsFullError(max: number): { readonly code: 'too_many_streams'; readonly message: string; readonly headers: Readonly<Record<string, string>> } {
  return {
    code: 'too_many_streams',
    message: `too many event streams open on this port (api.maxStreams: ${max}); retry after ${STREAMS_FULL_RETRY_AFTER_S} s`,
    headers: { 'Retry-After': String(STREAMS_FULL_RETRY_AFTER_S) },
  };
}

/** 503 in the API's error shape (for the status stream; the API throws its own ApiError from streamsFullError). */
export function sendStreamsFull(res: ServerResponse, max: number): void {
  if (res.headersSent || res.destroyed) return;
  const full = streamsFullError(max);
  const body = JSON.stringify({ error: { code: full.code, message: full.message } });
  res.writeHead(503, {
    'Content-Type': 'application/json; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
    ...full.headers,
  });
  res.end(body);
}
