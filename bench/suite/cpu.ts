/**
 * What a process tree costs, from /proc (Linux only).
 *
 * CPU: utime + stime of every process in the tree (the root and its descendants: nginx's master
 * and worker, a Node process and its threads, which /proc/<pid>/stat already sums). The kernel
 * counts in clock ticks (USER_HZ, 100/s here: 10 ms), so a window should hold at least a few
 * hundred ms of CPU for a figure within a few %. Memory: VmRSS of every process in the tree.
 * The machine: busy ticks per CPU from /proc/stat (to see what else ran on the proxy's core) and
 * the load average.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

let ticksPerS: number | undefined;

/** USER_HZ (getconf CLK_TCK), 100 on every mainstream Linux. */
export function clockTicks(): number {
  if (ticksPerS === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number(out.stdout?.trim());
    ticksPerS = Number.isInteger(n) && n > 0 ? n : 100;
  }
  return ticksPerS;
}

interface Stat {
  readonly ppid: number;
  /** utime + stime in ticks. */
  readonly ticks: number;
  /** cutime + cstime: children already waited for. */
  readonly childTicks: number;
}

function readStat(pid: number): Stat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null; // gone
  }
  // The command name is in parentheses and may contain spaces: fields start after the last ')'.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // f[0] = state (field 3), f[1] = ppid (4), f[11] = utime (14), f[12] = stime (15),
  // f[13] = cutime (16), f[14] = cstime (17).
  return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), childTicks: Number(f[13]) + Number(f[14]) };
}

/** The root and all its descendants that are alive now. */
export function treePids(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const st = readStat(pid);
    if (!st) continue;
    const list = children.get(st.ppid);
    if (list) list.push(pid);
    else children.set(st.ppid, [pid]);
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    out.push(pid);
    for (const c of children.get(pid) ?? []) todo.push(c);
  }
  return out;
}

/** CPU time (user + system) used so far by the tree under `root`, in milliseconds. */
export function treeCpuMs(root: number): number {
  let ticks = 0;
  for (const pid of treePids(root)) ticks += readStat(pid)?.ticks ?? 0;
  return (ticks * 1000) / clockTicks();
}

/**
 * CPU time (user + system) so far of the tree's threads, in ms, by what each thread is: `main`
 * (a process's first thread: Node's JavaScript thread, nginx's worker), `relay` (roomgate's native
 * relay thread), `v8` (V8's workers: the GC and the compiler) and `other` (libuv's pool, the
 * rest). A thread that ends in between is not counted, so keep to windows threads live through.
 */
export function treeThreadCpuMs(root: number): Record<'main' | 'relay' | 'v8' | 'other', number> {
  const out = { main: 0, relay: 0, v8: 0, other: 0 };
  for (const pid of treePids(root)) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // gone
    }
    for (const tid of tids) {
      let text: string;
      try {
        text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
      } catch {
        continue;
      }
      const comm = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(f[11]) + Number(f[12])) * 1000) / clockTicks();
      const kind = tid === String(pid) ? 'main' : comm === 'roomgate-relay' ? 'relay' : comm.startsWith('V8') ? 'v8' : 'other';
      out[kind] += ms;
    }
  }
  return out;
}

/** Resident memory of the tree under `root`, in KiB (sum of VmRSS). */
export function treeRssKb(root: number): number {
  let kb = 0;
  for (const pid of treePids(root)) {
    try {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
      if (m) kb += Number(m[1]);
    } catch {
      /* gone */
    }
  }
  return kb;
}

/** Busy ticks (all but idle and iowait) per CPU, from /proc/stat. */
export function cpuBusyTicks(): number[] {
  const out: number[] = [];
  for (const line of readFileSync('/proc/stat', 'latin1').split('\n')) {
    const m = /^cpu(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const v = m[2]!.trim().split(/\s+/).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const busy = (v[0] ?? 0) + (v[1] ?? 0) + (v[2] ?? 0) + (v[5] ?? 0) + (v[6] ?? 0) + (v[7] ?? 0);
    out[Number(m[1])] = busy;
  }
  return out;
}

/** The 1-minute load average. */
export function loadAvg1(): number {
  return Number(readFileSync('/proc/loadavg', 'latin1').split(' ')[0]);
}

/**
 * CPU in ms of the load side: the given trees (backends, load generators) plus this process
 * itself and its children it has already waited for (wrk, once it has exited).
 */
export function loadSideCpuMs(pids: readonly number[]): number {
  const self = readStat(process.pid);
  let ms = self ? ((self.ticks + self.childTicks) * 1000) / clockTicks() : 0;
  for (const pid of pids) ms += treeCpuMs(pid);
  return ms;
}

/** A reading of everything a measurement window needs, at one instant. */
export interface Sample {
  readonly at: number;
  /** Proxy tree CPU in ms (0 without a proxy). */
  readonly proxyCpuMs: number;
  /** Load side CPU in ms (loadSideCpuMs). */
  readonly loadCpuMs: number;
  readonly busy: number[];
}

export function sample(proxyPid: number | null, loadPids: readonly number[]): Sample {
  return { at: performance.now(), proxyCpuMs: proxyPid ? treeCpuMs(proxyPid) : 0, loadCpuMs: loadSideCpuMs(loadPids), busy: cpuBusyTicks() };
}

export interface Window {
  readonly seconds: number;
  readonly proxyCpuMs: number;
  /** Share of one core the load side used (0..1). */
  readonly loadShare: number;
  /** Busy share (0..1) of each CPU over the window, whoever used it. */
  readonly busyShare: number[];
}

export function between(a: Sample, b: Sample): Window {
  const seconds = (b.at - a.at) / 1000;
  const hz = clockTicks();
  return {
    seconds,
    proxyCpuMs: b.proxyCpuMs - a.proxyCpuMs,
    loadShare: seconds > 0 ? (b.loadCpuMs - a.loadCpuMs) / 1000 / seconds : 0,
    busyShare: b.busy.map((x, i) => (seconds > 0 ? (x - (a.busy[i] ?? 0)) / hz / seconds : 0)),
  };
}
