// Finds where a message body ends without copying or decoding it: Content-Length counted down,
// chunked framing walked byte by byte (RFC 9112 7.1, strict: hex sizes of at most 13 digits,
// CRLF after sizes, data and trailers). Used to relay an answer as raw bytes and know when it is
// complete, so the connection can be closed right after it and nothing else slips through.
import type { BodyFraming } from './response-head.js';
import { FIELD_CHAR } from './syntax.js';

const enum S {
  Size,
  SizeExt,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  TrailerLine,
  TrailerLf,
  EndLf,
  Done,
}

const MAX_SIZE_DIGITS = 13;

export class BodyEnd {
  private state: S = S.Size;
  private remaining: number;
  private digits = 0;
  private readonly kind: BodyFraming['kind'];

  constructor(framing: BodyFraming) {
    this.kind = framing.kind;
    this.remaining = framing.kind === 'length' ? framing.length : 0;
    if (framing.kind === 'none') this.state = S.Done;
  }

  /** The body ends only when the backend closes its connection. */
  get closeDelimited(): boolean {
    return this.kind === 'close';
  }

  get done(): boolean {
    return this.state === S.Done;
  }

  /**
   * Looks at buf[from, to). Returns the offset just past the body's last byte when it ends within
   * this range, -1 when more bytes belong to it. Throws on a chunked framing error. onData, when
   * given, is told each range of chunk data (the payload without its framing), for re-framing.
   */
  feed(buf: Uint8Array, from: number, to: number, onData?: (start: number, end: number) => void): number {
    if (this.state === S.Done) return from;
    if (this.kind === 'close') return -1;
    if (this.kind === 'length') {
      const take = Math.min(this.remaining, to - from);
      this.remaining -= take;
      if (this.remaining > 0) return -1;
      this.state = S.Done;
      return from + take;
    }
    for (let i = from; i < to; i++) {
      const c = buf[i] as number;
      switch (this.state) {
        case S.Size: {
          const h = hex(c);
          if (h >= 0) {
            if (++this.digits > MAX_SIZE_DIGITS) throw new Error('chunk size too long');
            this.remaining = this.remaining * 16 + h;
          } else if (this.digits === 0) throw new Error('chunk size expected');
          else if (c === 0x3b /* ; */) this.state = S.SizeExt;
          else if (c === 0x0d) this.state = S.SizeLf;
          else throw new Error('invalid chunk size');
          break;
        }
        case S.SizeExt:
          if (c === 0x0d) this.state = S.SizeLf;
          else if (FIELD_CHAR[c] !== 1) throw new Error('invalid chunk extension');
          break;
        case S.SizeLf:
          if (c !== 0x0a) throw new Error('LF expected after the chunk size');
          this.digits = 0;
          this.state = this.remaining === 0 ? S.TrailerStart : S.Data;
          break;
        case S.Data: {
          const take = Math.min(this.remaining, to - i);
          if (onData !== undefined) onData(i, i + take);
          this.remaining -= take;
          i += take - 1;
          if (this.remaining === 0) this.state = S.DataCr;
          break;
        }
        case S.DataCr:
          if (c !== 0x0d) throw new Error('CRLF expected after chunk data');
          this.state = S.DataLf;
          break;
        case S.DataLf:
          if (c !== 0x0a) throw new Error('CRLF expected after chunk data');
          this.state = S.Size;
          break;
        case S.TrailerStart:
          if (c === 0x0d) this.state = S.EndLf;
          else if (FIELD_CHAR[c] === 1 && c !== 0x20 && c !== 0x09) this.state = S.TrailerLine;
          else throw new Error('invalid trailer');
          break;
        case S.TrailerLine:
          if (c === 0x0d) this.state = S.TrailerLf;
          else if (FIELD_CHAR[c] !== 1) throw new Error('invalid trailer');
          break;
        case S.TrailerLf:
          if (c !== 0x0a) throw new Error('LF expected after a trailer');
          this.state = S.TrailerStart;
          break;
        case S.EndLf:
          if (c !== 0x0a) throw new Error('LF expected at the end of the body');
          this.state = S.Done;
          return i + 1;
      }
    }
    return -1;
  }
}

function hex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}
