// proxy.websocketClientSilenceMs closes a WebSocket "whose client sent nothing" (docs/security.md).
// The sweep hears a client by its reads; but the tunnel itself stops reading the client while the
// backend does not take what it sent (backpressure). A client that keeps sending to a backend
// that is slow to read was then closed as silent, and counted as a vanished client.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { startGateway, stopAll, withTimeout, type GatewayProc } from '../support/processes.js';

const SILENCE_MS = 1_000;
let gw: GatewayProc;
const held = new Set<net.Socket>();
/** A backend that accepts the upgrade and then reads nothing of the socket (a slow consumer). */
const backend = http.createServer((_req, res) => res.writeHead(200).end('page'));
backend.on('upgrade', (_req, socket: net.Socket) => {
  held.add(socket);
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n');
  socket.pause();
});

beforeAll(async () => {
  const url = await listenOnLoopback(backend);
  gw = await startGateway({
    backends: [`b1=${url}`],
    config: { health: { path: null }, proxy: { websocketClientSilenceMs: SILENCE_MS, clientWriteTimeoutMs: 0 } },
  });
}, 30_000);

afterAll(async () => {
  await stopAll();
  for (const s of held) s.destroy();
  await closeServer(backend);
});

it('a client that keeps sending while its backend is slow to read is not closed as silent', async () => {
  const client = net.connect(gw.port, '127.0.0.1');
  let closedAt = 0;
  const closed = new Promise<void>((resolve) => client.on('close', () => resolve(void (closedAt = Date.now()))));
  client.on('error', () => {});
  let answer = '';
  await withTimeout(
    new Promise<void>((resolve) => {
      client.on('data', (d: Buffer) => {
        answer += d.toString('latin1');
        if (answer.includes('\r\n\r\n')) resolve();
      });
      client.write(
        'GET /ws/live/?room=silence-1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
    }),
    5_000,
    'the 101',
  );
  expect(answer).toMatch(/^HTTP\/1.1 101/);
  // The client sends all along (a chunk every 20 ms, until its own buffer holds 32 MB): never silent.
  const start = Date.now();
  const chunk = Buffer.alloc(256 * 1024, 0x61);
  const sender = setInterval(() => {
    if (!client.destroyed && client.writableLength < 32 * 1024 * 1024) client.write(chunk);
  }, 20);
  try {
    await Promise.race([closed, new Promise((r) => setTimeout(r, 4 * SILENCE_MS))]);
  } finally {
    clearInterval(sender);
  }
  const lived = (closedAt || Date.now()) - start;
  client.destroy();
  expect(lived, 'the tunnel was closed while its client was sending').toBeGreaterThanOrEqual(4 * SILENCE_MS - 50);
}, 30_000);
