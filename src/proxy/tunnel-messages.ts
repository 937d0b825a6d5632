// One tunnel's side of a version-2 handoff (src/runtime/room-hold.ts's TunnelHold): its socket id,
// the client messages followed and held (message-hold.ts), and what the tunnel does for the hold:
// write kept bytes on after a rollback, end the socket while still keeping what the client sent
// before it saw the end. permessage-deflate: the tunnel makes the client compress each message
// alone (client_no_context_takeover in the 101), so a held message can be read without the
// backend's inflater.
import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import type { Backend } from '../runtime/pool.js';
import type { HeldMessage, ResumeStep, TunnelHold } from '../runtime/room-hold.js';
import { MessageHold, readMessages } from './message-hold.js';
import { OldStreamEnd, type TunnelResume } from './tunnel-resume.js';

/** What the tunnel gives its hold. */
export interface HoldHost {
  /** Writes bytes on to the backend (a rollback's kept bytes). */
  writeUpstream(bytes: Buffer): void;
  /** Ends the socket for the hold: the backend side cut, the client ended; its late bytes still kept. */
  endForHold(): void;
  /**
   * Whether the tunnel's bytes are relayed in JavaScript now (true); if not (the native relay
   * carries it), it is asked back and `run` runs once it is here, between two messages (false).
   */
  reclaim?(run: () => void): boolean;
}

/** A held message inflated alone may not grow past this (the per-socket hold limit is far below). */
const MAX_INFLATED_BYTES = 16 * 1024 * 1024;
const TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);

export class TunnelMessages implements TunnelHold {
  readonly socketId = randomBytes(16).toString('base64url');
  readonly follower: MessageHold;
  /** The backend -> client direction, followed too: the hold's end closes between two messages (1012). */
  readonly down = new OldStreamEnd();
  /** Set when the 101 negotiated permessage-deflate (each client message then compressed alone). */
  deflate = false;
  /** Set on a tunnel to a backend that said `resume` when it opened (tunnel-resume.ts). */
  resume: TunnelResume | null = null;
  private closed = false;
  /** The client sent a close while held: it is leaving, not to be resumed. */
  private clientClosing = false;
  private readonly closers: (() => void)[] = [];
  /** A hold asked while the native relay carried the tunnel: begun once it is back. */
  private pendingHold: (() => void) | null = null;

  constructor(private readonly host: HoldHost) {
    // Control frames pass while held: a ping gets its pong, a close completes its handshake.
    this.follower = new MessageHold((frame) => {
      if (((frame[0] as number) & 0x0f) === 8) this.clientClosing = true;
      host.writeUpstream(frame);
    });
  }

  get resumable(): boolean {
    return this.resume !== null && this.resume.resumable && this.follower.followable && !this.closed && !this.clientClosing;
  }

  openResume(to: Backend, fields: readonly string[], timeoutMs: number, go?: Promise<boolean>): Promise<ResumeStep> {
    if (this.resume === null || !this.resumable) return Promise.resolve({ ok: false, why: 'not resumable' });
    return this.resume.open(to, fields, timeoutMs, go);
  }

  expectResume(to?: Backend): boolean {
    return this.resume !== null && this.resumable && this.resume.expect(to);
  }

  oldStreamEnded(ms: number): Promise<void> {
    const down = this.resume?.down;
    return down === undefined || !down.swallowing ? Promise.resolve() : down.ending(ms).then(() => undefined);
  }

  cancelResume(): void {
    this.resume?.unexpect();
  }

  completeResume(waitMs: number): Promise<ResumeStep> {
    if (this.resume === null) return Promise.resolve({ ok: false, why: 'not resumable' });
    if (this.clientClosing || this.closed) return Promise.resolve(this.resume.fail('the client closed its socket'));
    return this.resume.complete(waitMs, () => {
      // Raw client frames, in order, the partial one last: the client's next bytes continue it.
      const bytes = this.follower.flush();
      if (bytes === null) return { bytes, messages: 0 };
      // Counted, not read: a compressed one counts as well (the new owner inflates it).
      const m = readMessages(bytes, null);
      return { bytes, messages: m.messages.length + m.unreadable };
    });
  }

  get heldBytes(): number {
    return this.follower.heldBytes;
  }

  hold(onHeld: () => void, onKept: () => void): boolean {
    const here = this.host.reclaim?.(() => {
      const begin = this.pendingHold;
      this.pendingHold = null;
      begin?.();
    });
    if (here !== false) return this.follower.hold(onHeld, onKept);
    // Back at a boundary of both streams: the hold begins at once.
    this.pendingHold = () => {
      if (this.follower.hold(onHeld, onKept)) onHeld();
    };
    return false;
  }

  flush(): void {
    // A rollback before the tunnel came back: no hold is wanted any more.
    this.pendingHold = null;
    const bytes = this.follower.flush();
    if (bytes !== null && !this.closed) this.host.writeUpstream(bytes);
  }

  messages(): { messages: HeldMessage[]; unreadable: number } {
    return this.follower.messages(this.deflate ? inflateAlone : null);
  }

  onClosed(run: () => void): void {
    if (this.closed) run();
    else this.closers.push(run);
  }

  endSocket(): void {
    this.host.endForHold();
  }

  /** The client's socket has closed: nothing more can be kept. */
  socketClosed(): void {
    if (this.closed) return;
    this.closed = true;
    for (const run of this.closers.splice(0)) run();
  }
}

function inflateAlone(payload: Buffer): Buffer {
  return inflateRawSync(Buffer.concat([payload, TAIL]), { maxOutputLength: MAX_INFLATED_BYTES });
}

/**
 * The 101's Sec-WebSocket-Extensions for a followed tunnel: permessage-deflate gains
 * client_no_context_takeover (RFC 7692 7.1.1.1: a server may ask it even when the client did not
 * offer it; the backend's inflater reads such messages as any other). Null: no deflate negotiated.
 */
export function withoutClientContext(value: string): string | null {
  const ext = value.split(',').map((e) => e.trim());
  let deflate = false;
  const out = ext.map((e) => {
    const params = e.split(';').map((p) => p.trim());
    if ((params[0] ?? '').toLowerCase() !== 'permessage-deflate') return e;
    deflate = true;
    return params.some((p) => p.toLowerCase() === 'client_no_context_takeover') ? e : `${e}; client_no_context_takeover`;
  });
  return deflate ? out.join(', ') : null;
}
