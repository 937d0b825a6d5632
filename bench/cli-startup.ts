/**
 * Benchmark: how long one `roomgate` command line takes, start to exit, as a user or a script runs it.
 *
 *   npm run build && node dist/bench/cli-startup.js [--runs N] [--main PATH]
 *
 * Starts one gateway in this process (admin API on a free port, one in-process backend that
 * answers its health checks) and spawns `node dist/src/main.js ...` --runs times (default 20) per
 * command line, one at a time: `--version`, `where` and `move` against that gateway (`move` of a
 * room no client opened: the admin API's refusal, a full round trip), `status`, and the commands
 * that load the configuration (`where --offline`, `sign`, `check-config`). For each it prints the
 * median and 90th percentile wall time, the CPU time (user + system, from this process's reaped
 * children in /proc/self/stat, 10 ms ticks) and the modules the process loaded (one more run
 * under a module hook). --main runs another build (e.g. an older commit's dist/src/main.js).
 * A benchmark, not a test: it asserts nothing; the figures depend on the machine (the CPU model
 * is printed) and on what else runs on it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/load.js';
import { Gateway } from '../src/gateway.js';
import { createLogger } from '../src/observability/logger.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'bench-admin-token-0123456789abcdef';
const SECRET = '0123456789abcdef0123456789abcdef';
// Counts every module the process loads (ES modules and CommonJS alike) and says so on exit.
const COUNT_MODULES =
  'data:text/javascript,let n=0;import {registerHooks} from "node:module";registerHooks({load(u,c,next){n++;return next(u,c)}});' +
  'process.on("exit",()=>process.stderr.write("\\nmodules-loaded "+n+"\\n"))';

interface Options {
  runs: number;
  main: string;
}

function parseArgs(argv: readonly string[]): Options {
  const o: Options = { runs: 20, main: join(ROOT, 'dist/src/main.js') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--runs' && v) o.runs = Math.max(1, Number(v) | 0);
    else if (a === '--main' && v) o.main = v;
    else throw new Error(`unknown argument ${a} (use --runs N, --main PATH)`);
    i++;
  }
  return o;
}

/** CPU time of this process's reaped children so far, in ms (cutime + cstime; USER_HZ is 100 on Linux). */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "pid (comm) ": field 3 is index 0, so cutime (16) and cstime (17) are 13 and 14.
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

interface Run {
  readonly ms: number;
  readonly code: number | null;
  readonly stderr: string;
}

function runOnce(main: string, args: readonly string[], env: Record<string, string>, nodeArgs: readonly string[] = []): Promise<Run> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [...nodeArgs, main, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '', ...env } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - t0, code, stderr });
    });
  });
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] as number;
}

interface Case {
  readonly line: string;
  readonly env?: Record<string, string>;
}

async function measure(o: Options, c: Case, base: Record<string, string>): Promise<string> {
  const args = c.line.split(' ');
  const env = { ...base, ...c.env };
  await runOnce(o.main, args, env); // one warm-up: the page cache holds the files afterwards
  const times: number[] = [];
  const cpu0 = childrenCpuMs();
  const codes = new Set<number | null>();
  for (let i = 0; i < o.runs; i++) {
    const r = await runOnce(o.main, args, env);
    times.push(r.ms);
    codes.add(r.code);
  }
  const cpuPerRun = (childrenCpuMs() - cpu0) / o.runs;
  const counted = await runOnce(o.main, args, env, ['--import', COUNT_MODULES]);
  const modules = /modules-loaded (\d+)/.exec(counted.stderr)?.[1] ?? '?';
  times.sort((a, b) => a - b);
  const f = (ms: number): string => `${Math.round(ms)}`;
  return `| \`roomgate ${c.line.replaceAll('|', '\\|')}\` | ${f(percentile(times, 0.5))} | ${f(percentile(times, 0.9))} | ${f(cpuPerRun)} | ${modules} | ${[...codes].join(', ')} |`;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-bench-cli-'));
  const backend = createServer((_req, res) => res.end('ok'));
  let gateway: Gateway | undefined;
  try {
    const backendPort = await listen(backend);
    const file = join(dir, 'gateway.json');
    writeFileSync(
      file,
      JSON.stringify({
        listen: { host: '127.0.0.1', port: 0 },
        admin: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
        backends: [{ id: 'b1', url: `http://127.0.0.1:${backendPort}` }],
        cookie: { secrets: [SECRET] },
        backendCalls: { secrets: [SECRET] },
        shutdown: { graceMs: 0 },
        log: { level: 'silent' },
      }),
    );
    gateway = new Gateway(loadConfig({ env: {}, file }), { logger: createLogger('silent') });
    await gateway.start();
    const admin = `http://127.0.0.1:${gateway.adminPort}`;
    const base = { ROOMGATE_ADMIN_URL: admin, ROOMGATE_ADMIN_TOKEN: TOKEN };
    const cases: Case[] = [
      { line: '--version' },
      { line: 'where chess' },
      { line: 'move lobby --to b1' },
      { line: 'status' },
      { line: 'where chess --offline', env: { ROOMGATE_CONFIG: file } },
      { line: 'sign chess', env: { ROOMGATE_CONFIG: file } },
      { line: 'check-config', env: { ROOMGATE_CONFIG: file } },
    ];
    const say = (line: string): boolean => process.stdout.write(`${line}\n`);
    say(`# roomgate CLI start-up: ${o.runs} runs per command line, one at a time`);
    say('');
    say(`CPU: ${cpus()[0]?.model ?? 'unknown'} x ${cpus().length}; node ${process.version}; ${o.main}`);
    say('');
    say('| command line | median ms | p90 ms | CPU ms/run | modules loaded | exit codes |');
    say('|---|---|---|---|---|---|');
    for (const c of cases) say(await measure(o, c, base));
  } finally {
    await gateway?.stop();
    await new Promise<void>((resolve) => backend.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
