// The strict reader of a backend's answer head (byte-level pages and WebSocket handshakes): what
// it reads, the framing it derives, and every rule whose breach makes the answer a 502.
import { describe, expect, it } from 'vitest';
import { parseResponseHead, type HeadParse } from '../../src/http/response-head.js';

const parse = (text: string, max = 4096): HeadParse => parseResponseHead(Buffer.from(text, 'latin1'), max);
const error = (text: string): string | null => {
  const p = parse(text);
  if (p === null) return 'incomplete';
  return p.ok ? null : p.error;
};

describe('parseResponseHead', () => {
  it('reads status, reason, headers (values trimmed, obs-text kept) and where the head ends', () => {
    const text = 'HTTP/1.1 200 Fine  Thanks\r\nContent-Type:  text/html \t\r\nX-Empty:\r\nX-Latin: caf\xe9\r\nContent-Length: 5\r\n\r\nhello';
    const p = parse(text);
    if (p === null || !p.ok) throw new Error(JSON.stringify(p));
    expect(p.head).toMatchObject({ http11: true, status: 200, reason: 'Fine  Thanks', body: { kind: 'length', length: 5 } });
    expect(p.head.headers).toEqual([
      ['Content-Type', 'text/html'],
      ['X-Empty', ''],
      ['X-Latin', 'caf\xe9'],
      ['Content-Length', '5'],
    ]);
    expect(text.slice(p.head.end)).toBe('hello');
  });

  it.each([
    ['HTTP/1.0 200 OK\r\n\r\n', false, 200, 'OK', 'close'],
    ['HTTP/1.1 200\r\n\r\n', true, 200, '', 'close'],
    ['HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n', true, 204, 'No Content', 'none'],
    ['HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n', true, 304, 'Not Modified', 'none'],
    ['HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n', true, 103, 'Early Hints', 'none'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', true, 200, 'OK', 'none'],
    ['HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n', true, 200, 'OK', 'chunked'],
  ])('%j: http11 %s, status %i, reason %j, body %s', (text, http11, status, reason, kind) => {
    const p = parse(text);
    if (p === null || !p.ok) throw new Error(JSON.stringify(p));
    expect([p.head.http11, p.head.status, p.head.reason, p.head.body.kind]).toEqual([http11, status, reason, kind]);
  });

  it.each([
    ['HTTP/1.1 200 OK\nContent-Length: 0\n\n', 'bare LF in the head'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n', 'bare LF in the head'],
    ['HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n', 'bare CR in the head'],
    ['HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n', 'obs-fold'],
    ['HTTP/1.1 200 OK\r\n: a\r\n\r\n', 'header line without a name'],
    ['HTTP/1.1 200 OK\r\nNo colon\r\n\r\n', 'invalid header name "No colon"'],
    ['HTTP/1.1 200 OK\r\nX : a\r\n\r\n', 'invalid header name "X : a"'],
    ['HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n', 'control character in header X'],
    ['HTTP/1.1 200 OK\r\nX: a\x7fb\r\n\r\n', 'control character in header X'],
    ['HTTP/1.1 200 O\x01K\r\n\r\n', 'control character in the reason phrase'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n', 'more than one Content-Length'],
    ['HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', 'invalid Content-Length'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 1 1\r\n\r\n', 'invalid Content-Length'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456\r\n\r\n', 'invalid Content-Length'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 'Transfer-Encoding "gzip, chunked"'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 'Transfer-Encoding "chunked"'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n', 'Content-Length with Transfer-Encoding'],
    ['HTTP/1.1 099 Low\r\n\r\n', 'status code 99'],
    ['HTTP/1.1 600 High\r\n\r\n', 'status code 600'],
    ['HTTP/1.1 2000 OK\r\n\r\n', 'malformed status line'],
    ['HTTP/1.1 200X\r\n\r\n', 'malformed status line'],
    ['HTTP/1.1 20 OK\r\n\r\n', 'malformed status line'],
    ['HTTP/1.2 200 OK\r\n\r\n', 'malformed status line'],
    ['HTTP/2.0 200 OK\r\n\r\n', 'malformed status line'],
    ['http/1.1 200 OK\r\n\r\n', 'malformed status line'],
    ['HTTP/1.1  200 OK\r\n\r\n', 'malformed status line'],
  ])('refuses %j: %s', (text, why) => {
    expect(error(text)).toBe(why);
  });

  it('waits for more while a head is a clean prefix, and refuses bare line ends before the blank line', () => {
    expect(error('HTTP/1.1 200 OK\r\nContent-Len')).toBe('incomplete');
    expect(error('HTTP/1.1 200 OK\r')).toBe('incomplete');
    expect(error('HTTP/1.1 200 OK\nContent-Length: 5\n')).toBe('bare LF in the head');
    expect(error('HTTP/1.1 200 OK\rX')).toBe('bare CR in the head');
  });

  it('bounds the head: past maxBytes without a blank line is an error, never a growing buffer', () => {
    const big = `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(200)}\r\n\r\n`;
    expect(error(big)).toBeNull();
    expect(parseResponseHead(Buffer.from(big, 'latin1'), 100)).toEqual({ ok: false, error: 'response head over 100 bytes' });
    expect(parseResponseHead(Buffer.from(big.slice(0, 50), 'latin1'), 100)).toBeNull();
  });
});
