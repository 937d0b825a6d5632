// The page cache's answers written on each page path (src/cache/contract.ts): through
// node:http's ServerResponse (HTTP/1.x and h2), and as bytes on the byte-level path's socket,
// framed as PageRelay frames a relayed answer (Content-Length when known, else chunked; Date,
// HSTS on TLS, Connection and Keep-Alive for the client's connection).
import type { ServerResponse } from 'node:http';
import { constants } from 'node:http2';
import type { AnswerWriter } from '../cache/contract.js';
import { hasBody, type WireAnswer } from '../cache/wire-answer.js';
import type { Refusal } from '../http/refusals.js';
import { h2FieldsProblem, rawNames } from '../http/response-rules.js';
import type { PageClient } from '../http/page-client.js';
import { httpDate } from './page-relay.js';

const { NGHTTP2_INTERNAL_ERROR } = constants;

/** The client's side is closed: an HTTP/1.1 response is destroyed, or an h2 response's stream. */
export function isGone(res: ServerResponse): boolean {
  return res.destroyed || (res as { stream?: { destroyed: boolean } }).stream?.destroyed === true;
}

/**
 * Cuts an answer that cannot be finished (its backend broke off, its client stopped reading, Node
 * refused it): HTTP/1.1 loses its connection, so the client sees the body end early; an h2
 * stream is reset with INTERNAL_ERROR (destroying it without an error would reset it with
 * NO_ERROR, which clients take for a complete answer, however short the body).
 */
export function cutAnswer(res: ServerResponse): void {
  const stream = (res as { stream?: { destroyed: boolean; close(code: number): void } }).stream;
  if (stream === undefined) return void res.destroy();
  if (!stream.destroyed) stream.close(NGHTTP2_INTERNAL_ERROR);
}

/**
 * Takes back the fields a writeHead that threw had set: node's HTTP/2 response keeps them, and
 * they would make the answer written in its place throw too.
 */
export function dropUnsentFields(res: ServerResponse): void {
  if (!res.headersSent) for (const name of res.getHeaderNames()) res.removeHeader(name);
}

export class ResponseAnswer implements AnswerWriter {
  /** Node refused the stored answer's head: roomgate answered in its place, and nothing more is written. */
  private refused = false;

  constructor(
    private readonly res: ServerResponse,
    readonly head: boolean,
    /** An h2 stream: no reason phrase. */
    private readonly h2: boolean,
    readonly own: (refusal: Refusal, extra: Record<string, string>) => void,
  ) {}

  get gone(): boolean {
    return this.refused || isGone(this.res);
  }

  start(status: number, reason: string, headers: readonly string[], length: number | null): void {
    const fields = length === null || !hasBody(status) ? [...headers] : [...headers, 'Content-Length', String(length)];
    // What HTTP/2 cannot carry (a field meant once, twice: never stored, but a fill's answer is
    // relayed to its waiting clients too) is the rule of every answer (src/http/response-rules.ts).
    const problem = this.h2 ? h2FieldsProblem(rawNames(fields)) : null;
    if (problem !== null) return this.refuse(problem);
    try {
      if (this.h2) this.res.writeHead(status, fields);
      else this.res.writeHead(status, reason, fields);
    } catch (err) {
      // Fields Node refuses though they passed the answer checks when received (on h2: a field
      // meant once, twice): a 502 in its place, as the relayed path answers, once the fields the
      // failed writeHead set are gone; the body that follows is not written.
      this.refuse((err as Error).message);
    }
  }

  /** A 502 in place of an answer that cannot be written; nothing of it follows. */
  private refuse(detail: string): void {
    this.refused = true;
    if (this.res.headersSent) return cutAnswer(this.res);
    dropUnsentFields(this.res);
    this.own({ code: 'bad-backend-answer', detail }, {});
  }

  write(chunk: Buffer): boolean {
    if (this.head || this.gone) return true;
    return this.res.write(chunk);
  }

  onDrain(cb: () => void): void {
    // A client that leaves never drains: the waiting sender is told all the same.
    const once = (): void => {
      this.res.off('drain', once);
      this.res.off('close', once);
      cb();
    };
    this.res.on('drain', once);
    this.res.on('close', once);
  }

  end(): void {
    if (!this.gone) this.res.end();
  }

  cut(): void {
    cutAnswer(this.res);
  }
}

const CRLF = '\r\n';
const LAST_CHUNK = '0\r\n\r\n';

export class SocketAnswer implements AnswerWriter {
  private chunked = false;
  /** A 204 or 304: no framing fields and no body, whatever the backend sent. */
  private bodyless = false;
  /** The head is written but held (corked) until the first body bytes or the end. */
  private corked = false;
  /** The connection's fields and the head's blank line. */
  private readonly connection: string;

  constructor(
    private readonly client: PageClient,
    readonly head: boolean,
    private readonly keepAlive: boolean,
    keepAliveHeader: string | null,
    private readonly hsts: string | null,
    readonly own: (refusal: Refusal, extra: Record<string, string>) => void,
  ) {
    this.connection = keepAlive ? `Connection: keep-alive${CRLF}${keepAliveHeader ?? ''}${CRLF}` : `Connection: close${CRLF}${CRLF}`;
  }

  get gone(): boolean {
    return this.client.closed;
  }

  start(status: number, reason: string, headers: readonly string[], length: number | null): void {
    if (this.gone) return;
    let out = `HTTP/1.1 ${status} ${reason}${CRLF}`;
    let date = false;
    let sts = false;
    for (let i = 0; i + 1 < headers.length; i += 2) {
      const name = headers[i] as string;
      if (name.length === 4 && name.toLowerCase() === 'date') date = true;
      else if (name.length === 25 && name.toLowerCase() === 'strict-transport-security') sts = true;
      out += `${name}: ${headers[i + 1] as string}${CRLF}`;
    }
    if (this.hsts !== null && !sts) out += `Strict-Transport-Security: ${this.hsts}${CRLF}`;
    if (!date) out += `Date: ${httpDate()}${CRLF}`;
    if (!hasBody(status)) this.bodyless = true;
    else if (length !== null) out += `Content-Length: ${length}${CRLF}`;
    else if (!this.head) {
      this.chunked = true;
      out += `Transfer-Encoding: chunked${CRLF}`;
    }
    out += this.connection;
    // The head waits for the first body bytes (or the end): one write to the kernel, not two.
    this.client.socket.cork();
    this.corked = true;
    this.client.socket.write(out, 'latin1');
  }

  /**
   * A stored answer from its wire form: the stored head as it was made, then this request's
   * fields in the order start() writes them (Age, Cache-Status, Set-Cookie, HSTS, Date, framing,
   * the connection's), then the body: the same bytes as start/write/end, in one write to the kernel.
   */
  whole(wire: WireAnswer, age: number, cacheStatus: string, setCookie: string | null): void {
    if (this.gone) return;
    let out = `Age: ${age}${CRLF}Cache-Status: ${cacheStatus}${CRLF}`;
    if (setCookie !== null) out += `Set-Cookie: ${setCookie}${CRLF}`;
    if (this.hsts !== null && !wire.hasSts) out += `Strict-Transport-Security: ${this.hsts}${CRLF}`;
    if (!wire.hasDate) out += `Date: ${httpDate()}${CRLF}`;
    out += wire.framing + this.connection;
    const s = this.client.socket;
    s.cork();
    s.write(wire.head);
    s.write(out, 'latin1');
    if (!this.head && wire.framing !== '' && wire.body.length > 0) s.write(wire.body);
    s.uncork();
    this.answered();
  }

  private uncork(): void {
    if (!this.corked) return;
    this.corked = false;
    this.client.socket.uncork();
  }

  write(chunk: Buffer): boolean {
    if (this.head || this.bodyless || this.gone || chunk.length === 0) return true;
    const s = this.client.socket;
    if (!this.chunked) {
      const ok = s.write(chunk);
      this.uncork();
      return ok && !s.writableNeedDrain;
    }
    s.cork();
    s.write(`${chunk.length.toString(16)}${CRLF}`, 'latin1');
    s.write(chunk);
    const ok = s.write(CRLF, 'latin1');
    s.uncork();
    this.uncork();
    return ok && !s.writableNeedDrain;
  }

  onDrain(cb: () => void): void {
    // A client that leaves never drains: the waiting sender is told all the same.
    const s = this.client.socket;
    const once = (): void => {
      s.off('drain', once);
      s.off('close', once);
      cb();
    };
    s.on('drain', once);
    s.on('close', once);
  }

  end(): void {
    if (this.gone) return this.uncork();
    if (this.chunked) this.client.socket.write(LAST_CHUNK, 'latin1');
    this.uncork();
    this.answered();
  }

  private answered(): void {
    // A hit is answered within the call that read its head: the next pipelined request starts on
    // the next turn of the loop, not one stack frame deeper per request.
    setImmediate(() => {
      if (!this.gone) this.client.answered(this.keepAlive);
    });
  }

  cut(): void {
    this.client.socket.destroy();
  }
}
