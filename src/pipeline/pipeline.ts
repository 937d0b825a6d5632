// The request pipeline: the one order in which a request on the public port meets roomgate's
// rules, written once for every front (the byte-level HTTP/1.1 front, node:http for HTTP/1.1 and
// HTTP/1.1 over TLS, the HTTP/2 front, its extended CONNECT WebSockets, and each of them in a
// worker). A front only turns its wire form into the canonical request (src/http/client-request.ts)
// and writes answers back; what happens to a request is decided here, top to bottom:
//
//   1. head checks      each front's parser applies the shared rules of src/http/ (the canonical
//                       target and the reserved paths of target.ts, the header limits, Host, the
//                       framing) and hands over only a request that passed them
//   2. health           /healthz, /readyz: answered here, before anything else, touching nothing
//   3. roomgate's own   the control plane's paths (public API, pages, the status page); the
//                       backend-only paths (push.path) never get here: step 1 answers them 404
//   4. static           the configured static mounts, served from disk
//   5. method           the methods forwarded to the app (src/http/methods.ts): 405 or 501 else;
//                       a WebSocket handshake: its rules instead (RFC 6455, proxy.websocketPaths)
//   6. body             read up to proxy.bufferBodyBytes before any backend request opens (413)
//   7. room key         the pure extractor (src/room/extract.ts) through the Router; a request
//                       whose per-tab room pin is bad is refused here (400/403), never routed
//   8. cache            the page cache answers, or passes the request on with its Cache-Status
//   8a. handoff wait    a room in a version-2 handoff here (src/runtime/handoff-pages.ts): the
//                       request (a page or a WebSocket handshake) waits for its end
//                       (handoff.timeoutMs per step still to run), then goes on to step 9 and the
//                       room's owner at that moment; past the bound 503 `room-handoff`
//                       (Retry-After). A cached answer does not wait: no backend
//   9. placement,       the forwarding core (src/forward/forwarder.ts): the room's backend by its
//      admission,       placement, the upgrade admission limits, then the attempt on the request's
//      forward          transport, retried on the next backend when nothing can be lost
//
// Upgrades take steps 1, 5, 7, 8a and 9 (a WebSocket is always the app's, and never cached).
// Transports (how the bytes of one request and its answer move: node:http's ServerResponse for
// HTTP/1.1 and HTTP/2, the byte-level connection, the upgrade tunnel) plug in below as the
// PageTransport and UpgradePath interfaces; none of them decides anything listed above.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { AnswerWriter, PageCacheFront } from '../cache/contract.js';
import type { Exchange } from '../forward/forwarder.js';
import type { ClientRequest } from '../http/client-request.js';
import { healthAnswer } from '../http/health-answer.js';
import type { MethodPolicy } from '../http/methods.js';
import type { PageClient } from '../http/page-client.js';
import type { ClientRefusal, Refusal } from '../http/refusals.js';
import { plainResponse } from '../http/replies.js';
import type { PageCookies } from '../proxy/page-cookie.js';
import type { BodyPlan } from '../proxy/request-body.js';
import type { KeyResult } from '../room/extract.js';

/** A part of roomgate that answers some paths itself (the control plane, the static mounts). */
export interface OwnPaths {
  owns(url: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
}

/**
 * How one transport carries a page request and its answer: `T` is the transport's handle on the
 * client (node:http's ServerResponse for HTTP/1.1 and HTTP/2; the byte-level connection).
 */
export interface PageTransport<T> {
  /** roomgate's own answer instead of the backend's (src/http/refusals.ts), counted. */
  refuse(r: ClientRequest, t: T, refusal: Refusal): void;
  /** Step 6: the body as proxy.bufferBodyBytes says; `then` is not called when the client left first. */
  readBody(r: ClientRequest, t: T, then: (body: BodyPlan) => void): void;
  /** How the page cache writes its answer on this transport. */
  cacheWriter(r: ClientRequest, t: T): AnswerWriter;
  /** The request as the forwarding core carries it on this transport. */
  exchange(r: ClientRequest, t: T, key: KeyResult, body: BodyPlan, cacheStatus: string | null): Exchange;
}

/** The WebSocket path (src/proxy/upgrade-proxy.ts; each tunnel: upgrade-tunnel.ts): the handshake rules and the tunnel. */
export interface UpgradePath {
  /** The client socket becomes the path's (held, its end heard); false when it is already gone. */
  take(client: Socket): boolean;
  /** Step 5 for a handshake: the rules it breaks, or null. */
  refusal(r: ClientRequest, key: KeyResult): ClientRefusal | null;
  /** A handshake the rules refused: the client's own mistake, answered on its socket. */
  refuseHandshake(client: Socket, refusal: ClientRefusal): void;
  /** roomgate's own answer from the catalogue (src/http/refusals.ts), on the client's socket. */
  refuse(client: Socket, refusal: Refusal): void;
  /** The handshake as the forwarding core carries it: admitted per backend, then a tunnel. */
  exchange(r: ClientRequest, key: KeyResult, client: Socket, rest: Buffer | null): Exchange;
}

export interface PipelineOptions {
  /** /readyz: false while stopping. */
  readonly isReady: () => boolean;
  /** The control plane's public paths (src/control/). */
  readonly control: OwnPaths;
  /** The static mounts, or null when none is configured. */
  readonly statics: OwnPaths | null;
  readonly methods: MethodPolicy;
  /** Step 7: the room key of a request (src/proxy/router.ts), counting and logging refused keys. */
  readonly roomKey: { keyFor(r: ClientRequest, nowMs: number): KeyResult };
  /** Step 8: the page cache; null when cache.paths is empty. */
  readonly cache: PageCacheFront | null;
  /** The room cookie a cached answer sets (a forwarded one gets it from its path). */
  readonly cookies: PageCookies;
  /** Step 9: the forwarding core. */
  readonly forward: { route(x: Exchange, nowMs: number): void };
  /** Page requests on node:http and HTTP/2 (src/proxy/http-proxy.ts). */
  readonly pages: PageTransport<ServerResponse>;
  /** Page requests on the byte-level front (src/proxy/lean-pages.ts), or null when it is off. */
  readonly leanPages: PageTransport<PageClient> | null;
  readonly upgrades: UpgradePath;
  /** Step 8a: a room in handoff here; null when it is not (the request goes on at once). */
  readonly handoffWait?: { wait(room: string | null): Promise<boolean> | null };
}

export class RequestPipeline {
  constructor(private readonly o: PipelineOptions) {}

  /** A request whose head passed step 1 on node:http or the HTTP/2 front: steps 2 to 9. */
  request(r: ClientRequest, req: IncomingMessage, res: ServerResponse): void {
    const url = r.target;
    const health = healthAnswer(url, this.o.isReady);
    if (health !== null) return answer(res, health.status, health.body);
    if (this.o.control.owns(url)) return this.o.control.handle(req, res);
    if (this.o.statics?.owns(url) === true) return this.o.statics.handle(req, res);
    this.app(r, this.o.pages, res);
  }

  /**
   * Steps 2 to 4 as a question, for the byte-level front: it answers only requests that go to the
   * app, and hands every other one to node:http, which brings it back through request().
   */
  goesToTheApp(url: string): boolean {
    return healthAnswer(url, this.o.isReady) === null && !this.o.control.owns(url) && this.o.statics?.owns(url) !== true;
  }

  /** Steps 5 to 9 for a request the byte-level front read (goesToTheApp said so). */
  page(r: ClientRequest, client: PageClient): void {
    // The front exists only with its page path: composition builds both or neither.
    this.app(r, this.o.leanPages as PageTransport<PageClient>, client);
  }

  /** A WebSocket handshake whose head passed step 1 (HTTP/1.1 on either front, or an HTTP/2 extended CONNECT). */
  upgrade(r: ClientRequest, client: Socket, rest: Buffer | null): void {
    const { o } = this;
    if (!o.upgrades.take(client)) return;
    const now = Date.now();
    const key = o.roomKey.keyFor(r, now);
    const refusal = o.upgrades.refusal(r, key);
    if (refusal !== null) return o.upgrades.refuseHandshake(client, refusal);
    const pin = pinRefusal(key);
    if (pin !== null) return o.upgrades.refuse(client, pin);
    // Built before any wait: it copies the bytes behind the head out of the front's read buffer.
    const x = o.upgrades.exchange(r, key, client, rest);
    this.afterHandoff(key.room, () => o.forward.route(x, Date.now()), (refusal) => o.upgrades.refuse(client, refusal));
  }

  /** Steps 5 to 9 of a page request on transport `t`. */
  private app<T>(r: ClientRequest, path: PageTransport<T>, t: T): void {
    const { o } = this;
    const verdict = o.methods.verdict(r.method);
    if (verdict !== 'forward') {
      // The body is not read: the connection ends after the answer.
      const code = verdict === 'unknown' ? 'method-unknown' : 'method-not-allowed';
      return path.refuse(r, t, { code, headers: { Allow: o.methods.allow }, detail: r.method });
    }
    path.readBody(r, t, (body) => {
      if (body.kind === 'too-large') return path.refuse(r, t, { code: 'body-too-large', detail: r.body });
      const now = Date.now();
      const key = o.roomKey.keyFor(r, now);
      const pin = pinRefusal(key);
      if (pin !== null) return path.refuse(r, t, pin);
      const cache = o.cache;
      if (cache === null) return this.forward(r, path, t, key, body, null);
      const ctx = { peer: r.peer, encrypted: r.encrypted, strippedPrefix: key.strippedPrefix };
      const setCookie = (): string | null => o.cookies.for(r, key);
      const request = { method: r.method, url: r.target, rawHeaders: r.rawHeaders, hasBody: r.body !== 'none', key, ctx, setCookie };
      cache.handle(request, path.cacheWriter(r, t), (cacheStatus) => this.forward(r, path, t, key, body, cacheStatus));
    });
  }

  /** Steps 8a and 9 of a page request. */
  private forward<T>(r: ClientRequest, path: PageTransport<T>, t: T, key: KeyResult, body: BodyPlan, cacheStatus: string | null): void {
    this.afterHandoff(key.room, () => this.o.forward.route(path.exchange(r, t, key, body, cacheStatus), Date.now()), (refusal) => path.refuse(r, t, refusal));
  }

  /**
   * Step 8a, for pages and WebSocket upgrades alike: a room in a handoff here waits for its end,
   * then `go`es on (to its owner at that moment: step 9 places it then); past the bound it is
   * refused 503 `room-handoff` with Retry-After, reaching no backend. Not in handoff: at once.
   */
  private afterHandoff(room: string | null, go: () => void, refuse: (refusal: Refusal) => void): void {
    const waiting = this.o.handoffWait?.wait(room) ?? null;
    if (waiting === null) return go();
    void waiting.then((ended) => (ended ? go() : refuse({ code: 'room-handoff', retryAfterS: 1, detail: `room ${room ?? ''}` })));
  }
}

/**
 * The answer to a request whose room pin was refused (step 7), or null. A bad pin is not passed
 * over like other bad keys: the page meant that room, and routing the socket by the cookie instead
 * is the split the pin exists to prevent. The reason goes to the log, never the pin's value.
 */
function pinRefusal(key: KeyResult): Refusal | null {
  const why = key.pinRefused;
  if (why === null) return null;
  const code = why === 'malformed' || why === 'invalid' ? 'room-pin-malformed' : 'room-pin-refused';
  return { code, detail: why };
}

/** A plain-text answer of roomgate's own (health), on an HTTP/1.1 or HTTP/2 response. */
function answer(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  const r = plainResponse(status, body, { 'Content-Type': 'text/plain' });
  res.writeHead(status, r.headers);
  res.end(r.body);
}
