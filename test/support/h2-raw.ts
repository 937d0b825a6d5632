// A raw HTTP/2 client for hostile tests: frames written by hand (HPACK literals without indexing
// or Huffman), so a test can do what a well-behaved client library refuses to: exceed the
// server's stream limit, cancel streams as fast as it opens them, send headers no client would.
import { connect, type TLSSocket } from 'node:tls';

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 } as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
export const ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, CANCEL: 8, REFUSED_STREAM: 7, ENHANCE_YOUR_CALM: 11 } as const;

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly stream: number;
  readonly payload: Buffer;
}

function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an n-bit prefix (RFC 7541 5.1). */
function hpackInt(value: number, prefixBits: number, first: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let v = value - max;
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** A header block of literals without indexing, new names (RFC 7541 6.2.2), bytes as latin1. */
export function headerBlock(headers: readonly (readonly [string, string])[]): Buffer {
  const parts: number[] = [];
  for (const [name, value] of headers) {
    parts.push(0x00, ...hpackInt(name.length, 7, 0), ...Buffer.from(name, 'latin1'));
    parts.push(...hpackInt(value.length, 7, 0), ...Buffer.from(value, 'latin1'));
  }
  return Buffer.from(parts);
}

export class RawH2 {
  readonly frames: Frame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  private next = 1;

  private constructor(readonly socket: TLSSocket) {
    socket.on('data', (d: Buffer) => this.read(d));
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => undefined);
  }

  /** Connects with ALPN h2 only, sends the preface and empty SETTINGS, and ACKs the server's. */
  static open(port: number, timeoutMs = 5_000): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, servername: 'a.test', ALPNProtocols: ['h2'], rejectUnauthorized: false });
      const t = setTimeout(() => {
        socket.destroy();
        reject(new Error('h2 connection timed out'));
      }, timeoutMs);
      socket.once('error', (err) => {
        clearTimeout(t);
        reject(err);
      });
      socket.once('secureConnect', () => {
        clearTimeout(t);
        if (socket.alpnProtocol !== 'h2') {
          socket.destroy();
          reject(new Error(`ALPN gave ${String(socket.alpnProtocol)}, not h2`));
          return;
        }
        const c = new RawH2(socket);
        socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(0))]));
        resolve(c);
      });
    });
  }

  private read(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) break;
      const f: Frame = { type: this.buf[3] as number, flags: this.buf[4] as number, stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) };
      this.buf = this.buf.subarray(9 + len);
      this.frames.push(f);
      if (f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0) this.socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0)));
    }
  }

  /** Opens a stream with these headers (pseudo-headers first); returns its id. */
  headers(headers: readonly (readonly [string, string])[], endStream: boolean): number {
    const id = this.next;
    this.next += 2;
    this.socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | (endStream ? FLAG.END_STREAM : 0), id, headerBlock(headers)));
    return id;
  }

  reset(stream: number, code: number = ERROR.CANCEL): void {
    const p = Buffer.alloc(4);
    p.writeUInt32BE(code);
    this.socket.write(frame(FRAME.RST_STREAM, 0, stream, p));
  }

  /** The RST_STREAM error code the server sent for a stream, if any. */
  resetCode(stream: number): number | undefined {
    const f = this.frames.find((x) => x.type === FRAME.RST_STREAM && x.stream === stream);
    return f?.payload.readUInt32BE(0);
  }

  /** The DATA a stream received so far, as latin1 text. */
  body(stream: number): string {
    return this.frames
      .filter((x) => x.type === FRAME.DATA && x.stream === stream)
      .map((x) => x.payload.toString('latin1'))
      .join('');
  }

  /** The GOAWAY error code the server sent, if any. */
  goawayCode(): number | undefined {
    const f = this.frames.find((x) => x.type === FRAME.GOAWAY);
    return f?.payload.readUInt32BE(4);
  }

  /**
   * The :status of a stream's response, or undefined before one came. Node's encoder sends the
   * common codes as the first field, indexed from HPACK's static table (RFC 7541 appendix A).
   */
  status(stream: number): number | 'other' | undefined {
    const f = this.frames.find((x) => x.type === FRAME.HEADERS && x.stream === stream);
    if (f === undefined) return undefined;
    const STATIC: Record<number, number> = { 0x88: 200, 0x89: 204, 0x8a: 206, 0x8b: 304, 0x8c: 400, 0x8d: 404, 0x8e: 500 };
    return STATIC[f.payload[0] as number] ?? 'other';
  }

  close(): void {
    this.socket.destroy();
  }
}

/** The usual request pseudo-headers for a GET of `path`. */
export function get(path: string, extra: readonly (readonly [string, string])[] = []): [string, string][] {
  return [[':method', 'GET'], [':scheme', 'https'], [':authority', 'a.test'], [':path', path], ...extra.map(([n, v]) => [n, v] as [string, string])];
}
