// WebSockets over HTTP/2 (RFC 8441). A browser on an h2 connection that roomgate told
// SETTINGS_ENABLE_CONNECT_PROTOCOL opens a WebSocket as a stream: CONNECT with :protocol
// websocket, answered 200, then the stream carries the WebSocket frames. roomgate joins it to the
// backend's HTTP/1.1 upgrade through the same UpgradeProxy as an HTTP/1.1 handshake (room key,
// admission, placement, X-Forwarded-*, the registry of live tunnels, close semantics):
//  - the request is rewritten to the HTTP/1.1 handshake (GET, Upgrade: websocket, a fresh
//    Sec-WebSocket-Key, since h2 clients send none);
//  - H2WebSocketClient stands in for the client socket: the HTTP/1.1 answer the tunnel writes to
//    it (the backend's 101, or any refusal) becomes the stream's h2 answer (200 with the
//    negotiated subprotocol and extensions, or the status with its headers), and every byte
//    after it is the stream's data. The frames themselves are the same on both protocols.
import { randomBytes } from 'node:crypto';
import http2, { type Http2ServerRequest, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { Duplex } from 'node:stream';
import { HOP_BY_HOP } from '../http/hop-by-hop.js';
import { headerValue, parseResponseHead, type ResponseHead } from '../http/response-head.js';
import { MAX_RESPONSE_HEAD_BYTES } from '../http/response-rules.js';

const { NGHTTP2_CANCEL } = http2.constants;

// What an h2 answer must not carry: the HTTP/1.1 connection's fields (the tunnel has dropped the
// backend's; these are its own) and the upgrade's.
const NOT_ON_H2 = new Set([...HOP_BY_HOP, 'sec-websocket-accept']);
// On a 200 to an extended CONNECT only these travel (RFC 8441 5: what the handshake negotiated).
const ON_OPEN = ['sec-websocket-protocol', 'sec-websocket-extensions'];

/** An extended CONNECT for a WebSocket (RFC 8441 4). */
export function isWebSocketConnect(req: Http2ServerRequest): boolean {
  return req.method === 'CONNECT' && req.headers[':protocol'] === 'websocket';
}

/**
 * Rewrites a checked extended CONNECT (after checkH2RequestHead) into the HTTP/1.1 handshake the
 * UpgradeProxy reads: GET, Upgrade: websocket and a Sec-WebSocket-Key of roomgate's own.
 * Sec-WebSocket-Version, -Protocol and -Extensions pass as the browser sent them.
 */
export function asUpgradeRequest(req: Http2ServerRequest): void {
  const headers = req.headers;
  // A CONNECT stream never ends: that is no request body, the tunnel carries what follows.
  delete headers['transfer-encoding'];
  const key = randomBytes(16).toString('base64');
  headers.upgrade = 'websocket';
  headers['sec-websocket-key'] = key;
  req.rawHeaders.push('Upgrade', 'websocket', 'Sec-WebSocket-Key', key);
  // The compatibility request's method is its :method header; the tunnel asks for GET.
  (req as { method: string }).method = 'GET';
}

/** The client side of a tunnel when the client is an h2 stream (see the top of this file). */
export class H2WebSocketClient extends Duplex {
  /** Read by the upgrade proxy for X-Forwarded-For (the h2 connection's peer). */
  readonly remoteAddress: string | undefined;
  /** The HTTP/1.1 answer head so far; null once the stream has been answered. */
  private head: Buffer | null = Buffer.alloc(0);
  /** A refusal whose body is chunked on HTTP/1.1: its bytes are not sent on (no de-chunking). */
  private dropRest = false;
  private readonly stream: ServerHttp2Stream;

  constructor(
    private readonly req: Http2ServerRequest,
    peer: string | undefined,
  ) {
    super({ allowHalfOpen: true });
    this.remoteAddress = peer;
    this.stream = req.stream;
    req.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) req.pause();
    });
    req.on('end', () => this.push(null));
    req.on('error', (err: Error) => this.destroy(err));
    this.stream.on('close', () => this.destroy());
    this.stream.on('error', () => this.destroy());
  }

  /** Socket methods the tunnel calls: TCP options have no meaning on a stream. */
  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  setTimeout(ms: number, onIdle?: () => void): this {
    this.stream.setTimeout(ms, onIdle ? () => onIdle.call(this) : undefined);
    return this;
  }

  override _read(): void {
    this.req.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.stream.destroyed) return done();
    if (this.head === null) {
      if (this.dropRest) return done();
      this.stream.write(chunk, () => done());
      return;
    }
    const head = Buffer.concat([this.head, chunk]);
    // The answer head is read whole before the stream is answered, within the tunnel's own limit.
    const parsed = parseResponseHead(head, MAX_RESPONSE_HEAD_BYTES);
    if (parsed === null) {
      this.head = head;
      return done();
    }
    this.head = null;
    // The tunnel writes only answers it parsed itself or made itself: a bad one is a bug here.
    if (!parsed.ok) return done(new Error(`unreadable answer for an h2 WebSocket: ${parsed.error}`));
    const rest = head.subarray(parsed.head.end);
    try {
      this.stream.respond(h2Answer(parsed.head));
    } catch (err) {
      return done(err as Error);
    }
    this.dropRest = parsed.head.status !== 101 && (headerValue(parsed.head, 'transfer-encoding') ?? '') !== '';
    if (rest.length === 0 || this.dropRest) return done();
    this.stream.write(Buffer.from(rest), () => done());
  }

  override _final(done: (err?: Error | null) => void): void {
    if (this.head !== null) {
      // Ended before any answer: nothing can be said on the stream but a reset.
      this.stream.close(NGHTTP2_CANCEL);
      return done();
    }
    if (!this.stream.destroyed) this.stream.end();
    done();
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    if (!this.stream.destroyed) this.stream.close(NGHTTP2_CANCEL);
    done(err);
  }
}

/** The h2 answer for the HTTP/1.1 answer a tunnel wrote. */
function h2Answer(head: ResponseHead): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  if (head.status === 101) {
    out[':status'] = 200;
    for (const name of ON_OPEN) {
      const v = headerValue(head, name);
      if (v !== undefined) out[name] = v;
    }
    return out;
  }
  out[':status'] = head.status;
  const chunked = (headerValue(head, 'transfer-encoding') ?? '') !== '';
  for (const [name, value] of head.headers) {
    const lower = name.toLowerCase();
    if (NOT_ON_H2.has(lower) || (chunked && lower === 'content-length')) continue;
    const prev = out[lower];
    out[lower] = prev === undefined ? value : ([] as string[]).concat(prev as string | string[], value);
  }
  // A chunked body is not relayed: the answer says there is none.
  if (chunked) out['content-length'] = '0';
  return out;
}
