/**
 * The soak's output: the samples as CSV (and back: the CI test reads them), a chart of each series
 * over time (SVG, no dependencies), and a short markdown verdict.
 */
import { esc } from '../suite/report.js';
import { fitted, type Fitted, type Sample, type Verdict } from './verdict.js';

const COLUMNS = ['phase', 't_s', 'rss_mb', 'heap_mb', 'external_mb', 'fds', 'lag_p99_ms', 'sockets', 'frames_per_s', 'upgrades', 'failed', 'dropped', 'load1', 'after_gc'] as const;
const KEYS: readonly (keyof Sample)[] = ['phase', 't', 'rssMb', 'heapMb', 'externalMb', 'fds', 'lagP99Ms', 'sockets', 'framesPerS', 'upgrades', 'failed', 'dropped', 'load1', 'gc'];

export function toCsv(samples: readonly Sample[]): string {
  const row = (s: Sample): string =>
    KEYS.map((k) => {
      const v = s[k];
      return typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : v;
    }).join(',');
  return `${COLUMNS.join(',')}\n${samples.map(row).join('\n')}\n`;
}

export function fromCsv(text: string): Sample[] {
  const [head, ...lines] = text.trim().split('\n');
  if (head !== COLUMNS.join(',')) throw new Error(`not a soak CSV (header ${JSON.stringify(head)})`);
  return lines.map((l) => {
    const cells = l.split(',');
    const o: Record<string, unknown> = {};
    KEYS.forEach((k, i) => (o[k] = k === 'phase' ? cells[i] : Number(cells[i])));
    return o as unknown as Sample;
  });
}

interface Series {
  readonly title: string;
  readonly unit: string;
  readonly values: (samples: readonly Sample[], f: Record<Fitted, number[]>) => number[];
  /** A second, lighter line (the heap's floor). */
  readonly under?: (f: Record<Fitted, number[]>) => number[];
  /** The verdict's fitted line over its window. */
  readonly fit?: Fitted;
}

const SERIES: readonly Series[] = [
  { title: 'RSS', unit: 'MB', values: (_s, f) => f.rssMb, fit: 'rssMb' },
  { title: 'V8 heap used; grey: heap + Buffers after a full GC', unit: 'MB', values: (s) => s.map((x) => x.heapMb), under: (f) => f.liveMb, fit: 'liveMb' },
  { title: 'open file descriptors', unit: '', values: (s) => s.map((x) => x.fds) },
  { title: 'open fds beyond 2 per live socket', unit: '', values: (_s, f) => f.fdsBeyondSockets, fit: 'fdsBeyondSockets' },
  { title: 'event-loop delay p99', unit: 'ms', values: (s) => s.map((x) => x.lagP99Ms) },
  { title: 'sockets live (roomgate_live_sockets)', unit: '', values: (s) => s.map((x) => x.sockets) },
  { title: 'frames received per second', unit: '/s', values: (s) => s.map((x) => x.framesPerS) },
  { title: 'churn upgrades done', unit: '', values: (s) => s.map((x) => x.upgrades) },
];

/** A nice upper bound for an axis. */
function niceMax(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function fmt(x: number): string {
  return Math.abs(x) >= 100 ? Math.round(x).toLocaleString('en') : x.toFixed(Math.abs(x) >= 10 ? 1 : 2);
}

function panel(s: Series, samples: readonly Sample[], f: Record<Fitted, number[]>, v: Verdict, x0: number, y0: number, w: number, h: number): string {
  // The before and after readings are in the CSV and the table, not on the time axis.
  const keep = samples.map((p) => p.phase === 'ramp' || p.phase === 'soak');
  const pts = samples.filter((_p, i) => keep[i]);
  const ys = s.values(samples, f).filter((_y, i) => keep[i]);
  const under = s.under?.(f).filter((_y, i) => keep[i]);
  const pad = { l: 50, r: 10, t: 30, b: 26 };
  const tMin = Math.min(0, ...pts.map((p) => p.t));
  const tMax = Math.max(1, ...pts.map((p) => p.t));
  const yMax = niceMax(Math.max(...ys.filter(Number.isFinite)) * 1.05);
  const X = (t: number): number => x0 + pad.l + ((t - tMin) / (tMax - tMin)) * (w - pad.l - pad.r);
  const Y = (y: number): number => y0 + h - pad.b - (Math.max(0, Math.min(y, yMax)) / yMax) * (h - pad.t - pad.b);
  // Through the points that have a value (the live heap has one at each collection only).
  const line = (vals: readonly number[], color: string, width: number): string => {
    const at = pts.flatMap((p, i) => (Number.isFinite(vals[i]) ? [`${X(p.t).toFixed(1)},${Y(vals[i]!).toFixed(1)}`] : []));
    return `<path d="${at.map((xy, i) => `${i ? 'L' : 'M'}${xy}`).join('')}" fill="none" stroke="${color}" stroke-width="${width}"/>`;
  };
  const out: string[] = [`<rect x="${x0}" y="${y0}" width="${w}" height="${h}" fill="#fff" stroke="#ddd"/>`];
  out.push(`<text x="${x0 + 8}" y="${y0 + 18}" font-size="12" font-weight="bold">${esc(s.title)}${s.unit ? ` <tspan font-weight="normal" fill="#555">(${esc(s.unit)})</tspan>` : ''}</text>`);
  // The verdict's window.
  out.push(`<rect x="${X(v.from)}" y="${y0 + pad.t}" width="${Math.max(0, X(v.to) - X(v.from))}" height="${h - pad.t - pad.b}" fill="#fff3e0"/>`);
  for (let i = 0; i <= 4; i++) {
    const y = (yMax * i) / 4;
    out.push(`<line x1="${x0 + pad.l}" x2="${x0 + w - pad.r}" y1="${Y(y)}" y2="${Y(y)}" stroke="#eee"/>`);
    out.push(`<text x="${x0 + pad.l - 4}" y="${Y(y) + 4}" font-size="10" text-anchor="end" fill="#555">${fmt(y)}</text>`);
  }
  const step = niceMax((tMax - tMin) / 60 / 5);
  for (let m = Math.ceil(tMin / 60 / step) * step; m <= tMax / 60 + 1e-9; m += step) {
    out.push(`<text x="${X(m * 60)}" y="${y0 + h - 8}" font-size="10" text-anchor="middle" fill="#555">${fmt(m)} min</text>`);
  }
  out.push(`<line x1="${X(0)}" x2="${X(0)}" y1="${y0 + pad.t}" y2="${y0 + h - pad.b}" stroke="#999" stroke-dasharray="3,3"/>`);
  out.push(line(ys, '#e65100', 1.5));
  if (under) out.push(line(under, '#9e9e9e', 1.5));
  if (s.fit) {
    const fit = v.fits[s.fit];
    const y = (t: number): number => fit.at0 + (fit.perMin * t) / 60;
    out.push(`<line x1="${X(v.from)}" y1="${Y(y(v.from))}" x2="${X(v.to)}" y2="${Y(y(v.to))}" stroke="#1565c0" stroke-width="2"/>`);
    out.push(`<text x="${x0 + w - pad.r}" y="${y0 + pad.t - 2}" font-size="10" text-anchor="end" fill="#1565c0">fit ${fit.perMin >= 0 ? '+' : ''}${fmt(fit.perMin)} ${esc(s.unit || 'fds')}/min</text>`);
  }
  return out.join('\n');
}

export function toSvg(samples: readonly Sample[], v: Verdict, title: string, subtitle: string): string {
  const cols = 4;
  const pw = 330;
  const ph = 220;
  const gap = 12;
  const head = 58;
  const rows = Math.ceil(SERIES.length / cols);
  const W = cols * pw + (cols + 1) * gap;
  const H = head + rows * (ph + gap) + gap;
  const f = fitted(samples);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Arial, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#f7f7f7"/>`,
    `<text x="${gap}" y="26" font-size="17" font-weight="bold">${esc(title)}</text>`,
    `<text x="${gap}" y="46" font-size="11" fill="#444">${esc(subtitle)}</text>`,
  ];
  SERIES.forEach((s, i) => parts.push(panel(s, samples, f, v, gap + (i % cols) * (pw + gap), head + Math.floor(i / cols) * (ph + gap), pw, ph)));
  parts.push('</svg>', '');
  return parts.join('\n');
}

export interface RunInfo {
  readonly command: string;
  readonly startedAt: string;
  readonly minutes: number;
  readonly socketsAsked: number;
  readonly socketsHeld: number;
  readonly upgradesAsked: number;
  readonly clientProcesses: number;
  readonly nofile: number;
  readonly notes: readonly string[];
  readonly versions: Readonly<Record<string, string>>;
  readonly load1Start: number;
  readonly load1End: number;
  readonly rampS: number;
  readonly gcS: number;
}

export function toMarkdown(samples: readonly Sample[], v: Verdict, info: RunInfo): string {
  const soak = samples.filter((s) => s.phase === 'soak');
  const first = soak[0];
  const last = soak[soak.length - 1];
  // Intervals that ended in a forced collection carry its pause: not the gateway's own delay.
  const lags = soak.filter((s) => s.gc === 0).map((s) => s.lagP99Ms).sort((a, b) => a - b);
  const loads = samples.map((s) => s.load1);
  const framesPerS = soak.slice(1).map((s) => s.framesPerS);
  const median = (xs: number[]): number => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : Number.NaN);
  const f = fitted(samples);
  // The first and last soak readings that have a value (the live heap: at collections only).
  const vals = (k: Fitted): number[] => samples.flatMap((x, i) => (x.phase === 'soak' && Number.isFinite(f[k][i]) ? [f[k][i]!] : []));
  const row = (name: string, k: Fitted, unit: string): string =>
    `| ${name} | ${fmt(vals(k)[0] ?? Number.NaN)} | ${fmt(vals(k).at(-1) ?? Number.NaN)} | ${v.fits[k].perMin >= 0 ? '+' : ''}${fmt(v.fits[k].perMin)} ${unit}/min |`;
  const lines = [
    `# Soak: ${v.ok ? 'flat' : 'GROWTH'} (${info.startedAt.slice(0, 10)})`,
    '',
    `\`${info.command}\`: one roomgate process (\`${info.versions['node flags']}\` as \`npm start\`, in-memory store, default admission limits; ` +
      `every ${info.gcS} s a full collection through its inspector, which SIGUSR1 opened) in front of 3 demo backends (examples/demo-backend), ` +
      `${info.socketsHeld.toLocaleString('en')} game sockets held for ${info.minutes} min (rooms of 4, an event every 2 s per client, broadcast by the backend to its room) ` +
      `while ${(last?.upgrades ?? 0).toLocaleString('en')} more upgrades opened, mounted and closed (churn: half in fresh rooms, half joining a held room; half closed with a close frame, half dropped; 1 in 10 given up right behind its handshake, before any answer, as clients past their timeout do under overload). ` +
      `The held sockets took ${info.rampS.toFixed(0)} s to open; t = 0 is when the last one had.`,
    '',
    `**Verdict: ${v.ok ? 'flat' : 'GROWTH'}**: slopes by least squares over the second half of the soak (${fmt(v.from / 60)}–${fmt(v.to / 60)} min), the limits in bench/soak/verdict.ts:`,
    '',
    '| check | value | limit | |',
    '|---|---:|---:|---|',
    ...v.checks.map((c) => `| ${c.name} | ${c.value >= 0 && c.unit.endsWith('/min') ? '+' : ''}${fmt(c.value)} ${c.unit} | ${fmt(c.limit)} | ${c.ok ? 'ok' : '**over**'} |`),
    '',
    '| series | first reading | last reading | slope (second half) |',
    '|---|---:|---:|---:|',
    row('RSS (MB)', 'rssMb', 'MB'),
    row('live memory: V8 heap + Buffers after a full GC (MB)', 'liveMb', 'MB'),
    row('open fds beyond 2 per live socket', 'fdsBeyondSockets', 'fds'),
    '',
    `Event-loop delay p99 (per sample interval, the ones without a forced collection): median ${fmt(median(lags))} ms, max ${fmt(lags[lags.length - 1] ?? Number.NaN)} ms. ` +
      `Frames received: median ${Math.round(median(framesPerS)).toLocaleString('en')}/s. Held sockets dropped: ${last?.dropped ?? 'n/a'}. ` +
      `Open fds before the first socket: ${samples.find((s) => s.phase === 'before')?.fds ?? 'n/a'}, after the last closed: ${[...samples].reverse().find((s) => s.phase === 'after')?.fds ?? 'n/a'}.`,
    '',
    `Machine: load average ${info.load1Start} at the start, ${info.load1End} at the end (min ${Math.min(...loads)}, max ${Math.max(...loads)} over the samples: other work ran beside the soak). ` +
      `${info.versions.cpu ?? ''}; Node ${info.versions.node ?? ''}; roomgate ${info.versions.roomgate ?? ''}.`,
    '',
    `Open files: the limit here is ${info.nofile.toLocaleString('en')} per process; the clients ran in ${info.clientProcesses} child processes.`,
    ...info.notes.map((n) => `- ${n}`),
    '',
    'Files: `soak.csv` (every sample), `soak.svg` (each series over time; shaded: the verdict\'s window, blue: the fitted line).',
    '',
  ];
  return lines.join('\n');
}
