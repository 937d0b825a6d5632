// What the page cache and the two page paths agree on: what a path hands the cache (a request
// whose room key is known), and how the cache writes an answer to one client whichever path the
// request came on (node:http's ServerResponse, or the byte-level path's raw socket:
// src/proxy/cache-answers.ts). The cache gives the status, the end-to-end fields (its own
// Cache-Status, Age and the room cookie included) and the body; the writer adds the framing and
// the connection's own fields.
import type { Refusal } from '../http/refusals.js';
import type { ForwardContext } from '../forward/forwarded.js';
import type { KeyResult } from '../room/extract.js';
import type { WireAnswer } from './wire-answer.js';

/** A request as a page path hands it over. */
export interface CacheRequest {
  readonly method: string;
  /** The target as the client sent it. */
  readonly url: string;
  readonly rawHeaders: readonly string[];
  /** The request has a body (its path's reading: an h2 request may have one without content-length). */
  readonly hasBody: boolean;
  readonly key: KeyResult;
  readonly ctx: ForwardContext;
  /**
   * The room cookie due on this answer, or null. Asked only when the cache answers: a request
   * passed on gets its cookie from its path's forwarding (signing it twice would cost an HMAC).
   */
  setCookie(): string | null;
}

/** The page cache as a page path sees it. */
export interface PageCacheFront {
  /**
   * Answers the request, or gives it back through `pass` (with the Cache-Status its answer
   * carries) for the page path to forward as it forwards any request.
   */
  handle(req: CacheRequest, w: AnswerWriter, pass: (cacheStatus: string) => void): void;
}

export interface AnswerWriter {
  /** HEAD: the head only, with the length the GET's body has. */
  readonly head: boolean;
  /** The client is gone: nothing more is written. */
  readonly gone: boolean;
  /** `length`: the body's length when known (Content-Length), else null (chunked, or close-delimited). */
  start(status: number, reason: string, headers: readonly string[], length: number | null): void;
  /** false: the client's buffer is full (call onDrain before writing more, if the sender can wait). */
  write(chunk: Buffer): boolean;
  /** cb once the client's buffer has drained, or the client is gone. */
  onDrain(cb: () => void): void;
  end(): void;
  /**
   * A stored answer whole (head, body, end) from its wire form, made when it was stored
   * (src/cache/wire-answer.ts), with this request's fields: Age (s), Cache-Status and the room
   * cookie (or null). Only the byte-level path has it; without it the cache writes the same
   * answer through start/write/end, the stored fields then Age, Cache-Status, Set-Cookie.
   */
  whole?(wire: WireAnswer, age: number, cacheStatus: string, setCookie: string | null): void;
  /** The answer broke off after its head: the client connection is cut. */
  cut(): void;
  /** One of roomgate's own answers (src/http/refusals.ts), rendered for the client and framed as the path frames them; `extra`: fields to add (Cache-Status). */
  own(refusal: Refusal, extra: Record<string, string>): void;
}
