// HTML for roomgate's own pages: an escaping template tag (every interpolated value is escaped
// unless it is already SafeHtml), the shared stylesheet and palette, CSP hashes of the constant
// inline <style> and <script> blocks (the page headers are in src/http/replies.ts). Nothing here
// knows about gateways or rooms.
import { sha256 } from '../http/digest.js';

/** Markup that is already safe: produced by `html` (values escaped) or a constant. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for an element body or a quoted attribute value. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

function part(v: unknown): string {
  if (v instanceof SafeHtml) return v.value;
  if (Array.isArray(v)) return v.map(part).join('');
  if (v === null || v === undefined || v === false) return '';
  return escapeHtml(String(v));
}

/**
 * Template tag: html`<td>${room}</td>` escapes `room`. Arrays are joined (each element escaped
 * unless SafeHtml); null, undefined and false render nothing. Only use inside quoted attributes
 * or element bodies, never inside <script>, <style> or unquoted attributes.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += part(values[i]) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}

/** A constant (never user data) inserted as is. */
export function trusted(s: string): SafeHtml {
  return new SafeHtml(s);
}

/** The CSP source expression of an inline block: 'sha256-<base64>'. */
export function cspHash(text: string): string {
  return `'sha256-${sha256(text).toString('base64')}'`;
}

/** WCAG colours of the pages; test/pages checks every foreground/background pair for contrast. */
export const PALETTE = {
  text: '#1b1f24',
  muted: '#4b5563',
  background: '#ffffff',
  surface: '#f3f4f6',
  border: '#9ca3af',
  link: '#1d4ed8',
  upText: '#0f5132',
  upBg: '#d1e7dd',
  downText: '#842029',
  downBg: '#f8d7da',
  drainText: '#664d03',
  drainBg: '#fff3cd',
  maintText: '#3d4246',
  maintBg: '#e2e3e5',
  barTrack: '#e5e7eb',
  barRooms: '#1d4ed8',
  barSockets: '#6d28d9',
  grid: '#e5e7eb',
  // The plots' lines, one colour per series (backends take them in order, then again): .s0 ... .s7.
  series0: '#1d4ed8',
  series1: '#b91c1c',
  series2: '#047857',
  series3: '#7c3aed',
  series4: '#b45309',
  series5: '#0e7490',
  series6: '#be185d',
  series7: '#4b5563',
} as const;

/** Text on background pairs (4.5:1 needed) and bar fills on their track (3:1, non-text). */
export const CONTRAST_PAIRS: readonly (readonly [string, keyof typeof PALETTE, keyof typeof PALETTE, number])[] = [
  ['body text', 'text', 'background', 4.5],
  ['muted text', 'muted', 'background', 4.5],
  ['table header', 'text', 'surface', 4.5],
  ['muted on surface', 'muted', 'surface', 4.5],
  ['link', 'link', 'background', 4.5],
  ['button', 'background', 'link', 4.5],
  ['state up', 'upText', 'upBg', 4.5],
  ['state down', 'downText', 'downBg', 4.5],
  ['state draining', 'drainText', 'drainBg', 4.5],
  ['state maintenance', 'maintText', 'maintBg', 4.5],
  ['rooms bar', 'barRooms', 'barTrack', 3],
  ['sockets bar', 'barSockets', 'barTrack', 3],
  ['table borders', 'border', 'background', 2],
  ...([0, 1, 2, 3, 4, 5, 6, 7] as const).map((i) => [`plot line ${i}`, `series${i}`, 'background', 3] as const),
];

const P = PALETTE;
const FONT = 'system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif';
// Bars without inline style attributes (the CSP forbids them): a width class per percent.
const WIDTHS = Array.from({ length: 101 }, (_, i) => `.p${i}{width:${i}%}`).join('');

/**
 * Columns that are left out of the layout while no row has a value in them: a table lists them in
 * data-hide (space-separated), its cells name theirs in data-col.
 */
export const HIDEABLE_COLUMNS = ['title', 'status', 'details', 'detail'] as const;
export type HideableColumn = (typeof HIDEABLE_COLUMNS)[number];
const HIDE_RULES = HIDEABLE_COLUMNS.map((c) => `table[data-hide~="${c}"] [data-col="${c}"]{display:none}`).join('\n');

/**
 * Below this width a table with class "stack" shows each row as a block of "label value" lines
 * (labels from each cell's data-label; a labelled cell holds one element or one text), so no
 * page is wider than a phone.
 */
export const STACK_BELOW = '40rem';

/** The value of a table's data-hide: the hideable columns in which no row has a value. */
export function hiddenColumns(columns: readonly HideableColumn[], rows: readonly Readonly<Partial<Record<HideableColumn, string>>>[]): string {
  return columns.filter((c) => !rows.some((r) => (r[c] ?? '') !== '')).join(' ');
}

/** The stylesheet shared by the status and lobby pages (a constant: its hash goes into the CSP). */
export const BASE_CSS = `
:root{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 ${FONT};color:${P.text};background:${P.background}}
.wrap{max-width:72rem;margin:0 auto;padding:1rem 1.25rem 3rem}
header.top{border-bottom:1px solid ${P.border};margin-bottom:1rem}
h1{font-size:1.75rem;margin:.5rem 0}
h2{font-size:1.25rem;margin:1.75rem 0 .5rem}
a{color:${P.link}}
a:focus-visible,button:focus-visible,input:focus-visible{outline:3px solid ${P.link};outline-offset:2px}
.muted{color:${P.muted}}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.95em}
code{background:${P.surface};padding:0 .25em;border-radius:3px}
.skip{position:absolute;left:-999px;top:0;background:${P.background};padding:.5rem}
.skip:focus{left:.5rem}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
table{border-collapse:collapse;width:100%;margin:.25rem 0 1rem}
caption{text-align:left;color:${P.muted};padding:.25rem 0}
th,td{border-bottom:1px solid ${P.border};padding:.4rem .6rem;text-align:left;vertical-align:middle}
thead th{background:${P.surface};font-weight:600}
tbody th{font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:.5rem 0}
.facts dt{font-weight:600}
.facts dd{margin:0}
.state{display:inline-block;padding:0 .5em;border-radius:999px;font-weight:600}
.state-up{color:${P.upText};background:${P.upBg}}
.state-down{color:${P.downText};background:${P.downBg}}
.state-draining{color:${P.drainText};background:${P.drainBg}}
.state-maintenance{color:${P.maintText};background:${P.maintBg}}
.notice{color:${P.drainText};background:${P.drainBg};padding:.5rem .75rem;border-radius:4px}
.notice.bad{color:${P.downText};background:${P.downBg}}
.meter{display:flex;align-items:center;gap:.5rem;justify-content:flex-end}
.bar{display:inline-block;width:8rem;height:.8rem;background:${P.barTrack};border-radius:3px;overflow:hidden}
.fill{display:block;height:100%}
.fill.rooms{background:${P.barRooms}}
.fill.sockets{background:${P.barSockets}}
${WIDTHS}
button,.button{font:inherit;font-weight:600;color:${P.background};background:${P.link};border:0;border-radius:6px;padding:.5rem 1rem;cursor:pointer}
.big{font-size:2rem;font-weight:700;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:1rem;align-items:stretch}
.card{border:1px solid ${P.border};border-radius:8px;padding:.5rem 1rem;min-width:10rem}
.card p{margin:0}
.card.action{display:flex;flex-direction:column;justify-content:space-between;gap:.25rem}
table.narrow{max-width:36rem}
[hidden]{display:none!important}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(19rem,1fr));gap:1rem;margin:.5rem 0 1rem}
.chart{margin:0;border:1px solid ${P.border};border-radius:8px;padding:.5rem .75rem;min-width:0}
.chart figcaption{font-weight:600}
.chart svg{display:block;width:100%;height:auto;overflow:visible}
.chart .grid{stroke:${P.grid};stroke-width:1}
.chart .axis{fill:${P.muted};font:10px ${FONT}}
.chart .empty{fill:${P.muted};font:11px ${FONT}}
.chart .line{fill:none;stroke-width:2;stroke-linejoin:round;stroke-linecap:round}
.chart .dash{stroke-dasharray:5 3}
.legend{list-style:none;margin:.25rem 0 0;padding:0;display:flex;flex-wrap:wrap;gap:0 1rem;font-size:.9rem}
.legend .swatch{display:inline-block;width:1rem;height:.25rem;border-radius:2px;margin-right:.35rem;vertical-align:middle}
.legend .swatch.dash{height:.25rem;width:1rem;background-image:none;opacity:.6}
${Array.from({ length: 8 }, (_, i) => `.chart .s${i}{stroke:${P[`series${i}` as keyof typeof P]}}.legend .s${i}{background:${P[`series${i}` as keyof typeof P]}}`).join('\n')}
th,td,code,.mono{overflow-wrap:anywhere}
thead th,td.num{overflow-wrap:normal}
${HIDE_RULES}
@media (max-width:${STACK_BELOW}){
.wrap{padding:.75rem .75rem 2rem}
h1{font-size:1.5rem}
.facts{grid-template-columns:minmax(0,1fr);gap:0}
.facts dd{margin-bottom:.5rem}
table.stack,table.stack caption,table.stack tbody,table.stack tr{display:block;width:100%}
table.stack thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
table.stack tr{border-bottom:1px solid ${P.border};padding:.5rem 0}
table.stack th,table.stack td{display:block;border:0;padding:.1rem 0;text-align:left}
table.stack td,table.stack th[data-label]{display:grid;grid-template-columns:9rem minmax(0,1fr);gap:0 .5rem;font-weight:400}
table.stack [data-label]::before{content:attr(data-label);font:600 1rem/1.5 ${FONT};color:${P.muted}}
table.stack td:empty{display:none}
table.stack .meter{justify-content:flex-start}
.bar{width:5rem}
}
`;

export interface Page {
  readonly title: string;
  readonly body: SafeHtml;
  /** A constant script (its hash goes into the CSP); none = no script allowed at all. */
  readonly script?: string;
}

export interface RenderedPage {
  readonly html: string;
  readonly csp: string;
}

/**
 * The whole document and its Content-Security-Policy: nothing but the page's own inline style
 * and script (by hash), requests to its own origin (SSE, API), forms to its own origin; no
 * framing, no plugins, no base tag.
 */
export function renderPage(p: Page): RenderedPage {
  const script = p.script ?? '';
  if (/<\/(script|style)/i.test(script + BASE_CSS)) throw new Error('inline block contains a closing tag');
  const csp = [
    "default-src 'none'",
    `style-src ${cspHash(BASE_CSS)}`,
    `script-src ${script ? cspHash(script) : "'none'"}`,
    "connect-src 'self'",
    "img-src data:", // the empty icon: no /favicon.ico request reaches the app
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  const doc = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${p.title}</title>
<style>${trusted(BASE_CSS)}</style>
</head>
<body>
${p.body}
${script ? html`<script>${trusted(script)}</script>` : ''}
</body>
</html>
`;
  return { html: doc.value, csp };
}

/** "2025-01-02T03:04:05.678Z" -> "2025-01-02 03:04:05Z" (the JS of the pages formats alike). */
export function shortTime(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** Share of total in whole percent, 0-100 (the width class of a bar). */
export function percent(value: number, total: number): number {
  if (!(total > 0) || !(value > 0)) return 0;
  return Math.max(0, Math.min(100, Math.round((value / total) * 100)));
}

/**
 * The event-stream client both pages' scripts embed (a function declaration, constant text).
 * `liveStream(url, listeners, say)` opens an EventSource and passes its events to `listeners`.
 * EventSource retries by itself only after a stream that was open ends; an answer other than a
 * 200 event stream (503: every stream slot taken or the store down; 401) makes it give up for
 * good. Then this asks the server once what it was, says so through `say(text, paused)` ("Live
 * updates paused: <why>; retrying in N s", counting down) and opens a new EventSource after the
 * answer's Retry-After or a back-off (2, 4, 8, 16, 30 s), whichever is longer.
 */
export const STREAM_CLIENT_JS = `
  function liveStream(url, listeners, say) {
    var failures = 0;
    var es = null;
    function reason(status, code) {
      if (code === 'too_many_streams') return 'too many live pages are open on this server right now';
      if (code === 'store_unavailable') return 'the server\\u2019s data store is unavailable';
      if (status === 401 || status === 403) return 'the server did not accept this page\\u2019s credentials (reload the page to sign in again)';
      if (status) return 'the server answered ' + status;
      return 'the server cannot be reached';
    }
    function probe() {
      // Asks the stream's URL once (on this origin, without credentials in the URL) what the answer was.
      var ctl = typeof AbortController === 'function' ? new AbortController() : null;
      var target = url.charAt(0) === '/' ? location.origin + url : url;
      return fetch(target, { headers: { Accept: 'text/event-stream' }, cache: 'no-store', signal: ctl ? ctl.signal : undefined }).then(function (res) {
        var after = Number(res.headers.get('Retry-After')) || 0;
        if (res.ok) { if (ctl) ctl.abort(); return { text: 'the connection was lost', after: 0 }; }
        return res.json().catch(function () { return null; }).then(function (body) {
          var code = body && body.error && body.error.code;
          return { text: reason(res.status, code), after: after };
        });
      }).catch(function () { return { text: reason(0, null), after: 0 }; });
    }
    function pause(why) {
      failures++;
      var left = Math.max(why.after, Math.min(30, Math.pow(2, failures)));
      function tick() {
        if (left <= 0) { say('Live updates paused: ' + why.text + '; retrying now.', true); open(); return; }
        say('Live updates paused: ' + why.text + '; retrying in ' + left + ' s.', true);
        left--;
        setTimeout(tick, 1000);
      }
      tick();
    }
    function open() {
      es = new EventSource(url);
      Object.keys(listeners).forEach(function (name) {
        es.addEventListener(name, function (ev) { failures = 0; listeners[name](ev); });
      });
      es.onerror = function () {
        if (es.readyState !== 2) { say('Live updates interrupted; reconnecting.', false); return; }
        es.close();
        probe().then(pause);
      };
    }
    open();
  }
`;
