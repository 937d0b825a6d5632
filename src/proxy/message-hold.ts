// The client -> backend direction of one tunnel, as a version-2 handoff holds it (docs/handoff.md,
// "Hold"): every chunk is followed frame header by frame header (message-boundaries.ts) so a hold
// can begin at a message boundary; while held, the bytes are kept (copies, in order) instead of
// written to the old owner. A rollback writes them on (`flush`); a completed handoff reads them as
// messages (`messages`: unmasked, fragments joined) and hands them to the new owner. Only tunnels
// to backends whose hello said `messages` are followed.
import type { HeldMessage } from '../runtime/room-hold.js';
import { MessageBoundaries } from './message-boundaries.js';

export class MessageHold {
  private readonly boundaries = new MessageBoundaries();
  /** A hold was asked for: bytes past the next boundary are kept. */
  private holding = false;
  /** The hold has begun: the stream is at a boundary and every byte since is kept. */
  private started = false;
  private readonly held: Buffer[] = [];
  /** Payload and header bytes kept so far. */
  heldBytes = 0;
  private onStart: (() => void) | null = null;
  private onKept: (() => void) | null = null;

  /** Whether the bytes of this stream can still be followed (a length no peer may send gives up). */
  get followable(): boolean {
    return !this.boundaries.broken;
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
    return readMessages(Buffer.concat(this.held), inflate);
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
    const part = Buffer.from(chunk.subarray(from));
    this.held.push(part);
    this.heldBytes += part.length;
    this.onKept?.();
  }
}

/** Parses client frames (masked) into data messages. */
export function readMessages(bytes: Buffer, inflate: ((payload: Buffer) => Buffer) | null): { messages: HeldMessage[]; unreadable: number } {
  const messages: HeldMessage[] = [];
  let unreadable = 0;
  let parts: Buffer[] = [];
  let opcode = 0;
  let compressed = false;
  for (let i = 0; i + 2 <= bytes.length; ) {
    const b0 = bytes[i] as number;
    const b1 = bytes[i + 1] as number;
    let len = b1 & 0x7f;
    let at = i + 2;
    if (len === 126) {
      if (at + 2 > bytes.length) break;
      len = bytes.readUInt16BE(at);
      at += 2;
    } else if (len === 127) {
      if (at + 8 > bytes.length) break;
      len = Number(bytes.readBigUInt64BE(at));
      at += 8;
    }
    const masked = (b1 & 0x80) !== 0;
    const key = masked ? bytes.subarray(at, at + 4) : null;
    if (masked) at += 4;
    if (at + len > bytes.length) break; // unfinished: the socket closed mid-frame
    const payload = Buffer.from(bytes.subarray(at, at + len));
    if (key) for (let k = 0; k < payload.length; k++) payload[k] = (payload[k] as number) ^ (key[k & 3] as number);
    i = at + len;
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
