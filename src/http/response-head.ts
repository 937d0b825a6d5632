// A strict reader of a response head from raw bytes (RFC 9112 4-6), for the answers roomgate reads
// itself instead of through node:http: a backend's answer to a WebSocket handshake. Bounded:
// a head longer than maxBytes is an error, never a growing buffer. No obs-fold, no bare CR or LF,
// no whitespace before a colon, one Content-Length at most, Transfer-Encoding only "chunked" and
// never with Content-Length.
import { FIELD_CHAR, TCHAR } from './syntax.js';

export interface ResponseHead {
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

/**
 * Parses the response head at the start of buf. null: incomplete (more bytes needed, and fewer
 * than maxBytes so far); an error names the first rule broken.
 */
export function parseResponseHead(buf: Buffer, maxBytes: number): HeadParse {
  const limit = Math.min(buf.length, maxBytes);
  const blank = buf.indexOf('\r\n\r\n', 0, 'latin1');
  if (blank === -1 || blank + 4 > limit) {
    return buf.length >= maxBytes ? { ok: false, error: `response head over ${maxBytes} bytes` } : null;
  }
  const end = blank + 4;
  const lines: string[] = [];
  let start = 0;
  for (let i = 0; i < blank + 2; i++) {
    const c = buf[i] as number;
    if (c === CR) {
      if (buf[i + 1] !== LF) return { ok: false, error: 'bare CR in the head' };
      lines.push(buf.toString('latin1', start, i));
      i++;
      start = i + 1;
    } else if (c === LF) return { ok: false, error: 'bare LF in the head' };
  }
  const statusLine = /^HTTP\/1\.([01]) ([0-9]{3})(?: (.*))?$/.exec(lines[0] ?? '');
  if (!statusLine) return { ok: false, error: 'malformed status line' };
  const status = Number(statusLine[2]);
  if (status < 100 || status > 599) return { ok: false, error: `status code ${status}` };
  const reason = statusLine[3] ?? '';
  if (!onlyChars(reason, FIELD_CHAR)) return { ok: false, error: 'control character in the reason phrase' };

  const headers: [string, string][] = [];
  let contentLength: number | null = null;
  let chunked = false;
  for (let k = 1; k < lines.length; k++) {
    const line = lines[k] as string;
    const colon = line.indexOf(':');
    if (colon <= 0) return { ok: false, error: line.length > 0 && (line[0] === ' ' || line[0] === '\t') ? 'obs-fold' : 'header line without a name' };
    const name = line.slice(0, colon);
    if (!onlyChars(name, TCHAR)) return { ok: false, error: `invalid header name ${JSON.stringify(name)}` };
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!onlyChars(value, FIELD_CHAR)) return { ok: false, error: `control character in header ${name}` };
    const lower = name.toLowerCase();
    if (lower === 'content-length') {
      if (contentLength !== null) return { ok: false, error: 'more than one Content-Length' };
      if (!/^[0-9]{1,15}$/.test(value)) return { ok: false, error: 'invalid Content-Length' };
      contentLength = Number(value);
    } else if (lower === 'transfer-encoding') {
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
  return { ok: true, head: { status, reason, headers, end, body } };
}

function onlyChars(s: string, allowed: Uint8Array): boolean {
  for (let i = 0; i < s.length; i++) if (allowed[s.charCodeAt(i)] !== 1) return false;
  return true;
}

/** The value of the first header of that (lower-case) name, or undefined. */
export function headerValue(head: ResponseHead, lowerName: string): string | undefined {
  for (const [n, v] of head.headers) if (n.toLowerCase() === lowerName) return v;
  return undefined;
}
