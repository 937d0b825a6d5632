/**
 * The benchmark suite: roomgate against nginx, HAProxy and no proxy at all.
 *
 *   npm run bench -- [--rounds 3] [--clients 1000,3000] [--duration 8] [--warmup 2]
 *                    [--only game,burst,page,scale] [--targets direct,nginx,haproxy,roomgate]
 *                    [--burst 2000] [--scale 10000] [--out bench/results]
 *
 * Starts 3 bench backends and the load generator pinned to one core, and each target in turn,
 * fresh for every run, pinned to the other; runs every workload through every target, interleaved,
 * for each round; prints a markdown report and writes latest.md, latest.svg and latest.json to
 * --out. Everything it starts is stopped at the end, on an error and on Ctrl-C. See
 * bench/README.md for what each figure means.
 */
import { publicLimits } from '../../src/server/connection-limit.js';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { createRoomSigner } from '../../src/room/signing.js';
import { benchCertificate } from './cert.js';
import { loadAvg1 } from './cpu.js';
import { LoadGen } from './driver.js';
import { cleanupAll, startProc, tempDir, waitLine } from './procs.js';
import { ROOMGATE_MAIN, ROOT, TARGETS, ensureTools, roomgateNodeArgs, versions, type BackendAddr, type TargetName } from './proxies.js';
import { derive, markdown, svg, targetRows, type Meta } from './report.js';
import { runWorkload, type Context, type Options, type RunRecord, type Workload, type WorkloadKind } from './workloads.js';

// Report lines go to stdout, problems to stderr: this is a command-line report, not the gateway's log.
const say = (line = ''): boolean => process.stdout.write(`${line}\n`);
const complain = (line: string): boolean => process.stderr.write(`${line}\n`);

const BACKEND = join(import.meta.dirname, 'backend.js');
const REEXEC_ENV = 'ROOMGATE_BENCH_SUITE_NOFILE';
const KINDS: readonly WorkloadKind[] = ['game', 'burst', 'page', 'scale'];
/** Open files a process keeps for itself (stdio, listeners, epoll, pipes). */
const FD_HEADROOM = 256;

const USAGE = `usage: npm run bench -- [options]   (or: node dist/bench/suite/run.js [options])

  --rounds N             rounds; every round runs every workload through every target (default 3)
  --clients A,B          game workload sizes, clients in rooms of 4 (default 1000,3000)
  --duration S           measurement window of game, page and scale, seconds (default 6)
  --warmup S             traffic before a game window / wrk warm-up run, seconds (default 2)
  --only LIST            workloads: game,burst,page,scale (default all)
  --targets LIST         direct,nginx,haproxy,roomgate,roomgate-b (default all but roomgate-b)
  --burst N              upgrades in the burst workload (default 2000), --burst-inflight N (default 200)
  --scale N              idle sockets in the scale workload (default 10000; capped by the open-files limit)
  --ping-ms N            ping interval of an idle socket (default 30000, djust's)
  --page-connections N   wrk connections (default 64)
  --proxy-cpu C          the proxy's core (default 0), --load-cpu C: backends and load (default 1)
  --out DIR              where latest.md, latest.svg and latest.json go (default bench/results)
  --tls                  every proxy terminates TLS (wss, https) with a P-256 certificate made here;
                         the direct target (plain backends) is left out
  --roomgate-config FILE YAML/JSON merged over roomgate's generated config (e.g. health: {timeoutMs: 3000})
  --roomgate-config-b FILE  the same for the target roomgate-b: two roomgate configurations in one run
  --from-json FILE       run nothing: write the report and chart again from a latest.json
  -h, --help`;

/** A --roomgate-config FILE's mapping (noted in the report), or undefined without the option. */
function overrides(option: string, file: string | undefined, notes: string[]): Record<string, unknown> | undefined {
  if (file === undefined) return undefined;
  const parsed: unknown = parseYaml(readFileSync(file, 'utf8'));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) fail(`--${option} ${file}: expected a mapping`);
  notes.push(`roomgate config overrides (--${option}): ${JSON.stringify(parsed)}`);
  return parsed as Record<string, unknown>;
}

function fail(msg: string): never {
  complain(`bench: ${msg}`);
  process.exit(2);
}

function parse(argv: string[]): { tls: boolean; roomgateConfig: string | undefined; roomgateConfigB: string | undefined; fromJson: string | undefined; o: Options; rounds: number; games: number[]; kinds: WorkloadKind[]; targets: TargetName[]; burst: number; scale: number; proxyCpu: string; loadCpu: string; out: string } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      rounds: { type: 'string', default: '3' },
      clients: { type: 'string', default: '1000,3000' },
      duration: { type: 'string', default: '6' },
      warmup: { type: 'string', default: '2' },
      only: { type: 'string', default: KINDS.join(',') },
      targets: { type: 'string', default: TARGETS.filter((t) => t !== 'roomgate-b').join(',') },
      burst: { type: 'string', default: '2000' },
      'burst-inflight': { type: 'string', default: '200' },
      scale: { type: 'string', default: '10000' },
      'ping-ms': { type: 'string', default: '30000' },
      'page-connections': { type: 'string', default: '64' },
      'proxy-cpu': { type: 'string' },
      'load-cpu': { type: 'string' },
      out: { type: 'string', default: join(ROOT, 'bench/results') },
      'from-json': { type: 'string' },
      'roomgate-config': { type: 'string' },
      'roomgate-config-b': { type: 'string' },
      tls: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    say(USAGE);
    process.exit(0);
  }
  const num = (name: string, v: string, lo: number, hi: number): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < lo || n > hi) fail(`--${name} must be a number from ${lo} to ${hi}, got ${v}`);
    return n;
  };
  const list = <T extends string>(name: string, v: string, allowed: readonly T[]): T[] => {
    const xs = v.split(',').map((s) => s.trim()).filter(Boolean);
    for (const x of xs) if (!allowed.includes(x as T)) fail(`--${name}: unknown ${JSON.stringify(x)} (allowed: ${allowed.join(', ')})`);
    if (xs.length === 0) fail(`--${name} is empty`);
    // Keep the canonical order (the report reads better), whatever order was given.
    return allowed.filter((a) => xs.includes(a));
  };
  const cpus = availableParallelism();
  const proxyCpu = values['proxy-cpu'] ?? '0';
  const loadCpu = values['load-cpu'] ?? (cpus > 1 ? '1' : '0');
  return {
    tls: values.tls === true,
    fromJson: values['from-json'],
    roomgateConfig: values['roomgate-config'],
    roomgateConfigB: values['roomgate-config-b'],
    rounds: Math.round(num('rounds', values.rounds, 1, 100)),
    games: values.clients.split(',').map((s) => Math.round(num('clients', s, 1, 100_000))),
    kinds: list('only', values.only, KINDS),
    targets: list('targets', values.targets, TARGETS),
    burst: Math.round(num('burst', values.burst, 1, 100_000)),
    scale: Math.round(num('scale', values.scale, 1, 200_000)),
    proxyCpu,
    loadCpu,
    out: resolve(values.out),
    o: {
      durationS: num('duration', values.duration, 0.5, 3600),
      warmupS: num('warmup', values.warmup, 0, 600),
      roomSize: 4,
      openConcurrency: 200,
      burstInflight: Math.round(num('burst-inflight', values['burst-inflight'], 1, 10_000)),
      pageConnections: Math.round(num('page-connections', values['page-connections'], 1, 10_000)),
      pingMs: Math.round(num('ping-ms', values['ping-ms'], 100, 600_000)),
    },
  };
}

function openFiles(): { soft: number; hard: number } {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const m = line ? /Max open files\s+(\S+)\s+(\S+)/.exec(line) : null;
  const n = (s: string | undefined): number => (s === 'unlimited' ? 1_048_576 : Number(s));
  return m ? { soft: n(m[1]), hard: n(m[2]) } : { soft: 1024, hard: 1024 };
}

/** Re-runs this process under `ulimit -n <hard>` when the soft limit is lower (children inherit it). */
async function raiseOpenFiles(): Promise<boolean> {
  const { soft, hard } = openFiles();
  if (soft >= hard || process.env[REEXEC_ENV]) return true;
  const child = spawn('/bin/sh', ['-c', `ulimit -n ${hard} && exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, [REEXEC_ENV]: String(hard) },
  });
  const forward = (sig: NodeJS.Signals): void => void child.kill(sig);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  process.exitCode = await new Promise<number>((r) => child.once('exit', (c, s) => r(c ?? (s ? 130 : 0))));
  return false;
}

async function startBackends(cpu: string): Promise<(BackendAddr & { pid: number })[]> {
  return Promise.all(
    ['b1', 'b2', 'b3'].map(async (id) => {
      const p = startProc(`backend ${id}`, process.execPath, [BACKEND, '--id', id, '--port', '0'], { cpu, stdin: true });
      const line = await waitLine(p, 'listening line', (l) => l.includes('"listening"'), 15_000);
      return { id, port: (JSON.parse(line) as { port: number }).port, pid: p.pid };
    }),
  );
}

function log(s: string): void {
  process.stderr.write(`${s}\n`);
}

function progress(r: RunRecord): string {
  const m = r.m;
  const f = (x: number | undefined, d = 1): string => (x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(d));
  if (!r.ok) return `FAILED: ${r.error?.split('\n')[0]}`;
  switch (r.kind) {
    case 'game':
      return `${f(m.framesPerS, 0)} frames/s, p99 ${f(m.p99, 2)} ms, CPU ${f(m.cpuUsPerFrame, 2)} µs/frame, ${f(m.kbPerSocket)} KB/socket, splits ${m.splits}`;
    case 'burst':
      return `${f(m.upgradesPerS, 0)} upgrades/s, open p99 ${f(m.open99, 1)} ms, CPU ${f(m.cpuUsPerUpgrade, 1)} µs/upgrade, failed ${m.failed}`;
    case 'page':
      return `${f(m.reqPerS, 0)} req/s, p99 ${f(m.p99, 2)} ms, CPU ${f(m.cpuUsPerReq, 1)} µs/req, errors ${m.errors}`;
    case 'scale':
      return `${m.sockets} sockets, ${f(m.kbPerSocket)} KB/socket, CPU ${f(m.cpuMsPerS, 1)} ms/s, failed ${m.failed}`;
  }
}

function writeReport(out: string, records: RunRecord[], meta: Meta): string {
  const md = markdown(records, meta);
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'latest.md'), md);
  writeFileSync(join(out, 'latest.svg'), svg(records, meta));
  writeFileSync(join(out, 'latest.json'), `${JSON.stringify({ meta, targets: targetRows(records, meta), runs: records }, null, 1)}\n`);
  return md;
}

async function main(): Promise<void> {
  const a = parse(process.argv.slice(2));
  if (a.fromJson) {
    const saved = JSON.parse(readFileSync(a.fromJson, 'utf8')) as { meta: Meta; runs: RunRecord[] };
    // JSON turned NaN into null.
    for (const r of saved.runs) for (const k of Object.keys(r.m)) r.m[k] ??= Number.NaN;
    process.stdout.write(`${writeReport(a.out, saved.runs, saved.meta)}\n`);
    return;
  }
  if (!existsSync('/proc/self/stat')) fail('Linux only: CPU and memory are read from /proc');
  for (const f of [ROOMGATE_MAIN, BACKEND]) if (!existsSync(f)) fail(`${f} is missing: run npm run build first`);
  const notes: string[] = [];
  const roomgateConfig = overrides('roomgate-config', a.roomgateConfig, notes);
  const roomgateConfigB = overrides('roomgate-config-b', a.roomgateConfigB, notes);
  if (a.targets.includes('roomgate-b') && roomgateConfigB === undefined) fail('--targets roomgate-b needs --roomgate-config-b FILE');
  let tls: Context['tls'];
  if (a.tls) {
    // The direct target is the backends themselves, which speak plain HTTP.
    a.targets = a.targets.filter((t) => t !== 'direct');
    if (a.targets.length === 0) fail('--tls leaves no target: name nginx, haproxy or roomgate');
    try {
      tls = benchCertificate(tempDir('roomgate-bench-tls-'), '127.0.0.1');
    } catch (err) {
      fail(`--tls: ${(err as Error).message}`);
    }
    notes.push('TLS: every proxy terminates TLS (P-256 certificate, TLS 1.3 from the load generator and wrk); the direct target is left out');
  }
  if (a.proxyCpu === a.loadCpu) notes.push(`one core only: the proxy and the load share CPU ${a.proxyCpu}, so CPU figures include contention`);

  const tools = ['taskset', ...a.targets.filter((t) => t === 'nginx' || t === 'haproxy'), ...(a.kinds.includes('page') ? ['wrk'] : [])];
  ensureTools(tools, log);

  // File descriptors: a proxy holds 2 per proxied socket. Sized as roomgate sizes its public limit
  // (listen.maxConnections derived: the limit minus the reserve, halved), so the idle-sockets run
  // never meets roomgate's connection limit (docs/operations.md#connection-limits).
  const { hard } = openFiles();
  const nofile = hard;
  const maxProxied = publicLimits(nofile, { maxConnections: 0, descriptorReserve: 0 }).maxConnections;
  const biggestGame = Math.max(...(a.kinds.includes('game') ? a.games : [0]));
  const scale = Math.min(a.scale, maxProxied);
  if (a.kinds.includes('scale') && scale < a.scale) {
    notes.push(
      `scale: ${scale.toLocaleString('en')} sockets instead of ${a.scale.toLocaleString('en')}: a proxy holds 2 open files per socket and the open-files hard limit here is ${nofile.toLocaleString('en')} ` +
        `(raise it with ulimit -Hn as root, LimitNOFILE in systemd or docker --ulimit nofile=65536 to run all of them)`,
    );
  }
  if (biggestGame > maxProxied) fail(`--clients ${biggestGame} needs ${2 * biggestGame + FD_HEADROOM} open files in the proxy; the hard limit is ${nofile}`);
  const largest = Math.max(biggestGame, a.kinds.includes('scale') ? scale : 0, a.kinds.includes('burst') ? a.burst : 0);
  const perLoadgen = nofile - FD_HEADROOM;
  const loadgens = Math.max(1, Math.ceil(largest / perLoadgen));

  const workloads: Workload[] = [];
  for (const k of a.kinds) {
    if (k === 'game') for (const n of a.games) workloads.push({ key: `game-${n}`, kind: 'game', size: n });
    if (k === 'burst') workloads.push({ key: 'burst', kind: 'burst', size: a.burst });
    if (k === 'page') workloads.push({ key: 'page', kind: 'page', size: a.o.pageConnections });
    if (k === 'scale') workloads.push({ key: 'scale', kind: 'scale', size: scale });
  }

  // This process (timers, /proc reads, IPC) runs with the load, off the proxy's core.
  spawnSync('taskset', ['-a', '-p', '-c', a.loadCpu, String(process.pid)], { stdio: 'ignore' });
  const startedAt = new Date().toISOString();
  const load1Start = loadAvg1();
  const v = versions();
  log(`roomgate bench: ${a.rounds} round(s) x [${workloads.map((w) => w.key).join(', ')}] x [${a.targets.join(', ')}]; proxy on CPU ${a.proxyCpu}, backends and load on CPU ${a.loadCpu}; load average ${load1Start}`);
  for (const n of notes) log(`note: ${n}`);

  const backends = await startBackends(a.loadCpu);
  const loadgen = await LoadGen.start(loadgens, a.loadCpu);
  const secret = randomBytes(24).toString('base64url');
  const signer = createRoomSigner({ secrets: [secret], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
  const loadPids = [...backends.map((b) => b.pid), ...loadgen.pids];
  const ctx: Context = { backends, proxyCpu: a.proxyCpu, loadCpu: a.loadCpu, secret, signer, nofile, loadgen, loadPids, roomgateConfig, roomgateConfigB, opts: a.o, ...(tls ? { tls } : {}) };

  const records: RunRecord[] = [];
  for (let round = 1; round <= a.rounds; round++) {
    for (const w of workloads) {
      for (const t of a.targets) {
        const t0 = performance.now();
        const r = await runWorkload(ctx, w, t, round);
        records.push(r);
        const side = Number.isFinite(r.cond.loadSide) ? `, load side ${(100 * r.cond.loadSide).toFixed(0)} % of its core` : '';
        log(`[round ${round}/${a.rounds}] ${w.key.padEnd(9)} ${t.padEnd(8)} ${progress(r)}  (${((performance.now() - t0) / 1000).toFixed(1)} s, load avg ${r.cond.load1}${side})`);
      }
    }
  }
  await loadgen.stop();

  derive(records);
  const meta: Meta = {
    startedAt,
    finishedAt: new Date().toISOString(),
    rounds: a.rounds,
    targets: a.targets,
    workloads,
    versions: v,
    settings: {
      pinning: `proxy pinned to CPU ${a.proxyCpu}, backends + load generator + wrk to CPU ${a.loadCpu} (taskset)`,
      backends: `${backends.length} (bench/suite/backend.ts)`,
      window: `${a.o.durationS} s`,
      'warm-up': `${a.o.warmupS} s`,
      'roomgate node flags': roomgateNodeArgs().join(' ') || '(none)',
      ...(process.env.BENCH_ROOMGATE_START_ARGS ? { 'roomgate start arguments': process.env.BENCH_ROOMGATE_START_ARGS } : {}),
      'room cookie': 'roomgate: signed roomgate_room (HMAC-SHA256); nginx/HAProxy: plain room',
      'roomgate admission limits': 'off (0)',
      'burst in flight': a.o.burstInflight,
      'wrk connections': a.o.pageConnections,
      'idle ping': `${a.o.pingMs / 1000} s`,
      'open-files limit': nofile,
    },
    notes,
    load1Start,
    load1End: loadAvg1(),
  };
  const md = writeReport(a.out, records, meta);
  process.stdout.write(`\n${md}\n`);
  log(`wrote ${join(a.out, 'latest.md')}, latest.svg, latest.json`);
  if (records.some((r) => !r.ok)) process.exitCode = 1;
}

if (await raiseOpenFiles()) {
  let stopping = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (stopping) process.exit(130);
    stopping = true;
    log(`bench: ${sig}: stopping everything it started...`);
    void cleanupAll().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await main();
  } catch (err) {
    log(`bench failed: ${(err as Error).message}`);
    process.exitCode = 1;
  } finally {
    await cleanupAll();
  }
}
