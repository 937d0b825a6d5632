// The referee: a strict HTTP/1.1 message parser (RFC 9112, RFC 9110 field syntax), written from the
// RFCs and sharing no code with roomgate. It reads a byte stream into requests (or responses) or
// names the first rule broken. Strict on purpose: CRLF only (no bare CR or LF), no obs-fold, token
// names with the colon right after them, no CTL/NUL/DEL anywhere in a head, one Content-Length of
// digits only, Transfer-Encoding only with chunked as the final coding and never with
// Content-Length, chunk sizes of bounded hex, chunk extensions by their grammar, trailers as fields.
// The conformance backend, the corpora and the fuzzer judge every byte stream with it.

export type Field = readonly [name: string, value: string];

export type Framing = 'none' | 'length' | 'chunked' | 'close';

/** What requests and responses share. */
export interface ParsedMessage {
  readonly version: string;
  /** Header lines in order, latin1 (one char per byte), values without surrounding whitespace. */
  readonly headers: readonly Field[];
  readonly framing: Framing;
  readonly body: Buffer;
  readonly trailers: readonly Field[];
  /** Offsets of the message in the stream. */
  readonly start: number;
  readonly end: number;
}

export interface ParsedRequest extends ParsedMessage {
  readonly method: string;
  readonly target: string;
  /** Carries Upgrade (and Connection: upgrade) or is CONNECT: the bytes after it are not HTTP. */
  readonly upgrade: boolean;
}

export interface ParsedResponse extends ParsedMessage {
  readonly status: number;
  readonly reason: string;
}

/** One message: complete, incomplete (more bytes needed), or the first rule it breaks. */
export type Step<T> = { readonly kind: 'message'; readonly message: T } | { readonly kind: 'incomplete' } | { readonly kind: 'error'; readonly reason: string; readonly at: number };

export interface StreamParse<T> {
  readonly messages: T[];
  /** The first error, if any; nothing after it is parsed. */
  readonly error: { readonly reason: string; readonly at: number } | null;
  /** Bytes after the last complete message that do not yet make one (or are opaque after an upgrade). */
  readonly incomplete: boolean;
  /** Offset just after the last complete message. */
  readonly consumed: number;
}

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;

function isTchar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || "!#$%&'*+-.^_`|~".includes(String.fromCharCode(c));
}
/** field-vchar: VCHAR / obs-text. */
function isFieldVchar(c: number): boolean {
  return (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}
/** RFC 3986 characters a request-target may hold (unreserved, reserved, '%'). */
function isUriChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || "-._~:/?#[]@!$&'()*+,;=%".includes(String.fromCharCode(c));
}
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

class ParseError extends Error {
  constructor(
    readonly reason: string,
    readonly at: number,
  ) {
    super(reason);
  }
}
class Incomplete extends Error {}
const INCOMPLETE = new Incomplete('incomplete');

/** Reads one CRLF-terminated line from pos; bare CR or bare LF is an error. Returns [line, next]. */
function readLine(buf: Buffer, pos: number): [string, number] {
  for (let i = pos; i < buf.length; i++) {
    const c = buf[i] as number;
    if (c === LF) throw new ParseError('bare LF', i);
    if (c === CR) {
      if (i + 1 >= buf.length) throw INCOMPLETE;
      if (buf[i + 1] !== LF) throw new ParseError('bare CR', i);
      return [buf.toString('latin1', pos, i), i + 2];
    }
  }
  throw INCOMPLETE;
}

/** field-line *( CRLF field-line ) CRLF, from pos; returns the fields and the offset after the blank line. */
function readFields(buf: Buffer, pos: number): [Field[], number] {
  const fields: Field[] = [];
  for (;;) {
    const lineStart = pos;
    const [line, next] = readLine(buf, pos);
    pos = next;
    if (line === '') return [fields, pos];
    const first = line.charCodeAt(0);
    if (first === SP || first === HTAB) throw new ParseError('obs-fold', lineStart);
    const colon = line.indexOf(':');
    if (colon === -1) throw new ParseError('field line without a colon', lineStart);
    if (colon === 0) throw new ParseError('empty field name', lineStart);
    for (let i = 0; i < colon; i++) {
      const c = line.charCodeAt(i);
      if (c === SP || c === HTAB) throw new ParseError('whitespace before the colon', lineStart + i);
      if (!isTchar(c)) throw new ParseError('invalid character in a field name', lineStart + i);
    }
    const value = line.slice(colon + 1).replace(/^[ \t]+/, '').replace(/[ \t]+$/, '');
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (!isFieldVchar(c) && c !== SP && c !== HTAB) throw new ParseError('invalid character in a field value', lineStart + colon + 1);
    }
    fields.push([line.slice(0, colon), value]);
  }
}

function values(fields: readonly Field[], lowerName: string): string[] {
  return fields.filter(([n]) => n.toLowerCase() === lowerName).map(([, v]) => v);
}

/** A comma-separated list (RFC 9110 5.6.1): elements trimmed, empty elements dropped. */
function listElements(vals: readonly string[]): string[] {
  return vals.flatMap((v) => v.split(',')).map((e) => e.trim()).filter((e) => e !== '');
}

interface BodyRule {
  readonly framing: Framing;
  readonly length: number;
}

/** The framing a message's fields ask for (RFC 9112 6.3), or a ParseError. */
function framingOf(fields: readonly Field[], at: number, isRequest: boolean): BodyRule {
  const te = values(fields, 'transfer-encoding');
  const cl = values(fields, 'content-length');
  if (te.length > 0 && cl.length > 0) throw new ParseError('Content-Length with Transfer-Encoding', at);
  if (te.length > 0) {
    const codings = listElements(te).map((c) => c.toLowerCase());
    if (codings.length === 0) throw new ParseError('empty Transfer-Encoding', at);
    for (const c of codings) {
      // transfer-coding = token *( OWS ";" OWS transfer-parameter ): names must be tokens.
      const name = c.split(';')[0]?.trim() ?? '';
      if (name === '' || ![...name].every((ch) => isTchar(ch.charCodeAt(0)))) throw new ParseError('invalid transfer coding', at);
    }
    if (codings.filter((c) => c === 'chunked').length > 1) throw new ParseError('chunked applied twice', at);
    if (codings[codings.length - 1] !== 'chunked') {
      if (isRequest) throw new ParseError('chunked is not the final transfer coding', at);
      return { framing: 'close', length: 0 };
    }
    return { framing: 'chunked', length: 0 };
  }
  if (cl.length > 1) throw new ParseError('more than one Content-Length', at);
  if (cl.length === 1) {
    const v = cl[0] as string;
    if (!/^[0-9]+$/.test(v)) throw new ParseError('invalid Content-Length', at);
    const n = Number(v);
    if (!Number.isSafeInteger(n)) throw new ParseError('Content-Length too large', at);
    return n === 0 ? { framing: 'none', length: 0 } : { framing: 'length', length: n };
  }
  return isRequest ? { framing: 'none', length: 0 } : { framing: 'close', length: 0 };
}

/** chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ( token / quoted-string ) ] ). */
function checkChunkExt(ext: string, at: number): void {
  let i = 0;
  const ws = (): void => {
    while (i < ext.length && (ext[i] === ' ' || ext[i] === '\t')) i++;
  };
  const token = (): void => {
    const s = i;
    while (i < ext.length && isTchar(ext.charCodeAt(i))) i++;
    if (i === s) throw new ParseError('invalid chunk extension', at);
  };
  for (;;) {
    ws();
    if (i === ext.length) return;
    if (ext[i] !== ';') throw new ParseError('invalid chunk extension', at);
    i++;
    ws();
    token();
    const save = i;
    ws();
    if (ext[i] === '=') {
      i++;
      ws();
      if (ext[i] === '"') {
        i++;
        for (;;) {
          if (i >= ext.length) throw new ParseError('unterminated quoted chunk extension', at);
          const c = ext.charCodeAt(i);
          if (c === 0x22) {
            i++;
            break;
          }
          if (c === 0x5c) {
            const n = ext.charCodeAt(i + 1);
            if (!(n === HTAB || n === SP || isFieldVchar(n))) throw new ParseError('invalid quoted-pair in a chunk extension', at);
            i += 2;
            continue;
          }
          if (!(c === HTAB || c === SP || c === 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) || c >= 0x80)) {
            throw new ParseError('invalid character in a chunk extension', at);
          }
          i++;
        }
      } else token();
    } else i = save;
  }
}

/** A chunked body from pos (RFC 9112 7.1). Returns [data, trailers, end]. */
function readChunked(buf: Buffer, pos: number): [Buffer, Field[], number] {
  const parts: Buffer[] = [];
  for (;;) {
    const lineStart = pos;
    const [line, next] = readLine(buf, pos);
    let i = 0;
    let size = 0;
    while (i < line.length && hexValue(line.charCodeAt(i)) >= 0) {
      size = size * 16 + hexValue(line.charCodeAt(i));
      if (!Number.isSafeInteger(size)) throw new ParseError('chunk size too large', lineStart);
      i++;
    }
    if (i === 0) throw new ParseError('invalid chunk size', lineStart);
    // Whatever follows the hex digits must be chunk extensions (with optional BWS before ';').
    if (i < line.length) {
      const rest = line.slice(i);
      if (!/^[ \t]*;/.test(rest)) throw new ParseError('invalid chunk size', lineStart + i);
      checkChunkExt(rest, lineStart + i);
    }
    for (let k = 0; k < line.length; k++) {
      const c = line.charCodeAt(k);
      if ((c < 0x20 && c !== HTAB) || c === 0x7f) throw new ParseError('control character in a chunk line', lineStart + k);
    }
    pos = next;
    if (size === 0) {
      const [trailers, end] = readFields(buf, pos);
      return [Buffer.concat(parts), trailers, end];
    }
    if (buf.length < pos + size + 2) throw INCOMPLETE;
    parts.push(buf.subarray(pos, pos + size));
    pos += size;
    if (buf[pos] !== CR || buf[pos + 1] !== LF) throw new ParseError('CRLF expected after chunk data', pos);
    pos += 2;
  }
}

function readBody(buf: Buffer, pos: number, rule: BodyRule, eof: boolean): [Buffer, Field[], number] {
  switch (rule.framing) {
    case 'none':
      return [Buffer.alloc(0), [], pos];
    case 'length':
      if (buf.length < pos + rule.length) throw INCOMPLETE;
      return [buf.subarray(pos, pos + rule.length), [], pos + rule.length];
    case 'chunked':
      return readChunked(buf, pos);
    case 'close':
      if (!eof) throw INCOMPLETE;
      return [buf.subarray(pos), [], buf.length];
  }
}

function checkVersion(v: string, at: number): void {
  if (!/^HTTP\/[0-9]\.[0-9]$/.test(v)) throw new ParseError('invalid HTTP version', at);
}

function hasToken(fields: readonly Field[], name: string, token: string): boolean {
  return listElements(values(fields, name)).some((t) => t.toLowerCase() === token);
}

function run<T>(f: () => T): Step<T> {
  try {
    return { kind: 'message', message: f() };
  } catch (err) {
    if (err === INCOMPLETE) return { kind: 'incomplete' };
    if (err instanceof ParseError) return { kind: 'error', reason: err.reason, at: err.at };
    throw err;
  }
}

/** One request starting at offset `start` of buf. */
export function parseRequest(buf: Buffer, start = 0): Step<ParsedRequest> {
  return run(() => {
    // RFC 9112 2.2: empty lines (CRLF) before a request-line are ignored.
    while (buf[start] === CR && buf[start + 1] === LF) start += 2;
    if (start >= buf.length || (buf[start] === CR && start + 1 >= buf.length)) throw INCOMPLETE;
    const [line, afterLine] = readLine(buf, start);
    const sp1 = line.indexOf(' ');
    const sp2 = sp1 === -1 ? -1 : line.indexOf(' ', sp1 + 1);
    if (sp1 === -1 || sp2 === -1 || line.indexOf(' ', sp2 + 1) !== -1) throw new ParseError('malformed request line', start);
    const method = line.slice(0, sp1);
    const target = line.slice(sp1 + 1, sp2);
    const version = line.slice(sp2 + 1);
    if (method === '' || ![...method].every((c) => isTchar(c.charCodeAt(0)))) throw new ParseError('invalid method', start);
    if (target === '' || ![...target].every((c) => isUriChar(c.charCodeAt(0)))) throw new ParseError('invalid request target', start + sp1 + 1);
    checkVersion(version, start + sp2 + 1);
    const [headers, afterHead] = readFields(buf, afterLine);
    const rule = framingOf(headers, start, true);
    const [body, trailers, end] = readBody(buf, afterHead, rule, false);
    const upgrade = method === 'CONNECT' || (values(headers, 'upgrade').length > 0 && hasToken(headers, 'connection', 'upgrade'));
    return { method, target, version, headers, framing: rule.framing, body, trailers, upgrade, start, end };
  });
}

/** Every request in buf, in order, up to the first error, an incomplete one or an upgrade. */
export function parseRequests(buf: Buffer): StreamParse<ParsedRequest> {
  const messages: ParsedRequest[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const step = parseRequest(buf, pos);
    if (step.kind === 'error') return { messages, error: { reason: step.reason, at: step.at }, incomplete: false, consumed: pos };
    if (step.kind === 'incomplete') return { messages, error: null, incomplete: true, consumed: pos };
    messages.push(step.message);
    pos = step.message.end;
    if (step.message.upgrade) return { messages, error: null, incomplete: pos < buf.length, consumed: pos };
  }
  return { messages, error: null, incomplete: false, consumed: pos };
}

/**
 * One response starting at `start`, to a request of `method`. eof: the connection has ended, so a
 * close-delimited body is complete.
 */
export function parseResponse(buf: Buffer, method: string, start = 0, eof = false): Step<ParsedResponse> {
  return run(() => {
    const [line, afterLine] = readLine(buf, start);
    const m = /^(HTTP\/[0-9]\.[0-9]) ([0-9]{3}) (.*)$/s.exec(line);
    if (!m) throw new ParseError('malformed status line', start);
    const version = m[1] as string;
    const status = Number(m[2]);
    const reason = m[3] as string;
    if (status < 100 || status > 599) throw new ParseError('status code out of range', start);
    for (let i = 0; i < reason.length; i++) {
      const c = reason.charCodeAt(i);
      if (!isFieldVchar(c) && c !== SP && c !== HTAB) throw new ParseError('invalid character in the reason phrase', start);
    }
    const [headers, afterHead] = readFields(buf, afterLine);
    const bodiless = method === 'HEAD' || status < 200 || status === 204 || status === 304 || (method === 'CONNECT' && status < 300);
    const rule = bodiless ? { framing: 'none' as const, length: 0 } : framingOf(headers, start, false);
    const [body, trailers, end] = readBody(buf, afterHead, rule, eof);
    return { version, status, reason, headers, framing: rule.framing, body, trailers, start, end };
  });
}

/**
 * Every response in buf, answering `methods` in order (1xx interim answers take no method; a 101
 * ends the stream: what follows is not HTTP).
 */
export function parseResponses(buf: Buffer, methods: readonly string[], eof = false): StreamParse<ParsedResponse> {
  const messages: ParsedResponse[] = [];
  let pos = 0;
  let k = 0;
  while (pos < buf.length) {
    const step = parseResponse(buf, methods[k] ?? 'GET', pos, eof);
    if (step.kind === 'error') return { messages, error: { reason: step.reason, at: step.at }, incomplete: false, consumed: pos };
    if (step.kind === 'incomplete') return { messages, error: null, incomplete: true, consumed: pos };
    messages.push(step.message);
    pos = step.message.end;
    if (step.message.status === 101) return { messages, error: null, incomplete: false, consumed: pos };
    if (step.message.status >= 200) k++;
  }
  return { messages, error: null, incomplete: false, consumed: pos };
}

/** Values of a header (case-insensitive name) in a parsed message. */
export function fieldValues(m: { readonly headers: readonly Field[] }, name: string): string[] {
  return values(m.headers, name.toLowerCase());
}
