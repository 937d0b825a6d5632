// The request heads the byte-level page path (src/server/lean-connection.ts) takes itself: a
// strict, narrow subset of HTTP/1.1 read straight from the bytes. Whatever is outside the subset
// is not refused here but handed to node:http (llhttp plus src/http/request-head.ts), which gives
// the answer the conformance corpus pins; so this parser can only ever accept less than the
// general path, never interpret the same bytes differently.
//
// The subset: `GET` or `HEAD`, an origin-form target of RFC 3986 characters, `HTTP/1.1`, every
// line ended by CRLF, header names of tchar directly followed by ':', values of visible ASCII,
// space and tab, exactly one valid Host, and nothing that frames a body (Content-Length,
// Transfer-Encoding) or waits for a go-ahead (Expect).
//
// A WebSocket handshake of the subset is read too, as an "upgrade": a GET with exactly one
// `Upgrade: websocket`, exactly one Connection line that is a plain token list (tokens, commas,
// spaces) holding `upgrade`, and exactly one non-empty Sec-WebSocket-Key and Sec-WebSocket-Version.
// These are heads node:http's parser (llhttp) surely takes as an upgrade too, so both paths read
// the same bytes as the same handshake; any other head with an Upgrade line goes to node:http.
import { isHostValue, TARGET_CHAR, TCHAR } from './syntax.js';

export interface LeanHead {
  readonly method: 'GET' | 'HEAD';
  /** The target as sent (origin form). */
  readonly url: string;
  /** The one Host value. */
  readonly host: string;
  /** [name, value, ...] as node:http's rawHeaders: names as sent, values without surrounding blanks. */
  readonly rawHeaders: string[];
  /** Every Cookie line joined with "; " (what node:http makes of several). */
  readonly cookie: string | undefined;
  /** The value of the configured room header (one line at most). */
  readonly roomHeader: string | undefined;
  /** The client asked for the connection to end after this answer. */
  readonly close: boolean;
  /** Offset just past the blank line that ends the head. */
  readonly end: number;
}

/** A WebSocket handshake of the subset (the upgrade path checks it as it checks node:http's). */
export interface LeanHandshake {
  readonly head: LeanHead;
  /** The Upgrade value ("websocket" in some case). */
  readonly upgrade: string;
  readonly key: string;
  readonly version: string;
}

export type LeanParse =
  | { readonly kind: 'head'; readonly head: LeanHead }
  /** A WebSocket handshake: for the upgrade path only, never a page (hence no `head` member here). */
  | { readonly kind: 'upgrade'; readonly handshake: LeanHandshake }
  /** More bytes are needed (and may still make a head of the subset). */
  | { readonly kind: 'incomplete' }
  /** Not for this path: node:http reads these bytes (and answers them, or refuses them). */
  | { readonly kind: 'other'; readonly reason: string };

export interface LeanLimits {
  readonly maxHeaderBytes: number;
  readonly maxHeaders: number;
  /** Lower-case name of the room header. */
  readonly roomHeader: string;
}

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;
const COLON = 0x3a;

/**
 * Target characters taken here (TARGET_CHAR of src/http/syntax.ts): RFC 3986's unreserved,
 * sub-delims, ':', '@', '/', '?' and '%'. A fragment ('#'), quotes, '<', '>', '\', '^', '`', '{',
 * '|', '}' and anything non-ASCII go to node:http, which has its own (documented) leniencies for them.
 */
const TARGET = TARGET_CHAR;

/** Header value bytes taken here: visible ASCII, space and tab (obs-text goes to node:http). */
const VALUE = new Uint8Array(256);
for (let c = 0x20; c < 0x7f; c++) VALUE[c] = 1;
VALUE[HTAB] = 1;

/** " HTTP/1.1\r\n" after the target. */
const VERSION = Buffer.from(' HTTP/1.1\r\n', 'latin1');

const other = (reason: string): LeanParse => ({ kind: 'other', reason });
const INCOMPLETE: LeanParse = { kind: 'incomplete' };

/**
 * Could the bytes at buf[from..] still begin a head of the subset? False as soon as the method
 * cannot be GET or HEAD, so a POST (or garbage) goes to node:http without waiting for its head.
 */
export function mayBeLean(buf: Buffer, from: number): boolean {
  const n = Math.min(buf.length - from, 5);
  const get = 'GET ';
  const head = 'HEAD ';
  let g = true;
  let h = true;
  for (let i = 0; i < n; i++) {
    const c = buf[from + i] as number;
    if (i < get.length && c !== get.charCodeAt(i)) g = false;
    if (c !== head.charCodeAt(i)) h = false;
  }
  return g || h;
}

/**
 * Reads one request head at buf[from..]. The bytes are checked as they stand, line by line:
 * "incomplete" only when everything so far is the start of a head of the subset, so a byte that
 * node:http would refuse at once (a bare LF, say) goes to it at once instead of waiting for a
 * blank line that never comes.
 */
export function parseLeanHead(buf: Buffer, from: number, limits: LeanLimits): LeanParse {
  if (!mayBeLean(buf, from)) return other('method');
  // Past this many bytes without the blank line, node:http answers (431).
  const len = Math.min(buf.length, from + limits.maxHeaderBytes);
  const more = (): LeanParse => (buf.length - from >= limits.maxHeaderBytes ? other('head-size') : INCOMPLETE);

  // Request line.
  const method = buf[from] === 0x47 /* G */ ? 'GET' : 'HEAD';
  const targetStart = from + method.length + 1;
  const targetEnd = requestLine(buf, targetStart, len, more);
  if (typeof targetEnd !== 'number') return targetEnd;
  let i = targetEnd + VERSION.length;

  const rawHeaders: string[] = [];
  let host: string | undefined;
  let hosts = 0;
  let cookie: string | undefined;
  let roomHeader: string | undefined;
  let roomHeaders = 0;
  let close = false;
  const handshake = new HandshakeLines();
  const roomName = limits.roomHeader;
  // Each line: name ':' OWS value OWS CRLF, until the empty line.
  for (;;) {
    if (i >= len) return more();
    if (buf[i] === CR) {
      if (i + 1 >= len) return more();
      if (buf[i + 1] !== LF) return other('bare-cr');
      i += 2;
      break;
    }
    if (rawHeaders.length >= limits.maxHeaders * 2) return other('header-count');
    const nameStart = i;
    while (i < len && TCHAR[buf[i] as number] === 1) i++;
    if (i >= len) return more();
    if (i === nameStart || buf[i] !== COLON) return other('header-name');
    const nameEnd = i;
    i++;
    while (i < len && (buf[i] === SP || buf[i] === HTAB)) i++;
    const valueStart = i;
    while (i < len && VALUE[buf[i] as number] === 1) i++;
    if (i >= len || (buf[i] === CR && i + 1 >= len)) return more();
    if (buf[i] !== CR || buf[i + 1] !== LF) return other('header-value');
    let valueEnd = i;
    while (valueEnd > valueStart && (buf[valueEnd - 1] === SP || buf[valueEnd - 1] === HTAB)) valueEnd--;
    i += 2;
    const name = buf.toString('latin1', nameStart, nameEnd);
    const value = buf.toString('latin1', valueStart, valueEnd);
    rawHeaders.push(name, value);
    // Only a few names matter here; their lengths rule out most lines without lower-casing them.
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === 'host') {
          hosts++;
          host = value;
        }
        break;
      case 6: {
        const lower = name.toLowerCase();
        if (lower === 'cookie') cookie = cookie === undefined ? value : `${cookie}; ${value}`;
        else if (lower === 'expect') return other('expect');
        break;
      }
      case 7:
        if (name.toLowerCase() === 'upgrade') handshake.upgradeLine(value);
        break;
      case 10:
        if (name.toLowerCase() === 'connection') {
          if (hasToken(value, 'close')) close = true;
          handshake.connectionLine(value);
        }
        break;
      case 14:
        if (name.toLowerCase() === 'content-length') return other('body');
        break;
      case 17: {
        const lower = name.toLowerCase();
        if (lower === 'transfer-encoding') return other('body');
        if (lower === 'sec-websocket-key') handshake.keyLine(value);
        break;
      }
      case 21:
        if (name.toLowerCase() === 'sec-websocket-version') handshake.versionLine(value);
        break;
    }
    if (name.length === roomName.length && name.toLowerCase() === roomName) {
      roomHeaders++;
      roomHeader = value;
    }
  }
  if (hosts !== 1 || host === undefined || !isHostValue(host)) return other('host');
  // node:http joins repeated custom headers with ", "; one line keeps the two paths equal.
  if (roomHeaders > 1) return other('room-header');
  const head: LeanHead = { method, url: buf.toString('latin1', targetStart, targetEnd), host, rawHeaders, cookie, roomHeader, close, end: i };
  return handshake.upgrades === 0 ? { kind: 'head', head } : handshake.of(head);
}

/** The rest of the request line from the target on: where the target ends, or why not. */
function requestLine(buf: Buffer, targetStart: number, len: number, more: () => LeanParse): number | LeanParse {
  let i = targetStart;
  while (i < len && TARGET[buf[i] as number] === 1) i++;
  if (i >= len) return more();
  if (i === targetStart || buf[targetStart] !== 0x2f /* / */ || buf[i] !== SP) return other('target');
  for (let k = 0; k < VERSION.length; k++) {
    if (i + k >= len) return more();
    if (buf[i + k] !== VERSION[k]) return other('version');
  }
  return i;
}

/** A head's handshake lines: how many of each, the last value, and whether Connection names upgrade. */
class HandshakeLines {
  upgrades = 0;
  private upgrade = '';
  private connections = 0;
  private connection = '';
  private keys = 0;
  private key = '';
  private versions = 0;
  private version = '';

  upgradeLine(value: string): void {
    this.upgrades++;
    this.upgrade = value;
  }

  connectionLine(value: string): void {
    this.connections++;
    // Read only for a head with an Upgrade line: a page's Connection costs nothing more here.
    this.connection = value;
  }

  keyLine(value: string): void {
    this.keys++;
    this.key = value;
  }

  versionLine(value: string): void {
    this.versions++;
    this.version = value;
  }

  /** The handshake of a head with an Upgrade line, or "other" when it is outside the subset. */
  of(head: LeanHead): LeanParse {
    // node:http joins repeated lines with ", " and llhttp reads Connection lines its own way: one
    // line of each, written plainly, is where both surely see the same handshake.
    const plain =
      head.method === 'GET' &&
      this.upgrades === 1 &&
      this.upgrade.toLowerCase() === 'websocket' &&
      this.connections === 1 &&
      plainListHas(this.connection, 'upgrade') &&
      this.keys === 1 &&
      this.key !== '' &&
      this.versions === 1 &&
      this.version !== '';
    return plain ? { kind: 'upgrade', handshake: { head, upgrade: this.upgrade, key: this.key, version: this.version } } : other('upgrade');
  }
}

/** A list of tokens, commas and spaces only (no empty element), holding this (lower-case) token in any case. */
function plainListHas(list: string, token: string): boolean {
  let found = false;
  for (const part of list.split(',')) {
    const t = part.replace(/^ +| +$/g, '');
    if (t === '') return false;
    for (let k = 0; k < t.length; k++) if (TCHAR[t.charCodeAt(k)] !== 1) return false;
    if (t.toLowerCase() === token) found = true;
  }
  return found;
}

/** A comma-separated list holds this (lower-case) token, in any case. */
function hasToken(list: string, token: string): boolean {
  for (const part of list.split(',')) if (part.trim().toLowerCase() === token) return true;
  return false;
}
