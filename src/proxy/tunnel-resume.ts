// One tunnel's side of a resumed socket (docs/handoff.md, "Deliver", item 1): the client's socket
// stays open while its room moves, and roomgate switches its upstream from the old owner to the
// new one at a message boundary in both directions. Made only for tunnels to a backend whose hello
// said `resume` when the tunnel opened (its deflate offer was then rewritten to keep no context):
// - the backend -> client direction is followed frame header by frame header (OldStreamEnd), so
//   the old owner's stream can end between two messages and its close frame is never relayed;
// - the resumed upgrade (resume-handshake.ts) is opened as the release is asked for, its 101
//   consumed; from then on the old owner's close is not relayed;
// - after the release, once the old stream has ended, the held client messages go to the new
//   upstream in order and the tunnel splices the client to it (the tunnel's own part).
// Anything that fails ends the socket as version 1 would (a 1012 close of roomgate's own, between
// two messages), its messages kept for the hook.
import type { Socket } from 'node:net';
import type { BackendTls } from '../backends/backend-tls.js';
import type { Backend } from '../runtime/pool.js';
import type { ResumeStep } from '../runtime/room-hold.js';
import { MessageBoundaries } from './message-boundaries.js';
import { openResumed, serverCloseFrame } from './resume-handshake.js';

/** What the tunnel does for its resume. */
export interface ResumeHost {
  readonly backendTls: BackendTls;
  /** The socket counts on `to` from now on; false: the tunnel is gone. */
  rehome(to: Backend): boolean;
  /** The old upstream dropped, `socket` the upstream from now on: `held` written to it, then `early` relayed to the client. False: the tunnel is gone. */
  splice(socket: Socket, held: Buffer | null, early: Buffer | null): boolean;
  writeClient(bytes: Buffer): void;
  /** Ends the socket for the hold (the client ended, its late bytes still kept). */
  endForHold(): void;
}

/**
 * The backend -> client direction of a followed tunnel (every tunnel a hold can take, not only
 * those that may be resumed). Followed always (a boundary cannot be found later), so that:
 * - while a resume waits for the old owner's stream to end, a close frame at a message boundary
 *   ends it there and nothing from it on is relayed;
 * - a socket its hold ends (a limit passed, no boundary in time, it outlived its release) gets a
 *   1012 close of roomgate's own between two of the backend's messages (`closing`), not a bare end.
 */
export class OldStreamEnd {
  private boundaries = new MessageBoundaries();
  /** A resume opened: the old owner's close, at a boundary, ends its stream. */
  swallowing = false;
  /** The hold ends the socket: its stream ends at the next message boundary (a close of roomgate's own follows). */
  closing = false;
  /** The old stream ended; `endedAtBoundary` says whether between two messages. */
  ended = false;
  private endedAtBoundary = false;
  private waiter: ((atBoundary: boolean) => void) | null = null;

  /** The stream is between two messages, as another follower (the native relay's) saw it. */
  seed(state: { readonly broken: boolean; readonly closeSeen: boolean }): void {
    this.boundaries.seed(state);
  }

  /** Follows buf[from, to) of the backend's stream; returns where relaying stops (`to`: all of it). */
  follow(buf: Buffer, from: number, to: number): number {
    if (this.ended) return from;
    if (this.closing) return this.followToBoundary(buf, from, to);
    if (!this.swallowing) {
      this.boundaries.follow(buf, from, to);
      return to;
    }
    for (let i = from; i < to; ) {
      if (this.boundaries.atBoundary && ((buf[i] as number) & 0x0f) === 8) {
        this.end(true);
        return i;
      }
      const at = this.boundaries.follow(buf, i, to, true);
      if (at === -1) return to;
      i = at;
    }
    return to;
  }

  get broken(): boolean {
    return this.boundaries.broken;
  }

  /** The backend's close frame has begun: no frame of roomgate's own may follow it. */
  get closeSeen(): boolean {
    return this.boundaries.closeSeen;
  }

  /**
   * The hold ends the socket: true when the stream is between two messages now (ended here, a
   * close may be written); else it ends at the next boundary `follow` reaches (`ending` waits).
   */
  closeAtBoundary(): boolean {
    if (this.ended) return false;
    this.closing = true;
    if (!this.boundaries.atBoundary || this.boundaries.broken) return false;
    this.end(true);
    return true;
  }

  private followToBoundary(buf: Buffer, from: number, to: number): number {
    const at = this.boundaries.follow(buf, from, to, true);
    if (at === -1) return to;
    this.end(true);
    return at;
  }

  /** The old stream ended between two messages: a frame of roomgate's own (a close) may follow. */
  get endedBetweenMessages(): boolean {
    return this.ended && this.endedAtBoundary;
  }

  /** The old owner's connection ended or broke: its stream ends where it is. */
  gone(): void {
    if (!this.ended) this.end(this.boundaries.atBoundary && !this.boundaries.broken);
  }

  /** Resolves once the old stream ended (true: at a boundary); after `ms` it is ended where it is. */
  ending(ms: number): Promise<boolean> {
    if (this.ended) return Promise.resolve(this.endedAtBoundary);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.gone(), ms);
      this.waiter = (ok) => {
        clearTimeout(timer);
        resolve(ok);
      };
    });
  }

  /** The new owner's stream: followed from its first byte. */
  restart(): void {
    this.boundaries = new MessageBoundaries();
    this.swallowing = false;
    this.ended = false;
  }

  private end(atBoundary: boolean): void {
    this.ended = true;
    this.endedAtBoundary = atBoundary;
    const w = this.waiter;
    this.waiter = null;
    w?.(atBoundary);
  }
}

/** A socket's resume: what its handshake and 101 said, and the new upstream once opened. */
export class TunnelResume {
  /** Sec-WebSocket-Extensions and -Protocol as the client's 101 said them. */
  private extensions: string | null = null;
  private protocol: string | null = null;
  /** No extension, or only permessage-deflate keeping no context on the server's side. */
  private contextFree = true;
  private pending: { readonly socket: Socket; readonly early: Buffer | null } | null = null;
  /** A resume was started (it is tried once); why it failed to open, if it did. */
  private started = false;
  private openFailed = 'no resume opened';

  constructor(
    private readonly host: ResumeHost,
    /** The tunnel's backend -> client follower (tunnel-messages.ts): the old owner's stream. */
    readonly down: OldStreamEnd,
    /** The request target and Host of the socket's handshake. */
    private readonly path: string,
    private readonly hostField: string | null,
  ) {}

  /** A field of the 101 as relayed to the client (lower-case name). */
  noteAnswerField(lower: string, value: string): void {
    if (lower === 'sec-websocket-protocol') this.protocol = value;
    if (lower !== 'sec-websocket-extensions') return;
    this.extensions = value;
    // Any other extension, or deflate with the server's context, cannot move to another process.
    this.contextFree = value.split(',').every((e) => {
      const params = e.split(';').map((p) => p.trim().toLowerCase());
      return params[0] === 'permessage-deflate' && params.includes('server_no_context_takeover');
    });
  }

  get resumable(): boolean {
    return this.contextFree && !this.down.broken && !this.started;
  }

  /**
   * Starts the resume on `to`: at once (before any await) the socket counts there and the old
   * owner's close will not reach the client; resolves once the 101 came or the open failed (then
   * complete() ends the socket as version 1 would). With `go`, the connection to `to` is opened now
   * and the handshake sent (the socket counting there from then on) once `go` resolves true.
   */
  async open(to: Backend, fields: readonly string[], timeoutMs: number, go?: Promise<boolean>): Promise<ResumeStep> {
    if (!this.resumable || (go === undefined && !this.host.rehome(to))) return { ok: false, why: 'not resumable' };
    this.started = true;
    this.down.swallowing = true;
    const sent = go?.then((ok) => ok && this.host.rehome(to));
    const out = await openResumed({ backend: to.config, tls: this.host.backendTls, path: this.path, host: this.hostField, extensions: this.extensions, protocol: this.protocol, fields, timeoutMs, ...(sent === undefined ? {} : { go: sent }) });
    if (!out.ok) {
      this.openFailed = out.why;
      return out;
    }
    this.pending = { socket: out.socket, early: out.early };
    return { ok: true, messages: 0 };
  }

  /**
   * A resume will be opened after the old owner's release (handoff.ts; handoff-remote.ts, where
   * another gateway runs the handoff): from now on its close, at a message boundary, ends its
   * stream instead of reaching the client; with `to`, the socket counts there from now on. False:
   * not resumable.
   */
  expect(to?: Backend): boolean {
    if (!this.resumable || (to !== undefined && !this.host.rehome(to))) return false;
    this.down.swallowing = true;
    return true;
  }

  /** The expected resume will not be opened (a rollback, or no longer resumable): an old stream that ended meanwhile ends the socket (1012). */
  unexpect(): void {
    if (this.started || !this.down.swallowing) return;
    if (this.down.ended) {
      this.fail('the old owner closed the socket and no resume came');
      return;
    }
    this.down.swallowing = false;
  }

  /** `held`: takes the held bytes (and how many messages they are) in the same tick as the splice. */
  async complete(waitMs: number, held: () => { bytes: Buffer | null; messages: number }): Promise<ResumeStep> {
    const p = this.pending;
    if (p === null) return this.fail(this.openFailed);
    const atBoundary = await this.down.ending(waitMs);
    if (!atBoundary) return this.fail('the old owner\'s stream ended inside a message');
    if (p.socket.destroyed) return this.fail('the new upstream closed before the splice');
    this.pending = null;
    this.down.restart();
    const h = held();
    if (!this.host.splice(p.socket, h.bytes, p.early)) {
      p.socket.destroy();
      return { ok: false, why: 'the client socket closed' };
    }
    // On its new owner the socket can be resumed again by a later handoff.
    this.started = false;
    return { ok: true, messages: h.messages };
  }

  /** The resume failed after it opened: the client gets the close the old owner's release gave (1012) when between two messages, then its end. */
  fail(why: string): ResumeStep {
    this.pending?.socket.destroy();
    this.pending = null;
    // The old owner's close may not have come (a release that was cut): its stream ends here.
    this.down.gone();
    if (this.down.endedBetweenMessages) this.host.writeClient(serverCloseFrame(1012, 'room moved'));
    this.host.endForHold();
    return { ok: false, why };
  }
}
