/**
 * The soak: one roomgate process under steady game traffic and upgrade churn for minutes, sampled
 * every few seconds, with a verdict on growth (verdict.ts).
 *
 *   npm run soak -- [--minutes 10] [--sockets 10000] [--upgrades 100000] [--out bench/results]
 *
 * Starts 3 demo backends (examples/demo-backend), roomgate in front of them (the suite's start:
 * the node flags it ships with, a generated config; here with its admin listener for /metrics and
 * its default admission limits) and the clients (clients.ts) in child processes; opens the held
 * sockets, then for --minutes keeps them busy and churns --upgrades upgrades, sampling the
 * gateway (RSS from /proc, open fds from /proc/PID/fd, V8 heap, external memory, event-loop delay
 * and live sockets from its /metrics; every --gc-s a full collection first, through its inspector:
 * inspector.ts) and the clients (frames/s, drops); closes everything and checks the fds went
 * back. Writes soak.csv, soak.svg and soak.md to --out; exits 1 when the verdict is growth.
 */
import { readdirSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { configSchema } from '../../src/config/schema.js';
import { publicLimits } from '../../src/server/connection-limit.js';
import { loadAvg1, treeRssKb } from '../suite/cpu.js';
import { startIpcWorkers } from '../suite/driver.js';
import { cleanupAll, freePort, sleep, startProc, waitLine } from '../suite/procs.js';
import { ROOT, roomgateNodeArgs, startTarget, versions } from '../suite/proxies.js';
import type { Command, HoldResult, Stats } from './clients.js';
import { openCollector } from './inspector.js';
import { toCsv, toMarkdown, toSvg } from './report.js';
import { SETTLE_S, verdict, type Sample } from './verdict.js';

const say = (line: string): boolean => process.stderr.write(`${line}\n`);
const DEMO_BACKEND = join(ROOT, 'dist/examples/demo-backend/server.js');
const CLIENTS = join(import.meta.dirname, 'clients.js');
/**
 * Open files the gateway keeps besides its sockets (stdio, listeners, epoll, pipes, health checks,
 * handshakes in flight). At its limit it cannot accept: clients then wait in the listen backlog
 * until they give up, and the churn stalls (a first 10-minute run, 9,772 sockets under 20,000).
 */
const FD_HEADROOM = 512;
/** Churn upgrades in flight per client process, at most. */
const CHURN_INFLIGHT = 50;
/**
 * Held sockets opened per second (the default admission limit is 500/s per backend). Gentle: on
 * a shared 2-core machine at 600/s, backends busy with the first sockets' traffic answered some
 * handshakes only after the clients had given up.
 */
const RAMP_PER_S = 300;
/** Held sockets per client process, at most (CPU, and the open-files limit). */
const PER_CLIENT_PROCESS = 5_000;
const INPUT_MS = 2_000;
const ROOM_SIZE = 4;

const USAGE = `usage: npm run soak -- [options]   (or: node dist/bench/soak/run.js [options])

  --minutes N     how long the held sockets stay busy and the churn runs (default 10; fractions allowed)
  --sockets N     held game sockets (default 10000; capped by the gateway's open-files limit, 2 per socket)
  --upgrades N    churn upgrades over the run (default 100000)
  --sample-s S    seconds between samples (default: minutes x 60 / 100, from 1 to 5)
  --gc-s S        seconds between full collections before a sample, to read the live heap
                  (default: minutes x 60 / 20, at least 5)
  --out DIR       where soak.csv, soak.svg and soak.md go (default bench/results)
  -h, --help`;

function openFiles(pid: number | 'self'): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line ? /Max open files\s+(\S+)/.exec(line)?.[1] : undefined;
  return soft === undefined ? 1024 : soft === 'unlimited' ? 1_048_576 : Number(soft);
}

function parse(argv: string[]): { minutes: number; sockets: number; upgrades: number; sampleS: number; gcS: number; out: string } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      minutes: { type: 'string', default: '10' },
      sockets: { type: 'string', default: '10000' },
      upgrades: { type: 'string', default: '100000' },
      'sample-s': { type: 'string' },
      'gc-s': { type: 'string' },
      out: { type: 'string', default: join(ROOT, 'bench/results') },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const num = (name: string, v: string, lo: number, hi: number): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < lo || n > hi) {
      say(`soak: --${name} must be a number from ${lo} to ${hi}, got ${v}`);
      process.exit(2);
    }
    return n;
  };
  const minutes = num('minutes', values.minutes, 0.25, 24 * 60);
  return {
    minutes,
    sockets: Math.round(num('sockets', values.sockets, 4, 1_000_000)),
    upgrades: Math.round(num('upgrades', values.upgrades, 0, 100_000_000)),
    sampleS: values['sample-s'] ? num('sample-s', values['sample-s'], 0.2, 600) : Math.min(5, Math.max(1, (minutes * 60) / 100)),
    gcS: values['gc-s'] ? num('gc-s', values['gc-s'], 1, 3600) : Math.max(5, (minutes * 60) / 20),
    out: resolve(values.out),
  };
}

/** Every `name value` line of a Prometheus text answer, labels ignored and summed. */
function metricSums(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m) out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

async function metrics(adminPort: number): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return metricSums(await res.text());
}

function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/**
 * Sockets the gateway still counts live well after every client closed: which rooms (held rooms
 * are h<n>, the churn's fresh ones c<k>-<n>, from the lobby), and whether they end within 2 more
 * minutes (a slow end) or not (stuck).
 */
async function stuckSockets(n: number, closedAt: number, adminPort: number, port: number): Promise<string> {
  const at = Math.round((performance.now() - closedAt) / 1000);
  let rooms = '';
  try {
    // The admin port's lobby: every live room (the public one lists only listed rooms).
    const lobby = (await (await fetch(`http://127.0.0.1:${adminPort}/lobby?limit=500`, { signal: AbortSignal.timeout(5_000) })).json()) as { rooms: { room: string; sockets: number }[]; total: number };
    const held = lobby.rooms.filter((r) => r.room.startsWith('h'));
    rooms = `; the lobby lists ${lobby.total} rooms with sockets (${held.length} held rooms, ${lobby.rooms.length - held.length} others${lobby.rooms.length ? `, e.g. ${lobby.rooms.slice(0, 3).map((r) => `${r.room}: ${r.sockets}`).join(', ')}` : ''})`;
  } catch (err) {
    rooms = `; the lobby did not answer (${(err as Error).message})`;
  }
  const until = performance.now() + 120_000;
  let left = n;
  while (left > 0 && performance.now() < until) {
    await sleep(2_000);
    left = (await metrics(adminPort)).get('roomgate_live_sockets') ?? 0;
  }
  const then = left === 0 ? `all had ended ${Math.round((performance.now() - closedAt) / 1000)} s after` : `${left} were still live ${Math.round((performance.now() - closedAt) / 1000)} s after`;
  return `${n} sockets still counted live by the gateway ${at} s after the clients closed theirs${rooms}; ${then}`;
}

async function main(): Promise<boolean> {
  const a = parse(process.argv.slice(2));
  const notes: string[] = [];
  const nofile = openFiles('self');
  // A proxied socket holds 2 fds in the gateway (client side, backend side), the churn's too. And
  // the gateway accepts at most its derived public limit (the descriptor limit minus its reserve,
  // halved: src/server/connection-limit.ts): held sockets and the churn in flight stay under it, or
  // the run measures the limit's refusals instead of the gateway.
  const accepted = publicLimits(nofile, { maxConnections: 0, descriptorReserve: 0 }).maxConnections;
  const maxHeld = (procs: number): number => Math.min(Math.floor((nofile - FD_HEADROOM - 2 * CHURN_INFLIGHT * procs) / 2), accepted - CHURN_INFLIGHT * procs);
  const held = Math.min(a.sockets, maxHeld(Math.ceil(a.sockets / PER_CLIENT_PROCESS)));
  if (held < a.sockets) {
    notes.push(
      `${held.toLocaleString('en')} held sockets instead of ${a.sockets.toLocaleString('en')}: the gateway holds 2 open files per socket, keeps a reserve, and accepts ${accepted.toLocaleString('en')} connections at once with the open-files limit here, ` +
        `${nofile.toLocaleString('en')} (raise it with ulimit -n, LimitNOFILE in systemd or docker --ulimit nofile=65536 to hold all of them)`,
    );
  }
  const clientProcs = Math.max(Math.ceil(held / PER_CLIENT_PROCESS), Math.ceil((held + CHURN_INFLIGHT) / (nofile - FD_HEADROOM)));
  const cpus = `0-${availableParallelism() - 1}`;
  const startedAt = new Date().toISOString();
  const load1Start = loadAvg1();
  say(`soak: ${held} held sockets, ${a.upgrades} churn upgrades over ${a.minutes} min, a sample every ${a.sampleS} s; load average ${load1Start}`);
  for (const n of notes) say(`note: ${n}`);

  const backends = await Promise.all(
    ['b1', 'b2', 'b3'].map(async (id) => {
      const p = startProc(`backend ${id}`, process.execPath, [DEMO_BACKEND, '--id', id, '--port', '0'], { cpu: cpus });
      const line = await waitLine(p, 'listening line', (l) => l.includes('"listening"'), 15_000);
      return { id, port: (JSON.parse(line) as { port: number }).port };
    }),
  );
  const secret = randomBytes(24).toString('base64url');
  // Half the churn goes to fresh rooms, whose placements are kept placement.idleTtlMs after their
  // last socket left (3 minutes by default): that state grows for one TTL, then expiry keeps pace
  // with the churn. The verdict's window (the second half) must start after that, so the TTL is at
  // most a quarter of the soak (15 s in a 1-minute run; the default from 12 minutes on).
  const defaults = configSchema.parse({});
  const idleTtlMs = Math.min(defaults.placement.idleTtlMs, Math.round((a.minutes * 60_000) / 4));
  if (idleTtlMs < defaults.placement.idleTtlMs) notes.push(`placement.idleTtlMs ${idleTtlMs / 1000} s instead of ${defaults.placement.idleTtlMs / 1000} s: a quarter of the soak, so that the placements of the churn's fresh rooms reach their steady number (creation = expiry) before the verdict's window`);
  const adminPort = await freePort();
  // Where the gateway's inspector listens once asked to (SIGUSR1): the live heap (inspector.ts).
  const inspectPort = await freePort();
  const nodeFlags = roomgateNodeArgs().join(' ') || '(none)';
  process.env.BENCH_ROOMGATE_NODE_ARGS = [...roomgateNodeArgs(), `--inspect-port=127.0.0.1:${inspectPort}`].join(' ');
  const gw = await startTarget('roomgate', {
    backends,
    cpu: cpus,
    secret,
    nofile,
    // The suite turns admission off to measure bursts; a soak runs what production runs, except
    // for how long an empty room's placement is kept (see idleTtlMs above).
    roomgateConfig: { admin: { enabled: true, port: adminPort }, admission: defaults.admission, placement: { idleTtlMs } },
  });
  const pid = gw.pid!;
  const gwNofile = openFiles(pid);
  notes.push(`the gateway's open-files limit (/proc/PID/limits): ${gwNofile.toLocaleString('en')}; the load generator's: ${nofile.toLocaleString('en')} per process, so its ${held.toLocaleString('en')} sockets are split over ${clientProcs} child process(es)`);
  const collector = await openCollector(pid, inspectPort);
  const workers = await startIpcWorkers<Command>('clients', CLIENTS, clientProcs, cpus);
  const target = { port: gw.port!, secret, timeoutMs: 30_000 };

  const samples: Sample[] = [];
  let lastFrames = 0;
  let lastAt = performance.now();
  let t0 = performance.now();
  const take = async (phase: Sample['phase'], gc = false): Promise<Sample> => {
    if (gc) await collector.collect();
    const [m, stats] = await Promise.all([metrics(adminPort), Promise.all(workers.map((w) => w.call<Stats>({ cmd: 'stats' })))]);
    const now = performance.now();
    const frames = stats.reduce((s, x) => s + x.frames, 0);
    const s: Sample = {
      phase,
      t: (now - t0) / 1000,
      rssMb: treeRssKb(pid) / 1024,
      heapMb: (m.get('nodejs_heap_size_used_bytes') ?? Number.NaN) / 2 ** 20,
      externalMb: (m.get('nodejs_external_memory_bytes') ?? Number.NaN) / 2 ** 20,
      fds: fdCount(pid),
      lagP99Ms: (m.get('nodejs_eventloop_lag_p99_seconds') ?? Number.NaN) * 1000,
      sockets: m.get('roomgate_live_sockets') ?? 0,
      framesPerS: now > lastAt ? ((frames - lastFrames) * 1000) / (now - lastAt) : 0,
      upgrades: stats.reduce((x, y) => x + y.churnDone, 0),
      failed: stats.reduce((x, y) => x + y.churnFailed + y.heldFailed, 0),
      dropped: stats.reduce((x, y) => x + y.dropped, 0),
      load1: loadAvg1(),
      gc: gc ? 1 : 0,
    };
    lastFrames = frames;
    lastAt = now;
    samples.push(s);
    return s;
  };
  /**
   * Samples every sampleS until `done` settles (the samples' t is fixed up by the caller), in the
   * soak with a full collection first every gcS.
   */
  let lastGc = -Infinity;
  const sampleUntil = async <T>(phase: Sample['phase'], done: Promise<T>): Promise<T> => {
    let finished = false;
    void done.finally(() => (finished = true)).catch(() => undefined);
    let next = performance.now();
    while (!finished) {
      const gc = phase === 'soak' && performance.now() - lastGc >= a.gcS * 1000 - 1;
      if (gc) lastGc = performance.now();
      await take(phase, gc);
      next += a.sampleS * 1000;
      await Promise.race([sleep(Math.max(0, next - performance.now())), done.catch(() => undefined)]);
    }
    return done;
  };

  await sleep(1_000);
  await take('before', true);
  // Ramp: the held sockets, each process its contiguous share of the rooms.
  const per = Math.ceil(held / clientProcs);
  const rampAt = performance.now();
  const opened = await sampleUntil(
    'ramp',
    Promise.all(
      workers.map((w, i) =>
        w.call<HoldResult>({ cmd: 'hold', ...target, from: i * per, count: Math.max(0, Math.min(per, held - i * per)), roomSize: ROOM_SIZE, inputMs: INPUT_MS, ratePerS: RAMP_PER_S / clientProcs }),
      ),
    ),
  );
  const rampS = (performance.now() - rampAt) / 1000;
  const failed = opened.reduce((s, o) => s + o.failed, 0);
  if (failed > 0) notes.push(`${failed} held sockets did not open: ${opened.flatMap((o) => o.errors).join('; ')}`);
  say(`soak: ${held - failed} held sockets open in ${rampS.toFixed(1)} s`);
  // t = 0 from here on; the ramp's samples get negative times.
  const shift = (performance.now() - t0) / 1000;
  for (const s of samples) (s as { t: number }).t -= shift;
  t0 = performance.now();

  const soakMs = a.minutes * 60_000;
  const churnRate = a.upgrades / (soakMs / 1000);
  await Promise.all(
    workers.map((w, i) =>
      w.call({ cmd: 'churn-start', ...target, total: Math.round(a.upgrades / clientProcs), ratePerS: churnRate / clientProcs, maxInflight: CHURN_INFLIGHT, prefix: `c${i}-` }),
    ),
  );
  let lastLog = 0;
  await sampleUntil(
    'soak',
    (async () => {
      while (performance.now() - t0 < soakMs) {
        await sleep(Math.min(1_000, soakMs - (performance.now() - t0)));
        const s = samples[samples.length - 1]!;
        if (s.t - lastLog >= 60) {
          lastLog = s.t;
          say(`  ${(s.t / 60).toFixed(1)} min: RSS ${s.rssMb.toFixed(1)} MB, heap ${s.heapMb.toFixed(1)} MB, ${s.fds} fds, ${s.sockets} sockets, ${Math.round(s.framesPerS)} frames/s, ${s.upgrades} upgrades, lag p99 ${s.lagP99Ms.toFixed(1)} ms, load ${s.load1}`);
        }
      }
    })(),
  );
  await take('soak', true);
  const stats = await Promise.all(workers.map((w) => w.call<Stats>({ cmd: 'churn-stop', timeoutMs: 20_000 })));
  const churnFailed = stats.reduce((s, x) => s + x.churnFailed, 0);
  if (churnFailed > 0) notes.push(`${churnFailed} churn upgrades failed: ${stats.flatMap((x) => x.errors).join('; ')}`);

  // Everything closed: the gateway's fds must go back to where they were, and no socket may be
  // live SETTLE_S after (the verdict). A client that gave up its handshake is heard at once (the
  // gateway listens for its FIN from the handshake on), so nothing legitimately takes longer
  // than the half-close linger (5 s) and the load's own delay.
  await Promise.all(workers.map((w) => w.call({ cmd: 'close' })));
  const closedAt = performance.now();
  const closedBy = closedAt + SETTLE_S * 1000;
  let left = (await metrics(adminPort)).get('roomgate_live_sockets') ?? 0;
  while (left > 0 && performance.now() < closedBy) {
    await sleep(500);
    left = (await metrics(adminPort)).get('roomgate_live_sockets') ?? 0;
  }
  // None left: the last ones' fds close a moment after they leave the count (the linger).
  if (left === 0) {
    notes.push(`every socket the gateway counted live had ended ${((performance.now() - closedAt) / 1000).toFixed(1)} s after the clients closed theirs (the verdict allows ${SETTLE_S} s)`);
    await sleep(2_000);
  }
  const after = await take('after', true);
  if (after.sockets > 0) notes.push(await stuckSockets(after.sockets, closedAt, adminPort, gw.port!));
  collector.close();
  const downs = gw.backendDowns();
  if (downs > 0) notes.push(`roomgate marked a backend down ${downs} time(s) during the run (its active health checks)`);

  const v = verdict(samples);
  const v0 = versions();
  const info = {
    command: ['npm run soak', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
    startedAt,
    minutes: a.minutes,
    socketsAsked: a.sockets,
    socketsHeld: held,
    upgradesAsked: a.upgrades,
    clientProcesses: clientProcs,
    nofile,
    notes,
    versions: { ...v0, 'node flags': nodeFlags },
    gcS: a.gcS,
    load1Start,
    load1End: loadAvg1(),
    rampS,
  };
  mkdirSync(a.out, { recursive: true });
  writeFileSync(join(a.out, 'soak.csv'), toCsv(samples));
  writeFileSync(
    join(a.out, 'soak.svg'),
    toSvg(samples, v, `roomgate soak: ${v.ok ? 'flat' : 'GROWTH'} (${startedAt.slice(0, 10)})`, `${held.toLocaleString('en')} held game sockets, ${a.upgrades.toLocaleString('en')} upgrades churned over ${a.minutes} min; roomgate ${v0.roomgate}, Node ${v0.node}; load average ${load1Start}–${info.load1End}`),
  );
  const md = toMarkdown(samples, v, info);
  writeFileSync(join(a.out, 'soak.md'), md);
  process.stdout.write(`${md}\n`);
  say(`wrote ${relative(process.cwd(), join(a.out, 'soak.md')) || 'soak.md'}, soak.csv, soak.svg`);
  return v.ok;
}

let stopping = false;
const onSignal = (sig: NodeJS.Signals): void => {
  if (stopping) process.exit(130);
  stopping = true;
  say(`soak: ${sig}: stopping everything it started...`);
  void cleanupAll().finally(() => process.exit(130));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (err) {
  say(`soak failed: ${(err as Error).stack ?? (err as Error).message}`);
  process.exitCode = 2;
} finally {
  await cleanupAll();
}
