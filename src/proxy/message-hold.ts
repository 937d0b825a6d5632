// The client -> backend direction of one tunnel, as a version-2 handoff holds it (docs/handoff.md,
// "Hold"): every chunk is followed frame header by frame header (message-boundaries.ts) so a hold
// can begin at a message boundary; while held, data frames are kept (copies, in order) instead of
// written to the old owner, and control frames still pass (a ping gets its pong, and a close
// completes its handshake, so the old owner's release closes the socket as it would). A rollback writes them on (`flush`); a completed handoff reads them as
// messages (`messages`: unmasked, fragments joined) and hands them to the new owner. Only tunnels
// to backends whose hello said `messages` are followed.
import type { HeldMessage } from '../runtime/room-hold.js';
import { headerLength, MessageBoundaries } from './message-boundaries.js';

export class MessageHold {
  private readonly boundaries = new MessageBoundaries();
  /** A hold was asked for: bytes past the next boundary are kept. */
  private holding = false;
  /** The hold has begun: the stream is at a boundary and every byte since is kept. */
  private started = false;
  /** The kept data frames, whole, in order. */
  private readonly held: Buffer[] = [];
  /** Kept bytes not yet a whole frame. */
  private partial: Buffer | null = null;
  /** Payload and header bytes kept so far. */
  heldBytes = 0;
  private onStart: (() => void) | null = null;
  private onKept: (() => void) | null = null;

  /** `forward`: where a control frame sent while held goes (the backend). */
  constructor(private readonly forward: (frame: Buffer) => void = () => undefined) {}

  /** The stream is between two messages, as another follower (the native relay's) saw it. */
  seed(state: { readonly broken: boolean; readonly closeSeen: boolean }): void {
    this.boundaries.seed(state);
  }

  /** Whether the bytes of this stream can still be followed (a length no peer may send gives up). */
  get followable(): boolean {
    return !this.boundaries.broken;
  }

  /** Whether a hold was asked (begun or not) and not flushed since. */
  get isAsked(): boolean {
    return this.holding;
  }

  /** Whether the hold has begun (the stream was at a boundary when it was asked, or reached one since). */
  get isHeld(): boolean {
    return this.started;
  }

  /**
   * A chunk the client sent: what of it goes to the backend now (the whole chunk, a part ending at
   * a message boundary, or null), the rest kept while a hold is asked for.
   */
  pass(chunk: Buffer): Buffer | null {
    if (!this.holding) {
      this.boundaries.follow(chunk, 0, chunk.length);
      return chunk;
    }
    if (this.started) {
      this.keep(chunk, 0);
      return null;
    }
    const at = this.boundaries.follow(chunk, 0, chunk.length, true);
    if (at === -1) return chunk;
    this.begin();
    if (at < chunk.length) this.keep(chunk, at);
    return at === 0 ? null : chunk.subarray(0, at);
  }

  /**
   * Asks for the hold: it begins now when no message is half sent, else when the message being
   * sent ends (`onStart` then runs); `onKept` runs after each chunk kept. True when it has begun.
   */
  hold(onStart: () => void, onKept: () => void = () => undefined): boolean {
    if (this.started) return true;
    this.holding = true;
    this.onKept = onKept;
    if (this.boundaries.atBoundary) {
      this.begin();
      return true;
    }
    this.onStart = onStart;
    return false;
  }

  /** Ends the hold (a rollback): the kept bytes, in order, to write on to the backend; null when none. */
  flush(): Buffer | null {
    this.holding = false;
    this.started = false;
    this.onStart = null;
    this.onKept = null;
    if (this.partial !== null) this.held.push(this.partial);
    this.partial = null;
    if (this.held.length === 0) return null;
    const out = Buffer.concat(this.held);
    this.held.length = 0;
    this.heldBytes = 0;
    return out;
  }

  /**
   * The kept data messages in the order sent: unmasked, fragments joined; control frames left out
   * (a close ends the list: nothing after it was meant to be read). A message left unfinished
   * when the socket closed is not one. `inflate`: permessage-deflate without the client's context
   * (null: a compressed message cannot be read, and is reported by the count `unreadable`).
   */
  messages(inflate: ((payload: Buffer) => Buffer) | null = null): { messages: HeldMessage[]; unreadable: number } {
    return readMessages(Buffer.concat(this.partial === null ? this.held : [...this.held, this.partial]), inflate);
  }

  private begin(): void {
    this.started = true;
    const run = this.onStart;
    this.onStart = null;
    run?.();
  }

  private keep(chunk: Buffer, from: number): void {
    // Followed too, so a flush leaves the follower where the backend's stream is.
    this.boundaries.follow(chunk, from, chunk.length);
    // The partial frame is counted again below, whole or still partial.
    if (this.partial !== null) this.heldBytes -= this.partial.length;
    let bytes = this.partial === null ? Buffer.from(chunk.subarray(from)) : Buffer.concat([this.partial, chunk.subarray(from)]);
    this.partial = null;
    // Whole frames: data kept, control passed on; the rest waits for the next chunk.
    for (;;) {
      const f = frameAt(bytes, 0);
      if (f === null) break;
      const end = f.end;
      const frame = bytes.subarray(0, end);
      if (((frame[0] as number) & 0x0f) >= 8) this.forward(frame);
      else {
        this.held.push(frame);
        this.heldBytes += frame.length;
      }
      bytes = bytes.subarray(end);
    }
    if (bytes.length > 0) {
      this.partial = bytes;
      this.heldBytes += bytes.length;
    }
    this.onKept?.();
  }
}

/**
 * The frame starting at `b[i]`: where its payload starts (after the length and the mask key) and
 * where it ends; null when it is not whole in `b` yet (or its length is past any hold's bound).
 */
function frameAt(b: Buffer, i: number): { readonly payloadAt: number; readonly end: number } | null {
  if (i + 2 > b.length) return null;
  const b1 = b[i + 1] as number;
  const head = headerLength(b1);
  if (i + head > b.length) return null;
  let len = b1 & 0x7f;
  if (len === 126) len = b.readUInt16BE(i + 2);
  else if (len === 127) {
    const big = b.readBigUInt64BE(i + 2);
    if (big > BigInt(Number.MAX_SAFE_INTEGER)) return null;
    len = Number(big);
  }
  const end = i + head + len;
  return end <= b.length ? { payloadAt: i + head, end } : null;
}

/** Parses client frames (masked) into data messages. */
export function readMessages(bytes: Buffer, inflate: ((payload: Buffer) => Buffer) | null): { messages: HeldMessage[]; unreadable: number } {
  const messages: HeldMessage[] = [];
  let unreadable = 0;
  let parts: Buffer[] = [];
  let opcode = 0;
  let compressed = false;
  for (let i = 0; ; ) {
    // An unfinished frame (the socket closed mid-frame) ends the list.
    const f = frameAt(bytes, i);
    if (f === null) break;
    const b0 = bytes[i] as number;
    const masked = ((bytes[i + 1] as number) & 0x80) !== 0;
    const key = masked ? bytes.subarray(f.payloadAt - 4, f.payloadAt) : null;
    const payload = Buffer.from(bytes.subarray(f.payloadAt, f.end));
    if (key) for (let k = 0; k < payload.length; k++) payload[k] = (payload[k] as number) ^ (key[k & 3] as number);
    i = f.end;
    const op = b0 & 0x0f;
    if (op === 8) break;
    if (op >= 8) continue;
    if (op !== 0) {
      opcode = op;
      parts = [];
      compressed = (b0 & 0x40) !== 0;
    }
    parts.push(payload);
    if ((b0 & 0x80) === 0) continue;
    let data: Buffer = Buffer.concat(parts);
    parts = [];
    if (compressed) {
      if (inflate === null) {
        unreadable++;
        continue;
      }
      try {
        data = inflate(data);
      } catch {
        // Not a deflate stream (or past the inflate bound): a client's mistake, never a crash.
        unreadable++;
        continue;
      }
    }
    messages.push(opcode === 1 ? { text: data.toString('utf8') } : { binary: data.toString('base64') });
  }
  return { messages, unreadable };
}
