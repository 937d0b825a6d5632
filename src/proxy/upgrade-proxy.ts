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
import type { Admission } from './admission.js';
import type { Router } from './router.js';
import type { Decision } from '../placement/decide.js';
import type { Tunnel, TunnelRegistry } from './tunnels.js';

export interface UpgradeProxyOptions {
  readonly router: Router;
  readonly pool: BackendPool;
  readonly forwarding: Forwarding;
  readonly tunnels: TunnelRegistry;
  readonly admission: Admission;
  /** The backend a room is placed on as this gateway knows it now (cache), or null. */
  readonly placementOf: (room: string) => string | null;
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
// Backend reads land in a buffer of this size per tunnel: game frames are a few hundred bytes,
// a bigger message simply takes several reads. Memory per socket is a target (10 KB), and the
// buffer is held for the socket's whole life: 16 KB would be 160 MB at 10,000 sockets.
const RELAY_BUFFER_BYTES = 1_024;

export class UpgradeProxy {
  constructor(private readonly o: UpgradeProxyOptions) {}

  handle(req: IncomingMessage, client: Socket, head: Buffer): void {
    // Hold client bytes (if any arrive early) until the backend connection is ready.
    client.pause();
    // Not an arrow: a closure made here would share this call's context, which holds `req`, and
    // keep the whole request (headers and all) alive for as long as the socket lives.
    client.on('error', destroySelf);
    const refusal = this.refusal(req);
    if (refusal) return this.refuse(client, 'none', refusal.status, refusal.body);
    const now = Date.now();
    const key = this.o.router.key(req, now);
    this.o.router.decide(key.room, now).then(
      (decision) => this.dispatch(req, client, head, key, decision, now, 1),
      (err: Error) => {
        this.o.logger.error({ err: err.message, room: key.room }, 'routing failed');
        this.refuse(client, 'none', 500, 'internal error\n');
      },
    );
  }

  private dispatch(req: IncomingMessage, client: Socket, head: Buffer, key: KeyResult, decision: Decision, startedAt: number, attempt: number): void {
    if (client.destroyed) return;
    if ('reject' in decision) {
      if (decision.reject === 400) return this.refuse(client, 'none', 400, 'this socket needs a room key\n');
      const body = decision.reason === 'room-busy' ? 'room is moving, retry shortly\n' : 'no backend available\n';
      return this.refuse(client, 'none', 503, body, { 'Retry-After': String(decision.retryAfterS) });
    }
    const backend = this.o.pool.get(decision.route);
    if (!backend) return this.refuse(client, 'none', 503, 'no backend available\n', { 'Retry-After': '1' });
    // Admission: a reconnect wave after a failover queues at the clients (they back off on 503)
    // instead of melting the survivor.
    if (!this.o.admission.tryAcquire(backend.id, Date.now())) {
      this.o.logger.warn({ room: key.room, backend: backend.id, source: key.source }, 'upgrade refused by admission limits');
      return this.refuse(client, backend.id, 503, 'backend busy, retry shortly\n', { 'Retry-After': String(this.o.admission.retryAfterS) });
    }
    this.connect(req, client, head, key, backend, startedAt, attempt);
  }

  /** roomgate's own answer before any 101, counted under its status. */
  private refuse(client: Socket, backend: string, status: number, body: string, headers?: Record<string, string>): void {
    this.o.metrics.upgrades.inc({ backend, result: String(status) });
    endWith(client, rawResponse(status, body, headers));
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
    // The handshake text is built now, so no closure below needs the request object: after the
    // 101 nothing of the HTTP layer stays reachable from a tunnel (memory per socket).
    let handshake: string | null = this.handshake(req, key);
    let request: IncomingMessage | null = req;
    // Backend reads land in one small buffer per tunnel (no allocation per frame); see relay().
    const readBuffer = Buffer.allocUnsafe(RELAY_BUFFER_BYTES);
    let onUpstreamRead = (n: number, buf: Buffer): boolean => answer(n, buf);
    const upstream = connect({
      host: backend.config.host,
      port: backend.config.port,
      onread: { buffer: readBuffer, callback: (n: number, buf: Uint8Array) => onUpstreamRead(n, buf as Buffer) },
    });
    const tunnel: Tunnel = { room: key.room, backend, client, upstream };
    let answered = false; // a byte of the backend's answer reached the client
    let connected = false;
    let finished = false;
    // The admission slot taken in dispatch() is held until the backend answers or the attempt ends.
    let admitted = true;
    const releaseAdmission = (): void => {
      if (!admitted) return;
      admitted = false;
      o.admission.release(backend.id);
    };

    const onTimeout = (): void => {
      upstream.destroy(Object.assign(new Error('timeout'), { code: connected ? 'ERESPONSETIMEOUT' : 'ECONNTIMEOUT' }));
    };
    let timer: NodeJS.Timeout | null = setTimeout(onTimeout, o.connectTimeoutMs);
    const stopTimer = (): void => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    };

    const fail = (err: NodeJS.ErrnoException): void => {
      if (finished) return;
      finished = true;
      stopTimer();
      releaseAdmission();
      const kind: ErrorKind = classifyError(err);
      o.tunnels.remove(tunnel);
      upstream.destroy();
      if (answered || request === null) {
        // Inside a live WebSocket: close the client's socket, write nothing.
        o.metrics.proxyErrors.inc({ backend: backend.id, kind });
        o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: kind }, 'backend connection lost');
        client.destroy();
        return;
      }
      const now = Date.now();
      if (isConnectFailure(kind)) o.pool.markDown(backend.id, now, kind);
      const retry = isConnectFailure(kind) && !client.destroyed && attempt <= o.pool.backends.length;
      o.logger.warn({ room: key.room, backend: backend.id, source: key.source, err: kind, retry }, 'upgrade proxy error');
      o.metrics.proxyErrors.inc({ backend: backend.id, kind });
      if (retry) {
        const again = request;
        o.router.decide(key.room, now).then(
          (next) => this.dispatch(again, client, head, key, next, startedAt, attempt + 1),
          () => this.refuse(client, backend.id, 502, 'backend unavailable\n', { 'Retry-After': '1' }),
        );
        return;
      }
      const status = kind === 'timeout' ? 504 : 502;
      this.refuse(client, backend.id, status, status === 504 ? 'backend timed out\n' : 'backend unavailable\n', { 'Retry-After': '1' });
    };

    upstream.on('error', fail);
    upstream.once('connect', () => {
      connected = true;
      o.pool.markUp(backend.id);
      // Connected: now the backend has responseTimeoutMs to answer the handshake.
      stopTimer();
      timer = setTimeout(onTimeout, o.responseTimeoutMs);
      upstream.setNoDelay(true);
      client.setNoDelay(true);
      // Counted from here, not from the 101: a placement change while the handshake is in flight
      // must find (and close) this socket too, and the busy guard must see it.
      o.tunnels.add(tunnel);
      if (handshake !== null) upstream.write(handshake);
      // Sent: the tunnel's closures outlive the handshake, its text (a kilobyte of headers) need not.
      handshake = null;
      if (head.length > 0) upstream.write(head);
    });

    // The first bytes of the backend's answer: the status line (and maybe frames behind it).
    const answer = (n: number, buf: Buffer): boolean => {
      stopTimer();
      answered = true;
      releaseAdmission();
      request = null;
      const status = n >= 12 ? buf.toString('latin1', 9, 12) : '???';
      // The room may have been placed elsewhere (by another gateway) while this handshake was in
      // flight: then this socket would split it. Refuse it before any byte reaches the client.
      const now = key.room === null ? null : o.placementOf(key.room);
      if (now !== null && now !== backend.id) {
        finished = true;
        o.tunnels.remove(tunnel);
        upstream.destroy();
        o.logger.info({ room: key.room, backend: backend.id, placedOn: now }, 'room moved during the handshake: socket refused');
        this.refuse(client, backend.id, 503, 'room is moving, retry shortly\n', { 'Retry-After': '1' });
        return false;
      }
      o.metrics.upgrades.inc({ backend: backend.id, result: status });
      o.logger.info({ room: key.room, backend: backend.id, source: key.source, status, ms: Date.now() - startedAt, attempt }, 'upgrade');
      onUpstreamRead = relay(client, upstream);
      client.on('data', (chunk: Buffer) => {
        if (!upstream.write(chunk)) client.pause();
      });
      upstream.on('drain', () => client.resume());
      client.on('end', () => upstream.end());
      upstream.on('end', () => client.end());
      client.resume();
      if (o.idleTimeoutMs > 0) {
        client.setTimeout(o.idleTimeoutMs, () => {
          o.logger.info({ room: key.room, backend: backend.id }, 'idle socket closed');
          client.destroy();
        });
      }
      // A client that vanished without a FIN is found by TCP keep-alive; a dead backend is found
      // by the health checks (which close its sockets), so the backend side skips the syscalls.
      client.setKeepAlive(true, 30_000);
      // The answer itself goes through the same path as every later read.
      return onUpstreamRead(n, buf);
    };

    // Either side closing closes the other, after letting what is already queued flush.
    const close = (other: Socket): void => {
      if (!answered) return;
      finished = true;
      o.tunnels.remove(tunnel);
      if (!other.destroyed) {
        other.end();
        setTimeout(() => other.destroy(), HALF_CLOSE_LINGER_MS).unref();
      }
    };
    upstream.on('close', () => {
      // Closed before answering (backend died mid-handshake, or the room moved): a failure.
      if (!answered) fail(Object.assign(new Error('closed before answering'), { code: 'ECONNRESET' }));
      else close(client);
    });
    client.on('close', () => {
      if (!answered) {
        // The client gave up during the handshake.
        releaseAdmission();
        finished = true;
        stopTimer();
        o.tunnels.remove(tunnel);
        upstream.destroy();
        return;
      }
      close(upstream);
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

/**
 * Backend -> client after the 101, called by the socket's onread for every read, with the
 * tunnel's own buffer: no Buffer allocated per read, no stream machinery on the read side, no
 * closure per frame. The buffer is read into again as soon as this returns true, so a write that
 * did not complete at once (the client is slow: bytes still queued, pointing into the buffer)
 * pauses reading until the client drains; that is also the back-pressure.
 */
function relay(client: Socket, upstream: Socket): (n: number, buf: Buffer) => boolean {
  let waiting = false;
  client.on('drain', () => {
    if (!waiting) return;
    waiting = false;
    upstream.resume();
  });
  return (n, buf) => {
    if (client.destroyed) return false;
    client.write(buf.subarray(0, n));
    if (client.writableLength === 0) return true;
    waiting = true;
    return false;
  };
}

function destroySelf(this: Socket): void {
  this.destroy();
}

function endWith(socket: Socket, response: string): void {
  if (socket.destroyed) return;
  socket.end(response);
  setTimeout(() => socket.destroy(), 1_000).unref();
}
