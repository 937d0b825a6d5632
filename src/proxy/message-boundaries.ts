// Where one WebSocket message ends and the next begins, in one direction of a tunnel, followed from
// the first frame on without copying or unmasking anything (docs/handoff.md, "Protocol version 2").
// A handoff holds a room's client messages at a message boundary: the message being sent goes
// through whole (every frame up to the one with FIN; control frames between its fragments pass as
// they come), later ones are held. A boundary cannot be found in the middle of a byte stream, so it
// is followed on every chunk: reading each frame's header (2 to 14 bytes) and skipping its payload.
//
// RFC 6455 5.2: byte 0 is FIN, RSV1-3 and the opcode; byte 1 is MASK and a 7-bit length (126: a
// 16-bit length follows, 127: a 64-bit one); a masked frame carries a 4-byte key before its payload.
// Control frames (opcode 8 and above) are never fragmented and may come between the fragments of a
// data message. What the follower does not check (reserved bits, opcodes, a control frame's length
// limit) is the endpoints' to refuse; it only has to know where frames end, and gives up (`broken`)
// on a length no peer may send (the 64-bit length's top bit set).

/** The state of one direction: where the next frame starts, and whether a data message is open. */
export class MessageBoundaries {
  /** Bytes of the current frame's header seen so far (0 when the next byte starts a frame). */
  private headerSeen = 0;
  /**
   * The current header's bytes (at most 14), kept only while a header spans two chunks: made the
   * first time one does, so a tunnel whose headers never split costs no buffer.
   */
  private header: Buffer | null = null;
  /** Payload bytes of the current frame still to skip. */
  private payloadLeft = 0;
  /** A data message has begun and its FIN frame has not ended yet. */
  private inMessage = false;
  /** The current frame ends a data message (FIN on a data frame). */
  private framesEndsMessage = false;
  /** A length no peer may send: boundaries can no longer be known on this stream. */
  broken = false;
  /** A close frame has begun on this stream: nothing more may follow it (RFC 6455 5.5.1). */
  closeSeen = false;

  /**
   * Starts again between two messages, as another follower (the native relay's) left the stream:
   * nothing open, and what it knew of the stream (unfollowable, a close seen).
   */
  seed(state: { readonly broken: boolean; readonly closeSeen: boolean }): void {
    this.headerSeen = 0;
    this.payloadLeft = 0;
    this.inMessage = false;
    this.framesEndsMessage = false;
    this.broken = state.broken;
    this.closeSeen = state.closeSeen;
  }

  /** Between two messages: no frame and no data message is open. */
  get atBoundary(): boolean {
    return this.headerSeen === 0 && this.payloadLeft === 0 && !this.inMessage;
  }

  /**
   * Follows `buf[from..to)`. With `stopAtBoundary`, stops at the first message boundary reached
   * after consuming at least one byte and returns its offset (the bytes after it are not consumed:
   * the caller holds them); returns -1 when the chunk ends inside a message, having consumed it all.
   * Without it, follows the whole chunk and returns -1 (the common case: no hold wanted). A caller
   * about to hold checks `atBoundary` first: at one, nothing needs to go through.
   */
  follow(buf: Uint8Array, from: number, to: number, stopAtBoundary = false): number {
    if (this.broken) return -1;
    let i = from;
    while (i < to) {
      if (this.payloadLeft > 0) {
        const skip = Math.min(this.payloadLeft, to - i);
        this.payloadLeft -= skip;
        i += skip;
        if (this.payloadLeft === 0) this.frameDone();
      } else {
        i = this.readHeader(buf, i, to);
        if (this.broken) return -1;
      }
      if (stopAtBoundary && this.atBoundary) return i;
    }
    return -1;
  }

  /** Reads header bytes from `i`; returns where reading stopped. */
  private readHeader(buf: Uint8Array, i: number, to: number): number {
    // The fast case: a whole header in this chunk, none pending.
    if (this.headerSeen === 0 && to - i >= 2) {
      const need = headerLength(buf[i + 1] as number);
      if (to - i >= need) return this.startFrame(buf, i, need);
    }
    const h = (this.header ??= Buffer.alloc(14));
    while (i < to && (this.headerSeen < 2 || this.headerSeen < headerLength(h[1] as number))) h[this.headerSeen++] = buf[i++] as number;
    if (this.headerSeen >= 2 && this.headerSeen === headerLength(h[1] as number)) {
      this.startFrame(h, 0, this.headerSeen);
      this.headerSeen = 0;
    }
    return i;
  }

  /** A whole header at `h[at..at+len)`: the frame's payload starts after it. */
  private startFrame(h: Uint8Array, at: number, len: number): number {
    const b0 = h[at] as number;
    const b1 = h[at + 1] as number;
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    let length = b1 & 0x7f;
    if (length === 126) length = ((h[at + 2] as number) << 8) | (h[at + 3] as number);
    else if (length === 127) {
      const high = ((h[at + 2] as number) << 24) | ((h[at + 3] as number) << 16) | ((h[at + 4] as number) << 8) | (h[at + 5] as number);
      const low = (((h[at + 6] as number) << 24) >>> 0) + (((h[at + 7] as number) << 16) | ((h[at + 8] as number) << 8) | (h[at + 9] as number));
      // RFC 6455: the most significant bit must be 0; past 2^53 no count is exact.
      if (high < 0 || high >= 0x200000) {
        this.broken = true;
        return at + len;
      }
      length = high * 0x1_0000_0000 + low;
    }
    if (opcode < 8) {
      // A data frame: a message begins (opcode 1, 2) or goes on (0); FIN ends it.
      this.inMessage = true;
      this.framesEndsMessage = fin;
    } else {
      this.framesEndsMessage = false;
      if (opcode === 8) this.closeSeen = true;
    }
    this.payloadLeft = length;
    if (length === 0) this.frameDone();
    return at + len;
  }

  private frameDone(): void {
    if (this.framesEndsMessage) this.inMessage = false;
    this.framesEndsMessage = false;
  }
}

/** A frame header's length from its second byte: 2, plus the extended length, plus the mask key. */
export function headerLength(b1: number): number {
  const len = b1 & 0x7f;
  return 2 + (len === 126 ? 2 : len === 127 ? 8 : 0) + ((b1 & 0x80) !== 0 ? 4 : 0);
}
