// The WebSocket handshakes the byte-level front reads itself: which heads are in the subset, and
// that node:http's parser (llhttp) takes every one of them as an upgrade too (the same bytes are
// the same handshake on both paths), checked against a real node:http server.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLeanHead, type LeanParse } from '../../src/http/lean-request-head.js';

const LIMITS = { maxHeaderBytes: 4096, maxHeaders: 16, roomHeader: 'x-room' };
const parse = (text: string): LeanParse => parseLeanHead(Buffer.from(text, 'latin1'), 0, LIMITS);
const kind = (text: string): string => {
  const p = parse(text);
  return p.kind === 'other' ? `other: ${p.reason}` : p.kind;
};
const WS = 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
const hs = (lines: string, method = 'GET'): string => `${method} /ws?room=a HTTP/1.1\r\nHost: a\r\n${lines}\r\n`;

/** Heads of the subset: each an upgrade for both parsers. */
const TAKEN = [
  hs(`Upgrade: websocket\r\nConnection: Upgrade\r\n${WS}`),
  hs(`upgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n${WS}`),
  hs(`Connection: upgrade ,close\r\nUPGRADE: websocket\r\n${WS}Cookie: a=1\r\nX-Room: r1\r\n`),
  hs(`Upgrade:websocket   \r\nConnection:   foo,Upgrade,bar\r\n${WS}`),
];

/** Upgrades outside the subset: node:http reads them (and answers or refuses them). */
const LEFT: [string, string][] = [
  ['HEAD', hs(`Upgrade: websocket\r\nConnection: Upgrade\r\n${WS}`, 'HEAD')],
  ['no Connection', hs(`Upgrade: websocket\r\n${WS}`)],
  ['Connection without upgrade', hs(`Upgrade: websocket\r\nConnection: keep-alive\r\n${WS}`)],
  ['two Connection lines', hs(`Upgrade: websocket\r\nConnection: keep-alive\r\nConnection: upgrade\r\n${WS}`)],
  ['a tab in Connection', hs(`Upgrade: websocket\r\nConnection: close,\tupgrade\r\n${WS}`)],
  ['an empty list element', hs(`Upgrade: websocket\r\nConnection: upgrade,,x\r\n${WS}`)],
  ['a parameter', hs(`Upgrade: websocket\r\nConnection: upgrade;q=1\r\n${WS}`)],
  ['upgradex', hs(`Upgrade: websocket\r\nConnection: upgradex\r\n${WS}`)],
  ['another protocol', hs(`Upgrade: h2c\r\nConnection: upgrade\r\n${WS}`)],
  ['a protocol list', hs(`Upgrade: websocket, h2c\r\nConnection: upgrade\r\n${WS}`)],
  ['two Upgrade lines', hs(`Upgrade: websocket\r\nUpgrade: websocket\r\nConnection: upgrade\r\n${WS}`)],
  ['no key', hs('Upgrade: websocket\r\nConnection: upgrade\r\nSec-WebSocket-Version: 13\r\n')],
  ['an empty key', hs('Upgrade: websocket\r\nConnection: upgrade\r\nSec-WebSocket-Key:\r\nSec-WebSocket-Version: 13\r\n')],
  ['two keys', hs(`Upgrade: websocket\r\nConnection: upgrade\r\nSec-WebSocket-Key: a\r\n${WS}`)],
  ['no version', hs('Upgrade: websocket\r\nConnection: upgrade\r\nSec-WebSocket-Key: a\r\n')],
  ['two versions', hs(`Upgrade: websocket\r\nConnection: upgrade\r\nSec-WebSocket-Version: 8\r\n${WS}`)],
];

describe('parseLeanHead: WebSocket handshakes', () => {
  it('reads a handshake of the subset as an upgrade, with its head as a page head would be read', () => {
    const p = parse(`${TAKEN[2] as string}FRAME`);
    if (p.kind !== 'upgrade') throw new Error(`not an upgrade: ${JSON.stringify(p)}`);
    const h = p.handshake;
    expect([h.upgrade, h.key, h.version]).toEqual(['websocket', 'dGhlIHNhbXBsZSBub25jZQ==', '13']);
    expect([h.head.method, h.head.url, h.head.cookie, h.head.roomHeader, h.head.close]).toEqual(['GET', '/ws?room=a', 'a=1', 'r1', true]);
    expect(h.head.rawHeaders.slice(0, 4)).toEqual(['Host', 'a', 'Connection', 'upgrade ,close']);
    expect((TAKEN[2] as string).length).toBe(h.head.end);
  });

  it.each(TAKEN.map((t) => [t]))('takes %j', (text) => {
    expect(kind(text)).toBe('upgrade');
  });

  it.each(LEFT)('leaves a handshake with %s to node:http', (_why, text) => {
    expect(kind(text)).toBe('other: upgrade');
  });

  it('still reads Connection: upgrade without an Upgrade line as a page (node:http does too)', () => {
    expect(kind(hs(`Connection: upgrade\r\n${WS}`))).toBe('head');
  });

  it('leaves a handshake with a body to node:http', () => {
    expect(kind(hs(`Upgrade: websocket\r\nConnection: upgrade\r\n${WS}Content-Length: 0\r\n`))).toBe('other: body');
  });
});

describe('node:http agrees: every handshake of the subset is an upgrade for llhttp too', () => {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`request ${req.url ?? ''}`);
    res.end();
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
    seen.push(`upgrade ${req.url ?? ''}`);
    socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  });
  let port = 0;
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  /** What node:http made of the bytes: "upgrade <url>", "request <url>", or nothing. */
  async function nodeReads(text: string): Promise<string | undefined> {
    seen.length = 0;
    const socket = net.connect(port, '127.0.0.1');
    socket.setTimeout(5_000, () => socket.destroy());
    socket.on('error', () => undefined);
    socket.end(text);
    socket.resume();
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    return seen[0];
  }

  it.each(TAKEN.map((t) => [t]))('%j', async (text) => {
    expect(await nodeReads(text)).toBe('upgrade /ws?room=a');
  });
});
