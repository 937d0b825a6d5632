// Routing, retries and accounting for the byte-level page path: the same decisions as the
// node:http path (src/proxy/http-proxy.ts) for the requests it takes (GET and HEAD without a
// body, see src/http/lean-request-head.ts): room key, placement, forwarding headers, the room
// cookie, a retry on another backend when a connection is refused or a reused one was closed
// under the request, 502/503/504 with the same bodies, the same metrics and log lines. The bytes
// themselves are moved by PageRelay (src/proxy/page-relay.ts).
import { STATUS_CODES } from 'node:http';
import type { LeanHead } from '../http/lean-request-head.js';
import type { PageClient } from './page-client.js';
import { REFUSALS, type Refusal } from '../http/refusals.js';
import type { Decision } from '../placement/decide.js';
import type { KeyResult } from '../room/extract.js';
import type { Backend } from '../runtime/pool.js';
import { backendFailure, classifyError, downReason, isConnectFailure } from './errors.js';
import type { Owner } from '../http/ownership.js';
import { roomCookieFor } from './page-cookie.js';
import { httpDate, PageRelay, type RelayOutcome } from './page-relay.js';
import { Deadlines } from './deadlines.js';
import { RawBackendPool } from './raw-backend-pool.js';
import { clientStalled, startRequest, type PagePathOptions } from './request-count.js';
import { SocketAnswer } from './cache-answers.js';

export interface LeanPagesOptions extends PagePathOptions {
  /** The client-side keep-alive timeout, announced in Keep-Alive as node:http does. */
  readonly keepAliveTimeoutMs: number;
  /** Strict-Transport-Security for answers on the TLS port (unless the backend sent its own), or null. */
  readonly hsts: string | null;
}

const CRLF = '\r\n';

export class LeanPages {
  private readonly raw: RawBackendPool;
  private readonly deadlines: Deadlines;
  private readonly keepAliveHeader: string | null;

  constructor(private readonly o: LeanPagesOptions) {
    this.raw = new RawBackendPool(o.maxIdleSocketsPerBackend, o.backendIdleTimeoutMs);
    this.deadlines = new Deadlines(Deadlines.tickFor(o.connectTimeoutMs, o.responseTimeoutMs, o.clientWriteTimeoutMs || Infinity));
    const s = Math.floor(o.keepAliveTimeoutMs / 1000);
    this.keepAliveHeader = s > 0 ? `Keep-Alive: timeout=${s}${CRLF}` : null;
  }

  handle(head: LeanHead, client: PageClient): void {
    const now = Date.now();
    const key = this.o.router.keyOf(head.method, head.url, head.cookie, head.roomHeader, now);
    client.cacheStatus = null;
    const cache = this.o.cache;
    if (cache === null) return this.route(head, client, key, now);
    const ctx = { peer: client.peer, encrypted: client.encrypted, strippedPrefix: key.strippedPrefix };
    const setCookie = (): string | null => roomCookieFor(this.o.roomCookie, head.method, key, this.o.forwarding.proto(head.rawHeaders, ctx) === 'https', this.o.logger);
    const own = (refusal: Refusal, extra: Record<string, string>): void => this.answer(head, client, { ...refusal, headers: { ...refusal.headers, ...extra } });
    const writer = new SocketAnswer(client, head.method === 'HEAD', client.keepAlive(head), this.keepAliveHeader, client.encrypted ? this.o.hsts : null, own);
    cache.handle({ method: head.method, url: head.url, rawHeaders: head.rawHeaders, hasBody: false, key, ctx, setCookie }, writer, (cacheStatus) => {
      client.cacheStatus = cacheStatus;
      this.route(head, client, key, Date.now());
    });
  }

  private route(head: LeanHead, client: PageClient, key: KeyResult, now: number): void {
    this.o.router.decide(key.room, now).then(
      (decision) => this.dispatch(head, client, key, decision, 1),
      (err: Error) => {
        this.o.logger.error({ err: err.message, room: key.room }, 'routing failed');
        this.refuse(head, client, { code: 'internal', detail: err.message });
      },
    );
  }

  private dispatch(head: LeanHead, client: PageClient, key: KeyResult, decision: Decision, attempt: number): void {
    if (client.closed) return;
    if ('reject' in decision) {
      return this.refuse(head, client, this.o.router.refusalFor(decision, Date.now()));
    }
    const backend = this.o.pool.get(decision.route);
    if (!backend) return this.refuse(head, client, this.o.router.noBackend(Date.now()));
    // TLS toward the backend is node:https's: the request goes back to the general path, which
    // routes it again (to the same place: the placement is stored).
    if (backend.config.tls) return client.handOver('https-backend');
    this.forward(head, client, key, backend, attempt, key.room === null ? null : { room: key.room, epoch: decision.epoch ?? 0 });
  }

  private forward(head: LeanHead, client: PageClient, key: KeyResult, backend: Backend, attempt: number, owner: Owner | null): void {
    const { o } = this;
    const ctx = { peer: client.peer, encrypted: client.encrypted, strippedPrefix: key.strippedPrefix, owner };
    const done = startRequest(o.pool, o.metrics, backend.id);
    const headers = o.forwarding.headers(head.rawHeaders, ctx, false);
    let text = `${head.method} ${key.forwardUrl} HTTP/1.1${CRLF}`;
    for (let i = 0; i + 1 < headers.length; i += 2) text += `${headers[i] as string}: ${headers[i + 1] as string}${CRLF}`;
    text += `Connection: keep-alive${CRLF}${CRLF}`;
    const keepAlive = client.keepAlive(head);
    const setCookie = roomCookieFor(o.roomCookie, head.method, key, o.forwarding.proto(head.rawHeaders, ctx) === 'https', o.logger);
    let extra = setCookie === null ? '' : `Set-Cookie: ${setCookie}${CRLF}`;
    if (client.cacheStatus !== null) extra += `Cache-Status: ${client.cacheStatus}${CRLF}`;

    const relay: PageRelay = new PageRelay(
      client.socket,
      this.raw,
      this.deadlines,
      { id: backend.id, host: backend.config.host, port: backend.config.port },
      {
        head: head.method === 'HEAD',
        text,
        keepAlive,
        keepAliveHeader: this.keepAliveHeader,
        extra,
        hsts: client.encrypted ? o.hsts : null,
        connectTimeoutMs: o.connectTimeoutMs,
        responseTimeoutMs: o.responseTimeoutMs,
        writeTimeoutMs: o.clientWriteTimeoutMs,
      },
      {
        connected: () => o.pool.markUp(backend.id),
        headSent: () => undefined,
        extraBytes: () => {
          o.metrics.proxyErrors.inc({ backend: backend.id, kind: 'bad-response' });
          o.logger.warn({ room: key.room, backend: backend.id, method: head.method }, 'backend sent bytes after a complete response; its connection was closed');
        },
        clientStalled: () => clientStalled(o, key.room, backend.id),
        done: (outcome) => {
          client.current = null;
          this.settle(outcome, head, client, key, backend, attempt, keepAlive, done);
        },
      },
    );
    client.current = relay;
  }

  private settle(
    outcome: RelayOutcome,
    head: LeanHead,
    client: PageClient,
    key: KeyResult,
    backend: Backend,
    attempt: number,
    keepAlive: boolean,
    done: (status: number | null) => void,
  ): void {
    const { o } = this;
    switch (outcome.kind) {
      case 'complete':
        done(outcome.status);
        return client.answered(keepAlive);
      case 'client-gone':
        done(outcome.status);
        return;
      case 'cut':
        // Mid-response: the status line is gone, all that can be done is cut the client off.
        o.metrics.proxyErrors.inc({ backend: backend.id, kind: 'reset' });
        o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: outcome.why }, 'backend failed mid-response');
        done(outcome.status);
        client.socket.destroy();
        return;
      case 'bad-answer':
        o.metrics.proxyErrors.inc({ backend: backend.id, kind: 'bad-response' });
        o.logger.warn({ room: key.room, backend: backend.id, method: head.method, problem: outcome.problem }, 'backend sent an answer that cannot be relayed: 502');
        done(502);
        return this.answer(head, client, { code: 'bad-backend-answer', backend: backend.id, detail: outcome.problem });
      case 'failed': {
        const kind = classifyError(outcome.err);
        o.metrics.proxyErrors.inc({ backend: backend.id, kind });
        const now = Date.now();
        if (isConnectFailure(kind)) o.pool.markDown(backend.id, now, downReason(outcome.err, kind));
        if (client.closed) {
          done(null);
          return;
        }
        // Nothing reached the backend (connect failed), or a reused keep-alive connection was
        // closed under the request: GET and HEAD have no body and are idempotent, so try again.
        const retry = attempt <= o.pool.backends.length && (isConnectFailure(kind) || (kind === 'reset' && outcome.reused));
        o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: kind, retry }, 'proxy error');
        if (retry) {
          done(null);
          o.router.decide(key.room, now).then(
            (next) => this.dispatch(head, client, key, next, attempt + 1),
            () => this.refuse(head, client, { code: 'backend-unavailable', retryAfterS: 1, backend: backend.id, detail: kind }),
          );
          return;
        }
        const refusal = backendFailure(kind, backend.id);
        done(REFUSALS[refusal.code].status);
        return this.answer(head, client, refusal);
      }
    }
  }

  /** An answer made by roomgate itself, counted under the status it sends. */
  private refuse(head: LeanHead, client: PageClient, refusal: Refusal): void {
    this.o.metrics.httpRequests.inc({ backend: refusal.backend ?? 'none', status: String(REFUSALS[refusal.code].status) });
    this.answer(head, client, refusal);
  }

  /** roomgate's own answer (src/http/refusals.ts), framed as node:http frames the same answer on the other path. */
  private answer(head: LeanHead, client: PageClient, refusal: Refusal): void {
    if (client.closed) return;
    const keepAlive = client.keepAlive(head);
    const r = this.o.refuser.render(refusal, fieldOf(head.rawHeaders, 'accept'));
    const status = r.status;
    let out = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}${CRLF}`;
    for (const [name, value] of Object.entries(r.headers)) out += `${name}: ${value}${CRLF}`;
    if (client.cacheStatus !== null) out += `Cache-Status: ${client.cacheStatus}${CRLF}`;
    if (client.encrypted && this.o.hsts !== null) out += `Strict-Transport-Security: ${this.o.hsts}${CRLF}`;
    out += `Date: ${httpDate()}${CRLF}`;
    out += keepAlive ? `Connection: keep-alive${CRLF}${this.keepAliveHeader ?? ''}` : `Connection: close${CRLF}`;
    out += CRLF;
    // A HEAD answer has the headers of the GET answer and no body.
    if (head.method !== 'HEAD') out += r.body;
    client.socket.write(out);
    client.answered(keepAlive);
  }

  close(): void {
    this.raw.close();
    this.deadlines.close();
  }
}

/** The first value of a field in a raw header list (names compared without case). */
function fieldOf(rawHeaders: readonly string[], lower: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).toLowerCase() === lower) return rawHeaders[i + 1];
  return undefined;
}
