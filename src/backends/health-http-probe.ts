// The connection of a health check, and its HTTP check on that raw socket: one fixed GET written
// as bytes, the answer's head read with the strict reader (src/http/response-head.ts), the body
// walked to its end (src/http/body-end.ts) without copying or decoding it. No node:http: a check
// runs once per backend every couple of seconds, so its code stays interpreted, and node:http's
// client (an Agent, a ClientRequest, an llhttp parser, an IncomingMessage per check) was the
// largest JavaScript cost of an idle gateway.
//
// Every byte from the backend is hostile: the head is bounded (HEAD_BYTES: a longer one fails the
// check, the buffer never grows past it), the body too (BODY_BYTES), nothing thrown leaves a data
// handler, and the whole check is bounded by the caller's timeout, which destroys the socket.
// What passes: a status from 200 to 399 and then the whole body. Interim 1xx heads (100 Continue,
// 102, 103 Early Hints) are skipped as node:http's client skips them, at most INTERIM of them; a
// 101 fails (no upgrade was asked for).
import net from 'node:net';
import tls from 'node:tls';
import { BodyEnd } from '../http/body-end.js';
import { parseResponseHead } from '../http/response-head.js';
import { isHostValue } from '../http/syntax.js';
import { backendHosts } from './host-addresses.js';

/** The longest answer head a check reads; a longer one fails it. */
export const HEAD_BYTES = 16 * 1024;
/** The longest answer body a check drains; a longer one fails it (a health answer is small). */
export const BODY_BYTES = 1024 * 1024;
/** Interim (1xx) heads skipped before the final one; one more fails the check. */
const INTERIM = 8;

/** Where a check connects (a HealthTarget is one). */
export interface ProbeAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * A fresh connection to the backend, as the proxy makes one: net.connect, or tls.connect with the
 * backend's TLS options; the host name looked up in the kept answers. Emits 'connect' (plain) or
 * 'secureConnect' (TLS) once it is usable.
 */
export function probeConnect(address: ProbeAddress, secure: tls.ConnectionOptions | null): net.Socket {
  const options = { host: address.host, port: address.port, lookup: backendHosts.lookup };
  return secure ? tls.connect({ ...options, ...secure }) : net.connect(options);
}

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
 * The HTTP check: connect, write the request, and finish() once the answer is judged: undefined
 * on a pass, a short reason on a failure. Socket errors go to fail(). The caller bounds the check
 * in time and destroys the returned socket when it ends.
 */
export function httpProbe(
  address: ProbeAddress,
  secure: tls.ConnectionOptions | null,
  path: string,
  hostHeader: string | undefined,
  finish: (error?: string) => void,
  fail: (err: Error) => void,
): net.Socket {
  const socket = probeConnect(address, secure);
  const answer = new AnswerReader();
  socket.on('error', fail);
  socket.once(secure ? 'secureConnect' : 'connect', () => {
    const request = probeRequest(address, path, hostHeader);
    if (request === null) finish(`no valid Host header for ${JSON.stringify(address.host)}`);
    else socket.write(request, 'latin1');
  });
  socket.on('data', (chunk: Buffer) => {
    if (socket.destroyed) return; // judged already
    let verdict: Verdict;
    try {
      verdict = answer.feed(chunk);
    } catch (err) {
      verdict = `bad answer: ${(err as Error).message}`; // nothing from a backend may throw out of here
    }
    if (verdict !== MORE) finish(verdict);
  });
  // The backend's end of the connection: the end of a close-delimited body, else too early. 'close'
  // covers a connection that goes without an 'end' (finish() is idempotent; an error came first).
  socket.once('end', () => finish(answer.atEof()));
  socket.once('close', () => finish(answer.atEof()));
  return socket;
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
