/**
 * Does the native relay leak? Opens and closes --tunnels tunnels (default 100,000) through an
 * in-process gateway with proxy.relay native, --batch at a time, closed in turn by the client's
 * FIN, the backend's FIN and the client's reset, each after a few bytes both ways. After a warm-up
 * (the first 2 batches) it takes a baseline; at the end it checks that
 *   - the descriptors of this process (/proc/self/fd) came back to the baseline,
 *   - the relay holds no tunnel (the addon's own count, and the JavaScript side's),
 *   - the gateway counts no live socket, every tunnel was counted on the native relay,
 *   - the RSS after a full GC is within --rss-bound-mb (16) of the baseline's, taken after half the
 *     tunnels (a leak of 350 B a tunnel is 17 MB over the other 50,000).
 * Prints a small table (with the CPU model) and exits 1 on a leak, 2 when it could not run.
 *
 *   npm run bench:relay-leak -- [--tunnels 100000] [--batch 500] [--rss-bound-mb 16] [--relay native|javascript]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadConfig } from '../src/config/load.js';
import { Gateway } from '../src/gateway.js';
import { createLogger } from '../src/observability/logger.js';

const ANSWER_101 = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';
// The room is n's tunnel number modulo ROOMS: rooms are placed and remembered (rooms.idleTtlMs),
// so distinct rooms for every tunnel would grow the heap by themselves.
const ROOMS = 1_000;
const HANDSHAKE = (n: number): string =>
  `GET /ws/live/leak-${n % ROOMS}?t=${n} HTTP/1.1\r\nHost: game.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
const UP = Buffer.from('\x81\x85abcd' + 'hello', 'latin1');
const DOWN = Buffer.from('\x81\x05world', 'latin1');
/** A batch that has not ended by then is a failure of its own (a tunnel that never closes). */
const BATCH_WAIT_MS = 30_000;
/**
 * The warm-up: at least 2 batches, and half the tunnels. The RSS after GC climbs for the first tens
 * of thousands of tunnels and then stays flat (allocator arenas and V8's pages, not the relay's:
 * 236, 243, 298, 299, 298 MB after 10k, 25k, 50k, 75k, 100k tunnels, heap used 23 MB), while a
 * leak climbs all along: the second half is the one compared.
 */
const warmBatches = (total: number, batch: number): number => Math.max(2, Math.ceil(total / 2 / batch));

type Close = 'client-fin' | 'backend-fin' | 'client-reset';
const CLOSES: readonly Close[] = ['client-fin', 'backend-fin', 'client-reset'];

/** A full GC: --expose-gc when given, else switched on here. */
function gcFunction(): () => void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) return g;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

const allFds = (): number => readdirSync('/proc/self/fd').length;
const rssMb = (): number => process.memoryUsage.rss() / 1048576;

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Rejects after `ms` naming what did not happen. */
function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

async function until(ms: number, what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const t0 = Date.now();
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const closed = (s: Socket): Promise<void> => (s.closed ? Promise.resolve() : new Promise((r) => s.once('close', () => r())));

/** The backend: answers every handshake with a 101 and the DOWN frame, echoes nothing, ends when told. */
class Backend {
  readonly server: net.Server;
  readonly sockets = new Set<Socket>();
  /** Connections that carried a handshake (the gateway also keeps spare connections open: raw-backend-pool). */
  readonly tunnels = new Set<Socket>();
  /** The backend's connection of tunnel n, once it read the handshake. */
  private readonly waiting = new Map<number, (s: Socket) => void>();

  constructor() {
    this.server = net.createServer({ allowHalfOpen: true }, (s) => {
      this.sockets.add(s);
      s.on('close', () => {
        this.sockets.delete(s);
        this.tunnels.delete(s);
      });
      s.on('error', () => undefined);
      // A spare connection the gateway closes (it never carried a handshake) closes here too.
      s.on('end', () => {
        if (!this.tunnels.has(s)) s.destroy();
      });
      let head = '';
      const onData = (d: Buffer): void => {
        head += d.toString('latin1');
        const at = head.indexOf('\r\n\r\n');
        if (at === -1) return;
        s.off('data', onData);
        this.tunnels.add(s);
        const n = Number(/^GET \/ws\/live\/leak-\d+\?t=(\d+) /.exec(head)?.[1] ?? -1);
        s.write(ANSWER_101 + DOWN.toString('latin1'), 'latin1');
        const w = this.waiting.get(n);
        this.waiting.delete(n);
        if (w === undefined) s.destroy();
        else w(s);
      };
      s.on('data', onData);
    });
  }

  arrival(n: number): Promise<Socket> {
    return new Promise((resolve) => this.waiting.set(n, resolve));
  }
}

/** One tunnel: opened, a few bytes both ways, closed by `how`; resolves once both ends closed. */
/** Where each unfinished tunnel is (named when a batch does not end in time). */
const stages = new Map<number, string>();

async function tunnel(port: number, backend: Backend, n: number, how: Close): Promise<void> {
  stages.set(n, 'handshake');
  const arrived = backend.arrival(n);
  const c = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  c.on('error', () => undefined);
  let got = 0;
  let opened: () => void = () => undefined;
  const open = new Promise<void>((r) => (opened = r));
  c.on('data', (d: Buffer) => {
    if (got === 0 && stages.get(n) === 'handshake') stages.set(n, `handshake answered ${d.toString('latin1').split('\r\n', 1)[0]}`);
    got += d.length;
    if (got >= ANSWER_101.length + DOWN.length) opened();
  });
  c.write(HANDSHAKE(n));
  const b = await arrived;
  stages.set(n, 'the 101');
  let upGot = 0;
  let upArrived: () => void = () => undefined;
  const up = new Promise<void>((r) => (upArrived = r));
  b.on('data', (d: Buffer) => {
    upGot += d.length;
    if (upGot >= UP.length) upArrived();
  });
  await open;
  stages.set(n, 'bytes up');
  c.write(UP);
  await up;
  stages.set(n, `${how}: closing`);
  void closed(c).then(() => stages.set(n, `${how}: client closed`));
  void closed(b).then(() => stages.set(n, `${how}: backend closed`));
  switch (how) {
    case 'client-fin':
      b.once('end', () => b.end());
      c.end();
      break;
    case 'backend-fin':
      c.once('end', () => c.end());
      b.end();
      break;
    case 'client-reset':
      b.once('end', () => b.destroy());
      b.once('error', () => b.destroy());
      c.resetAndDestroy();
      break;
  }
  await Promise.all([closed(c), closed(b)]);
  stages.delete(n);
}

function stageSummary(): string {
  const counts = new Map<string, number>();
  for (const s of stages.values()) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts].map(([s, k]) => `${k} at ${s}`).join(', ');
}

interface NativeInside {
  readonly size: number;
  readonly addon: { size(h: object): number };
  readonly h: object;
}

/** The gateway's native relay (a private part: this bench reads its counts, nothing else). */
function nativeOf(gw: Gateway): NativeInside | null {
  return (gw as unknown as { parts: { data: { upgradeProxy: { native: NativeInside | null } } } }).parts.data.upgradeProxy.native;
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { tunnels: { type: 'string', default: '100000' }, relay: { type: 'string', default: 'native' }, batch: { type: 'string', default: '500' }, 'rss-bound-mb': { type: 'string', default: '16' } } });
  const total = Number(values.tunnels);
  const batch = Number(values.batch);
  const boundMb = Number(values['rss-bound-mb']);
  // --relay javascript: the same run on the JavaScript relay, to compare (its native checks fail).
  const relay = values.relay === 'javascript' ? 'javascript' : 'native';
  if (!(total > 0 && batch > 0 && boundMb > 0)) throw new Error('--tunnels, --batch and --rss-bound-mb are positive numbers');
  const gc = gcFunction();
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-relay-leak-'));
  const backend = new Backend();
  let gw: Gateway | null = null;
  try {
    await new Promise<void>((resolve) => backend.server.listen(0, '127.0.0.1', resolve));
    const file = join(dir, 'gateway.json');
    writeFileSync(
      file,
      JSON.stringify({
        listen: { host: '127.0.0.1', port: 0 },
        admin: { enabled: false },
        backends: [{ id: 'b1', url: `http://127.0.0.1:${(backend.server.address() as AddressInfo).port}` }],
        cookie: { secrets: ['0123456789abcdef0123456789abcdef'] },
        shutdown: { graceMs: 0 },
        log: { level: 'silent' },
        health: { path: null },
        proxy: { relay, websocketPaths: ['/ws/'] },
        // This bench opens tunnels as fast as it can: the handshake limits would refuse them.
        admission: { maxInflightUpgrades: 0, upgradesPerSecond: 0 },
      }),
    );
    gw = new Gateway(loadConfig({ env: {}, file }), { logger: createLogger('silent') });
    await gw.start();
    const native = nativeOf(gw);
    if (native === null && relay === 'native') throw new Error('the gateway runs no native relay');
    const onRelay = (): number => (native === null ? 0 : native.addon.size(native.h));
    const onJs = (): number => (native === null ? 0 : native.size);
    const port = gw.port;
    const live = async (): Promise<number> => (await (gw as Gateway).metrics.liveSockets.get()).values.reduce((s, v) => s + v.value, 0);
    const nativeCounted = async (): Promise<number> => (await (gw as Gateway).metrics.relayTunnels.get()).values.filter((v) => v.labels.relay === relay).reduce((s, v) => s + v.value, 0);
    const settle = async (what: string): Promise<void> => {
      const state = async (): Promise<string> => `native ${onRelay()} (JavaScript ${onJs()}), live ${await live()}, backend tunnel connections ${backend.tunnels.size}`;
      await until(BATCH_WAIT_MS, `${what}: the relay and the gateway letting go`, async () => onJs() === 0 && onRelay() === 0 && (await live()) === 0 && backend.tunnels.size === 0).catch(async (err: Error) => {
        throw new Error(`${err.message} (${await state()})`);
      });
    };

    // This process's descriptors but the spare backend connections the gateway keeps open (two
    // each: the gateway's and the backend's end; how many varies with the load).
    const fds = (): number => allFds() - 2 * (backend.sockets.size - backend.tunnels.size);
    let n = 0;
    let base: { fds: number; rss: number } | null = null;
    const warm = warmBatches(total, batch);
    const samples: string[] = [];
    const quarter = Math.max(1, Math.round(total / batch / 4));
    const t0 = Date.now();
    for (let bi = 0; n < total; bi++) {
      const k = Math.min(batch, total - n);
      const jobs: Promise<void>[] = [];
      for (let i = 0; i < k; i++, n++) jobs.push(tunnel(port, backend, n, CLOSES[n % CLOSES.length] as Close));
      await within(BATCH_WAIT_MS, `batch ${bi} (tunnels ${n - k}..${n - 1})`, Promise.all(jobs)).catch((err: Error) => {
        throw new Error(`${err.message}: ${stageSummary()}`);
      });
      if (bi + 1 === warm || (base === null && n >= total)) {
        await settle('after the warm-up');
        gc();
        base = { fds: fds(), rss: rssMb() };
        samples.push(`${n}: ${base.rss.toFixed(0)}`);
      } else if ((bi + 1) % quarter === 0 && n < total) {
        gc();
        samples.push(`${n}: ${rssMb().toFixed(0)}`);
      }
    }
    const seconds = (Date.now() - t0) / 1000;
    await settle('at the end');
    let after = { fds: fds(), rss: 0 };
    // Descriptors a closing socket still holds go within a few turns of the loop.
    await until(5_000, 'the descriptors coming back', () => (after.fds = fds()) <= (base as { fds: number }).fds).catch(() => undefined);
    gc();
    await new Promise((r) => setTimeout(r, 50));
    gc();
    after = { fds: fds(), rss: rssMb() };
    samples.push(`${total}: ${after.rss.toFixed(0)}`);
    const b = base as { fds: number; rss: number };
    const counted = await nativeCounted();
    const checks = [
      { what: 'descriptors (/proc/self/fd)', base: String(b.fds), end: String(after.fds), ok: after.fds <= b.fds },
      { what: 'tunnels on the native relay (addon / JavaScript)', base: '0 / 0', end: `${onRelay()} / ${onJs()}`, ok: onRelay() === 0 && onJs() === 0 },
      { what: 'live sockets (gateway)', base: '0', end: String(await live()), ok: (await live()) === 0 },
      { what: `tunnels counted on the ${relay} relay`, base: String(total), end: String(counted), ok: counted === total },
      { what: `RSS after GC, MB (bound +${boundMb})`, base: b.rss.toFixed(1), end: after.rss.toFixed(1), ok: after.rss - b.rss <= boundMb },
    ];
    console.log(`relay-leak: ${total} tunnels on the ${relay} relay (${batch} at a time: client FIN, backend FIN, client reset in turn) in ${seconds.toFixed(1)} s on ${cpuModel()}, Node ${process.version}`);
    console.log('| check | baseline (after half) | end | |');
    console.log('|---|---|---|---|');
    for (const c of checks) console.log(`| ${c.what} | ${c.base} | ${c.end} | ${c.ok ? 'ok' : 'LEAK'} |`);
    console.log(`RSS after GC by tunnels done (MB): ${samples.join(', ')}; heap used ${(process.memoryUsage().heapUsed / 1048576).toFixed(1)} MB`);
    const leaks = checks.filter((c) => !c.ok);
    if (leaks.length > 0) console.log(`relay-leak: LEAK: ${leaks.map((c) => c.what).join(', ')}`);
    return leaks.length > 0 ? 1 : 0;
  } finally {
    await gw?.stop();
    for (const s of backend.sockets) s.destroy();
    await new Promise<void>((resolve) => backend.server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`relay-leak: could not run: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 2;
  },
);
