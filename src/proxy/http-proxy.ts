// Proxies plain HTTP requests (pages, assets, API calls of the app) to the room's backend on
// node:http's client, for requests that came on node:http (HTTP/1.1, TLS) or HTTP/2: the
// transport of steps 6 and 9 of the request pipeline (src/pipeline/pipeline.ts), which decided
// everything before. Bodies are streamed both ways; backend connections are kept alive per backend.
import type { AnswerWriter } from '../cache/contract.js';
import type { ClientRequest } from '../http/client-request.js';
import { hasBody, readBody, type BodyLimits, type BodyPlan } from './request-body.js';
import { REFUSALS, type Refusal } from '../http/refusals.js';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { tlsOptions, type BackendTls } from '../backends/backend-tls.js';
import type { Backend } from '../runtime/pool.js';
import type { KeyResult } from '../room/extract.js';
import type { Owner } from '../http/ownership.js';
import { MAX_RESPONSE_HEADERS, responseHeadProblem } from '../http/response-rules.js';
import { endToEndFields, withoutLength } from '../http/hop-by-hop.js';
import { BackendAgents } from '../forward/backend-agents.js';
import { cutAnswer, dropUnsentFields, isGone, ResponseAnswer } from './cache-answers.js';
import { resetConnection } from '../http/reset.js';
import type { Exchange, Forwarder } from '../forward/forwarder.js';
import { clientStalled, pageLocationTarget, pinTagsOf, type PagePathOptions } from './request-count.js';
import { HeadScanner, injectable, injectedFields, pairsOf } from '../http/pin-inject.js';
import { relayScanned } from './pin-stream.js';
import { rewriteAnswerFields } from '../http/location.js';
import { startRequest } from '../forward/request-count.js';

export interface HttpProxyOptions extends PagePathOptions {
  /** proxy.bufferBodyBytes and proxy.maxBodyBytes. */
  readonly body: BodyLimits;
  /** A streamed body (past the buffer) that sends nothing for this long ends its request; 0 = never. */
  readonly bodyIdleTimeoutMs: number;
  /** TLS toward https:// backends. */
  readonly backendTls: BackendTls;
}

// RFC 9110 9.2.2: a request of these methods may be sent again when a reused keep-alive
// connection was closed under it (the backend may or may not have seen it).
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** How a failed attempt may be retried on another connection. */
interface Replay {
  /**
   * No body, or one read whole (src/proxy/request-body.ts): nothing is lost when a connection is
   * refused, so the request can be tried on the next backend.
   */
  readonly resendable: boolean;
  /** Bodyless and idempotent: may also be resent after a reset of a reused connection. */
  readonly afterReset: boolean;
  /** The body: none, read whole, or its first bytes with the rest still to stream. */
  readonly body: BodyPlan;
}

// The node:http and HTTP/2 page transport of the request pipeline (src/pipeline/pipeline.ts: its
// PageTransport, structurally: a path never imports the pipeline).
export class HttpProxy {
  private readonly agents: BackendAgents;
  /** Placement, passive health and retries of every attempt (src/forward/forwarder.ts). */
  private readonly forwarder: Forwarder;

  constructor(private readonly o: HttpProxyOptions) {
    this.forwarder = o.forwarder;
    this.agents = new BackendAgents(o.maxIdleSocketsPerBackend, o.backendIdleTimeoutMs);
  }

  /** An answer made by roomgate itself, counted under the status it sends. */
  refuse(_r: ClientRequest, res: ServerResponse, refusal: Refusal, cacheStatus: string | null = null): void {
    this.o.metrics.httpRequests.inc({ backend: refusal.backend ?? 'none', status: String(REFUSALS[refusal.code].status) });
    this.reply(res.req, res, refusal, cacheStatus);
  }

  /** The body first (up to proxy.bufferBodyBytes): no backend request is open while it arrives. */
  readBody(_r: ClientRequest, res: ServerResponse, then: (body: BodyPlan) => void): void {
    readBody(res.req, this.o.body, (body) => {
      if (!isGone(res)) then(body);
    });
  }

  cacheWriter(r: ClientRequest, res: ServerResponse): AnswerWriter {
    return new ResponseAnswer(res, r.method === 'HEAD', r.transport === 'h2', (refusal, extra) => this.reply(res.req, res, { ...refusal, headers: { ...refusal.headers, ...extra } }, null));
  }

  exchange(r: ClientRequest, res: ServerResponse, key: KeyResult, body: BodyPlan, cacheStatus: string | null): Exchange {
    const replay: Replay = { resendable: r.body === 'none' || body.kind === 'buffered', afterReset: r.body === 'none' && IDEMPOTENT.has(r.method), body };
    return new HttpExchange(this, r, res.req, res, key, replay, cacheStatus);
  }

  /** roomgate's answer for an exchange: counted here unless its attempt's accounting did. */
  answer(x: HttpExchange, refusal: Refusal, counted: boolean): void {
    if (counted) this.reply(x.req, x.res, refusal, x.cacheStatus);
    else this.refuse(x.r, x.res, refusal, x.cacheStatus);
  }

  /** An attempt routed to `backend` (src/forward/forwarder.ts): the request goes out on node:http's client. */
  send(x: HttpExchange, backend: Backend, owner: Owner | null, attempt: number): void {
    const { o } = this;
    const { r, req, res, key, replay } = x;
    const ctx = { peer: r.peer, encrypted: r.encrypted, strippedPrefix: key.strippedPrefix, owner };
    const done = startRequest(o.pool, o.metrics, backend.id);
    const proxyReq = (backend.config.tls ? https : http).request({
      host: backend.config.host,
      port: backend.config.port,
      method: r.method,
      path: key.forwardUrl,
      headers: framed(o.forwarding.headers(r.rawHeaders, ctx, false), req, replay.body),
      // A retry after a pooled connection was closed under the request takes none of the pool's.
      agent: this.agents.for(backend, x.freshConnection),
      timeout: o.responseTimeoutMs,
      // https://: the CA list, client certificate, verification and SNI of `backendTls`.
      ...(backend.config.tls ? tlsOptions(o.backendTls, backend.config.host) : {}),
    });
    // One more than relayed: Node drops lines past its limit silently; this way the check sees them.
    proxyReq.maxHeadersCount = MAX_RESPONSE_HEADERS + 1;
    const attemptOf: AttemptState = { backend, attempt, done, proxyReq, upstream: null, connectTimer: null };
    proxyReq.on('socket', (s: Socket) => {
      if (!s.connecting) return;
      attemptOf.connectTimer = setTimeout(() => proxyReq.destroy(Object.assign(new Error('connect timeout'), { code: 'ECONNTIMEOUT' })), o.connectTimeoutMs);
      // An https backend's connection is made once its TLS handshake is complete and verified.
      s.once(s instanceof TLSSocket ? 'secureConnect' : 'connect', () => {
        if (attemptOf.connectTimer) clearTimeout(attemptOf.connectTimer);
        this.forwarder.connected(backend);
      });
    });
    proxyReq.on('timeout', () => proxyReq.destroy(Object.assign(new Error('response timeout'), { code: 'ERESPONSETIMEOUT' })));
    // A 101 to a request that asked for no upgrade: nothing sane can be relayed.
    proxyReq.on('upgrade', (_res: IncomingMessage, upSocket: Socket) => {
      upSocket.destroy();
      this.forwarder.badAnswer(x, backend, 'a 101 to a request without Upgrade', done);
    });
    proxyReq.on('response', (proxyRes: IncomingMessage) => this.relayAnswer(x, attemptOf, proxyRes));
    proxyReq.on('error', (err: NodeJS.ErrnoException) => this.attemptFailed(x, attemptOf, err));
    // The client went away before the backend answered, or its body never arrived in full (it
    // was refused with 408, or its connection died): stop the backend work too. No answer head
    // yet is enough: an h2 stream the client reset reads as finished (node ends its writable
    // side), and its backend request would stay open until the backend answered.
    res.on('close', () => {
      if (!res.writableFinished || !req.complete || attemptOf.upstream === null) proxyReq.destroy();
      // No backend answer came (the client left, or the h2 front answered 408 for a body that
      // stopped and the stream closed): the request ends here, and is counted here (the answer's
      // own close counts it otherwise), so the backend's in-flight count never keeps it.
      if (attemptOf.upstream === null) done(res.headersSent ? res.statusCode : null);
    });
    sendBody(req, res, proxyReq, replay.body, { idleMs: o.bodyIdleTimeoutMs, maxBytes: o.body.maxBytes }, (code) => {
      done(REFUSALS[code].status);
      this.reply(req, res, { code, backend: backend.id }, x.cacheStatus);
    });
  }

  /** The backend's answer head arrived: checked, then relayed with its body. */
  private relayAnswer(x: HttpExchange, a: AttemptState, proxyRes: IncomingMessage): void {
    const { o } = this;
    const { r, res, key } = x;
    const { backend, done } = a;
    a.upstream = proxyRes;
    if (a.connectTimer) clearTimeout(a.connectTimer);
    // The head arrived: a slow or long-lived body (downloads, server-sent events) is not cut.
    a.proxyReq.setTimeout(0);
    // The rules of every answer; toward an h2 client, also what HTTP/2 cannot carry.
    const problem = responseHeadProblem(proxyRes, r.transport === 'h2');
    if (problem !== null) {
      // Never back into the keep-alive pool: the rest of that stream cannot be trusted.
      proxyRes.socket.destroy();
      return this.forwarder.badAnswer(x, backend, problem, done);
    }
    // Hop-by-hop fields (and those its Connection header names) belong to the backend
    // connection; Node writes its own framing. A 204 has no body to frame (RFC 9110 8.6: no
    // Content-Length on it; HTTP/2 clients reset a stream that has one).
    const status = proxyRes.statusCode ?? 502;
    const headers = status === 204 ? withoutLength(endToEndFields(proxyRes.rawHeaders)) : endToEndFields(proxyRes.rawHeaders);
    const location = pageLocationTarget(o, r, backend);
    if (location !== null) rewriteAnswerFields(headers, location);
    const cookie = o.cookies.for(r, key);
    if (cookie) headers.push('Set-Cookie', cookie);
    if (x.cacheStatus !== null) headers.push('Cache-Status', x.cacheStatus);
    const writeHead = (fields: string[]): boolean => {
      try {
        // h2 has no reason phrase (Node warns when given one).
        if (r.transport === 'h2') res.writeHead(status, fields);
        else res.writeHead(status, proxyRes.statusMessage, fields);
        return true;
      } catch (err) {
        // Whatever Node's own checks refuse beyond the rules above (on HTTP/2: a field that may
        // appear once, twice): a 502, not a dead process.
        dropUnsentFields(res);
        proxyRes.socket.destroy();
        this.forwarder.badAnswer(x, backend, (err as Error).message, done);
        return false;
      }
    };
    const tags = pinTagsOf(o, r, key.room);
    const scan = tags !== null && injectable(status, pairsOf(headers)) ? new HeadScanner(tags()) : null;
    if (scan !== null) {
      // room.pinInject: the head waits for the scanner, with the length of what is sent.
      const length = proxyRes.headers['content-length'];
      relayScanned(proxyRes, res, scan, (added) => {
        // Tags in: the page is no longer the backend's bytes, so its validators go too.
        const fields = scan.injected ? injectedFields(headers, null) : withoutLength(headers);
        return writeHead(length === undefined ? fields : [...fields, 'Content-Length', String(Number(length) + added)]);
      });
    } else if (!writeHead(headers)) return;
    else proxyRes.pipe(res);
    if (o.clientWriteTimeoutMs > 0) cutWhenStalled(proxyRes, res, o.clientWriteTimeoutMs, () => clientStalled(o, key.room, backend.id));
    // The backend broke off mid-answer: the client must not take what it got for the whole answer.
    proxyRes.on('error', () => cutAnswer(res));
    proxyRes.on('aborted', () => cutAnswer(res));
    res.on('close', () => {
      done(status);
      if (!proxyRes.complete) proxyRes.destroy();
    });
  }

  /** The backend request failed: after a complete answer, mid-answer, or before any (the forwarding core decides). */
  private attemptFailed(x: HttpExchange, a: AttemptState, err: NodeJS.ErrnoException): void {
    const { o } = this;
    const { res, key, replay } = x;
    const { backend, done } = a;
    if (a.connectTimer) clearTimeout(a.connectTimer);
    // The client already has its whole answer (a 502 of ours, or the backend's complete one):
    // a late error of the backend connection must not cut the client's connection under it.
    if (res.writableEnded) {
      // Counted once whoever ended it (a 408 of the h2 body deadline ends it with nothing else to count it).
      done(res.statusCode);
      return;
    }
    // The backend's response was complete and then more bytes followed (a body on a 204, 304 or
    // HEAD answer, or garbage): Node's parser fails on those. The connection is destroyed
    // (never reused); the complete response still reaches the client as it was framed.
    if (a.upstream !== null && a.upstream.complete) {
      o.metrics.proxyErrors.inc({ backend: backend.id, kind: 'bad-response' });
      o.logger.warn({ room: key.room, backend: backend.id, method: x.r.method, err: err.code ?? err.message }, 'backend sent bytes after a complete response; its connection was closed');
      return;
    }
    // An answer whose head waits for the pin's scanner (room.pinInject) and broke off is cut as
    // well, as the byte-level path cuts it: the backend's answer had begun.
    if (res.headersSent || res.destroyed || a.upstream !== null) {
      // Mid-response: the status line is gone, all we can do is cut the client off.
      this.forwarder.lost(x, backend, err);
      done(res.headersSent ? res.statusCode : null);
      cutAnswer(res);
      return;
    }
    // Nothing reached the backend (connect failed), or a reused keep-alive socket was closed
    // under a request that may be sent again: the forwarding core retries or answers.
    this.forwarder.failed(x, { backend, attempt: a.attempt, err, resendable: replay.resendable, afterReset: a.proxyReq.reusedSocket && replay.afterReset, done });
  }

  private reply(req: IncomingMessage, res: ServerResponse, refusal: Refusal, cacheStatus: string | null): void {
    if (res.headersSent || isGone(res)) return;
    const r = this.o.refuser.render(refusal, req.headers.accept);
    if (cacheStatus !== null) r.headers['Cache-Status'] = cacheStatus;
    // A body not read to its end (a refused method, a body too large, one that stopped) would be
    // read as the next request's bytes or trickle into a second answer: the connection ends here.
    if (req.httpVersionMajor === 1 && hasBody(req) && !req.complete) r.headers.Connection = 'close';
    try {
      res.writeHead(r.status, r.headers);
    } catch {
      // Node refused our own answer on this response (fields left on it by a failed write): the
      // client's request (an h2 stream, or the HTTP/1.1 connection) is cut, the process lives on.
      cutAnswer(res);
      return;
    }
    // A HEAD answer has the GET answer's fields and no body.
    res.end(req.method === 'HEAD' ? undefined : r.body);
  }

  close(): void {
    this.agents.close();
  }
}

/** One request being forwarded on node:http's or HTTP/2's page path (the forwarding core's Exchange). */
class HttpExchange implements Exchange {
  readonly path = 'page';
  /** The next attempt opens a new backend connection (src/forward/forwarder.ts sets it). */
  freshConnection = false;
  constructor(
    private readonly proxy: HttpProxy,
    readonly r: ClientRequest,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly key: KeyResult,
    readonly replay: Replay,
    /** The Cache-Status of a request the page cache passed on (its answer is made here), else null. */
    readonly cacheStatus: string | null,
  ) {}

  get room(): string | null {
    return this.key.room;
  }

  get source(): string | null {
    return this.key.source;
  }

  gone(): boolean {
    return isGone(this.res);
  }

  send(backend: Backend, owner: Owner | null, attempt: number): void {
    this.proxy.send(this, backend, owner, attempt);
  }

  refuse(refusal: Refusal, counted: boolean): void {
    this.proxy.answer(this, refusal, counted);
  }
}

/** One attempt's backend request and what its handlers share. */
interface AttemptState {
  readonly backend: Backend;
  readonly attempt: number;
  readonly done: (status: number | null) => void;
  readonly proxyReq: http.ClientRequest;
  /** The backend's answer once its head arrived; its completeness decides what a late error means. */
  upstream: IncomingMessage | null;
  connectTimer: NodeJS.Timeout | null;
}

/**
 * The pipe pauses the backend's answer while the client has not taken what was written: a pause
 * that lasts `ms` means the client reads nothing, and both connections are cut (res closing
 * destroys the backend's answer, above). Any progress (a resume) starts the wait again.
 */
function cutWhenStalled(source: IncomingMessage, res: ServerResponse, ms: number, onCut: () => void): void {
  let timer: NodeJS.Timeout | null = null;
  const disarm = (): void => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  source.on('pause', () => {
    disarm();
    timer = setTimeout(() => {
      timer = null;
      onCut();
      // HTTP/1.1: the client's connection; h2: the stream (the session serves on).
      if (res.socket !== null && !('stream' in res)) resetConnection(res.socket);
      cutAnswer(res);
    }, ms);
  });
  source.on('resume', disarm);
  res.once('close', disarm);
}

/**
 * The forwarded fields with the body's framing on the backend connection: a body read whole goes
 * with its Content-Length (a chunked or h2 body included). A streamed one keeps its Content-Length,
 * or is chunked: Transfer-Encoding is hop-by-hop, but Node chunks only POST/PUT/PATCH by itself,
 * and an unframed DELETE body on a keep-alive connection would be read by the backend as a second
 * request (smuggling).
 */
function framed(headers: string[], req: IncomingMessage, body: BodyPlan): string[] {
  if (body.kind === 'buffered') return [...withoutLength(headers), 'Content-Length', String(body.body.length)];
  if (req.headers['transfer-encoding'] !== undefined) headers.push('Transfer-Encoding', 'chunked');
  return headers;
}

/**
 * Sends the body: none, read whole, or the bytes read so far and then the rest as it comes. A
 * streamed body that sends nothing for `idleMs`, or passes `maxBytes`, ends the request: 408 or
 * 413 when no answer has started (`refuse`), the client cut otherwise, and the backend request
 * given up either way.
 */
function sendBody(
  req: IncomingMessage,
  res: ServerResponse,
  proxyReq: http.ClientRequest,
  body: BodyPlan,
  limits: { readonly idleMs: number; readonly maxBytes: number },
  refuse: (code: 'body-timeout' | 'body-too-large') => void,
): void {
  if (body.kind === 'none') return void proxyReq.end();
  if (body.kind === 'buffered') return void proxyReq.end(body.body);
  if (body.kind === 'too-large') return void proxyReq.destroy();
  let timer: NodeJS.Timeout | null = null;
  let sent = 0;
  const stop = (code: 'body-timeout' | 'body-too-large'): void => {
    disarm();
    req.unpipe(proxyReq);
    proxyReq.destroy();
    if (!res.headersSent) refuse(code);
    else cutAnswer(res);
  };
  const disarm = (): void => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  const onChunk = (n: number): void => {
    sent += n;
    if (limits.maxBytes > 0 && sent > limits.maxBytes) return stop('body-too-large');
    if (limits.idleMs <= 0) return;
    disarm();
    timer = setTimeout(stop, limits.idleMs, 'body-timeout');
  };
  for (const chunk of body.head) {
    proxyReq.write(chunk);
    onChunk(chunk.length);
    if (proxyReq.destroyed) return;
  }
  req.on('data', (c: Buffer) => onChunk(c.length));
  req.once('end', disarm);
  res.once('close', disarm);
  req.pipe(proxyReq);
}
