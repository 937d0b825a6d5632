// The public listener's node:http front (HTTP/1.1, and HTTP/1.1 over TLS). Every request head is
// checked and brought to canonical form first (src/http/request-head.ts); the request then goes
// to the request pipeline (src/pipeline/pipeline.ts), which decides where it goes. This file keeps
// only the connection: its parse errors, pipelined answers in order, one refusal per connection.
// Proxied traffic does not go through a web framework: no body parsing, no routing tables on the
// hot path.
import { clientRefusal, refusalText } from '../http/refusals.js';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { TlsCertificates } from './tls.js';
import type { Socket } from 'node:net';
import type { RequestPipeline } from '../pipeline/pipeline.js';
import { requestOf } from '../http/client-request.js';
import { rememberPeer } from '../http/peer.js';
import { checkRequestHead, type HeadRefusal } from '../http/request-head.js';
import type { TargetRule } from '../http/target.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { plainResponse, rawResponse } from '../http/replies.js';
import { withHsts } from './hsts.js';
import { isToken } from '../http/syntax.js';
import { clearHeadDeadline } from './head-deadline.js';

export interface PublicServerOptions {
  readonly maxHeaderBytes: number;
  /** Request header lines accepted; more get 431. */
  readonly maxHeaders: number;
  /** The target's canonical form and the reserved paths (src/http/target.ts). */
  readonly target: TargetRule;
  /** The methods proxied requests may use (src/http/methods.ts): the Allow of OPTIONS * and of a CONNECT's 405. */
  readonly allow: string;
  readonly headersTimeoutMs: number;
  /** Time for a whole request (head and body) to arrive; 0 = no limit. */
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  /** Lower-case name of the room header (room.header), read into the canonical request. */
  readonly roomHeader: string;
  /** Where every checked request and upgrade goes (src/pipeline/pipeline.ts). */
  readonly pipeline: Pick<RequestPipeline, 'request' | 'upgrade'>;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** TLS on the port (https and wss only), or null: plain HTTP. */
  readonly tls: TlsCertificates | null;
  /** The Strict-Transport-Security value for every answer on the TLS port, or null. */
  readonly hsts: string | null;
  /** Offer h2 by ALPN on the TLS port; those connections are handed to an H2Front (h2-front.ts). */
  readonly http2: boolean;
}

export function createPublicServer(o: PublicServerOptions): http.Server {
  const server = listener(o);
  // One more than the limit: Node silently drops lines past maxHeadersCount, so the head check
  // sees "more than allowed" instead of a truncated list (which would lose our X-Forwarded-For
  // behind the app's own limit).
  server.maxHeadersCount = o.maxHeaders + 1;
  const limits = { maxHeaders: o.maxHeaders, target: o.target };
  server.on('connection', rememberPeer);

  const refused = (r: HeadRefusal, req: IncomingMessage): void => {
    o.metrics.clientErrors.inc({ code: String(r.status) });
    o.logger.debug({ code: r.status, method: req.method, reason: r.body.trim() }, 'request head refused');
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    clearHeadDeadline(req.socket);
    const conn = connection(req.socket);
    conn.open++;
    conn.last = req;
    conn.lastAnswer = res;
    res.once('close', () => answered(req.socket, conn));
    // A request pipelined behind a refused head (node:http parses the whole chunk before the
    // refusal's answer is out): never routed, never answered; the connection ends after the refusal.
    if (conn.closing) return void req.resume();
    const verdict = checkRequestHead(req, limits);
    if (!verdict.ok) {
      refused(verdict.refusal, req);
      // The connection ends after this answer; bytes after the refused head (its body, perhaps a
      // smuggled request) are never parsed into a second answer.
      conn.closing = true;
      return reply(res, verdict.refusal.status, verdict.refusal.body, { ...verdict.refusal.headers, Connection: 'close' });
    }
    if (verdict.asterisk) return reply(res, 200, '', { Allow: o.allow });
    const r = requestOf(req, o.roomHeader, false);
    // Reset before its address could be read: nobody will read an answer.
    if (r === null) return void res.destroy();
    o.pipeline.request(r, req, res);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    clearHeadDeadline(socket);
    const verdict = checkRequestHead(req, limits);
    if (!verdict.ok) {
      refused(verdict.refusal, req);
      endSocket(socket, rawResponse(verdict.refusal.status, verdict.refusal.body, verdict.refusal.headers));
      return;
    }
    const r = requestOf(req, o.roomHeader, true);
    if (r === null) return void socket.destroy();
    o.pipeline.upgrade(r, socket, head);
  });
  // roomgate is no forward proxy: CONNECT gets a plain answer instead of a silently closed socket.
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    clearHeadDeadline(socket);
    o.metrics.clientErrors.inc({ code: '405' });
    endSocket(socket, refusalText('connect', { Allow: o.allow }));
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => clientError(o, err, socket));
  return server;
}

/** The listener itself: node:http, or https (TLS with SNI, ALPN for h2) with the same limits. */
function listener(o: PublicServerOptions): http.Server {
  const options: http.ServerOptions = {
    maxHeaderSize: o.maxHeaderBytes,
    headersTimeout: o.headersTimeoutMs,
    keepAliveTimeout: o.keepAliveTimeoutMs,
    // A body that trickles in forever is cut after this (408); upgrades are not affected.
    requestTimeout: o.requestTimeoutMs,
    // Both timeouts are enforced by a sweep this often (Node's default, 30 s, would let a 20 s
    // limit run to 50 s); upgraded sockets are not in the swept list.
    connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(Math.min(o.headersTimeoutMs, o.requestTimeoutMs || Infinity) / 4))),
  };
  const tls = o.tls;
  if (!tls) return http.createServer(options);
  // https.Server is an http.Server underneath (same parser, events and limits); only the bytes
  // before the first request differ. The default certificate is given as PEM so `setSecureContext`
  // can swap it on reload; the others come from the SNI callback, which reads the current set.
  const server = https.createServer({
    ...options,
    ...(o.hsts ? { ServerResponse: withHsts(http.ServerResponse, o.hsts) } : {}),
    // h2 first: a client that speaks it gets it (the H2Front takes those sockets).
    ALPNProtocols: o.http2 ? ['h2', 'http/1.1'] : ['http/1.1'],
    cert: tls.default.certPem,
    key: tls.default.keyPem,
    minVersion: tls.settingsMinVersion,
    ...(tls.ticketKeys ? { ticketKeys: tls.ticketKeys } : {}),
    SNICallback: tls.sniCallback,
  });
  // A failed handshake (plain HTTP on the TLS port, a scanner, an old client) never reaches the
  // HTTP layer: counted and logged at debug, the socket is closed by Node.
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
    o.metrics.clientErrors.inc({ code: 'tls' });
    o.logger.debug({ err: err.code ?? err.message, peer: socket.remoteAddress }, 'TLS handshake failed');
  });
  return server;
}

/** A request node:http could not parse: one answer per connection, after the answers before it. */
function clientError(o: PublicServerOptions, err: NodeJS.ErrnoException, socket: Socket): void {
  // Only sockets still parsed as HTTP reach here, never an upgraded one.
  const refusal = clientRefusal(err.code === 'HPE_HEADER_OVERFLOW' ? 'headers-too-large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'head-timeout' : unknownMethod(err) ? 'method-not-parsed' : 'bad-request');
  const code = refusal.status;
  if (err.code !== 'ECONNRESET') o.metrics.clientErrors.inc({ code: String(code) });
  o.logger.debug({ err: err.code, code }, 'client error');
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const conn = connection(socket);
  // Already ending (a refused head's answer is on its way), or already refused: one answer only.
  if (conn.closing || conn.refusal !== null) return;
  conn.refusal = rawResponse(code, refusal.body);
  // A request that follows complete ones still being answered (pipelining): their responses
  // go first, in order, and the refusal follows the last (RFC 9112 9.3.2). A body that breaks
  // mid-way belongs to a request that can never be answered: the refusal goes out at once.
  const bodyBroke = conn.last !== null && !conn.last.complete;
  // Its answer has already begun (the backend answered before the body was whole): a refusal
  // now would land inside that answer. The connection is cut instead.
  if (bodyBroke && conn.lastAnswer?.headersSent === true) {
    socket.destroy();
    return;
  }
  if (conn.open === 0 || bodyBroke) socket.end(conn.refusal);
}

/** What the public listener tracks per client connection. */
interface ConnectionState {
  /** Requests whose response has not closed yet (pipelined ones included). */
  open: number;
  /** A response with Connection: close is under way; Node ends the connection after it. */
  closing: boolean;
  /** The answer to an unparseable request, sent once every earlier response is out. */
  refusal: string | null;
  /** The newest request parsed on the connection. */
  last: IncomingMessage | null;
  /** Its response. */
  lastAnswer: ServerResponse | null;
}

const STATE = Symbol('roomgate.connection');

function connection(socket: Socket): ConnectionState {
  const s = socket as Socket & { [STATE]?: ConnectionState };
  let state = s[STATE];
  if (state === undefined) {
    state = { open: 0, closing: false, refusal: null, last: null, lastAnswer: null };
    s[STATE] = state;
  }
  return state;
}

function answered(socket: Socket, conn: ConnectionState): void {
  conn.open--;
  if (conn.open === 0 && conn.refusal !== null && !conn.closing && socket.writable) socket.end(conn.refusal);
}

function reply(res: ServerResponse, status: number, body: string, headers: Record<string, string>): void {
  const r = plainResponse(status, body, headers);
  res.writeHead(status, r.headers);
  res.end(r.body);
}

/** Ends a socket Node no longer parses (upgrade, CONNECT) with one response, destroyed soon after. */
function endSocket(socket: Socket, response: string): void {
  socket.on('error', () => socket.destroy());
  socket.end(response);
  setTimeout(() => socket.destroy(), 1_000).unref();
}

/**
 * Node's parser knows a fixed list of methods and refuses the rest as a parse error. A well-formed
 * method it does not know gets 501, as on HTTP/2 (src/http/methods.ts); bytes that are no method
 * token at all stay a bad request (400).
 */
function unknownMethod(err: NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number }): boolean {
  if (err.code !== 'HPE_INVALID_METHOD' || !err.rawPacket) return false;
  // The packet may begin with earlier requests (pipelining): the failing one starts after the
  // last line break before where parsing stopped.
  const at = Math.min(err.bytesParsed ?? 0, err.rawPacket.length);
  const start = at > 0 ? err.rawPacket.lastIndexOf(0x0a, at - 1) + 1 : 0;
  const text = err.rawPacket.subarray(start, start + 64).toString('latin1');
  const space = text.indexOf(' ');
  return space > 0 && isToken(text.slice(0, space)) && text.charCodeAt(space + 1) === 0x2f;
}
