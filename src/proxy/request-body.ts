// A request body is read before its backend request opens, up to `proxy.bufferBodyBytes`: a client
// that sends its body a byte a second then holds a gateway buffer, never a backend (a
// single-process or sync-worker backend is held whole by one slow upload; nginx's request
// buffering exists for this). A body that fits is sent at once with its Content-Length, and a
// backend that refuses the connection can be tried again with it (nothing of it was sent). A
// larger body streams after the bytes read so far, and must keep moving: no byte for
// `proxy.bodyIdleTimeoutMs` ends the request. A body over `proxy.maxBodyBytes` gets 413.
import type { IncomingMessage } from 'node:http';
import { bodyDeclared } from '../http/client-request.js';

export interface BodyLimits {
  /** Bodies up to this size are read whole before the backend request opens; 0: every body streams. */
  readonly bufferBytes: number;
  /** Larger bodies are refused with 413; 0: no limit. */
  readonly maxBytes: number;
}

/** What becomes of a request's body. */
export type BodyPlan =
  /** No body. */
  | { readonly kind: 'none' }
  /** The whole body, read. */
  | { readonly kind: 'buffered'; readonly body: Buffer }
  /** Larger than the buffer: these first bytes, then the rest from the request (paused). */
  | { readonly kind: 'streamed'; readonly head: readonly Buffer[] }
  /** Over maxBytes (declared or counted): 413. */
  | { readonly kind: 'too-large' };

const NONE: BodyPlan = { kind: 'none' };

/** Whether a request carries a body by its framing (h2: DATA without a length is marked chunked by its head check). */
export function hasBody(req: IncomingMessage): boolean {
  return bodyDeclared(req) === 'bytes';
}

/**
 * Reads the body as `limits` say and calls `done` once with the plan, or never when the client
 * goes away first (its request then ends where node:http ends it).
 */
export function readBody(req: IncomingMessage, limits: BodyLimits, done: (plan: BodyPlan) => void): void {
  if (!hasBody(req)) return done(NONE);
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (limits.maxBytes > 0 && declared > limits.maxBytes) return done({ kind: 'too-large' });
  if (limits.bufferBytes === 0 || declared > limits.bufferBytes) return done({ kind: 'streamed', head: [] });
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (c: Buffer): void => {
    chunks.push(c);
    size += c.length;
    if (limits.maxBytes > 0 && size > limits.maxBytes) {
      // A chunked (or h2) body declares no length: it is counted against the limit as it comes.
      req.pause();
      stop();
      done({ kind: 'too-large' });
    } else if (size > limits.bufferBytes) {
      // More than the buffer holds: the rest streams, after what was read.
      req.pause();
      stop();
      done({ kind: 'streamed', head: chunks });
    }
  };
  const onEnd = (): void => {
    stop();
    done({ kind: 'buffered', body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size) });
  };
  const stop = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
  };
  req.on('data', onData);
  req.on('end', onEnd);
}
