// The tunnel contract, one suite for both relays (proxy.relay: javascript and native): what an open
// WebSocket tunnel does with bytes and ends, whichever relay carries it (docs/architecture.md, "The
// native relay"). Each case runs against an in-process gateway on each relay in front of one raw
// TCP backend that answers every handshake with a 101 and then does what the case's path says.
// The native relay must be built (npm ci / the pretest build it): a machine where it cannot be
// fails here, saying why, rather than testing one relay twice.
import { createHash } from 'node:crypto';
import net, { type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { chooseRelay } from '../../src/proxy/native-relay.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { withinOf } from '../support/within.js';
import { scopeTempDir } from '../support/temp-dir.js';

const ANSWER_101 = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';
const handshake = (path: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: game.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
const WAIT_MS = 12_000;
const RELAYS = ['javascript', 'native'] as const;
type Relay = (typeof RELAYS)[number];

const onHead = new Map<string, (s: Socket, rest: Buffer) => void>();
const backendSockets = new Set<Socket>();
const backend = net.createServer({ allowHalfOpen: true }, (socket) => {
  socket.on('error', () => undefined);
  backendSockets.add(socket);
  socket.on('close', () => backendSockets.delete(socket));
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end === -1) return;
    socket.off('data', onData);
    socket.pause();
    const path = head.toString('latin1').split(' ', 2)[1] ?? '';
    onHead.get(path)?.(socket, head.subarray(end + 4));
  };
  socket.on('data', onData);
});

const within = withinOf(WAIT_MS);

const dir = scopeTempDir('roomgate-tunnel-contract-');
let backendUrl = '';
const started: Gateway[] = [];
const byKey = new Map<string, Promise<Gateway>>();

/** A gateway on `relay` with these proxy settings (one per distinct setting, stopped after the file). */
function gateway(relay: Relay, proxy: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<Gateway> {
  const key = JSON.stringify([relay, proxy, extra]);
  let g = byKey.get(key);
  if (g === undefined) {
    g = startInProcessGateway(dir, backendUrl, { health: { path: null }, proxy: { relay, websocketPaths: ['/ws/'], ...proxy }, ...extra }).then((gw) => {
      started.push(gw);
      return gw;
    });
    byKey.set(key, g);
  }
  return g;
}

beforeAll(async () => {
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  backendUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await Promise.all(started.map((g) => g.stop()));
  for (const s of backendSockets) s.destroy();
  await new Promise<void>((resolve) => backend.close(() => resolve()));
});

let paths = 0;
/** A fresh path and the backend's socket for it once its handshake is read (`answer` written first). */
function route(answer: string | Buffer = ANSWER_101): { path: string; upstream: Promise<{ socket: Socket; early: Buffer }> } {
  const path = `/ws/contract/${++paths}`;
  const upstream = new Promise<{ socket: Socket; early: Buffer }>((resolve) =>
    onHead.set(path, (socket, early) => {
      socket.write(answer);
      resolve({ socket, early });
    }),
  );
  return { path, upstream };
}

/**
 * Everything a socket reads, with promises for its FIN (`ended`) and for being cut (`closed`: a
 * FIN, a reset or a close, whichever comes first; these sockets are half-open, so a FIN from the
 * gateway is what they see of a close).
 */
function collect(s: Socket): { bytes: () => Buffer; ended: Promise<unknown>; closed: Promise<unknown>; gone: Promise<unknown>; until: (n: number, what: string) => Promise<void> } {
  const chunks: Buffer[] = [];
  let total = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  s.on('data', (c: Buffer) => {
    chunks.push(c);
    total += c.length;
    for (const w of waiters.filter((x) => total >= x.n)) w.resolve();
  });
  return {
    bytes: () => Buffer.concat(chunks),
    ended: new Promise((resolve) => s.once('end', resolve)),
    closed: new Promise((resolve) => {
      s.once('end', resolve);
      s.once('close', resolve);
      s.once('error', resolve);
    }),
    gone: new Promise((resolve) => s.once('close', resolve)),
    until: (n, what) => (total >= n ? Promise.resolve() : within(new Promise<void>((resolve) => waiters.push({ n, resolve })), what)),
  };
}

function client(gw: Gateway, path: string, behind: Buffer | string = ''): Socket {
  const c = net.connect({ port: gw.port, host: '127.0.0.1', allowHalfOpen: true });
  c.on('error', () => undefined);
  c.write(Buffer.concat([Buffer.from(handshake(path), 'latin1'), Buffer.from(behind)]));
  return c;
}

/** An open tunnel through `gw`: the client and the backend's connection, each read whole, the 101 read. */
async function opened(gw: Gateway): Promise<{ c: Socket; got: ReturnType<typeof collect>; b: Socket; atBackend: ReturnType<typeof collect> }> {
  const { path, upstream } = route();
  const c = client(gw, path);
  const got = collect(c);
  const { socket: b } = await within(upstream, 'the handshake');
  const atBackend = collect(b);
  b.resume();
  await got.until(ANSWER_101.length, 'the 101');
  return { c, got, b, atBackend };
}

async function live(gw: Gateway): Promise<number> {
  return (await gw.metrics.liveSockets.get()).values.reduce((n, v) => n + v.value, 0);
}
async function counted(gw: Gateway, relay: Relay): Promise<number> {
  return (await gw.metrics.relayTunnels.get()).values.find((v) => v.labels.relay === relay)?.value ?? 0;
}
async function clientErrors(gw: Gateway, code: string): Promise<number> {
  return (await gw.metrics.clientErrors.get()).values.find((v) => v.labels.code === code)?.value ?? 0;
}
/** Polls `read` until it gives `want` (a gauge the relay's end moves on the JavaScript thread). */
async function eventually<T>(read: () => Promise<T>, want: T, what: string): Promise<void> {
  const until = Date.now() + WAIT_MS;
  for (;;) {
    const v = await read();
    if (v === want) return;
    if (Date.now() > until) throw new Error(`${what}: ${String(v)}, not ${String(want)}, after ${WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
function bytesOf(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

it('the native relay is built on this machine (else the native half of this suite would test JavaScript)', () => {
  expect(() => chooseRelay('native')).not.toThrow();
});

describe.each(RELAYS)('on the %s relay', (relay) => {
  it('carries the bytes both ways: early bytes behind the handshake and behind the 101, megabytes against a slow reader', async () => {
    const gw = await gateway(relay);
    const before = await counted(gw, relay);
    const behind101 = bytesOf(3_000, 7);
    const { path, upstream } = route(Buffer.concat([Buffer.from(ANSWER_101, 'latin1'), behind101]));
    const early = bytesOf(1_500, 3);
    const c = client(gw, path, early);
    const got = collect(c);
    const { socket: b, early: atBackend } = await within(upstream, 'the handshake at the backend');
    const fromClient = collect(b);
    if (atBackend.length > 0) b.unshift(atBackend);
    b.resume();
    await got.until(ANSWER_101.length + behind101.length, 'the 101 and the bytes behind it');
    expect(got.bytes().subarray(0, ANSWER_101.length).toString('latin1')).toMatch(/^HTTP\/1\.1 101 /);
    // 4 MB down against a client that stops reading for a while (back-pressure), 2 MB up.
    const down = bytesOf(4 << 20, 11);
    const up = bytesOf(2 << 20, 13);
    c.pause();
    b.write(down);
    for (let i = 0; i < up.length; i += 65_536) c.write(up.subarray(i, i + 65_536));
    await new Promise((r) => setTimeout(r, 200));
    c.resume();
    const headLen = got.bytes().indexOf('\r\n\r\n') + 4;
    await got.until(headLen + behind101.length + down.length, 'the 4 MB at the client');
    await fromClient.until(early.length + up.length, 'the 2 MB at the backend');
    expect(sha(got.bytes().subarray(headLen))).toBe(sha(Buffer.concat([behind101, down])));
    expect(sha(fromClient.bytes())).toBe(sha(Buffer.concat([early, up])));
    expect(await counted(gw, relay)).toBe(before + 1);
    c.destroy();
    b.destroy();
    await eventually(() => live(gw), 0, 'live sockets after the client left');
  });

  it("a client's FIN reaches the backend after its bytes; the backend may still answer; its FIN then ends the tunnel", async () => {
    const gw = await gateway(relay);
    const { c, got, b, atBackend } = await opened(gw);
    c.end('last words');
    await within(atBackend.ended, "the client's FIN at the backend");
    expect(atBackend.bytes().toString()).toBe('last words');
    b.end('goodbye');
    await within(got.ended, "the backend's FIN at the client");
    expect(got.bytes().toString('latin1').endsWith('goodbye')).toBe(true);
    await within(got.gone, 'the client closed');
    await eventually(() => live(gw), 0, 'live sockets');
  });

  it("a backend's FIN reaches the client after its bytes; the client's FIN then ends the tunnel", async () => {
    const gw = await gateway(relay);
    const { c, got, b, atBackend } = await opened(gw);
    b.end('bye');
    await within(got.ended, "the backend's FIN at the client");
    expect(got.bytes().toString('latin1').endsWith('bye')).toBe(true);
    c.end();
    await within(atBackend.closed, 'the backend connection closed');
    await within(got.gone, 'the client closed');
    await eventually(() => live(gw), 0, 'live sockets');
  });

  it('a half-closed tunnel whose other side never ends is cut after the linger (5 s)', async () => {
    const gw = await gateway(relay);
    const { c, got, b, atBackend } = await opened(gw);
    c.end();
    await within(atBackend.ended, "the client's FIN at the backend");
    b.write('still here');
    await within(got.gone, 'the gateway cutting the half-closed tunnel');
    await eventually(() => live(gw), 0, 'live sockets');
  });

  it("a backend's reset closes the client; a client's reset closes the backend", async () => {
    const gw = await gateway(relay);
    for (const who of ['backend', 'client'] as const) {
      const { c, got, b, atBackend } = await opened(gw);
      if (who === 'backend') b.resetAndDestroy();
      else c.resetAndDestroy();
      await within(who === 'backend' ? got.closed : atBackend.closed, `the other side closed after the ${who}'s reset`);
      await eventually(() => live(gw), 0, 'live sockets');
    }
  });

  it('a client that sends nothing for websocketClientSilenceMs is cut, counted websocket-silent; one that sends is not', async () => {
    const gw = await gateway(relay, { websocketClientSilenceMs: 400 });
    const before = await clientErrors(gw, 'websocket-silent');
    const quiet = route();
    const talk = route();
    const q = client(gw, quiet.path);
    const t = client(gw, talk.path);
    const qGot = collect(q);
    const tGot = collect(t);
    const ups: Socket[] = [];
    for (const u of [quiet.upstream, talk.upstream]) ups.push((await within(u, 'the handshake')).socket.resume());
    await qGot.until(ANSWER_101.length, 'the 101');
    await tGot.until(ANSWER_101.length, 'the 101');
    const ping = setInterval(() => t.write('\x89\x00'), 100);
    try {
      await within(qGot.closed, 'the silent client cut');
      expect(t.destroyed).toBe(false);
      expect(await clientErrors(gw, 'websocket-silent')).toBe(before + 1);
    } finally {
      clearInterval(ping);
      t.destroy();
      for (const u of ups) u.destroy();
    }
    await eventually(() => live(gw), 0, 'live sockets');
  });

  it('a tunnel with no byte either way for websocketIdleTimeoutMs is closed', async () => {
    const gw = await gateway(relay, { websocketIdleTimeoutMs: 400, websocketClientSilenceMs: 0 });
    const { got, atBackend } = await opened(gw);
    const t0 = Date.now();
    await within(got.closed, 'the idle tunnel closed');
    await within(atBackend.closed, 'its backend connection closed');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    await eventually(() => live(gw), 0, 'live sockets');
  });

  it('a client that takes no byte for clientWriteTimeoutMs is cut (and its backend), counted write-timeout', async () => {
    const gw = await gateway(relay, { clientWriteTimeoutMs: 400, websocketClientSilenceMs: 0 });
    const before = await clientErrors(gw, 'write-timeout');
    const { c, got, b, atBackend } = await opened(gw);
    c.pause();
    // More than the socket buffers on both sides hold: the gateway's writes stall.
    const chunk = Buffer.alloc(1 << 20, 0x41);
    const flood = setInterval(() => {
      if (!b.destroyed && b.writableLength < 8 << 20) b.write(chunk);
    }, 20);
    try {
      await within(atBackend.closed, 'the backend connection cut');
      // A paused socket sees its reset only once it reads again.
      c.resume();
      await within(got.closed, 'the client cut');
      expect(await clientErrors(gw, 'write-timeout')).toBe(before + 1);
    } finally {
      clearInterval(flood);
    }
    await eventually(() => live(gw), 0, 'live sockets');
  });

  it("a room's tunnels closed by the gateway (its backend removed, shutdown) close both sides", async () => {
    const gw = await gateway(relay, {}, { shutdown: { graceMs: 0 }, admin: { enabled: false } });
    const { got, atBackend } = await opened(gw);
    expect(await live(gw)).toBe(1);
    await gw.stop();
    await within(got.closed, 'the client closed by the shutdown');
    await within(atBackend.closed, 'the backend connection closed by the shutdown');
  });
});
