// The status page's plots: the last 15 minutes of a HistorySnapshot (src/observability/history.ts)
// drawn as SVG made here, no library and nothing fetched: inline markup under the page's strict
// CSP (colours by class, never a style attribute). The server renders every chart complete (the
// page needs no JavaScript); CHART_JS, embedded in the page's constant script, draws the same
// charts again from each streamed snapshot with DOM calls only (createElementNS, setAttribute,
// textContent), never from markup. The two are kept in step by test/browser/plots.test.ts, which
// checks that the script redraws a snapshot exactly as the server drew it.
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

/** The charts of a history, in page order. `cacheOn`: the page cache is configured. */
export function chartSpecs(h: HistorySnapshot, cacheOn: boolean): ChartSpec[] {
  const spec = (id: string, title: string, lines: ChartLine[], top: number | null = null, off: string | null = null): ChartSpec => ({ id, title, lines, top, off });
  return [
    spec('sockets', 'Live sockets per backend', h.backends.map((b, i) => line(b.id, b.sockets, i)), null, h.backends.length ? null : 'no backends'),
    spec('rooms', 'Rooms per backend', h.backends.map((b, i) => line(b.id, b.rooms, i)), null, h.backends.length ? null : 'no backends'),
    spec('upgrades', 'WebSocket upgrades per second', [line('upgrades/s', h.upgrades, 0)]),
    spec('pages', 'Page requests per second', [line('pages/s', h.pages, 2)]),
    spec('cache', 'Page cache hit ratio (%)', cacheOn ? [line('hits %', ratio(h.cacheHits, h.cacheAnswers), 5)] : [], 100, cacheOn ? null : 'page cache off'),
    spec('latency', 'Added latency: event-loop delay (ms)', [line('p50', h.lagP50, 3), line('p99', h.lagP99, 1, true)]),
    spec('errors', 'Errors (5xx answers) per second', [line('errors/s', h.errors, 1)]),
  ];
}

// --- shared by the server and the page's script (CHART_JS repeats these, line for line) -------

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

function chartSvg(c: ChartSpec): SafeHtml {
  const top = topOf(c);
  const { width, height, left, right, top: t, bottom } = CHART;
  const y0 = height - bottom;
  const mid = (t + y0) / 2;
  return html`<svg viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="chart-${c.id}-t">
<line class="grid" x1="${left}" y1="${t}" x2="${width - right}" y2="${t}"></line><line class="grid" x1="${left}" y1="${mid}" x2="${width - right}" y2="${mid}"></line><line class="grid" x1="${left}" y1="${y0}" x2="${width - right}" y2="${y0}"></line>
<text class="axis" x="${left - 4}" y="${t + 4}" text-anchor="end" data-axis="top">${formatValue(top)}</text><text class="axis" x="${left - 4}" y="${y0 + 3}" text-anchor="end">0</text>
<text class="axis" x="${left}" y="${height - 2}">−15 min</text><text class="axis" x="${width - right}" y="${height - 2}" text-anchor="end">now</text>
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
export function renderCharts(specs: readonly ChartSpec[]): SafeHtml {
  return html`<div class="charts" id="charts">
${specs.map((c) => html`<figure class="chart" id="chart-${c.id}">
<figcaption id="chart-${c.id}-t">${c.title}</figcaption>
${chartSvg(c)}
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
  function chartSpecs(h, cacheOn) {
    function spec(id, lines, top, off) { return { id: id, lines: lines, top: top === undefined ? null : top, off: off || null }; }
    var none = h.backends.length ? null : 'no backends';
    return [
      spec('sockets', h.backends.map(function (b, i) { return line(b.id, b.sockets, i); }), null, none),
      spec('rooms', h.backends.map(function (b, i) { return line(b.id, b.rooms, i); }), null, none),
      spec('upgrades', [line('upgrades/s', h.upgrades, 0)]),
      spec('pages', [line('pages/s', h.pages, 2)]),
      spec('cache', cacheOn ? [line('hits %', ratio(h.cacheHits, h.cacheAnswers), 5)] : [], 100, cacheOn ? null : 'page cache off'),
      spec('latency', [line('p50', h.lagP50, 3), line('p99', h.lagP99, 1, true)]),
      spec('errors', [line('errors/s', h.errors, 1)])
    ];
  }
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function drawChart(c) {
    var fig = document.getElementById('chart-' + c.id);
    if (!fig) return;
    var svg = fig.querySelector('svg');
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
  function drawCharts(history, cacheOn) { chartSpecs(history, cacheOn).forEach(drawChart); }
`;
