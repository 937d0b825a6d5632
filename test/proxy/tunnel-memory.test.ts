// What an open tunnel keeps for the socket's life is memory per socket (docs/performance.md,
// "Memory per busy socket"): nothing of its handshake may stay reachable once the 101 has been
// relayed. A handshake kept whole (the request's IncomingMessage, or the forwarded handshake text,
// a string built line by line) was 3 KB of heap per tunnel, a third of the memory target.
//
// In process: a gateway on each front (byte-level and node:http) in front of a raw backend that
// answers 101 and keeps nothing of what it read. The client's handshake carries a header value
// found nowhere else; after the tunnel opened, a heap snapshot of this process (V8 collects
// garbage first) must hold no string containing it.
import net, { type Socket } from 'node:net';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { getHeapSnapshot } from 'node:v8';
import { describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { bothFrontsFor } from '../support/in-process-gateway.js';

const ANSWER_101 = Buffer.from('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n', 'latin1');
const WAIT_MS = 10_000;
const sockets = new Set<Socket>();

function track(s: Socket): Socket {
  sockets.add(s);
  s.on('error', () => undefined);
  s.on('close', () => sockets.delete(s));
  return s;
}

// Reads bytes only (no string of them is made) until the blank line, then answers 101.
const backend = net.createServer((socket) => {
  track(socket);
  let tail = 0;
  const onData = (chunk: Buffer): void => {
    for (const byte of chunk) {
      tail = byte === (tail % 2 === 0 ? 13 : 10) ? tail + 1 : byte === 13 ? 1 : 0;
      if (tail === 4) {
        socket.off('data', onData);
        socket.write(ANSWER_101);
        return;
      }
    }
  };
  socket.on('data', onData);
});

const gateways = bothFrontsFor(backend, sockets);

/** Opens a tunnel whose handshake carries `marker` (hex) as bytes only; resolves at its 101. */
async function openTunnel(gw: Gateway, marker: Buffer): Promise<Socket> {
  const c = track(net.connect(gw.port, '127.0.0.1'));
  c.write(
    Buffer.concat([
      Buffer.from('GET /ws/live/ HTTP/1.1\r\nHost: game.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Trace: ', 'latin1'),
      marker,
      Buffer.from('\r\n\r\n', 'latin1'),
    ]),
  );
  let timer: NodeJS.Timeout | undefined;
  try {
    const [chunk] = (await Promise.race([once(c, 'data'), new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`no 101 within ${WAIT_MS} ms`)), WAIT_MS)))])) as [Buffer];
    expect(chunk.subarray(0, 12).toString('latin1')).toBe('HTTP/1.1 101');
  } finally {
    clearTimeout(timer);
  }
  return c;
}

/** Whether any string in this process's heap (after a full collection) contains `needle`. */
async function heapHolds(needle: Buffer): Promise<boolean> {
  let found = false;
  let carry = Buffer.alloc(0);
  for await (const chunk of getHeapSnapshot()) {
    const b = Buffer.concat([carry, chunk as Buffer]);
    if (b.includes(needle)) found = true;
    carry = b.subarray(Math.max(0, b.length - needle.length));
  }
  return found;
}

describe.each(['lean', 'node'] as const)('on the %s front', (front) => {
  it('an open tunnel keeps nothing of its handshake (no request, no forwarded handshake text)', { timeout: 60_000 }, async () => {
    const marker = Buffer.from(randomBytes(16).toString('hex'), 'latin1');
    const c = await openTunnel(gateways[front], marker);
    expect((await gateways[front].metrics.liveSockets.get()).values.reduce((n, v) => n + v.value, 0)).toBeGreaterThan(0);
    expect(await heapHolds(marker)).toBe(false);
    c.destroy();
  });
});
