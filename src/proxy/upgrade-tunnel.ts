// One WebSocket upgrade's connection pair (UpgradeTunnel), from the connect to the backend to the
// tunnel's end: the handshake written, the backend's answer head read (strict, bounded), a non-101
// relayed as one response before both connections close, and after a 101 the bytes moved here (a
// read buffer per tunnel, writes straight to the client, reading paused until a write is taken) or
// handed to the native relay (native-relay.ts) and taken back between two messages when a
// handoff holds the tunnel. A tunnel a handoff may hold is followed message by message
// (tunnel-messages.ts), resumed on a new owner (tunnel-resume.ts). The path's entry, admission and
// the attempt the forwarding core carries are upgrade-proxy.ts's; this file sees them through
// upgrade-options.ts's interfaces.
//
// Each attempt is an UpgradeTunnel with one named state and one cleanup path (finish()). Socket
// listeners are module functions that reach their tunnel through a symbol: no closure per
// socket keeps the request (or anything else of the handshake) alive for the socket's life.
import type { Socket } from 'node:net';
import type { Backend } from '../runtime/pool.js';
import { BodyEnd } from '../http/body-end.js';
import { headerValue, parseResponseHead, type ResponseHead } from '../http/response-head.js';
import { answerFieldsProblem, MAX_RESPONSE_HEAD_BYTES, pairNames } from '../http/response-rules.js';
import { answerDrops, endToEndFields } from '../http/hop-by-hop.js';
import { resetConnection } from '../http/reset.js';
import { ownerFields, type Owner } from '../http/ownership.js';
import { answerFieldValue, locationTarget } from '../http/location.js';
import type { BackendTls } from '../backends/backend-tls.js';
import { connectBackend } from './backend-connect.js';
import type { Tunnel } from '../runtime/tunnels.js';
import type { Listened } from './client-silence.js';
import { TunnelMessages, withoutClientContext } from './tunnel-messages.js';
import { TunnelResume, type ResumeHost } from './tunnel-resume.js';
import { attachReader, resumeReady, serverCloseFrame } from './resume-handshake.js';
import type { Expiring } from './deadlines.js';
import { readAgain, type NativeEnd, type NativeHost, type Released } from './native-relay.js';
import { Socket as NetSocket } from 'node:net';
import type { TunnelAttempt, TunnelPath, UpgradeProxyOptions } from './upgrade-options.js';

// After one side has closed, how long the other may take to flush before it is destroyed.
const HALF_CLOSE_LINGER_MS = 5_000;
// Backend reads land in a buffer of this size per tunnel: game frames are a few hundred bytes,
// a bigger message simply takes several reads. Memory per socket is a target (10 KB), and the
// buffer is held for the socket's whole life: 16 KB would be 160 MB at 10,000 sockets.
const RELAY_BUFFER_BYTES = 1_024;
// A socket its hold ends waits this long for the backend's message in flight to end before roomgate's 1012.
const HOLD_CLOSE_WAIT_MS = 1_000;
// 1xx interim answers (100, 102, 103) before the final one, skipped; more is a broken backend.
const MAX_INTERIM_ANSWERS = 8;
/** A handed-over tunnel's backend socket, once given up: one destroyed socket for all of them. */
const GIVEN_UP = new NetSocket();
GIVEN_UP.destroy();

/** Where an attempt is. Every transition goes through UpgradeTunnel's methods. */
export type TunnelState =
  | 'connecting' // TCP connect to the backend in progress
  | 'awaiting-answer' // handshake sent; reading the backend's answer head
  | 'refusing' // the backend answered with something other than 101: relaying it, then closing
  | 'open' // 101 relayed: bytes flow both ways
  | 'closed';

const kTunnel = Symbol('roomgate.tunnel');
type TunnelSocket = Socket & { [kTunnel]?: UpgradeTunnel };

/** One attempt to join a client to a backend, and then the tunnel between them. */
export class UpgradeTunnel implements Tunnel, Listened, Expiring, ResumeHost, NativeHost {
  state: TunnelState = 'connecting';
  /** The client sent something since the silence sweep last looked (SilenceSweep). */
  heard = false;
  quietSince = 0;
  readonly room: string | null;
  readonly client: Socket;
  /** The backend's connection; a resume (tunnel-resume.ts) replaces it with the new owner's. */
  upstream: Socket;
  private readonly o: UpgradeProxyOptions;
  private admitted = true;
  private timer: NodeJS.Timeout | null = null;
  /** The backend's answer so far, until its head is complete. */
  private answer: Buffer | null = null;
  private interims = 0;
  /** While refusing: where the relayed answer's body ends. */
  private bodyEnd: BodyEnd | null = null;
  /** A relayed read is still queued at the client: backend reads wait until it is written. */
  private waiting = false;
  /**
   * The write callback of relayed reads (one per tunnel, made once), and the only thing that
   * resumes backend reads. Not 'drain': it comes only after a write() that returned false, and a
   * write can return true and still be queued (a TLS socket's always are for a moment). The
   * callback runs once the chunk has left, or with an error when the socket dies.
   */
  private readonly written = (): void => this.clientDrained();
  /** Set on a tunnel to a backend that takes held messages: the hold of a version-2 handoff. */
  messageHold: TunnelMessages | null = null;
  /** The hold ends the socket once the backend's message in flight is over (endForHold). */
  private holdClosing: NodeJS.Timeout | null = null;
  /** The native relay's id for this tunnel once it carries it; 0: this relay carries it. */
  private nativeId = 0;
  /** What waits for the native relay to hand a followed tunnel back (reclaim()). */
  private reclaimers: (() => void)[] = [];

  get backendId(): string {
    return this.backend.id;
  }

  /** The registry closes this tunnel (its room moved, its backend is gone, shutdown): both sides cut. */
  close(): void {
    this.finish('destroy');
  }

  constructor(
    private readonly proxy: TunnelPath,
    private readonly a: TunnelAttempt,
    /** A resume moves the socket to the room's new owner. */
    public backend: Backend,
    private readonly attempt: number,
    /** The room and its placement epoch, told to the backend (X-Roomgate-Room, X-Roomgate-Epoch). */
    private readonly owner: Owner | null,
  ) {
    this.o = proxy.o;
    this.room = a.room;
    this.client = a.client;
    // Plain TCP or TLS (an https:// backend); connected once a TLS handshake is verified too.
    // Plain backend reads land in one small buffer per tunnel (no allocation per frame). Its own
    // allocation, not a slice of Node's shared 8 KB pool: a slice keeps its whole slab alive, and
    // with it the short-lived Buffers cut from the same slab (handshakes, answer heads), for the
    // socket's life (2.3 KB per tunnel measured instead of 1, bench/socket-memory).
    this.upstream = connectBackend(backend.config, this.o.backendTls, Buffer.allocUnsafeSlow(RELAY_BUFFER_BYTES), onUpstreamRead, onUpstreamConnect);
    (this.upstream as TunnelSocket)[kTunnel] = this;
    (this.client as TunnelSocket)[kTunnel] = this;
    this.upstream.on('error', onUpstreamError);
    this.upstream.on('close', onUpstreamClose);
    this.client.on('close', onClientClose);
    this.setTimer(this.o.connectTimeoutMs);
  }

  connected(): void {
    const { o } = this;
    this.state = 'awaiting-answer';
    this.proxy.forwarder.connected(this.backend);
    // Connected: now the backend has responseTimeoutMs to answer the handshake.
    this.setTimer(o.responseTimeoutMs);
    this.upstream.setNoDelay(true);
    this.client.setNoDelay(true);
    // Counted from here, not from the 101: a placement change while the handshake is in flight
    // must find (and close) this socket too, and the busy guard must see it.
    o.tunnels.add(this);
    const owner = ownerFields(this.owner);
    let text = this.a.handshake;
    for (let i = 0; i + 1 < owner.length; i += 2) text += `${owner[i] as string}: ${owner[i + 1] as string}\r\n`;
    // An h2 client's stream (RFC 8441) carries the same frames: followed the same way.
    if (this.room !== null && o.followsMessages?.(this.backend.id) === true) {
      this.messageHold = new TunnelMessages({
        writeUpstream: (b) => void (this.upstream.destroyed || this.upstream.write(b)),
        endForHold: () => this.endForHold(),
        reclaim: (run) => this.reclaim(run),
      });
      text += `X-Roomgate-Socket: ${this.messageHold.socketId}\r\n`;
      if (o.resumesOn?.(this.backend.id) === true) {
        const ready = resumeReady(text);
        this.messageHold.resume = new TunnelResume(this, this.messageHold.down, ready.path, ready.host);
        text = ready.text;
      }
    }
    // latin1: Node decoded each header byte to one char; this writes the same bytes back.
    this.upstream.write(Buffer.from(`${text}\r\n`, 'latin1'));
  }

  /** Every read of the backend connection; false pauses reading until the client drains. */
  read(n: number, buf: Buffer): boolean {
    switch (this.state) {
      case 'open':
        return this.relayOpen(buf, n);
      case 'awaiting-answer':
        this.answer = this.answer === null ? Buffer.from(buf.subarray(0, n)) : Buffer.concat([this.answer, buf.subarray(0, n)]);
        return this.readAnswer();
      case 'refusing':
        return this.relayRefusal(buf, 0, n);
      default:
        return false;
    }
  }

  /**
   * An open tunnel's read; a followed one follows its backend's frames too, so its old owner's
   * stream can end at a message boundary (for a resume, or for the hold's own close).
   */
  private relayOpen(buf: Buffer, n: number): boolean {
    const down = this.messageHold?.down;
    if (down === undefined) return this.relay(buf, 0, n);
    const end = down.follow(buf, 0, n);
    if (!down.ended) return this.relay(buf, 0, n);
    // The stream ended at a boundary: what came before it reaches the client, nothing after.
    if (end > 0 && !this.client.destroyed) this.client.write(Buffer.from(buf.subarray(0, end)));
    if (down.closing) this.closeForHold();
    return false;
  }

  get backendTls(): BackendTls {
    return this.o.backendTls;
  }

  /** A resume opened on `to`: the socket counts there from now on (a cut of the room's other sockets spares it). */
  rehome(to: Backend): boolean {
    if (this.state !== 'open') return false;
    this.o.tunnels.remove(this);
    this.backend = to;
    this.o.tunnels.add(this);
    return true;
  }

  /** The resume's splice: the old owner's connection dropped, the new one's read from now on. */
  splice(socket: Socket, held: Buffer | null, early: Buffer | null): boolean {
    if (this.state !== 'open' || this.client.destroyed) return false;
    const old = this.upstream;
    delete (old as TunnelSocket)[kTunnel];
    old.destroy();
    this.upstream = socket;
    (socket as TunnelSocket)[kTunnel] = this;
    socket.on('error', onUpstreamError);
    socket.on('close', onUpstreamClose);
    socket.on('end', onUpstreamEnd);
    socket.on('drain', onUpstreamDrain);
    if (held !== null) socket.write(held);
    attachReader(socket, this);
    // The client may wait for the old connection's drain, which will not come.
    if (this.client.isPaused()) this.client.resume();
    if (early === null || this.relayOpen(early, early.length)) socket.resume();
    return true;
  }

  writeClient(bytes: Buffer): void {
    if (!this.client.destroyed) this.client.write(bytes);
  }

  /** While a resume waits for it, the old owner's connection ending is its stream's end, not the client's. */
  oldOwnerLeft(): boolean {
    const down = this.messageHold?.down;
    if (down === undefined) return false;
    // Waiting for a boundary to close at, the backend left inside a message: no close can be written.
    if (down.closing && this.state === 'open') {
      this.cutForHold();
      return true;
    }
    if (!down.swallowing) return false;
    down.gone();
    return true;
  }

  private readAnswer(): boolean {
    for (;;) {
      const answer = this.answer as Buffer;
      // The backend's answer head is read whole, within the head limit of every answer, before
      // anything reaches the client.
      const parsed = parseResponseHead(answer, MAX_RESPONSE_HEAD_BYTES);
      if (parsed === null) return true;
      if (!parsed.ok) return this.badAnswer(parsed.error);
      const head = parsed.head;
      if (head.status >= 200 || head.status === 101) {
        // The rules of every answer. An h2 client is given none of a 101's fields but the two it
        // negotiates (src/server/h2-websocket.ts): only a refusal reaches it field by field.
        const problem = answerFieldsProblem(pairNames(head.headers), this.a.h2 && head.status !== 101);
        if (problem !== null) return this.badAnswer(problem);
      }
      if (head.status === 101) return this.open(head);
      // On an h2 extended CONNECT any 2xx opens the WebSocket (RFC 8441 5): a backend's 200 to a
      // handshake is no WebSocket, and relayed it would be taken for one.
      if (this.a.h2 && head.status >= 200 && head.status < 300) return this.badAnswer(`a ${head.status} to an h2 WebSocket (no 101)`);
      if (head.status >= 200) return this.refuseWith(head);
      // 100, 102, 103: interim, not for the client (it asked for an upgrade, not a resource).
      if (++this.interims > MAX_INTERIM_ANSWERS) return this.badAnswer('too many interim answers');
      this.answer = answer.subarray(head.end);
      if (this.answer.length === 0) {
        this.answer = null;
        return true;
      }
    }
  }

  /** A complete 101: the tunnel opens, unless it is no WebSocket answer or the room moved. */
  private open(head: ResponseHead): boolean {
    const { o, a } = this;
    if ((headerValue(head, 'upgrade') ?? '').toLowerCase() !== 'websocket') return this.badAnswer('a 101 without Upgrade: websocket');
    // The room may have been placed elsewhere (by another gateway) while this handshake was in
    // flight: then this socket would split it. Refuse it before any byte reaches the client.
    const placedOn = this.room === null ? null : o.placementOf(this.room);
    if (placedOn !== null && placedOn !== this.backend.id) {
      o.logger.info({ room: this.room, backend: this.backend.id, placedOn }, 'room moved during the handshake: socket refused');
      this.finish('gone');
      this.proxy.refuse(this.client, { code: 'room-moving', retryAfterS: 1, backend: this.backend.id, detail: `placed on ${placedOn}` });
      return false;
    }
    this.answered(head.status);
    this.state = 'open';
    const answer = this.answer as Buffer;
    this.answer = null;
    // A client that vanished without a FIN is found by TCP keep-alive; a dead backend is found
    // by the health checks, so the backend side skips the syscalls. (A socket option: it stays
    // with the connection on either relay.)
    this.client.setKeepAlive(true, 30_000);
    if (this.handOver(switchingHead(head, this.messageHold), answer.subarray(head.end))) return false;
    o.metrics.relayTunnels.inc({ relay: 'javascript' });
    // The 101 head as roomgate writes it, then whatever frames came behind it; copies, so no
    // back-pressure wait is needed.
    this.client.write(switchingHead(head, this.messageHold));
    if (answer.length > head.end) this.client.write(answer.subarray(head.end));
    if (a.pending !== null) this.upstream.write(a.pending);
    a.opened();
    this.client.on('data', onClientData);
    this.upstream.on('drain', onUpstreamDrain);
    this.upstream.on('end', onUpstreamEnd);
    this.client.resume();
    if (o.idleTimeoutMs > 0) this.client.setTimeout(o.idleTimeoutMs, onClientIdle);
    this.proxy.silence.add(this);
    return true;
  }

  /**
   * The native relay takes the open tunnel when it can (plain on both sides). It writes the 101
   * and the early bytes itself; the client's socket reads nothing more here, the backend's is
   * given up (or, on a followed tunnel, lent: see reclaim()).
   */
  private handOver(head: Buffer, early: Buffer): boolean {
    const native = this.proxy.native;
    // A tunnel is counted (and so held) from its handshake on: one whose room's hold began while
    // its 101 was on its way stays here, where the hold keeps what its client sends.
    if (native === null || this.a.h2 || this.messageHold?.follower.isAsked === true || !native.takes(this.client, this.upstream)) return false;
    const { o, a } = this;
    // A tunnel a handoff may hold is followed message by message there too, and handed back
    // between two messages when its hold is asked (reclaim()); its backend socket is only lent.
    const follow = this.messageHold !== null;
    this.nativeId = native.adopt(this, {
      client: this.client,
      backend: this.upstream,
      toBackend: a.pending,
      toClient: early.length > 0 ? Buffer.concat([head, early]) : head,
      silenceMs: o.clientSilenceMs,
      idleMs: o.idleTimeoutMs,
      writeTimeoutMs: o.clientWriteTimeoutMs,
      lingerMs: HALF_CLOSE_LINGER_MS,
      follow,
    });
    a.opened();
    o.metrics.relayTunnels.inc({ relay: 'native' });
    // Lent: this read callback returning false stops its reading until the tunnel comes back.
    if (follow) return true;
    const given = this.upstream;
    delete (given as TunnelSocket)[kTunnel];
    this.upstream = GIVEN_UP;
    // Not inside its own read callback (this runs in it): the relay has its own descriptor.
    setImmediate(destroySocket, given);
    return true;
  }

  /**
   * The native relay let go of this tunnel: it ended by itself (a side's FIN once both ended, an
   * error, a limit), or it was closed here. The client's descriptor is closed only now.
   */
  nativeEnded(reason: NativeEnd, _up: number, _down: number): void {
    this.nativeId = 0;
    this.reclaimers = [];
    const { o } = this;
    // A lent backend socket (a followed tunnel) is closed with the client's; a given-up one is gone already.
    this.upstream.destroy();
    if (this.state !== 'closed') {
      this.state = 'closed';
      this.forget();
      switch (reason) {
        case 'silent':
          o.metrics.clientErrors.inc({ code: 'websocket-silent' });
          o.logger.info({ room: this.room, backend: this.backend.id, ms: o.clientSilenceMs }, 'client silent: socket closed');
          break;
        case 'write-timeout':
          o.metrics.clientErrors.inc({ code: 'write-timeout' });
          o.logger.info({ room: this.room, backend: this.backend.id, ms: o.clientWriteTimeoutMs }, 'client did not read: socket closed');
          resetConnection(this.client);
          return;
        case 'idle':
          this.idle();
          break;
        case 'backend-error':
          this.proxy.forwarder.lost(this.a, this.backend, Object.assign(new Error('backend connection failed'), { code: 'ECONNRESET' }));
          break;
        case 'backend-eof':
          // The backend ended first: the client has its bytes and a FIN, and HALF_CLOSE_LINGER_MS
          // to close; its FIN ends it sooner (clientEnded), what it sends meanwhile goes nowhere.
          this.client.on('data', discard);
          this.client.resume();
          readAgain(this.client);
          destroyAfterLinger(this.client);
          return;
        default:
          break;
      }
    }
    this.client.destroy();
  }

  /**
   * The tunnel's bytes are relayed here: runs nothing and says true; or, on the native relay, asks
   * for the tunnel back, runs `run` once it is here (between two messages both ways), and says false.
   */
  reclaim(run: () => void): boolean {
    if (this.nativeId === 0) return true;
    this.reclaimers.push(run);
    if (this.reclaimers.length === 1) this.proxy.native?.release(this.nativeId);
    return false;
  }

  /**
   * The native relay handed the followed tunnel back: both streams are between two messages. The
   * followers start from there; the bytes the relay still owed each side go out first; then the
   * waiting hold begins, and only then are the bytes sent past the boundaries taken: the client's
   * through the hold (kept), the backend's relayed. From here this relay carries it as one it
   * opened itself.
   */
  nativeReleased(r: Released): void {
    this.nativeId = 0;
    const runs = this.reclaimers;
    this.reclaimers = [];
    const hold = this.messageHold;
    if (this.state !== 'open' || hold === null) {
      this.upstream.destroy();
      this.client.destroy();
      return;
    }
    hold.follower.seed(r.client);
    hold.down.seed(r.backend);
    if (r.owedBackend !== null) this.upstream.write(r.owedBackend);
    if (r.owedClient !== null) this.client.write(r.owedClient);
    this.client.on('data', onClientData);
    this.upstream.on('drain', onUpstreamDrain);
    this.upstream.on('end', onUpstreamEnd);
    if (this.o.idleTimeoutMs > 0) this.client.setTimeout(this.o.idleTimeoutMs, onClientIdle);
    this.proxy.silence.add(this);
    for (const run of runs) run();
    if (this.state !== 'open') return;
    // Reading starts again after this turn: the bytes past the boundaries come first.
    this.client.resume();
    readAgain(this.client);
    if (r.pastClient !== null) onClientData.call(this.client, r.pastClient);
    if (r.pastBackend === null || this.relayOpen(r.pastBackend, r.pastBackend.length)) readAgain(this.upstream);
  }

  /** Any final answer but 101: relayed as one response, then both connections close. */
  private refuseWith(head: ResponseHead): boolean {
    this.answered(head.status);
    this.state = 'refusing';
    // The backend has responseTimeoutMs of silence to finish the body.
    this.setTimer(this.o.responseTimeoutMs);
    // The end-to-end fields; the body is relayed in the backend's framing, its connection closed
    // after it. The same Location rule as the page paths' (the h2 extended CONNECT answer is made
    // from this text).
    const origin = this.a.origin;
    const location = origin === null ? null : locationTarget(this.backend.config, origin.scheme, origin.host);
    const fields = endToEndFields(head.headers.flat());
    if (location !== null) for (let i = 0; i + 1 < fields.length; i += 2) fields[i + 1] = answerFieldValue(fields[i] as string, fields[i + 1] as string, location);
    let text = `HTTP/1.1 ${head.status} ${head.reason}\r\n${fieldLines(fields)}`;
    if (head.body.kind === 'chunked') text += 'Transfer-Encoding: chunked\r\n';
    this.client.write(Buffer.from(`${text}Connection: close\r\n\r\n`, 'latin1'));
    const answer = this.answer as Buffer;
    this.answer = null;
    this.bodyEnd = new BodyEnd(head.body);
    return this.relayRefusal(answer, head.end, answer.length);
  }

  private relayRefusal(buf: Buffer, from: number, to: number): boolean {
    const bodyEnd = this.bodyEnd as BodyEnd;
    let end: number;
    try {
      end = bodyEnd.feed(buf, from, to);
    } catch (err) {
      // Broken chunked framing after the head went out: the client can only be cut off.
      this.o.logger.warn({ room: this.room, backend: this.backend.id, err: (err as Error).message }, 'backend answer to an upgrade broke its framing');
      this.finish('destroy');
      return false;
    }
    if (end === -1) return this.relay(buf, from, to);
    if (end > from) this.client.write(buf.subarray(from, end));
    // Complete: whatever the backend sends next is not for anyone.
    this.finish('end');
    return false;
  }

  /**
   * Backend -> client: written straight from the read buffer, which the next read reuses, so
   * reading pauses until this write has left it (the write's callback resumes it).
   */
  private relay(buf: Buffer, from: number, to: number): boolean {
    if (this.client.destroyed) return false;
    this.client.write(buf.subarray(from, to), this.written);
    if (this.client.writableLength === 0) return true;
    this.waiting = true;
    this.proxy.stalls?.set(this, Date.now() + this.o.clientWriteTimeoutMs);
    return false;
  }

  clientDrained(): void {
    if (!this.waiting) return;
    this.waiting = false;
    this.proxy.stalls?.clear(this);
    this.upstream.resume();
  }

  /** A relayed write has waited clientWriteTimeoutMs for the client: it reads nothing; both sides are cut. */
  expire(): void {
    if (!this.waiting || this.state === 'closed') return;
    this.o.metrics.clientErrors.inc({ code: 'write-timeout' });
    this.o.logger.info({ room: this.room, backend: this.backend.id, ms: this.o.clientWriteTimeoutMs }, 'client did not read: socket closed');
    resetConnection(this.client);
    this.finish('destroy');
  }

  /** The client sent nothing for clientSilenceMs (SilenceSweep): its network is gone; both sides are cut. */
  silent(): void {
    if (this.state !== 'open') return;
    // Not heard because not read: the tunnel paused the client itself, as the backend has not
    // taken what it sent (onClientData). A client sending to a slow backend is not silent; it is
    // looked at again after another limit.
    if (this.client.isPaused()) {
      this.proxy.silence.add(this);
      return;
    }
    this.o.metrics.clientErrors.inc({ code: 'websocket-silent' });
    this.o.logger.info({ room: this.room, backend: this.backend.id, ms: this.o.clientSilenceMs }, 'client silent: socket closed');
    this.finish('destroy');
  }

  private answered(status: number): void {
    const { o } = this;
    this.releaseAdmission();
    this.clearTimer();
    o.metrics.upgrades.inc({ backend: this.backend.id, result: String(status) });
    o.logger.info(
      { room: this.room, backend: this.backend.id, source: this.a.source, status, ms: Date.now() - this.a.startedAt, attempt: this.attempt },
      'upgrade',
    );
  }

  /** An answer roomgate will not relay: 502 while the client has had nothing yet. */
  private badAnswer(problem: string): boolean {
    this.finish('gone');
    this.proxy.forwarder.badAnswer(this.a, this.backend, problem);
    return false;
  }

  /** The backend connection failed or closed. */
  upstreamFailed(err: NodeJS.ErrnoException): void {
    switch (this.state) {
      case 'closed':
        return;
      case 'open':
        if (this.oldOwnerLeft()) return;
        // Inside a live WebSocket: close the client's socket, write nothing.
        this.proxy.forwarder.lost(this.a, this.backend, err);
        this.finish('destroy');
        return;
      case 'refusing':
        // A close-delimited body ends here, complete; any other is cut.
        this.finish(this.bodyEnd?.closeDelimited ? 'end' : 'destroy');
        return;
      default:
        this.failBeforeAnswer(err);
    }
  }

  private failBeforeAnswer(err: NodeJS.ErrnoException): void {
    this.finish('gone');
    // A handshake has no body: a refused connection is tried on the next backend.
    this.proxy.forwarder.failed(this.a, { backend: this.backend, attempt: this.attempt, err });
  }

  clientClosed(): void {
    this.messageHold?.socketClosed();
    if (this.state === 'closed') return;
    // Open: the backend may still flush what it has; otherwise nothing more is wanted of it.
    this.finish(this.state === 'open' ? 'linger' : 'destroy');
  }

  /**
   * A held tunnel ended for its handoff (a hold limit, no boundary in time, it outlived its
   * release): the client gets a 1012 close (service restart: djust and any client that reconnects
   * after a close come back) written between two of the backend's messages, so the backend's
   * message in flight is finished first, within HOLD_CLOSE_WAIT_MS; a stream that never reaches a
   * boundary, or cannot be followed, is ended without one (the client sees 1006).
   */
  endForHold(): void {
    if (this.state === 'closed' || this.holdClosing !== null) return;
    if (this.nativeId !== 0) {
      // Back from the native relay first (between two messages), within the same wait.
      this.holdClosing = setTimeout(onHoldCloseTimeout, HOLD_CLOSE_WAIT_MS, this);
      this.reclaim(() => {
        if (this.holdClosing !== null) clearTimeout(this.holdClosing);
        this.holdClosing = null;
        this.endForHold();
      });
      return;
    }
    const down = this.messageHold?.down;
    // The backend's own close already went out (its release): the client has its code.
    if (this.state !== 'open' || down === undefined || down.broken || down.ended || down.closeSeen) return this.cutForHold();
    if (down.closeAtBoundary()) return this.closeForHold();
    this.holdClosing = setTimeout(onHoldCloseTimeout, HOLD_CLOSE_WAIT_MS, this);
  }

  /** At a boundary of the backend's stream: roomgate's own close, then the end. */
  closeForHold(): void {
    if (this.state === 'closed') return;
    this.writeClient(serverCloseFrame(1012, 'room moved'));
    this.cutForHold();
  }

  /**
   * The backend side is cut, the client gets an end after what was written and a few seconds to
   * close; what it sends until then is still kept, so the batch delivered to the new owner is complete.
   */
  cutForHold(): void {
    if (this.state === 'closed') return;
    // Still on the native relay (no boundary came in time): both sides cut there.
    if (this.nativeId !== 0) return this.finish('destroy');
    this.state = 'closed';
    this.clearTimer();
    this.releaseAdmission();
    this.forget();
    this.upstream.destroy();
    endWith(this.client, null);
  }

  /** The client ended its side (a FIN), in any state: listened to from the handshake on. */
  clientEnded(): void {
    switch (this.state) {
      case 'open':
        return this.halfClosed(this.upstream);
      case 'refusing':
        // The refusal is still relayed (a half-closed client may read it); its deadline holds.
        return;
      case 'closed':
        // Between two attempts (a retry's decision pending), nothing was answered yet: the client
        // is gone, and the retry sees it. After an answer, the socket's own end is under way.
        if (!this.client.writableEnded) this.client.destroy();
        return;
      default:
        // Connecting or awaiting the answer: the client gave up its handshake (as a browser whose
        // page closed, or a client past its own timeout under overload). Nobody will read a 101.
        this.finish('destroy');
    }
  }

  /** One side of an open tunnel ended: the other ends too, and has HALF_CLOSE_LINGER_MS to flush. */
  halfClosed(other: Socket): void {
    if (this.state !== 'open' || other.destroyed) return;
    other.end();
    this.setTimer(HALF_CLOSE_LINGER_MS);
  }

  idle(): void {
    this.o.logger.info({ room: this.room, backend: this.backend.id }, 'idle socket closed');
  }

  timedOut(): void {
    this.timer = null;
    if (this.state === 'closed') return;
    // Refusing past its deadline, or open past the half-close linger: both sides are cut.
    if (this.state === 'refusing' || this.state === 'open') return this.finish('destroy');
    this.upstream.destroy(Object.assign(new Error('timeout'), { code: this.state === 'connecting' ? 'ECONNTIMEOUT' : 'ERESPONSETIMEOUT' }));
  }

  /**
   * The one way out. 'gone': the attempt ends and the client is answered by the caller (or
   * retried); 'end': the client gets a clean end after what was written; 'destroy': both are cut;
   * 'linger': the client left, the backend gets an end and a few seconds to flush.
   */
  private finish(how: 'gone' | 'end' | 'destroy' | 'linger'): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clearTimer();
    this.releaseAdmission();
    this.forget();
    this.answer = null;
    this.bodyEnd = null;
    // On the native relay: it closes both sides; the client's descriptor is closed once it let go.
    if (this.nativeId !== 0) return this.proxy.native?.close(this.nativeId);
    switch (how) {
      case 'gone':
        this.upstream.destroy();
        break;
      case 'end':
        this.upstream.destroy();
        endWith(this.client, null);
        break;
      case 'destroy':
        this.upstream.destroy();
        this.client.destroy();
        break;
      case 'linger':
        if (!this.upstream.destroyed) {
          this.upstream.end();
          destroyAfterLinger(this.upstream);
        }
        break;
    }
  }

  /** The open tunnel's backend side closed: the client gets an end and time to flush. */
  upstreamClosed(): void {
    if (this.state === 'open' && this.oldOwnerLeft()) return;
    if (this.state !== 'open') return this.upstreamFailed(Object.assign(new Error('closed before answering'), { code: 'ECONNRESET' }));
    this.state = 'closed';
    this.clearTimer();
    this.forget();
    if (!this.client.destroyed) {
      this.client.end();
      destroyAfterLinger(this.client);
    }
  }

  /** Out of the registry and the sweeps. */
  private forget(): void {
    if (this.holdClosing !== null) clearTimeout(this.holdClosing);
    this.holdClosing = null;
    this.o.tunnels.remove(this);
    this.proxy.silence.delete(this);
    if (this.waiting) this.proxy.stalls?.clear(this);
  }

  private releaseAdmission(): void {
    if (!this.admitted) return;
    this.admitted = false;
    this.o.admission.release(this.backend.id);
  }

  private setTimer(ms: number): void {
    this.clearTimer();
    this.timer = setTimeout(onTunnelTimeout, ms, this);
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}

// Socket listeners: module functions (one copy for all sockets), reaching the tunnel by symbol.
function tunnelOf(s: Socket): UpgradeTunnel | undefined {
  return (s as TunnelSocket)[kTunnel];
}
function onUpstreamRead(this: Socket, n: number, buf: Uint8Array): boolean {
  return tunnelOf(this)?.read(n, buf as Buffer) ?? false;
}
function onUpstreamConnect(this: Socket): void {
  tunnelOf(this)?.connected();
}
function onUpstreamError(this: Socket, err: NodeJS.ErrnoException): void {
  tunnelOf(this)?.upstreamFailed(err);
}
function onUpstreamClose(this: Socket): void {
  tunnelOf(this)?.upstreamClosed();
}
function onUpstreamEnd(this: Socket): void {
  const t = tunnelOf(this);
  if (t && !t.oldOwnerLeft()) t.halfClosed(t.client);
}
function onUpstreamDrain(this: Socket): void {
  tunnelOf(this)?.client.resume();
}
function onClientData(this: Socket, chunk: Buffer): void {
  const t = tunnelOf(this);
  if (t === undefined) return;
  t.heard = true;
  const out = t.messageHold === null ? chunk : t.messageHold.follower.pass(chunk);
  if (out !== null && !t.upstream.write(out)) this.pause();
}
export function onClientEnd(this: Socket): void {
  const t = tunnelOf(this);
  // Still being routed (no attempt yet): gone, which the routing sees (Attempt.gone()).
  if (t === undefined) this.destroy();
  else t.clientEnded();
}
function onClientClose(this: Socket): void {
  tunnelOf(this)?.clientClosed();
}
function onClientIdle(this: Socket): void {
  tunnelOf(this)?.idle();
  this.destroy();
}
function onTunnelTimeout(t: UpgradeTunnel): void {
  t.timedOut();
}
function onHoldCloseTimeout(t: UpgradeTunnel): void {
  t.cutForHold();
}

function discard(): void {}

export function destroySelf(this: Socket): void {
  this.destroy();
}

/** A half-closed side's time to flush and end by itself, then it is destroyed. */
function destroyAfterLinger(s: Socket): void {
  setTimeout(destroySocket, HALF_CLOSE_LINGER_MS, s).unref();
}

function destroySocket(s: Socket): void {
  s.destroy();
}

/** [name, value, ...] as header lines, each CRLF-terminated. */
function fieldLines(fields: readonly string[]): string {
  let text = '';
  for (let i = 0; i + 1 < fields.length; i += 2) text += `${fields[i] as string}: ${fields[i + 1] as string}\r\n`;
  return text;
}

/**
 * The 101 for the client: the backend's fields as it sent them (a plain 101 passes byte for byte)
 * but for what may not pass: hop-by-hop fields and those its Connection names, Content-Length (RFC
 * 9110 8.6: a 1xx has none). Of the upgrade's own two, the first Upgrade (checked: websocket) and
 * one Connection: Upgrade.
 */
function switchingHead(head: ResponseHead, followed: TunnelMessages | null): Buffer {
  const drops = answerDrops(head.headers.flat());
  let text = `HTTP/1.1 101 ${head.reason}\r\n`;
  let upgrade = false;
  let connection = false;
  for (const [name, value] of head.headers) {
    const lower = name.toLowerCase();
    if (lower === 'upgrade' && !upgrade) {
      upgrade = true;
      text += `${name}: ${value}\r\n`;
    } else if (lower === 'connection' && !connection) {
      connection = true;
      text += `${name}: ${value.toLowerCase() === 'upgrade' ? value : 'Upgrade'}\r\n`;
    } else if (followed !== null && lower === 'sec-websocket-extensions') {
      // A followed tunnel's client compresses each message alone, so a held one can be read.
      const alone = withoutClientContext(value);
      if (alone !== null) followed.deflate = true;
      followed.resume?.noteAnswerField(lower, alone ?? value);
      text += `${name}: ${alone ?? value}\r\n`;
    } else {
      if (lower === 'sec-websocket-protocol') followed?.resume?.noteAnswerField(lower, value);
      if (!drops(lower) && lower !== 'content-length') text += `${name}: ${value}\r\n`;
    }
  }
  if (!connection) text += 'Connection: Upgrade\r\n';
  return Buffer.from(`${text}\r\n`, 'latin1');
}

/** Ends a socket (with a last response, or after what was written) and destroys it soon after. */
export function endWith(socket: Socket, response: string | null): void {
  if (socket.destroyed) return;
  if (response === null) socket.end();
  else socket.end(response);
  setTimeout(destroySocket, 1_000, socket).unref();
}
