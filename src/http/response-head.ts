// A strict reader of a response head from raw bytes (RFC 9112 4-6), for the answers roomgate reads
// itself instead of through node:http: a backend's answer to a WebSocket handshake. Bounded:
// a head longer than maxBytes is an error, never a growing buffer. No obs-fold, no bare CR or LF,
// no whitespace before a colon, one Content-Length at most, Transfer-Encoding only "chunked" and
// never with Content-Length.
import { FIELD_CHAR, TCHAR } from './syntax.js';

export interface ResponseHead {
  /** HTTP/1.1 (true) or HTTP/1.0. */
  readonly http11: boolean;
  readonly status: number;
  readonly reason: string;
  /** [name, value] as latin1 text, in order. */
  readonly headers: readonly (readonly [string, string])[];
  /** Offset of the first byte after the blank line that ends the head. */
  readonly end: number;
  /** How the body is framed (RFC 9112 6.3), for an answer to a GET. */
  readonly body: BodyFraming;
}

export type BodyFraming = { readonly kind: 'none' } | { readonly kind: 'length'; readonly length: number } | { readonly kind: 'chunked' } | { readonly kind: 'close' };

export type HeadParse = { readonly ok: true; readonly head: ResponseHead } | { readonly ok: false; readonly error: string } | null;

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;
const COLON = 0x3a;
const STATUS_PREFIX = Buffer.from('HTTP/1.', 'latin1');

/**
 * Parses the response head at the start of buf. null: incomplete (more bytes needed, and fewer
 * than maxBytes so far); an error names the first rule broken.
 */
export function parseResponseHead(buf: Buffer, maxBytes: number): HeadParse {
  const limit = Math.min(buf.length, maxBytes);
  const blank = buf.indexOf('\r\n\r\n', 0, 'latin1');
  if (blank === -1 || blank + 4 > limit) {
    if (buf.length >= maxBytes) return { ok: false, error: `response head over ${maxBytes} bytes` };
    // A head with bare line ends never gets its CRLF blank line: refused now, not at the timeout.
    return bareLineEnd(buf, limit) ?? null;
  }
  const end = blank + 4;
  // One pass over the bytes with the character tables; strings are made only for what is kept.
  // The status line: "HTTP/1." 0|1 SP 3DIGIT [SP reason] CRLF.
  let i = 0;
  for (; i < STATUS_PREFIX.length; i++) if (buf[i] !== STATUS_PREFIX[i]) return { ok: false, error: 'malformed status line' };
  const minor = buf[i++];
  if ((minor !== 0x30 && minor !== 0x31) || buf[i++] !== SP) return { ok: false, error: 'malformed status line' };
  const d1 = (buf[i] as number) - 0x30;
  const d2 = (buf[i + 1] as number) - 0x30;
  const d3 = (buf[i + 2] as number) - 0x30;
  if (!(d1 >= 0 && d1 <= 9 && d2 >= 0 && d2 <= 9 && d3 >= 0 && d3 <= 9)) return { ok: false, error: 'malformed status line' };
  const status = d1 * 100 + d2 * 10 + d3;
  i += 3;
  let reason = '';
  if (buf[i] === SP) {
    const from = ++i;
    while (buf[i] !== CR && buf[i] !== LF) {
      if (FIELD_CHAR[buf[i] as number] !== 1) return { ok: false, error: 'control character in the reason phrase' };
      i++;
    }
    reason = buf.toString('latin1', from, i);
  }
  if (buf[i] !== CR) return { ok: false, error: buf[i] === LF ? 'bare LF in the head' : 'malformed status line' };
  if (buf[i + 1] !== LF) return { ok: false, error: 'bare CR in the head' };
  if (status < 100 || status > 599) return { ok: false, error: `status code ${status}` };
  i += 2;

  const headers: [string, string][] = [];
  let contentLength: number | null = null;
  let chunked = false;
  // Header lines up to the blank line at `blank`: name ":" OWS value OWS CRLF.
  while (i < blank + 2) {
    const lineStart = i;
    while (TCHAR[buf[i] as number] === 1) i++;
    if (buf[i] !== COLON) {
      // What the first byte that is not a name's says about the line.
      const c = buf[i] as number;
      if (c === CR && buf[i + 1] !== LF) return { ok: false, error: 'bare CR in the head' };
      if (c === LF) return { ok: false, error: 'bare LF in the head' };
      if (i === lineStart) {
        if (c === SP || c === HTAB) return { ok: false, error: 'obs-fold' };
        if (c === CR) return { ok: false, error: 'header line without a name' };
      }
      return { ok: false, error: i === lineStart && c !== COLON ? 'header line without a name' : `invalid header name ${JSON.stringify(buf.toString('latin1', lineStart, lineEnd(buf, i)))}` };
    }
    if (i === lineStart) return { ok: false, error: 'header line without a name' };
    const nameEnd = i++;
    while (buf[i] === SP || buf[i] === HTAB) i++;
    const valueStart = i;
    while (buf[i] !== CR && buf[i] !== LF) {
      if (FIELD_CHAR[buf[i] as number] !== 1) return { ok: false, error: `control character in header ${buf.toString('latin1', lineStart, nameEnd)}` };
      i++;
    }
    if (buf[i] === LF || buf[i + 1] !== LF) return { ok: false, error: buf[i] === LF ? 'bare LF in the head' : 'bare CR in the head' };
    let valueEnd = i;
    while (valueEnd > valueStart && (buf[valueEnd - 1] === SP || buf[valueEnd - 1] === HTAB)) valueEnd--;
    i += 2;
    const name = buf.toString('latin1', lineStart, nameEnd);
    const value = buf.toString('latin1', valueStart, valueEnd);
    // Only two names change the framing; their lengths rule out most lines without lower-casing.
    if (name.length === 14 && name.toLowerCase() === 'content-length') {
      if (contentLength !== null) return { ok: false, error: 'more than one Content-Length' };
      if (!/^[0-9]{1,15}$/.test(value)) return { ok: false, error: 'invalid Content-Length' };
      contentLength = Number(value);
    } else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') {
      if (chunked || value.toLowerCase() !== 'chunked') return { ok: false, error: `Transfer-Encoding ${JSON.stringify(value)}` };
      chunked = true;
    }
    headers.push([name, value]);
  }
  if (chunked && contentLength !== null) return { ok: false, error: 'Content-Length with Transfer-Encoding' };
  // RFC 9112 6.3: 1xx, 204 and 304 have no body whatever their headers say.
  const body: BodyFraming =
    status < 200 || status === 204 || status === 304
      ? { kind: 'none' }
      : chunked
        ? { kind: 'chunked' }
        : contentLength !== null
          ? contentLength === 0
            ? { kind: 'none' }
            : { kind: 'length', length: contentLength }
          : { kind: 'close' };
  return { ok: true, head: { http11: minor === 0x31, status, reason, headers, end, body } };
}

function bareLineEnd(buf: Buffer, limit: number): { ok: false; error: string } | undefined {
  for (let i = buf.indexOf(LF); i !== -1 && i < limit; i = buf.indexOf(LF, i + 1)) {
    if (i === 0 || buf[i - 1] !== CR) return { ok: false, error: 'bare LF in the head' };
  }
  for (let i = buf.indexOf(CR); i !== -1 && i + 1 < limit; i = buf.indexOf(CR, i + 1)) {
    if (buf[i + 1] !== LF) return { ok: false, error: 'bare CR in the head' };
  }
  return undefined;
}

/** Where the line holding offset i ends (its CR or LF, or the buffer's end). */
function lineEnd(buf: Buffer, i: number): number {
  let e = i;
  while (e < buf.length && buf[e] !== CR && buf[e] !== LF) e++;
  return e;
}

/** The value of the first header of that (lower-case) name, or undefined. */
export function headerValue(head: ResponseHead, lowerName: string): string | undefined {
  for (const [n, v] of head.headers) if (n.toLowerCase() === lowerName) return v;
  return undefined;
}
