// One page request on the byte-level path: the rewritten request head goes to a pooled raw
// backend connection, the backend's answer head is read by the strict reader
// (src/http/response-head.ts) and rewritten for the client, and the body is relayed as it comes:
// a Content-Length body byte for byte, a chunked or close-delimited one re-framed as chunks of
// roomgate's own (no chunk extensions or trailers of the backend pass). The end of the body is
// found by counting (src/http/body-end.ts), so a backend that says more than its framing allows
// never gets those bytes to the client, and its connection is not reused.
//
// What happens on failure is the node:http path's (src/proxy/http-proxy.ts), decided by the
// caller (src/proxy/lean-pages.ts) from the outcome reported here.
import type { Socket } from 'node:net';
import { BodyEnd } from '../http/body-end.js';
import { resetConnection } from '../http/reset.js';
import { ANSWER_KEEPS, connectionNamed, HOP_BY_HOP } from '../http/hop-by-hop.js';
import { parseResponseHead, type ResponseHead } from '../http/response-head.js';
import { answerFieldsProblem, MAX_RESPONSE_HEAD_BYTES, pairNames } from '../http/response-rules.js';
import { answerFieldValue, type LocationTarget } from '../http/location.js';
import { DROPPED_WHEN_INJECTED, HeadScanner, injectable } from '../http/pin-inject.js';
import type { Deadlines, Expiring } from './deadlines.js';
import type { RawBackendConn, RawBackendPool, RawBackendUser } from './raw-backend-pool.js';

/** How an exchange ended, for the caller's metrics, retries and the client connection. */
export type RelayOutcome =
  /** The whole answer reached the client's socket. */
  | { readonly kind: 'complete'; readonly status: number }
  /** Nothing was written to the client: the caller answers (or retries). */
  | { readonly kind: 'failed'; readonly err: NodeJS.ErrnoException; readonly reused: boolean }
  /** The backend's answer cannot be relayed; nothing was written to the client. */
  | { readonly kind: 'bad-answer'; readonly problem: string }
  /** The answer broke off after its head went out: the client connection must be cut. */
  | { readonly kind: 'cut'; readonly status: number; readonly why: string }
  /** The client went away first. */
  | { readonly kind: 'client-gone'; readonly status: number | null };

export interface RelayRequest {
  readonly head: boolean;
  /** The request head for the backend, CRLF-terminated, blank line included. */
  readonly text: string;
  /** The client's connection stays open after this answer. */
  readonly keepAlive: boolean;
  /** keep-alive header value (Keep-Alive: timeout=N) for the client, or null. */
  readonly keepAliveHeader: string | null;
  /** Header lines roomgate adds (the room cookie, Cache-Status), CRLF-terminated; '' for none. */
  readonly extra: string;
  /** Strict-Transport-Security to add when the backend sent none, or null. */
  readonly hsts: string | null;
  /** proxy.rewriteLocation's target (src/http/location.ts), or null when off. */
  readonly location: LocationTarget | null;
  readonly connectTimeoutMs: number;
  readonly responseTimeoutMs: number;
  /** The client takes nothing of the answer for this long: it is cut (client-gone); 0 = never. */
  readonly writeTimeoutMs: number;
  /** A new backend connection, none of the pool's (the retry after a stale one). */
  readonly fresh: boolean;
  /** room.pinInject: the pin's tags for this page (src/http/pin-inject.ts), or null. */
  readonly pinTags: (() => Buffer) | null;
}

export interface RelayEvents {
  /** The backend connection is established (a new one; a pooled one is up already). */
  connected(): void;
  /** The answer's head is on its way to the client. */
  headSent(status: number): void;
  /** Bytes the backend sent after its complete answer (logged and counted by the caller). */
  extraBytes(): void;
  /** The client took nothing for writeTimeoutMs; its connection is destroyed next (then done: client-gone). */
  clientStalled(): void;
  done(outcome: RelayOutcome): void;
}

const CRLF = '\r\n';
/** Interim answers accepted before a final one; more: 502. */
const MAX_INTERIM = 16;
const LAST_CHUNK = '0\r\n\r\n';

// Hop-by-hop names by length, so most names are passed over without lower-casing them.
const HOP_LENGTHS = new Set([...HOP_BY_HOP].map((n) => n.length));

export class PageRelay implements RawBackendUser, Expiring {
  private state: 'connecting' | 'waiting' | 'body' | 'done' = 'connecting';
  private headBuf: Buffer | null = null;
  private bodyEnd: BodyEnd | null = null;
  /** The client's body is re-framed as chunks (the backend's was chunked or close-delimited). */
  private rechunk = false;
  private status = 0;
  /** Interim (1xx) answers read before the final one. */
  private interim = 0;
  private reusable = false;
  /** How long the connection may idle in the pool (the backend's Keep-Alive hint), or null. */
  private idleMs: number | null = null;
  /** What the pending deadline means: the connect or the answer head took too long. */
  private waitingFor: { code: string; message: string } | null = null;
  private readonly conn: RawBackendConn;
  private paused = false;
  /**
   * room.pinInject on an HTML page: the body's first bytes are kept until the scanner decides, and
   * the answer's head (without its length or the final CRLF) with them, so its Content-Length is
   * the one of the bytes sent; null once decided, or for every other answer.
   */
  private scan: HeadScanner | null = null;
  private held: Held | null = null;
  private readonly resume = (): void => {
    this.paused = false;
    if (this.req.writeTimeoutMs > 0) this.deadlines.clear(this);
    if (this.state === 'body') this.conn.socket.resume();
  };

  constructor(
    private readonly client: Socket,
    private readonly pool: RawBackendPool,
    private readonly deadlines: Deadlines,
    backend: { readonly id: string; readonly host: string; readonly port: number },
    private readonly req: RelayRequest,
    private readonly events: RelayEvents,
  ) {
    this.conn = pool.acquire(backend.id, backend.host, backend.port, this, req.fresh);
    const socket = this.conn.socket;
    if (this.conn.connecting) {
      this.setTimer(req.connectTimeoutMs, 'ECONNTIMEOUT', 'connect timeout');
      socket.once('connect', () => {
        if (this.state !== 'connecting') return;
        this.state = 'waiting';
        events.connected();
        this.setTimer(req.responseTimeoutMs, 'ERESPONSETIMEOUT', 'response timeout');
      });
    } else {
      this.state = 'waiting';
      this.setTimer(req.responseTimeoutMs, 'ERESPONSETIMEOUT', 'response timeout');
    }
    socket.write(req.text, 'latin1');
  }

  /** The connection was in the pool before this request (a reset then means a stale socket). */
  get reused(): boolean {
    return this.conn.uses > 1;
  }

  /** The client's connection closed before the answer was complete. */
  clientGone(): void {
    if (this.state === 'done') return;
    const status = this.state === 'body' ? this.status : null;
    this.finish({ kind: 'client-gone', status }, false);
  }

  onData(chunk: Buffer): void {
    if (this.state === 'body') {
      // One write system call for everything this chunk becomes (chunk sizes, data, CRLFs).
      this.client.cork();
      this.relay(chunk, 0);
      this.client.uncork();
      return;
    }
    if (this.state !== 'waiting') return;
    let buf = this.headBuf === null ? chunk : Buffer.concat([this.headBuf, chunk]);
    for (;;) {
      const parsed = parseResponseHead(buf, MAX_RESPONSE_HEAD_BYTES);
      if (parsed === null) {
        this.headBuf = buf;
        return;
      }
      if (!parsed.ok) return this.finish({ kind: 'bad-answer', problem: parsed.error }, false);
      const head = parsed.head;
      if (head.status >= 100 && head.status < 200) {
        // An interim answer (100, 103) is not relayed, as node:http's client does not either; a
        // 101 to a request that asked for no upgrade cannot be relayed at all.
        if (head.status === 101) return this.finish({ kind: 'bad-answer', problem: 'a 101 to a request without Upgrade' }, false);
        // A few are normal (100, 103); an endless stream of them is a broken or hostile backend.
        if (++this.interim > MAX_INTERIM) return this.finish({ kind: 'bad-answer', problem: `more than ${MAX_INTERIM} interim (1xx) answers` }, false);
        buf = buf.subarray(head.end);
        continue;
      }
      // The field rules of every answer (src/http/response-rules.ts); this path's clients are HTTP/1.1.
      const problem = answerFieldsProblem(pairNames(head.headers), false);
      if (problem !== null) return this.finish({ kind: 'bad-answer', problem }, false);
      this.headBuf = null;
      return this.start(head, buf);
    }
  }

  onGone(err: NodeJS.ErrnoException | null): void {
    if (this.state === 'done') return;
    if (this.state === 'body') {
      // A close-delimited body ends when the backend ends its side cleanly.
      if (err === null && this.bodyEnd?.closeDelimited === true) {
        this.reusable = false;
        return this.complete();
      }
      return this.finish({ kind: 'cut', status: this.status, why: err?.code ?? 'the backend closed mid-body' }, false);
    }
    // Before the answer's head: what node:http calls "socket hang up" unless the socket says more.
    const e = err ?? Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    this.finish({ kind: 'failed', err: e, reused: this.reused }, false);
  }

  private start(head: ResponseHead, buf: Buffer): void {
    this.clearTimer();
    this.state = 'body';
    this.status = head.status;
    const hasBody = !this.req.head && head.body.kind !== 'none';
    // A HEAD answer and a 204 or 304 carry no body whatever their headers say.
    this.bodyEnd = new BodyEnd(this.req.head ? { kind: 'none' } : head.body);
    this.rechunk = hasBody && head.body.kind !== 'length';
    this.reusable = head.http11 && head.body.kind !== 'close';

    const scan = hasBody && this.req.pinTags !== null && injectable(head.status, head.headers) ? new HeadScanner(this.req.pinTags()) : null;
    let out = `HTTP/1.1 ${head.status} ${head.reason}${CRLF}`;
    let validators = '';
    let date = false;
    let sts = false;
    const named = connectionNamedIn(head);
    for (const [name, value] of head.headers) {
      if (named !== null && named.has(name.toLowerCase())) continue;
      // The page's own length and validators are not an injected page's: written once the scanner decided.
      if (scan !== null && DROPPED_WHEN_INJECTED.has(name.toLowerCase())) {
        if (name.toLowerCase() !== 'content-length') validators += `${name}: ${value}${CRLF}`;
        continue;
      }
      if (HOP_LENGTHS.has(name.length)) {
        const lower = name.toLowerCase();
        if (HOP_BY_HOP.has(lower)) {
          if (lower === 'connection' && /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i.test(value)) this.reusable = false;
          else if (lower === 'keep-alive') this.keepAliveHint(value);
          continue;
        }
      }
      if (name.length === 4 && name.toLowerCase() === 'date') date = true;
      else if (name.length === 25 && name.toLowerCase() === 'strict-transport-security') sts = true;
      out += `${name}: ${this.req.location === null ? value : answerFieldValue(name, value, this.req.location)}${CRLF}`;
    }
    out += this.req.extra;
    if (this.req.hsts !== null && !sts) out += `Strict-Transport-Security: ${this.req.hsts}${CRLF}`;
    if (!date) out += `Date: ${httpDate()}${CRLF}`;
    out += this.req.keepAlive ? `Connection: keep-alive${CRLF}${this.req.keepAliveHeader ?? ''}` : `Connection: close${CRLF}`;
    if (this.rechunk) out += `Transfer-Encoding: chunked${CRLF}`;
    this.events.headSent(head.status);
    this.client.cork();
    if (scan === null) this.client.write(out + CRLF, 'latin1');
    else {
      this.scan = scan;
      this.held = { head: out, validators, length: head.body.kind === 'length' ? head.body.length : null };
    }
    this.relay(buf, head.end);
    this.client.uncork();
  }

  /** Body bytes while the pin's scanner has not decided: kept by it, or sent with the held head once it has. */
  private scanned(piece: Buffer): void {
    const out = (this.scan as HeadScanner).feed(piece);
    if (out !== null) this.release(out);
  }

  /** The scanner decided (or the body ended first): the held head with the length of what is sent, then the kept bytes. */
  private release(kept: readonly Buffer[]): void {
    const scan = this.scan as HeadScanner;
    const held = this.held as Held;
    this.scan = null;
    this.held = null;
    const length = held.length === null ? '' : `Content-Length: ${held.length + scan.added}${CRLF}`;
    this.client.write(held.head + (scan.injected ? '' : held.validators) + length + CRLF, 'latin1');
    if (kept.length === 0) return;
    if (!this.rechunk) {
      for (const piece of kept) this.write(piece);
      return;
    }
    // One chunk of roomgate's own for the pieces.
    let size = 0;
    for (const piece of kept) size += piece.length;
    this.client.write(`${size.toString(16)}${CRLF}`, 'latin1');
    for (const piece of kept) this.client.write(piece);
    this.write(CRLF);
  }

  /**
   * A backend's `Keep-Alive: timeout=N` says when it closes an idle connection: it goes back to
   * the pool for a second less than that at most, and not at all below 2 s (as node:http's agent
   * does), so it is not sent a request just as the backend closes it.
   */
  private keepAliveHint(value: string): void {
    const m = /(?:^|[,; \t])timeout=(\d{1,9})/i.exec(value);
    if (m === null) return;
    const ms = Number(m[1]) * 1000 - 1000;
    if (ms <= 0) this.reusable = false;
    else this.idleMs = ms;
  }

  /** Passes buf[from..] on as body, up to the body's end. */
  private relay(buf: Buffer, from: number): void {
    const bodyEnd = this.bodyEnd as BodyEnd;
    let end: number;
    try {
      if (this.rechunk) {
        end = bodyEnd.feed(buf, from, buf.length, (s, e) => this.bodyChunk(buf, s, e));
        // A close-delimited body is all data until the backend's end.
        if (bodyEnd.closeDelimited && from < buf.length) this.bodyChunk(buf, from, buf.length);
      } else {
        end = bodyEnd.feed(buf, from, buf.length);
        const stop = end === -1 ? buf.length : end;
        if (stop > from && this.scan !== null) this.scanned(buf.subarray(from, stop));
        else if (stop > from) this.write(from === 0 && stop === buf.length ? buf : buf.subarray(from, stop));
      }
    } catch (err) {
      return this.finish({ kind: 'cut', status: this.status, why: (err as Error).message }, false);
    }
    if (end === -1) return;
    if (end < buf.length) {
      // More bytes than the answer's framing allows: never relayed, and the connection is not
      // reused (the rest of that stream cannot be trusted).
      this.reusable = false;
      this.events.extraBytes();
    }
    this.complete();
  }

  /** Body bytes of a re-framed answer: through the pin's scanner while it has not decided. */
  private bodyChunk(buf: Buffer, start: number, end: number): void {
    if (this.scan === null) this.writeChunk(buf, start, end);
    else if (end > start) this.scanned(buf.subarray(start, end));
  }

  private writeChunk(buf: Buffer, start: number, end: number): void {
    if (end <= start) return;
    this.client.write(`${(end - start).toString(16)}${CRLF}`, 'latin1');
    this.client.write(buf.subarray(start, end));
    this.write(CRLF);
  }

  private write(data: Buffer | string): void {
    if (!this.client.write(data as Buffer) && !this.paused) {
      // The client reads slower than the backend sends: stop reading the backend until it drains.
      this.paused = true;
      this.conn.socket.pause();
      this.client.once('drain', this.resume);
      // A client that reads nothing would hold both connections forever.
      if (this.req.writeTimeoutMs > 0) this.deadlines.set(this, Date.now() + this.req.writeTimeoutMs);
    }
  }

  private complete(): void {
    // A page that ended before the scanner decided: its head and everything kept, unchanged.
    if (this.scan !== null) this.release(this.scan.flush());
    if (this.rechunk) this.client.write(LAST_CHUNK, 'latin1');
    this.finish({ kind: 'complete', status: this.status }, this.reusable);
  }

  private finish(outcome: RelayOutcome, reuse: boolean): void {
    if (this.state === 'done') return;
    this.state = 'done';
    this.clearTimer();
    if (this.paused) {
      this.client.off('drain', this.resume);
      this.deadlines.clear(this);
      this.conn.socket.resume();
    }
    if (reuse) this.pool.release(this.conn, this.idleMs);
    else {
      this.conn.user = null;
      this.conn.socket.destroy();
    }
    this.events.done(outcome);
  }

  private setTimer(ms: number, code: string, message: string): void {
    this.waitingFor = { code, message };
    this.deadlines.set(this, Date.now() + ms);
  }

  private clearTimer(): void {
    if (this.waitingFor !== null) {
      this.waitingFor = null;
      this.deadlines.clear(this);
    }
  }

  expire(): void {
    if (this.paused && this.state === 'body') {
      // The one deadline of the body: the client took nothing of it for writeTimeoutMs.
      this.events.clientStalled();
      resetConnection(this.client);
      return;
    }
    const w = this.waitingFor;
    this.waitingFor = null;
    if (w !== null && (this.state === 'connecting' || this.state === 'waiting')) {
      this.finish({ kind: 'failed', err: Object.assign(new Error(w.message), { code: w.code }), reused: this.reused }, false);
    }
  }
}

/** An HTML page's head held for the pin's scanner: its fields but the length and validators, those, and the backend's length. */
interface Held {
  readonly head: string;
  readonly validators: string;
  readonly length: number | null;
}

/** The fields an answer's Connection header names beyond its own options, or null (the usual case). */
function connectionNamedIn(head: ResponseHead): Set<string> | null {
  let values: string[] | null = null;
  for (const [name, value] of head.headers) {
    if (name.length === 10 && name.toLowerCase() === 'connection') (values ??= []).push(value);
  }
  if (values === null) return null;
  const named = connectionNamed(values, ANSWER_KEEPS);
  // close and keep-alive are the connection's options, already dropped as hop-by-hop.
  named?.delete('close');
  named?.delete('keep-alive');
  return named === null || named.size === 0 ? null : named;
}

let dateSecond = 0;
let dateText = '';

/** The Date header value, formatted once per second. */
export function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}
