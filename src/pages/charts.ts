// The status page's plots: a HistorySnapshot (src/observability/history.ts) drawn as SVG made
// here, no library and nothing fetched: inline markup under the page's strict CSP (colours by
// class, never a style attribute). The window is the shortest of 1, 2, 5, 10 or 15 minutes that
// holds every sample the history has, so a gateway started a minute ago plots its minute across
// the chart, not as a spike at the right edge of 15 minutes; a chart with nothing to show says so
// (no samples yet, or none of its events in the window) over its axes. The server renders every
// chart complete (the page needs no JavaScript); CHART_JS, embedded in the page's constant
// script, draws the same charts again from each streamed snapshot with DOM calls only
// (createElementNS, setAttribute, textContent), never from markup. The two are kept in step by
// test/browser/plots.test.ts, which checks that the script redraws a snapshot exactly as the
// server drew it.
import type { HistorySnapshot } from '../observability/history.js';
import { html, type SafeHtml } from './html.js';

type Series = readonly (number | null)[];

export interface ChartLine {
  readonly label: string;
  readonly values: Series;
  /** Class of its colour: s0 ... s7. */
  readonly colour: string;
  readonly dashed: boolean;
}

export interface ChartSpec {
  readonly id: string;
  readonly title: string;
  readonly lines: readonly ChartLine[];
  /** Fixed top of the scale (percent); null: from the data. */
  readonly top: number | null;
  /** Said instead of values when the chart has nothing to plot (e.g. "page cache off"). */
  readonly off: string | null;
  /** The values that say whether anything happened (the hit ratio's: the cache's answers). */
  readonly basis: readonly Series[];
  /** What none of them being above 0 means: "no WebSocket upgrades". */
  readonly idle: string;
}

/** The windows a plot may span, in minutes. */
export const WINDOW_MINUTES = [1, 2, 5, 10, 15] as const;

/** The part of the history the charts plot: from slot `from` (an index into each series) to the newest. */
export interface PlotWindow {
  readonly from: number;
  /** Its length: "2 minutes". */
  readonly label: string;
  /** The x axis's left end: "−2 min". */
  readonly axis: string;
  /** Seconds between two samples. */
  readonly stepS: number;
  /** Some series has a value in it. */
  readonly sampled: boolean;
  /** The history's oldest sample lies inside it: the gateway started within the window. */
  readonly sinceStart: boolean;
}

/** The viewBox: 320 x 120, the plot area inside it. */
export const CHART = { width: 320, height: 120, left: 34, right: 4, top: 8, bottom: 18 } as const;

const colour = (i: number): string => `s${i % 8}`;
const line = (label: string, values: Series, i: number, dashed = false): ChartLine => ({ label, values, colour: colour(i), dashed });

/** Hits over answers per slot, in percent; null where the cache answered nothing. */
function ratio(hits: Series, answers: Series): Series {
  return hits.map((h, i) => {
    const a = answers[i] ?? null;
    return h === null || a === null || a === 0 ? null : Math.round((h / a) * 1000) / 10;
  });
}

/**
 * The charts of a history, in page order, each series cut to the window. `cacheOn`: the page
 * cache is configured.
 */
export function chartSpecs(h: HistorySnapshot, cacheOn: boolean, w: PlotWindow = plotWindow(h)): ChartSpec[] {
  const cut = (v: Series): Series => v.slice(w.from);
  const spec = (id: string, title: string, lines: ChartLine[], idle: string, top: number | null = null, off: string | null = null, basis: Series[] = lines.map((l) => l.values)): ChartSpec => ({ id, title, lines, top, off, basis, idle });
  // Before the first sample the history knows no backend yet: that is "no samples", not "no backends".
  const none = h.backends.length || !w.sampled ? null : 'no backends';
  return [
    spec('sockets', 'Live sockets per backend', h.backends.map((b, i) => line(b.id, cut(b.sockets), i)), 'no live sockets', null, none),
    spec('rooms', 'Rooms per backend', h.backends.map((b, i) => line(b.id, cut(b.rooms), i)), 'no rooms placed', null, none),
    spec('upgrades', 'WebSocket upgrades per second', [line('upgrades/s', cut(h.upgrades), 0)], 'no WebSocket upgrades'),
    spec('pages', 'Page requests per second', [line('pages/s', cut(h.pages), 2)], 'no page requests'),
    spec('cache', 'Page cache hit ratio (%)', cacheOn ? [line('hits %', cut(ratio(h.cacheHits, h.cacheAnswers)), 5)] : [], 'no answers from the page cache', 100, cacheOn ? null : 'page cache off', [cut(h.cacheAnswers)]),
    spec('latency', 'Added latency: event-loop delay (ms)', [line('p50', cut(h.lagP50), 3), line('p99', cut(h.lagP99), 1, true)], 'no event-loop delay'),
    spec('errors', 'Errors (5xx answers) per second', [line('errors/s', cut(h.errors), 1)], 'no 5xx answers'),
  ];
}

/** Every series of a history (scalars and per backend), for where its samples begin. */
function allSeries(h: HistorySnapshot): Series[] {
  return [h.upgrades, h.pages, h.errors, h.cacheHits, h.cacheAnswers, h.lagP50, h.lagP99, ...h.backends.flatMap((b) => [b.sockets, b.rooms])];
}

// --- shared by the server and the page's script (CHART_JS repeats these, line for line) -------

/** The shortest window of WINDOW_MINUTES that holds every sample (the longest: the whole history). */
export function plotWindow(h: HistorySnapshot): PlotWindow {
  const n = h.upgrades.length;
  let first = n;
  for (const s of allSeries(h)) for (let i = 0; i < first; i++) if (s[i] !== null && s[i] !== undefined) first = i;
  const perMinute = 60_000 / h.stepMs;
  let slots = n;
  for (const m of WINDOW_MINUTES) {
    if (Math.round(m * perMinute) >= n - first) {
      slots = Math.min(n, Math.round(m * perMinute));
      break;
    }
  }
  const minutes = Math.round(((slots * h.stepMs) / 60_000) * 10) / 10;
  return { from: n - slots, label: `${minutes} minute${minutes === 1 ? '' : 's'}`, axis: `\u2212${minutes} min`, stepS: h.stepMs / 1000, sampled: first < n, sinceStart: first > 0 && first >= n - slots };
}

/** What a chart says over its axes when it has nothing to show ('' when it has). */
export function emptyText(c: ChartSpec, w: PlotWindow): string {
  if (c.off !== null) return '';
  if (!w.sampled) return `No samples yet: one every ${w.stepS} s`;
  for (const s of c.basis) for (const v of s) if (v !== null && v !== undefined && v > 0) return '';
  return `${c.idle} ${w.sinceStart ? 'since the gateway started' : `in the last ${w.label}`}`;
}

/** The top of the scale: 1, 2 or 5 times a power of ten, at least the largest value (and 1). */
export function niceTop(values: readonly number[]): number {
  let m = 0;
  for (const v of values) if (v > m) m = v;
  if (m <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(m)));
  const f = m / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/** A value for a legend or an axis: whole numbers as they are, others with 1 or 2 decimals. */
export function formatValue(v: number | null): string {
  if (v === null) return '–';
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/** The SVG path of one series: a segment per run of values, a dot for a lone value. */
export function pathOf(values: Series, top: number): string {
  const n = values.length;
  const w = CHART.width - CHART.left - CHART.right;
  const hgt = CHART.height - CHART.top - CHART.bottom;
  let d = '';
  let open = false;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      open = false;
      continue;
    }
    const x = (CHART.left + (n > 1 ? (i * w) / (n - 1) : 0)).toFixed(1);
    const y = (CHART.top + hgt - (Math.min(v, top) / top) * hgt).toFixed(1);
    const next = i + 1 < n ? values[i + 1] : null;
    if (!open) d += `${d ? ' ' : ''}M${x} ${y}${next === null || next === undefined ? 'h0.1' : ''}`;
    else d += ` L${x} ${y}`;
    open = true;
  }
  return d;
}

/**
 * The value now: the newest slot's, or the one before while the newest is not sampled yet (a
 * sample lands just after its slot begins). null: no value now (a backend gone, nothing sampled).
 */
export function latest(values: Series): number | null {
  for (let i = values.length - 1; i >= Math.max(0, values.length - 2); i--) {
    const v = values[i];
    if (v !== null && v !== undefined) return v;
  }
  return null;
}

function topOf(c: ChartSpec): number {
  if (c.top !== null) return c.top;
  return niceTop(c.lines.flatMap((l) => l.values.filter((v): v is number => v !== null)));
}

// --- server rendering -------------------------------------------------------------------------

function chartSvg(c: ChartSpec, w: PlotWindow): SafeHtml {
  const top = topOf(c);
  const { width, height, left, right, top: t, bottom } = CHART;
  const y0 = height - bottom;
  const mid = (t + y0) / 2;
  return html`<svg viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="chart-${c.id}-t">
<line class="grid" x1="${left}" y1="${t}" x2="${width - right}" y2="${t}"></line><line class="grid" x1="${left}" y1="${mid}" x2="${width - right}" y2="${mid}"></line><line class="grid" x1="${left}" y1="${y0}" x2="${width - right}" y2="${y0}"></line>
<text class="axis" x="${left - 4}" y="${t + 4}" text-anchor="end" data-axis="top">${formatValue(top)}</text><text class="axis" x="${left - 4}" y="${y0 + 3}" text-anchor="end">0</text>
<text class="axis" x="${left}" y="${height - 2}" data-axis="start">${w.axis}</text><text class="axis" x="${width - right}" y="${height - 2}" text-anchor="end">now</text>
<text class="empty" x="${(left + width - right) / 2}" y="${mid - 4}" text-anchor="middle" data-empty="">${emptyText(c, w)}</text>
${c.lines.map((l) => html`<path class="line ${l.colour}${l.dashed ? ' dash' : ''}" d="${pathOf(l.values, top)}"></path>`)}
</svg>`;
}

function legend(c: ChartSpec): SafeHtml {
  if (c.off !== null) return html`<ul class="legend"><li class="muted">${c.off}</li></ul>`;
  return html`<ul class="legend">${c.lines.map(
    (l) => html`<li><span class="swatch ${l.colour}${l.dashed ? ' dash' : ''}" aria-hidden="true"></span>${l.label} <span class="val">${formatValue(latest(l.values))}</span></li>`,
  )}</ul>`;
}

/** One figure per chart: title, the SVG, a legend with each series' newest value. */
export function renderCharts(specs: readonly ChartSpec[], w: PlotWindow): SafeHtml {
  return html`<div class="charts" id="charts">
${specs.map((c) => html`<figure class="chart" id="chart-${c.id}">
<figcaption id="chart-${c.id}-t">${c.title}</figcaption>
${chartSvg(c, w)}
${legend(c)}
</figure>`)}
</div>`;
}

/**
 * The page's script draws the charts again from each snapshot (`drawCharts(history, cacheOn)`):
 * the same specs, scale, paths and legend as above, with DOM calls only. Constant text (it is
 * part of the page's script, whose hash is in the CSP).
 */
export const CHART_JS = `
  var SVGNS = 'http://www.w3.org/2000/svg';
  var CH = ${JSON.stringify(CHART)};
  var WINDOW_MINUTES = ${JSON.stringify(WINDOW_MINUTES)};
  function niceTop(values) {
    var m = 0;
    values.forEach(function (v) { if (v > m) m = v; });
    if (m <= 1) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(m)));
    var f = m / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  function formatValue(v) {
    if (v === null || v === undefined) return '\\u2013';
    if (Number.isInteger(v)) return String(v);
    return Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
  }
  function pathOf(values, top) {
    var n = values.length, w = CH.width - CH.left - CH.right, hgt = CH.height - CH.top - CH.bottom;
    var d = '', open = false;
    for (var i = 0; i < n; i++) {
      var v = values[i];
      if (v === null || v === undefined) { open = false; continue; }
      var x = (CH.left + (n > 1 ? (i * w) / (n - 1) : 0)).toFixed(1);
      var y = (CH.top + hgt - (Math.min(v, top) / top) * hgt).toFixed(1);
      var next = i + 1 < n ? values[i + 1] : null;
      if (!open) d += (d ? ' ' : '') + 'M' + x + ' ' + y + (next === null || next === undefined ? 'h0.1' : '');
      else d += ' L' + x + ' ' + y;
      open = true;
    }
    return d;
  }
  function latest(values) {
    for (var i = values.length - 1; i >= Math.max(0, values.length - 2); i--) if (values[i] !== null && values[i] !== undefined) return values[i];
    return null;
  }
  function ratio(hits, answers) {
    return hits.map(function (h, i) {
      var a = answers[i];
      return h === null || a === null || a === undefined || a === 0 ? null : Math.round((h / a) * 1000) / 10;
    });
  }
  function line(label, values, i, dashed) { return { label: label, values: values, colour: 's' + (i % 8), dashed: !!dashed }; }
  function allSeries(h) {
    var out = [h.upgrades, h.pages, h.errors, h.cacheHits, h.cacheAnswers, h.lagP50, h.lagP99];
    h.backends.forEach(function (b) { out.push(b.sockets, b.rooms); });
    return out;
  }
  function plotWindow(h) {
    var n = h.upgrades.length, first = n;
    allSeries(h).forEach(function (s) { for (var i = 0; i < first; i++) if (s[i] !== null && s[i] !== undefined) first = i; });
    var perMinute = 60000 / h.stepMs, slots = n;
    for (var k = 0; k < WINDOW_MINUTES.length; k++) {
      if (Math.round(WINDOW_MINUTES[k] * perMinute) >= n - first) { slots = Math.min(n, Math.round(WINDOW_MINUTES[k] * perMinute)); break; }
    }
    var minutes = Math.round(((slots * h.stepMs) / 60000) * 10) / 10;
    return { from: n - slots, label: minutes + ' minute' + (minutes === 1 ? '' : 's'), axis: '\u2212' + minutes + ' min', stepS: h.stepMs / 1000, sampled: first < n, sinceStart: first > 0 && first >= n - slots };
  }
  function emptyText(c, w) {
    if (c.off !== null) return '';
    if (!w.sampled) return 'No samples yet: one every ' + w.stepS + ' s';
    for (var i = 0; i < c.basis.length; i++) for (var j = 0; j < c.basis[i].length; j++) { var v = c.basis[i][j]; if (v !== null && v !== undefined && v > 0) return ''; }
    return c.idle + ' ' + (w.sinceStart ? 'since the gateway started' : 'in the last ' + w.label);
  }
  function chartSpecs(h, cacheOn, w) {
    function cut(v) { return v.slice(w.from); }
    function spec(id, lines, idle, top, off, basis) {
      return { id: id, lines: lines, top: top === undefined ? null : top, off: off || null, idle: idle, basis: basis || lines.map(function (l) { return l.values; }) };
    }
    var none = h.backends.length || !w.sampled ? null : 'no backends';
    return [
      spec('sockets', h.backends.map(function (b, i) { return line(b.id, cut(b.sockets), i); }), 'no live sockets', null, none),
      spec('rooms', h.backends.map(function (b, i) { return line(b.id, cut(b.rooms), i); }), 'no rooms placed', null, none),
      spec('upgrades', [line('upgrades/s', cut(h.upgrades), 0)], 'no WebSocket upgrades'),
      spec('pages', [line('pages/s', cut(h.pages), 2)], 'no page requests'),
      spec('cache', cacheOn ? [line('hits %', cut(ratio(h.cacheHits, h.cacheAnswers)), 5)] : [], 'no answers from the page cache', 100, cacheOn ? null : 'page cache off', [cut(h.cacheAnswers)]),
      spec('latency', [line('p50', cut(h.lagP50), 3), line('p99', cut(h.lagP99), 1, true)], 'no event-loop delay'),
      spec('errors', [line('errors/s', cut(h.errors), 1)], 'no 5xx answers')
    ];
  }
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function drawChart(c, w) {
    var fig = document.getElementById('chart-' + c.id);
    if (!fig) return;
    var svg = fig.querySelector('svg');
    var start = svg.querySelector('[data-axis="start"]');
    if (start) start.textContent = w.axis;
    var empty = svg.querySelector('[data-empty]');
    if (empty) empty.textContent = emptyText(c, w);
    var all = [];
    c.lines.forEach(function (l) { l.values.forEach(function (v) { if (v !== null) all.push(v); }); });
    var top = c.top !== null ? c.top : niceTop(all);
    var text = svg.querySelector('[data-axis="top"]');
    if (text) text.textContent = formatValue(top);
    Array.prototype.slice.call(svg.querySelectorAll('path')).forEach(function (p) { svg.removeChild(p); });
    c.lines.forEach(function (l) {
      svg.appendChild(svgEl('path', { 'class': 'line ' + l.colour + (l.dashed ? ' dash' : ''), d: pathOf(l.values, top) }));
    });
    var ul = fig.querySelector('ul.legend');
    while (ul.firstChild) ul.removeChild(ul.firstChild);
    if (c.off !== null) { var li0 = document.createElement('li'); li0.className = 'muted'; li0.textContent = c.off; ul.appendChild(li0); return; }
    c.lines.forEach(function (l) {
      var li = document.createElement('li');
      var sw = document.createElement('span');
      sw.className = 'swatch ' + l.colour + (l.dashed ? ' dash' : '');
      sw.setAttribute('aria-hidden', 'true');
      li.appendChild(sw);
      li.appendChild(document.createTextNode(l.label + ' '));
      var val = document.createElement('span');
      val.className = 'val';
      val.textContent = formatValue(latest(l.values));
      li.appendChild(val);
      ul.appendChild(li);
    });
  }
  function drawCharts(history, cacheOn) {
    var w = plotWindow(history);
    var said = document.getElementById('plots-window');
    if (said) said.textContent = w.label;
    chartSpecs(history, cacheOn, w).forEach(function (c) { drawChart(c, w); });
  }
`;
