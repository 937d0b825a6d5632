// Proxies plain HTTP requests (pages, assets, API calls of the app) to the room's backend.
// Bodies are streamed both ways; backend connections are kept alive per backend.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Backend, BackendPool } from '../backends/pool.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { KeyResult } from '../room/extract.js';
import { serializeRoomCookie } from '../room/cookie.js';
import type { Forwarding } from './forwarded.js';
import { classifyError, isConnectFailure, plainResponse } from './errors.js';
import type { Router } from './router.js';

export interface HttpProxyOptions {
  readonly router: Router;
  readonly pool: BackendPool;
  readonly forwarding: Forwarding;
  readonly connectTimeoutMs: number;
  readonly responseTimeoutMs: number;
  readonly maxIdleSocketsPerBackend: number;
  /** Sets the room cookie on page responses; null when disabled. encode signs (or not) the room. */
  readonly roomCookie: { name: string; maxAgeS: number; encode: (room: string, nowMs: number) => string } | null;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

// Response headers the backend's connection framing owns; Node writes its own.
const HOP_BY_HOP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'trailer', 'upgrade', 'te']);
const COOKIE_SOURCES = new Set(['query', 'path-prefix', 'page-path', 'header']);

export class HttpProxy {
  private readonly agents = new Map<string, http.Agent>();

  constructor(private readonly o: HttpProxyOptions) {
    for (const b of o.pool.backends) {
      this.agents.set(
        b.id,
        new http.Agent({ keepAlive: true, maxFreeSockets: o.maxIdleSocketsPerBackend, scheduling: 'lifo' }),
      );
    }
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const now = Date.now();
    const { key, decision } = this.o.router.route(req, now);
    if ('reject' in decision) {
      const headers: Record<string, string> = decision.reject === 503 ? { 'Retry-After': String(decision.retryAfterS) } : {};
      const body = decision.reject === 503 ? 'no backend available\n' : 'this request needs a room key\n';
      this.reply(res, decision.reject, body, headers);
      this.o.metrics.httpRequests.inc({ backend: 'none', status: String(decision.reject) });
      return;
    }
    const backend = this.o.pool.get(decision.route) as Backend;
    // Without a body nothing is consumed before the backend answers, so a refused connection
    // can be retried on the next backend of the ring.
    const replayable = req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined;
    this.forward(req, res, key, backend, replayable, 1);
  }

  private forward(req: IncomingMessage, res: ServerResponse, key: KeyResult, backend: Backend, replayable: boolean, attempt: number): void {
    const { o } = this;
    const socket = req.socket;
    const ctx = { peer: socket.remoteAddress, encrypted: (socket as { encrypted?: boolean }).encrypted === true, strippedPrefix: key.strippedPrefix };
    backend.inflight++;
    let settled = false;
    const done = (status: number | string): void => {
      if (settled) return;
      settled = true;
      backend.inflight--;
      o.metrics.httpRequests.inc({ backend: backend.id, status: String(status) });
    };

    const proxyReq = http.request({
      host: backend.config.host,
      port: backend.config.port,
      method: req.method,
      path: key.forwardUrl,
      headers: o.forwarding.headers(req.rawHeaders, ctx, false),
      agent: this.agents.get(backend.id),
      timeout: o.responseTimeoutMs,
    });

    let connectTimer: NodeJS.Timeout | null = null;
    proxyReq.on('socket', (s: Socket) => {
      if (!s.connecting) return;
      connectTimer = setTimeout(() => proxyReq.destroy(Object.assign(new Error('connect timeout'), { code: 'ECONNTIMEOUT' })), o.connectTimeoutMs);
      s.once('connect', () => {
        if (connectTimer) clearTimeout(connectTimer);
        o.pool.markUp(backend.id);
      });
    });
    proxyReq.on('timeout', () => proxyReq.destroy(Object.assign(new Error('response timeout'), { code: 'ERESPONSETIMEOUT' })));

    proxyReq.on('response', (proxyRes) => {
      if (connectTimer) clearTimeout(connectTimer);
      // The head arrived: a slow or long-lived body (downloads, server-sent events) is not cut.
      proxyReq.setTimeout(0);
      const headers: string[] = [];
      const raw = proxyRes.rawHeaders;
      for (let i = 0; i + 1 < raw.length; i += 2) {
        if (!HOP_BY_HOP_RESPONSE.has((raw[i] as string).toLowerCase())) headers.push(raw[i] as string, raw[i + 1] as string);
      }
      const cookie = this.roomCookieFor(req, key, o.forwarding.proto(req.rawHeaders, ctx) === 'https');
      if (cookie) headers.push('Set-Cookie', cookie);
      const status = proxyRes.statusCode ?? 502;
      res.writeHead(status, proxyRes.statusMessage, headers);
      proxyRes.pipe(res);
      proxyRes.on('error', () => res.destroy());
      proxyRes.on('aborted', () => res.destroy());
      res.on('close', () => {
        done(status);
        if (!proxyRes.complete) proxyRes.destroy();
      });
    });

    proxyReq.on('error', (err: NodeJS.ErrnoException) => {
      if (connectTimer) clearTimeout(connectTimer);
      const kind = classifyError(err);
      o.metrics.proxyErrors.inc({ backend: backend.id, kind });
      const now = Date.now();
      if (isConnectFailure(kind)) o.pool.markDown(backend.id, now, kind);
      if (res.headersSent || res.destroyed) {
        // Mid-response: the status line is gone, all we can do is cut the client off.
        o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: kind }, 'backend failed mid-response');
        done('aborted');
        res.destroy();
        return;
      }
      // Nothing reached the backend (connect failed), or a reused keep-alive socket was closed
      // under us: safe to try again for requests without a body.
      const retry =
        replayable &&
        !req.destroyed &&
        attempt < o.pool.backends.length + 1 &&
        (isConnectFailure(kind) || (kind === 'reset' && proxyReq.reusedSocket));
      o.logger.warn(
        { room: key.room, backend: backend.id, source: key.source, err: kind, retry },
        'proxy error',
      );
      done(kind);
      if (retry) {
        const next = o.router.decide(key.room, now);
        if (!('reject' in next)) {
          this.forward(req, res, key, o.pool.get(next.route) as Backend, replayable, attempt + 1);
          return;
        }
      }
      if (kind === 'timeout') this.reply(res, 504, 'backend timed out\n');
      else this.reply(res, 502, 'backend unavailable\n', { 'Retry-After': '1' });
    });

    // The client went away before the backend answered: stop the backend work too.
    res.on('close', () => {
      if (!res.writableFinished) proxyReq.destroy();
    });

    if (replayable) proxyReq.end();
    else req.pipe(proxyReq);
  }

  /** The Set-Cookie value for a page response, or null when none is due. */
  private roomCookieFor(req: IncomingMessage, key: KeyResult, secure: boolean): string | null {
    const rc = this.o.roomCookie;
    if (rc === null || key.room === null || key.source === null) return null;
    if (req.method !== 'GET' && req.method !== 'HEAD') return null;
    if (!COOKIE_SOURCES.has(key.source) || key.cookieRoom === key.room) return null;
    try {
      return serializeRoomCookie(rc.name, rc.encode(key.room, Date.now()), { maxAgeS: rc.maxAgeS, secure });
    } catch (err) {
      // A configured room pattern may allow characters a cookie cannot carry: skip the cookie.
      this.o.logger.debug({ room: key.room, err: (err as Error).message }, 'room cookie not set');
      return null;
    }
  }

  private reply(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    const r = plainResponse(status, body, headers);
    res.writeHead(status, r.headers);
    res.end(r.body);
  }

  close(): void {
    for (const a of this.agents.values()) a.destroy();
  }
}
