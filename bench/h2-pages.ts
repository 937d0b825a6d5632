/**
 * CPU per page request over TLS, HTTP/2 and HTTP/1.1, roomgate against nginx and HAProxy in the
 * same run. Every proxy terminates TLS, offers h2 by ALPN and proxies to the same 3 bench
 * backends over HTTP/1.1 with keep-alive; h2load sends page GETs with a browser's headers and a
 * signed room cookie among the usual cookies, on h2 (`--streams` at once per connection) and on
 * HTTP/1.1 (`--h1`, one at a time per connection).
 *
 *   npm run build && node dist/bench/h2-pages.js [--rounds 3] [--requests 20000] [--clients 20] [--streams 10]
 *
 * The proxy is pinned to CPU 0, h2load and the backends to CPU 1; CPU of the proxy's process tree
 * from /proc over the measured run. Interleaved rounds, medians, ratios to nginx. Needs h2load
 * (apt-get install -y nghttp2-client), nginx and haproxy. Asserts nothing.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRoomSigner } from '../src/room/signing.js';
import { benchCertificate } from './suite/cert.js';
import { treeCpuMs } from './suite/cpu.js';
import { median } from './suite/stats.js';
import { cleanupAll, removeDir, startProc, tempDir, waitLine, which, type Proc } from './suite/procs.js';
import { PAGE_PATH, cookieHeader, pageHeaders } from './suite/protocol.js';
import { startTarget, type BackendAddr, type ProxyContext } from './suite/proxies.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);
const BACKEND = join(import.meta.dirname, 'suite', 'backend.js');
const TARGETS = ['nginx', 'haproxy', 'roomgate'] as const;
const MODES = ['h2', 'h1'] as const;

interface Run {
  readonly done: number;
  readonly failed: number;
  readonly reqPerS: number;
}

/** One h2load run; its summary lines parsed. */
async function h2load(port: number, headers: Record<string, string>, requests: number, clients: number, streams: number, h1: boolean): Promise<Run> {
  const args = ['-n', String(requests), '-c', String(clients), '-m', String(h1 ? 1 : streams), ...(h1 ? ['--h1'] : [])];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k.toLowerCase()}: ${v}`);
  args.push(`https://127.0.0.1:${port}${PAGE_PATH}`);
  const p = startProc('h2load', 'h2load', args, { cpu: '1' });
  const lines: string[] = [];
  const summary = await waitLine(p, 'h2load summary', (l) => (lines.push(l), l.startsWith('requests:')), 120_000);
  await p.exited;
  const finished = lines.find((l) => l.startsWith('finished in')) ?? '';
  const num = (re: RegExp, text: string): number => Number(re.exec(text)?.[1] ?? Number.NaN);
  return { done: num(/(\d+) succeeded/, summary), failed: requests - num(/(\d+) succeeded/, summary), reqPerS: num(/([\d.]+) req\/s/, finished) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      requests: { type: 'string', default: '20000' },
      clients: { type: 'string', default: '20' },
      streams: { type: 'string', default: '10' },
    },
  });
  const n = Number(values.requests);
  const clients = Number(values.clients);
  const streams = Number(values.streams);
  for (const tool of ['h2load', 'nginx', 'haproxy', 'openssl']) if (!which(tool)) throw new Error(`${tool} is needed (h2load: apt-get install -y nghttp2-client)`);
  const dir = tempDir('roomgate-bench-h2-');
  const { cert, key, pem } = benchCertificate(dir, 'bench.test');
  const secret = randomBytes(24).toString('base64url');
  const signer = createRoomSigner({ secrets: [secret], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
  const rows: { target: string; mode: string; cpuUs: number; reqPerS: number }[] = [];
  const backendProcs: Proc[] = [];
  try {
    const backends: BackendAddr[] = [];
    for (const id of ['b1', 'b2', 'b3']) {
      const p = startProc(`backend ${id}`, process.execPath, [BACKEND, '--id', id, '--port', '0'], { cpu: '1', stdin: true });
      backendProcs.push(p);
      const line = await waitLine(p, 'listening line', (l) => l.includes('"listening"'), 15_000);
      backends.push({ id, port: (JSON.parse(line) as { port: number }).port });
    }
    // A few hundred sockets at most: well under any limit (HAProxy refuses to start if asked for more than the hard limit).
    const ctx: ProxyContext = { backends, cpu: '0', secret, nofile: 4_096, tls: { cert, key, pem }, http2: true };
    const headers = pageHeaders(cookieHeader('bench-room', signer.sign('bench-room', Date.now()), 1));
    for (let round = 1; round <= Number(values.rounds); round++) {
      for (const target of TARGETS) {
        const run = await startTarget(target, ctx);
        try {
          for (const mode of MODES) {
            await h2load(run.port as number, headers, Math.min(2_000, n), clients, streams, mode === 'h1'); // warm-up
            const t0 = treeCpuMs(run.pid as number);
            const r = await h2load(run.port as number, headers, n, clients, streams, mode === 'h1');
            const t1 = treeCpuMs(run.pid as number);
            if (r.failed > 0) say(`[round ${round}] ${target} ${mode}: ${r.failed} of ${n} requests failed`);
            const row = { target, mode, cpuUs: ((t1 - t0) * 1000) / r.done, reqPerS: r.reqPerS };
            rows.push(row);
            say(`[round ${round}] ${target.padEnd(8)} ${mode}: ${row.cpuUs.toFixed(1)} µs/request, ${row.reqPerS.toFixed(0)} req/s`);
          }
        } finally {
          await run.stop();
        }
      }
    }
  } finally {
    await cleanupAll();
    removeDir(dir);
  }
  const of = (t: string, m: string, k: 'cpuUs' | 'reqPerS'): number => median(rows.filter((r) => r.target === t && r.mode === m).map((r) => r[k]));
  say(`\n${n} page GETs per measurement, ${clients} connections (h2: ${streams} streams each), medians of ${values.rounds} rounds\n`);
  say('| target | CPU per h2 page (µs) | h2 req/s | CPU per HTTP/1.1 page (µs) | HTTP/1.1 req/s |\n|---|---:|---:|---:|---:|');
  for (const t of TARGETS) say(`| ${t} | ${of(t, 'h2', 'cpuUs').toFixed(1)} | ${of(t, 'h2', 'reqPerS').toFixed(0)} | ${of(t, 'h1', 'cpuUs').toFixed(1)} | ${of(t, 'h1', 'reqPerS').toFixed(0)} |`);
  const ratio = (m: string): string => `${(of('roomgate', m, 'cpuUs') / of('nginx', m, 'cpuUs')).toFixed(2)}x`;
  say(`| ratio roomgate / nginx (CPU) | ${ratio('h2')} | | ${ratio('h1')} | |`);
}

await main();
