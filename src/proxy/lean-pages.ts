// The byte-level page transport: what the request pipeline (src/pipeline/pipeline.ts) decided,
// carried for the requests the byte-level front takes (GET and HEAD without a body, see
// src/http/lean-request-head.ts) as the node:http transport (src/proxy/http-proxy.ts) carries the
// rest: forwarding headers, the room cookie, the forwarding core's retries, roomgate's own answers
// framed as node:http frames them, the same metrics and log lines. The bytes themselves are moved
// by PageRelay (src/proxy/page-relay.ts).
import { STATUS_CODES } from 'node:http';
import type { AnswerWriter } from '../cache/contract.js';
import type { ClientRequest } from '../http/client-request.js';
import type { PageClient } from '../http/page-client.js';
import { REFUSALS, type Refusal } from '../http/refusals.js';
import type { KeyResult } from '../room/extract.js';
import type { Backend } from '../runtime/pool.js';
import type { Exchange, Forwarder } from '../forward/forwarder.js';
import type { Owner } from '../http/ownership.js';
import type { BodyPlan } from './request-body.js';
import { httpDate, PageRelay, type RelayOutcome } from './page-relay.js';
import { Deadlines } from './deadlines.js';
import { RawBackendPool } from './raw-backend-pool.js';
import { clientStalled, pageLocationTarget, pinTagsOf, type PagePathOptions } from './request-count.js';
import { startRequest } from '../forward/request-count.js';
import { SocketAnswer } from './cache-answers.js';

export interface LeanPagesOptions extends PagePathOptions {
  /** The client-side keep-alive timeout, announced in Keep-Alive as node:http does. */
  readonly keepAliveTimeoutMs: number;
  /** Strict-Transport-Security for answers on the TLS port (unless the backend sent its own), or null. */
  readonly hsts: string | null;
}

const CRLF = '\r\n';
const NO_BODY: BodyPlan = { kind: 'none' };

// The byte-level page transport of the request pipeline (src/pipeline/pipeline.ts: its
// PageTransport, structurally: a path never imports the pipeline).
export class LeanPages {
  private readonly raw: RawBackendPool;
  private readonly deadlines: Deadlines;
  private readonly keepAliveHeader: string | null;
  /** Placement, passive health and retries of every attempt (src/forward/forwarder.ts). */
  private readonly forwarder: Forwarder;

  constructor(private readonly o: LeanPagesOptions) {
    this.forwarder = o.forwarder;
    this.raw = new RawBackendPool(o.maxIdleSocketsPerBackend, o.backendIdleTimeoutMs);
    this.deadlines = new Deadlines(Deadlines.tickFor(o.connectTimeoutMs, o.responseTimeoutMs, o.clientWriteTimeoutMs || Infinity));
    const s = Math.floor(o.keepAliveTimeoutMs / 1000);
    this.keepAliveHeader = s > 0 ? `Keep-Alive: timeout=${s}${CRLF}` : null;
  }

  /** An answer made by roomgate itself, counted under the status it sends. */
  refuse(r: ClientRequest, client: PageClient, refusal: Refusal, cacheStatus: string | null = null): void {
    this.o.metrics.httpRequests.inc({ backend: refusal.backend ?? 'none', status: String(REFUSALS[refusal.code].status) });
    this.answer(r, client, refusal, cacheStatus);
  }

  /** The byte-level front takes only requests without a body (src/http/lean-request-head.ts). */
  readBody(_r: ClientRequest, _client: PageClient, then: (body: BodyPlan) => void): void {
    then(NO_BODY);
  }

  cacheWriter(r: ClientRequest, client: PageClient): AnswerWriter {
    const own = (refusal: Refusal, extra: Record<string, string>): void => this.answer(r, client, { ...refusal, headers: { ...refusal.headers, ...extra } }, null);
    return new SocketAnswer(client, r.method === 'HEAD', client.keepAlive(), this.keepAliveHeader, client.encrypted ? this.o.hsts : null, own);
  }

  exchange(r: ClientRequest, client: PageClient, key: KeyResult, _body: BodyPlan, cacheStatus: string | null): Exchange {
    return new LeanExchange(this, r, client, key, cacheStatus);
  }

  /** An attempt routed to `backend` (src/forward/forwarder.ts). */
  send(x: LeanExchange, backend: Backend, owner: Owner | null, attempt: number): void {
    // TLS toward the backend is node:https's: the request goes back to the general path, which
    // routes it again (to the same place: the placement is stored).
    if (backend.config.tls) return x.client.handOver('https-backend');
    this.forward(x, backend, attempt, owner);
  }

  private forward(x: LeanExchange, backend: Backend, attempt: number, owner: Owner | null): void {
    const { o } = this;
    const { r, client, key } = x;
    const ctx = { peer: r.peer, encrypted: r.encrypted, strippedPrefix: key.strippedPrefix, owner };
    const done = startRequest(o.pool, o.metrics, backend.id);
    const headers = o.forwarding.headers(r.rawHeaders, ctx, false);
    let text = `${r.method} ${key.forwardUrl} HTTP/1.1${CRLF}`;
    for (let i = 0; i + 1 < headers.length; i += 2) text += `${headers[i] as string}: ${headers[i + 1] as string}${CRLF}`;
    text += `Connection: keep-alive${CRLF}${CRLF}`;
    const keepAlive = client.keepAlive();
    const setCookie = o.cookies.for(r, key);
    let extra = setCookie === null ? '' : `Set-Cookie: ${setCookie}${CRLF}`;
    if (x.cacheStatus !== null) extra += `Cache-Status: ${x.cacheStatus}${CRLF}`;

    const relay: PageRelay = new PageRelay(
      client.socket,
      this.raw,
      this.deadlines,
      { id: backend.id, host: backend.config.host, port: backend.config.port },
      {
        head: r.method === 'HEAD',
        text,
        keepAlive,
        keepAliveHeader: this.keepAliveHeader,
        extra,
        hsts: client.encrypted ? o.hsts : null,
        location: pageLocationTarget(o, r, backend),
        connectTimeoutMs: o.connectTimeoutMs,
        responseTimeoutMs: o.responseTimeoutMs,
        writeTimeoutMs: o.clientWriteTimeoutMs,
        fresh: x.freshConnection,
        pinTags: pinTagsOf(o, r, key.room),
      },
      {
        connected: () => this.forwarder.connected(backend),
        headSent: () => undefined,
        extraBytes: () => {
          o.metrics.proxyErrors.inc({ backend: backend.id, kind: 'bad-response' });
          o.logger.warn({ room: key.room, backend: backend.id, method: r.method }, 'backend sent bytes after a complete response; its connection was closed');
        },
        clientStalled: () => clientStalled(o, key.room, backend.id),
        done: (outcome) => {
          client.current = null;
          this.settle(outcome, x, backend, attempt, keepAlive, done);
        },
      },
    );
    client.current = relay;
  }

  private settle(outcome: RelayOutcome, x: LeanExchange, backend: Backend, attempt: number, keepAlive: boolean, done: (status: number | null) => void): void {
    const { client } = x;
    switch (outcome.kind) {
      case 'complete':
        done(outcome.status);
        return client.answered(keepAlive);
      case 'client-gone':
        done(outcome.status);
        return;
      case 'cut':
        // Mid-response: the status line is gone, all that can be done is cut the client off.
        this.forwarder.lost(x, backend, 'reset');
        done(outcome.status);
        client.socket.destroy();
        return;
      case 'bad-answer':
        return this.forwarder.badAnswer(x, backend, outcome.problem, done);
      case 'failed':
        // GET and HEAD without a body: a refused connection, or a reused one closed under the
        // request, is tried again.
        this.forwarder.failed(x, { backend, attempt, err: outcome.err, afterReset: outcome.reused, done });
        return;
    }
  }

  /** roomgate's own answer (src/http/refusals.ts), framed as node:http frames the same answer on the other path. */
  answer(r: ClientRequest, client: PageClient, refusal: Refusal, cacheStatus: string | null): void {
    if (client.closed) return;
    const keepAlive = client.keepAlive();
    const rendered = this.o.refuser.render(refusal, fieldOf(r.rawHeaders, 'accept'));
    const status = rendered.status;
    let out = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}${CRLF}`;
    for (const [name, value] of Object.entries(rendered.headers)) out += `${name}: ${value}${CRLF}`;
    if (cacheStatus !== null) out += `Cache-Status: ${cacheStatus}${CRLF}`;
    if (client.encrypted && this.o.hsts !== null) out += `Strict-Transport-Security: ${this.o.hsts}${CRLF}`;
    out += `Date: ${httpDate()}${CRLF}`;
    out += keepAlive ? `Connection: keep-alive${CRLF}${this.keepAliveHeader ?? ''}` : `Connection: close${CRLF}`;
    out += CRLF;
    // A HEAD answer has the headers of the GET answer and no body.
    if (r.method !== 'HEAD') out += rendered.body;
    client.socket.write(out);
    client.answered(keepAlive);
  }

  close(): void {
    this.raw.close();
    this.deadlines.close();
  }
}

/** One page request being forwarded on the byte-level path (the forwarding core's Exchange). */
class LeanExchange implements Exchange {
  readonly path = 'page';
  /** The next attempt opens a new backend connection (src/forward/forwarder.ts sets it). */
  freshConnection = false;
  constructor(
    private readonly pages: LeanPages,
    readonly r: ClientRequest,
    readonly client: PageClient,
    readonly key: KeyResult,
    /** The Cache-Status of a request the page cache passed on, else null. */
    readonly cacheStatus: string | null,
  ) {}

  get room(): string | null {
    return this.key.room;
  }

  get source(): string | null {
    return this.key.source;
  }

  gone(): boolean {
    return this.client.closed;
  }

  send(backend: Backend, owner: Owner | null, attempt: number): void {
    this.pages.send(this, backend, owner, attempt);
  }

  refuse(refusal: Refusal, counted: boolean): void {
    if (counted) this.pages.answer(this.r, this.client, refusal, this.cacheStatus);
    else this.pages.refuse(this.r, this.client, refusal, this.cacheStatus);
  }
}

/** The first value of a field in a raw header list (names compared without case). */
function fieldOf(rawHeaders: readonly string[], lower: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).toLowerCase() === lower) return rawHeaders[i + 1];
  return undefined;
}
