// Proxies WebSocket upgrades: picks the room's backend, replays the handshake on a fresh TCP
// connection, and after that only moves bytes. No frame is parsed. Until the first byte of the
// backend's answer reaches the client, roomgate may still answer 502/503 itself; after it,
// a failure only closes the socket (never an HTTP response inside a live WebSocket stream).
import { connect, type Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Backend, BackendPool } from '../backends/pool.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { KeyResult } from '../room/extract.js';
import { classifyError, isConnectFailure, rawResponse, type ErrorKind } from './errors.js';
import type { Forwarding } from './forwarded.js';
import type { Router } from './router.js';
import type { Tunnel, TunnelRegistry } from './tunnels.js';

export interface UpgradeProxyOptions {
  readonly router: Router;
  readonly pool: BackendPool;
  readonly forwarding: Forwarding;
  readonly tunnels: TunnelRegistry;
  readonly websocketPaths: readonly string[];
  readonly connectTimeoutMs: number;
  /** Time for the backend to answer the handshake. */
  readonly responseTimeoutMs: number;
  /** 0 = never close an idle socket. */
  readonly idleTimeoutMs: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

// After one side has closed, how long the other may take to flush before it is destroyed.
const HALF_CLOSE_LINGER_MS = 5_000;

export class UpgradeProxy {
  constructor(private readonly o: UpgradeProxyOptions) {}

  handle(req: IncomingMessage, client: Socket, head: Buffer): void {
    // Hold client bytes (if any arrive early) until the backend connection is ready.
    client.pause();
    client.on('error', () => client.destroy());
    const refusal = this.refusal(req);
    if (refusal) {
      this.o.metrics.upgrades.inc({ backend: 'none', result: String(refusal.status) });
      endWith(client, rawResponse(refusal.status, refusal.body));
      return;
    }
    const now = Date.now();
    const { key, decision } = this.o.router.route(req, now);
    if ('reject' in decision) {
      this.o.metrics.upgrades.inc({ backend: 'none', result: String(decision.reject) });
      const extra = decision.reject === 503 ? { 'Retry-After': String(decision.retryAfterS) } : undefined;
      endWith(client, rawResponse(decision.reject, decision.reject === 503 ? 'no backend available\n' : 'this socket needs a room key\n', extra));
      return;
    }
    this.connect(req, client, head, key, this.o.pool.get(decision.route) as Backend, now, 1);
  }

  /** Requests that are not WebSocket handshakes roomgate will carry. */
  private refusal(req: IncomingMessage): { status: number; body: string } | null {
    if (req.method !== 'GET') return { status: 400, body: 'WebSocket upgrades must use GET\n' };
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return { status: 400, body: 'only WebSocket upgrades are proxied\n' };
    if (!req.headers['sec-websocket-key'] || !req.headers['sec-websocket-version']) {
      return { status: 400, body: 'missing Sec-WebSocket-Key or Sec-WebSocket-Version\n' };
    }
    const url = req.url ?? '/';
    if (!this.o.websocketPaths.some((p) => url.startsWith(p))) return { status: 404, body: 'no WebSocket route here\n' };
    return null;
  }

  private connect(
    req: IncomingMessage,
    client: Socket,
    head: Buffer,
    key: KeyResult,
    backend: Backend,
    startedAt: number,
    attempt: number,
  ): void {
    const { o } = this;
    const upstream = connect({ host: backend.config.host, port: backend.config.port });
    const tunnel: Tunnel = { room: key.room, backend, client, upstream };
    let answered = false; // a byte of the backend's answer reached the client
    let connected = false;
    let finished = false;

    const onTimeout = (): void => {
      upstream.destroy(Object.assign(new Error('timeout'), { code: connected ? 'ERESPONSETIMEOUT' : 'ECONNTIMEOUT' }));
    };
    let timer = setTimeout(onTimeout, o.connectTimeoutMs);

    const fail = (err: NodeJS.ErrnoException): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      const kind: ErrorKind = classifyError(err);
      o.metrics.proxyErrors.inc({ backend: backend.id, kind });
      o.tunnels.remove(tunnel);
      upstream.destroy();
      if (answered) {
        // Inside a live WebSocket: close the client's socket, write nothing.
        o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: kind }, 'backend connection lost');
        client.destroy();
        return;
      }
      const now = Date.now();
      if (isConnectFailure(kind)) o.pool.markDown(backend.id, now, kind);
      const retry = isConnectFailure(kind) && !client.destroyed && attempt <= o.pool.backends.length;
      o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: kind, retry }, 'upgrade proxy error');
      o.metrics.upgrades.inc({ backend: backend.id, result: kind });
      if (retry) {
        const next = o.router.decide(key.room, now);
        if (!('reject' in next)) {
          this.connect(req, client, head, key, o.pool.get(next.route) as Backend, startedAt, attempt + 1);
          return;
        }
      }
      const status = kind === 'timeout' ? 504 : 502;
      endWith(client, rawResponse(status, status === 504 ? 'backend timed out\n' : 'backend unavailable\n', { 'Retry-After': '1' }));
    };

    upstream.on('error', fail);
    upstream.once('connect', () => {
      connected = true;
      o.pool.markUp(backend.id);
      // Connected: now the backend has responseTimeoutMs to answer the handshake.
      clearTimeout(timer);
      timer = setTimeout(onTimeout, o.responseTimeoutMs);
      upstream.setNoDelay(true);
      client.setNoDelay(true);
      upstream.write(this.handshake(req, key));
      if (head.length > 0) upstream.write(head);
    });

    upstream.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      answered = true;
      const status = chunk.length >= 12 ? chunk.toString('latin1', 9, 12) : '???';
      o.tunnels.add(tunnel);
      o.metrics.upgrades.inc({ backend: backend.id, result: status });
      o.logger.info(
        { room: key.room, backend: backend.id, source: key.source, status, ms: Date.now() - startedAt, attempt },
        'upgrade',
      );
      client.write(chunk);
      // From here on: bytes only. pipe() handles back-pressure both ways.
      upstream.pipe(client);
      client.pipe(upstream);
      client.resume();
      if (o.idleTimeoutMs > 0) {
        client.setTimeout(o.idleTimeoutMs, () => {
          o.logger.info({ room: key.room, backend: backend.id }, 'idle socket closed');
          client.destroy();
        });
      }
      client.setKeepAlive(true, 30_000);
      upstream.setKeepAlive(true, 30_000);
    });

    // Either side closing closes the other, after letting what is already queued flush.
    const close = (other: Socket) => (): void => {
      if (!answered) return;
      finished = true;
      o.tunnels.remove(tunnel);
      if (!other.destroyed) {
        other.end();
        setTimeout(() => other.destroy(), HALF_CLOSE_LINGER_MS).unref();
      }
    };
    upstream.on('close', close(client));
    client.on('close', () => {
      if (!answered) {
        // The client gave up during the handshake.
        finished = true;
        clearTimeout(timer);
        upstream.destroy();
        return;
      }
      close(upstream)();
    });
  }

  /** The client's handshake as the backend must see it: target rewritten, X-Forwarded-* set. */
  private handshake(req: IncomingMessage, key: KeyResult): string {
    const socket = req.socket;
    const headers = this.o.forwarding.headers(
      req.rawHeaders,
      { peer: socket.remoteAddress, encrypted: (socket as { encrypted?: boolean }).encrypted === true, strippedPrefix: key.strippedPrefix },
      true,
    );
    let text = `GET ${key.forwardUrl} HTTP/1.1\r\n`;
    for (let i = 0; i + 1 < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
    return `${text}\r\n`;
  }
}

function endWith(socket: Socket, response: string): void {
  if (socket.destroyed) return;
  socket.end(response);
  setTimeout(() => socket.destroy(), 1_000).unref();
}
