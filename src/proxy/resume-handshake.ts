// The resume handshake of a version-2 handoff (docs/handoff.md, "Deliver", item 1), as the data
// plane makes it: a new upgrade opened by roomgate itself on the room's new owner for a client
// socket that stays open. Its own Sec-WebSocket-Key, the socket's original path and Host, the
// extension and subprotocol the client's socket negotiated (so the new owner's frames are what the
// client already decodes), and the fields the runtime gives (ownership, ids, the proof). The 101 is
// read by roomgate (strict, bounded, within a deadline) and never relayed: the client has its
// socket. Every byte of the answer is hostile: anything but a 101 that agrees in every point is a
// failed resume (the socket then goes the `messages` way), never a crash.
import { createHash, randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import type { BackendTls } from '../backends/backend-tls.js';
import { headerValue, parseResponseHead, type ResponseHead } from '../http/response-head.js';
import { MAX_RESPONSE_HEAD_BYTES } from '../http/response-rules.js';
import { connectBackend, type BackendAddress } from './backend-connect.js';

/** What the resumed upgrade asks for. */
export interface ResumeRequest {
  readonly backend: BackendAddress;
  readonly tls: BackendTls;
  /** The request target of the socket's own handshake (as the backend saw it). */
  readonly path: string;
  /** Its Host field (null: the backend's address). */
  readonly host: string | null;
  /** Sec-WebSocket-Extensions of the client socket's 101 (null: none negotiated). */
  readonly extensions: string | null;
  /** Sec-WebSocket-Protocol of the client socket's 101 (null: none). */
  readonly protocol: string | null;
  /** [name, value, ...]: X-Roomgate-Room, -Epoch, -Socket, -Resume, the proof. */
  readonly fields: readonly string[];
  /** From when the request is sent (`go`), how long the 101 has. */
  readonly timeoutMs: number;
  /**
   * The request is sent once this resolves true (false: never sent, a failed resume); the
   * connection is opened at once all the same, so the handshake that follows costs no connect.
   * Absent: sent as soon as connected.
   */
  readonly go?: Promise<boolean>;
}

/** A 101 consumed: the socket (reading paused) and the bytes that came behind the 101. */
export type Resumed = { readonly ok: true; readonly socket: Socket; readonly early: Buffer | null } | { readonly ok: false; readonly why: string };

/** Whoever reads a resumed socket: its handshake first, then the tunnel it is spliced into. */
export interface ResumeReader {
  read(n: number, buf: Buffer): boolean;
}

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
// 1xx interim answers (100, 102, 103) before the 101; more is a broken backend.
const MAX_INTERIM_ANSWERS = 8;
// The same read buffer size as a tunnel's (upgrade-tunnel.ts).
const READ_BUFFER_BYTES = 1_024;

const kReader = Symbol('roomgate.resumeReader');
type ReaderSocket = Socket & { [kReader]?: ResumeReader };

/** The tunnel reads the socket from now on (its first read: what it was sent after the 101). */
export function attachReader(socket: Socket, reader: ResumeReader): void {
  (socket as ReaderSocket)[kReader] = reader;
}

function onResumeRead(this: Socket, n: number, buf: Uint8Array): boolean {
  return (this as ReaderSocket)[kReader]?.read(n, buf as Buffer) ?? false;
}

/** Kept for the socket's life: an error after the 101 (before or after the splice) destroys it. */
function onResumeError(this: Socket): void {
  this.destroy();
}

/**
 * Opens the resumed upgrade and reads its answer; resolves once, never rejects. With `go`, the
 * connection is opened now and the request sent when `go` says so: the new owner sees nothing of
 * the resume before (an idle connection).
 */
export function openResumed(r: ResumeRequest): Promise<Resumed> {
  return new Promise((resolve) => {
    const key = randomBytes(16).toString('base64');
    const reader = new HandshakeReader(r, key, resolve);
    let connected = false;
    let going = r.go === undefined;
    const send = (): void => {
      if (connected && going && !reader.settled) socket.write(Buffer.from(requestHead(r, key), 'latin1'));
    };
    const socket = connectBackend(r.backend, r.tls, Buffer.allocUnsafeSlow(READ_BUFFER_BYTES), onResumeRead, function ready(this: Socket) {
      this.setNoDelay(true);
      connected = true;
      send();
    });
    reader.socket = socket;
    attachReader(socket, reader);
    socket.on('error', onResumeError);
    socket.on('close', reader.closed);
    const deadline = (): void => {
      reader.timer = setTimeout(() => reader.fail(`no 101 within ${r.timeoutMs} ms`), r.timeoutMs);
    };
    if (r.go === undefined) return deadline();
    void r.go.then((ok) => {
      if (reader.settled) return;
      if (!ok) return void reader.fail('the resume was called off before its request was sent');
      going = true;
      deadline();
      send();
    });
  });
}

function requestHead(r: ResumeRequest, key: string): string {
  const { host, port } = r.backend;
  const own = host.includes(':') ? `[${host}]` : host;
  let text = `GET ${r.path} HTTP/1.1\r\nHost: ${r.host ?? `${own}:${port}`}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`;
  text += `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n`;
  if (r.extensions !== null) text += `Sec-WebSocket-Extensions: ${r.extensions}\r\n`;
  if (r.protocol !== null) text += `Sec-WebSocket-Protocol: ${r.protocol}\r\n`;
  for (let i = 0; i + 1 < r.fields.length; i += 2) text += `${r.fields[i] as string}: ${r.fields[i + 1] as string}\r\n`;
  return `${text}\r\n`;
}

/** The answer to one resumed upgrade, read until a verdict. */
class HandshakeReader implements ResumeReader {
  socket: Socket | null = null;
  timer: NodeJS.Timeout | null = null;
  private answer: Buffer | null = null;
  private interims = 0;
  private done = false;
  get settled(): boolean {
    return this.done;
  }
  /** The connection closed before a verdict (removed once there is one: nothing of this reader outlives it). */
  readonly closed = (): void => void this.fail('the connection closed before a 101');

  constructor(
    private readonly r: ResumeRequest,
    private readonly key: string,
    private readonly resolve: (out: Resumed) => void,
  ) {}

  read(n: number, buf: Buffer): boolean {
    if (this.done) return false;
    this.answer = this.answer === null ? Buffer.from(buf.subarray(0, n)) : Buffer.concat([this.answer, buf.subarray(0, n)]);
    for (;;) {
      const parsed = parseResponseHead(this.answer, MAX_RESPONSE_HEAD_BYTES);
      if (parsed === null) return true;
      if (!parsed.ok) return this.fail(`a broken answer (${parsed.error})`);
      const head = parsed.head;
      if (head.status === 101) return this.switched(head);
      if (head.status >= 200 || head.status < 100) return this.fail(`refused (${head.status})`);
      if (++this.interims > MAX_INTERIM_ANSWERS) return this.fail('too many interim answers');
      this.answer = this.answer.subarray(head.end);
    }
  }

  private switched(head: ResponseHead): boolean {
    const problem = switchProblem(head, this.key, this.r);
    if (problem !== null) return this.fail(problem);
    const answer = this.answer as Buffer;
    const early = answer.length > head.end ? Buffer.from(answer.subarray(head.end)) : null;
    this.settle({ ok: true, socket: this.socket as Socket, early });
    // Paused until the splice: what the new owner sends meanwhile waits in its connection.
    return false;
  }

  fail(why: string): false {
    if (this.done) return false;
    this.socket?.destroy();
    this.settle({ ok: false, why });
    return false;
  }

  private settle(out: Resumed): void {
    this.done = true;
    this.answer = null;
    this.socket?.removeListener('close', this.closed);
    if (this.timer !== null) clearTimeout(this.timer);
    this.resolve(out);
  }
}

/** Why a 101 is not the one this resume needs, or null when it is. */
export function switchProblem(head: ResponseHead, key: string, r: Pick<ResumeRequest, 'extensions' | 'protocol'>): string | null {
  if ((headerValue(head, 'upgrade') ?? '').toLowerCase() !== 'websocket') return 'a 101 without Upgrade: websocket';
  if (!(headerValue(head, 'connection') ?? '').toLowerCase().split(',').some((t) => t.trim() === 'upgrade')) return 'a 101 without Connection: Upgrade';
  const accept = createHash('sha1').update(key + GUID).digest('base64');
  if (headerValue(head, 'sec-websocket-accept') !== accept) return 'a 101 with a wrong Sec-WebSocket-Accept';
  if (normalExtensions(headerValue(head, 'sec-websocket-extensions') ?? null) !== normalExtensions(r.extensions)) return 'a 101 whose extensions differ from the client socket\'s';
  if ((headerValue(head, 'sec-websocket-protocol') ?? null) !== r.protocol) return 'a 101 whose subprotocol differs from the client socket\'s';
  return null;
}

/**
 * Extensions compared by meaning: names and parameters lower-case, parameters sorted, blanks
 * dropped; client_no_context_takeover left out (roomgate asks it of every followed client itself).
 */
function normalExtensions(value: string | null): string {
  if (value === null) return '';
  return value
    .split(',')
    .map((e) => {
      const [name = '', ...params] = e.split(';').map((p) => p.replace(/\s+/g, '').toLowerCase());
      return [name, ...params.filter((p) => p !== 'client_no_context_takeover').sort()].join(';');
    })
    .filter((e) => e !== '')
    .join(',');
}

/**
 * The client's offer for a tunnel that may be resumed: every permessage-deflate offer asks for
 * server_no_context_takeover and client_no_context_takeover, so each message is compressed alone
 * in both directions and no history has to move to another process (RFC 7692 7.1.1; a server
 * that accepts such an offer must keep server_no_context_takeover in its answer).
 */
export function offerWithoutContext(value: string): string {
  return value
    .split(',')
    .map((e) => {
      const params = e.split(';').map((p) => p.trim());
      if ((params[0] ?? '').toLowerCase() !== 'permessage-deflate') return e.trim();
      const has = (p: string): boolean => params.some((q) => q.toLowerCase() === p);
      for (const p of ['server_no_context_takeover', 'client_no_context_takeover']) if (!has(p)) params.push(p);
      return params.join('; ');
    })
    .join(', ');
}

/**
 * What a tunnel that may be resumed keeps of its handshake text (`GET target HTTP/1.1` CRLF, then
 * field lines): the target and Host for the resumed upgrade, and the text with its deflate offers
 * rewritten (offerWithoutContext).
 */
export function resumeReady(handshake: string): { readonly text: string; readonly path: string; readonly host: string | null } {
  const lines = handshake.split('\r\n');
  const first = lines[0] ?? '';
  const path = first.slice(first.indexOf(' ') + 1, first.lastIndexOf(' '));
  let host: string | null = null;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    if (colon === -1) continue;
    const name = line.slice(0, colon).toLowerCase();
    if (name === 'host' && host === null) host = line.slice(colon + 1).trim();
    else if (name === 'sec-websocket-extensions') lines[i] = `${line.slice(0, colon)}: ${offerWithoutContext(line.slice(colon + 1))}`;
  }
  return { text: lines.join('\r\n'), path, host };
}

/** A close frame from the server side (unmasked): what a client gets when its resume failed. */
export function serverCloseFrame(code: number, reason: string): Buffer {
  const text = Buffer.from(reason, 'utf8');
  return Buffer.concat([Buffer.from([0x88, 2 + text.length, code >> 8, code & 0xff]), text]);
}
