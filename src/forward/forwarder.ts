// The forwarding core: every attempt to reach a room's backend goes through here, whichever path
// carries the request (the byte-level page relay, the page proxy of node:http and HTTP/2, the
// upgrade tunnel, the page cache's fill). It turns the placement decision into a backend or a
// refusal, tells the pool what a connection showed (a refused or failed connection marks the
// backend down for proxy.passiveDownMs, a successful one marks it up again: passive health, which
// the pool reports to the Supervisor), and decides once for every path which failures are tried
// again on the next decision and what the client gets when none is left. The paths keep only
// their transport: how the bytes of the request and the answer move.
//
// Backend marks are written from this file and nowhere else (test/architecture checks it).
import type { Owner } from '../http/ownership.js';
import { REFUSALS, type Refusal } from '../http/refusals.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Decision } from '../placement/decide.js';
import type { Backend, BackendPool } from '../runtime/pool.js';
import { backendFailure, classifyError, downReason, isConnectFailure, type ErrorKind } from './errors.js';

/** Where a room goes (the Router: key, placement lookup, decide), and the refusals for "nowhere". */
export interface Placement {
  decide(room: string | null, nowMs: number): Promise<Decision>;
  refusalFor(decision: Extract<Decision, { reject: unknown }>, nowMs: number): Refusal;
  noBackend(nowMs: number): Refusal;
}

/** Which path carries a request: the label of its log lines. */
export type PathName = 'page' | 'upgrade' | 'cache-fill';

/** One client request being forwarded: what the core needs of the path that carries it. */
export interface Exchange {
  readonly path: PathName;
  readonly room: string | null;
  /** Where the room key came from (for the log). */
  readonly source: string | null;
  /** The client left, or has its answer: nothing more is sent for it. */
  gone(): boolean;
  /**
   * Admission (upgrades only): asked once the placement named `backend`, before anything is sent;
   * a refusal is the client's answer, with nothing tried elsewhere (the limits are per backend).
   */
  admit?(backend: Backend): Refusal | null;
  /**
   * The next attempt must open a new backend connection: set by the core when a pooled connection
   * was closed under this request (a stale keep-alive connection; others in the pool may be too).
   */
  freshConnection?: boolean;
  /** Sends this attempt to `backend`; `owner` is the room and epoch the backend is told. */
  send(backend: Backend, owner: Owner | null, attempt: number): void;
  /**
   * roomgate answers the client itself (src/http/refusals.ts). `counted`: the attempt's own
   * accounting (Failure.done) already counted the request under this answer's status.
   */
  refuse(refusal: Refusal, counted: boolean): void;
}

/** An attempt that failed before the backend's answer began. */
export interface Failure {
  readonly backend: Backend;
  readonly attempt: number;
  readonly err: NodeJS.ErrnoException;
  /**
   * Nothing is lost by sending the request again after a refused connection (no body, or one read
   * whole). Default true.
   */
  readonly resendable?: boolean;
  /**
   * A reused keep-alive connection was closed under a bodyless idempotent request (RFC 9110 9.2.2):
   * the backend may or may not have seen it, and it may be sent again. Default false.
   */
  readonly afterReset?: boolean;
  /** The attempt's request accounting (startRequest): null when retried, else the status answered. */
  readonly done?: (status: number | null) => void;
}

export interface ForwarderOptions {
  readonly placement: Placement;
  readonly pool: BackendPool;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export class Forwarder {
  constructor(private readonly o: ForwarderOptions) {}

  /** First attempt: the room's placement decides the backend. */
  route(x: Exchange, nowMs = Date.now()): void {
    this.o.placement.decide(x.room, nowMs).then(
      (decision) => this.dispatch(x, decision, 1),
      (err: Error) => {
        this.o.logger.error({ err: err.message, room: x.room, path: x.path }, 'routing failed');
        if (!x.gone()) x.refuse({ code: 'internal', detail: err.message }, false);
      },
    );
  }

  /** A decision made: the backend it names gets the attempt once admitted, or the client gets the refusal. */
  dispatch(x: Exchange, decision: Decision, attempt: number): void {
    if (x.gone()) return;
    if ('reject' in decision) return x.refuse(this.o.placement.refusalFor(decision, Date.now()), false);
    const backend = this.o.pool.get(decision.route);
    if (!backend) return x.refuse(this.o.placement.noBackend(Date.now()), false);
    const refused = x.admit?.(backend) ?? null;
    if (refused !== null) return x.refuse(refused, false);
    x.send(backend, x.room === null ? null : { room: x.room, epoch: decision.epoch ?? 0 }, attempt);
  }

  /** The connection to the backend is made (its TLS handshake verified): it is routable again. */
  connected(backend: Backend): void {
    this.o.pool.markUp(backend.id);
  }

  /**
   * An attempt failed before any of the backend's answer reached the client. Counted; a connection
   * that could not be made marks the backend down; tried again on the next decision when nothing
   * can be lost by it, else the client gets 502 (504 for a timeout). Returns the failure's kind.
   */
  failed(x: Exchange, f: Failure): ErrorKind {
    const { o } = this;
    const { backend, attempt } = f;
    const kind = classifyError(f.err);
    o.metrics.proxyErrors.inc({ backend: backend.id, kind });
    const now = Date.now();
    const connectFailure = isConnectFailure(kind);
    if (connectFailure) o.pool.markDown(backend.id, now, downReason(f.err, kind));
    const gone = x.gone();
    // A reused connection closed under a request that may be sent twice: the backend closed an
    // idle connection as the request went out. Tried again once, on a new connection (another
    // pooled one may be as stale), and not counted as an attempt: the backend is not at fault.
    const stale = !connectFailure && kind === 'reset' && f.afterReset === true && !x.freshConnection;
    // Nothing reached the backend (the connection failed): the next decision, each backend at
    // most about once.
    const retry = !gone && (stale || (connectFailure && attempt <= o.pool.backends.length && f.resendable !== false));
    o.logger.warn({ room: x.room, backend: backend.id, source: x.source, path: x.path, err: kind, retry }, 'proxy error');
    if (gone) {
      f.done?.(null);
      return kind;
    }
    if (retry) {
      f.done?.(null);
      if (stale) x.freshConnection = true;
      o.placement.decide(x.room, now).then(
        (next) => this.dispatch(x, next, stale ? attempt : attempt + 1),
        () => x.refuse({ code: 'backend-unavailable', retryAfterS: 1, backend: backend.id, detail: kind }, false),
      );
      return kind;
    }
    const refusal = backendFailure(kind, backend.id);
    f.done?.(REFUSALS[refusal.code].status);
    x.refuse(refusal, f.done !== undefined);
    return kind;
  }

  /** The backend's connection failed after its answer began (or inside a tunnel): counted and logged; the path cuts the client off. */
  lost(x: Exchange, backend: Backend, err: NodeJS.ErrnoException | ErrorKind | 'bad-response'): string {
    const kind = typeof err === 'string' ? err : classifyError(err);
    this.o.metrics.proxyErrors.inc({ backend: backend.id, kind });
    this.o.logger.warn({ room: x.room, backend: backend.id, source: x.source, path: x.path, err: kind }, 'backend connection lost');
    return kind;
  }

  /** The backend's answer cannot be relayed (src/http/response-rules.ts): counted, logged, 502 unless the answer began. */
  badAnswer(x: Exchange, backend: Backend, problem: string, done?: (status: number) => void): void {
    this.o.metrics.proxyErrors.inc({ backend: backend.id, kind: 'bad-response' });
    this.o.logger.warn({ room: x.room, backend: backend.id, path: x.path, problem }, 'backend sent an answer that cannot be relayed: 502');
    done?.(502);
    if (!x.gone()) x.refuse({ code: 'bad-backend-answer', backend: backend.id, detail: problem }, done !== undefined);
  }
}
