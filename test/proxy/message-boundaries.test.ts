// The message-boundary follower (src/proxy/message-boundaries.ts): every boundary of a stream of
// frames is found, whatever the segmentation, without unmasking; fragments with control frames
// between them are one message; the 16- and 64-bit lengths; a length no peer may send gives up.
// Then the frames of the real `ws` library, captured off a real socket between a ws client and a
// ws server, fragmented messages and pings included.
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { MessageBoundaries } from '../../src/proxy/message-boundaries.js';

interface Frame {
  fin: boolean;
  opcode: number;
  length: number;
  masked: boolean;
}

function encode(f: Frame): Buffer {
  const ext = f.length < 126 ? 0 : f.length < 65536 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + (f.masked ? 4 : 0));
  head[0] = (f.fin ? 0x80 : 0) | f.opcode;
  head[1] = (f.masked ? 0x80 : 0) | (ext === 0 ? f.length : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(f.length, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(f.length), 2);
  if (f.masked) head.writeUInt32BE(0xa1b2c3d4, 2 + ext);
  // A payload that looks like frame headers, so a follower that reads into payloads is caught.
  return Buffer.concat([head, Buffer.alloc(f.length, 0x81)]);
}

/** A random stream of messages (some fragmented, control frames between fragments) and its boundaries. */
function stream(seed: number, messages: number): { bytes: Buffer; boundaries: number[] } {
  let s = seed;
  const rand = (n: number): number => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
  const lengths = [0, 1, 5, 125, 126, 127, 300, 65535, 65536, 70000];
  const parts: Buffer[] = [];
  const boundaries: number[] = [0];
  let at = 0;
  const add = (f: Frame): void => {
    const b = encode(f);
    parts.push(b);
    at += b.length;
  };
  for (let m = 0; m < messages; m++) {
    const masked = rand(2) === 0;
    const fragments = 1 + rand(3);
    for (let i = 0; i < fragments; i++) {
      add({ fin: i === fragments - 1, opcode: i === 0 ? 1 + rand(2) : 0, length: lengths[rand(lengths.length)] as number, masked });
      // A ping between fragments (not after the last: that one is after the boundary).
      if (i < fragments - 1 && rand(2) === 0) add({ fin: true, opcode: 9, length: rand(126), masked });
    }
    boundaries.push(at);
    // A pong between messages: a boundary before and after it.
    if (rand(4) === 0) {
      add({ fin: true, opcode: 10, length: rand(10), masked });
      boundaries.push(at);
    }
  }
  return { bytes: Buffer.concat(parts), boundaries };
}

/** Every boundary the follower reports, feeding `bytes` in chunks cut at `cuts`. */
function found(bytes: Buffer, cuts: number[]): number[] {
  const f = new MessageBoundaries();
  const out = new Set<number>();
  const edges = [0, ...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b), bytes.length];
  for (let k = 0; k + 1 < edges.length; k++) {
    let from = edges[k] as number;
    const to = edges[k + 1] as number;
    if (f.atBoundary) out.add(from);
    // Ask for the next boundary repeatedly: each answer is one, then follow on from it.
    while (from < to) {
      const b = f.follow(bytes, from, to, true);
      if (b === -1) break;
      expect(b).toBeGreaterThan(from);
      out.add(b);
      from = b;
    }
    if (f.atBoundary) out.add(to);
  }
  return [...out].sort((a, b) => a - b);
}

describe('message boundaries', () => {
  it('finds every boundary of a stream in one chunk, and nothing inside a message', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { bytes, boundaries } = stream(seed, 40);
      expect(found(bytes, []), `seed ${seed}`).toEqual(boundaries);
    }
  });

  it('finds the same boundaries however the stream is cut (one byte at a time, random cuts)', () => {
    const { bytes, boundaries } = stream(7, 12);
    const small = bytes.length < 400_000 ? Array.from({ length: bytes.length }, (_, i) => i) : [];
    if (small.length > 0) expect(found(bytes, small)).toEqual(boundaries);
    let s = 99;
    for (let run = 0; run < 30; run++) {
      const cuts: number[] = [];
      for (let c = 0; c < 200; c++) {
        s = (s * 1103515245 + 12345) & 0x7fffffff;
        cuts.push(s % bytes.length);
      }
      expect(found(bytes, cuts), `run ${run}`).toEqual(boundaries);
    }
    // Cuts inside every header: the header's bytes one by one.
    const headerCuts = boundaries.flatMap((b) => [b + 1, b + 2, b + 3, b + 5, b + 9, b + 11, b + 13]);
    expect(found(bytes, headerCuts)).toEqual(boundaries);
  });

  it('treats the fragments of one message, and the control frames between them, as one message', () => {
    const f = new MessageBoundaries();
    const first = encode({ fin: false, opcode: 1, length: 3, masked: true });
    const ping = encode({ fin: true, opcode: 9, length: 2, masked: true });
    const last = encode({ fin: true, opcode: 0, length: 4, masked: true });
    const all = Buffer.concat([first, ping, last]);
    expect(f.follow(all, 0, first.length + ping.length, true)).toBe(-1);
    expect(f.atBoundary).toBe(false);
    expect(f.follow(all, first.length + ping.length, all.length, true)).toBe(all.length);
    expect(f.atBoundary).toBe(true);
  });

  it('gives up on a 64-bit length with its top bit set (no peer may send it), and stays given up', () => {
    const f = new MessageBoundaries();
    const bad = Buffer.from([0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4]);
    expect(f.follow(bad, 0, bad.length, true)).toBe(-1);
    expect(f.broken).toBe(true);
    const fine = encode({ fin: true, opcode: 1, length: 1, masked: false });
    expect(f.follow(fine, 0, fine.length, true)).toBe(-1);
  });
});

describe('message boundaries of the ws library, off a real socket', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  it('follows what a ws client sends: texts, binaries, fragments, pings; one boundary per message', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await once(wss, 'listening');
    const received: number[] = [];
    wss.on('connection', (ws) => ws.on('message', () => received.push(1)));
    // A relay that keeps the client's bytes after the handshake.
    const captured: Buffer[] = [];
    const relay = net.createServer((client) => {
      const up = net.connect((wss.address() as AddressInfo).port, '127.0.0.1');
      client.on('data', (d) => {
        captured.push(d);
        up.write(d);
      });
      up.on('data', (d) => client.write(d));
      client.on('close', () => up.destroy());
      up.on('close', () => client.destroy());
    });
    relay.listen(0, '127.0.0.1');
    await once(relay, 'listening');
    closers.push(async () => {
      relay.close();
      wss.close();
    });
    const ws = new WebSocket(`ws://127.0.0.1:${(relay.address() as AddressInfo).port}/`, { perMessageDeflate: false });
    await once(ws, 'open');
    const sends: Promise<void>[] = [];
    const send = (data: string | Buffer, opts: { fin?: boolean; binary?: boolean } = {}): void => {
      sends.push(new Promise((resolve, reject) => ws.send(data, opts, (err) => (err ? reject(err) : resolve()))));
    };
    send('hello');
    send(Buffer.alloc(70_000, 1), { binary: true });
    send('part one, ', { fin: false });
    ws.ping('between');
    send('part two', { fin: true });
    send('x'.repeat(300));
    await Promise.all(sends);
    await expect.poll(() => received.length, { timeout: 5_000 }).toBe(4);
    ws.close();
    await once(ws, 'close');
    const bytes = Buffer.concat(captured);
    const bodyStart = bytes.indexOf('\r\n\r\n') + 4;
    const f = new MessageBoundaries();
    let messages = 0;
    for (let i = bodyStart; i < bytes.length; ) {
      const b = f.follow(bytes, i, bytes.length, true);
      if (b === -1) break;
      messages++;
      i = b;
    }
    // 4 messages and the client's close frame (a control frame between messages has a boundary on
    // each side); the ping sent between the two fragments is inside a message, so not a boundary.
    expect(messages).toBe(5);
    expect(f.atBoundary).toBe(true);
  });
});
