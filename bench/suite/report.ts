/**
 * The suite's output: a markdown report (conditions, one table per workload, the targets table)
 * and an SVG chart written by hand (grouped bars: median, min-max whisker).
 */
import type { TargetName } from './proxies.js';
import { cell, fmt, max, median, min } from './stats.js';
import type { RunRecord, WorkloadKind } from './workloads.js';

export interface Meta {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly rounds: number;
  readonly targets: readonly TargetName[];
  readonly workloads: readonly { key: string; kind: WorkloadKind; size: number }[];
  readonly versions: Record<string, string>;
  readonly settings: Record<string, string | number>;
  readonly notes: readonly string[];
  readonly load1Start: number;
  readonly load1End: number;
}

interface Column {
  readonly key: string;
  readonly label: string;
  /** Not measured without a proxy. */
  readonly proxyOnly?: boolean;
}

const COLUMNS: Record<WorkloadKind, Column[]> = {
  game: [
    { key: 'framesPerS', label: 'frames/s' },
    { key: 'p50', label: 'p50 ms' },
    { key: 'p95', label: 'p95 ms' },
    { key: 'p99', label: 'p99 ms' },
    { key: 'dP50', label: '+p50 vs direct', proxyOnly: true },
    { key: 'dP95', label: '+p95 vs direct', proxyOnly: true },
    { key: 'dP99', label: '+p99 vs direct', proxyOnly: true },
    { key: 'cpuUsPerFrame', label: 'CPU µs/frame', proxyOnly: true },
    { key: 'proxyCpuPct', label: 'CPU % of core', proxyOnly: true },
    { key: 'kbPerSocket', label: 'KB/socket', proxyOnly: true },
    { key: 'splits', label: 'rooms split' },
  ],
  burst: [
    { key: 'upgradesPerS', label: 'upgrades/s' },
    { key: 'open50', label: 'open p50 ms' },
    { key: 'open95', label: 'open p95 ms' },
    { key: 'open99', label: 'open p99 ms' },
    { key: 'cpuUsPerUpgrade', label: 'CPU µs/upgrade', proxyOnly: true },
    { key: 'failed', label: 'failed' },
  ],
  page: [
    { key: 'reqPerS', label: 'req/s' },
    { key: 'p50', label: 'p50 ms' },
    { key: 'p99', label: 'p99 ms' },
    { key: 'cpuUsPerReq', label: 'CPU µs/req', proxyOnly: true },
    { key: 'errors', label: 'errors' },
  ],
  scale: [
    { key: 'sockets', label: 'sockets' },
    { key: 'kbPerSocket', label: 'KB/socket', proxyOnly: true },
    { key: 'rssMb', label: 'RSS MB', proxyOnly: true },
    { key: 'cpuMsPerS', label: 'CPU ms/s idle', proxyOnly: true },
    { key: 'pongsPerS', label: 'pongs/s' },
    { key: 'failed', label: 'failed' },
  ],
};

const TITLES: Record<WorkloadKind, (size: number) => string> = {
  game: (n) => `game, ${n.toLocaleString('en')} clients in rooms of 4`,
  burst: (n) => `burst, ${n.toLocaleString('en')} upgrades`,
  page: () => 'page, 10 KB GET with a varying room cookie (wrk)',
  scale: (n) => `scale, ${n.toLocaleString('en')} idle sockets pinging`,
};

/** Goals for the targets table; the issue fixes the memory bound, the rest are this suite's defaults. */
// The targets of the issue that asked for this suite, all against nginx in the same run.
export const GOALS = {
  cpuPerFrameRatio: 1.0,
  addedP99Ratio: 1.0,
  /** An added p99 this small meets the goal whatever the ratio; 0 = the ratio alone decides. */
  addedP99FloorMs: 0,
  kbPerSocket: 10,
  cpuPerUpgradeRatio: 1.0,
  upgradesPerSRatio: 0.9,
  cpuPerReqRatio: 1.5,
  /** 3,000 clients' CPU per frame within this fraction of the 1,000 clients' (either way). */
  linearity: 0.15,
};

/** Adds the differences to direct (same round, same workload) to each proxy run. */
export function derive(records: RunRecord[]): void {
  for (const r of records) {
    if (r.kind !== 'game' || r.target === 'direct' || !r.ok) continue;
    const d = records.find((x) => x.ok && x.target === 'direct' && x.workload === r.workload && x.round === r.round);
    if (!d) continue;
    for (const p of ['p50', 'p95', 'p99']) r.m[`d${p[0]!.toUpperCase()}${p.slice(1)}`] = (r.m[p] ?? Number.NaN) - (d.m[p] ?? Number.NaN);
  }
}

function values(records: readonly RunRecord[], workload: string, target: TargetName, key: string): number[] {
  return records.filter((r) => r.ok && r.workload === workload && r.target === target).map((r) => r.m[key] ?? Number.NaN);
}

function med(records: readonly RunRecord[], workload: string, target: TargetName, key: string): number {
  return median(values(records, workload, target, key));
}

interface TargetRow {
  readonly what: string;
  readonly goal: string;
  readonly ours: number;
  readonly nginx: number;
  readonly ratio: number;
  readonly met: boolean | null;
}

export function targetRows(records: readonly RunRecord[], meta: Meta): TargetRow[] {
  const rows: TargetRow[] = [];
  const has = (t: TargetName): boolean => meta.targets.includes(t);
  if (!has('roomgate')) return rows;
  const ratioRow = (what: string, goal: string, ours: number, nginx: number, ok: (ratio: number, ours: number) => boolean): void => {
    const ratio = ours / nginx;
    const known = Number.isFinite(ours) && (Number.isFinite(ratio) || !has('nginx'));
    rows.push({ what, goal, ours, nginx, ratio, met: known && Number.isFinite(ratio) ? ok(ratio, ours) : null });
  };
  const games = meta.workloads.filter((w) => w.kind === 'game');
  for (const w of games) {
    ratioRow(`CPU per delivered frame (${w.key})`, `≤ ${GOALS.cpuPerFrameRatio}x nginx`, med(records, w.key, 'roomgate', 'cpuUsPerFrame'), med(records, w.key, 'nginx', 'cpuUsPerFrame'), (r) => r <= GOALS.cpuPerFrameRatio);
  }
  for (const w of games) {
    ratioRow(
      `added p99 latency over direct (${w.key}), ms`,
      GOALS.addedP99FloorMs > 0 ? `≤ ${GOALS.addedP99Ratio}x nginx or ≤ ${GOALS.addedP99FloorMs} ms` : `≤ ${GOALS.addedP99Ratio}x nginx`,
      med(records, w.key, 'roomgate', 'dP99'),
      med(records, w.key, 'nginx', 'dP99'),
      (r, ours) => r <= GOALS.addedP99Ratio || ours <= GOALS.addedP99FloorMs,
    );
  }
  const memRow = (key: string): void => {
    const ours = med(records, key, 'roomgate', 'kbPerSocket');
    const nginx = med(records, key, 'nginx', 'kbPerSocket');
    rows.push({ what: `memory per proxied socket (${key}), KB`, goal: `≤ ${GOALS.kbPerSocket} KB`, ours, nginx, ratio: ours / nginx, met: Number.isFinite(ours) ? ours <= GOALS.kbPerSocket : null });
  };
  if (meta.workloads.some((w) => w.key === 'scale')) memRow('scale');
  const biggest = [...games].sort((a, b) => b.size - a.size)[0];
  if (biggest) memRow(biggest.key);
  if (meta.workloads.some((w) => w.key === 'burst')) {
    ratioRow('CPU per upgrade (burst), µs', `≤ ${GOALS.cpuPerUpgradeRatio}x nginx`, med(records, 'burst', 'roomgate', 'cpuUsPerUpgrade'), med(records, 'burst', 'nginx', 'cpuUsPerUpgrade'), (r) => r <= GOALS.cpuPerUpgradeRatio);
    ratioRow('upgrades/s (burst)', `≥ ${GOALS.upgradesPerSRatio}x nginx`, med(records, 'burst', 'roomgate', 'upgradesPerS'), med(records, 'burst', 'nginx', 'upgradesPerS'), (r) => r >= GOALS.upgradesPerSRatio);
  }
  if (meta.workloads.some((w) => w.key === 'page')) {
    ratioRow('CPU per page request, µs', `≤ ${GOALS.cpuPerReqRatio}x nginx`, med(records, 'page', 'roomgate', 'cpuUsPerReq'), med(records, 'page', 'nginx', 'cpuUsPerReq'), (r) => r <= GOALS.cpuPerReqRatio);
  }
  if (games.length >= 2) {
    const [small, big] = [...games].sort((a, b) => a.size - b.size).filter((_, i, a) => i === 0 || i === a.length - 1);
    const lin = (t: TargetName): number => med(records, big!.key, t, 'cpuUsPerFrame') / med(records, small!.key, t, 'cpuUsPerFrame');
    const ours = lin('roomgate');
    const nginx = lin('nginx');
    rows.push({
      what: `linearity: CPU/frame ${big!.key} ÷ ${small!.key}`,
      goal: `within ±${Math.round(GOALS.linearity * 100)} %`,
      ours,
      nginx,
      ratio: ours / nginx,
      met: Number.isFinite(ours) ? Math.abs(ours - 1) <= GOALS.linearity : null,
    });
  }
  return rows;
}

function table(header: string[], rows: string[][], align: string[]): string {
  return [`| ${header.join(' | ')} |`, `| ${align.join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

export function markdown(records: readonly RunRecord[], meta: Meta): string {
  const out: string[] = [];
  const v = meta.versions;
  out.push('# roomgate benchmark: latest results', '');
  out.push(
    `${meta.startedAt} – ${meta.finishedAt}. ${meta.rounds} round(s), targets and workloads interleaved ` +
      `(each round runs every workload through every target in turn). Cells: median (min–max) over rounds.`,
    '',
  );
  out.push('**Conditions**', '');
  const loads = records.map((r) => r.cond.load1);
  const pc = records.filter((r) => r.target !== 'direct').map((r) => r.cond.proxyCoreBusy);
  const lc = records.map((r) => r.cond.loadCoreBusy);
  const ls = records.map((r) => r.cond.loadSide);
  // Fixed-rate workloads (game, scale) should leave the load core headroom; burst and page go as
  // fast as the load side can, so they always fill its core.
  const saturated = records.filter((r) => (r.kind === 'game' || r.kind === 'scale') && r.cond.loadSide > 0.9);
  const flatOut = meta.workloads.some((w) => w.kind === 'burst' || w.kind === 'page');
  out.push(
    `- machine: ${v.cpu}, kernel ${v.kernel}; ${meta.settings.pinning}`,
    `- versions: roomgate ${v.roomgate}, Node ${v.node}, nginx ${v.nginx}, ${v.haproxy}, ${v.wrk}`,
    `- load average (1 min): ${fmt(meta.load1Start)} at start, ${fmt(meta.load1End)} at end, ${fmt(min(loads))}–${fmt(max(loads))} at the start of runs`,
    `- busy share of the proxy core during proxy windows: median ${fmt(100 * median(pc))} % (${fmt(100 * min(pc))}–${fmt(100 * max(pc))} %); of the load core: median ${fmt(100 * median(lc))} % (${fmt(100 * min(lc))}–${fmt(100 * max(lc))} %)`,
    `- the load side itself (backends, load generator, wrk, orchestrator) used median ${fmt(100 * median(ls))} % (max ${fmt(100 * max(ls))} %) of its core` +
      (saturated.length > 0
        ? `; **over 90 % in ${saturated.length} fixed-rate run(s)** (${[...new Set(saturated.map((r) => `${r.workload} ${r.target} round ${r.round}`))].join(', ')}): there the load side, not the target, may have set the latencies`
        : '; under 90 % in every game and scale run') +
      (flatOut ? '. burst and page run as fast as the load side can: their rates are capped by the load core when the proxy keeps up, so compare their CPU per unit' : ''),
    `- settings: ${Object.entries(meta.settings)
      .filter(([k]) => k !== 'pinning')
      .map(([k, x]) => `${k} ${x}`)
      .join(', ')}`,
    ...meta.notes.map((n) => `- note: ${n}`),
    '',
  );

  const goals = targetRows(records, meta);
  if (goals.length > 0) {
    out.push('## Targets (roomgate vs nginx, same run, medians)', '');
    out.push(
      table(
        ['target', 'goal', 'roomgate', 'nginx', 'ratio', 'met'],
        goals.map((g) => [g.what, g.goal, fmt(g.ours), fmt(g.nginx), Number.isFinite(g.ratio) ? `${g.ratio.toFixed(2)}x` : '—', g.met === null ? 'n/a' : g.met ? 'met' : '**not met**']),
        ['---', '---', '---:', '---:', '---:', '---'],
      ),
      '',
    );
  }

  for (const w of meta.workloads) {
    const cols = COLUMNS[w.kind];
    out.push(`## ${TITLES[w.kind](w.size)}`, '');
    const rows = meta.targets.map((t) => {
      const runs = records.filter((r) => r.workload === w.key && r.target === t);
      const failed = runs.filter((r) => !r.ok).length;
      const name = failed > 0 ? `${t} (${failed} run(s) failed)` : t;
      return [name, ...cols.map((c) => (c.proxyOnly && t === 'direct' ? '—' : cell(values(records, w.key, t, c.key))))];
    });
    out.push(table(['target', ...cols.map((c) => c.label)], rows, ['---', ...cols.map(() => '---:')]), '');
    const notes = records.filter((r) => r.workload === w.key && (r.error || r.notes.length > 0));
    for (const r of notes) out.push(`- round ${r.round}, ${r.target}: ${r.error ? `failed: ${r.error.split('\n')[0]}` : r.notes.join('; ')}`);
    if (notes.length > 0) out.push('');
  }
  out.push('Chart: `latest.svg`; every run: `latest.json`. How it is measured: `bench/README.md`.', '');
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------
// SVG

const COLORS: Record<TargetName, string> = { direct: '#9e9e9e', nginx: '#2e7d32', haproxy: '#1565c0', roomgate: '#e65100', 'roomgate-b': '#6a1b9a' };

/** Text escaped for SVG/XML. */
export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

interface Panel {
  readonly title: string;
  readonly note: string;
  /** Groups along x: a workload key and its label. */
  readonly groups: { key: string; label: string }[];
  readonly metric: string;
  readonly targets: TargetName[];
  /** A dashed reference line (a goal). */
  readonly goal?: number;
}

function niceMax(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  // Tops whose quarters are round numbers (the axis has 4 steps).
  for (const m of [1, 1.2, 1.6, 2, 2.4, 3, 4, 6, 8, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function panelSvg(p: Panel, records: readonly RunRecord[], x0: number, y0: number, w: number, h: number): string {
  const parts: string[] = [];
  const top = 44;
  const bottom = 34;
  const left = 52;
  const plotH = h - top - bottom;
  const plotW = w - left - 12;
  parts.push(`<rect x="${x0}" y="${y0}" width="${w}" height="${h}" fill="#fff" stroke="#ddd"/>`);
  parts.push(`<text x="${x0 + 10}" y="${y0 + 18}" font-size="13" font-weight="bold">${esc(p.title)}</text>`);
  parts.push(`<text x="${x0 + 10}" y="${y0 + 34}" font-size="11" fill="#555">${esc(p.note)}</text>`);
  const all = p.groups.flatMap((g) => p.targets.flatMap((t) => values(records, g.key, t, p.metric)));
  const top_ = niceMax(Math.max(max(all), p.goal ?? 0));
  const y = (v: number): number => y0 + top + plotH - (Math.max(0, Math.min(v, top_)) / top_) * plotH;
  for (let i = 0; i <= 4; i++) {
    const v = (top_ * i) / 4;
    parts.push(`<line x1="${x0 + left}" x2="${x0 + left + plotW}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`);
    parts.push(`<text x="${x0 + left - 5}" y="${(y(v) + 4).toFixed(1)}" font-size="10" text-anchor="end" fill="#555">${esc(fmt(v))}</text>`);
  }
  if (p.goal !== undefined) {
    parts.push(`<line x1="${x0 + left}" x2="${x0 + left + plotW}" y1="${y(p.goal).toFixed(1)}" y2="${y(p.goal).toFixed(1)}" stroke="#c62828" stroke-dasharray="5,4"/>`);
    parts.push(`<text x="${x0 + w - 10}" y="${y0 + 34}" font-size="11" text-anchor="end" fill="#c62828">- - - goal ${esc(fmt(p.goal))}</text>`);
  }
  const gw = plotW / Math.max(1, p.groups.length);
  const bw = Math.min(34, (gw - 16) / Math.max(1, p.targets.length));
  p.groups.forEach((g, gi) => {
    const gx = x0 + left + gi * gw + (gw - bw * p.targets.length) / 2;
    p.targets.forEach((t, ti) => {
      const vs = values(records, g.key, t, p.metric);
      const m = median(vs);
      const bx = gx + ti * bw;
      if (!Number.isFinite(m)) {
        parts.push(`<text x="${(bx + bw / 2).toFixed(1)}" y="${(y(0) - 4).toFixed(1)}" font-size="9" text-anchor="middle" fill="#999">n/a</text>`);
        return;
      }
      parts.push(`<rect x="${(bx + 2).toFixed(1)}" y="${y(m).toFixed(1)}" width="${(bw - 4).toFixed(1)}" height="${(y(0) - y(m)).toFixed(1)}" fill="${COLORS[t]}"><title>${esc(`${t} ${g.label}: ${cell(vs)}`)}</title></rect>`);
      const lo = min(vs);
      const hi = max(vs);
      if (hi > lo) {
        const cx = (bx + bw / 2).toFixed(1);
        parts.push(`<line x1="${cx}" x2="${cx}" y1="${y(lo).toFixed(1)}" y2="${y(hi).toFixed(1)}" stroke="#222"/>`);
        for (const v of [lo, hi]) parts.push(`<line x1="${(bx + bw / 2 - 4).toFixed(1)}" x2="${(bx + bw / 2 + 4).toFixed(1)}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#222"/>`);
      }
      parts.push(`<text x="${(bx + bw / 2).toFixed(1)}" y="${(Math.min(y(m), y(hi)) - 3).toFixed(1)}" font-size="9" text-anchor="middle">${esc(fmt(m))}</text>`);
    });
    parts.push(`<text x="${(x0 + left + gi * gw + gw / 2).toFixed(1)}" y="${y0 + h - 14}" font-size="11" text-anchor="middle">${esc(g.label)}</text>`);
  });
  return parts.join('\n');
}

export function svg(records: readonly RunRecord[], meta: Meta): string {
  const games = meta.workloads.filter((w) => w.kind === 'game').map((w) => ({ key: w.key, label: `${w.size.toLocaleString('en')} clients` }));
  const proxies = meta.targets.filter((t) => t !== 'direct');
  const has = (k: string): boolean => meta.workloads.some((w) => w.key === k);
  const panels: Panel[] = [];
  if (games.length) {
    panels.push({ title: 'game: proxy CPU per delivered frame', note: 'µs, lower is better', groups: games, metric: 'cpuUsPerFrame', targets: proxies });
    panels.push({ title: 'game: added p99 latency over direct', note: 'ms, lower is better', groups: games, metric: 'dP99', targets: proxies });
    panels.push({ title: 'game: p99 latency', note: 'ms (direct = the limit)', groups: games, metric: 'p99', targets: [...meta.targets] });
  }
  const mem = [...(has('scale') ? [{ key: 'scale', label: 'scale (idle)' }] : []), ...games.slice(-1)];
  if (mem.length) panels.push({ title: 'proxy memory per socket', note: `KB (RSS delta / sockets), goal ≤ ${GOALS.kbPerSocket}`, groups: mem, metric: 'kbPerSocket', targets: proxies, goal: GOALS.kbPerSocket });
  if (has('burst')) {
    panels.push({ title: 'burst: proxy CPU per upgrade', note: 'µs, lower is better', groups: [{ key: 'burst', label: 'burst' }], metric: 'cpuUsPerUpgrade', targets: proxies });
    panels.push({ title: 'burst: upgrades per second', note: 'higher is better', groups: [{ key: 'burst', label: 'burst' }], metric: 'upgradesPerS', targets: [...meta.targets] });
  }
  if (has('page')) {
    panels.push({ title: 'page: proxy CPU per request', note: 'µs, lower is better', groups: [{ key: 'page', label: '10 KB page' }], metric: 'cpuUsPerReq', targets: proxies });
    panels.push({ title: 'page: requests per second', note: 'higher is better (backends share one core)', groups: [{ key: 'page', label: '10 KB page' }], metric: 'reqPerS', targets: [...meta.targets] });
  }
  if (has('scale')) panels.push({ title: 'scale: proxy CPU while idle', note: 'ms of CPU per second, lower is better', groups: [{ key: 'scale', label: 'idle sockets' }], metric: 'cpuMsPerS', targets: proxies });

  const cols = 3;
  const pw = 380;
  const ph = 240;
  const gap = 12;
  const head = 70;
  const rows = Math.max(1, Math.ceil(panels.length / cols));
  const W = cols * pw + (cols + 1) * gap;
  const H = head + rows * (ph + gap) + gap;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Arial, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#f7f7f7"/>`,
    `<text x="${gap}" y="26" font-size="17" font-weight="bold">roomgate vs nginx vs HAProxy (and direct): ${esc(meta.finishedAt.slice(0, 10))}</text>`,
    `<text x="${gap}" y="46" font-size="11" fill="#444">${esc(`${meta.rounds} round(s); bars: median, whiskers: min–max. ${meta.settings.pinning}.`)}</text>`,
    `<text x="${W - gap}" y="64" font-size="11" fill="#444" text-anchor="end">${esc(`roomgate ${meta.versions.roomgate}, nginx ${(meta.versions.nginx ?? "").replace(/^nginx\//, '')}, HAProxy ${(meta.versions.haproxy ?? "").replace(/^HAProxy version /, '').split(' ')[0]}, Node ${meta.versions.node}`)}</text>`,
  ];
  let lx = gap;
  for (const t of meta.targets) {
    parts.push(`<rect x="${lx}" y="54" width="12" height="12" fill="${COLORS[t]}"/><text x="${lx + 16}" y="64" font-size="12">${t}</text>`);
    lx += 30 + t.length * 8;
  }
  panels.forEach((p, i) => {
    const x = gap + (i % cols) * (pw + gap);
    const y = head + Math.floor(i / cols) * (ph + gap);
    parts.push(panelSvg(p, records, x, y, pw, ph));
  });
  parts.push('</svg>', '');
  return parts.join('\n');
}
