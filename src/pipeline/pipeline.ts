// The request pipeline: the one order in which a request on the public port meets roomgate's
// rules, written once for every front (the byte-level HTTP/1.1 front, node:http for HTTP/1.1 and
// HTTP/1.1 over TLS, the HTTP/2 front, its extended CONNECT WebSockets, and each of them in a
// worker). A front only turns its wire form into a checked request and writes answers back; which
// request goes where is decided here and nowhere else:
//
//   1. head checks      each front's parser applies the shared rules of src/http/ (the canonical
//                       target and the reserved paths of target.ts, the header limits, Host, the
//                       framing) and hands over only a request that passed them
//   2. health           /healthz, /readyz: answered here, before anything else, touching nothing
//   3. roomgate's own   the control plane's paths (public API, pages, the status page); the
//                       backend-only paths (push.path) never get here: step 1 answers them 404
//   4. static           the configured static mounts, served from disk
//   5. the app          everything else, in its path (src/proxy/): the method rule, the room key,
//                       the page cache, placement, admission (upgrades), then the forwarding core
//                       (src/forward/) sends it to the room's backend
//
// Upgrades take steps 1 and 5 (a WebSocket is always the app's).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { healthAnswer } from '../http/health-answer.js';
import type { LeanHandshake, LeanHead } from '../http/lean-request-head.js';
import type { PageClient } from '../http/page-client.js';
import { plainResponse } from '../http/replies.js';

/** A part of roomgate that answers some paths itself (the control plane, the static mounts). */
export interface OwnPaths {
  owns(url: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
}

export interface PipelineOptions {
  /** /readyz: false while stopping. */
  readonly isReady: () => boolean;
  /** The control plane's public paths (src/control/). */
  readonly control: OwnPaths;
  /** The static mounts, or null when none is configured. */
  readonly statics: OwnPaths | null;
  /** The app's page requests on node:http and HTTP/2 (src/proxy/http-proxy.ts). */
  readonly pages: { handle(req: IncomingMessage, res: ServerResponse): void };
  /** The app's page requests on the byte-level front (src/proxy/lean-pages.ts), or null when it is off. */
  readonly leanPages: { handle(head: LeanHead, client: PageClient): void } | null;
  /** WebSocket upgrades, HTTP/1.1 and HTTP/2 (src/proxy/upgrade-proxy.ts). */
  readonly upgrades: {
    handle(req: IncomingMessage, client: Socket, head: Buffer): void;
    handleLean(handshake: LeanHandshake, client: Socket, rest: Buffer | null, encrypted: boolean): void;
  };
}

export class RequestPipeline {
  constructor(private readonly o: PipelineOptions) {}

  /** A request whose head passed step 1 on node:http or the HTTP/2 front: steps 2 to 5. */
  request(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const health = healthAnswer(url, this.o.isReady);
    if (health !== null) return answer(res, health.status, health.body);
    if (this.o.control.owns(url)) return this.o.control.handle(req, res);
    if (this.o.statics?.owns(url) === true) return this.o.statics.handle(req, res);
    this.o.pages.handle(req, res);
  }

  /** A WebSocket handshake whose head passed step 1 (an HTTP/1.1 upgrade or an HTTP/2 extended CONNECT). */
  upgrade(req: IncomingMessage, client: Socket, head: Buffer): void {
    this.o.upgrades.handle(req, client, head);
  }

  /**
   * A WebSocket handshake the byte-level front read (step 1 passed there: the subset of
   * src/http/lean-request-head.ts and the canonical target): step 5, as upgrade() takes it.
   */
  leanUpgrade(handshake: LeanHandshake, client: Socket, rest: Buffer | null, encrypted: boolean): void {
    this.o.upgrades.handleLean(handshake, client, rest, encrypted);
  }

  /**
   * Steps 2 to 4 as a question, for the byte-level front: it answers only requests that go to the
   * app, and hands every other one to node:http, which brings it back through request().
   */
  goesToTheApp(url: string): boolean {
    return healthAnswer(url, this.o.isReady) === null && !this.o.control.owns(url) && this.o.statics?.owns(url) !== true;
  }

  /** Step 5 for a request the byte-level front read (goesToTheApp said so). */
  page(head: LeanHead, client: PageClient): void {
    // The front exists only with its page path: composition builds both or neither.
    (this.o.leanPages as NonNullable<PipelineOptions['leanPages']>).handle(head, client);
  }
}

/** A plain-text answer of roomgate's own (health), on an HTTP/1.1 or HTTP/2 response. */
function answer(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  const r = plainResponse(status, body, { 'Content-Type': 'text/plain' });
  res.writeHead(status, r.headers);
  res.end(r.body);
}
