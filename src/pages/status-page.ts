// The status page (/_roomgate/): backends with their state, rooms and sockets (a CSS bar each),
// the placement store mode, recent membership and health events, the gateway id. The server-rendered
// table is complete without JavaScript; the constant script below only replaces it with each
// snapshot from /_roomgate/status/stream (textContent and class names only: never markup).
import type { BackendEventKind, BackendStateName, HandoffEvent, PushEvent, RebalanceState, RuntimeView } from '../runtime/views.js';
import type { HistorySnapshot } from '../observability/history.js';
import { CHART_JS, chartSpecs, plotWindow, renderCharts } from './charts.js';
import { STREAM_CLIENT_JS, hiddenColumns, html, percent, renderPage, shortTime, type RenderedPage, type SafeHtml } from './html.js';

export const STATUS_PATH = '/_roomgate/';
export const STATUS_STREAM_PATH = '/_roomgate/status/stream';
/** Events shown (newest first). */
export const STATUS_EVENTS = 20;
/** Pushes shown (newest first). */
export const STATUS_PUSHES = 20;
/** Room handoffs shown: those in progress, then the most recent done (newest first). */
export const STATUS_HANDOFFS = 20;

/** What the page reads of the running gateway. */
export type StatusView = Pick<RuntimeView, 'gateway' | 'backends' | 'events' | 'pushes' | 'cache' | 'history' | 'handoffs'>;

export interface StatusBackend {
  readonly id: string;
  /** null on the public port (internal addresses stay on the admin port). */
  readonly url: string | null;
  readonly weight: number;
  readonly state: BackendStateName;
  /** Drain deadline (ISO) while draining with one. */
  readonly deadline: string | null;
  readonly removed: boolean;
  /** Rooms placed on it, all gateways. */
  readonly rooms: number;
  /** Live sockets through this gateway. */
  readonly sockets: number;
}

export interface StatusEvent {
  readonly at: string;
  readonly kind: BackendEventKind;
  readonly backend: string;
  readonly detail: string;
  readonly roomsMoved: number;
  readonly liveRoomsMoved: number;
}

/** A push or fan-out through this gateway, as logged; room (target) and sender are '' on the public port. */
export type StatusPush = PushEvent;

/** A room handoff through this gateway; room and reason are '' on the public port. */
export interface StatusHandoff {
  readonly at: string;
  readonly room: string;
  readonly from: string;
  readonly to: string;
  /** The step running ('export', 'import', ...) while in progress, else the result. */
  readonly state: string;
  readonly done: boolean;
  readonly reason: string;
  readonly ms: number | null;
  /**
   * Version 2: what became of this gateway's held sockets ("1 resumed, 2 reconnected, 7 held
   * messages delivered"); '' when none was held (version 1, or no socket of the room here).
   */
  readonly sockets: string;
}

export interface StatusSnapshot {
  readonly gatewayId: string;
  readonly store: 'memory' | 'redis';
  readonly degraded: boolean;
  readonly ready: boolean;
  /** This gateway's live sockets and rooms. */
  readonly sockets: number;
  readonly rooms: number;
  /** Sums over the backends (the bars' 100 %). */
  readonly totalRooms: number;
  readonly totalSockets: number;
  readonly backends: readonly StatusBackend[];
  /** Newest first. */
  readonly events: readonly StatusEvent[];
  /** Newest first. */
  readonly pushes: readonly StatusPush[];
  /** The page cache of this gateway (process), or null when it is off. */
  readonly cache: StatusCache | null;
  /** A reload changed the cache settings: those in use stay until a restart (admin port only). */
  readonly cacheRestartNeeded: boolean;
  /** The last 15 minutes, for the plots (the whole gateway with --workers). */
  readonly history: HistorySnapshot;
  /** Which backends serve the handoff hooks: "b1 yes, b2 no, b3 unknown". */
  readonly handoffHooks: string;
  /** Rebalancing on this gateway: "off", or on with its targets and counts (no room keys). */
  readonly rebalancing: string;
  /** In progress first, then done, newest first. */
  readonly handoffs: readonly StatusHandoff[];
  /** Requests (pages and WebSocket handshakes) waiting now for a handoff of their room. */
  readonly handoffWaiting: number;
}

export interface StatusCache {
  readonly objects: number;
  readonly bytes: number;
  readonly maxBytes: number;
  /** Answers that cost the backend nothing (hits, stale, coalesced) over all the cache gave; null before any. */
  readonly hitRatio: number | null;
  readonly hits: number;
  readonly answered: number;
}

export interface StatusOptions {
  /** Backend URLs and event details naming them: admin port only. */
  readonly internal: boolean;
}

export function collectStatus(v: StatusView, o: StatusOptions, nowMs = Date.now()): StatusSnapshot {
  const gw = v.gateway();
  const backends = v.backends(nowMs).map(
    (b): StatusBackend => ({
      id: b.id,
      url: o.internal ? b.url : null,
      weight: b.weight,
      state: b.state,
      deadline: b.admin?.state === 'draining' && b.admin.deadline !== null ? new Date(b.admin.deadline).toISOString() : null,
      removed: b.removed,
      rooms: b.rooms,
      sockets: b.sockets,
    }),
  );
  const events = v
    .events()
    .slice(-STATUS_EVENTS)
    .reverse()
    .map(
      (e): StatusEvent => ({
        at: e.at,
        kind: e.kind,
        backend: e.backend,
        // joined/removed carry the backend URL.
        detail: o.internal || (e.kind !== 'joined' && e.kind !== 'removed') ? e.detail : '',
        roomsMoved: e.roomsMoved,
        liveRoomsMoved: e.liveRoomsMoved,
      }),
    );
  const pushes = v
    .pushes()
    .slice(-STATUS_PUSHES)
    .reverse()
    .map(
      (p): StatusPush => ({
        at: p.at,
        call: p.call,
        // Room keys and senders are the app's business: admin port only.
        target: o.internal ? p.target : '',
        result: p.result,
        backend: p.backend,
        sender: o.internal ? p.sender : '',
        ms: p.ms,
        sockets: p.sockets,
      }),
    );
  return {
    gatewayId: gw.gatewayId,
    store: gw.store,
    degraded: gw.degraded,
    ready: gw.ready,
    sockets: gw.sockets,
    rooms: gw.rooms,
    totalRooms: backends.reduce((n, b) => n + b.rooms, 0),
    totalSockets: backends.reduce((n, b) => n + b.sockets, 0),
    backends,
    events,
    pushes,
    cache: cacheStatus(v),
    // Operators' business: the public port's page does not say a reload is waiting.
    cacheRestartNeeded: o.internal && gw.restartNeeded?.includes('cache') === true,
    history: v.history(),
    handoffHooks: v.backends(nowMs).map((b) => `${b.id} ${b.handoffHooks}`).join(', '),
    rebalancing: rebalancingLine(v.handoffs().rebalance),
    handoffs: handoffRows(v, o),
    handoffWaiting: v.handoffs().waiting,
  };
}

/** "off", or "on: moving live rooms to b3; 4 moved, 0 failed (skew factor 1.5, 30 rooms/min)". */
export function rebalancingLine(r: RebalanceState): string {
  if (!r.enabled) return 'off';
  const now = r.targets.length > 0 ? `moving live rooms to ${r.targets.join(', ')}` : 'no backend to move rooms to now';
  return `on: ${now}; ${r.moved} moved, ${r.failed} failed (skew factor ${r.skewFactor}, ${r.roomsPerMinute} rooms/min)`;
}

function handoffRows(v: StatusView, o: StatusOptions): StatusHandoff[] {
  const h = v.handoffs();
  const row = (e: HandoffEvent): StatusHandoff => ({
    at: e.at,
    // Room keys and failure details are the operator's business: admin port only.
    room: o.internal ? e.room : '',
    from: e.from ?? '',
    to: e.to ?? '',
    state: e.result ?? e.stage,
    done: e.result !== null,
    reason: o.internal ? e.reason : '',
    ms: e.ms,
    sockets: heldSockets(e),
  });
  return [...h.inProgress].reverse().concat([...h.recent].reverse()).slice(0, STATUS_HANDOFFS).map(row);
}

/** "1 resumed, 2 reconnected, 7 held messages delivered" (", 1 lost" when some were), or ''. */
export function heldSockets(e: Pick<HandoffEvent, 'held'>): string {
  const h = e.held;
  if (h === undefined) return '';
  const lost = h.lostSockets > 0 ? `, ${h.lostSockets} lost` : '';
  return `${h.resumed} resumed, ${h.sockets - h.resumed} reconnected, ${h.messages} held message${h.messages === 1 ? '' : 's'} delivered${lost}`;
}

function cacheStatus(v: StatusView): StatusCache | null {
  const c = v.cache();
  if (c === null) return null;
  const hits = c.counts.hit + c.counts.stale + c.counts['stale-if-error'] + c.counts.coalesced;
  return { objects: c.objects, bytes: c.bytes, maxBytes: c.maxBytes, hitRatio: c.hitRatio, hits, answered: hits + c.counts.miss };
}

/** "2.5 KB", "64 MiB", "512 bytes": one decimal at most, none when it is 0. */
export function byteSize(n: number): string {
  const units: [number, string][] = [[1_073_741_824, 'GiB'], [1_048_576, 'MiB'], [1024, 'KB']];
  for (const [size, unit] of units) if (n >= size) return `${(n / size).toFixed(1).replace(/\.0$/, '')} ${unit}`;
  return `${n} bytes`;
}

export const CACHE_RESTART_NOTE = 'new settings from a reload apply after a restart';

/**
 * "off", or "93.1 % hits (930 of 1000); 2 stored pages, 2.5 KB of 64 MiB", and the restart note when
 * a reload changed the cache settings. The page's script says the same (cacheText).
 */
export function cacheSummary(c: StatusCache | null, restartNeeded = false): string {
  const note = restartNeeded ? `; ${CACHE_RESTART_NOTE}` : '';
  if (c === null) return `off${note}`;
  const ratio = c.hitRatio === null ? 'no requests yet' : `${(c.hitRatio * 100).toFixed(1)} % hits (${c.hits} of ${c.answered})`;
  return `${ratio}; ${c.objects} stored page${c.objects === 1 ? '' : 's'}, ${byteSize(c.bytes)} of ${byteSize(c.maxBytes)}${note}`;
}

/** "Redis", "Redis: degraded (unreachable; routing from cache and ring)" or "in memory". */
export function placementMode(s: Pick<StatusSnapshot, 'store' | 'degraded'>): string {
  if (s.store === 'memory') return 'in memory (this gateway only)';
  return s.degraded ? 'Redis: degraded (unreachable; routing from cache and ring)' : 'Redis (shared by every gateway)';
}

function stateCell(b: StatusBackend): SafeHtml {
  const extra = b.removed ? ' (removed)' : b.deadline ? ` until ${shortTime(b.deadline)}` : '';
  return html`<span><span class="state state-${b.state}">${b.state}</span><span class="state-extra">${extra}</span></span>`;
}

function meter(kind: 'rooms' | 'sockets', value: number, total: number): SafeHtml {
  const pct = percent(value, total);
  return html`<span class="meter"><span class="val">${value}</span><span class="bar" aria-hidden="true"><span class="fill ${kind} p${pct}"></span></span><span class="pct muted">${pct}%</span></span>`;
}

function backendRow(b: StatusBackend, s: StatusSnapshot, internal: boolean): SafeHtml {
  return html`<tr data-backend="${b.id}">
<th scope="row" class="mono">${b.id}</th>
${internal ? html`<td class="mono" data-label="URL">${b.url ?? ''}</td>` : ''}
<td data-label="State">${stateCell(b)}</td>
<td class="num" data-label="Rooms">${meter('rooms', b.rooms, s.totalRooms)}</td>
<td class="num" data-label="Sockets">${meter('sockets', b.sockets, s.totalSockets)}</td>
<td class="num" data-label="Weight">${b.weight}</td>
</tr>`;
}

function eventRow(e: StatusEvent): SafeHtml {
  return html`<tr>
<td class="mono" data-label="Time (UTC)"><time datetime="${e.at}">${shortTime(e.at)}</time></td>
<td data-label="Event">${e.kind}</td>
<th scope="row" class="mono" data-label="Backend">${e.backend}</th>
<td data-col="detail" data-label="Detail">${e.detail}</td>
<td class="num" data-label="Rooms moved">${e.roomsMoved}</td>
<td class="num" data-label="Live rooms moved">${e.liveRoomsMoved}</td>
</tr>`;
}

function handoffRow(h: StatusHandoff, internal: boolean): SafeHtml {
  return html`<tr>
<td class="mono" data-label="Time (UTC)"><time datetime="${h.at}">${shortTime(h.at)}</time></td>
${internal ? html`<th scope="row" class="mono" data-label="Room">${h.room}</th>` : ''}
<td class="mono" data-label="From">${h.from}</td>
<td class="mono" data-label="To">${h.to}</td>
<td data-label="State"><span class="handoff-${h.state}">${h.done ? h.state : `${h.state}...`}</span></td>
${internal ? html`<td data-label="Reason">${h.reason}</td>` : ''}
<td data-label="Sockets">${h.sockets}</td>
<td class="num" data-label="ms">${h.ms ?? ''}</td>
</tr>`;
}

function pushRow(p: StatusPush, internal: boolean): SafeHtml {
  return html`<tr>
<td class="mono" data-label="Time (UTC)"><time datetime="${p.at}">${shortTime(p.at)}</time></td>
<td data-label="Call">${p.call === 'room' ? 'room' : 'fan-out'}</td>
${internal ? html`<th scope="row" class="mono" data-label="Room">${p.target}</th>` : ''}
<td data-label="Result"><span class="push-${p.result}">${p.result}</span></td>
<td class="mono" data-label="Backend">${p.backend}</td>
${internal ? html`<td class="mono" data-label="Sender">${p.sender}</td>` : ''}
<td class="num" data-label="Sockets">${p.sockets ?? ''}</td>
<td class="num" data-label="ms">${p.ms}</td>
</tr>`;
}

/** The pushes made through this gateway, newest first. */
function pushesSection(s: StatusSnapshot, internal: boolean): SafeHtml {
  const o = { internal };
  return html`<section aria-labelledby="pushes-h">
<h2 id="pushes-h">Recent pushes</h2>
<table id="pushes" class="stack">
<caption>Messages pushed to rooms through this gateway, newest first (last ${STATUS_PUSHES}): what became of each, where it went and, when the receiver said, to how many sockets.</caption>
<thead><tr>
<th scope="col">Time (UTC)</th>
<th scope="col">Call</th>
${o.internal ? html`<th scope="col">Room</th>` : ''}
<th scope="col">Result</th>
<th scope="col">Backend</th>
${o.internal ? html`<th scope="col">Sender</th>` : ''}
<th scope="col" class="num">Sockets</th>
<th scope="col" class="num">ms</th>
</tr></thead>
<tbody>
${s.pushes.map((p) => pushRow(p, o.internal))}
</tbody>
</table>
<p id="no-pushes"${s.pushes.length > 0 ? html` hidden` : ''}>No pushes yet.</p>
</section>`;
}

/** Room handoffs through this gateway: the hooks each backend serves, those in progress, the most recent. */
function handoffsSection(s: StatusSnapshot, internal: boolean): SafeHtml {
  const o = { internal };
  return html`<section aria-labelledby="handoffs-h">
<h2 id="handoffs-h">Room handoffs</h2>
<dl class="facts"><dt>Handoff hooks</dt><dd id="handoff-hooks">${s.handoffHooks}</dd><dt>Rebalancing</dt><dd id="rebalancing">${s.rebalancing}</dd><dt>Requests waiting for a handoff</dt><dd id="handoff-waiting">${s.handoffWaiting}</dd></dl>
<table id="handoffs" class="stack">
<caption>Rooms moved with their state through this gateway (roomgate move, drain --handoff, rebalancing): those in progress first, then the most recent (last ${STATUS_HANDOFFS}).</caption>
<thead><tr>
<th scope="col">Time (UTC)</th>
${o.internal ? html`<th scope="col">Room</th>` : ''}
<th scope="col">From</th>
<th scope="col">To</th>
<th scope="col">State</th>
${o.internal ? html`<th scope="col">Reason</th>` : ''}
<th scope="col">Sockets</th>
<th scope="col" class="num">ms</th>
</tr></thead>
<tbody>
${s.handoffs.map((h) => handoffRow(h, o.internal))}
</tbody>
</table>
<p id="no-handoffs"${s.handoffs.length > 0 ? html` hidden` : ''}>No handoffs yet.</p>
</section>`;
}

/** The plots over the window the history fills (1 to 15 minutes: a fresh gateway's first minute spans the charts). */
function plotsSection(s: StatusSnapshot): SafeHtml {
  const w = plotWindow(s.history);
  return html`<section aria-labelledby="plots-h">
<h2 id="plots-h">Last <span id="plots-window">${w.label}</span></h2>
<p class="muted">One point every ${w.stepS} s, over the shortest of 1, 2, 5, 10 or 15 minutes that holds every sample; sockets through this gateway, rooms on every gateway; added latency is the event-loop delay (what every request waits while roomgate is busy).</p>
${renderCharts(chartSpecs(s.history, s.cache !== null, w), w)}
</section>`;
}

export function renderStatusPage(s: StatusSnapshot, o: StatusOptions, nowMs = Date.now()): RenderedPage {
  const body = html`<a class="skip" href="#backends-h">Skip to backends</a>
<div class="wrap">
<header class="top">
<h1>roomgate status</h1>
<p>Gateway <code id="gateway-id">${s.gatewayId}</code> <span class="muted">(read-only view${o.internal ? ', admin port' : ''})</span></p>
</header>
<main id="status" data-stream="${STATUS_STREAM_PATH}" data-internal="${String(o.internal)}">
<section aria-labelledby="summary-h">
<h2 id="summary-h">Summary</h2>
<dl class="facts">
<dt>Placement store</dt><dd id="placement-mode" data-degraded="${String(s.degraded)}">${placementMode(s)}</dd>
<dt>Ready</dt><dd id="ready">${s.ready ? 'yes' : 'no (shutting down)'}</dd>
<dt>Live sockets (this gateway)</dt><dd id="sockets">${s.sockets}</dd>
<dt>Live rooms (this gateway)</dt><dd id="rooms">${s.rooms}</dd>
<dt>Page cache (this process)</dt><dd id="cache">${cacheSummary(s.cache, s.cacheRestartNeeded)}</dd>
<dt>Updated</dt><dd><time id="updated" datetime="${new Date(nowMs).toISOString()}">${shortTime(new Date(nowMs).toISOString())}</time></dd>
</dl>
<p id="live" role="status" class="muted">Static view: reload the page to refresh.</p>
<p id="announce" class="sr-only" aria-live="polite"></p>
</section>
${plotsSection(s)}
<section aria-labelledby="backends-h">
<h2 id="backends-h">Backends</h2>
<table id="backends" class="stack">
<caption>State of each backend; rooms placed on it (all gateways) and live sockets through this gateway, with each one's share.</caption>
<thead><tr>
<th scope="col">Backend</th>
${o.internal ? html`<th scope="col">URL</th>` : ''}
<th scope="col">State</th>
<th scope="col" class="num">Rooms</th>
<th scope="col" class="num">Sockets</th>
<th scope="col" class="num">Weight</th>
</tr></thead>
<tbody>
${s.backends.map((b) => backendRow(b, s, o.internal))}
</tbody>
</table>
<p id="no-backends"${s.backends.length > 0 ? html` hidden` : ''}>No backends configured.</p>
</section>
<section aria-labelledby="events-h">
<h2 id="events-h">Recent events</h2>
<table id="events" class="stack" data-hide="${hiddenColumns(['detail'], s.events)}">
<caption>Membership, health and drain events, newest first (last ${STATUS_EVENTS}), with the rooms each moved.</caption>
<thead><tr>
<th scope="col">Time (UTC)</th>
<th scope="col">Event</th>
<th scope="col">Backend</th>
<th scope="col" data-col="detail">Detail</th>
<th scope="col" class="num">Rooms moved</th>
<th scope="col" class="num">Live rooms moved</th>
</tr></thead>
<tbody>
${s.events.map(eventRow)}
</tbody>
</table>
<p id="no-events"${s.events.length > 0 ? html` hidden` : ''}>No events yet.</p>
</section>
${pushesSection(s, o.internal)}
${handoffsSection(s, o.internal)}
</main>
</div>`;
  return renderPage({ title: `roomgate status: ${s.gatewayId}`, body, script: STATUS_SCRIPT });
}

/**
 * Upgrades the page to live: each `status` event carries a whole StatusSnapshot; the tables are
 * rebuilt from it with DOM calls (textContent, class names), never from markup; a stream the
 * server refuses (503) is retried, and the status line says why updates are paused. Constant,
 * so its hash is in the page's CSP.
 */
export const STATUS_SCRIPT = `
(function () {
  'use strict';
  var main = document.getElementById('status');
  if (!main || typeof EventSource === 'undefined') return;
  var live = document.getElementById('live');
  var announce = document.getElementById('announce');
  var internal = main.getAttribute('data-internal') === 'true';
  var previous = null;
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
${CHART_JS}
  function short(iso) { return String(iso).replace('T', ' ').replace(/\\.\\d+Z$/, 'Z'); }
  function pct(v, total) { return total > 0 && v > 0 ? Math.max(0, Math.min(100, Math.round(v / total * 100))) : 0; }
  function text(id, value) { var e = document.getElementById(id); if (e && e.textContent !== String(value)) e.textContent = String(value); }
  function byteSize(n) {
    var units = [[1073741824, 'GiB'], [1048576, 'MiB'], [1024, 'KB']];
    for (var i = 0; i < units.length; i++) if (n >= units[i][0]) return (n / units[i][0]).toFixed(1).replace(/\\.0$/, '') + ' ' + units[i][1];
    return n + ' bytes';
  }
  function cacheText(c, restartNeeded) {
    var note = restartNeeded ? '; ' + ${JSON.stringify(CACHE_RESTART_NOTE)} : '';
    if (!c) return 'off' + note;
    var ratio = c.hitRatio === null ? 'no requests yet' : (c.hitRatio * 100).toFixed(1) + ' % hits (' + c.hits + ' of ' + c.answered + ')';
    return ratio + '; ' + c.objects + ' stored page' + (c.objects === 1 ? '' : 's') + ', ' + byteSize(c.bytes) + ' of ' + byteSize(c.maxBytes) + note;
  }
  function mode(s) {
    if (s.store === 'memory') return 'in memory (this gateway only)';
    return s.degraded ? 'Redis: degraded (unreachable; routing from cache and ring)' : 'Redis (shared by every gateway)';
  }
  function meter(kind, value, total) {
    var p = pct(value, total);
    var m = el('span', 'meter');
    m.appendChild(el('span', 'val', value));
    var bar = el('span', 'bar');
    bar.setAttribute('aria-hidden', 'true');
    bar.appendChild(el('span', 'fill ' + kind + ' p' + p));
    m.appendChild(bar);
    m.appendChild(el('span', 'pct muted', p + '%'));
    return m;
  }
  function cell(tr, tag, cls, child, label, col) {
    var c = el(tag, cls);
    if (tag === 'th') c.setAttribute('scope', 'row');
    if (label) c.setAttribute('data-label', label);
    if (col) c.setAttribute('data-col', col);
    if (child !== undefined) { if (typeof child === 'object') c.appendChild(child); else c.textContent = String(child); }
    tr.appendChild(c);
    return c;
  }
  function backendRow(b, s) {
    var tr = el('tr');
    tr.setAttribute('data-backend', b.id);
    cell(tr, 'th', 'mono', b.id);
    if (internal) cell(tr, 'td', 'mono', b.url || '', 'URL');
    var st = cell(tr, 'td', null, undefined, 'State');
    var sp = st.appendChild(el('span'));
    sp.appendChild(el('span', 'state state-' + b.state, b.state));
    sp.appendChild(el('span', 'state-extra', b.removed ? ' (removed)' : b.deadline ? ' until ' + short(b.deadline) : ''));
    cell(tr, 'td', 'num', meter('rooms', b.rooms, s.totalRooms), 'Rooms');
    cell(tr, 'td', 'num', meter('sockets', b.sockets, s.totalSockets), 'Sockets');
    cell(tr, 'td', 'num', b.weight, 'Weight');
    return tr;
  }
  function eventRow(e) {
    var tr = el('tr');
    var t = el('time', null, short(e.at));
    t.setAttribute('datetime', e.at);
    cell(tr, 'td', 'mono', t, 'Time (UTC)');
    cell(tr, 'td', null, e.kind, 'Event');
    cell(tr, 'th', 'mono', e.backend, 'Backend');
    cell(tr, 'td', null, e.detail, 'Detail', 'detail');
    cell(tr, 'td', 'num', e.roomsMoved, 'Rooms moved');
    cell(tr, 'td', 'num', e.liveRoomsMoved, 'Live rooms moved');
    return tr;
  }
  function pushRow(p) {
    var tr = el('tr');
    var t = el('time', null, short(p.at));
    t.setAttribute('datetime', p.at);
    cell(tr, 'td', 'mono', t, 'Time (UTC)');
    cell(tr, 'td', null, p.call === 'room' ? 'room' : 'fan-out', 'Call');
    if (internal) cell(tr, 'th', 'mono', p.target, 'Room');
    cell(tr, 'td', null, el('span', 'push-' + p.result, p.result), 'Result');
    cell(tr, 'td', 'mono', p.backend, 'Backend');
    if (internal) cell(tr, 'td', 'mono', p.sender, 'Sender');
    cell(tr, 'td', 'num', p.sockets === null ? '' : p.sockets, 'Sockets');
    cell(tr, 'td', 'num', p.ms, 'ms');
    return tr;
  }
  function handoffRow(h) {
    var tr = el('tr');
    var t = el('time', null, short(h.at));
    t.setAttribute('datetime', h.at);
    cell(tr, 'td', 'mono', t, 'Time (UTC)');
    if (internal) cell(tr, 'th', 'mono', h.room, 'Room');
    cell(tr, 'td', 'mono', h.from, 'From');
    cell(tr, 'td', 'mono', h.to, 'To');
    cell(tr, 'td', null, el('span', 'handoff-' + h.state, h.done ? h.state : h.state + '...'), 'State');
    if (internal) cell(tr, 'td', null, h.reason, 'Reason');
    cell(tr, 'td', null, h.sockets, 'Sockets');
    cell(tr, 'td', 'num', h.ms === null ? '' : h.ms, 'ms');
    return tr;
  }
  function replace(tbody, rows) {
    var f = document.createDocumentFragment();
    rows.forEach(function (r) { f.appendChild(r); });
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    tbody.appendChild(f);
  }
  function changes(s) {
    if (!previous) return [];
    var out = [];
    var before = {};
    previous.backends.forEach(function (b) { before[' ' + b.id] = b.state; });
    s.backends.forEach(function (b) {
      var was = before[' ' + b.id];
      if (was === undefined) out.push('Backend ' + b.id + ' joined (' + b.state + ')');
      else if (was !== b.state) out.push('Backend ' + b.id + ' is now ' + b.state + ' (was ' + was + ')');
    });
    if (previous.degraded !== s.degraded) out.push('Placement store: ' + mode(s));
    return out;
  }
  function render(s) {
    text('gateway-id', s.gatewayId);
    var pm = document.getElementById('placement-mode');
    pm.setAttribute('data-degraded', String(s.degraded));
    text('placement-mode', mode(s));
    text('ready', s.ready ? 'yes' : 'no (shutting down)');
    text('sockets', s.sockets);
    text('rooms', s.rooms);
    text('cache', cacheText(s.cache, s.cacheRestartNeeded));
    var up = document.getElementById('updated');
    var now = new Date().toISOString();
    up.setAttribute('datetime', now);
    up.textContent = short(now);
    replace(document.querySelector('#backends tbody'), s.backends.map(function (b) { return backendRow(b, s); }));
    replace(document.querySelector('#events tbody'), s.events.map(eventRow));
    // An empty column is left out of the layout (the public port's events name no URLs).
    var hide = s.events.some(function (e) { return e.detail !== ''; }) ? '' : 'detail';
    var events = document.getElementById('events');
    if (events.getAttribute('data-hide') !== hide) events.setAttribute('data-hide', hide);
    document.getElementById('no-backends').hidden = s.backends.length > 0;
    document.getElementById('no-events').hidden = s.events.length > 0;
    replace(document.querySelector('#pushes tbody'), s.pushes.map(pushRow));
    document.getElementById('no-pushes').hidden = s.pushes.length > 0;
    text('handoff-hooks', s.handoffHooks);
    text('rebalancing', s.rebalancing);
    text('handoff-waiting', String(s.handoffWaiting));
    replace(document.querySelector('#handoffs tbody'), s.handoffs.map(handoffRow));
    document.getElementById('no-handoffs').hidden = s.handoffs.length > 0;
    if (s.history) drawCharts(s.history, s.cache !== null);
    var said = changes(s);
    if (said.length) announce.textContent = said.join('. ');
    previous = s;
  }
${STREAM_CLIENT_JS}
  function say(text, paused) {
    live.textContent = text;
    live.className = paused ? 'notice' : 'muted';
  }
  liveStream(main.getAttribute('data-stream'), {
    status: function (ev) {
      var s;
      try { s = JSON.parse(ev.data); } catch (e) { return; }
      render(s);
      say('Live: updates as they happen.', false);
    }
  }, say);
})();
`;
