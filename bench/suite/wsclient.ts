/**
 * A lean WebSocket client for the load generator. The load generator shares its core with the
 * backends, and at 3,000 clients the `ws` client's per-frame JavaScript was a third of that core;
 * this one does only what the workloads need, so the load side stays below the targets:
 *
 *  - the handshake as a browser sends it (header order and set of a current Chrome), checked
 *    (101 and Sec-WebSocket-Accept);
 *  - unfragmented server frames: text/binary (-> onMessage), ping (answered), pong (counted),
 *    close (answered, then the socket ends); a fragmented or oversized frame closes the socket;
 *  - masked client frames: text, ping and close.
 */
import { createHash, randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const MAX_FRAME = 1 << 20;

export interface WsClientOptions {
  readonly host: string;
  readonly port: number;
  /** Path and query, e.g. /ws/live/?idle=1 */
  readonly path: string;
  /** Headers after Host/Connection/Upgrade, in order (Origin, User-Agent, Cookie, ...). */
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;
  /** wss: TLS to the proxy (the suite's own self-signed certificate, not verified). */
  readonly tls?: boolean;
}

export class WsClient {
  private readonly socket: Socket;
  private buf: Buffer | null = null;
  private open = false;
  private closed = false;
  private readonly key = randomBytes(16).toString('base64');
  private readonly mask = randomBytes(4);
  private timer: NodeJS.Timeout | undefined;

  onOpen: () => void = () => undefined;
  onMessage: (data: Buffer) => void = () => undefined;
  onPong: () => void = () => undefined;
  /** An HTTP answer other than 101: its status, head and the body bytes read with it (then onClose). */
  onRefused: (status: number, head: string, body: Buffer) => void = () => undefined;
  /** Once, with the reason when it did not end cleanly. */
  onClose: (err?: Error) => void = () => undefined;

  constructor(o: WsClientOptions) {
    this.socket = o.tls ? tlsConnect({ host: o.host, port: o.port, rejectUnauthorized: false }) : connect({ host: o.host, port: o.port, noDelay: true });
    if (o.tls) this.socket.setNoDelay(true);
    this.timer = setTimeout(() => this.fail(new Error(`no 101 within ${o.timeoutMs} ms`)), o.timeoutMs);
    const head = [`GET ${o.path} HTTP/1.1`, `Host: ${o.host}:${o.port}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${this.key}`];
    for (const [k, v] of Object.entries(o.headers)) head.push(`${k}: ${v}`);
    this.socket.write(`${head.join('\r\n')}\r\n\r\n`, 'latin1');
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', (err) => this.fail(err));
    this.socket.on('close', () => this.fail(this.open ? undefined : new Error('closed before the 101')));
  }

  get isOpen(): boolean {
    return this.open && !this.closed;
  }

  /** A masked text frame (payload under 126 bytes: the workloads' frames are 60). */
  sendText(text: string): void {
    if (!this.isOpen) return;
    const n = Buffer.byteLength(text);
    if (n > 125) throw new Error('sendText: frames over 125 bytes are not needed here');
    const f = Buffer.allocUnsafe(6 + n);
    f[0] = 0x81;
    f[1] = 0x80 | n;
    this.mask.copy(f, 2);
    f.write(text, 6, 'latin1');
    for (let i = 0; i < n; i++) f[6 + i]! ^= this.mask[i & 3]!;
    this.socket.write(f);
  }

  ping(): void {
    if (!this.isOpen) return;
    const f = Buffer.allocUnsafe(6);
    f[0] = 0x89;
    f[1] = 0x80;
    this.mask.copy(f, 2);
    this.socket.write(f);
  }

  /** A masked close frame (1000, or `code`), then the end of the socket: a page that closes its socket. */
  close(code = 1000): void {
    if (!this.isOpen) return this.terminate();
    const f = Buffer.from([0x88, 0x82, ...this.mask, (code >> 8) ^ this.mask[0]!, (code & 0xff) ^ this.mask[1]!]);
    this.closed = true;
    this.socket.end(f);
    // A peer that never closes its side must not keep the socket.
    setTimeout(() => this.socket.destroy(), 2_000).unref();
  }

  /** Ends at once (no closing handshake): what a closed tab or a dropped network looks like. */
  terminate(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.closed = true;
    this.socket.destroy();
  }

  /**
   * Gives up the handshake as soon as it is sent: a FIN right behind it, then gone, without
   * waiting for any answer. What a client past its own timeout does while an overloaded backend
   * has not answered yet, made to happen every time.
   */
  abandon(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.socket.end(() => this.socket.destroy());
  }

  private fail(err?: Error): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.closed) {
      this.closed = true;
      this.socket.destroy();
      this.onClose(err);
    } else if (!this.socket.destroyed) this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let b = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
    this.buf = null;
    if (!this.open) {
      const end = b.indexOf('\r\n\r\n');
      if (end < 0) {
        if (b.length > 16_384) return this.fail(new Error('response head too large'));
        this.buf = b;
        return;
      }
      const head = b.toString('latin1', 0, end);
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1];
      if (status !== '101') {
        this.onRefused(Number(status ?? 0), head, b.subarray(end + 4));
        return this.fail(new Error(`HTTP ${status ?? '?'}`));
      }
      const accept = /\r\nsec-websocket-accept:\s*(\S+)/i.exec(head)?.[1];
      if (accept !== createHash('sha1').update(this.key + GUID).digest('base64')) return this.fail(new Error('bad Sec-WebSocket-Accept'));
      this.open = true;
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      this.onOpen();
      b = b.subarray(end + 4);
    }
    let off = 0;
    while (!this.closed && b.length - off >= 2) {
      const b0 = b[off]!;
      const b1 = b[off + 1]!;
      if ((b0 & 0x80) === 0 || (b1 & 0x80) !== 0) return this.fail(new Error('fragmented or masked server frame'));
      let len = b1 & 0x7f;
      let hl = 2;
      if (len === 126) {
        if (b.length - off < 4) break;
        len = b.readUInt16BE(off + 2);
        hl = 4;
      } else if (len === 127) {
        if (b.length - off < 10) break;
        len = Number(b.readBigUInt64BE(off + 2));
        hl = 10;
      }
      if (len > MAX_FRAME) return this.fail(new Error('frame too large'));
      if (b.length - off < hl + len) break;
      const payload = b.subarray(off + hl, off + hl + len);
      off += hl + len;
      const op = b0 & 0x0f;
      if (op === 1 || op === 2) this.onMessage(payload);
      else if (op === 9) this.pong(payload);
      else if (op === 10) this.onPong();
      else if (op === 8) {
        const f = Buffer.from([0x88, 0x80, ...this.mask]);
        this.socket.end(f);
        return this.fail(new Error(`closed by the server (${payload.length >= 2 ? payload.readUInt16BE(0) : 1005})`));
      }
    }
    if (off < b.length) this.buf = Buffer.from(b.subarray(off));
  }

  private pong(payload: Buffer): void {
    const n = Math.min(125, payload.length);
    const f = Buffer.allocUnsafe(6 + n);
    f[0] = 0x8a;
    f[1] = 0x80 | n;
    this.mask.copy(f, 2);
    for (let i = 0; i < n; i++) f[6 + i] = payload[i]! ^ this.mask[i & 3]!;
    this.socket.write(f);
  }
}
