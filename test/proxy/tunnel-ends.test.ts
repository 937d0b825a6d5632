// Every tunnel ends by its deadlines, whatever state its client leaves in. Under overload (the
// soak, docs/performance.md) clients give up on handshakes the backends answer late: such a client
// sends its FIN while the gateway still waits for the backend. The fronts keep connections
// half-open (allowHalfOpen), so a client 'end' nobody listened to left the socket live, the 101
// then opened a tunnel to nobody, and it stayed counted live until the client-silence sweep (90 s;
// for good before that sweep existed): 21 such tunnels 200 s after a soak's load stopped.
//
// In process: a gateway on each front (the byte-level one and node:http) in front of a raw
// backend that keeps its side open after a FIN (allowHalfOpen), so only the gateway can end what
// the test waits for. The defaults stay (response timeout 60 s, client silence 90 s): none of
// them may be what ends these tunnels.
import net, { type Socket } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { bothFrontsFor } from '../support/in-process-gateway.js';
import { withinOf } from '../support/within.js';

const ANSWER_101 = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';
// The demo backend's first frame ({"type":"connect"}), here in the same write as the 101.
const CONNECT_FRAME = '\x81\x10{"type":"connect"}';
const handshake = (path: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: game.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
// Far above what the gateway needs (one event-loop turn, or the 5 s half-close linger), far
// below the defaults that would otherwise end the tunnel (60 s response timeout, 90 s silence).
const WAIT_MS = 12_000;

/**
 * What the backend does once it has read a handshake's head, by the handshake's path (each test
 * its own: a connection one test left behind cannot take another's). Unknown paths: nothing.
 */
const onHead = new Map<string, (socket: Socket) => void>();
const backendSockets = new Set<Socket>();

const backend = net.createServer({ allowHalfOpen: true }, (socket) => {
  socket.on('error', () => socket.destroy());
  backendSockets.add(socket);
  socket.on('close', () => backendSockets.delete(socket));
  let head = '';
  const onData = (chunk: Buffer): void => {
    head += chunk.toString('latin1');
    if (!head.includes('\r\n\r\n')) return;
    socket.off('data', onData);
    socket.resume();
    onHead.get(head.split(' ', 2)[1] ?? '')?.(socket);
  };
  socket.on('data', onData);
});

const within = withinOf(WAIT_MS);

/** The backend's connection for `path`, once it has read the handshake; `then` answers it. */
function backendFor(path: string, then: (s: Socket) => void = () => undefined): Promise<Socket> {
  return new Promise<Socket>((resolve) =>
    onHead.set(path, (s) => {
      then(s);
      resolve(s);
    }),
  );
}

const gateways = bothFrontsFor(backend, backendSockets);

/** Tunnels the gateway counts live (roomgate_live_sockets, every backend). */
async function live(gw: Gateway): Promise<number> {
  return (await gw.metrics.liveSockets.get()).values.reduce((n, v) => n + v.value, 0);
}

/** A client connection to the gateway with a handshake for `path` written on it. */
function client(gw: Gateway, path: string): Socket {
  const c = net.connect(gw.port, '127.0.0.1');
  c.on('error', () => undefined);
  c.write(handshake(path));
  return c;
}

/** The gateway ended its side of the backend's connection (a FIN, or a reset). */
async function backendEnded(s: Socket, what: string): Promise<void> {
  if (s.readableEnded || s.destroyed) return;
  await within(Promise.race([once(s, 'end'), once(s, 'close')]), what);
}

describe.each(['lean', 'node'] as const)('on the %s front', (front) => {
  it('a client that gives up its handshake (FIN) before the backend answers: the attempt ends at once, nothing stays live', async () => {
    const gw = gateways[front];
    const path = `/ws/live/gives-up-${front}`;
    const conn = backendFor(path);
    const c = client(gw, path);
    const upstream = await within(conn, 'the backend reading the handshake');
    // The backend does not answer; the client, past its own timeout, ends its side.
    c.end();
    await backendEnded(upstream, 'the gateway closing the backend connection of a handshake whose client left');
    await within(once(c, 'close'), 'the gateway closing the client');
    expect(await live(gw)).toBe(0);
  });

  it('a client whose FIN comes right behind its handshake (still being routed, or connecting): closed, nothing stays live', async () => {
    const gw = gateways[front];
    const path = `/ws/live/fin-behind-${front}`;
    // Were the handshake sent on, the backend would answer 101 and its first frame in one write.
    void backendFor(path, (s) => s.write(ANSWER_101 + CONNECT_FRAME, 'latin1'));
    const c = client(gw, path);
    c.end();
    await within(once(c, 'close'), 'the gateway closing the client');
    expect(await live(gw)).toBe(0);
  });

  it('an open tunnel whose client half-closes ends within the half-close linger, though the backend keeps its side open', async () => {
    const gw = gateways[front];
    const path = `/ws/live/half-closed-${front}`;
    const conn = backendFor(path, (s) => s.write(ANSWER_101, 'latin1'));
    // Counted from here: this case fails on its own, whatever the cases before it left live.
    const before = await live(gw);
    const c = client(gw, path);
    let read = '';
    await within(
      new Promise<void>((resolve) =>
        c.on('data', (chunk: Buffer) => {
          read += chunk.toString('latin1');
          if (read.startsWith(ANSWER_101)) resolve();
        }),
      ),
      'the 101',
    );
    expect(await live(gw)).toBe(before + 1);
    const upstream = await conn;
    c.end();
    // The FIN reaches the backend (relayed), which keeps writing and never ends its side.
    await backendEnded(upstream, 'the FIN relayed to the backend');
    upstream.write('\x81\x05still');
    // Only the gateway can end it now: the client is closed (its socket was half-closed until then).
    await within(once(c, 'close'), 'the gateway closing the half-closed tunnel');
    expect(await live(gw)).toBe(before);
  });
});
