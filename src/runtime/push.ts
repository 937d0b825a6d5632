// Cross-room push (docs/push.md): a message for a room is POSTed to the backend that holds it, as
// the placement says. Never places a room: a room with no placement is not live; a room whose
// backend cannot take it now (down, drained past its deadline, in maintenance) is not delivered
// elsewhere, the caller is told to retry. The backend gets the room's ownership fields, a message
// id and the sender, so it can refuse a message for a room it no longer holds.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { tlsOptions, type BackendTls } from '../backends/backend-tls.js';
import { ownerFields } from '../http/ownership.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Placer } from './placer.js';
import type { Backend, BackendPool } from './pool.js';

export interface PushOptions {
  readonly placer: Placer;
  readonly pool: BackendPool;
  readonly backendTls: BackendTls;
  /** Backend path messages are POSTed to. */
  readonly path: string;
  readonly timeoutMs: number;
  /** Retry-After (s) of a 503. */
  readonly retryAfterS: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export type PushOutcome =
  /** The backend took it (2xx). */
  | { readonly kind: 'delivered'; readonly id: string; readonly backend: string; readonly epoch: number }
  /** No placement: the room is not live anywhere. */
  | { readonly kind: 'not-live' }
  /**
   * The room's backend cannot take it now (down, drained, maintenance, refused the connection).
   * `sent`: the message may have reached it all the same (the connection broke after it was made).
   */
  | { readonly kind: 'unavailable'; readonly backend: string | null; readonly retryAfterS: number; readonly why: string; readonly sent: boolean }
  /** The backend answered something else than 2xx. */
  | { readonly kind: 'refused'; readonly id: string; readonly backend: string; readonly status: number }
  /** No answer in time. */
  | { readonly kind: 'timeout'; readonly id: string; readonly backend: string };

// Connection errors after which nothing reached the backend.
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

export class PushDelivery {
  constructor(private readonly o: PushOptions) {}

  async deliver(room: string, body: Buffer, sender: string, nowMs: number): Promise<PushOutcome> {
    const t0 = performance.now();
    const out = await this.attempt(room, body, sender, nowMs);
    this.o.metrics.pushes.inc({ result: out.kind });
    this.o.metrics.pushSeconds.observe({ result: out.kind }, (performance.now() - t0) / 1000);
    return out;
  }

  private async attempt(room: string, body: Buffer, sender: string, nowMs: number): Promise<PushOutcome> {
    // write=false: what routing would do now, without placing anything.
    const { decision, placement } = await this.o.placer.explain(room, nowMs, false);
    if (placement === null) return { kind: 'not-live' };
    const backend = this.o.pool.get(placement.backend);
    // The room lives where its placement says, or nowhere for a push: a decision to route it
    // elsewhere (its backend down or drained) would be a move, which only a client's request makes.
    if (!backend || !('route' in decision) || decision.route !== placement.backend) {
      const why = 'reject' in decision ? decision.reason : backend ? `backend ${backend.id} is ${backend.state(nowMs)}` : `backend ${placement.backend} is gone`;
      return { kind: 'unavailable', backend: placement.backend, retryAfterS: this.o.retryAfterS, why, sent: false };
    }
    return this.post(backend, room, placement.epoch, body, sender);
  }

  private post(backend: Backend, room: string, epoch: number, body: Buffer, sender: string): Promise<PushOutcome> {
    const id = randomUUID();
    const { o } = this;
    return new Promise((resolve) => {
      let settled = false;
      const done = (out: PushOutcome): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(out);
      };
      // A header list (not an object) gets no Host from Node: the backend's own address, as its
      // health checks send it.
      const host = backend.config.host.includes(':') ? `[${backend.config.host}]` : backend.config.host;
      const headers = [
        'Host',
        backend.config.port === (backend.config.tls ? 443 : 80) ? host : `${host}:${backend.config.port}`,
        'Content-Type',
        'application/json',
        'Content-Length',
        String(body.length),
        ...ownerFields({ room, epoch }),
        'X-Roomgate-Message-Id',
        id,
        'X-Roomgate-Sender',
        sender,
      ];
      const req = (backend.config.tls ? https : http).request({
        host: backend.config.host,
        port: backend.config.port,
        method: 'POST',
        path: o.path,
        headers,
        // One connection per message: pushes are rare next to pages, and a pooled connection the
        // backend closed would need a retry that could deliver twice.
        agent: false,
        ...(backend.config.tls ? tlsOptions(o.backendTls, backend.config.host) : {}),
      });
      // One deadline for the connect and the answer.
      const timer = setTimeout(() => {
        req.destroy();
        done({ kind: 'timeout', id, backend: backend.id });
      }, o.timeoutMs);
      req.on('response', (res) => {
        res.resume();
        const status = res.statusCode ?? 0;
        done(status >= 200 && status < 300 ? { kind: 'delivered', id, backend: backend.id, epoch } : { kind: 'refused', id, backend: backend.id, status });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        o.logger.warn({ room, backend: backend.id, err: err.code ?? err.message }, 'push: delivery failed');
        done({ kind: 'unavailable', backend: backend.id, retryAfterS: o.retryAfterS, why: err.code ?? err.message, sent: !NOT_SENT.has(err.code ?? '') });
      });
      req.end(body);
    });
  }
}
