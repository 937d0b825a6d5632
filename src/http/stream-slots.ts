// The one limit on the Server-Sent Event streams roomgate serves itself (the lobby stream and the
// status page's stream): each holds a connection, a file descriptor and up to 1 MiB of unread
// frames for as long as the client stays, so anyone who can reach the port could otherwise open
// them until the process runs out of either. One StreamSlots per port (api.maxStreams each): on
// the public port the lobby and the public status streams share it; the admin port has its own,
// so public clients can never take the operator's status page away. A slot is freed when its
// response closes, however that happens (the client leaves, a slow client is dropped, shutdown).
// A request past the limit gets 503 too_many_streams with Retry-After (src/http/errors.ts).
import type { ServerResponse } from 'node:http';
import { Errors, STREAMS_FULL_RETRY_AFTER_S, type HttpError } from './errors.js';

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

/** The 503 too_many_streams of a port whose slots are all taken. */
export function streamsFull(max: number): HttpError {
  return Errors.tooManyStreams(`too many event streams open on this port (api.maxStreams: ${max}); retry after ${STREAMS_FULL_RETRY_AFTER_S} s`);
}
