// The HTTP health check on its bare connection (src/backends/probe-link.ts): one fixed GET written
// as bytes, the answer's head read with the strict reader (src/http/response-head.ts), the body
// walked to its end (src/http/body-end.ts) without copying or decoding it. No node:http: a check
// runs once per backend every couple of seconds, so its code stays interpreted, and node:http's
// client (an Agent, a ClientRequest, an llhttp parser, an IncomingMessage per check) was the
// largest JavaScript cost of an idle gateway.
//
// Every byte from the backend is hostile: the head is bounded (HEAD_BYTES: a longer one fails the
// check, the buffer never grows past it), the body too (BODY_BYTES), nothing thrown leaves a data
// handler, and the whole check is bounded by the caller's timeout, which closes the connection.
// What passes: a status from 200 to 399 and then the whole body. Interim 1xx heads (100 Continue,
// 102, 103 Early Hints) are skipped as node:http's client skips them, at most INTERIM of them; a
// 101 fails (no upgrade was asked for).
import { BodyEnd } from '../http/body-end.js';
import { parseResponseHead } from '../http/response-head.js';
import { isHostValue } from '../http/syntax.js';
import type { ProbeAddress, ProbeEvents } from './probe-link.js';

/** The longest answer head a check reads; a longer one fails it. */
export const HEAD_BYTES = 16 * 1024;
/** The longest answer body a check drains; a longer one fails it (a health answer is small). */
export const BODY_BYTES = 1024 * 1024;
/** Interim (1xx) heads skipped before the final one; one more fails the check. */
const INTERIM = 8;

/**
 * The request of a check: GET path with Host, Connection: close and the User-Agent; null when the
 * Host would not be a Host value (a discovered name is written into the head as it is). The path
 * is the checker's to vouch for (HealthChecker refuses one outside request-target characters).
 */
export function probeRequest(address: ProbeAddress, path: string, hostHeader: string | undefined): string | null {
  const host = hostHeader ?? `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
  return isHostValue(host) ? `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\nUser-Agent: roomgate-health\r\n\r\n` : null;
}

/**
 * The HTTP check's side of its connection (whichever way it is open: src/backends/probe-link.ts):
 * finish() once the answer is judged, undefined on a pass, a short reason on a failure. The
 * caller bounds the check in time and closes the connection when it ends.
 */
export function httpAnswer(finish: (error?: string) => void): ProbeEvents {
  const answer = new AnswerReader();
  return {
    connected: () => undefined, // not told: the check writes a request
    data(chunk: Buffer): void {
      let verdict: Verdict;
      try {
        verdict = answer.feed(chunk);
      } catch (err) {
        verdict = `bad answer: ${(err as Error).message}`; // nothing from a backend may throw out of here
      }
      if (verdict !== MORE) finish(verdict);
    },
    // The backend's end of the connection: the end of a close-delimited body, else too early.
    end: () => finish(answer.atEof()),
    error: (reason) => finish(reason),
  };
}

/** More bytes are needed (a pass is undefined, a failure its reason). */
const MORE = Symbol('more');
type Verdict = string | undefined | typeof MORE;

/** Reads one answer from the bytes of a check, chunk by chunk, to a verdict. */
export class AnswerReader {
  /** The bytes of a head not yet complete (always fewer than HEAD_BYTES), or null. */
  private pending: Buffer | null = null;
  /** The final answer's body, once its head is read. */
  private body: BodyEnd | null = null;
  private bodyBytes = 0;
  private interim = 0;

  /** Takes the next chunk: MORE, or the verdict (a pass is undefined). Throws on a framing error. */
  feed(chunk: Buffer): Verdict {
    if (this.body !== null) return this.bodyChunk(chunk, 0);
    let buf = this.pending === null ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = null;
    for (;;) {
      const parsed = parseResponseHead(buf, HEAD_BYTES);
      if (parsed === null) {
        if (buf.length > 0) this.pending = buf; // fewer than HEAD_BYTES, or the parser would have said so
        return MORE;
      }
      if (!parsed.ok) return `bad answer: ${parsed.error}`;
      const { status, end, body } = parsed.head;
      if (status === 101) return 'HTTP 101';
      if (status < 200) {
        // An interim answer: the final one follows on the same connection.
        if (++this.interim > INTERIM) return `bad answer: more than ${INTERIM} interim (1xx) heads`;
        buf = buf.subarray(end);
        continue;
      }
      if (status > 399) return `HTTP ${status}`;
      this.body = new BodyEnd(body);
      return this.body.done ? undefined : this.bodyChunk(buf, end);
    }
  }

  /** The verdict when the backend ends the connection now. */
  atEof(): string | undefined {
    if (this.body === null) return this.pending === null && this.interim === 0 ? 'connection closed without an answer' : 'connection closed mid-answer head';
    return this.body.done || this.body.closeDelimited ? undefined : 'connection closed mid-response';
  }

  private bodyChunk(buf: Buffer, from: number): Verdict {
    const body = this.body as BodyEnd;
    this.bodyBytes += buf.length - from;
    if (body.feed(buf, from, buf.length) !== -1) return undefined; // bytes after the body are ignored
    return this.bodyBytes > BODY_BYTES ? `answer body over ${BODY_BYTES} bytes` : MORE;
  }
}
