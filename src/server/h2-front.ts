// HTTP/2 on the TLS port. The TLS listener offers "h2" by ALPN; a connection that picked it is
// taken from the HTTP/1.1 server before that sees it and becomes an h2 session here. Each stream
// is checked and mapped to the HTTP/1.1 form (src/http/h2-request-head.ts), then handed to the
// request pipeline (src/pipeline/pipeline.ts) as an HTTP/1.1 request is: health, the control
// plane, static files, or the app's backend (over HTTP/1.1).
//
// Limits against abuse: concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS,
// enforced by nghttp2 with REFUSED_STREAM), header lines and bytes (431, the same limits as
// HTTP/1.1), a body that trickles (408 after requestTimeoutMs), idle connections (GOAWAY after
// keepAliveTimeoutMs), and rapid reset (CVE-2023-44487): streams the client resets before their
// answer draw on a per-connection budget (maxResets, refilled at maxResets per resetWindowS); the
// connection that overdraws it is closed with ENHANCE_YOUR_CALM, and a stream already reset when
// its request event comes never reaches the pipeline (no backend work for it).
import { peerAddress } from '../http/peer.js';
import { clientRefusal } from '../http/refusals.js';
import type { TargetRule } from '../http/target.js';
import http2, { type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { checkH2RequestHead, type H2HeadLimits } from '../http/h2-request-head.js';
import type { RequestPipeline } from '../pipeline/pipeline.js';
import { requestOf } from '../http/client-request.js';
import { plainResponse } from '../http/replies.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { withHsts } from './hsts.js';
import { asUpgradeRequest, H2WebSocketClient, isWebSocketConnect } from './h2-websocket.js';

const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;

export interface H2FrontOptions {
  readonly maxConcurrentStreams: number;
  /** Streams a connection may reset before their answer at once; the budget refills at this many per resetWindowS. */
  readonly maxResets: number;
  readonly resetWindowS: number;
  readonly maxHeaderBytes: number;
  readonly maxHeaders: number;
  /** The target's canonical form and the reserved paths (src/http/target.ts). */
  readonly target: TargetRule;
  /** The methods proxied requests may use (src/http/methods.ts): the Allow of OPTIONS * and of a CONNECT's 405. */
  readonly allow: string;
  /** A connection with no frames for this long gets GOAWAY (open streams may finish). */
  readonly idleTimeoutMs: number;
  /** Time for a request's body to arrive; 0 = no limit. */
  readonly requestTimeoutMs: number;
  readonly hsts: string | null;
  /** Lower-case name of the room header (room.header), read into the canonical request. */
  readonly roomHeader: string;
  /**
   * Where every checked stream goes, as its canonical request (src/http/client-request.ts). The
   * h2 request and response travel beside it for the bytes: after checkH2RequestHead they read
   * like an IncomingMessage (streaming body, socket) and the response takes
   * writeHead/write/end/pipe the same way. A WebSocket is handed over like an HTTP/1.1 upgrade:
   * the request in its HTTP/1.1 handshake form, an H2WebSocketClient as the client socket.
   */
  readonly pipeline: Pick<RequestPipeline, 'request' | 'upgrade'>;
  /** Offer WebSockets over h2 (RFC 8441, extended CONNECT). */
  readonly webSockets: boolean;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

/**
 * Per connection: the reset budget as a leaky bucket, its level the resets not yet drained (it
 * drains at maxResets per resetWindowS), read at `at`. Two numbers per connection whatever the
 * rate, made at its first reset.
 */
interface ResetBucket {
  level: number;
  at: number;
}

/** How long a socket may stay open after its session closed, waiting for the client's end. */
const SOCKET_LINGER_MS = 1_000;

/** How long a connection closed for abuse stays open after its GOAWAY. */
const GOAWAY_LINGER_MS = 200;

const RESETS = Symbol('roomgate.h2resets');
const PEER = Symbol('roomgate.h2peer');
const CUT = Symbol('roomgate.h2cut');
type Tracked = ServerHttp2Session & { [RESETS]?: ResetBucket; [PEER]?: string | undefined; [CUT]?: boolean };

export class H2Front {
  private readonly server: http2.Http2Server;
  private readonly sessions = new Set<ServerHttp2Session>();
  /** The sockets under them, which outlive a closed session until the client closes its side. */
  private readonly sockets = new Set<Socket>();
  /** A stop began: 'idle' sends GOAWAY to new connections too, 'all' refuses them. */
  private stopping: 'idle' | 'all' | null = null;
  /** The socket being handed to the h2 server right now (see attach). */
  private arriving: Socket | null = null;
  private readonly limits: H2HeadLimits;

  constructor(private readonly o: H2FrontOptions) {
    this.limits = { maxHeaders: o.maxHeaders, maxHeaderBytes: o.maxHeaderBytes, target: o.target };
    this.server = http2.createServer({
      settings: {
        maxConcurrentStreams: o.maxConcurrentStreams,
        // SETTINGS_ENABLE_CONNECT_PROTOCOL: browsers then open WebSockets as h2 streams.
        enableConnectProtocol: o.webSockets,
        // nghttp2 resets a stream whose header list passes this (ENHANCE_YOUR_CALM); twice the
        // limit, so a head somewhat over it gets checkH2RequestHead's 431 instead, as on HTTP/1.1.
        maxHeaderListSize: o.maxHeaderBytes * 2,
      },
      // nghttp2 drops a stream past this many header lines before any of our code runs (pseudo
      // headers count): a bound on the work a single HEADERS frame can cause.
      maxHeaderListPairs: o.maxHeaders + 8,
      ...(o.hsts ? { Http2ServerResponse: withHsts(http2.Http2ServerResponse, o.hsts) } : {}),
    });
    this.server.on('session', (s: ServerHttp2Session) => this.opened(s));
    this.server.on('request', (req: Http2ServerRequest, res: Http2ServerResponse) => this.request(req, res));
    // Node hands CONNECT streams (no 'request' for them) here.
    this.server.on('connect', (req: Http2ServerRequest, res: Http2ServerResponse) => this.connect(req, res));
    // Errors of sessions and streams end those; they must never reach the process.
    this.server.on('sessionError', (err: NodeJS.ErrnoException) => o.logger.debug({ err: err.code ?? err.message }, 'h2 session error'));
    this.server.on('streamError', (err: NodeJS.ErrnoException) => o.logger.debug({ err: err.code ?? err.message }, 'h2 stream error'));
  }

  /** Takes the TLS connections that negotiated h2 away from the HTTP/1.1 server. */
  attach(server: HttpsServer): void {
    // https.Server answers 'secureConnection' with its HTTP/1.1 parser: that listener now only
    // gets the connections that did not pick h2.
    const http1 = server.listeners('secureConnection') as ((socket: TLSSocket) => void)[];
    server.removeAllListeners('secureConnection');
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') {
        for (const l of http1) l.call(server, socket);
        return;
      }
      // A connection whose handshake finished after a stop began is not taken any more.
      if (this.stopping === 'all') return void socket.destroy();
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      // The 'session' event comes synchronously from this emit; it reads the socket from here
      // (a session only hands out a proxy of it, which throws once the two are parted).
      this.arriving = socket;
      try {
        this.server.emit('connection', socket);
      } finally {
        this.arriving = null;
      }
    });
  }

  /** GOAWAY on every connection: no new streams, the open ones finish. */
  closeIdle(): void {
    this.stopping ??= 'idle';
    for (const s of this.sessions) if (!s.closed) s.close();
  }

  /** Every connection cut at once (the grace period is over). */
  closeAll(): void {
    this.stopping = 'all';
    for (const s of this.sessions) s.destroy();
    for (const socket of this.sockets) socket.destroy();
  }

  private opened(session: ServerHttp2Session): void {
    const { o } = this;
    this.sessions.add(session);
    o.metrics.h2Sessions.inc();
    const socket = this.arriving as Socket;
    (session as Tracked)[PEER] = peerAddress(socket);
    session.on('close', () => {
      this.sessions.delete(session);
      // A closed session only ends its socket (FIN after GOAWAY); a client that never closes its
      // side would hold the connection (and a stop) open: it is cut shortly after.
      if (!socket.destroyed) setTimeout(() => socket.destroy(), SOCKET_LINGER_MS).unref();
    });
    session.on('error', (err: NodeJS.ErrnoException) => o.logger.debug({ err: err.code ?? err.message }, 'h2 connection error'));
    if (o.idleTimeoutMs > 0) session.setTimeout(o.idleTimeoutMs, () => session.close());
    // Stopping: the client gets GOAWAY at once (its first streams may still be answered).
    if (this.stopping !== null) session.close();
    session.on('stream', (stream: ServerHttp2Stream) => this.watchResets(session as Tracked, stream));
  }

  /**
   * Counts the stream against the reset budget if the client resets it before its answer's head.
   * node:http2 announces a stream a tick after its HEADERS, so one whose RST_STREAM came in the
   * same read is already closed here ('aborted' has fired): the attack's usual shape, counted at
   * once. Otherwise 'aborted' comes when the stream closes with our side still open: from the
   * client's RST_STREAM while the stream is live, or from our own destroy, which has marked the
   * stream destroyed before (not counted). A reset after the head (a cancelled download, a
   * closed WebSocket) is not counted: the backend's work was done, and browsers do it often.
   */
  private watchResets(session: Tracked, stream: ServerHttp2Stream): void {
    if (stream.aborted) return this.cancelled(session);
    stream.once('aborted', () => {
      if (!stream.destroyed && !stream.headersSent) this.cancelled(session);
    });
  }

  /** A stream the client reset before its answer: drawn from the budget; past it, the connection is closed. */
  private cancelled(session: Tracked): void {
    if (session.destroyed || session[CUT] === true) return;
    const { maxResets, resetWindowS } = this.o;
    const now = performance.now();
    const b = (session[RESETS] ??= { level: 0, at: now });
    b.level = Math.max(0, b.level - ((now - b.at) * maxResets) / (resetWindowS * 1_000)) + 1;
    b.at = now;
    if (b.level <= maxResets) return;
    session[CUT] = true;
    this.o.metrics.clientErrors.inc({ code: 'h2-rapid-reset' });
    this.o.logger.warn({ peer: session[PEER], maxResets, resetWindowS }, 'h2 client reset too many streams before their answer: connection closed');
    // GOAWAY first, so nghttp2 ignores any further stream, and the cut a moment later: a socket
    // destroyed at once, with the client's frames still arriving, is reset by the kernel and the
    // client may never read why.
    session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
    setTimeout(() => session.destroy(), GOAWAY_LINGER_MS).unref();
  }

  private request(req: Http2ServerRequest, res: Http2ServerResponse): void {
    const { o } = this;
    if (this.deadOnArrival(req)) return;
    const verdict = checkH2RequestHead(req, this.limits);
    if (!verdict.ok) {
      o.metrics.clientErrors.inc({ code: String(verdict.refusal.status) });
      o.logger.debug({ code: verdict.refusal.status, method: req.method, reason: verdict.refusal.body.trim() }, 'h2 request head refused');
      return reply(res, verdict.refusal.status, verdict.refusal.body, verdict.refusal.headers ?? {});
    }
    if (verdict.asterisk) return reply(res, 200, '', { Allow: this.o.allow });
    if (o.requestTimeoutMs > 0 && !req.stream.endAfterHeaders) bodyDeadline(req, res, o.requestTimeoutMs);
    const r = requestOf(req as unknown as IncomingMessage, o.roomHeader, false);
    // The session is gone before the stream's address could be read: nobody will read an answer.
    if (r === null) return void res.destroy();
    o.pipeline.request(r, req as unknown as IncomingMessage, res as unknown as ServerResponse);
  }

  /** Extended CONNECT for a WebSocket; plain CONNECT (a forward-proxy tunnel) is not offered, as on HTTP/1.1. */
  private connect(req: Http2ServerRequest, res: Http2ServerResponse): void {
    if (this.deadOnArrival(req)) return;
    if (this.o.webSockets && isWebSocketConnect(req)) return this.webSocket(req, res);
    this.o.metrics.clientErrors.inc({ code: '405' });
    const r = clientRefusal('connect');
    reply(res, r.status, r.body, { Allow: this.o.allow });
  }

  /**
   * A stream nobody will read an answer on, dropped before any work: closed by the client before
   * its request event (the request event comes a tick after the HEADERS, see watchResets), or
   * opened in the same read as the reset that overdrew the budget (refused: never processed).
   */
  private deadOnArrival(req: Http2ServerRequest): boolean {
    const { stream } = req;
    if (stream.closed || stream.destroyed) return true;
    if ((stream.session as Tracked | undefined)?.[CUT] !== true) return false;
    stream.close(NGHTTP2_REFUSED_STREAM);
    return true;
  }

  /** An extended CONNECT: the same head rules, then the upgrade path with a stream for a socket. */
  private webSocket(req: Http2ServerRequest, res: Http2ServerResponse): void {
    const { o } = this;
    const verdict = checkH2RequestHead(req, this.limits);
    if (!verdict.ok || verdict.asterisk) {
      const refusal = verdict.ok ? clientRefusal('websocket-no-path') : verdict.refusal;
      o.metrics.clientErrors.inc({ code: String(refusal.status) });
      return reply(res, refusal.status, refusal.body, {});
    }
    asUpgradeRequest(req);
    o.metrics.h2WebSockets.inc();
    const client = new H2WebSocketClient(req, (req.stream.session as Tracked | undefined)?.[PEER]);
    const r = requestOf(req as unknown as IncomingMessage, o.roomHeader, true);
    if (r === null) return void client.destroy();
    o.pipeline.upgrade(r, client as unknown as Socket, null);
  }
}

/**
 * A body that has not fully arrived in time: 408 if no answer started, and the stream ends there
 * (RST_STREAM NO_ERROR after a complete answer tells the client to stop sending, RFC 9113 8.1).
 */
function bodyDeadline(req: Http2ServerRequest, res: Http2ServerResponse, ms: number): void {
  const timer = setTimeout(() => {
    if (req.complete) return;
    if (res.headersSent) return req.stream.close(NGHTTP2_CANCEL);
    res.once('finish', () => req.stream.close(NGHTTP2_NO_ERROR));
    reply(res, 408, clientRefusal('head-timeout').body, {});
  }, ms);
  const clear = (): void => clearTimeout(timer);
  req.once('end', clear);
  res.once('close', clear);
}

function reply(res: Http2ServerResponse, status: number, body: string, headers: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  const r = plainResponse(status, body, headers);
  res.writeHead(status, r.headers);
  res.end(r.body);
}
