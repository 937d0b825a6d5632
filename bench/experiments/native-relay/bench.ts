/**
 * nginx, a JavaScript relay, the native relay prototype and roomgate in the same run, on bench/suite's
 * backends, load generator and CPU accounting:
 *
 *   npm run bench:native-relay -- [--rounds 5] [--clients 1000] [--scale N] [--duration 6]
 *                                 [--idle-duration 30] [--idle-settle 1] [--warmup 2] [--ping-ms 30000]
 *                                 [--relays nginx,js,native,roomgate] [--out DIR]
 *
 * Each round runs, for each relay in turn (the order rotates every round), the game workload
 * (clients in rooms of 4, broadcasts 5/s, inputs every 400 ms: CPU per delivered frame, KB of RSS
 * per busy socket) and the idle workload (sockets pinging every --ping-ms: CPU per second, KB per
 * idle socket). The relay is pinned to --proxy-cpu, everything else to --load-cpu. Prints a
 * markdown report and writes native-relay.md and native-relay.json to --out.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { publicLimits } from '../../../src/server/connection-limit.js';
import { loadAvg1 } from '../../suite/cpu.js';
import { LoadGen } from '../../suite/driver.js';
import { cleanupAll, startProc, waitLine } from '../../suite/procs.js';
import { ROOT, ensureTools, versions, type BackendAddr } from '../../suite/proxies.js';
import { chooseRelay } from '../../../src/proxy/native-relay.js';
import { measure, type Measured, type Options } from './measure.js';
import { report } from './report.js';
import { RELAYS, startRelay, type Relay } from './targets.js';

const log = (s: string): boolean => process.stderr.write(`${s}\n`);
const BACKEND = join(import.meta.dirname, '../../suite/backend.js');

export interface Result {
  readonly round: number;
  readonly relay: Relay;
  readonly workload: 'game' | 'idle';
  readonly ok: boolean;
  readonly error?: string;
  readonly m?: Measured;
}

function args(): Options & { rounds: number; out: string; proxyCpu: string; loadCpu: string; relays: Relay[] } {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '5' },
      clients: { type: 'string', default: '1000' },
      scale: { type: 'string', default: '10000' },
      duration: { type: 'string', default: '6' },
      'idle-duration': { type: 'string', default: '30' },
      warmup: { type: 'string', default: '2' },
      'idle-settle': { type: 'string', default: '1' },
      relays: { type: 'string', default: RELAYS.filter((r) => r !== 'roomgate-before').join(',') },
      'ping-ms': { type: 'string', default: '30000' },
      'proxy-cpu': { type: 'string', default: '0' },
      'load-cpu': { type: 'string', default: '1' },
      out: { type: 'string', default: join(ROOT, 'bench/results') },
    },
  });
  const num = (k: keyof typeof values): number => {
    const n = Number(values[k]);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${k} must be a positive number, got ${values[k]}`);
    return n;
  };
  return {
    rounds: num('rounds'),
    clients: num('clients'),
    scale: num('scale'),
    durationS: num('duration'),
    idleDurationS: num('idle-duration'),
    warmupS: num('warmup'),
    idleSettleS: num('idle-settle'),
    relays: relayList(values.relays!),
    pingMs: num('ping-ms'),
    proxyCpu: values['proxy-cpu']!,
    loadCpu: values['load-cpu']!,
    out: resolve(values.out!),
  };
}

/** --relays: a comma-separated subset of RELAYS; nginx always runs (the ratios are to it). */
function relayList(list: string): Relay[] {
  const names = list.split(',').map((x) => x.trim()).filter(Boolean);
  const bad = names.filter((x) => !(RELAYS as readonly string[]).includes(x));
  if (bad.length > 0) throw new Error(`--relays: unknown ${bad.join(', ')}; expected some of ${RELAYS.join(', ')}`);
  return RELAYS.filter((r) => r === 'nginx' || names.includes(r));
}

function openFilesLimit(): number {
  const m = /Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : 1024;
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

async function main(): Promise<void> {
  const a = args();
  ensureTools(['taskset', 'nginx'], log);
  // The relay `npm ci` built (native/relay.cc): refuses to run, saying why, when it is not there.
  chooseRelay('native');
  // Sized as the suite sizes its idle run: the open-files limit minus roomgate's reserve, halved
  // (each relayed socket holds a client and a backend descriptor in the relay).
  const nofile = openFilesLimit();
  const idleSockets = Math.min(a.scale, publicLimits(nofile, { maxConnections: 0, descriptorReserve: 0 }).maxConnections);
  const o: Options = { ...a, scale: idleSockets };
  spawnSync('taskset', ['-a', '-p', '-c', a.loadCpu, String(process.pid)], { stdio: 'ignore' });
  const load1Start = loadAvg1();
  const startedAt = new Date().toISOString();
  log(`native-relay bench: ${a.rounds} rounds x [game ${a.clients}, idle ${idleSockets}] x [${a.relays.join(', ')}]; relay on CPU ${a.proxyCpu}, load on CPU ${a.loadCpu}; open-files limit ${nofile}; load average ${load1Start}`);
  const backends = await startBackends(a.loadCpu);
  const loadgen = await LoadGen.start(1, a.loadCpu);
  const loadPids = [...backends.map((b) => b.pid), ...loadgen.pids];
  const results: Result[] = [];
  for (let round = 1; round <= a.rounds; round++) {
    // Rotated each round, so that no relay always runs first (or last) in a round.
    const order = a.relays.map((_, i) => a.relays[(i + round - 1) % a.relays.length]!);
    for (const workload of ['game', 'idle'] as const) {
      for (const relay of order) {
        const r = await runOne({ relay, workload, round, o, backends, loadgen, loadPids, nofile, proxyCpu: a.proxyCpu, loadCpu: a.loadCpu });
        results.push(r);
        log(`[round ${round}/${a.rounds}] ${workload} ${relay.padEnd(6)} ${r.ok ? summary(r.m!) : `FAILED: ${r.error}`}`);
      }
    }
  }
  await loadgen.stop();
  const meta = { startedAt, finishedAt: new Date().toISOString(), load1Start, load1End: loadAvg1(), nofile, idleSockets, options: { ...a, scale: idleSockets }, versions: versions() };
  const md = report(results, meta);
  mkdirSync(a.out, { recursive: true });
  writeFileSync(join(a.out, 'native-relay.md'), md);
  writeFileSync(join(a.out, 'native-relay.json'), `${JSON.stringify({ meta, results }, null, 1)}\n`);
  process.stdout.write(`${md}\n`);
  if (results.some((r) => !r.ok)) process.exitCode = 1;
}

function summary(m: Measured): string {
  const f = (x: number, d: number): string => (Number.isFinite(x) ? x.toFixed(d) : '—');
  return `${m.sockets} sockets, ${f(m.cpuUsPerFrame, 2)} µs/frame, ${f(m.cpuMsPerS, 1)} ms CPU/s, ${f(m.kbPerSocket, 1)} KB/socket, splits ${m.splits}, proxy core ${f(100 * m.proxyCoreBusy, 0)} % busy; ms/s main ${f(m.threads.main, 1)}, relay ${f(m.threads.relay, 1)}, v8 ${f(m.threads.v8, 1)}, other ${f(m.threads.other, 1)}`;
}

async function runOne(x: Parameters<typeof measure>[0] & { relay: Relay; workload: 'game' | 'idle'; round: number; nofile: number; proxyCpu: string }): Promise<Result> {
  const base = { round: x.round, relay: x.relay, workload: x.workload };
  let run;
  try {
    run = await startRelay(x.relay, { backends: x.backends, cpu: x.proxyCpu, nofile: x.nofile, silenceMs: 75_000 });
  } catch (err) {
    return { ...base, ok: false, error: `did not start: ${(err as Error).message}` };
  }
  try {
    return { ...base, ok: true, m: await measure(x, run, x.workload) };
  } catch (err) {
    return { ...base, ok: false, error: `${(err as Error).message} (${run.logTail(3).join(' / ')})` };
  } finally {
    await x.loadgen.closeAll().catch(() => undefined);
    await run.stop();
  }
}

let stopping = false;
const onSignal = (): void => {
  if (stopping) process.exit(130);
  stopping = true;
  void cleanupAll().finally(() => process.exit(130));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
try {
  await main();
} catch (err) {
  log(`bench:native-relay failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await cleanupAll();
}
