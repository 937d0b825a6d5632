// The response corpus: the backend answers a request (a GET, a HEAD, or a WebSocket handshake)
// with scripted raw bytes; each case says what the client must get. Intended (docs/proxying.md and
// docs/security.md): a malformed answer gets 502 while nothing was sent yet, and a warning in the log;
// valid answers are relayed intact (obs-text byte-exact); 1xx are not relayed, the final answer is;
// 204/304/HEAD bodies never are; a cut body ends the client connection without a complete-looking
// response; an unsolicited second answer never reaches another request. Upgrades: only a complete
// 101 with Upgrade: websocket opens a tunnel; any other final answer is relayed with
// Connection: close and nothing the client sent behind its handshake reaches the backend.
import type { Answer } from './backend.js';

export interface ResponseCase {
  readonly name: string;
  readonly cls: string;
  /** What the client sends: a keep-alive GET (default), a HEAD, or a WebSocket handshake followed by a smuggled request. */
  readonly request?: 'GET' | 'HEAD' | 'upgrade';
  readonly answer: Answer;
  readonly expect: {
    /** Status codes of every response head the client reads. */
    readonly statuses: readonly number[];
    /** The final response's body (latin1), as the referee reads the client's stream. */
    readonly body?: string;
    /** The client connection is closed by the gateway (undefined: either). */
    readonly closed?: boolean;
    /**
     * The body was cut: the client's stream holds no complete final response and is closed.
     * Whether the head reached the client first depends on how the bytes were read, so a cut case
     * accepts `statuses` or no response at all.
     */
    readonly cut?: boolean;
    /** Byte strings (latin1) the client's stream must contain / must not contain. */
    readonly contains?: readonly string[];
    readonly lacks?: readonly string[];
    /** The gateway logs a warning about the answer. */
    readonly logged?: boolean;
  };
}

// proxy.rewriteLocation is on in the corpus' gateways. In a case's bytes and expectations, OWN
// stands for the backend's own authority (127.0.0.1:port, known once it listens) and PUBLIC for
// the origin the client used (http://a.example, https://a.example on h2): concrete() fills them in.
export const OWN = '{own}';
export const PUBLIC = '{public}';

/** The case with OWN and PUBLIC filled in (a case without them is returned as it is). */
export function concrete(c: ResponseCase, own: string, publicOrigin: string): ResponseCase {
  const fill = (t: string): string => t.replaceAll(OWN, own).replaceAll(PUBLIC, publicOrigin);
  const bytes = typeof c.answer.bytes === 'string' ? c.answer.bytes : c.answer.bytes.toString('latin1');
  if (!bytes.includes(OWN)) return c;
  const e = c.expect;
  return {
    ...c,
    answer: { ...c.answer, bytes: fill(bytes) },
    expect: { ...e, ...(e.contains ? { contains: e.contains.map(fill) } : {}), ...(e.lacks ? { lacks: e.lacks.map(fill) } : {}) },
  };
}

const ok = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`;
const bad = { statuses: [502], logged: true } as const;
/** n header lines X-Many-0: v ... */
const many = (n: number): string => Array.from({ length: n }, (_v, i) => `X-Many-${i}: v\r\n`).join('');

export const RESPONSE_CASES: readonly ResponseCase[] = [
  // --- valid answers, relayed ----------------------------------------------------------------
  { name: 'plain', cls: 'valid', answer: { bytes: ok('hello') }, expect: { statuses: [200], body: 'hello', closed: false } },
  { name: 'obs-text-value', cls: 'valid', answer: { bytes: ok('x', 'X-Name: caf\xe9 \xff\r\n') }, expect: { statuses: [200], body: 'x', contains: ['\r\nX-Name: caf\xe9 \xff\r\n'] } },
  { name: 'obs-text-reason', cls: 'valid', answer: { bytes: 'HTTP/1.1 200 Tr\xe8s bien\r\nContent-Length: 1\r\n\r\nx' }, expect: { statuses: [200], body: 'x', contains: ['HTTP/1.1 200 Tr\xe8s bien\r\n'] } },
  { name: 'chunked-trailers', cls: 'valid', answer: { bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\n' }, expect: { statuses: [200], body: 'hello', closed: false } },
  { name: 'close-delimited', cls: 'valid', answer: { bytes: 'HTTP/1.1 200 OK\r\n\r\nhello until close', close: true }, expect: { statuses: [200], body: 'hello until close' } },
  { name: 'http10', cls: 'valid', answer: { bytes: 'HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello' }, expect: { statuses: [200], body: 'hello' } },
  // Connection-specific (RFC 9113 8.2.2): dropped like every hop-by-hop field; an h2 client could
  // not be sent it at all (test/proxy/http-proxy-h2.test.ts, where it once stopped the process).
  { name: 'http2-settings-field', cls: 'valid', answer: { bytes: ok('x', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nX-Kept: 1\r\n') }, expect: { statuses: [200], body: 'x', contains: ['\r\nX-Kept: 1\r\n'], lacks: ['HTTP2-Settings'] } },
  // A field meant once, twice: HTTP/1.1 relays it as sent (on h2 it is a 502, test/proxy/http-proxy-h2.test.ts).
  { name: 'etag-twice', cls: 'valid', answer: { bytes: ok('x', 'ETag: "a"\r\nETag: "b"\r\n') }, expect: { statuses: [200], body: 'x', contains: ['ETag: "a"\r\n', 'ETag: "b"\r\n'] } },
  { name: 'http10-close-delimited', cls: 'valid', answer: { bytes: 'HTTP/1.0 200 OK\r\n\r\nhello', close: true }, expect: { statuses: [200], body: 'hello' } },

  // --- Location and Refresh naming the backend (proxy.rewriteLocation, src/http/location.ts) ---
  // Its own address points at the public origin, the rest byte for byte; anything else is relayed as sent.
  { name: 'location-own', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/next?a=1#f\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nLocation: ${PUBLIC}/next?a=1#f\r\n`], lacks: [OWN] } },
  { name: 'location-own-302', cls: 'location', answer: { bytes: `HTTP/1.1 302 Found\r\nLocation: http://${OWN}/login\r\nContent-Length: 0\r\n\r\n` }, expect: { statuses: [302], body: '', contains: [`\r\nLocation: ${PUBLIC}/login\r\n`], lacks: [OWN] } },
  { name: 'refresh-own', cls: 'location', answer: { bytes: ok('x', `Refresh: 5; url=http://${OWN}/r\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nRefresh: 5; url=${PUBLIC}/r\r\n`], lacks: [OWN] } },
  { name: 'location-other-port', cls: 'location', answer: { bytes: ok('x', 'Location: http://127.0.0.1:1/x\r\n') }, expect: { statuses: [200], body: 'x', contains: ['\r\nLocation: http://127.0.0.1:1/x\r\n'] } },
  { name: 'location-userinfo', cls: 'location', answer: { bytes: ok('x', `Location: http://user@${OWN}/x\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nLocation: http://user@${OWN}/x\r\n`] } },
  { name: 'location-relative', cls: 'location', answer: { bytes: ok('x', 'Location: /next\r\n') }, expect: { statuses: [200], body: 'x', contains: ['\r\nLocation: /next\r\n'] } },
  // Escapes are kept as they are: a %0d%0a never becomes a line break.
  { name: 'location-encoded-crlf', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/a%0d%0aSet-Cookie:%20x=1\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nLocation: ${PUBLIC}/a%0d%0aSet-Cookie:%20x=1\r\n`], lacks: ['\r\nSet-Cookie'] } },
  // A bare CR in a value is a malformed field (as ctl-value): 502, the rewrite never sees it.
  { name: 'location-bare-cr', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/a\rSet-Cookie: x=1\r\n`) }, expect: bad },
  { name: 'location-obs-text', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/caf\xe9\xff\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nLocation: ${PUBLIC}/caf\xe9\xff\r\n`] } },
  { name: 'location-obs-text-host', cls: 'location', answer: { bytes: ok('x', 'Location: http://127.0.0.\xe9/x\r\n') }, expect: { statuses: [200], body: 'x', contains: ['\r\nLocation: http://127.0.0.\xe9/x\r\n'] } },
  { name: 'location-long', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/${'l'.repeat(8_000)}\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nLocation: ${PUBLIC}/${'l'.repeat(8_000)}\r\n`] } },
  // Past the head limit of the answer readers (node:http's 16 KB): a 502, as any head that big.
  { name: 'location-huge', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/${'h'.repeat(30_000)}\r\n`) }, expect: bad },
  // Each field on its own (on h2 a second Location cannot be written: H2_EXPECT).
  { name: 'location-twice', cls: 'location', answer: { bytes: ok('x', `Location: http://${OWN}/a\r\nLocation: http://${OWN}/b\r\n`) }, expect: { statuses: [200], body: 'x', contains: [`\r\nLocation: ${PUBLIC}/a\r\n`, `\r\nLocation: ${PUBLIC}/b\r\n`], lacks: [OWN] } },

  // --- interim answers -----------------------------------------------------------------------
  { name: '100-then-200', cls: '1xx', answer: { bytes: `HTTP/1.1 100 Continue\r\n\r\n${ok('final')}` }, expect: { statuses: [200], body: 'final' } },
  { name: '102-then-200', cls: '1xx', answer: { bytes: `HTTP/1.1 102 Processing\r\n\r\n${ok('final')}` }, expect: { statuses: [200], body: 'final' } },
  { name: '103-then-200', cls: '1xx', answer: { bytes: `HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n${ok('final')}` }, expect: { statuses: [200], body: 'final' } },
  { name: '101-to-get', cls: '1xx', answer: { bytes: 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n' }, expect: bad },

  // --- bodies that must not be relayed -------------------------------------------------------
  { name: '204-with-body', cls: 'no-body statuses', answer: { bytes: 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello' }, expect: { statuses: [204], body: '', lacks: ['hello'] } },
  { name: '304-with-body', cls: 'no-body statuses', answer: { bytes: 'HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello' }, expect: { statuses: [304], body: '', lacks: ['hello'] } },
  { name: 'head-with-body', cls: 'no-body statuses', request: 'HEAD', answer: { bytes: ok('hello') }, expect: { statuses: [200], body: '', lacks: ['hello'] } },
  { name: '204-chunked-body', cls: 'no-body statuses', answer: { bytes: 'HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n' }, expect: { statuses: [204], body: '', lacks: ['hello'] } },

  // --- malformed status lines ----------------------------------------------------------------
  { name: 'status-000', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 000 X\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'status-099', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 099 X\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'status-600', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 600 X\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'status-1000', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 1000 X\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'status-2x0', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 2x0 X\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'status-two-digits', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 20 X\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'reason-ctl', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'reason-del', cls: 'invalid status', answer: { bytes: 'HTTP/1.1 200 O\x7fK\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'http2-status-line', cls: 'invalid status', answer: { bytes: 'HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'garbage', cls: 'invalid status', answer: { bytes: 'XYZZY garbage\r\n\r\n' }, expect: bad },

  // --- malformed fields ----------------------------------------------------------------------
  { name: 'nul-value', cls: 'invalid fields', answer: { bytes: ok('hi', 'X: a\x00b\r\n') }, expect: bad },
  { name: 'ctl-value', cls: 'invalid fields', answer: { bytes: ok('hi', 'X: a\x01b\r\n') }, expect: bad },
  { name: 'del-value', cls: 'invalid fields', answer: { bytes: ok('hi', 'X: a\x7fb\r\n') }, expect: bad },
  { name: 'space-before-colon', cls: 'invalid fields', answer: { bytes: ok('hi', 'X : a\r\n') }, expect: bad },
  { name: 'non-token-name', cls: 'invalid fields', answer: { bytes: ok('hi', 'X(Y): a\r\n') }, expect: bad },
  { name: 'obs-fold', cls: 'invalid fields', answer: { bytes: ok('hi', 'X: a\r\n b\r\n') }, expect: bad },
  { name: 'bare-lf', cls: 'invalid fields', answer: { bytes: 'HTTP/1.1 200 OK\nContent-Length: 2\n\nhi' }, expect: bad },

  // --- framing -------------------------------------------------------------------------------
  { name: 'cl-twice-same', cls: 'invalid framing', answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi' }, expect: bad },
  { name: 'cl-conflicting', cls: 'invalid framing', answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello' }, expect: bad },
  { name: 'cl-listed', cls: 'invalid framing', answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nhi' }, expect: bad },
  { name: 'cl-te', cls: 'invalid framing', answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n' }, expect: bad },
  { name: 'te-gzip', cls: 'invalid framing', answer: { bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhi', close: true }, expect: bad },
  { name: 'head-huge', cls: 'limits', answer: { bytes: ok('hi', `X-Big: ${'b'.repeat(70_000)}\r\n`) }, expect: bad },
  { name: 'headers-2100', cls: 'limits', answer: { bytes: ok('hi', 'a: b\r\n'.repeat(2_100)) }, expect: bad },
  { name: 'two-responses', cls: 'unsolicited', answer: { bytes: `${ok('ok')}${ok('evil', 'X-Unsolicited: 1\r\n')}` }, expect: { statuses: [200], body: 'ok', lacks: ['evil', 'X-Unsolicited'] } },

  // --- cut bodies ----------------------------------------------------------------------------
  { name: 'cut-length', cls: 'cut body', answer: { bytes: `HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n${'x'.repeat(50)}`, close: true }, expect: { statuses: [200], cut: true } },
  { name: 'cut-chunk', cls: 'cut body', answer: { bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly-half', close: true }, expect: { statuses: [200], cut: true } },
  { name: 'cut-before-last-chunk', cls: 'cut body', answer: { bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n', close: true }, expect: { statuses: [200], cut: true } },
  { name: 'bad-chunk-size', cls: 'cut body', answer: { bytes: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nmore\r\n0\r\n\r\n' }, expect: { statuses: [200], cut: true } },
  { name: 'close-before-head', cls: 'cut body', answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Le', close: true }, expect: bad },

  // --- answers to a WebSocket handshake (the client sends a request behind it) --------------
  { name: 'upgrade-200-body', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: ok('hello') }, expect: { statuses: [200], body: 'hello', closed: true, contains: ['\r\nConnection: close\r\n'] } },
  { name: 'upgrade-404-keep', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found' }, expect: { statuses: [404], body: 'not found', closed: true, contains: ['\r\nConnection: close\r\n'] } },
  { name: 'upgrade-chunked-403', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n\r\n' }, expect: { statuses: [403], body: 'no', closed: true } },
  { name: 'upgrade-101-no-upgrade', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n' }, expect: { ...bad, closed: true } },
  { name: 'upgrade-101-h2c', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n' }, expect: { ...bad, closed: true } },
  { name: 'upgrade-103-then-101', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n' }, expect: { statuses: [101], closed: false } },
  { name: 'upgrade-garbage', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'XYZZY garbage\r\n\r\n' }, expect: { ...bad, closed: true } },
  { name: 'upgrade-302-location-own', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: `HTTP/1.1 302 Found\r\nLocation: http://${OWN}/login\r\nRefresh: 0;url='http://${OWN}/login'\r\nContent-Length: 0\r\n\r\n` }, expect: { statuses: [302], body: '', closed: true, contains: [`\r\nLocation: ${PUBLIC}/login\r\n`, `\r\nRefresh: 0;url='${PUBLIC}/login'\r\n`], lacks: [OWN] } },
  { name: 'upgrade-cl-te', cls: 'upgrade answers', request: 'upgrade', answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n' }, expect: { ...bad, closed: true } },

  // --- Hardening 3, item 2: the response rules of every answer on the upgrade path -----------
  // An answer to a handshake, the 101 included, keeps the rules of a page's answer
  // (src/http/response-rules.ts): at most 200 header lines and a head within the limit, or a 502
  // before any of it is relayed; hop-by-hop fields (HTTP2-Settings among them) and those its
  // Connection names are dropped; a field meant once, twice, is relayed as sent on HTTP/1.1.
  { name: 'upgrade-refusal-300-fields', cls: 'upgrade answer rules', request: 'upgrade', answer: { bytes: `HTTP/1.1 403 Forbidden\r\n${many(300)}Content-Length: 2\r\n\r\nno` }, expect: { ...bad, closed: true, lacks: ['X-Many-'] } },
  { name: 'upgrade-refusal-200-fields', cls: 'upgrade answer rules', request: 'upgrade', answer: { bytes: `HTTP/1.1 403 Forbidden\r\n${many(199)}Content-Length: 2\r\n\r\nno` }, expect: { statuses: [403], body: 'no', closed: true, contains: ['\r\nX-Many-198: v\r\n'] } },
  { name: 'upgrade-refusal-head-huge', cls: 'upgrade answer rules', request: 'upgrade', answer: { bytes: `HTTP/1.1 403 Forbidden\r\nX-Big: ${'b'.repeat(20_000)}\r\nContent-Length: 2\r\n\r\nno` }, expect: { ...bad, closed: true, lacks: ['X-Big'] } },
  { name: 'upgrade-refusal-etag-twice', cls: 'upgrade answer rules', request: 'upgrade', answer: { bytes: 'HTTP/1.1 403 Forbidden\r\nETag: "a"\r\nETag: "b"\r\nContent-Length: 2\r\n\r\nno' }, expect: { statuses: [403], body: 'no', closed: true, contains: ['\r\nETag: "a"\r\n', '\r\nETag: "b"\r\n'] } },
  {
    name: 'upgrade-refusal-hop-fields',
    cls: 'upgrade answer rules',
    request: 'upgrade',
    answer: { bytes: 'HTTP/1.1 403 Forbidden\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: X-Secret\r\nX-Secret: 1\r\nTrailer: X-T\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nno' },
    expect: { statuses: [403], body: 'no', closed: true, contains: ['\r\nX-Kept: 1\r\n', '\r\nConnection: close\r\n'], lacks: ['HTTP2-Settings', 'X-Secret', 'Trailer'] },
  },
  { name: 'upgrade-101-300-fields', cls: 'upgrade answer rules', request: 'upgrade', answer: { bytes: `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n${many(300)}\r\n` }, expect: { ...bad, closed: true, lacks: ['X-Many-'] } },
  { name: 'upgrade-101-head-huge', cls: 'upgrade answer rules', request: 'upgrade', answer: { bytes: `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n` }, expect: { ...bad, closed: true, lacks: ['X-Big'] } },
  {
    name: 'upgrade-101-hop-fields',
    cls: 'upgrade answer rules',
    request: 'upgrade',
    answer: { bytes: 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Secret\r\nX-Secret: 1\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\nX-Kept: 1\r\n\r\n' },
    expect: { statuses: [101], closed: false, contains: ['\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Kept: 1\r\n\r\n'], lacks: ['HTTP2-Settings', 'X-Secret', 'Keep-Alive', 'Content-Length'] },
  },
];

// --- room.pinInject (src/http/pin-inject.ts) ---------------------------------------------------
// HTML pages from hostile backends. `expect` holds with injection off (the default: every page
// relayed as sent); `pinExpect` with it on, for a request whose room is "r" (the corpus' GET /r,
// with room.pagePaths ["/{room}"]): the tags right after <head>, Content-Length the length of what
// is sent (the referee reads the client's stream by it), ETag and Last-Modified gone; nothing past
// the answer's framing relayed; a page cut before or after the scanner decided still a cut.
export interface PinCase extends ResponseCase {
  readonly pinExpect: ResponseCase['expect'] & {
    /** The final response's body must match (the pin's time and signature vary). */
    readonly bodyLike?: RegExp;
  };
}

/** What an injected page's tags look like for room "r" (escaped for a RegExp). */
export const PIN_TAGS_RE = '<meta name="roomgate-pin" content="r\\.[0-9a-z]{1,10}\\.[A-Za-z0-9_-]{43}"><script src="/_roomgate/room-pin\\.v1\\.js" integrity="sha384-[A-Za-z0-9+/]{64}" crossorigin="anonymous"></script>';
const injectedBody = (before: string, after: string): RegExp => new RegExp(`^${escapeRe(before)}${PIN_TAGS_RE}${escapeRe(after)}$`);
function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
const PAGE = '<!doctype html><html lang="en"><head><title>t</title></head><body>b</body></html>';
const html = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`;
const chunk = (s: string): string => `${s.length.toString(16)}\r\n${s}\r\n`;
const asSent = (body: string, extra: Partial<ResponseCase['expect']> = {}): ResponseCase['expect'] => ({ statuses: [200], body, ...extra });
const VALIDATORS = 'ETag: "v1"\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n';
const HUGE_PREAMBLE = `<!doctype html><!--${'x'.repeat(20_000)}--><html><head>h`;

export const PIN_RESPONSE_CASES: readonly PinCase[] = [
  {
    name: 'pin-html-length',
    cls: 'pin injection',
    answer: { bytes: html(PAGE, VALIDATORS) },
    expect: asSent(PAGE, { contains: ['\r\nETag: "v1"\r\n'] }),
    pinExpect: { statuses: [200], closed: false, bodyLike: injectedBody('<!doctype html><html lang="en"><head>', '<title>t</title></head><body>b</body></html>'), lacks: ['ETag', 'Last-Modified'] },
  },
  {
    name: 'pin-html-chunked-head-split',
    cls: 'pin injection',
    answer: { bytes: `HTTP/1.1 200 OK\r\nContent-Type: TEXT/HTML\r\nTransfer-Encoding: chunked\r\n\r\n${chunk('<htm')}${chunk('l><he')}${chunk('A')}${chunk('d>x')}${chunk('y')}0\r\n\r\n` },
    expect: asSent('<html><heAd>xy'),
    pinExpect: { statuses: [200], closed: false, bodyLike: injectedBody('<html><heAd>', 'xy') },
  },
  {
    name: 'pin-html-close-delimited',
    cls: 'pin injection',
    answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<head>until close', close: true },
    expect: asSent('<head>until close'),
    pinExpect: { statuses: [200], bodyLike: injectedBody('<head>', 'until close') },
  },
  {
    name: 'pin-html-gzip',
    cls: 'pin injection',
    answer: { bytes: html('<head>not really gzip', 'Content-Encoding: gzip\r\nETag: "g"\r\n') },
    expect: asSent('<head>not really gzip', { contains: ['\r\nETag: "g"\r\n'] }),
    pinExpect: asSent('<head>not really gzip', { contains: ['\r\nETag: "g"\r\n'] }),
  },
  {
    name: 'pin-plain-text',
    cls: 'pin injection',
    answer: { bytes: ok('<head>text', 'Content-Type: text/plain\r\n') },
    expect: asSent('<head>text'),
    pinExpect: asSent('<head>text'),
  },
  {
    name: 'pin-html-no-head',
    cls: 'pin injection',
    answer: { bytes: html('<html><body><head>late</body>', VALIDATORS) },
    expect: asSent('<html><body><head>late</body>'),
    pinExpect: asSent('<html><body><head>late</body>', { contains: ['\r\nETag: "v1"\r\n', '\r\nLast-Modified: '] }),
  },
  {
    name: 'pin-html-no-transform',
    cls: 'pin injection',
    answer: { bytes: html('<head>x', 'Cache-Control: no-transform\r\n') },
    expect: asSent('<head>x'),
    pinExpect: asSent('<head>x'),
  },
  {
    name: 'pin-html-huge-preamble',
    cls: 'pin injection',
    answer: { bytes: html(HUGE_PREAMBLE) },
    expect: asSent(HUGE_PREAMBLE),
    pinExpect: asSent(HUGE_PREAMBLE),
  },
  {
    name: 'pin-html-empty',
    cls: 'pin injection',
    answer: { bytes: html('') },
    expect: asSent(''),
    pinExpect: asSent('', { closed: false }),
  },
  {
    name: 'pin-html-length-lie-more',
    cls: 'pin injection',
    answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10\r\n\r\n<head>abcdEXTRA-BYTES' },
    expect: asSent('<head>abcd', { lacks: ['EXTRA'] }),
    pinExpect: { statuses: [200], bodyLike: injectedBody('<head>', 'abcd'), lacks: ['EXTRA'] },
  },
  {
    name: 'pin-html-cut-before-head',
    cls: 'pin injection',
    answer: { bytes: 'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\n<!doctype html><!-- still', close: true },
    expect: { statuses: [200], cut: true },
    pinExpect: { statuses: [200], cut: true },
  },
  {
    name: 'pin-html-cut-after-head',
    cls: 'pin injection',
    answer: { bytes: `HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\n<head>${'y'.repeat(40)}`, close: true },
    expect: { statuses: [200], cut: true },
    pinExpect: { statuses: [200], cut: true },
  },
  {
    name: 'pin-html-chunked-cut',
    cls: 'pin injection',
    answer: { bytes: `HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n${chunk('<he')}zz\r\n`, close: true },
    expect: { statuses: [200], cut: true },
    pinExpect: { statuses: [200], cut: true },
  },
  {
    name: 'pin-html-head-request',
    cls: 'pin injection',
    request: 'HEAD',
    // A GET's answer (the cache fetches a HEAD's answer with a GET): the paths relay its head, not
    // injected; the page cache stores the GET's page, injected, and answers the HEAD from it.
    answer: { bytes: html('<head>x') },
    expect: { statuses: [200], body: '', contains: ['\r\nContent-Length: 7\r\n'], lacks: ['<head>'] },
    pinExpect: { statuses: [200], body: '', lacks: ['<head>'] },
  },
  {
    name: 'pin-html-201',
    cls: 'pin injection',
    answer: { bytes: `HTTP/1.1 201 Created\r\nContent-Type: text/html\r\nContent-Length: 7\r\n\r\n<head>x` },
    expect: { statuses: [201], body: '<head>x' },
    pinExpect: { statuses: [201], body: '<head>x' },
  },
];
