// The referee's own table: it must be right before it judges anything else.
import { describe, expect, it } from 'vitest';
import { parseRequest, parseRequests, parseResponses } from './strict-parser.js';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');
const H = 'Host: a\r\n';

describe('strict request parser', () => {
  const valid: [string, string, { target?: string; body?: string; framing?: string; trailers?: number }][] = [
    ['plain GET', `GET /a?b=c HTTP/1.1\r\n${H}\r\n`, { target: '/a?b=c', body: '', framing: 'none' }],
    ['Content-Length body', `POST /p HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello`, { body: 'hello', framing: 'length' }],
    ['leading zeros in Content-Length', `POST /p HTTP/1.1\r\n${H}Content-Length: 005\r\n\r\nhello`, { body: 'hello' }],
    ['chunked with extensions and trailers', `POST /p HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5;a=b;c="d e"\r\nhello\r\n0 ;x\r\nT: v\r\n\r\n`, { body: 'hello', framing: 'chunked', trailers: 1 }],
    ['chunked as final coding', `POST /p HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`, { framing: 'chunked' }],
    ['obs-text in a value', `GET / HTTP/1.1\r\n${H}X: caf\xe9\r\n\r\n`, { target: '/' }],
    ['absolute-form', `GET http://x/a HTTP/1.1\r\n${H}\r\n`, { target: 'http://x/a' }],
    ['asterisk-form', `OPTIONS * HTTP/1.1\r\n${H}\r\n`, { target: '*' }],
  ];
  for (const [name, text, want] of valid) {
    it(`accepts ${name}`, () => {
      const r = parseRequest(b(text));
      expect(r.kind).toBe('message');
      if (r.kind !== 'message') return;
      if (want.target !== undefined) expect(r.message.target).toBe(want.target);
      if (want.body !== undefined) expect(r.message.body.toString('latin1')).toBe(want.body);
      if (want.framing !== undefined) expect(r.message.framing).toBe(want.framing);
      if (want.trailers !== undefined) expect(r.message.trailers.length).toBe(want.trailers);
      expect(r.message.end).toBe(text.length);
    });
  }

  const invalid: [string, string, RegExp][] = [
    ['bare LF', `GET / HTTP/1.1\n${H}\r\n`, /bare LF/],
    ['bare CR', `GET / HTTP/1.1\r\nX: a\rb\r\n${H}\r\n`, /bare CR/],
    ['obs-fold', `GET / HTTP/1.1\r\n${H}X: a\r\n b\r\n\r\n`, /obs-fold/],
    ['space before colon', `GET / HTTP/1.1\r\n${H}X : a\r\n\r\n`, /before the colon/],
    ['NUL in a value', `GET / HTTP/1.1\r\n${H}X: a\x00b\r\n\r\n`, /field value/],
    ['DEL in a name', `GET / HTTP/1.1\r\n${H}X\x7f: a\r\n\r\n`, /field name/],
    ['CL + TE', `POST / HTTP/1.1\r\n${H}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, /with Transfer-Encoding/],
    ['two Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length: 1\r\nContent-Length: 1\r\n\r\nx`, /more than one/],
    ['listed Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length: 1, 1\r\n\r\nx`, /invalid Content-Length/],
    ['+1', `POST / HTTP/1.1\r\n${H}Content-Length: +1\r\n\r\nx`, /invalid Content-Length/],
    ['huge Content-Length', `POST / HTTP/1.1\r\n${H}Content-Length: 99999999999999999999\r\n\r\n`, /too large/],
    ['chunked not final', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked, identity\r\n\r\n`, /final/],
    ['xchunked', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: xchunked\r\n\r\n`, /final/],
    ['chunk size 0x1', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n0x1\r\nx\r\n0\r\n\r\n`, /chunk size/],
    ['negative chunk size', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n0\r\n\r\n`, /chunk size/],
    ['overflowing chunk size', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff1\r\nx\r\n0\r\n\r\n`, /too large/],
    ['space after chunk size', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n1 \r\nx\r\n0\r\n\r\n`, /chunk size/],
    ['bad chunk extension', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n1;a=\x01\r\nx\r\n0\r\n\r\n`, /chunk/],
    ['missing CRLF after data', `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n1\r\nxy0\r\n\r\n`, /CRLF expected/],
    ['two spaces in the request line', `GET  / HTTP/1.1\r\n${H}\r\n`, /request line/],
    ['control byte in the method', `G\x01T / HTTP/1.1\r\n${H}\r\n`, /method/],
    ['control byte in the target', `GET /\x01 HTTP/1.1\r\n${H}\r\n`, /target/],
    ['bad version', `GET / HTTP/1.1x\r\n${H}\r\n`, /version/],
  ];
  for (const [name, text, reason] of invalid) {
    it(`refuses ${name}`, () => {
      const r = parseRequest(b(text));
      expect(r.kind).toBe('error');
      if (r.kind === 'error') expect(r.reason).toMatch(reason);
    });
  }

  it('reads a pipeline, stops at an upgrade, and reports incomplete tails', () => {
    const two = parseRequests(b(`GET /1 HTTP/1.1\r\n${H}\r\nPOST /2 HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\nhiGET /3 HTTP/1.1\r\n`));
    expect(two.messages.map((m) => m.target)).toEqual(['/1', '/2']);
    expect(two.incomplete).toBe(true);
    // RFC 9112 2.2: an empty line before a request-line is skipped.
    expect(parseRequests(b(`GET /1 HTTP/1.1\r\n${H}\r\n\r\nGET /2 HTTP/1.1\r\n${H}\r\n`)).messages.map((m) => m.target)).toEqual(['/1', '/2']);
    const up = parseRequests(b(`GET /ws HTTP/1.1\r\n${H}Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x00`));
    expect(up.messages.length).toBe(1);
    expect(up.messages[0]?.upgrade).toBe(true);
    expect(parseRequest(b(`POST / HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhel`)).kind).toBe('incomplete');
  });
});

describe('strict response parser', () => {
  it('reads interim, HEAD, 204 and close-delimited answers', () => {
    const r = parseResponses(b('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.0 200 OK\r\n\r\nrest'), ['GET', 'HEAD', 'GET', 'GET'], true);
    expect(r.error).toBeNull();
    expect(r.messages.map((m) => [m.status, m.body.toString()])).toEqual([
      [100, ''],
      [200, 'hi'],
      [200, ''],
      [204, ''],
      [200, 'rest'],
    ]);
    expect(parseResponses(b('HTTP/1.0 200 OK\r\n\r\nrest'), ['GET']).incomplete).toBe(true);
  });

  const invalid: [string, string][] = [
    ['status 099', 'HTTP/1.1 099 X\r\n\r\n'],
    ['status 600', 'HTTP/1.1 600 X\r\n\r\n'],
    ['two-digit status', 'HTTP/1.1 20 X\r\n\r\n'],
    ['control byte in the reason', 'HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n'],
    ['CL + TE', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n'],
    ['space before colon', 'HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n'],
  ];
  for (const [name, text] of invalid) {
    it(`refuses ${name}`, () => {
      expect(parseResponses(b(text), ['GET'], true).error).not.toBeNull();
    });
  }
});
