// The byte-level page path's head reader: what it takes, what it leaves to node:http (and why),
// and that it never waits on bytes node:http would refuse at once.
import { describe, expect, it } from 'vitest';
import { mayBeLean, parseLeanHead, type LeanParse } from '../../src/http/lean-request-head.js';

const LIMITS = { maxHeaderBytes: 1024, maxHeaders: 8, roomHeader: 'x-room' };
const parse = (text: string, limits = LIMITS): LeanParse => parseLeanHead(Buffer.from(text, 'latin1'), 0, limits);
const reason = (text: string): string => {
  const p = parse(text);
  return p.kind === 'other' ? p.reason : p.kind;
};

describe('parseLeanHead', () => {
  it('reads a GET head: target, raw headers as node:http gives them, cookies joined, the room header, the end', () => {
    const text = 'GET /r/42/page?x=1&y=%20 HTTP/1.1\r\nHost: app.test:8080\r\nCookie: a=1\r\nX-Room:  lobby \t\r\ncookie: b=2\r\nAccept:\r\n\r\nNEXT';
    const p = parse(text);
    if (p.kind !== 'head') throw new Error(`not a head: ${JSON.stringify(p)}`);
    expect(p.head.method).toBe('GET');
    expect(p.head.url).toBe('/r/42/page?x=1&y=%20');
    expect(p.head.rawHeaders).toEqual(['Host', 'app.test:8080', 'Cookie', 'a=1', 'X-Room', 'lobby', 'cookie', 'b=2', 'Accept', '']);
    expect(p.head.cookie).toBe('a=1; b=2');
    expect(p.head.roomHeader).toBe('lobby');
    expect(p.head.close).toBe(false);
    expect(text.slice(p.head.end)).toBe('NEXT');
  });

  it('reads HEAD and Connection: close (any case, in a list)', () => {
    const p = parse('HEAD / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, CLOSE\r\n\r\n');
    expect(p.kind === 'head' && p.head.method === 'HEAD' && p.head.close).toBe(true);
  });

  it('says "incomplete" for every proper prefix of a head it takes', () => {
    const text = 'GET /page?room=abc HTTP/1.1\r\nHost: a\r\nCookie: s=1\r\n\r\n';
    expect(parse(text).kind).toBe('head');
    for (let k = 1; k < text.length; k++) expect([k, parse(text.slice(0, k)).kind]).toEqual([k, 'incomplete']);
  });

  it.each([
    ['POST / HTTP/1.1\r\nHost: a\r\n\r\n', 'method'],
    ['get / HTTP/1.1\r\nHost: a\r\n\r\n', 'method'],
    ['GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET * HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET /a"b HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET /a|b HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET /caf\xe9 HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET  / HTTP/1.1\r\nHost: a\r\n\r\n', 'target'],
    ['GET / HTTP/1.0\r\nHost: a\r\n\r\n', 'version'],
    ['GET / HTTP/1.1 \r\nHost: a\r\n\r\n', 'version'],
    ['GET / HTTP/1.1\nHost: a\r\n\r\n', 'version'],
    ['GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n', 'header-value'],
    ['GET / HTTP/1.1\r\nHost: a\r\n\n', 'header-name'],
    ['GET / HTTP/1.1\r\nHost: a\r\n\rX', 'bare-cr'],
    ['GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n', 'header-name'],
    ['GET / HTTP/1.1\r\nHost : a\r\n\r\n', 'header-name'],
    ['GET / HTTP/1.1\r\n: a\r\n\r\n', 'header-name'],
    ['GET / HTTP/1.1\r\nHost: a\r\nX: caf\xe9\r\n\r\n', 'header-value'],
    ['GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n', 'header-value'],
    ['GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n', 'header-value'],
    ['GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n', 'body'],
    ['GET / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n', 'body'],
    ['GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n', 'upgrade'],
    ['GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n', 'expect'],
    ['GET / HTTP/1.1\r\n\r\n', 'host'],
    ['GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 'host'],
    ['GET / HTTP/1.1\r\nHost: a b\r\n\r\n', 'host'],
    ['GET / HTTP/1.1\r\nHost: u@a\r\n\r\n', 'host'],
    ['GET / HTTP/1.1\r\nHost: a\r\nX-Room: 1\r\nx-room: 2\r\n\r\n', 'room-header'],
  ])('leaves %j to node:http (%s)', (text, why) => {
    expect(reason(text)).toBe(why);
  });

  it('leaves a bare LF to node:http at once, before any blank line arrives', () => {
    expect(reason('GET / HTTP/1.1\r\nHost: a\nX')).toBe('header-value');
    expect(reason('GET / HTTP/1.1\nHo')).toBe('version');
  });

  it('leaves more header lines than maxHeaders, and a head past maxHeaderBytes, to node:http (its 431)', () => {
    const lines = Array.from({ length: 9 }, (_, n) => `X-${n}: v\r\n`).join('');
    expect(reason(`GET / HTTP/1.1\r\nHost: a\r\n${lines}\r\n`)).toBe('header-count');
    const exactly = Array.from({ length: 7 }, (_, n) => `X-${n}: v\r\n`).join('');
    expect(reason(`GET / HTTP/1.1\r\nHost: a\r\n${exactly}\r\n`)).toBe('head');
    const big = `GET /${'a'.repeat(2_000)} HTTP/1.1\r\nHost: a\r\n\r\n`;
    expect(reason(big)).toBe('head-size');
    expect(reason(big.slice(0, 1_100))).toBe('head-size');
    expect(reason(big.slice(0, 500))).toBe('incomplete');
  });

  it('reads a head at an offset (pipelined requests)', () => {
    const two = Buffer.from('GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n', 'latin1');
    const first = parseLeanHead(two, 0, LIMITS);
    if (first.kind !== 'head') throw new Error('first');
    const second = parseLeanHead(two, first.head.end, LIMITS);
    expect(second.kind === 'head' && second.head.url === '/2' && second.head.end === two.length).toBe(true);
  });
});

describe('mayBeLean', () => {
  it('is true only while the bytes can still start GET or HEAD', () => {
    const may = (s: string): boolean => mayBeLean(Buffer.from(s, 'latin1'), 0);
    expect(['G', 'GE', 'GET', 'GET ', 'GET /x', 'H', 'HEA', 'HEAD ', 'HEAD /'].every(may)).toBe(true);
    expect(['P', 'POST ', 'GET/', 'GETX', 'HEADX', 'HEAD/', 'g', '\r\n'].some(may)).toBe(false);
  });
});
