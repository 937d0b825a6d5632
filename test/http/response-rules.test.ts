// The field rules of every backend answer (src/http/response-rules.ts), as the page paths, the
// cache and the upgrade path all call them: the header-line limit, and what HTTP/2 cannot carry.
// SINGLE_VALUE_FIELDS is held to node:http2's own behaviour on a real h2 connection: each of its
// names sent twice is refused by node, and fields that may repeat are not.
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { answerFieldsProblem, h2FieldsProblem, MAX_RESPONSE_HEADERS, pairNames, rawNames, repeatedSingleField, SINGLE_VALUE_FIELDS } from '../../src/http/response-rules.js';

const lines = (n: number): string[] => Array.from({ length: n }, (_v, i) => [`X-Many-${i}`, 'v']).flat();

describe('the field rules of every answer', () => {
  it('at most MAX_RESPONSE_HEADERS lines, on both protocols and in both field forms', () => {
    expect(answerFieldsProblem(rawNames(lines(MAX_RESPONSE_HEADERS)), false)).toBeNull();
    expect(answerFieldsProblem(rawNames(lines(MAX_RESPONSE_HEADERS + 1)), false)).toBe(`more than ${MAX_RESPONSE_HEADERS} header lines`);
    expect(answerFieldsProblem(rawNames(lines(MAX_RESPONSE_HEADERS + 1)), true)).toBe(`more than ${MAX_RESPONSE_HEADERS} header lines`);
    const pairs = Array.from({ length: 300 }, (_v, i) => [`a${i}`, 'b'] as const);
    expect(answerFieldsProblem(pairNames(pairs), false)).toBe(`more than ${MAX_RESPONSE_HEADERS} header lines`);
    expect(answerFieldsProblem(pairNames(pairs.slice(0, MAX_RESPONSE_HEADERS)), false)).toBeNull();
  });

  it('a field meant once, twice: relayed to HTTP/1.1 as sent, a problem toward HTTP/2', () => {
    const etags = ['ETag', '"a"', 'X-Other', '1', 'etag', '"b"'];
    expect(answerFieldsProblem(rawNames(etags), false)).toBeNull();
    expect(answerFieldsProblem(rawNames(etags), true)).toBe('etag twice (HTTP/2 carries it once)');
    expect(h2FieldsProblem(pairNames([['Content-Type', 'a'], ['CONTENT-TYPE', 'b']]))).toBe('content-type twice (HTTP/2 carries it once)');
    expect(repeatedSingleField(rawNames(['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'Link', '<a>', 'Link', '<b>', 'ETag', '"a"']))).toBeNull();
  });

  it('SINGLE_VALUE_FIELDS is what node:http2 sends once: each twice is refused, fields that may repeat are not', async () => {
    const server = http2.createServer();
    const refused = new Map<string, boolean>();
    server.on('stream', (stream, headers) => {
      const name = String(headers['x-name']);
      try {
        stream.respond({ ':status': 200, [name]: ['a', 'b'] });
        refused.set(name, false);
        stream.end();
      } catch (err) {
        refused.set(name, (err as NodeJS.ErrnoException).code === 'ERR_HTTP2_HEADER_SINGLE_VALUE');
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const repeatable = ['set-cookie', 'link', 'vary', 'cache-control', 'www-authenticate', 'x-custom', 'content-security-policy'];
    // content-length twice is refused by every parser before this rule (and node checks it against the body).
    const names = [...[...SINGLE_VALUE_FIELDS].filter((n) => n !== 'content-length'), ...repeatable];
    try {
      for (const name of names) {
        await new Promise<void>((resolve) => {
          const req = client.request({ 'x-name': name }, { endStream: true });
          req.on('error', () => undefined);
          req.resume();
          req.on('close', () => resolve());
          setTimeout(resolve, 2_000).unref();
        });
      }
    } finally {
      client.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
    for (const name of names) expect(refused.get(name), name).toBe(SINGLE_VALUE_FIELDS.has(name));
  });
});
