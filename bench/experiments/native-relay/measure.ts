/**
 * One measured run of the native-relay bench: open the sockets through a relay, settle, then one
 * window with the relay's CPU (utime + stime of its process tree, threads included) and RSS read
 * at both ends, as bench/suite/workloads.ts measures its game and scale workloads.
 */
import { between, loadAvg1, sample, treeRssKb, treeThreadCpuMs } from '../../suite/cpu.js';
import type { LoadGen } from '../../suite/driver.js';
import type { ClientSpec } from '../../suite/loadgen.js';
import { WS_PATH, cookieHeader } from '../../suite/protocol.js';
import { sleep } from '../../suite/procs.js';
import type { BackendAddr } from '../../suite/proxies.js';
import type { RunningRelay } from './targets.js';

export interface Options {
  readonly clients: number;
  /** Idle sockets. */
  readonly scale: number;
  readonly durationS: number;
  readonly idleDurationS: number;
  readonly warmupS: number;
  /** Seconds between the last idle socket opened and the idle window (the opening burst's aftermath: GC, JIT). */
  readonly idleSettleS: number;
  readonly pingMs: number;
}

export interface Measured {
  sockets: number;
  failed: number;
  frames: number;
  /** Relay CPU per delivered frame (game). */
  cpuUsPerFrame: number;
  /** Relay CPU in ms per second of the window. */
  cpuMsPerS: number;
  /** RSS growth from before the sockets opened to the window's end, per socket. */
  kbPerSocket: number;
  rssMb: number;
  p99: number;
  splits: number;
  closed: number;
  windowS: number;
  /** Busy share of the relay's core and of the load's core in the window, whoever used them. */
  proxyCoreBusy: number;
  loadCoreBusy: number;
  load1: number;
  /** CPU ms per second of the window by thread kind (treeThreadCpuMs): where the relay's CPU goes. */
  threads: Record<'main' | 'relay' | 'v8' | 'other', number>;
}

export interface MeasureContext {
  readonly o: Options;
  readonly backends: readonly BackendAddr[];
  readonly loadgen: LoadGen;
  readonly loadPids: readonly number[];
  readonly loadCpu: string;
  readonly proxyCpu: string;
}

let runSeq = 0;

/** Rooms of 4, each room's clients listed together; the plain `room` cookie is what nginx and relay-server hash. */
function specs(port: number, n: number, query: string): ClientSpec[] {
  const prefix = `n${++runSeq}`;
  return Array.from({ length: n }, (_, i) => {
    const room = `${prefix}-${Math.floor(i / 4)}`;
    return { port, path: `${WS_PATH}${query}`, origin: `http://127.0.0.1:${port}`, cookie: cookieHeader(room, 'unsigned', i) };
  });
}

function splits(welcome: readonly [string, string][]): number {
  const by = new Map<string, Set<string>>();
  for (const [room, backend] of welcome) by.set(room, (by.get(room) ?? new Set()).add(backend));
  return [...by.values()].filter((s) => s.size > 1).length;
}

export async function measure(ctx: MeasureContext, run: RunningRelay, workload: 'game' | 'idle'): Promise<Measured> {
  const load1 = loadAvg1();
  await sleep(200);
  const rss0 = treeRssKb(run.pid);
  const n = workload === 'game' ? ctx.o.clients : ctx.o.scale;
  const opened = await ctx.loadgen.open(specs(run.port, n, workload === 'game' ? '' : '?idle=1'), {
    concurrency: 200,
    mode: workload,
    pingMs: ctx.o.pingMs,
  });
  if (opened.opened === 0) throw new Error(`no socket opened: ${opened.errors.join('; ')}`);
  await sleep((workload === 'game' ? ctx.o.warmupS : ctx.o.idleSettleS) * 1000);
  const a = sample(run.pid, ctx.loadPids);
  const threads0 = treeThreadCpuMs(run.pid);
  await ctx.loadgen.windowStart();
  await sleep((workload === 'game' ? ctx.o.durationS : ctx.o.idleDurationS) * 1000);
  const win = await ctx.loadgen.windowEnd();
  const b = sample(run.pid, ctx.loadPids);
  const threads1 = treeThreadCpuMs(run.pid);
  const rss1 = treeRssKb(run.pid);
  const w = between(a, b);
  const cpuMs = b.proxyCpuMs - a.proxyCpuMs;
  if (workload === 'game' && win.frames === 0) throw new Error(`no frame delivered (${win.alive} of ${opened.opened} sockets open)`);
  return {
    sockets: opened.opened,
    failed: opened.failed,
    frames: win.frames,
    cpuUsPerFrame: workload === 'game' ? (cpuMs * 1000) / win.frames : Number.NaN,
    cpuMsPerS: cpuMs / w.seconds,
    kbPerSocket: (rss1 - rss0) / opened.opened,
    rssMb: rss1 / 1024,
    p99: win.hist.percentile(99),
    splits: splits(opened.welcome),
    closed: win.closed,
    windowS: w.seconds,
    proxyCoreBusy: w.busyShare[Number(ctx.proxyCpu)] ?? Number.NaN,
    loadCoreBusy: w.busyShare[Number(ctx.loadCpu)] ?? Number.NaN,
    load1,
    threads: {
      main: (threads1.main - threads0.main) / w.seconds,
      relay: (threads1.relay - threads0.relay) / w.seconds,
      v8: (threads1.v8 - threads0.v8) / w.seconds,
      other: (threads1.other - threads0.other) / w.seconds,
    },
  };
}
