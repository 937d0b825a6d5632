// The addon's health-check connection (native/probe.cc: probeOpen/probeClose, a libuv TCP handle on
// Node's own loop), tested on its own: real sockets on 127.0.0.1 and ::1 to servers written here,
// each event list compared whole. "Nothing after" is proved with a sync point, not a sleep: a
// later probe's event arrives first (the loop went round). What stays open is checked from the
// server's side (its socket ends) and from /proc/self/fd; collection and uncaught exceptions in
// child processes. Every wait has a timeout.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import net, { type AddressInfo, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ProbeAddon } from '../../src/backends/probe-link.js';
import { addonPath, chooseRelay } from '../../src/proxy/native-relay.js';
import { withinOf } from '../support/within.js';

const WAIT_MS = 5_000;
/** A child process whose worker threads start and end (slow under the sanitizers on busy cores). */
const WORKERS_MS = 30_000;
const addon: ProbeAddon = chooseRelay('native').addon!;
const NONE = Buffer.alloc(0);
const [CONNECTED, DATA, END, ERROR] = [0, 1, 2, 3];
type Event = [number] | [number, Buffer | string];

const within = withinOf(WAIT_MS);

/** Resolves once check() holds (polled each turn, then every 5 ms), or rejects after WAIT_MS. */
async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + WAIT_MS;
  for (let i = 0; !check(); i++) {
    if (Date.now() > end) throw new Error(`${what}: not within ${WAIT_MS} ms`);
    await new Promise((r) => (i < 20 ? setImmediate(r) : setTimeout(r, 5)));
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Backend {
  port: number;
  /** Accepted sockets, in order. */
  sockets: Socket[];
  /** The next accepted socket (or one accepted already and not taken yet). */
  accepted(what: string): Promise<Socket>;
  close(): Promise<void>;
}

/** A TCP server on `host`; its sockets are destroyed and it is closed after the test. */
async function backend(host = '127.0.0.1'): Promise<Backend> {
  const sockets: Socket[] = [];
  let taken = 0;
  let arrived = (): void => undefined;
  const server = net.createServer((s) => {
    s.on('error', () => undefined); // a probe closed with unread bytes resets
    sockets.push(s);
    arrived();
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const close = (): Promise<void> =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      if (!server.listening) return r();
      server.close(() => r());
    });
  cleanups.push(close);
  const accepted = (what: string): Promise<Socket> =>
    within(
      new Promise<Socket>((r) => {
        const check = (): void => {
          if (sockets.length > taken) r(sockets[taken++] as Socket);
        };
        arrived = check;
        check();
      }),
      what,
    );
  return { port: (server.address() as AddressInfo).port, sockets, accepted, close };
}

interface Probe {
  handle: object;
  events: Event[];
  /** Resolves with the events once there are at least n. */
  wait(n: number, what: string): Promise<Event[]>;
  close(): void;
}

/** probeOpen, its events recorded (`also` sees each one after); closed after the test in any case. */
function probe(ip: string, port: number, request: Buffer = NONE, also?: (p: Probe, e: Event) => void): Probe {
  const events: Event[] = [];
  let waiter = (): void => undefined;
  const handle = addon.probeOpen(ip, port, request, (kind, arg) => {
    const e: Event = arg === undefined ? [kind] : [kind, arg];
    events.push(e);
    waiter();
    also?.(p, e);
  });
  if (typeof handle === 'string') throw new Error(`probeOpen(${ip}, ${port}): ${handle}`);
  const p: Probe = {
    handle,
    events,
    close: () => addon.probeClose(handle),
    wait: (n, what) =>
      within(
        new Promise<Event[]>((r) => {
          waiter = () => void (events.length >= n && r(events));
          waiter();
        }),
        what,
      ),
  };
  cleanups.push(() => addon.probeClose(handle));
  return p;
}

/** The sync point: a later connect check's event arrives (the loop has gone round since). */
let sync: Backend;
async function loopWentRound(): Promise<void> {
  const later = probe('127.0.0.1', sync.port);
  expect(await later.wait(1, 'the later probe connected')).toEqual([[CONNECTED]]);
  later.close();
}

const fdCount = (): number => readdirSync('/proc/self/fd').length;

/** The descriptors of this process, once the sync server's sides of earlier probes have closed. */
async function settledFdCount(): Promise<number> {
  await until(() => sync.sockets.every((s) => s.destroyed), "the sync server's sides closed");
  return fdCount();
}

/** The server's side of a connection has ended (its 'end', or its 'close' after a reset). */
const ended = (s: Socket, what: string): Promise<void> =>
  s.readableEnded || s.destroyed ? Promise.resolve() : within(new Promise<void>((r) => (s.once('end', r), s.once('close', r))), what);

/** The first `n` bytes the server's side reads. */
function bytesIn(s: Socket, n: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  return within(
    new Promise<Buffer>((r) => {
      const onData = (c: Buffer): void => {
        chunks.push(c);
        if ((total += c.length) < n) return;
        s.off('data', onData);
        r(Buffer.concat(chunks));
      };
      s.on('data', onData);
    }),
    what,
  );
}

beforeAll(async () => {
  sync = await backend();
  cleanups.splice(0); // lives for the whole file: closed in afterAll
});
afterAll(() => sync.close());

describe('native probe: events', () => {
  for (const ip of ['127.0.0.1', '::1']) {
    it(`a connect check on ${ip}: one connected event; closed, the server's side ends and nothing follows`, async () => {
      const b = await backend(ip);
      const p = probe(ip, b.port);
      const server = await b.accepted('the connection accepted');
      expect(await p.wait(1, 'connected')).toEqual([[CONNECTED]]);
      p.close();
      await ended(server, "the server's side ending after probeClose");
      await loopWentRound();
      expect(p.events).toEqual([[CONNECTED]]);
    });
  }

  it('a refused port: one error event, ECONNREFUSED', async () => {
    const b = await backend();
    await b.close();
    const p = probe('127.0.0.1', b.port);
    expect(await p.wait(1, 'the error')).toEqual([[ERROR, 'ECONNREFUSED']]);
    await loopWentRound();
    expect(p.events).toHaveLength(1);
  });

  it('an exchange: the request arrives byte for byte, every chunk of a 48 KiB answer in order (each <= 16 KiB), then one end', async () => {
    const b = await backend();
    const request = Buffer.concat([Buffer.from('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 'latin1'), Buffer.from([0, 255, 13, 10])]);
    const answer = Buffer.from(Array.from({ length: 48 * 1024 + 123 }, (_, i) => (i * 7 + (i >> 8)) & 0xff));
    const p = probe('127.0.0.1', b.port, request);
    const server = await b.accepted('the connection accepted');
    expect(await bytesIn(server, request.length, 'the request')).toEqual(request);
    // Several writes, apart (each after the last one's flush), then the FIN.
    for (let at = 0; at < answer.length; at += 10_000) await new Promise<void>((r) => server.write(answer.subarray(at, at + 10_000), () => r()));
    server.end();
    await until(() => p.events.some(([k]) => k !== DATA), 'the end after the data');
    await loopWentRound();
    const data = p.events.slice(0, -1);
    expect(p.events.at(-1)).toEqual([END]);
    expect(data.every(([k, c]) => k === DATA && Buffer.isBuffer(c) && c.length > 0 && c.length <= 16 * 1024)).toBe(true);
    expect(data.length).toBeGreaterThanOrEqual(3);
    expect(Buffer.concat(data.map(([, c]) => c as Buffer))).toEqual(answer);
  });

  it('a backend that resets after the request: an error event, ECONNRESET', async () => {
    const b = await backend();
    const p = probe('127.0.0.1', b.port, Buffer.from('PING\r\n'));
    const server = await b.accepted('the connection accepted');
    await bytesIn(server, 6, 'the request');
    server.resetAndDestroy();
    expect(await p.wait(1, 'the error')).toEqual([[ERROR, 'ECONNRESET']]);
    await loopWentRound();
    expect(p.events).toHaveLength(1);
  });
});

describe('native probe: probeClose', () => {
  it('closed while connecting: no event ever, the connection (if accepted) ends; closing twice is harmless', async () => {
    const b = await backend();
    const p = probe('127.0.0.1', b.port, Buffer.from('GET / HTTP/1.1\r\n\r\n'));
    const c = probe('127.0.0.1', b.port);
    p.close();
    c.close();
    p.close();
    await loopWentRound();
    await loopWentRound();
    expect(p.events).toEqual([]);
    expect(c.events).toEqual([]);
    for (const s of b.sockets) await ended(s, "an accepted connection's end");
    expect(b.sockets.every((s) => s.bytesRead === 0)).toBe(true);
  });

  it('closed from inside onEvent on the first data: no further event, though more data comes', async () => {
    const b = await backend();
    const p = probe('127.0.0.1', b.port, Buffer.from('x'), (self, [k]) => k === DATA && self.close());
    const server = await b.accepted('the connection accepted');
    await bytesIn(server, 1, 'the request');
    server.write(Buffer.alloc(64 * 1024, 1)); // more than one read's worth, there at once
    await p.wait(1, 'the first data');
    server.write('more');
    server.end();
    await ended(server, "the server's side ending");
    await loopWentRound();
    expect(p.events).toHaveLength(1);
    expect(p.events[0]?.[0]).toBe(DATA);
  });

  it('2,000 probes opened and closed (half at once, half once connected) leave no descriptor behind', async () => {
    const b = await backend();
    await loopWentRound();
    const before = await settledFdCount();
    const early: Probe[] = [];
    // In batches of 100 (50 of each), the loop turning between them.
    for (let batch = 0; batch < 20; batch++) {
      let connected = 0;
      for (let i = 0; i < 50; i++) {
        early.push(probe('127.0.0.1', b.port));
        early.at(-1)!.close();
        probe('127.0.0.1', b.port, NONE, (self, [k]) => k === CONNECTED && (self.close(), connected++));
      }
      await until(() => connected === 50, `batch ${batch}: 50 probes connected`);
    }
    // The server's sides close too (each on its end): their descriptors are in the count.
    await until(() => fdCount() <= before && b.sockets.every((s) => s.destroyed), `the descriptors back to ${before}`).catch((err: Error) => {
      throw new Error(`${err.message} (${fdCount()} now, ${b.sockets.filter((s) => !s.destroyed).length} server sides open)`);
    });
    expect(early.every((p) => p.events.length === 0)).toBe(true);
  });
});

describe('native probe: in a child process', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });

  /** A node child running `script` (ESM) with `ADDON` (the addon) and `PORT` defined. */
  function child(script: string, port: number): { proc: ChildProcess; out: () => string; exit: Promise<number | null> } {
    const path = JSON.stringify(addonPath());
    const head = `import { createRequire } from 'node:module'; const ADDON = createRequire(${path})(${path}); const PORT = ${port};\n`;
    const proc = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', head + script], { stdio: ['pipe', 'pipe', 'pipe'] });
    children.push(proc);
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    return { proc, out: () => out, exit };
  }

  it('a handle dropped without probeClose is closed when collected; the process then exits by itself', async () => {
    const b = await backend();
    const c = child(
      `let connected;
      const ready = new Promise((r) => (connected = r));
      let handle = ADDON.probeOpen('127.0.0.1', PORT, Buffer.alloc(0), () => connected());
      await ready;
      handle = null;
      for (let i = 0; i < 5; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); }
      console.log('collected');
      // Alive until the test has seen the connection end; then nothing holds the loop.
      process.stdin.once('data', () => process.stdin.destroy());`,
      b.port,
    );
    const server = await b.accepted('the child connected');
    await ended(server, "the server's side ending once the handle was collected");
    expect(c.proc.exitCode).toBeNull();
    c.proc.stdin!.write('go\n');
    expect(await within(c.exit, 'the child exiting')).toBe(0);
    expect(c.out()).toBe('collected\n');
  });

  it('a worker thread terminated with probes open (connected and idle, reading a flood) takes nothing down', async () => {
    // Only the workers load the addon here, so it is unloaded when a worker's environment ends: a
    // probe's close callback must have run by then (the environment waits for it), or the process
    // faults in code no longer mapped. (The helper above loads it in the main thread: not used.)
    const b = await backend();
    const script = `
      const net = require('node:net');
      const { Worker } = require('node:worker_threads');
      const flood = net.createServer((s) => { s.on('error', () => {}); const big = Buffer.alloc(65536, 120); const pump = () => { while (s.write(big)); }; s.on('drain', pump); pump(); });
      flood.listen(0, '127.0.0.1', async () => {
        const code = "const { parentPort, workerData: d } = require('node:worker_threads'); const addon = require(d.addon);" +
          "const open = (port, request) => addon.probeOpen('127.0.0.1', port, Buffer.from(request), () => {});" +
          "globalThis.kept = [open(d.idle, ''), open(d.idle, 'x'), open(d.flood, 'GET / HTTP/1.1' + String.fromCharCode(13, 10, 13, 10))];" +
          "setTimeout(() => parentPort.postMessage('open'), 50);";
        for (let i = 0; i < 3; i++) {
          const w = new Worker(code, { eval: true, workerData: { addon: ${JSON.stringify(addonPath())}, idle: ${b.port}, flood: flood.address().port } });
          await new Promise((r, j) => { w.once('message', r); w.once('error', j); });
          await w.terminate();
        }
        flood.close();
        console.log('survived');
      });`;
    const proc = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(proc);
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    // Workers start slowly under the sanitizers with both cores busy (the chaos run): 30 s.
    const exit = await within(new Promise<string>((r) => proc.once('exit', (code, signal) => r(`${code} ${signal}`))), 'the child exiting', WORKERS_MS);
    expect(exit, out).toBe('0 null');
    expect(out).toBe('survived\n');
  }, WORKERS_MS + 5_000);

  it("an exception thrown by onEvent is the process's uncaught exception", async () => {
    const b = await backend();
    const c = child(
      `let handle;
      process.on('uncaughtException', (err) => { console.log('uncaught: ' + err.message); ADDON.probeClose(handle); });
      handle = ADDON.probeOpen('127.0.0.1', PORT, Buffer.alloc(0), (kind) => { throw new Error('thrown on event ' + kind); });`,
      b.port,
    );
    expect(await within(c.exit, 'the child exiting')).toBe(0);
    expect(c.out()).toBe('uncaught: thrown on event 0\n');
  });
});

describe('native probe: bad arguments', () => {
  it('throw a clear error, and open nothing', async () => {
    const b = await backend();
    const fn = (): void => undefined;
    await loopWentRound();
    const before = await settledFdCount();
    const open = addon.probeOpen as (...args: unknown[]) => unknown;
    expect(() => open('localhost', b.port, NONE, fn)).toThrow('probeOpen: not an IP address');
    expect(() => open('127.0.0.1:80', b.port, NONE, fn)).toThrow('probeOpen: not an IP address');
    const usage = 'probeOpen(ip, port 1..65535, request: Buffer, onEvent)';
    expect(() => open('127.0.0.1', 0, NONE, fn)).toThrow(usage);
    expect(() => open('127.0.0.1', 70_000, NONE, fn)).toThrow(usage);
    expect(() => open('127.0.0.1', '80', NONE, fn)).toThrow(usage);
    expect(() => open('127.0.0.1', b.port, 'GET / HTTP/1.1\r\n\r\n', fn)).toThrow(usage);
    expect(() => open('127.0.0.1', b.port, NONE, 'not a function')).toThrow(usage);
    expect(() => open('127.0.0.1', b.port, NONE)).toThrow(usage);
    expect(() => open(127001, b.port, NONE, fn)).toThrow(usage);
    expect(() => addon.probeClose({})).toThrow('probeClose(handle)');
    expect(fdCount()).toBe(before);
    await loopWentRound();
    expect(b.sockets).toHaveLength(0);
  });
});
