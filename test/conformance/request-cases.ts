// The request corpus: raw byte streams for every class of RFC 9112 framing and the request
// smuggling families, each with the outcome roomgate is meant to give (docs/proxying.md and
// docs/security.md). Shared by requests.test.ts, the fuzzer (as seeds) and bench/conformance (side by side
// with nginx, HAProxy and a reference proxy on http-proxy-3).
import type { Framing } from './strict-parser.js';
import { HANDSHAKE } from './raw.js';

export interface ExpectedRequest {
  readonly method: string;
  readonly target: string;
  /** The one Host value the backend must see (default "a.example"). */
  readonly host?: string;
  /** Default: "none" without body, else "length". */
  readonly framing?: Framing;
  /** latin1 text. */
  readonly body?: string;
  /** Header lines that must arrive byte-exact (latin1 name and value). */
  readonly headers?: readonly (readonly [string, string])[];
  /** Header names (case-insensitive) that must not arrive. */
  readonly absent?: readonly string[];
}

export interface Expectation {
  /** Status codes of every response head the client reads, in order (interim ones included). */
  readonly statuses: readonly number[];
  /** The gateway closes the client connection after them (default: true when a status >= 400 is last). */
  readonly closed?: boolean;
  /** Exactly what the backend parses (order across backend connections is free). */
  readonly forwarded: readonly ExpectedRequest[];
  /** The body of the last response (latin1), when it matters. */
  readonly lastBody?: string;
  /** A header the last response must carry. */
  readonly responseHeader?: RegExp;
  /**
   * The error is found mid-body, after Node dispatched the head: the backend may have received
   * part of that request, but never a complete one (checked: no extra parsed request).
   */
  readonly midBody?: boolean;
  /** After a 101: bytes the client must read back (the backend echoes the tunnel). */
  readonly tunnelEcho?: string;
}

export interface RequestCase {
  /** Unique, short: names the test and the fuzzer's seed. */
  readonly name: string;
  /** The class: a row of the side-by-side table. */
  readonly cls: string;
  /** The bytes, in writes (split where the case needs it). */
  readonly parts: readonly string[];
  /** Which gateway config the case needs (see GATEWAY_CONFIGS); default "base". */
  readonly gateway?: keyof typeof GATEWAY_CONFIGS;
  readonly expect: Expectation;
  /**
   * Where Node's parser departs from the RFC without harm: "lenient" (accepts bytes the RFC and
   * the referee refuse, the one request still forwarded re-framed: no smuggling) or "stricter"
   * (refuses valid bytes). Accepted as an outcome and listed in the report, not a failure.
   */
  readonly nodeVariant?: Expectation & { readonly kind: 'lenient' | 'stricter'; readonly note: string };
}

export const GATEWAY_CONFIGS = {
  base: { health: { path: null }, proxy: { websocketPaths: ['/ws/live/'] }, listen: { headersTimeoutMs: 3_000, requestTimeoutMs: 5_000 } },
} as const;

const H = 'Host: a.example\r\n';
const get = (target: string, extra = '', version = 'HTTP/1.1'): string => `GET ${target} ${version}\r\n${H}${extra}\r\n`;
const post = (extra: string, body: string, target = '/p'): string => `POST ${target} HTTP/1.1\r\n${H}${extra}\r\n${body}`;
const chunked = (extra: string, body: string, target = '/c'): string => post(`Transfer-Encoding: chunked\r\n${extra}`, body, target);
const SMUGGLED = `GET /smuggled HTTP/1.1\r\n${H}\r\n`;
const fwd = (method: string, target: string, more: Omit<ExpectedRequest, 'method' | 'target'> = {}): ExpectedRequest => ({ method, target, ...more });
const refused = (status = 400): Expectation => ({ statuses: [status], forwarded: [] });
const refusedMidBody: Expectation = { statuses: [400], forwarded: [], midBody: true };
const ok1 = (r: ExpectedRequest): Expectation => ({ statuses: [200], forwarded: [r], closed: false });
const FRAME = '\x81\x85\x01\x02\x03\x04\x69\x67\x6f\x68\x6e'; // masked text frame "hello"

export const REQUEST_CASES: readonly RequestCase[] = [
  // --- valid framing --------------------------------------------------------------------------
  { name: 'get', cls: 'valid', parts: [get('/a')], expect: ok1(fwd('GET', '/a')) },
  { name: 'post-length', cls: 'valid', parts: [post('Content-Length: 5\r\n', 'hello')], expect: ok1(fwd('POST', '/p', { body: 'hello' })) },
  { name: 'post-chunked', cls: 'valid', parts: [chunked('', '5\r\nhello\r\n0\r\n\r\n')], expect: ok1(fwd('POST', '/c', { body: 'hello', framing: 'chunked' })) },
  { name: 'chunk-ext-token', cls: 'valid', parts: [chunked('', '5;name=value;flag\r\nhello\r\n0\r\n\r\n')], expect: ok1(fwd('POST', '/c', { body: 'hello', framing: 'chunked' })) },
  { name: 'chunk-ext-quoted', cls: 'valid', parts: [chunked('', '5;q="a b"\r\nhello\r\n0\r\n\r\n')], expect: ok1(fwd('POST', '/c', { body: 'hello', framing: 'chunked' })) },
  {
    name: 'chunk-ext-bws',
    cls: 'valid',
    parts: [chunked('', '5 ;x\r\nhello\r\n0\r\n\r\n')],
    expect: ok1(fwd('POST', '/c', { body: 'hello', framing: 'chunked' })),
    nodeVariant: { kind: 'stricter', note: 'BWS before ";" in a chunk extension (RFC 9112 7.1.1 allows it) gets 400', ...refusedMidBody },
  },
  { name: 'chunk-trailers', cls: 'valid', parts: [chunked('', '5\r\nhello\r\n0\r\nTrailer-One: 1\r\n\r\n')], expect: ok1(fwd('POST', '/c', { body: 'hello', framing: 'chunked' })) },
  { name: 'delete-length', cls: 'valid', parts: [`DELETE /d HTTP/1.1\r\n${H}Content-Length: 3\r\n\r\nabc`], expect: ok1(fwd('DELETE', '/d', { body: 'abc' })) },
  { name: 'delete-chunked', cls: 'valid', parts: [`DELETE /d HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n${SMUGGLED}`], expect: { statuses: [200, 200], closed: false, forwarded: [fwd('DELETE', '/d', { body: 'abc', framing: 'chunked' }), fwd('GET', '/smuggled')] } },
  { name: 'get-with-body', cls: 'valid', parts: [`GET /g HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\nhi`], expect: ok1(fwd('GET', '/g', { body: 'hi' })) },
  { name: 'cl-leading-zeros', cls: 'valid', parts: [post('Content-Length: 005\r\n', 'hello')], expect: ok1(fwd('POST', '/p', { body: 'hello' })) },
  { name: 'te-upper-case', cls: 'valid', parts: [post('TRANSFER-ENCODING: CHUNKED\r\n', '2\r\nhi\r\n0\r\n\r\n')], expect: ok1(fwd('POST', '/p', { body: 'hi', framing: 'chunked' })) },
  { name: 'te-tab-ows', cls: 'valid', parts: [post('Transfer-Encoding:\tchunked\r\n', '2\r\nhi\r\n0\r\n\r\n')], expect: ok1(fwd('POST', '/p', { body: 'hi', framing: 'chunked' })) },
  { name: 'chunk-size-leading-zeros', cls: 'valid', parts: [chunked('', '0002\r\nhi\r\n0\r\n\r\n')], expect: ok1(fwd('POST', '/c', { body: 'hi', framing: 'chunked' })) },

  // --- CL.TE / TE.CL ----------------------------------------------------------------------------
  { name: 'cl-te', cls: 'CL.TE', parts: [post('Content-Length: 6\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\nG')], expect: refused() },
  { name: 'te-cl', cls: 'TE.CL', parts: [post('Transfer-Encoding: chunked\r\nContent-Length: 4\r\n', `5c\r\n${SMUGGLED}\r\n0\r\n\r\n`)], expect: refused() },
  { name: 'cl-te-smuggle', cls: 'CL.TE', parts: [post(`Content-Length: ${5 + SMUGGLED.length}\r\nTransfer-Encoding: chunked\r\n`, `0\r\n\r\n${SMUGGLED}`)], expect: refused() },

  // --- TE.TE obfuscations -----------------------------------------------------------------------
  { name: 'te-space-before-colon', cls: 'TE.TE', parts: [post('Transfer-Encoding : chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-xchunked', cls: 'TE.TE', parts: [post('Transfer-Encoding: xchunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-xchunked-smuggle', cls: 'TE.TE', parts: [post('Transfer-Encoding: xchunked\r\n', SMUGGLED)], expect: refused() },
  { name: 'te-identity-smuggle', cls: 'TE.TE', parts: [post('Transfer-Encoding: identity\r\n', SMUGGLED)], expect: refused() },
  { name: 'te-chunked-identity', cls: 'TE.TE', parts: [post('Transfer-Encoding: chunked, identity\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-identity-chunked', cls: 'TE.TE', parts: [post('Transfer-Encoding: identity, chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-gzip-chunked', cls: 'TE.TE', parts: [post('Transfer-Encoding: gzip, chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-vt', cls: 'TE.TE', parts: [post('Transfer-Encoding:\x0bchunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-ff', cls: 'TE.TE', parts: [post('Transfer-Encoding: chunked\x0c\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-tab-in-name', cls: 'TE.TE', parts: [post('Transfer-Encoding\t: chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-twice', cls: 'TE.TE', parts: [post('Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-identity-then-chunked', cls: 'TE.TE', parts: [post('Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-chunked-then-identity', cls: 'TE.TE', parts: [post('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-quoted', cls: 'TE.TE', parts: [post('Transfer-Encoding: "chunked"\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-obs-fold', cls: 'TE.TE', parts: [post('Transfer-Encoding:\r\n chunked\r\n', '0\r\n\r\n')], expect: refused() },
  { name: 'te-chunked-comma', cls: 'TE.TE', parts: [post('Transfer-Encoding: chunked,\r\n', '0\r\n\r\n')], expect: refused() },

  // --- Content-Length ---------------------------------------------------------------------------
  { name: 'cl-twice-same', cls: 'CL.CL', parts: [post('Content-Length: 5\r\nContent-Length: 5\r\n', 'hello')], expect: refused() },
  { name: 'cl-twice-different', cls: 'CL.CL', parts: [post('Content-Length: 5\r\nContent-Length: 6\r\n', 'hello!')], expect: refused() },
  { name: 'cl-listed', cls: 'CL.CL', parts: [post('Content-Length: 1, 1\r\n', 'x')], expect: refused() },
  { name: 'cl-plus', cls: 'CL syntax', parts: [post('Content-Length: +1\r\n', 'x')], expect: refused() },
  { name: 'cl-negative', cls: 'CL syntax', parts: [post('Content-Length: -1\r\n', 'x')], expect: refused() },
  { name: 'cl-hex', cls: 'CL syntax', parts: [post('Content-Length: 0x5\r\n', 'hello')], expect: refused() },
  { name: 'cl-inner-space', cls: 'CL syntax', parts: [post('Content-Length: 1 1\r\n', 'x')], expect: refused() },
  { name: 'cl-empty', cls: 'CL syntax', parts: [post('Content-Length:\r\n', '')], expect: refused() },
  { name: 'cl-huge', cls: 'CL syntax', parts: [post('Content-Length: 99999999999999999999\r\n', 'x')], expect: refused() },

  // --- Connection naming framing, Host and forwarding headers ----------------------------------
  {
    name: 'connection-content-length',
    cls: 'Connection: framing',
    parts: [post(`Connection: Content-Length\r\nContent-Length: ${SMUGGLED.length}\r\n`, SMUGGLED)],
    expect: ok1(fwd('POST', '/p', { body: SMUGGLED })),
  },
  {
    name: 'connection-transfer-encoding',
    cls: 'Connection: framing',
    parts: [chunked('Connection: Transfer-Encoding\r\n', `${SMUGGLED.length.toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`)],
    expect: ok1(fwd('POST', '/c', { body: SMUGGLED, framing: 'chunked' })),
  },
  {
    name: 'connection-close-content-length',
    cls: 'Connection: framing',
    parts: [post(`Connection: close, content-length\r\nContent-Length: ${SMUGGLED.length}\r\n`, SMUGGLED)],
    expect: { statuses: [200], closed: true, forwarded: [fwd('POST', '/p', { body: SMUGGLED })] },
  },
  { name: 'connection-host', cls: 'Connection: Host/XFF', parts: [get('/h', 'Connection: Host\r\n')], expect: ok1(fwd('GET', '/h')) },
  {
    name: 'connection-xff',
    cls: 'Connection: Host/XFF',
    parts: [get('/x', 'Connection: X-Forwarded-For, X-Forwarded-Host\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\n')],
    expect: ok1(fwd('GET', '/x', { headers: [['X-Forwarded-Host', 'a.example']] })),
  },
  { name: 'connection-keep-alive-te', cls: 'Connection: framing', parts: [post('Connection: keep-alive, Transfer-Encoding\r\nContent-Length: 2\r\n', 'hi')], expect: ok1(fwd('POST', '/p', { body: 'hi' })) },

  // --- chunk syntax ---------------------------------------------------------------------------
  { name: 'chunk-ext-ctl', cls: 'chunk syntax', parts: [chunked('', '2;a\x01b\r\nhi\r\n0\r\n\r\n')], expect: refusedMidBody },
  {
    name: 'chunk-ext-bare-equals',
    cls: 'chunk syntax',
    parts: [chunked('', '2;=\r\nhi\r\n0\r\n\r\n')],
    expect: refusedMidBody,
    nodeVariant: { kind: 'lenient', note: 'a chunk extension without a name ("2;=") is accepted', ...ok1(fwd('POST', '/c', { body: 'hi', framing: 'chunked' })) },
  },
  { name: 'chunk-size-overflow', cls: 'chunk syntax', parts: [chunked('', `fffffffffffffffff1\r\nhi\r\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-size-negative', cls: 'chunk syntax', parts: [chunked('', `-2\r\nhi\r\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-size-0x', cls: 'chunk syntax', parts: [chunked('', `0x2\r\nhi\r\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-size-space-after', cls: 'chunk syntax', parts: [chunked('', `2 \r\nhi\r\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-size-space-before', cls: 'chunk syntax', parts: [chunked('', ` 2\r\nhi\r\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-missing-crlf', cls: 'chunk syntax', parts: [chunked('', `2\r\nhiX0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-data-lf-only', cls: 'chunk syntax', parts: [chunked('', `2\r\nhi\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-size-lf-only', cls: 'chunk syntax', parts: [chunked('', `2\nhi\r\n0\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-last-lf-only', cls: 'chunk syntax', parts: [chunked('', `2\r\nhi\r\n0\n\n${SMUGGLED}`)], expect: refusedMidBody },
  { name: 'chunk-trailer-obs-fold', cls: 'chunk syntax', parts: [chunked('', `2\r\nhi\r\n0\r\nT: a\r\n b\r\n\r\n${SMUGGLED}`)], expect: refusedMidBody },

  // --- line endings, folding, whitespace ------------------------------------------------------
  { name: 'bare-lf-request-line', cls: 'bare CR/LF', parts: [`GET /a HTTP/1.1\n${H}\r\n`], expect: refused() },
  { name: 'bare-lf-header', cls: 'bare CR/LF', parts: [`GET /a HTTP/1.1\r\nHost: a.example\nX: y\r\n\r\n`], expect: refused() },
  { name: 'bare-lf-end', cls: 'bare CR/LF', parts: [`GET /a HTTP/1.1\r\nHost: a.example\n\n`], expect: refused() },
  { name: 'bare-cr-value', cls: 'bare CR/LF', parts: [get('/a', 'X: a\rb\r\n')], expect: refused() },
  { name: 'bare-cr-request-line', cls: 'bare CR/LF', parts: [`GET /a\rHTTP/1.1\r\n${H}\r\n`], expect: refused() },
  // Found by the fuzzer (seed 2030), forwarded as one re-framed request: leniencies, no smuggling.
  {
    name: 'bare-lf-before-request-line',
    cls: 'bare CR/LF',
    parts: [`\nGET /a HTTP/1.1\r\n${H}\r\n`],
    expect: refused(),
    nodeVariant: { kind: 'lenient', note: 'a bare LF before the request line is skipped as an empty line (RFC 9112 2.2 allows CRLF there)', ...ok1(fwd('GET', '/a')) },
  },
  {
    name: 'double-space-request-line',
    cls: 'whitespace in the request line',
    parts: [`GET  /a HTTP/1.1\r\n${H}\r\n`],
    expect: refused(),
    nodeVariant: { kind: 'lenient', note: 'two spaces between method and target are accepted', ...ok1(fwd('GET', '/a')) },
  },
  { name: 'obs-fold', cls: 'obs-fold', parts: [get('/a', 'X: a\r\n b\r\n')], expect: refused() },
  { name: 'obs-fold-tab', cls: 'obs-fold', parts: [get('/a', 'X: a\r\n\tb\r\n')], expect: refused() },
  { name: 'space-before-colon', cls: 'whitespace before colon', parts: [`GET /a HTTP/1.1\r\nHost : a.example\r\n\r\n`], expect: refused() },
  { name: 'leading-space-header', cls: 'whitespace before colon', parts: [`GET /a HTTP/1.1\r\n${H} X: y\r\n\r\n`], expect: refused() },

  // --- control bytes ----------------------------------------------------------------------------
  { name: 'nul-method', cls: 'NUL/CTL/DEL', parts: [`G\x00ET /a HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'ctl-method', cls: 'NUL/CTL/DEL', parts: [`GE\x01T /a HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'del-method', cls: 'NUL/CTL/DEL', parts: [`GE\x7fT /a HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'nul-target', cls: 'NUL/CTL/DEL', parts: [`GET /a\x00b HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'del-target', cls: 'NUL/CTL/DEL', parts: [`GET /a\x7fb HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'tab-target', cls: 'NUL/CTL/DEL', parts: [`GET /a\tb HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'nul-version', cls: 'NUL/CTL/DEL', parts: [`GET /a HTTP/1.\x001\r\n${H}\r\n`], expect: refused() },
  { name: 'ctl-header-name', cls: 'NUL/CTL/DEL', parts: [get('/a', 'X\x01Y: a\r\n')], expect: refused() },
  { name: 'del-header-name', cls: 'NUL/CTL/DEL', parts: [get('/a', 'X\x7fY: a\r\n')], expect: refused() },
  { name: 'nul-header-value', cls: 'NUL/CTL/DEL', parts: [get('/a', 'X: a\x00b\r\n')], expect: refused() },
  { name: 'ctl-header-value', cls: 'NUL/CTL/DEL', parts: [get('/a', 'X: a\x01b\r\n')], expect: refused() },
  { name: 'del-header-value', cls: 'NUL/CTL/DEL', parts: [get('/a', 'X: a\x7fb\r\n')], expect: refused() },
  { name: 'non-token-header-name', cls: 'NUL/CTL/DEL', parts: [get('/a', 'X(Y): a\r\n')], expect: refused() },
  { name: 'invalid-method-char', cls: 'invalid method/version', parts: [`G(T /a HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'obs-text-target', cls: 'NUL/CTL/DEL', parts: [`GET /caf\xe9 HTTP/1.1\r\n${H}\r\n`], expect: refused() },

  // --- obs-text in values -----------------------------------------------------------------------
  { name: 'obs-text-value', cls: 'obs-text', parts: [get('/o', 'X-Player: caf\xe9 \xff\x80\r\n')], expect: ok1(fwd('GET', '/o', { headers: [['X-Player', 'caf\xe9 \xff\x80']] })) },
  {
    name: 'obs-text-handshake',
    cls: 'obs-text',
    parts: [HANDSHAKE('/ws/live/', 'X-Player: caf\xe9\r\n').replace('game.example', 'a.example')],
    expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { headers: [['X-Player', 'caf\xe9']] })] },
  },

  // --- request targets ------------------------------------------------------------------------
  { name: 'absolute-form', cls: 'absolute-form', parts: [`GET http://x.example/a?b=1 HTTP/1.1\r\nHost: other.example\r\n\r\n`], expect: ok1(fwd('GET', '/a?b=1', { host: 'x.example' })) },
  // RFC 3986 3.1: a scheme is case-insensitive (a fuzzer case, seed 77077 case 15994: the referee had read "htTP://" as a path).
  { name: 'absolute-form-mixed-case-scheme-dot-segments', cls: 'absolute-form', parts: [`GET htTP://X.example/a/X.example/a/../b HTTP/1.1\r\nHost: a.example\r\n\r\n`], expect: ok1(fwd('GET', '/a/X.example/b', { host: 'X.example' })) },
  { name: 'absolute-form-no-path', cls: 'absolute-form', parts: [`GET http://x.example HTTP/1.1\r\nHost: x.example\r\n\r\n`], expect: ok1(fwd('GET', '/', { host: 'x.example' })) },
  // RFC 9112 3.2: an HTTP/1.1 request without Host gets 400, whatever its target's form.
  { name: 'absolute-form-no-host', cls: 'absolute-form', parts: [`GET http://x.example/a HTTP/1.1\r\n\r\n`], expect: refused() },
  { name: 'absolute-form-healthz', cls: 'absolute-form', parts: [`GET http://x.example/healthz HTTP/1.1\r\n${H}\r\n`], expect: { statuses: [200], closed: false, forwarded: [], lastBody: 'ok\n' } },
  { name: 'absolute-form-roomgate-api', cls: 'absolute-form', parts: [`GET http://x.example/_roomgate/api/openapi.json HTTP/1.1\r\n${H}\r\n`], expect: { statuses: [200], closed: false, forwarded: [] } },
  { name: 'absolute-form-ftp', cls: 'absolute-form', parts: [`GET ftp://x.example/a HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'absolute-form-userinfo', cls: 'absolute-form', parts: [`GET http://u@x.example/a HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'authority-form-get', cls: 'absolute-form', parts: [`GET x.example:80 HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  { name: 'connect', cls: 'CONNECT', parts: [`CONNECT x.example:443 HTTP/1.1\r\nHost: x.example:443\r\n\r\n`], expect: { statuses: [405], closed: true, forwarded: [], responseHeader: /^Allow: GET, HEAD/im } },
  { name: 'options-asterisk', cls: 'asterisk', parts: [`OPTIONS * HTTP/1.1\r\n${H}\r\n`], expect: { statuses: [200], closed: false, forwarded: [], responseHeader: /^Allow: GET, HEAD/im } },
  { name: 'get-asterisk', cls: 'asterisk', parts: [`GET * HTTP/1.1\r\n${H}\r\n`], expect: refused() },
  // One canonical target (src/http/target.ts): what the backend gets is what every rule judged.
  { name: 'target-unreserved-decoded', cls: 'canonical target', parts: [get('/%61ccount/%7e/caf%c3%a9')], expect: ok1(fwd('GET', '/account/~/caf%C3%A9')) },
  { name: 'target-dot-segments', cls: 'canonical target', parts: [get('/a/./b/../../c/%2e%2E/d?x=/../')], expect: ok1(fwd('GET', '/d?x=/../')) },
  { name: 'target-slashes-merged', cls: 'canonical target', parts: [get('//a///b/')], expect: ok1(fwd('GET', '/a/b/')) },
  { name: 'target-dot-segments-post', cls: 'canonical target', parts: [post('Content-Length: 3\r\n', 'abc', '/x/../p')], expect: ok1(fwd('POST', '/p', { body: 'abc' })) },
  { name: 'target-absolute-dot-segments', cls: 'canonical target', parts: [`GET http://x.example/a/../b HTTP/1.1\r\n${H}\r\n`], expect: ok1(fwd('GET', '/b', { host: 'x.example' })) },
  { name: 'target-encoded-slash', cls: 'canonical target', parts: [get('/a%2Fb')], expect: refused() },
  { name: 'target-encoded-slash-lower', cls: 'canonical target', parts: [get('/a%2fb')], expect: refused() },
  { name: 'target-encoded-backslash', cls: 'canonical target', parts: [get('/a%5cb')], expect: refused() },
  { name: 'target-encoded-nul', cls: 'canonical target', parts: [get('/a%00b')], expect: refused() },
  { name: 'target-bad-escape', cls: 'canonical target', parts: [get('/a%zz')], expect: refused() },
  { name: 'target-encoded-slash-post', cls: 'canonical target', parts: [post('Content-Length: 3\r\n', 'abc', '/a%2F..%2Fb')], expect: refused() },
  // One method rule for proxied requests (src/http/methods.ts).
  { name: 'method-trace', cls: 'method rule', parts: [`TRACE /t HTTP/1.1\r\n${H}\r\n`], expect: { statuses: [405], forwarded: [], closed: false, responseHeader: /^Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r?$/im } },
  // Its body is never read: the connection ends after the answer, so those bytes are never parsed as a request.
  { name: 'method-trace-body', cls: 'method rule', parts: [`TRACE /t HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello`], expect: { statuses: [405], forwarded: [], closed: true } },
  { name: 'method-trace-body-smuggle', cls: 'method rule', parts: [`TRACE /t HTTP/1.1\r\n${H}Content-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`], expect: { statuses: [405], forwarded: [], closed: true } },
  { name: 'method-webdav', cls: 'method rule', parts: [`PROPFIND /t HTTP/1.1\r\n${H}\r\n`], expect: { statuses: [405], forwarded: [], closed: false } },
  { name: 'method-unknown', cls: 'method rule', parts: [`FOO /t HTTP/1.1\r\n${H}\r\n`], expect: refused(501) },
  { name: 'method-lower-case', cls: 'method rule', parts: [`get /t HTTP/1.1\r\n${H}\r\n`], expect: refused(501) },
  { name: 'method-trace-then-get', cls: 'method rule', parts: [`TRACE /t HTTP/1.1\r\n${H}\r\n${get('/after')}`], expect: { statuses: [405, 200], forwarded: [fwd('GET', '/after')], closed: false } },
  // The backend's push receiver (push.path) is never reached from a client, in any spelling.
  { name: 'push-path-post', cls: 'reserved path', parts: [post('Content-Type: application/json\r\nContent-Length: 2\r\n', '{}', '/_roomgate/push?room=victim')], expect: refused(404) },
  { name: 'push-path-get', cls: 'reserved path', parts: [get('/_roomgate/push')], expect: refused(404) },
  { name: 'push-path-slash', cls: 'reserved path', parts: [get('/_roomgate/push/')], expect: refused(404) },
  { name: 'push-path-prefixed', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/r/victim/_roomgate/push')], expect: refused(404) },
  { name: 'push-path-encoded', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/%70ush')], expect: refused(404) },
  { name: 'push-path-dots', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/x/..//_roomgate/push')], expect: refused(404) },
  { name: 'push-path-case', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_ROOMGATE/PUSH')], expect: refused(404) },
  { name: 'push-path-absolute', cls: 'reserved path', parts: [`POST http://x.example/_roomgate/push HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\n{}`], expect: refused(404) },
  { name: 'push-path-fragment', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/push#x')], expect: refused() },
  { name: 'push-path-prefixed-fragment', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/r/room1/_roomgate/push#')], expect: refused() },
  { name: 'push-path-matrix', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/push;x')], expect: refused(404) },
  { name: 'push-path-trailing-dot', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/push.')], expect: refused(404) },
  { name: 'push-path-put', cls: 'reserved path', parts: [`PUT /_roomgate/push HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\n{}`], expect: refused(404) },
  // The room handoff's hooks (handoff.path, default /_roomgate/handoff): reserved like push.path.
  { name: 'handoff-export', cls: 'reserved path', parts: [post('Content-Type: application/json\r\nContent-Length: 2\r\n', '{}', '/_roomgate/handoff/export')], expect: refused(404) },
  { name: 'handoff-import-prefixed', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/r/victim/_roomgate/handoff/import')], expect: refused(404) },
  { name: 'handoff-release-encoded', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/%68andoff/release')], expect: refused(404) },
  { name: 'handoff-resume-dots', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/x/..//_roomgate/handoff/resume')], expect: refused(404) },
  { name: 'handoff-hello-case', cls: 'reserved path', parts: [get('/_ROOMGATE/HANDOFF/hello')], expect: refused(404) },
  { name: 'handoff-absolute', cls: 'reserved path', parts: [`POST http://x.example/_roomgate/handoff/export HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\n{}`], expect: refused(404) },
  { name: 'handoff-matrix', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/handoff;x/import')], expect: refused(404) },

  // --- Hardening 3, items 3 and 5 (branch escapes): escapes that are not canonical, and roomgate's
  // own paths behind the per-tab prefix (src/http/target.ts). -----------------------------------
  { name: 'target-encoded-lf', cls: 'canonical target', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/push%0A')], expect: refused() },
  { name: 'target-encoded-space', cls: 'canonical target', parts: [get('/_roomgate/push%20')], expect: refused() },
  { name: 'target-encoded-tab', cls: 'canonical target', parts: [get('/_roomgate/push%09')], expect: refused() },
  { name: 'target-encoded-cr-lower', cls: 'canonical target', parts: [get('/a%0db')], expect: refused() },
  { name: 'target-encoded-del', cls: 'canonical target', parts: [get('/a%7Fb')], expect: refused() },
  { name: 'target-encoded-unit-separator', cls: 'canonical target', parts: [get('/a%1Fb')], expect: refused() },
  { name: 'target-overlong-slash', cls: 'canonical target', parts: [get('/_roomgate/push%C0%AF')], expect: refused() },
  { name: 'target-overlong-three-bytes', cls: 'canonical target', parts: [get('/a%E0%80%AF')], expect: refused() },
  { name: 'target-utf8-surrogate', cls: 'canonical target', parts: [get('/a%ED%A0%80')], expect: refused() },
  { name: 'target-utf8-above-max', cls: 'canonical target', parts: [get('/a%F4%90%80%80')], expect: refused() },
  { name: 'target-utf8-lone-continuation', cls: 'canonical target', parts: [get('/a%80')], expect: refused() },
  { name: 'target-utf8-truncated', cls: 'canonical target', parts: [get('/a%E2%98/b')], expect: refused() },
  { name: 'target-latin1', cls: 'canonical target', parts: [get('/caf%E9')], expect: refused() },
  // node:http parses a pipelined chunk whole: the request behind a refused head must not be routed
  // (src/server/public-server.ts, conn.closing; without it the backend got GET /after), nor a
  // handshake behind one (its client socket is ended with the refusal before a backend is asked).
  { name: 'target-encoded-space-then-get', cls: 'canonical target', parts: [get('/a%20b') + get('/after')], expect: refused() },
  { name: 'target-encoded-space-then-handshake', cls: 'canonical target', parts: [get('/a%20b') + HANDSHAKE('/ws/live/')], expect: refused() },
  { name: 'target-utf8-kept', cls: 'canonical target', parts: [get('/%f0%9f%8e%b2/%E2%98%83')], expect: ok1(fwd('GET', '/%F0%9F%8E%B2/%E2%98%83')) },
  { name: 'target-semicolon-kept', cls: 'canonical target', parts: [get('/a%3bb')], expect: ok1(fwd('GET', '/a%3Bb')) },
  { name: 'target-double-encoded-kept', cls: 'canonical target', parts: [get('/files/a%252Fb')], expect: ok1(fwd('GET', '/files/a%252Fb')) },
  { name: 'push-path-encoded-semicolon', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/push%3B')], expect: refused(404) },
  { name: 'push-path-encoded-semicolon-case', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/Push%3b')], expect: refused(404) },
  { name: 'push-path-long-s', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate/pu%C5%BFh')], expect: refused(404) },
  { name: 'push-path-fullwidth', cls: 'reserved path', parts: [get('/_roomgate/%EF%BD%90ush')], expect: refused(404) },
  { name: 'push-path-double-encoded-slash', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate%252Fpush')], expect: refused(404) },
  { name: 'push-path-triple-encoded-slash', cls: 'reserved path', parts: [get('/_roomgate%25252Fpush')], expect: refused(404) },
  { name: 'push-path-double-encoded-dots', cls: 'reserved path', parts: [get('/x/%252E%252E/_roomgate/push')], expect: refused(404) },
  { name: 'push-path-tomcat-dots', cls: 'reserved path', parts: [get('/x/..;/_roomgate/push')], expect: refused(404) },
  { name: 'push-path-nbsp', cls: 'reserved path', parts: [get('/_roomgate/push%C2%A0')], expect: refused(404) },
  { name: 'handoff-double-encoded', cls: 'reserved path', parts: [post('Content-Length: 2\r\n', '{}', '/_roomgate%252Fhandoff/export')], expect: refused(404) },
  // --- the per-tab room pin (docs/per-tab-rooms.md): a bad one is refused, never routed (a page's refusal keeps the
  // connection, the request was whole; a handshake's closes it); a look-alike is the app's
  { name: 'pin-forged', cls: 'room pin', parts: [get(`/a?roomgate_pin=room.1.${'A'.repeat(43)}`)], expect: { statuses: [403], forwarded: [], closed: false } },
  { name: 'pin-bad-escape', cls: 'room pin', parts: [get('/a?roomgate_pin=%E0%A4%A')], expect: { statuses: [400], forwarded: [], closed: false } },
  { name: 'pin-empty', cls: 'room pin', parts: [get('/a?x=1&roomgate_pin=')], expect: { statuses: [400], forwarded: [], closed: false } },
  { name: 'pin-huge', cls: 'room pin', parts: [get(`/a?roomgate_pin=${'a.'.repeat(2_500)}`)], expect: { statuses: [400], forwarded: [], closed: false } },
  { name: 'pin-forged-handshake', cls: 'room pin', parts: [HANDSHAKE(`/ws/live/?roomgate_pin=room.1.${'A'.repeat(43)}`).replace('game.example', 'a.example')], expect: refused(403) },
  { name: 'pin-look-alike', cls: 'room pin', parts: [get('/a?xroomgate_pin=1&roomgate_pinx=2')], expect: ok1(fwd('GET', '/a?xroomgate_pin=1&roomgate_pinx=2')) },
  { name: 'prefixed-api', cls: 'reserved path', parts: [get('/r/victim/_roomgate/api/online')], expect: refused(404) },
  { name: 'prefixed-api-post', cls: 'reserved path', parts: [post('Content-Type: application/json\r\nContent-Length: 2\r\n', '{}', '/r/victim/_roomgate/api/rooms/victim/messages')], expect: refused(404) },
  { name: 'prefixed-roomgate-root', cls: 'reserved path', parts: [get('/r/victim/_roomgate')], expect: refused(404) },
  { name: 'prefixed-lobby-case', cls: 'reserved path', parts: [get('/r/victim/_ROOMGATE/lobby')], expect: refused(404) },
  { name: 'prefixed-healthz', cls: 'reserved path', parts: [get('/r/victim/healthz')], expect: refused(404) },
  { name: 'prefixed-healthz-query', cls: 'reserved path', parts: [get('/r/victim/healthz?probe=1')], expect: refused(404) },
  { name: 'prefixed-readyz-slash', cls: 'reserved path', parts: [get('/r/victim/readyz/')], expect: refused(404) },
  { name: 'prefixed-healthz-invalid-key', cls: 'reserved path', parts: [get('/r/not!a!key/healthz')], expect: refused(404) },
  { name: 'prefixed-api-double-encoded', cls: 'reserved path', parts: [get('/r/victim/_roomgate%252Fapi/online')], expect: refused(404) },
  { name: 'prefixed-healthzz-forwarded', cls: 'reserved path', parts: [get('/r/victim/healthzz')], expect: ok1(fwd('GET', '/healthzz', { headers: [['X-Forwarded-Prefix', '/r/victim']] })) },
  { name: 'ws-encoded-space', cls: 'canonical target', parts: [HANDSHAKE('/ws/live/%20')], expect: refused() },
  { name: 'ws-overlong-slash', cls: 'canonical target', parts: [HANDSHAKE('/ws/live/%C0%AF')], expect: refused() },
  // --- end of Hardening 3, items 3 and 5 -----------------------------------------------------------

  // --- versions and Host ----------------------------------------------------------------------
  { name: 'http10-host', cls: 'HTTP/1.0', parts: [get('/a', '', 'HTTP/1.0')], expect: { statuses: [200], closed: true, forwarded: [fwd('GET', '/a')] } },
  {
    name: 'http10-keep-alive',
    cls: 'HTTP/1.0',
    parts: [get('/a', 'Connection: keep-alive\r\n', 'HTTP/1.0') + get('/b', 'Connection: keep-alive\r\n', 'HTTP/1.0')],
    expect: { statuses: [200, 200], closed: false, forwarded: [fwd('GET', '/a'), fwd('GET', '/b')] },
  },
  { name: 'http10-no-host', cls: 'Host rules', parts: ['GET /a HTTP/1.0\r\n\r\n'], expect: refused() },
  { name: 'http11-no-host', cls: 'Host rules', parts: ['GET /a HTTP/1.1\r\n\r\n'], expect: refused() },
  { name: 'two-hosts', cls: 'Host rules', parts: [`GET /a HTTP/1.1\r\n${H}Host: b.example\r\n\r\n`], expect: refused() },
  { name: 'host-invalid', cls: 'Host rules', parts: ['GET /a HTTP/1.1\r\nHost: a.example/evil\r\n\r\n'], expect: refused() },
  { name: 'host-empty', cls: 'Host rules', parts: ['GET /a HTTP/1.1\r\nHost:\r\n\r\n'], expect: refused() },
  { name: 'http20-request-line', cls: 'invalid method/version', parts: [get('/a', '', 'HTTP/2.0')], expect: refused(505) },
  {
    name: 'http12-request-line',
    cls: 'invalid method/version',
    parts: [get('/a', '', 'HTTP/1.2')],
    expect: refused(505),
    // RFC 9110 6.2 would even have it read as HTTP/1.1; refusing it is the safe side either way.
    nodeVariant: { kind: 'stricter', note: 'llhttp refuses HTTP/1.2 itself (400) before roomgate\'s version check (505)', ...refused(400) },
  },
  // Read as HTTP/0.9: a version other than 1.0 and 1.1.
  { name: 'http09-request-line', cls: 'invalid method/version', parts: ['GET /a\r\n\r\n'], expect: refused(505) },
  { name: 'lower-case-version', cls: 'invalid method/version', parts: [get('/a', '', 'http/1.1')], expect: refused() },

  // --- pipelining, Expect -----------------------------------------------------------------------
  {
    name: 'pipeline-3',
    cls: 'pipelining',
    parts: [get('/1') + post('Content-Length: 2\r\n', 'hi', '/2') + get('/3')],
    expect: { statuses: [200, 200, 200], closed: false, forwarded: [fwd('GET', '/1'), fwd('POST', '/2', { body: 'hi' }), fwd('GET', '/3')] },
  },
  {
    name: 'pipeline-then-invalid',
    cls: 'pipelining',
    parts: [get('/1') + get('/2') + post('Content-Length: 1\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n')],
    expect: { statuses: [200, 200, 400], closed: true, forwarded: [fwd('GET', '/1'), fwd('GET', '/2')] },
  },
  { name: 'expect-100', cls: 'Expect', parts: [post('Expect: 100-continue\r\nContent-Length: 5\r\n', 'hello')], expect: { statuses: [100, 200], closed: false, forwarded: [fwd('POST', '/p', { body: 'hello' })] } },
  {
    name: 'expect-100-split',
    cls: 'Expect',
    parts: [post('Expect: 100-continue\r\nContent-Length: 5\r\n', ''), 'hello'],
    expect: { statuses: [100, 200], closed: false, forwarded: [fwd('POST', '/p', { body: 'hello' })] },
  },
  { name: 'expect-other', cls: 'Expect', parts: [post('Expect: something-else\r\nContent-Length: 5\r\n', 'hello')], expect: { statuses: [417], closed: false, forwarded: [] } },

  // --- limits ---------------------------------------------------------------------------------
  { name: 'headers-2100', cls: 'limits', parts: [get('/a', 'a:b\r\n'.repeat(2_100))], expect: refused(431) },
  { name: 'headers-101', cls: 'limits', parts: [get('/a', Array.from({ length: 100 }, (_v, i) => `h${i}: v\r\n`).join(''))], expect: refused(431) },
  { name: 'headers-100', cls: 'limits', parts: [get('/a', Array.from({ length: 99 }, (_v, i) => `h${i}: v\r\n`).join(''))], expect: ok1(fwd('GET', '/a')) },
  { name: 'head-oversized', cls: 'limits', parts: [get('/a', `X-Big: ${'b'.repeat(17_000)}\r\n`)], expect: refused(431) },

  // --- forwarding header spellings ------------------------------------------------------------
  {
    name: 'underscore-claims',
    cls: 'underscore X-Forwarded',
    parts: [get('/u', 'X_Forwarded_For: 6.6.6.6\r\nx_forwarded_proto: https\r\nX-Forwarded_Host: evil.example\r\nX_Real_IP: 6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\n')],
    expect: ok1(fwd('GET', '/u', { absent: ['X_Forwarded_For', 'x_forwarded_proto', 'X-Forwarded_Host', 'X_Real_IP', 'X-Real-IP', 'Forwarded'], headers: [['X-Forwarded-Proto', 'http']] })),
  },
  { name: 'client-xff-dropped', cls: 'underscore X-Forwarded', parts: [get('/x', 'X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 7.7.7.7\r\n')], expect: ok1(fwd('GET', '/x')) },

  // --- upgrades -------------------------------------------------------------------------------
  {
    name: 'ws-valid',
    cls: 'upgrade valid',
    parts: [HANDSHAKE('/ws/live/') + FRAME],
    expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })], tunnelEcho: FRAME },
  },
  { name: 'ws-room-prefix', cls: 'upgrade valid', parts: [HANDSHAKE('/r/room42/ws/live/')], expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })] } },
  { name: 'ws-post', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/').replace(/^GET/, 'POST')], expect: refused() },
  { name: 'ws-no-key', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/').replace(/Sec-WebSocket-Key: [^\r]*\r\n/, '')], expect: refused() },
  { name: 'ws-no-version', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/').replace(/Sec-WebSocket-Version: [^\r]*\r\n/, '')], expect: refused() },
  { name: 'ws-content-length', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/', 'Content-Length: 5\r\n') + 'hello'], expect: refused() },
  { name: 'ws-chunked', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/', 'Transfer-Encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n'], expect: refused() },
  {
    name: 'h2c',
    cls: 'upgrade invalid',
    parts: [`GET /ws/live/ HTTP/1.1\r\n${H}Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`],
    expect: refused(),
  },
  {
    name: 'ws-without-connection-upgrade',
    cls: 'upgrade invalid',
    parts: [`GET /ws/live/ HTTP/1.1\r\n${H}Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`],
    expect: ok1(fwd('GET', '/ws/live/', { absent: ['Upgrade'] })),
  },
  { name: 'ws-outside-paths', cls: 'upgrade path', parts: [HANDSHAKE('/admin/')], expect: refused(404) },
  // Dot segments are resolved first (the canonical target): what is left is judged, and forwarded.
  { name: 'ws-dot-segments', cls: 'upgrade path', parts: [HANDSHAKE('/ws/live/../../admin')], expect: refused(404) },
  { name: 'ws-encoded-dot-segments', cls: 'upgrade path', parts: [HANDSHAKE('/ws/live/%2e%2E/admin')], expect: refused(404) },
  { name: 'ws-dot-segments-resolved', cls: 'upgrade path', parts: [HANDSHAKE('/admin/%2E%2e//ws/./live/')], expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })] } },
  { name: 'ws-push-path', cls: 'reserved path', parts: [HANDSHAKE('/_roomgate/push')], expect: refused(404) },
  { name: 'ws-push-path-prefixed', cls: 'reserved path', parts: [HANDSHAKE('/r/victim/_roomgate/%70ush/')], expect: refused(404) },
  { name: 'ws-smuggled-behind', cls: 'upgrade valid', parts: [HANDSHAKE('/ws/live/') + SMUGGLED], expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })], tunnelEcho: SMUGGLED } },
  // The byte-level front takes handshakes of a strict subset itself (src/http/lean-request-head.ts);
  // these sit on both sides of its edge, so each path is held to the same answer.
  {
    name: 'ws-connection-list',
    cls: 'upgrade valid',
    parts: [HANDSHAKE('/ws/live/').replace('Connection: Upgrade', 'connection: keep-alive, UPGRADE').replace('Upgrade: websocket', 'upgrade: WebSocket') + FRAME],
    expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })], tunnelEcho: FRAME },
  },
  {
    name: 'ws-after-page',
    cls: 'upgrade valid',
    parts: [get('/p') + HANDSHAKE('/ws/live/') + FRAME],
    expect: { statuses: [200, 101], closed: false, forwarded: [fwd('GET', '/p'), fwd('GET', '/ws/live/', { host: 'game.example' })], tunnelEcho: FRAME },
  },
  { name: 'ws-head', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/').replace(/^GET/, 'HEAD')], expect: refused() },
  { name: 'ws-two-upgrade-lines', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/', 'Upgrade: websocket\r\n')], expect: refused() },
  { name: 'ws-upgrade-list', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/').replace('Upgrade: websocket', 'Upgrade: websocket, h2c')], expect: refused() },
  { name: 'ws-empty-key', cls: 'upgrade invalid', parts: [HANDSHAKE('/ws/live/').replace(/Sec-WebSocket-Key: [^\r]*/, 'Sec-WebSocket-Key:')], expect: refused() },
  { name: 'ws-content-length-zero', cls: 'upgrade valid', parts: [HANDSHAKE('/ws/live/', 'Content-Length: 0\r\n') + FRAME], expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })], tunnelEcho: FRAME } },
  { name: 'ws-connection-tab', cls: 'upgrade valid', parts: [HANDSHAKE('/ws/live/').replace('Connection: Upgrade', 'Connection: keep-alive,\tUpgrade')], expect: { statuses: [101], closed: false, forwarded: [fwd('GET', '/ws/live/', { host: 'game.example' })] } },
];

/** The case whose bytes are split at every byte boundary (pipelined, with a body). */
export const SPLIT_CASE: RequestCase = {
  name: 'pipeline-split',
  cls: 'pipelining',
  parts: [get('/s1') + post('Content-Length: 3\r\n', 'abc', '/s2') + chunked('', '1\r\nz\r\n0\r\n\r\n', '/s3')],
  expect: { statuses: [200, 200, 200], closed: false, forwarded: [fwd('GET', '/s1'), fwd('POST', '/s2', { body: 'abc' }), fwd('POST', '/s3', { body: 'z', framing: 'chunked' })] },
};
