/**
 * The native-relay bench's markdown report: per relay, the median over rounds with the range, and
 * the ratio to nginx computed within each round (the machine is shared: ratios within a round are
 * what compare), with the conditions of the run.
 */
import { cell, fmt, median } from '../../suite/stats.js';
import type { Result } from './bench.js';
import type { Measured, Options } from './measure.js';
import { RELAYS, type Relay } from './targets.js';

export interface ReportMeta {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly load1Start: number;
  readonly load1End: number;
  readonly nofile: number;
  readonly idleSockets: number;
  readonly options: Options & { rounds: number; proxyCpu: string; loadCpu: string };
  readonly versions: Record<string, string>;
}

type Field = { [K in keyof Measured]: Measured[K] extends number ? K : never }[keyof Measured];
type ThreadKind = keyof Measured['threads'];

/** Per relay, the median CPU ms/s of each kind of thread (the first thread of each process is `main`). */
function threadTable(rs: readonly Result[], workload: Result['workload']): string[] {
  const kinds: ThreadKind[] = ['main', 'relay', 'v8', 'other'];
  const lines = ['| relay | main thread (JavaScript; nginx: its processes) | native relay thread | V8 workers | other threads |', '|---|---|---|---|---|'];
  for (const relay of RELAYS.filter((r) => rs.some((x) => x.relay === r))) {
    const ms = rs.filter((r) => r.ok && r.workload === workload && r.relay === relay && r.m!.threads !== undefined).map((r) => r.m!.threads);
    if (ms.length === 0) continue;
    lines.push(`| ${relay} | ${kinds.map((k) => cell(ms.map((t) => t[k]))).join(' | ')} |`);
  }
  return lines;
}

function values(rs: readonly Result[], workload: Result['workload'], relay: Relay, f: Field): number[] {
  return rs.filter((r) => r.ok && r.workload === workload && r.relay === relay).map((r) => r.m![f]);
}

/** value / nginx's value, in each round where both ran. */
function ratios(rs: readonly Result[], workload: Result['workload'], relay: Relay, f: Field): number[] {
  const out: number[] = [];
  for (const r of rs) {
    if (!r.ok || r.workload !== workload || r.relay !== relay) continue;
    const n = rs.find((x) => x.ok && x.workload === workload && x.relay === 'nginx' && x.round === r.round);
    if (n) out.push(r.m![f] / n.m![f]);
  }
  return out;
}

const ratioCell = (xs: number[]): string => cell(xs.map((x) => Math.round(x * 100) / 100)).replace(/^([\d.]+)/, '$1x');

function table(rs: readonly Result[], workload: Result['workload'], main: Field, mainName: string): string[] {
  const lines = [
    `| relay | ${mainName} | ratio to nginx (same round) | KB RSS per socket | ratio to nginx | p99 ms | proxy core busy % |`,
    '|---|---|---|---|---|---|---|',
  ];
  for (const relay of RELAYS.filter((r) => rs.some((x) => x.relay === r))) {
    const v = (f: Field): number[] => values(rs, workload, relay, f);
    lines.push(
      `| ${relay} | ${cell(v(main))} | ${relay === 'nginx' ? '1' : ratioCell(ratios(rs, workload, relay, main))} | ${cell(v('kbPerSocket'))} | ${relay === 'nginx' ? '1' : ratioCell(ratios(rs, workload, relay, 'kbPerSocket'))} | ${cell(v('p99'))} | ${cell(v('proxyCoreBusy').map((x) => 100 * x))} |`,
    );
  }
  return lines;
}

export function report(rs: readonly Result[], meta: ReportMeta): string {
  const o = meta.options;
  const all = rs.filter((r) => r.ok).map((r) => r.m!);
  const sum = (f: Field): number => all.reduce((s, m) => s + m[f], 0);
  const out = [
    `# Native relay: nginx, a JavaScript relay, the native relay and roomgate (${meta.startedAt} to ${meta.finishedAt})`,
    '',
    `${o.rounds} rounds; in each, every relay started fresh per workload (order rotated per round), pinned alone to CPU ${o.proxyCpu}; ` +
      `3 bench backends, the load generator and this process on CPU ${o.loadCpu}. Cells: median over rounds (min–max). ` +
      `Load average ${meta.load1Start} at the start, ${meta.load1End} at the end; other processes share both cores.`,
    '',
    `## Game: ${o.clients} clients in rooms of 4 (broadcast 5/s, input every 400 ms), ${o.durationS} s window after ${o.warmupS} s`,
    '',
    ...table(rs, 'game', 'cpuUsPerFrame', 'CPU µs per delivered frame'),
    '',
    `## Idle: ${meta.idleSockets.toLocaleString('en')} sockets, a ping every ${o.pingMs / 1000} s each, ${o.idleDurationS} s window ${o.idleSettleS} s after the last socket opened`,
    '',
    `Sized to the open-files limit (${meta.nofile.toLocaleString('en')}) minus roomgate's descriptor reserve, halved (2 descriptors per relayed socket).`,
    '',
    ...table(rs, 'idle', 'cpuMsPerS', 'CPU ms per second'),
    '',
    'Where it goes: CPU ms per second of the idle window by thread, median (min–max) (/proc/<pid>/task; a process\'s first thread is its main thread).',
    '',
    ...threadTable(rs, 'idle'),
    '',
    '## Conditions',
    '',
    `- runs: ${rs.length}, failed: ${rs.filter((r) => !r.ok).length}; sockets that failed to open: ${fmt(sum('failed'))}; closed in a window: ${fmt(sum('closed'))}; rooms split: ${fmt(sum('splits'))}`,
    `- load average at each run's start: median ${fmt(median(all.map((m) => m.load1)))}; load core busy: median ${fmt(100 * median(all.map((m) => m.loadCoreBusy)))} %`,
    `- native relay: roomgate's (native/relay.cc) in a bare server, silence time 75 s (swept once a second), fixed 64 KB buffer, one thread; JavaScript relay: socket.pipe both ways; both read the request head and hash the room cookie in JavaScript; roomgate: as bench/suite starts it (its node flags, admission off), routing on the same plain cookie (cookie.signed false)`,
    `- ${Object.entries(meta.versions).map(([k, v]) => `${k} ${v}`).join('; ')}`,
    ...rs.filter((r) => !r.ok).map((r) => `- FAILED round ${r.round} ${r.workload} ${r.relay}: ${r.error}`),
  ];
  return `${out.join('\n')}\n`;
}
