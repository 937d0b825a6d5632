// The native relay prototype (bench/experiments/native-relay): built here with g++ from the
// running Node's headers, it relays bytes both ways between real sockets, counts them, closes the
// other side when one closes, tells JavaScript about silence, and leaves no descriptor or thread.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import net, { type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADDON_PATH, NativeRelay, buildAddon, type RelayEvent } from '../../bench/experiments/native-relay/binding.js';

const fds = (): number => readdirSync('/proc/self/fd').length;
/** The relay's threads (relay.cc names them), not whatever pool threads the test runner starts. */
const threads = (): number =>
  readdirSync('/proc/self/task').filter((t) => {
    try {
      return readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim() === 'native-relay';
    } catch {
      return false; // ended in between
    }
  }).length;

function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

async function until(what: string, ok: () => boolean): Promise<void> {
  await within(5_000, what, (async () => {
    while (!ok()) await new Promise((r) => setTimeout(r, 10));
  })());
}

function listen(onSocket: (s: Socket) => void): Promise<Server> {
  const server = net.createServer(onSocket);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const port = (s: Server): number => (s.address() as net.AddressInfo).port;
const closed = (s: Socket): Promise<void> => (s.destroyed && s.closed ? Promise.resolve() : new Promise((r) => s.once('close', () => r())));
const received = (s: Socket): (() => string) => {
  let got = '';
  s.on('data', (d: Buffer) => (got += d.toString('latin1')));
  return () => got;
};

describe('native relay prototype', () => {
  let backendServer: Server;
  let frontServer: Server;
  const backendPeers: Socket[] = [];
  const fronts: Socket[] = [];
  let fds0 = 0;

  beforeAll(async () => {
    // Fails with what to install when g++ or make is missing: the machine this runs on has them.
    buildAddon();
    backendServer = await listen((s) => backendPeers.push(s));
    frontServer = await listen((s) => fronts.push(s));
    fds0 = fds();
    expect(threads()).toBe(0);
  }, 60_000);

  afterAll(async () => {
    for (const s of [...backendPeers, ...fronts]) s.destroy(); // already, unless the test failed
    await Promise.all([backendServer, frontServer].map((s) => new Promise((r) => s.close(r))));
  });

  /** A client connected to the front, and the relay's two sockets: front side, and one to the backend server. */
  async function pair(): Promise<{ client: Socket; front: Socket; toBackend: Socket; peer: () => Socket }> {
    const n = fronts.length;
    const m = backendPeers.length;
    const client = net.connect(port(frontServer), '127.0.0.1');
    const toBackend = net.connect(port(backendServer), '127.0.0.1');
    await within(5_000, 'connections', Promise.all([new Promise((r) => client.once('connect', r)), new Promise((r) => toBackend.once('connect', r))]));
    await until('accepted sockets', () => fronts.length > n && backendPeers.length > m);
    return { client, front: fronts[n]!, toBackend, peer: () => backendPeers[m]! };
  }

  it('relays both ways, counts, closes the other side, tells silence, and leaves nothing', async () => {
    const events: RelayEvent[] = [];
    const relay = new NativeRelay((e) => events.push(e), 20);
    try {
      await exercise(relay, events);
    } finally {
      relay.stop();
    }
    expect(threads()).toBe(0);
    for (const s of [...backendPeers, ...fronts]) s.destroy();
    await until(`descriptors back to ${fds0}`, () => fds() === fds0);
    // The build leaves only build/relay.node (it compiles to a .tmp file and renames it).
    expect(readdirSync(dirname(ADDON_PATH))).toEqual(['relay.node']);
  }, 15_000);

  async function exercise(relay: NativeRelay, events: RelayEvent[]): Promise<void> {
    expect(threads()).toBe(1);

    // 1: bytes both ways, the head handed over with the tunnel, then the client closes.
    const a = await pair();
    const idA = relay.adopt(a.front, a.toBackend, { toBackend: Buffer.from('HEAD') });
    const atPeer = received(a.peer());
    const atClient = received(a.client);
    a.client.write('hello');
    await until('client bytes at the backend', () => atPeer() === 'HEADhello');
    const big = 'x'.repeat(300_000); // more than a socket buffer: the short-write path
    a.peer().write(big);
    await until('backend bytes at the client', () => atClient().length === big.length);
    expect(atClient()).toBe(big);
    expect(relay.counts(idA)).toEqual({ up: 5, down: big.length });
    a.client.end();
    await within(5_000, 'the backend side closing', closed(a.peer()));
    await until('the closed event', () => events.some((e) => e.id === idA && e.kind === 'closed'));
    expect(events.find((e) => e.id === idA)).toEqual({ kind: 'closed', id: idA, side: 'client', up: 5, down: big.length });
    expect(relay.counts(idA)).toBeUndefined();

    // 2: the backend closes: the client side closes.
    const b = await pair();
    const idB = relay.adopt(b.front, b.toBackend);
    b.peer().destroy();
    await within(5_000, 'the client side closing', closed(b.client));
    await until('the closed event', () => events.some((e) => e.id === idB && e.kind === 'closed'));
    expect(events.find((e) => e.id === idB)?.side).toBe('backend');

    // 3: silence is told, and JavaScript closes the tunnel.
    const c = await pair();
    const idC = relay.adopt(c.front, c.toBackend, { silenceMs: 100 });
    await until('the silent event', () => events.some((e) => e.id === idC && e.kind === 'silent'));
    expect(relay.size).toBe(1);
    expect(relay.close(idC)).toBe(true);
    await within(5_000, 'both sides closing', Promise.all([closed(c.client), closed(c.peer())]));
    await until('the closed event', () => events.some((e) => e.id === idC && e.kind === 'closed'));
    expect(events.find((e) => e.id === idC && e.kind === 'closed')?.side).toBe('js');
    expect(relay.close(idC)).toBe(false);

    // 4: stop closes what is left, and the thread ends.
    const d = await pair();
    relay.adopt(d.front, d.toBackend);
    relay.stop();
    await within(5_000, 'stop closing the tunnel', Promise.all([closed(d.client), closed(d.peer())]));
  }
});
