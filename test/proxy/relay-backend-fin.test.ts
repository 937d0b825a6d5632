// A divergence the differential fuzz (relay-differential.test.ts) found between the two relays,
// pinned here: after the backend's FIN, what the client still sends. The contract is the
// JavaScript relay's: the backend's end ends the tunnel (its socket is not allowHalfOpen, so Node
// ends the gateway's writing side on the backend's FIN); the client gets every byte and a FIN, and
// a linger to close, and what it sends meanwhile reaches no one. A WebSocket server closes its
// connection after the close handshake, so nothing the client could still send is for it. The
// native relay kept relaying client -> backend (a true half-close) until it was made to agree:
// it now ends the tunnel once the client has its bytes and FIN (native/relay.cc, Done()).
import net, { type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { bothRelaysFor } from '../support/in-process-gateway.js';

const ANSWER_101 = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';
const handshake = (path: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: game.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
const WAIT_MS = 8_000;
const AFTER_FIN = 5_000;

const backendSockets = new Set<Socket>();
const arrivals = new Map<string, (s: Socket) => void>();
const backend = net.createServer({ allowHalfOpen: true }, (socket) => {
  backendSockets.add(socket);
  socket.on('close', () => backendSockets.delete(socket));
  socket.on('error', () => undefined);
  let head = '';
  const onData = (d: Buffer): void => {
    head += d.toString('latin1');
    if (!head.includes('\r\n\r\n')) return;
    socket.off('data', onData);
    socket.write(ANSWER_101, 'latin1');
    arrivals.get(head.split(' ', 2)[1] ?? '')?.(socket);
  };
  socket.on('data', onData);
});
const clients = new Set<Socket>();
const gw = bothRelaysFor(backend, backendSockets, clients);

function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${WAIT_MS} ms`)), WAIT_MS)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Backend FIN, then the client sends AFTER_FIN bytes and ends: what the backend read, how the client ended. */
async function afterBackendFin(relay: 'javascript' | 'native'): Promise<{ backendRead: number; clientEnd: string }> {
  const path = `/ws/live/backend-fin-${relay}`;
  const arrived = new Promise<Socket>((resolve) => arrivals.set(path, resolve));
  const c = net.connect({ port: gw[relay].port, host: '127.0.0.1', allowHalfOpen: true });
  clients.add(c);
  let clientEnd = 'open';
  let head = '';
  const gotFin = new Promise<void>((resolve) => c.on('end', () => resolve()));
  const opened = new Promise<void>((resolve) =>
    c.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      if (head.includes('\r\n\r\n')) resolve();
    }),
  );
  c.on('end', () => (clientEnd = clientEnd === 'open' ? 'fin' : clientEnd));
  c.on('error', (err: NodeJS.ErrnoException) => (clientEnd = clientEnd === 'open' ? `error ${err.code}` : `${clientEnd}, then error ${err.code}`));
  c.write(handshake(path));
  const b = await within(arrived, 'the handshake at the backend');
  await within(opened, 'the 101 at the client');
  let backendRead = 0;
  b.on('data', (d: Buffer) => (backendRead += d.length));
  const backendDone = new Promise<void>((resolve) => b.on('end', () => resolve()).on('close', () => resolve()));
  b.end();
  await within(gotFin, "the backend's FIN at the client");
  c.end(Buffer.alloc(AFTER_FIN, 0x61));
  await within(backendDone, "the client's FIN (or the connection's end) at the backend");
  // The bytes, were they relayed, came before the FIN.
  return { backendRead, clientEnd };
}

describe("after the backend's FIN", () => {
  it('the client bytes still sent reach no one, on both relays alike; the client is told by a FIN', async () => {
    const native = await afterBackendFin('native');
    const js = await afterBackendFin('javascript');
    expect(native).toEqual({ backendRead: 0, clientEnd: 'fin' });
    expect({ javascript: js }, `native: ${JSON.stringify(native)}`).toEqual({ javascript: native });
  });
});
