// The rules an HTTP/2 request must pass before anything routes it, and the HTTP/1.1 form every
// later step reads (room keys, health answers, the control plane, forwarding). nghttp2 has already
// refused what RFC 9113 8.2-8.3 calls malformed (connection-specific fields, TE other than
// "trailers", upper-case names, missing or repeated pseudo-headers, a body longer or shorter than
// its Content-Length); these are the rules left to the server, and the mapping to HTTP/1.1:
// :authority becomes the one Host, cookie crumbs are joined into one Cookie line (RFC 9113 8.2.3;
// Node joins them the same way in `headers.cookie`, which the room key reads), and
// a body without Content-Length is marked chunked so the backend connection frames it.
import type { Http2ServerRequest } from 'node:http2';
import { clientRefusal, type ClientRefusalCode } from './refusals.js';
import { canonicalize, type HeadLimits, type HeadVerdict, type HeadRefusal } from './request-head.js';
import { isFieldText, isHostValue } from './syntax.js';

export interface H2HeadLimits extends HeadLimits {
  /** Bytes of header names and values (as an HTTP/1.1 head would carry them); more get 431. */
  readonly maxHeaderBytes: number;
}

const OK: HeadVerdict = { ok: true, asterisk: false };
const OK_ASTERISK: HeadVerdict = { ok: true, asterisk: true };

function refuse(code: ClientRefusalCode, limit?: number): HeadVerdict {
  return { ok: false, refusal: clientRefusal(code, limit) as HeadRefusal };
}

/**
 * Checks an h2 request and rewrites its view in place to the HTTP/1.1 form: `rawHeaders` without
 * pseudo-headers, Host first, one Cookie; `headers.host` set. CONNECT is the caller's (it never
 * reaches here as a page request).
 */
export function checkH2RequestHead(req: Http2ServerRequest, limits: H2HeadLimits): HeadVerdict {
  const raw = req.rawHeaders;
  const headers = req.headers;
  const scheme = headers[':scheme'];
  if (scheme !== 'https' && scheme !== 'http') return refuse('h2-scheme');
  const out: string[] = [];
  let lines = 0;
  let bytes = 0;
  let host: string | undefined;
  let hosts = 0;
  let cookie: string | null = null;
  let cookieAt = -1;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    // ": " and CRLF, as the same field costs on an HTTP/1.1 head: one limit for both protocols.
    bytes += name.length + value.length + 4;
    if (name.charCodeAt(0) === 0x3a /* ':' */) continue;
    lines++;
    // nghttp2 refuses NUL, CR and LF; the other control bytes would make the HTTP/1.1 request
    // to the backend invalid (Node's client throws on them): refused here, answered with 400.
    if (!isFieldText(value)) return refuse('control-character');
    // h2 names are lower-case (nghttp2 refuses others), so no case folding is needed.
    if (name === 'host') {
      hosts++;
      host = value;
    } else if (name === 'cookie') {
      if (cookie === null) {
        cookie = value;
        cookieAt = out.length;
        out.push('Cookie', '');
      } else cookie += `; ${value}`;
    } else out.push(name, value);
  }
  // The Host line the backend gets from :authority counts as HTTP/1.1's Host line does: the same
  // fields are over listen.maxHeaders on both protocols.
  if (host === undefined && typeof headers[':authority'] === 'string') lines++;
  if (lines > limits.maxHeaders) return refuse('too-many-header-lines', limits.maxHeaders);
  if (bytes > limits.maxHeaderBytes) return refuse('headers-too-large');
  if (hosts > 1) return refuse('host-twice');
  const authority = headers[':authority'];
  // RFC 9113 8.3.1: a Host beside :authority must not differ from it.
  if (typeof authority === 'string' && host !== undefined && authority.toLowerCase() !== host.toLowerCase()) {
    return refuse('host-not-authority');
  }
  const target = typeof authority === 'string' ? authority : host;
  if (target === undefined) return refuse('host-missing');
  if (!isHostValue(target)) return refuse('host-invalid');
  if (cookieAt !== -1) out[cookieAt + 1] = cookie as string;
  out.unshift('Host', target);
  headers.host = target;
  // A body with no Content-Length (allowed on h2, where frames end it) is sent on chunked.
  if (!req.stream.endAfterHeaders && headers['content-length'] === undefined) headers['transfer-encoding'] = 'chunked';
  // rawHeaders is a getter on the h2 request: the HTTP/1.1 list is set on the instance instead.
  Object.defineProperty(req, 'rawHeaders', { value: out, configurable: true, enumerable: true });
  const path = req.url;
  if (path === '*') return req.method === 'OPTIONS' ? OK_ASTERISK : refuse('asterisk-not-options');
  if (path.charCodeAt(0) !== 0x2f) return refuse('target-not-path');
  // What an HTTP/1.1 request line may carry (visible ASCII): the backend gets this path as it is.
  for (let i = 1; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f) return refuse('target-character');
  }
  return canonicalize(req, limits.target);
}
