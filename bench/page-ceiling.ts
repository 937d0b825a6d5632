/**
 * What a byte-level page path could gain, before anyone builds one: CPU per page request of two
 * minimal proxies written in Node, beside roomgate and nginx, in the same run.
 *
 *   npm run build && node dist/bench/page-ceiling.js [--rounds 2] [--duration 6] [--connections 64]
 *
 * - `node-http`: http.createServer + http.request with a keep-alive agent, headers copied, bodies
 *   piped; no routing, no checks. The floor of any proxy built on node:http's objects.
 * - `raw`: net sockets only. Per client connection one backend connection; a request head is found
 *   by its blank line, gets one X-Forwarded-For line and is written on; the answer's head is
 *   scanned for Content-Length and its bytes passed through as they come. GET without a body and
 *   answers with Content-Length only: an upper bound for a byte-level path, which would still owe
 *   the conformance rules, chunked bodies, pipelining and routing. Not a proxy to deploy.
 *
 * - `roomgate-node`: roomgate with `proxy.leanPages: false`, so the same build shows what its own
 *   byte-level page path saves over its node:http path.
 *
 * One bench backend (bench/suite/backend.ts, a 10 KB page), wrk -t1 with plain GETs, the proxies
 * pinned to CPU 0 and backend plus wrk to CPU 1 as in the suite; CPU of each proxy's process tree
 * from /proc over the window. Prints a table of medians (and every run). Asserts nothing.
 */
import http from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { treeCpuMs } from './suite/cpu.js';
import { cleanupAll, freePort, startProc, stopProc, waitHttpOk, waitLine, type Proc } from './suite/procs.js';
import { ensureTools, startTarget, type Running } from './suite/proxies.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);

// ---- the two minimal proxies (run as children: --serve raw|node-http) ---------------------------

function serveNodeHttp(port: number, backendPort: number): void {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  http
    .createServer((req, res) => {
      const headers = { ...req.headers, 'x-forwarded-for': req.socket.remoteAddress ?? '' };
      const up = http.request({ host: '127.0.0.1', port: backendPort, method: req.method, path: req.url, headers, agent }, (ans) => {
        res.writeHead(ans.statusCode ?? 502, ans.headers);
        ans.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    })
    .listen(port, '127.0.0.1', () => say('listening'));
}

const CRLF2 = Buffer.from('\r\n\r\n');

/** One client connection and its backend connection. */
class RawPair {
  private head: Buffer | null = null;
  private answerHead: Buffer | null = null;
  /** Body bytes of the current answer still to pass on; -1 while its head is incomplete. */
  private remaining = -1;
  private readonly up: Socket;

  constructor(
    private readonly client: Socket,
    backendPort: number,
  ) {
    this.up = connect({ host: '127.0.0.1', port: backendPort });
    this.up.setNoDelay(true);
    client.setNoDelay(true);
    const xff = Buffer.from(`X-Forwarded-For: ${client.remoteAddress ?? ''}\r\n\r\n`, 'latin1');
    client.on('data', (chunk: Buffer) => {
      const buf = this.head === null ? chunk : Buffer.concat([this.head, chunk]);
      let from = 0;
      for (;;) {
        const end = buf.indexOf(CRLF2, from);
        if (end === -1) break;
        // The head without its blank line, one header more, then the blank line.
        this.up.write(buf.subarray(from, end + 2));
        this.up.write(xff);
        from = end + 4;
      }
      this.head = from === buf.length ? null : buf.subarray(from);
    });
    this.up.on('data', (chunk: Buffer) => this.answer(chunk));
    const close = (): void => {
      client.destroy();
      this.up.destroy();
    };
    client.on('error', close);
    client.on('close', close);
    this.up.on('error', close);
    this.up.on('close', close);
  }

  private answer(chunk: Buffer): void {
    let buf = chunk;
    while (buf.length > 0) {
      if (this.remaining > 0) {
        const n = Math.min(this.remaining, buf.length);
        this.client.write(n === buf.length ? buf : buf.subarray(0, n));
        this.remaining -= n;
        buf = buf.subarray(n);
        continue;
      }
      const all = this.answerHead === null ? buf : Buffer.concat([this.answerHead, buf]);
      const end = all.indexOf(CRLF2);
      if (end === -1) {
        this.answerHead = all;
        return;
      }
      this.answerHead = null;
      const text = all.toString('latin1', 0, end);
      const m = /\r\ncontent-length:[ \t]*(\d+)/i.exec(text);
      this.remaining = m ? Number(m[1]) : 0;
      this.client.write(all.subarray(0, end + 4));
      buf = all.subarray(end + 4);
    }
  }
}

function serveRaw(port: number, backendPort: number): void {
  createServer((socket) => new RawPair(socket, backendPort)).listen(port, '127.0.0.1', () => say('listening'));
}

// ---- the measurement -----------------------------------------------------------------------------

const TARGETS = ['nginx', 'roomgate', 'roomgate-node', 'node-http', 'raw'] as const;

interface Row {
  readonly target: string;
  readonly reqPerS: number;
  readonly cpuUsPerReq: number;
}

async function wrkRun(port: number, seconds: number, connections: number): Promise<number> {
  const p = startProc('wrk', 'wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '5s', `http://127.0.0.1:${port}/page/`], { cpu: '1' });
  await p.exited;
  const text = p.output.join('\n');
  const m = /Requests\/sec:\s+([\d.]+)/.exec(text);
  if (!m) throw new Error(`wrk printed no rate:\n${text}`);
  if (/Non-2xx|Socket errors/.test(text)) throw new Error(`wrk saw errors:\n${text}`);
  return Number(m[1]);
}

async function measure(name: string, port: number, pid: number, o: { duration: number; connections: number }): Promise<Row> {
  await wrkRun(port, 2, o.connections); // warm-up
  const before = treeCpuMs(pid);
  const reqPerS = await wrkRun(port, o.duration, o.connections);
  const cpuMs = treeCpuMs(pid) - before;
  return { target: name, reqPerS, cpuUsPerReq: (cpuMs * 1000) / (reqPerS * o.duration) };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: 'string' },
      port: { type: 'string' },
      'backend-port': { type: 'string' },
      rounds: { type: 'string', default: '2' },
      duration: { type: 'string', default: '6' },
      connections: { type: 'string', default: '64' },
    },
  });
  if (values.serve) {
    const port = Number(values.port);
    const backendPort = Number(values['backend-port']);
    if (values.serve === 'raw') serveRaw(port, backendPort);
    else serveNodeHttp(port, backendPort);
    // Exit with the parent (procs.ts gives Node children a stdin pipe).
    process.stdin.on('end', () => process.exit(0)).resume();
    return;
  }
  ensureTools(['nginx', 'wrk', 'taskset'], (l) => say(l));
  const o = { duration: Number(values.duration), connections: Number(values.connections) };
  const backendPort = await freePort();
  const backend = startProc('backend', process.execPath, [join(import.meta.dirname, 'suite/backend.js'), '--port', String(backendPort), '--id', 'b1'], { cpu: '1', stdin: true });
  await waitLine(backend, 'backend listening', (l) => l.includes('"listening"'), 10_000);
  const ctx = { backends: [{ id: 'b1', port: backendPort }], cpu: '0', secret: 'page-ceiling-secret-0123456789abcdef', nofile: 4096 };
  const rows: Row[] = [];
  try {
    for (let round = 1; round <= Number(values.rounds); round++) {
      for (const target of TARGETS) {
        let row: Row;
        if (target === 'nginx' || target === 'roomgate' || target === 'roomgate-node') {
          // roomgate-node: roomgate with its byte-level page path switched off (node:http for all).
          const run: Running =
            target === 'roomgate-node' ? await startTarget('roomgate', { ...ctx, roomgateConfig: { proxy: { leanPages: false } } }) : await startTarget(target, ctx);
          try {
            row = await measure(target, run.port as number, run.pid as number, o);
          } finally {
            await run.stop();
          }
        } else {
          const port = await freePort();
          const proc: Proc = startProc(target, process.execPath, [import.meta.filename, '--serve', target, '--port', String(port), '--backend-port', String(backendPort)], { cpu: '0', stdin: true });
          try {
            await waitLine(proc, `${target} listening`, (l) => l === 'listening', 10_000);
            await waitHttpOk(proc, `http://127.0.0.1:${port}/page/`, 10_000);
            row = await measure(target, port, proc.pid, o);
          } finally {
            await stopProc(proc);
          }
        }
        rows.push(row);
        say(`[round ${round}] ${target.padEnd(13)} ${row.reqPerS.toFixed(0)} req/s, CPU ${row.cpuUsPerReq.toFixed(1)} µs/req`);
      }
    }
  } finally {
    await stopProc(backend);
    await cleanupAll();
  }
  const nginx = median(rows.filter((r) => r.target === 'nginx').map((r) => r.cpuUsPerReq));
  say('\n| target | req/s | CPU µs/req | ratio to nginx |\n|---|---:|---:|---:|');
  for (const t of TARGETS) {
    const mine = rows.filter((r) => r.target === t);
    const cpu = median(mine.map((r) => r.cpuUsPerReq));
    say(`| ${t} | ${median(mine.map((r) => r.reqPerS)).toFixed(0)} | ${cpu.toFixed(1)} | ${(cpu / nginx).toFixed(2)}x |`);
  }
}

await main();
