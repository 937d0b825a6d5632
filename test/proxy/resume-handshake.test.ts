// The resume handshake's answer is hostile like any backend byte (src/proxy/resume-handshake.ts):
// only a 101 that agrees in every point (Upgrade, Connection, Sec-WebSocket-Accept, the client
// socket's extensions and subprotocol) opens a resume; anything else is a failure with a reason,
// never a crash, never a hang past the deadline. A raw TCP server in process answers each case.
// Also: the offer rewrite and the old owner's stream ending at a message boundary (tunnel-resume.ts).
import { createHash } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { offerWithoutContext, openResumed, resumeReady, serverCloseFrame, type Resumed } from '../../src/proxy/resume-handshake.js';
import { OldStreamEnd } from '../../src/proxy/tunnel-resume.js';

const accept = (key: string): string => createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
const ok101 = (key: string, extra = ''): string => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\n${extra}\r\n`;

/** Each case: what the server writes once it has the request (null: nothing, ever), and whether it then closes. */
type Answer = { write: (key: string) => Buffer | string | null; close?: boolean; byteByByte?: boolean };
let answer: Answer = { write: () => null };
const requests: string[] = [];
const conns = new Set<net.Socket>();
let server: net.Server;
let port = 0;

beforeAll(async () => {
  server = net.createServer((s) => {
    conns.add(s);
    s.on('close', () => conns.delete(s));
    s.on('error', () => undefined);
    let text = '';
    s.on('data', (d) => {
      text += d.toString('latin1');
      if (!text.includes('\r\n\r\n')) return;
      requests.push(text);
      const key = /sec-websocket-key: (\S+)/i.exec(text)?.[1] ?? '';
      const out = answer.write(key);
      if (out !== null) {
        const b = Buffer.from(out as string, 'latin1');
        if (answer.byteByByte) for (let i = 0; i < b.length; i++) s.write(b.subarray(i, i + 1));
        else s.write(b);
      }
      if (answer.close) s.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const c of conns) c.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

function open(a: Answer, ext: { extensions?: string | null; protocol?: string | null } = {}, timeoutMs = 2_000, go?: Promise<boolean>): Promise<Resumed> {
  answer = a;
  return openResumed({
    backend: { host: '127.0.0.1', port },
    tls: { ca: null, rejectUnauthorized: true } as never,
    path: '/ws/?room=r',
    host: 'a.test',
    extensions: ext.extensions ?? null,
    protocol: ext.protocol ?? null,
    fields: ['X-Roomgate-Resume', 'h-1', 'X-Roomgate-Socket', 'AAAAAAAAAAAAAAAAAAAAAA'],
    timeoutMs,
    ...(go === undefined ? {} : { go }),
  });
}

async function waitUntil(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(ok()).toBe(true);
}

/** A gate the test opens (true) or calls off (false). */
function gate(): { go: Promise<boolean>; open: (ok: boolean) => void } {
  let open: (ok: boolean) => void = () => undefined;
  const go = new Promise<boolean>((r) => (open = r));
  return { go, open };
}

describe('the resume handshake', () => {
  it('with a gate: connected at once, the request sent only when the gate opens (the backend sees nothing before)', async () => {
    const g = gate();
    const before = requests.length;
    const connsBefore = conns.size;
    const out = open({ write: (k) => ok101(k) }, {}, 2_000, g.go);
    // The connection is there, idle: no request reached the server.
    await waitUntil(() => conns.size > connsBefore);
    await new Promise((r) => setTimeout(r, 50));
    expect(requests.length).toBe(before);
    g.open(true);
    const r = await out;
    expect(r.ok).toBe(true);
    if (r.ok) r.socket.destroy();
    expect(requests.length).toBe(before + 1);
  });

  it('with a gate called off: a failed resume, and no request ever sent', async () => {
    const g = gate();
    const before = requests.length;
    const out = open({ write: (k) => ok101(k) }, {}, 2_000, g.go);
    g.open(false);
    const r = await out;
    expect(r).toMatchObject({ ok: false, why: expect.stringMatching(/called off/) });
    await new Promise((r2) => setTimeout(r2, 50));
    expect(requests.length).toBe(before);
  });

  it('a good 101 opens it: the request as built, and the frames behind the 101 kept for the client', async () => {
    const frame = Buffer.from([0x81, 0x02, 0x68, 0x69]);
    const out = await open({ write: (k) => Buffer.concat([Buffer.from(ok101(k, 'Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n'), 'latin1'), frame]) }, { extensions: 'permessage-deflate; server_no_context_takeover; client_no_context_takeover' });
    expect(out.ok).toBe(true);
    if (!out.ok) return;
    expect(out.early).toEqual(frame);
    out.socket.destroy();
    const req = requests.at(-1) as string;
    expect(req.startsWith('GET /ws/?room=r HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n')).toBe(true);
    expect(req).toMatch(/\r\nSec-WebSocket-Version: 13\r\n/);
    expect(req).toMatch(/\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n/);
    expect(req).toMatch(/\r\nX-Roomgate-Resume: h-1\r\nX-Roomgate-Socket: AAAAAAAAAAAAAAAAAAAAAA\r\n\r\n$/);
  });

  it('a 101 that arrives one byte at a time, after interim answers, still opens it', async () => {
    const out = await open({ write: (k) => `HTTP/1.1 100 Continue\r\n\r\n${ok101(k)}`, byteByByte: true });
    expect(out.ok).toBe(true);
    if (out.ok) out.socket.destroy();
  });

  const hostile: [string, Answer, RegExp, { extensions?: string; protocol?: string }?][] = [
    ['refused', { write: () => 'HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n' }, /refused \(403\)/],
    ['a 200', { write: () => 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi' }, /refused \(200\)/],
    ['a wrong accept', { write: () => ok101('not-the-key') }, /Sec-WebSocket-Accept/],
    ['no Upgrade', { write: (k) => `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(k)}\r\n\r\n` }, /Upgrade: websocket/],
    ['no Connection: Upgrade', { write: (k) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: ${accept(k)}\r\n\r\n` }, /Connection: Upgrade/],
    ['other extensions', { write: (k) => ok101(k, 'Sec-WebSocket-Extensions: permessage-deflate\r\n') }, /extensions differ/, { extensions: 'permessage-deflate; server_no_context_takeover' }],
    ['deflate not negotiated', { write: (k) => ok101(k) }, /extensions differ/, { extensions: 'permessage-deflate; server_no_context_takeover' }],
    ['another subprotocol', { write: (k) => ok101(k, 'Sec-WebSocket-Protocol: other\r\n') }, /subprotocol differs/, { protocol: 'chat' }],
    ['garbage', { write: () => 'hello there\r\n\r\n' }, /broken answer/],
    ['bare line ends', { write: () => 'HTTP/1.1 101 OK\nUpgrade: websocket\n\n' }, /broken answer/],
    ['a head past the limit', { write: () => `HTTP/1.1 101 OK\r\n${'X-A: b\r\n'.repeat(20_000)}` }, /broken answer/],
    ['too many interim answers', { write: () => 'HTTP/1.1 100 Continue\r\n\r\n'.repeat(9) }, /interim/],
    ['a close mid-head', { write: () => 'HTTP/1.1 101 Swi', close: true }, /closed before a 101/],
    ['a close before anything', { write: () => null, close: true }, /closed before a 101/],
  ];
  for (const [name, a, why, ext] of hostile) {
    it(`${name}: not opened, with the reason`, async () => {
      const out = await open(a, ext);
      expect(out.ok).toBe(false);
      if (!out.ok) expect(out.why).toMatch(why);
    });
  }

  it('no answer: not opened once the deadline passes', async () => {
    const out = await open({ write: () => null }, {}, 150);
    expect(out).toEqual({ ok: false, why: 'no 101 within 150 ms' });
  });

  it('nothing listening: not opened', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const dead = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const out = await openResumed({ backend: { host: '127.0.0.1', port: dead }, tls: {} as never, path: '/', host: null, extensions: null, protocol: null, fields: [], timeoutMs: 2_000 });
    expect(out.ok).toBe(false);
  });
});

describe('the offer of a tunnel that may be resumed', () => {
  it('every permessage-deflate offer keeps no context; other extensions untouched', () => {
    expect(offerWithoutContext(' permessage-deflate; client_max_window_bits')).toBe('permessage-deflate; client_max_window_bits; server_no_context_takeover; client_no_context_takeover');
    expect(offerWithoutContext('permessage-deflate; server_no_context_takeover, x-webkit-deflate-frame')).toBe('permessage-deflate; server_no_context_takeover; client_no_context_takeover, x-webkit-deflate-frame');
    expect(offerWithoutContext('x-other')).toBe('x-other');
  });

  it('the handshake text: its offer rewritten, its target and Host kept', () => {
    const text = 'GET /ws/live/?room=a HTTP/1.1\r\nHost: app.test\r\nSec-WebSocket-Extensions: permessage-deflate\r\nX-Roomgate-Room: a\r\n';
    expect(resumeReady(text)).toEqual({
      text: 'GET /ws/live/?room=a HTTP/1.1\r\nHost: app.test\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\nX-Roomgate-Room: a\r\n',
      path: '/ws/live/?room=a',
      host: 'app.test',
    });
  });
});

describe("the old owner's stream ends at a message boundary", () => {
  const text = (s: string, fin = true): Buffer => Buffer.concat([Buffer.from([(fin ? 0x80 : 0) | 0x01, s.length]), Buffer.from(s)]);
  const more = (s: string): Buffer => Buffer.concat([Buffer.from([0x80, s.length]), Buffer.from(s)]);
  const close = serverCloseFrame(1012, 'room moved');

  it('relays every message before the close; the close and what follows are never relayed', async () => {
    const down = new OldStreamEnd();
    const a = text('a');
    expect(down.follow(a, 0, a.length)).toBe(a.length);
    down.swallowing = true;
    const ending = down.ending(5_000);
    const chunk = Buffer.concat([text('b'), close, text('late')]);
    expect(down.follow(chunk, 0, chunk.length)).toBe(3);
    expect(await ending).toBe(true);
    expect(down.endedBetweenMessages).toBe(true);
    expect(down.follow(chunk, 3, chunk.length)).toBe(3);
  });

  it('a close between the fragments of a message is not a boundary: passed on (that client then reconnects), the stream ends at the next one', async () => {
    const down = new OldStreamEnd();
    down.swallowing = true;
    // A control frame may come between fragments; a message half sent cannot be finished by another owner.
    const chunk = Buffer.concat([text('he', false), close, more('llo'), close]);
    const at = down.follow(chunk, 0, chunk.length);
    expect(at).toBe(chunk.length - close.length);
    expect(await down.ending(5_000)).toBe(true);
  });

  it('the connection gone inside a message: ended, not between messages', async () => {
    const down = new OldStreamEnd();
    down.swallowing = true;
    const half = text('hello').subarray(0, 4);
    expect(down.follow(half, 0, half.length)).toBe(half.length);
    const ending = down.ending(5_000);
    down.gone();
    expect(await ending).toBe(false);
    expect(down.endedBetweenMessages).toBe(false);
  });

  it('no close within the wait: ended where it is, at a boundary', async () => {
    const down = new OldStreamEnd();
    down.swallowing = true;
    expect(await down.ending(10)).toBe(true);
  });
  it('the hold ends a socket: between two messages at once; inside one, the message finishes first and nothing after it passes', () => {
    const idle = new OldStreamEnd();
    const a = text('a');
    idle.follow(a, 0, a.length);
    expect(idle.closeAtBoundary()).toBe(true);
    expect(idle.endedBetweenMessages).toBe(true);
    // Mid-message (a fragment sent, its header split across chunks): the rest of it, then the stream ends.
    const busy = new OldStreamEnd();
    const first = text('he', false);
    busy.follow(first, 0, first.length);
    expect(busy.closeAtBoundary()).toBe(false);
    const rest = Buffer.concat([more('llo'), text('next')]);
    expect(busy.follow(rest, 0, 1)).toBe(1);
    expect(busy.ended).toBe(false);
    expect(busy.follow(rest, 1, rest.length)).toBe(more('llo').length);
    expect(busy.endedBetweenMessages).toBe(true);
    expect(busy.follow(rest, 5, rest.length)).toBe(5);
  });

  it("the backend's own close seen: the hold writes no close of its own after it", () => {
    const down = new OldStreamEnd();
    down.follow(close, 0, close.length);
    expect(down.closeSeen).toBe(true);
    const fresh = new OldStreamEnd();
    const a = text('a');
    fresh.follow(a, 0, a.length);
    expect(fresh.closeSeen).toBe(false);
  });
});
