/**
 * What reading request bodies before the backend request opens (proxy.bufferBodyBytes) costs per
 * request: roomgate with the default buffer (64 KiB) against the same build with every body
 * streamed (bufferBodyBytes: 0), interleaved in one run, a small-POST workload (512-byte JSON
 * bodies, keep-alive, 32 at a time) through the node:http path, roomgate alone on core 0, the
 * backend and the load on core 1.
 *
 *   npm run build && node dist/bench/body-buffering.js [--rounds 5] [--requests 20000]
 *
 * Prints a markdown table: roomgate's CPU per request (utime + stime of its process, /proc) and
 * requests per second for each variant and round, their medians and the ratio.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { treeCpuMs } from './suite/cpu.js';
import { cleanupAll, freePort, startProc, stopProc, tempDir, waitLine } from './suite/procs.js';
import { ROOMGATE_MAIN, roomgateNodeArgs } from './suite/proxies.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, requests: { type: 'string', default: '20000' } } });
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const say = (line = ''): boolean => process.stdout.write(`${line}\n`);

// The load: REQUESTS POSTs, 32 in flight on keep-alive connections; prints the seconds it took.
const LOAD = `
import http from 'node:http';
const [port, total] = process.argv.slice(1).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
const body = JSON.stringify({ move: 'e2e4', pad: 'x'.repeat(480) });
let sent = 0, done = 0, failed = 0;
const t0 = performance.now();
await new Promise((resolve) => {
  const one = () => {
    if (sent >= total) return;
    sent++;
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/game/move?room=r' + (sent % 100), agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) failed++;
      res.resume();
      res.on('end', () => { if (++done === total) resolve(); else one(); });
    });
    req.on('error', () => { failed++; if (++done === total) resolve(); else one(); });
    req.end(body);
  };
  for (let i = 0; i < 32; i++) one();
});
process.stdout.write(JSON.stringify({ seconds: (performance.now() - t0) / 1000, failed }) + '\\n');
agent.destroy();
`;

interface Figure {
  readonly usPerRequest: number;
  readonly perSecond: number;
}

async function runOnce(dir: string, backendPort: number, bufferBodyBytes: number): Promise<Figure> {
  const port = await freePort();
  const config = join(dir, `roomgate-${bufferBodyBytes}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      listen: { host: '127.0.0.1', port },
      admin: { enabled: false },
      backends: [{ id: 'b1', url: `http://127.0.0.1:${backendPort}` }],
      cookie: { secrets: ['bench-cookie-secret-0123456789abcdef'], setOnPages: false },
      proxy: { bufferBodyBytes },
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
    if (r.failed > 0) throw new Error(`${r.failed} requests failed (bufferBodyBytes ${bufferBodyBytes})`);
    return { usPerRequest: (cpuMs * 1000) / REQUESTS, perSecond: REQUESTS / r.seconds };
  } finally {
    await stopProc(gw);
  }
}

async function load(port: number, total: number): Promise<{ seconds: number; failed: number }> {
  const p = startProc('load', process.execPath, ['--input-type=module', '-e', LOAD, String(port), String(total)], { cpu: '1' });
  const line = await waitLine(p, 'load result', (l) => l.startsWith('{"seconds"'), 300_000);
  await stopProc(p);
  return JSON.parse(line) as { seconds: number; failed: number };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

async function main(): Promise<void> {
  const dir = tempDir('roomgate-bench-body-');
  const backend = startProc('backend', process.execPath, [join(import.meta.dirname, 'suite/backend.js'), '--id', 'b1'], { cpu: '1', stdin: true });
  try {
    const line = await waitLine(backend, 'backend listening', (l) => l.includes('"listening"'), 10_000);
    const backendPort = (JSON.parse(line) as { port: number }).port;
    const buffered: Figure[] = [];
    const streamed: Figure[] = [];
    say(`| round | buffered (64 KiB): µs CPU / request | req/s | streamed (0): µs CPU / request | req/s |`);
    say('|---|---|---|---|---|');
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternate which goes first, so a drift of the machine does not favour one.
      const pair = round % 2 === 1 ? [65_536, 0] : [0, 65_536];
      const got: Record<number, Figure> = {};
      for (const b of pair) got[b] = await runOnce(dir, backendPort, b);
      const a = got[65_536] as Figure;
      const s = got[0] as Figure;
      buffered.push(a);
      streamed.push(s);
      say(`| ${round} | ${a.usPerRequest.toFixed(1)} | ${a.perSecond.toFixed(0)} | ${s.usPerRequest.toFixed(1)} | ${s.perSecond.toFixed(0)} |`);
    }
    const mb = median(buffered.map((f) => f.usPerRequest));
    const ms = median(streamed.map((f) => f.usPerRequest));
    const spread = (fs: readonly Figure[]): string => `${Math.min(...fs.map((f) => f.usPerRequest)).toFixed(1)}-${Math.max(...fs.map((f) => f.usPerRequest)).toFixed(1)}`;
    say(`| median | ${mb.toFixed(1)} (${spread(buffered)}) | ${median(buffered.map((f) => f.perSecond)).toFixed(0)} | ${ms.toFixed(1)} (${spread(streamed)}) | ${median(streamed.map((f) => f.perSecond)).toFixed(0)} |`);
    say();
    say(`CPU per request, buffered / streamed: ${(mb / ms).toFixed(3)} (${ROUNDS} rounds of ${REQUESTS} POSTs of 512 bytes, 32 in flight)`);
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
