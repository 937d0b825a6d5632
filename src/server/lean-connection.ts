// The byte-level front of the public listener (plain HTTP, and HTTP/1.1 on the TLS port). Each
// new connection is read here first: a request head of the narrow subset src/http/lean-request-head.ts accepts, for a path
// that is proxied (not a health path, roomgate's own paths or a static mount), is answered by
// LeanPages without node:http's per-request objects; keep-alive and pipelined requests follow
// one after the other, in order. A WebSocket handshake of the subset goes to the upgrade path
// the same way (src/proxy/upgrade-proxy.ts, upgrade-tunnel.ts), and the socket leaves this front for good: it
// becomes a tunnel. At the first request that is anything else (a body, an upgrade outside the
// subset, an unusual byte, a head split past the header timeout...), the connection is handed to
// node:http for the rest of its life, the unread bytes put back first: node:http then parses
// exactly what it would have parsed had it owned the socket from the start, so every rule and
// answer the conformance corpus pins for it still holds. A hand-over happens only between
// answers, never with one half written.
import { CLIENT_REFUSALS, refusalText, type ClientRefusalCode } from '../http/refusals.js';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { leanRequestOf } from '../http/client-request.js';
import { mayBeLean, parseLeanHead, type LeanHandshake, type LeanLimits } from '../http/lean-request-head.js';
import { rememberPeer } from '../http/peer.js';
import type { TargetRule } from '../http/target.js';
import { resetConnection } from '../http/reset.js';
import { keepHeadDeadline } from './head-deadline.js';
import type { Metrics } from '../observability/metrics.js';
import type { PageClient } from '../http/page-client.js';
import type { RequestPipeline } from '../pipeline/pipeline.js';

export interface LeanFrontOptions {
  readonly limits: LeanLimits;
  /** From a connection's first byte (or its opening) to a complete head; then 408, as node:http. */
  readonly headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this, as node:http does. */
  readonly keepAliveTimeoutMs: number;
  /** An answer the client takes nothing of for this long closes the connection; 0 = never. */
  readonly clientWriteTimeoutMs: number;
  /**
   * Where requests go (src/pipeline/pipeline.ts): only those that go to the app are answered here;
   * roomgate's own paths (health, control plane, static mounts) are handed to node:http. A
   * WebSocket handshake is always the app's (as on node:http): it goes to upgrade().
   */
  readonly pipeline: Pick<RequestPipeline, 'goesToTheApp' | 'page' | 'upgrade'>;
  /**
   * The target's canonical form and the reserved paths (src/http/target.ts). A target not already
   * canonical, or refused, goes to node:http, whose head check rewrites or refuses it: one place
   * answers those, and the byte-level path only ever forwards canonical targets.
   */
  readonly target: TargetRule;
  readonly metrics: Metrics;
}

type ToNode = (socket: Socket) => void;

/** What a connection's one timer waits for: a head, the next request, or the client taking an answer. */
type TimerKind = 'head' | 'idle' | 'write';

export class LeanFront {
  readonly connections = new Set<LeanConnection>();
  /** Stopping: answers close their connections, idle ones are closed. */
  stopping = false;
  private closed = false;

  constructor(readonly o: LeanFrontOptions) {}

  /**
   * Takes the server's new connections first: on the plain port each accepted one, on the TLS port
   * each whose handshake chose HTTP/1.1 (h2 ones, and all when `tls` is false, pass on as before).
   * The server's own listeners (node:http's parser, roomgate's peer bookkeeping, the h2 front) run
   * when a connection is handed over.
   */
  attach(server: Server, tls: boolean): void {
    const event = tls ? 'secureConnection' : 'connection';
    const listeners = server.listeners(event) as ((socket: Socket) => void)[];
    server.removeAllListeners(event);
    const toNode: ToNode = (socket) => {
      for (const l of listeners) l.call(server, socket);
    };
    server.on(event, (socket: Socket) => {
      if (tls && (socket as TLSSocket).alpnProtocol === 'h2') return toNode(socket);
      // A handshake that finished after the stop's deadline is not served any more.
      if (this.closed) return void socket.destroy();
      const conn = new LeanConnection(this, socket, toNode, tls);
      if (!conn.closed) this.connections.add(conn);
    });
  }

  /** Closes connections between requests; the others close after their answer. */
  closeIdle(): void {
    this.stopping = true;
    for (const c of this.connections) c.closeIfIdle();
  }

  /** A head handed to node:http mid-way was not complete at its deadline: node:http's own 408. */
  readonly headExpired = (socket: Socket): void => {
    this.o.metrics.clientErrors.inc({ code: '408' });
    socket.end(refusalText('head-timeout'));
    setTimeout(() => socket.destroy(), 1_000).unref();
  };

  closeAll(): void {
    this.stopping = true;
    this.closed = true;
    for (const c of this.connections) c.socket.destroy();
  }
}

class LeanConnection implements PageClient {
  current: { clientGone(): void } | null = null;
  readonly peer: string;
  /** The request being answered asked for the connection to end after its answer (Connection: close). */
  private closeAsked = false;
  private buf: Buffer | null = null;
  /** The head of the request being answered (put back if it is handed over). */
  private headBytes: Buffer | null = null;
  private busy = false;
  private gone = false;
  private ended = false;
  private paused = false;
  private timer: NodeJS.Timeout | null = null;
  private timerKind: TimerKind | null = null;
  /** When the head being read must be complete (the 'head' timer's time). */
  private headDeadline = 0;
  private readonly onData = (chunk: Buffer): void => this.data(chunk);
  private readonly onEnd = (): void => this.clientEnded();
  private readonly onError = (): void => {
    this.socket.destroy();
  };
  private readonly onClose = (): void => this.closedNow();
  private readonly onDrain = (): void => this.proceed();

  constructor(
    private readonly front: LeanFront,
    readonly socket: Socket,
    private readonly toNode: ToNode,
    /** A TLS connection (https): X-Forwarded-Proto, the cookie's Secure flag, HSTS. */
    readonly encrypted: boolean,
  ) {
    const peer = socket.remoteAddress;
    if (peer === undefined) {
      // Reset before its address could be read: nobody will read an answer.
      this.peer = '';
      this.gone = true;
      socket.destroy();
      return;
    }
    this.peer = peer;
    rememberPeer(socket);
    socket.setNoDelay(true);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    // node:http counts a new connection's header time from its opening.
    this.setTimer('head', front.o.headersTimeoutMs);
  }

  get closed(): boolean {
    return this.gone;
  }

  keepAlive(): boolean {
    return !this.closeAsked && !this.ended && !this.front.stopping;
  }

  answered(open: boolean): void {
    this.headBytes = null;
    if (this.gone || !open) {
      this.busy = false;
      if (!this.gone) this.finish();
      return;
    }
    // A client that does not read its answers gets no further ones until it does (as node:http
    // stops parsing pipelined requests): the connection stays busy, so what it sends meanwhile is
    // buffered up to a head's worth and then not read, and at most one answer waits in memory.
    if (this.socket.writableNeedDrain) {
      this.socket.once('drain', this.onDrain);
      // ...but not forever: the next request's timer (head or idle) replaces this one.
      this.setTimer('write', this.front.o.clientWriteTimeoutMs);
      return;
    }
    this.proceed();
  }

  /** Ready for the next request: reading resumes, and a whole head already buffered starts. */
  private proceed(): void {
    this.busy = false;
    if (this.gone) return;
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    this.next();
  }

  handOver(reason: string): void {
    if (this.gone) return;
    const pending = this.headBytes !== null ? (this.buf !== null ? Buffer.concat([this.headBytes, this.buf]) : this.headBytes) : this.buf;
    this.front.o.metrics.leanHandOvers.inc({ reason });
    // Mid-head: node:http would start the head's clock again; the deadline set here goes along.
    const deadline = this.timerKind === 'head' ? this.headDeadline : 0;
    this.detach();
    const s = this.socket;
    if (deadline > 0) keepHeadDeadline(s, deadline, this.front.headExpired);
    s.pause();
    if (pending !== null) s.unshift(pending);
    this.toNode(s);
    s.resume();
  }

  /** This path lets go of the connection: its timers, its listeners, its place in the set. */
  private detach(): void {
    this.gone = true;
    this.clearTimer();
    this.front.connections.delete(this);
    const s = this.socket;
    s.off('data', this.onData);
    s.off('end', this.onEnd);
    s.off('error', this.onError);
    s.off('close', this.onClose);
    s.off('drain', this.onDrain);
  }

  closeIfIdle(): void {
    if (!this.busy && !this.gone) this.socket.destroy();
  }

  private data(chunk: Buffer): void {
    if (this.gone || this.ended) return;
    const fresh = this.buf === null;
    this.buf = fresh ? chunk : Buffer.concat([this.buf as Buffer, chunk]);
    if (this.busy) {
      // Pipelined requests wait for the answer before them; beyond a head's worth, reading stops.
      if (this.buf.length > this.front.o.limits.maxHeaderBytes && !this.paused) {
        this.paused = true;
        this.socket.pause();
      }
      return;
    }
    // A new request's header time starts at its first byte (an idle timer gives way to it).
    if (fresh && this.timerKind !== 'head') this.setTimer('head', this.front.o.headersTimeoutMs);
    this.next();
  }

  /** Starts on the next request in the buffer, if there is a whole one. */
  private next(): void {
    const buf = this.buf;
    if (buf === null) {
      if (this.ended) this.finish();
      else this.setTimer('idle', this.front.o.keepAliveTimeoutMs);
      return;
    }
    if (!mayBeLean(buf, 0)) return this.handOver('method');
    const parsed = parseLeanHead(buf, 0, this.front.o.limits);
    if (parsed.kind === 'incomplete') {
      if (this.timerKind !== 'head') this.setTimer('head', this.front.o.headersTimeoutMs);
      return;
    }
    if (parsed.kind === 'other') return this.handOver(parsed.reason);
    if (parsed.kind === 'upgrade') return this.upgrade(parsed.handshake, buf);
    const head = parsed.head;
    const target = this.front.o.target(head.url);
    if (!target.ok || target.url !== head.url) return this.handOver('target');
    if (!this.front.o.pipeline.goesToTheApp(head.url)) return this.handOver('own-path');
    this.clearTimer();
    this.headBytes = buf.subarray(0, head.end);
    this.buf = head.end === buf.length ? null : buf.subarray(head.end);
    this.busy = true;
    this.closeAsked = head.close;
    this.front.o.pipeline.page(leanRequestOf(head, null, this.peer, this.encrypted), this);
  }

  /**
   * A WebSocket handshake of the subset: the socket leaves this front (timers, listeners, the
   * set) and goes to the upgrade path with the bytes behind the head. The target rule is node:http's
   * head check for it; an upgrade skips steps 2 to 4 there too, so no goesToTheApp here.
   */
  private upgrade(handshake: LeanHandshake, buf: Buffer): void {
    const head = handshake.head;
    const target = this.front.o.target(head.url);
    if (!target.ok || target.url !== head.url) return this.handOver('target');
    this.detach();
    this.buf = null;
    const rest = head.end === buf.length ? null : buf.subarray(head.end);
    this.front.o.pipeline.upgrade(leanRequestOf(head, handshake, this.peer, this.encrypted), this.socket, rest);
  }

  /**
   * The client ended its side. As node:http does (no half-open HTTP connections): a request in
   * flight is abandoned (its backend connection closed, its count released), a head cut short
   * gets a 400, and the connection ends.
   */
  private clientEnded(): void {
    this.ended = true;
    if (this.gone) return;
    if (this.busy) {
      const current = this.current;
      this.current = null;
      current?.clientGone();
      this.finish();
      return;
    }
    if (this.buf !== null) return this.refuse('bad-request');
    this.finish();
  }

  /** Ends the connection, after a last answer of node:http's own when one is given. */
  private finish(last?: string): void {
    if (this.gone) return;
    this.gone = true;
    this.clearTimer();
    this.front.connections.delete(this);
    if (last === undefined) this.socket.end();
    else this.socket.end(last);
    // A client that never reads the end is not waited for.
    setTimeout(() => this.socket.destroy(), 1_000).unref();
  }

  private closedNow(): void {
    this.gone = true;
    this.clearTimer();
    this.front.connections.delete(this);
    const current = this.current;
    this.current = null;
    if (current !== null) current.clientGone();
  }

  private setTimer(kind: TimerKind, ms: number): void {
    this.clearTimer();
    if (ms <= 0) return;
    this.timerKind = kind;
    if (kind === 'head') this.headDeadline = Date.now() + ms;
    this.timer = setTimeout(() => this.expired(kind), ms);
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.timerKind = null;
  }

  private expired(kind: TimerKind): void {
    this.timer = null;
    this.timerKind = null;
    if (kind === 'write') {
      // The client took nothing of its last answer for clientWriteTimeoutMs.
      if (this.gone) return;
      this.front.o.metrics.clientErrors.inc({ code: 'write-timeout' });
      resetConnection(this.socket);
      return;
    }
    if (this.gone || this.busy) return;
    if (kind === 'idle') {
      this.socket.destroy();
      return;
    }
    // The answer node:http gives a head that does not arrive in time.
    this.refuse('head-timeout');
  }

  /** Ends the connection with one of node:http's refusals (as public-server.ts writes them). */
  private refuse(code: ClientRefusalCode): void {
    this.front.o.metrics.clientErrors.inc({ code: String(CLIENT_REFUSALS[code].status) });
    this.finish(refusalText(code));
  }
}
