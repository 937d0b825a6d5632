/**
 * What room.pinInject costs per page: roomgate with injection on against the same build with it
 * off (the default), interleaved in one run, on the byte-level page path and on node:http's
 * (proxy.leanPages false). The workload: GETs of an 8 KB HTML page (text/html, Content-Length,
 * <head> after a doctype and <html>), each of one of 100 rooms (/r/room{n}/page), keep-alive, 32
 * in flight; roomgate alone on core 0, the backend and the load on core 1. With injection on every
 * answer is scanned, its pin signed (one HMAC) and the tags put in.
 *
 *   npm run build && node dist/bench/pin-inject.js [--rounds 3] [--requests 10000]
 *
 * Prints the CPU model, then a markdown table: roomgate's CPU per request (utime + stime of its
 * process, /proc) and requests per second for each variant and round, their medians, and the
 * ratios on / off per path.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadAvg1, treeCpuMs } from './suite/cpu.js';
import { cleanupAll, freePort, startProc, stopProc, tempDir, waitLine } from './suite/procs.js';
import { ROOMGATE_MAIN, roomgateNodeArgs } from './suite/proxies.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, requests: { type: 'string', default: '10000' } } });
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const say = (line = ''): boolean => process.stdout.write(`${line}\n`);

// The app: one 8 KB HTML page for every GET.
const BACKEND = `
import http from 'node:http';
const page = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>room</title></head><body>' + 'x'.repeat(8 * 1024) + '</body></html>';
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(page), etag: '"p1"' });
  res.end(page);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ msg: 'listening', port: server.address().port }) + '\\n'));
`;

// The load: total GETs, 32 in flight on keep-alive connections; prints the seconds it took and
// whether the pages carried a pin.
const LOAD = `
import http from 'node:http';
const [port, total] = process.argv.slice(1).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
let sent = 0, done = 0, failed = 0, pinned = 0;
const t0 = performance.now();
await new Promise((resolve) => {
  const one = () => {
    if (sent >= total) return;
    sent++;
    const req = http.request({ host: '127.0.0.1', port, path: '/r/room' + (sent % 100) + '/page', agent }, (res) => {
      if (res.statusCode !== 200) failed++;
      let head = '';
      res.on('data', (c) => { if (head.length < 512) head += c.toString('latin1', 0, 512); });
      res.on('end', () => { if (head.includes('roomgate-pin')) pinned++; if (++done === total) resolve(); else one(); });
    });
    req.on('error', () => { failed++; if (++done === total) resolve(); else one(); });
    req.end();
  };
  for (let i = 0; i < 32; i++) one();
});
process.stdout.write(JSON.stringify({ seconds: (performance.now() - t0) / 1000, failed, pinned }) + '\\n');
agent.destroy();
`;

interface Variant {
  readonly name: string;
  readonly leanPages: boolean;
  readonly pinInject: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: 'byte-level, off', leanPages: true, pinInject: false },
  { name: 'byte-level, on', leanPages: true, pinInject: true },
  { name: 'node:http, off', leanPages: false, pinInject: false },
  { name: 'node:http, on', leanPages: false, pinInject: true },
];

interface Figure {
  readonly usPerRequest: number;
  readonly perSecond: number;
}

async function runOnce(dir: string, backendPort: number, v: Variant): Promise<Figure> {
  const port = await freePort();
  const config = join(dir, `roomgate-${v.leanPages}-${v.pinInject}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      listen: { host: '127.0.0.1', port },
      admin: { enabled: false },
      health: { path: null },
      backends: [{ id: 'b1', url: `http://127.0.0.1:${backendPort}` }],
      cookie: { secrets: ['bench-cookie-secret-0123456789abcdef'], setOnPages: false },
      proxy: { leanPages: v.leanPages },
      room: { pinInject: v.pinInject },
      log: { level: 'info' },
    }),
  );
  const gw = startProc('roomgate', process.execPath, [...roomgateNodeArgs(), ROOMGATE_MAIN, 'start', '--config', config], { cpu: '0' });
  try {
    await waitLine(gw, 'roomgate listening', (l) => l.includes('"listening"'), 15_000);
    // Warm-up (JIT, connections), not measured.
    await load(port, Math.min(2_000, REQUESTS));
    const cpu0 = treeCpuMs(gw.pid);
    const r = await load(port, REQUESTS);
    const cpuMs = treeCpuMs(gw.pid) - cpu0;
    if (r.failed > 0) throw new Error(`${r.failed} requests failed (${v.name})`);
    // The variant is what it says: every page pinned with injection on, none without.
    if (r.pinned !== (v.pinInject ? REQUESTS : 0)) throw new Error(`${r.pinned} of ${REQUESTS} pages carried a pin (${v.name})`);
    return { usPerRequest: (cpuMs * 1000) / REQUESTS, perSecond: REQUESTS / r.seconds };
  } finally {
    await stopProc(gw);
  }
}

async function load(port: number, total: number): Promise<{ seconds: number; failed: number; pinned: number }> {
  const p = startProc('load', process.execPath, ['--input-type=module', '-e', LOAD, String(port), String(total)], { cpu: '1' });
  const line = await waitLine(p, 'load result', (l) => l.startsWith('{"seconds"'), 300_000);
  await stopProc(p);
  return JSON.parse(line) as { seconds: number; failed: number; pinned: number };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

async function main(): Promise<void> {
  const dir = tempDir('roomgate-bench-pin-');
  const backend = startProc('backend', process.execPath, ['--input-type=module', '-e', BACKEND], { cpu: '1' });
  try {
    const line = await waitLine(backend, 'backend listening', (l) => l.includes('"listening"'), 10_000);
    const backendPort = (JSON.parse(line) as { port: number }).port;
    const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown CPU';
    say(`CPU: ${cpu}; Node ${process.version}; load average at start ${loadAvg1().toFixed(2)}`);
    say();
    const got = new Map<string, Figure[]>(VARIANTS.map((v) => [v.name, []]));
    say(`| round | ${VARIANTS.map((v) => `${v.name}: µs CPU / request | req/s`).join(' | ')} |`);
    say(`|---|${VARIANTS.map(() => '---|---').join('|')}|`);
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternate the order, so a drift of the machine does not favour one.
      const order = round % 2 === 1 ? VARIANTS : [...VARIANTS].reverse();
      const figures = new Map<string, Figure>();
      for (const v of order) figures.set(v.name, await runOnce(dir, backendPort, v));
      for (const [name, f] of figures) got.get(name)?.push(f);
      say(`| ${round} | ${VARIANTS.map((v) => `${figures.get(v.name)!.usPerRequest.toFixed(1)} | ${figures.get(v.name)!.perSecond.toFixed(0)}`).join(' | ')} |`);
    }
    const med = (name: string, k: keyof Figure): number => median((got.get(name) ?? []).map((f) => f[k]));
    say(`| median | ${VARIANTS.map((v) => `${med(v.name, 'usPerRequest').toFixed(1)} | ${med(v.name, 'perSecond').toFixed(0)}`).join(' | ')} |`);
    say();
    for (const path of ['byte-level', 'node:http']) {
      const on = med(`${path}, on`, 'usPerRequest');
      const off = med(`${path}, off`, 'usPerRequest');
      say(`${path}: CPU per page, on / off: ${(on / off).toFixed(3)} (+${(on - off).toFixed(1)} µs)`);
    }
    say(`(${ROUNDS} rounds of ${REQUESTS} GETs of an 8 KB HTML page, 100 rooms, 32 in flight; load average at the end ${loadAvg1().toFixed(2)})`);
  } finally {
    await stopProc(backend);
    await cleanupAll();
  }
}

main().catch(async (err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  await cleanupAll();
  process.exit(1);
});
