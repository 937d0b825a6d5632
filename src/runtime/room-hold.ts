// A version-2 handoff's hold on one room (docs/handoff.md, "Hold" and "Deliver"): this gateway's
// sockets of the room on the old owner stop passing client messages at a message boundary, so
// nothing reaches the frozen owner and nothing is refused; once the room has moved and the old
// owner's sockets closed, each socket's held messages go to the new owner in one `messages` call.
// A rollback writes them on to the old owner instead. The sockets themselves are the data plane's
// (src/proxy/message-hold.ts behind TunnelHold); this module sees only the interface.

import type { Backend } from './pool.js';

/** One held data message, as the `messages` hook's body carries it. */
export type HeldMessage = { readonly text: string } | { readonly binary: string };

/** What a tunnel whose client messages can be held offers (tunnels to backends that said `messages`). */
export interface TunnelHold {
  /** The socket's id (X-Roomgate-Socket), sent to the backend in its handshake. */
  readonly socketId: string;
  /** Asks for the hold; `onHeld` runs once it has begun, `onKept` after each chunk kept. True: it began now. */
  hold(onHeld: () => void, onKept: () => void): boolean;
  /** Ends the hold: the kept bytes are written on to the backend, in order. */
  flush(): void;
  /** Payload and header bytes kept so far. */
  readonly heldBytes: number;
  /** The kept messages (read once the socket has closed: then nothing more can come). */
  messages(): { messages: HeldMessage[]; unreadable: number };
  /** Runs once when the socket has closed (at once when it already has). */
  onClosed(run: () => void): void;
  /** Ends the socket (a limit passed, or it outlived its release): the backend side cut, the client ended; what the client sends until it closes is still kept. */
  endSocket(): void;
  /**
   * Whether it can be resumed on another backend (docs/handoff.md, "Deliver", item 1): its tunnel
   * follows both directions and its compression, if any, keeps no context. No: it goes the
   * `messages` way.
   */
  readonly resumable: boolean;
  /**
   * Opens the socket's new upstream on `to` (the resume handshake, with `fields`: ownership, ids,
   * proof) and consumes its 101 within `timeoutMs`. Ok: the socket counts on `to` from now on and
   * the old owner's close will not reach the client. Not ok: nothing changed. With `go`: the
   * connection is opened now, the handshake sent once `go` resolves true (the 101's `timeoutMs`
   * from then), never if false; the socket counts on `to` from the handshake.
   */
  openResume(to: Backend, fields: readonly string[], timeoutMs: number, go?: Promise<boolean>): Promise<ResumeStep>;
  /**
   * For a resume opened after the release (the runner's, handoff.ts, and another gateway's,
   * handoff-remote.ts): from now on the old owner's close does not reach the client; with `to`, the
   * socket counts on that backend from now on. False: it cannot be resumed (the `messages` way).
   */
  expectResume(to?: Backend): boolean;
  /** Resolves once the old owner's stream ended (its release's close, swallowed) or after `ms`, then ended where it is; at once when no resume is expected. */
  oldStreamEnded(ms: number): Promise<void>;
  /** The expected resume will not be opened: the old owner's close reaches the client again (one that came meanwhile ends the socket, 1012). */
  cancelResume(): void;
  /**
   * After the release, for a socket whose resume opened: the old owner's stream ended at a message
   * boundary (its close, its end, or `waitMs` passed), the held messages written to the new
   * upstream in order, the client spliced to it. Not ok: the socket was ended (1012), and what its
   * client sent is still kept for the `messages` way.
   */
  completeResume(waitMs: number): Promise<ResumeStep>;
}

/** A resume step's outcome; `messages`: the held messages the new upstream got (completeResume). */
export type ResumeStep = { readonly ok: true; readonly messages: number } | { readonly ok: false; readonly why: string };

/** What a hold tells its caller as it happens (metrics, logs). */
export interface RoomHoldHooks {
  /** A socket passed a limit and is being ended (counted and logged at that instant). */
  readonly overLimit?: (t: TunnelHold, roomBytes: number) => void;
  /** The room's held bytes changed by `delta` (a gauge); the hold's end gives them all back. */
  readonly heldBytes?: (delta: number) => void;
}

export interface HoldLimits {
  readonly perSocketBytes: number;
  readonly perRoomBytes: number;
}

/** How one socket's hold ended, for the metric roomgate_handoff_held_total{result}. */
export type HeldResult = 'delivered' | 'resumed' | 'flushed' | 'over-limit' | 'hold-timeout' | 'lost';

/** A room held: its sockets, the ones still to reach a boundary, and the limits. */
export class RoomHold {
  /** Sockets that were cut because they passed a limit or did not reach a boundary in time. */
  overLimit = 0;
  holdTimeouts = 0;
  private stopped = false;
  /** Sockets ended for a limit (counted once). */
  private readonly ended = new Set<TunnelHold>();

  constructor(
    readonly room: string,
    readonly sockets: readonly TunnelHold[],
    private readonly limits: HoldLimits,
    private readonly on: RoomHoldHooks = {},
  ) {}

  /**
   * Begins the hold on every socket; resolves once each is held, or after `timeoutMs` with the
   * ones still mid-message cut (`cut`), counted as hold timeouts.
   */
  begin(timeoutMs: number, cut: (t: TunnelHold) => void): Promise<void> {
    const waiting = new Set<TunnelHold>();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        if (waiting.size > 0) return;
        clearTimeout(timer);
        resolve();
      };
      for (const t of this.sockets) {
        waiting.add(t);
        const now = t.hold(
          () => {
            waiting.delete(t);
            done();
          },
          () => this.enforce(t),
        );
        if (now) waiting.delete(t);
      }
      const timer = setTimeout(() => {
        for (const t of waiting) {
          this.holdTimeouts++;
          cut(t);
        }
        waiting.clear();
        resolve();
      }, timeoutMs);
      done();
    });
  }

  /**
   * After a chunk kept by `t`: it is ended when it holds more than its limit, or when the room's
   * sockets together do (the one whose bytes passed the bound): a 1012 close its client reconnects
   * after (the tunnel's endSocket). What it kept, and what its client sends until it sees the close,
   * is kept and delivered (or flushed by a rollback) like any held socket's.
   */
  enforce(t: TunnelHold): void {
    if (this.stopped) return;
    let room = 0;
    for (const s of this.sockets) room += s.heldBytes;
    this.counted(room);
    if (this.ended.has(t)) return;
    if (t.heldBytes <= this.limits.perSocketBytes && room <= this.limits.perRoomBytes) return;
    this.ended.add(t);
    this.overLimit++;
    this.on.overLimit?.(t, room);
    t.endSocket();
  }

  /** A rollback: every socket passes again, what it kept written on to the old owner. */
  flush(): void {
    this.stop();
    for (const t of this.sockets) t.flush();
  }

  /** Resolves once every held socket but `staying` has closed, or after `timeoutMs` (the rest then cut). */
  closed(timeoutMs: number, cut: (t: TunnelHold) => void, staying: ReadonlySet<TunnelHold> = new Set()): Promise<void> {
    const open = new Set(this.sockets.filter((t) => !staying.has(t)));
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        for (const t of open) cut(t);
        resolve();
      }, timeoutMs);
      const check = (): void => {
        if (open.size > 0) return;
        clearTimeout(timer);
        resolve();
      };
      for (const t of [...open])
        t.onClosed(() => {
          open.delete(t);
          check();
        });
      check();
    });
  }

  /** No more limit checks (the hold is over); its bytes no longer count as held now. */
  stop(): void {
    this.stopped = true;
    this.counted(0);
  }

  /** The bytes reported held now. */
  private reported = 0;

  private counted(bytes: number): void {
    if (bytes !== this.reported) this.on.heldBytes?.(bytes - this.reported);
    this.reported = bytes;
  }
}
