// The native relay hands a followed tunnel back between two messages (NativeRelay.release): what a
// seamless handoff needs of a tunnel it holds. Real sockets, the addon itself, no gateway: the
// client's and the backend's streams are written frame by frame, split where the case needs, and
// what each peer received, what the relay handed back, and when, is checked to the byte.
import { once } from 'node:events';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net, { type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseRelay, NativeRelay, readAgain, type NativeEnd, type Released } from '../../src/proxy/native-relay.js';
import { withinOf } from '../support/within.js';

const WAIT_MS = 5_000;

/** A masked client frame (RFC 6455 5.2): text unless `opcode`; `fin` false for a fragment. */
function clientFrame(payload: string, o: { opcode?: number; fin?: boolean } = {}): Buffer {
  const body = Buffer.from(payload);
  const mask = Buffer.from([1, 2, 3, 4]);
  const head = body.length < 126 ? Buffer.from([(o.fin === false ? 0 : 0x80) | (o.opcode ?? 1), 0x80 | body.length]) : Buffer.from([(o.fin === false ? 0 : 0x80) | (o.opcode ?? 1), 0x80 | 126, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([head, mask, Buffer.from(body.map((b, i) => b ^ (mask[i % 4] as number)))]);
}
/** An unmasked server frame. */
function serverFrame(payload: string): Buffer {
  const body = Buffer.from(payload);
  return Buffer.concat([Buffer.from([0x81, body.length]), body]);
}

const within = withinOf(WAIT_MS);

/** Two connected TCP pairs: the client peer and the relay's client side, the relay's backend side and the backend peer. */
async function pair(server: net.Server): Promise<[Socket, Socket]> {
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const a = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  await once(a, 'connect');
  const [b] = await accepted;
  return [a, b];
}

/** Bytes a socket received, and a wait for a length. */
function received(s: Socket): { bytes: () => Buffer; atLeast: (n: number, what: string) => Promise<void> } {
  const chunks: Buffer[] = [];
  let total = 0;
  const waiters: { n: number; go: () => void }[] = [];
  s.on('data', (c: Buffer) => {
    chunks.push(c);
    total += c.length;
    for (const w of waiters.filter((x) => total >= x.n)) w.go();
  });
  return {
    bytes: () => Buffer.concat(chunks),
    atLeast: (n, what) => (total >= n ? Promise.resolve() : within(new Promise<void>((go) => waiters.push({ n, go })), what)),
  };
}


/**
 * What a released tunnel delivered to one peer: the bytes that peer read plus what the relay handed
 * back as still owed to it. The relay sends before it reports the release, but the peer's read and
 * the `released` event are two events on this one loop and may come in either order (they did under
 * AddressSanitizer): so wait for the delivered part, then compare the whole.
 */
async function deliveredTo(peer: ReturnType<typeof received>, owed: Buffer | null, expected: Buffer, what: string): Promise<Buffer> {
  const owedLength = owed?.length ?? 0;
  await peer.atLeast(expected.length - owedLength, what);
  return Buffer.concat([peer.bytes(), owed ?? Buffer.alloc(0)]);
}

/** This process's epoll sets: each one's descriptor, and the descriptors it holds with the events it watches on each (from /proc/self/fdinfo). */
function pollSets(): Map<number, Map<number, number>> {
  const sets = new Map<number, Map<number, number>>();
  for (const name of readdirSync('/proc/self/fd')) {
    let info = '';
    try {
      if (readlinkSync(`/proc/self/fd/${name}`) !== 'anon_inode:[eventpoll]') continue;
      info = readFileSync(`/proc/self/fdinfo/${name}`, 'utf8');
    } catch {
      continue; // closed meanwhile
    }
    sets.set(Number(name), new Map([...info.matchAll(/^tfd:\s+(\d+)\s+events:\s+([0-9a-f]+)/gm)].map((m) => [Number(m[1]), parseInt(m[2] as string, 16)])));
  }
  return sets;
}

/** Node's own epoll set (its descriptor): the one that holds this file's listening socket. */
function loopPoll(sets = pollSets()): number {
  const listening = fdOf(server as unknown as Socket);
  const found = [...sets].find(([, fds]) => fds.has(listening));
  if (found === undefined) throw new Error("no epoll set holds the listening socket: cannot tell Node's loop's");
  return found[0];
}

/** Whether an epoll set other than Node's holds `fd` and reads it (EPOLLIN). */
function relayReads(fd: number): boolean {
  const sets = pollSets();
  const loop = loopPoll(sets);
  return [...sets].some(([ep, fds]) => ep !== loop && ((fds.get(fd) ?? 0) & 0x1) !== 0);
}

/**
 * Asks for the tunnel back and waits until the relay thread has taken the ask: the side already
 * between two messages (`atBoundary`, its lent descriptor) is no longer read. release() only
 * queues the ask; bytes that reach the relay before its thread takes it are relayed (the release
 * is at the first boundary after that), so a case that writes past a boundary waits for this first.
 */
async function releaseTaken(t: { id: number }, atBoundary: Socket): Promise<void> {
  const fd = fdOf(atBoundary);
  await until(() => relayReads(fd), 'the relay reading the side at a boundary before the release');
  expect(relay.release(t.id)).toBe(true);
  await until(() => !relayReads(fd), 'the relay thread taking the release');
}

/** Resolves once check() holds (polled every 10 ms), or rejects after WAIT_MS. */
async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const fdOf = (s: Socket): number => (s as unknown as { _handle: { fd: number } })._handle.fd;

const server = net.createServer();
const open: Socket[] = [];
let relay: NativeRelay;
beforeAll(async () => {
  const choice = chooseRelay('native');
  relay = new NativeRelay(choice.addon as NonNullable<typeof choice.addon>, 20);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  relay.stop();
  for (const s of open) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

/** A followed tunnel on the relay: the peers, the relay's sockets (lent), and what the host hears. */
async function tunnel(): Promise<{ client: Socket; backend: Socket; relayClient: Socket; relayBackend: Socket; atBackend: ReturnType<typeof received>; atClient: ReturnType<typeof received>; released: Promise<Released>; ended: Promise<NativeEnd>; id: number }> {
  const [client, relayClient] = await pair(server);
  const [relayBackend, backend] = await pair(server);
  open.push(client, relayClient, relayBackend, backend);
  for (const s of [client, relayClient, relayBackend, backend]) s.on('error', () => undefined);
  // The relay's two sockets are lent: read-stopped here (as a tunnel does), kept open until the relay let go.
  relayClient.pause();
  relayBackend.pause();
  let onReleased!: (r: Released) => void;
  let onEnded!: (e: NativeEnd) => void;
  const released = new Promise<Released>((r) => (onReleased = r));
  const ended = new Promise<NativeEnd>((r) => (onEnded = r));
  const id = relay.adopt(
    { nativeReleased: onReleased, nativeEnded: (e) => onEnded(e) },
    { client: relayClient, backend: relayBackend, toBackend: null, toClient: Buffer.alloc(0), silenceMs: 0, idleMs: 0, writeTimeoutMs: 0, lingerMs: 5_000, follow: true },
  );
  return { client, backend, relayClient, relayBackend, atBackend: received(backend), atClient: received(client), released, ended, id };
}

describe('NativeRelay.release: a followed tunnel handed back between two messages', () => {
  it('a client message in flight goes through whole; what comes after it is handed back, not relayed', async () => {
    const t = await tunnel();
    const a = clientFrame('first message');
    const b = clientFrame('second message, sent in two parts');
    const c = clientFrame('after the boundary');
    t.client.write(Buffer.concat([a, b.subarray(0, 5)]));
    await t.atBackend.atLeast(a.length + 5, 'the first message and a part of the second relayed');
    await releaseTaken(t, t.relayBackend);
    // The second message ends inside this write; the third follows it in the same chunk.
    t.client.write(Buffer.concat([b.subarray(5), c]));
    const r = await within(t.released, 'the release');
    expect(await deliveredTo(t.atBackend, r.owedBackend, Buffer.concat([a, b]), 'the second message, whole')).toEqual(Buffer.concat([a, b]));
    expect(r.pastClient).toEqual(c);
    expect(r.pastBackend).toBeNull();
    expect(r.client).toEqual({ broken: false, closeSeen: false });
    // Released: the relay reads neither side any more.
    t.client.write(clientFrame('later'));
    t.backend.write(serverFrame('later too'));
    await new Promise((res) => setTimeout(res, 100));
    expect(t.atBackend.bytes()).toEqual(Buffer.concat([a, b]));
    expect(t.atClient.bytes().length).toBe(0);
  });

  it('a fragmented message with a ping between its fragments is at a boundary only after its last fragment', async () => {
    const t = await tunnel();
    const part1 = clientFrame('frag-1 ', { fin: false });
    const ping = clientFrame('', { opcode: 9 });
    const part2 = clientFrame('frag-2', { opcode: 0, fin: true });
    const next = clientFrame('next');
    t.client.write(Buffer.concat([part1, ping]));
    await t.atBackend.atLeast(part1.length + ping.length, 'the first fragment and the ping');
    await releaseTaken(t, t.relayBackend);
    t.client.write(Buffer.concat([part2, next]));
    const r = await within(t.released, 'the release');
    expect(await deliveredTo(t.atBackend, r.owedBackend, Buffer.concat([part1, ping, part2]), 'the last fragment')).toEqual(Buffer.concat([part1, ping, part2]));
    expect(r.pastClient).toEqual(next);
  });

  it("the backend's direction too: its message in flight reaches the client whole, the rest is handed back", async () => {
    const t = await tunnel();
    const m = serverFrame('state update one');
    const n = serverFrame('state update two');
    t.backend.write(m.subarray(0, 4));
    await t.atClient.atLeast(4, 'a part of the backend message');
    await releaseTaken(t, t.relayClient);
    t.backend.write(Buffer.concat([m.subarray(4), n]));
    const r = await within(t.released, 'the release');
    expect(await deliveredTo(t.atClient, r.owedClient, m, 'the backend message, whole')).toEqual(m);
    expect(r.pastBackend).toEqual(n);
    expect(r.pastClient).toBeNull();
  });

  it('a close frame the client sent is remembered; a length no peer may send leaves the stream unfollowable, released at once', async () => {
    const t = await tunnel();
    const close = clientFrame('\x03\xe8', { opcode: 8 });
    // 127: a 64-bit length with its top bit set (RFC 6455 5.2 forbids it).
    const bad = Buffer.from([0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4]);
    t.backend.write(serverFrame('x'));
    t.client.write(close);
    await t.atBackend.atLeast(close.length, 'the close frame');
    await t.atClient.atLeast(3, 'the backend frame');
    t.backend.write(bad);
    await t.atClient.atLeast(3 + bad.length, 'the bad header relayed');
    expect(relay.release(t.id)).toBe(true);
    const r = await within(t.released, 'the release');
    expect(r.client).toEqual({ broken: false, closeSeen: true });
    expect(r.backend).toEqual({ broken: true, closeSeen: false });
  });

  it("a lent descriptor is in the relay's poll set only, and Node's loop watches it again once handed back", async () => {
    const t = await tunnel();
    const lent = [fdOf(t.relayClient), fdOf(t.relayBackend)];
    // The relay thread registers them once woken: wait for an epoll set other than Node's to hold both.
    const elsewhere = (fd: number): boolean => {
      const sets = pollSets();
      const loop = loopPoll(sets);
      return [...sets].some(([ep, fds]) => ep !== loop && fds.has(fd));
    };
    await until(() => lent.every(elsewhere), 'the relay holding both descriptors');
    // Left in Node's epoll set too, each tunnel's first byte would wake the JavaScript thread for nothing.
    const sets = pollSets();
    const loop = sets.get(loopPoll(sets));
    expect(lent.filter((fd) => loop?.has(fd))).toEqual([]);
    t.client.write(clientFrame('through the relay'));
    await t.atBackend.atLeast(clientFrame('through the relay').length, 'a message relayed');
    expect(relay.release(t.id)).toBe(true);
    await within(t.released, 'the release');
    // Handed back: Node's loop registers the descriptor anew when it reads again.
    const back = received(t.relayClient);
    readAgain(t.relayClient);
    t.relayClient.resume(); // paused by tunnel() (as a stream), not only read-stopped
    t.client.write(clientFrame('read by Node again'));
    await back.atLeast(clientFrame('read by Node again').length, "the client's next message read by Node");
    const after = pollSets();
    expect(after.get(loopPoll(after))?.has(lent[0] as number)).toBe(true);
  });

  it('a tunnel that ends while its release waits for a boundary is told closed, and a tunnel not followed cannot be released', async () => {
    const t = await tunnel();
    t.client.write(clientFrame('never finished').subarray(0, 6));
    await t.atBackend.atLeast(6, 'a part of a message');
    expect(relay.release(t.id)).toBe(true);
    // The client leaves mid-message: the release is abandoned, its FIN passed on, the tunnel ends.
    t.backend.write(serverFrame('kept'));
    t.client.destroy();
    expect(await within(t.ended, 'the end')).toMatch(/^client-(eof|error)$/);
    expect(relay.release(t.id)).toBe(false);
  });
});
