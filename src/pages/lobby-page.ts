// The lobby page (/_roomgate/lobby on the public port, with api.enabled and api.publicReads): live
// listed rooms (src/shared-data/listing.ts: never a private room key, never a backend id) with their
// player counts and metadata, the global online count, a leaderboard and a "New room" button. The
// server-rendered page is complete without JavaScript (the button is a plain form: the server
// names the room and redirects to its page); the constant script keeps it live from the lobby
// stream (/_roomgate/api/lobby/stream) and the leaderboard API. Room names and metadata are user
// data: escaped by the template here, set with textContent by the script.
import { randomInt } from 'node:crypto';
import { publicOnline, publicPage, type Listing, type PublicOnline, type PublicRoom } from '../shared-data/listing.js';
import type { Ranked, SharedDataStore } from '../shared-data/store.js';
import { STREAM_CLIENT_JS, hiddenColumns, html, renderPage, shortTime, type RenderedPage, type SafeHtml } from './html.js';

export const LOBBY_PATH = '/_roomgate/lobby';
export const NEW_ROOM_PATH = '/_roomgate/lobby/new';
export const DEFAULT_BOARD = 'global';
/** Rooms listed (the lobby API's default page). */
export const LOBBY_ROWS = 50;
export const BOARD_ROWS = 10;
const DETAILS_MAX = 160;

export interface LobbyData {
  /** null: the shared store did not answer. */
  readonly rooms: readonly PublicRoom[] | null;
  readonly total: number;
  readonly online: PublicOnline | null;
  readonly board: string;
  /** null: unavailable; [] no scores yet. */
  readonly scores: readonly Ranked[] | null;
}

export async function loadLobby(store: SharedDataStore, listing: Listing, board: string): Promise<LobbyData> {
  const [page, online, scores] = await Promise.allSettled([
    store.lobby({ sort: 'sockets', order: 'desc', offset: 0, limit: LOBBY_ROWS, listing }).then(publicPage),
    store.online(),
    store.top(board, 0, BOARD_ROWS),
  ]);
  return {
    rooms: page.status === 'fulfilled' ? page.value.rooms : null,
    total: page.status === 'fulfilled' ? page.value.total : 0,
    online: online.status === 'fulfilled' ? publicOnline(online.value) : null,
    board,
    scores: scores.status === 'fulfilled' ? scores.value : null,
  };
}

/**
 * The page path of a room from a template with {room} (the first of room.pagePaths, e.g.
 * "/game/{room}/"). null for "." and "..": a browser resolves those (even percent-encoded) as
 * dot segments, so no link can name them.
 */
export function roomHref(template: string, room: string): string | null {
  if (room === '.' || room === '..') return null;
  return template.replace('{room}', () => encodeURIComponent(room));
}

/** The link template: the first page path, or the path prefix form; never protocol-relative. */
export function roomPathTemplate(pagePaths: readonly string[], pathPrefix: string): string {
  const page = pagePaths.find((p) => !p.startsWith('//'));
  return page ?? `${pathPrefix}{room}/`;
}

const ADJECTIVES = ['amber', 'brave', 'calm', 'clever', 'crimson', 'eager', 'fuzzy', 'gentle', 'golden', 'happy', 'jolly', 'lucky', 'mellow', 'nimble', 'quick', 'quiet', 'silver', 'sunny', 'swift', 'witty'];
const ANIMALS = ['badger', 'beaver', 'crane', 'falcon', 'ferret', 'fox', 'gecko', 'heron', 'lynx', 'marten', 'moose', 'otter', 'owl', 'panda', 'puffin', 'raven', 'seal', 'tapir', 'walrus', 'wombat'];

/** A fresh room name that `valid` (the gateway's room validator) accepts, or null. */
export function newRoomName(valid: (room: string) => boolean): string | null {
  const pick = (a: readonly string[]): string => a[randomInt(a.length)] as string;
  const candidates = [
    `${pick(ADJECTIVES)}-${pick(ANIMALS)}-${randomInt(1000, 10000)}`,
    `room${randomInt(1e9, 1e10 - 1)}`,
    String(randomInt(1e9, 1e10 - 1)),
  ];
  return candidates.find(valid) ?? null;
}

/** Metadata as three strings: title, status and the other keys ("capacity: 4, mode: ffa"). */
export function metaParts(meta: PublicRoom['meta']): { title: string; status: string; details: string } {
  if (!meta) return { title: '', status: '', details: '' };
  const show = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v) ?? '');
  const rest = Object.keys(meta)
    .filter((k) => k !== 'title' && k !== 'status')
    .map((k) => `${k}: ${show(meta[k])}`)
    .join(', ');
  return {
    title: meta['title'] === undefined ? '' : show(meta['title']),
    status: meta['status'] === undefined ? '' : show(meta['status']),
    details: rest.length > DETAILS_MAX ? `${rest.slice(0, DETAILS_MAX - 1)}…` : rest,
  };
}

function roomRow(r: PublicRoom, template: string): SafeHtml {
  const m = metaParts(r.meta);
  const href = roomHref(template, r.room);
  return html`<tr data-room="${r.room}">
<th scope="row" class="mono">${href === null ? r.room : html`<a href="${href}">${r.room}</a>`}</th>
<td data-col="title" data-label="Title">${m.title}</td>
<td data-col="status" data-label="Status">${m.status}</td>
<td class="num" data-col="sockets" data-label="Players">${r.sockets}</td>
<td class="muted" data-col="details" data-label="Details">${m.details}</td>
</tr>`;
}

function scoreRow(s: Ranked): SafeHtml {
  return html`<tr><td class="num">${s.rank}</td><th scope="row">${s.member}</th><td class="num">${s.score}</td></tr>`;
}

export interface LobbyPageOptions {
  /** Room page template with {room} (roomPathTemplate). */
  readonly roomPath: string;
  readonly apiPrefix: string;
}

export function renderLobbyPage(d: LobbyData, o: LobbyPageOptions, nowMs = Date.now()): RenderedPage {
  const online = d.online;
  const rooms = d.rooms ?? [];
  const scores = d.scores ?? [];
  // Columns no room has a value in are left out (the script keeps this up to date).
  const hide = hiddenColumns(['title', 'status', 'details'], rooms.map((r) => metaParts(r.meta)));
  const boardUrl = `${o.apiPrefix}/leaderboards/${encodeURIComponent(d.board)}?limit=${BOARD_ROWS}`;
  const body = html`<a class="skip" href="#rooms-h">Skip to rooms</a>
<div class="wrap">
<header class="top">
<h1>Lobby</h1>
<p class="muted">The rooms this app lists, while they have players. The counts take in every room, listed or not.</p>
</header>
<main id="lobby" data-stream="${o.apiPrefix}/lobby/stream" data-room-path="${o.roomPath}" data-board-url="${boardUrl}">
<section aria-labelledby="online-h">
<h2 id="online-h" class="sr-only">Online now</h2>
<div class="cards">
<div class="card"><p class="muted" id="online-label">Players online</p><p class="big" id="online-total" aria-labelledby="online-label">${online ? online.total : '–'}</p></div>
<div class="card"><p class="muted" id="rooms-label">Live rooms</p><p class="big" id="online-rooms" aria-labelledby="rooms-label">${online ? online.rooms : '–'}</p></div>
<form class="card action" method="get" action="${NEW_ROOM_PATH}" target="_blank">
<p class="muted" id="new-room-hint">Opens in a new tab</p>
<p><button type="submit" id="new-room" aria-describedby="new-room-hint">New room</button></p>
</form>
</div>
<p id="online-summary" class="sr-only" aria-live="polite"></p>
<p id="live" role="status" class="muted">Static view (${shortTime(new Date(nowMs).toISOString())}): reload the page to refresh.</p>
${d.rooms === null || online === null ? html`<p id="unavailable" class="notice">The lobby data store is unavailable right now; rooms keep working. Try again shortly.</p>` : ''}
</section>
<section aria-labelledby="rooms-h">
<h2 id="rooms-h">Rooms</h2>
<table id="rooms" class="stack" data-hide="${hide}">
<caption>Listed live rooms, most players first (up to ${LOBBY_ROWS}). Follow a room's link to join it.</caption>
<thead><tr>
<th scope="col">Room</th>
<th scope="col" data-col="title">Title</th>
<th scope="col" data-col="status">Status</th>
<th scope="col" class="num" data-col="sockets">Players</th>
<th scope="col" data-col="details">Details</th>
</tr></thead>
<tbody>
${rooms.map((r) => roomRow(r, o.roomPath))}
</tbody>
</table>
<p id="no-rooms"${rooms.length > 0 ? html` hidden` : ''}>No listed live rooms yet: start one with “New room”.</p>
</section>
<section aria-labelledby="board-h">
<h2 id="board-h">Leaderboard <code>${d.board}</code></h2>
<table id="board" class="narrow"${scores.length > 0 ? '' : html` hidden`}>
<caption>Top ${BOARD_ROWS} scores.</caption>
<thead><tr><th scope="col" class="num">Rank</th><th scope="col">Player</th><th scope="col" class="num">Score</th></tr></thead>
<tbody>
${scores.map(scoreRow)}
</tbody>
</table>
<p id="no-scores"${scores.length > 0 ? html` hidden` : ''}>${d.scores === null ? 'Scores are unavailable right now.' : 'No scores yet.'}</p>
</section>
</main>
</div>`;
  return renderPage({ title: 'Lobby - roomgate', body, script: LOBBY_SCRIPT });
}

/**
 * Keeps the lobby live: the lobby stream's `snapshot` replaces the room list, `rooms` events
 * update or remove rooms, `unavailable` shows a notice; a stream the server refuses (503) is
 * retried and the status line says why updates are paused; the leaderboard is re-read every 5 s.
 * Columns no room has a value in (Title, Status, Details) and an empty leaderboard are hidden.
 * Rows are built with DOM calls and textContent only. Constant, so its hash is in the CSP.
 */
export const LOBBY_SCRIPT = `
(function () {
  'use strict';
  var main = document.getElementById('lobby');
  if (!main || typeof EventSource === 'undefined' || typeof Map === 'undefined') return;
  var LIMIT = ${LOBBY_ROWS};
  var template = main.getAttribute('data-room-path');
  var tbody = document.querySelector('#rooms tbody');
  var live = document.getElementById('live');
  var rooms = new Map();
  var rows = new Map();
  // The body cells after the room's: data-col, label (data-label), class.
  var COLUMNS = [['title', 'Title', null], ['status', 'Status', null], ['sockets', 'Players', 'num'], ['details', 'Details', 'muted']];
  var HIDEABLE = ['title', 'status', 'details'];
  var table = document.getElementById('rooms');
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function set(id, value) { var e = document.getElementById(id); if (e && e.textContent !== String(value)) e.textContent = String(value); }
  function show(v) { return typeof v === 'string' ? v : (JSON.stringify(v) || ''); }
  function metaParts(meta) {
    if (!meta || typeof meta !== 'object') return { title: '', status: '', details: '' };
    var rest = Object.keys(meta).filter(function (k) { return k !== 'title' && k !== 'status'; })
      .map(function (k) { return k + ': ' + show(meta[k]); }).join(', ');
    return {
      title: meta.title === undefined ? '' : show(meta.title),
      status: meta.status === undefined ? '' : show(meta.status),
      details: rest.length > ${DETAILS_MAX} ? rest.slice(0, ${DETAILS_MAX - 1}) + '\\u2026' : rest
    };
  }
  function href(room) {
    if (room === '.' || room === '..') return null;
    return template.replace('{room}', function () { return encodeURIComponent(room); });
  }
  function fill(tr, r) {
    var m = metaParts(r.meta);
    var cells = tr.children;
    var h = href(r.room);
    if (!cells.length) {
      var th = el('th', 'mono');
      th.setAttribute('scope', 'row');
      if (h === null) th.textContent = r.room;
      else { var a = el('a', null, r.room); a.setAttribute('href', h); th.appendChild(a); }
      tr.appendChild(th);
      COLUMNS.forEach(function (c) {
        var td = el('td', c[2]);
        td.setAttribute('data-col', c[0]);
        td.setAttribute('data-label', c[1]);
        tr.appendChild(td);
      });
    }
    var values = [null, m.title, m.status, String(r.sockets), m.details];
    for (var i = 1; i < values.length; i++) if (cells[i].textContent !== values[i]) cells[i].textContent = values[i];
  }
  function render() {
    var list = Array.from(rooms.values()).filter(function (r) { return r.sockets > 0; });
    list.sort(function (a, b) { return b.sockets - a.sockets || (a.room < b.room ? -1 : a.room > b.room ? 1 : 0); });
    list = list.slice(0, LIMIT);
    var keep = new Set(list.map(function (r) { return r.room; }));
    rows.forEach(function (tr, room) { if (!keep.has(room)) { tr.remove(); rows.delete(room); } });
    list.forEach(function (r, i) {
      var tr = rows.get(r.room);
      if (!tr) { tr = el('tr'); tr.setAttribute('data-room', r.room); rows.set(r.room, tr); }
      fill(tr, r);
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    document.getElementById('no-rooms').hidden = list.length > 0;
    // A column no listed room has a value in is left out of the layout.
    var parts = list.map(function (r) { return metaParts(r.meta); });
    var hide = HIDEABLE.filter(function (c) { return !parts.some(function (m) { return m[c] !== ''; }); }).join(' ');
    if (table.getAttribute('data-hide') !== hide) table.setAttribute('data-hide', hide);
  }
  function online(o) {
    if (!o) return;
    set('online-total', o.total);
    set('online-rooms', o.rooms);
    set('online-summary', o.total + ' players online in ' + o.rooms + ' rooms');
  }
  function notice(text) {
    var n = document.getElementById('unavailable');
    if (!text) { if (n) n.remove(); return; }
    if (!n) { n = el('p', 'notice'); n.id = 'unavailable'; live.parentNode.insertBefore(n, live.nextSibling); }
    n.textContent = text;
  }
  // Rows rendered by the server are adopted, so the first snapshot does not rebuild them.
  Array.prototype.forEach.call(tbody.querySelectorAll('tr[data-room]'), function (tr) { rows.set(tr.getAttribute('data-room'), tr); });
${STREAM_CLIENT_JS}
  function parse(ev) { try { return JSON.parse(ev.data); } catch (e) { return null; } }
  function say(text, paused) {
    live.textContent = text;
    live.className = paused ? 'notice' : 'muted';
  }
  liveStream(main.getAttribute('data-stream'), {
    snapshot: function (ev) {
      var d = parse(ev);
      if (!d) return;
      rooms.clear();
      d.rooms.forEach(function (r) { rooms.set(r.room, r); });
      online(d.online);
      notice('');
      render();
      say('Live: counts update as players come and go.', false);
    },
    rooms: function (ev) {
      var d = parse(ev);
      if (!d) return;
      d.rooms.forEach(function (r) { if (r.gone) rooms.delete(r.room); else rooms.set(r.room, r); });
      online(d.online);
      render();
    },
    unavailable: function () {
      notice('The lobby data store is unavailable right now; rooms keep working. Retrying.');
    }
  }, say);

  var boardUrl = main.getAttribute('data-board-url');
  var boardBody = document.querySelector('#board tbody');
  function board() {
    fetch(boardUrl, { headers: { Accept: 'application/json' }, cache: 'no-store' }).then(function (res) {
      if (res.status === 404) return { entries: [] };
      if (!res.ok) throw new Error('status ' + res.status);
      return res.json();
    }).then(function (d) {
      var f = document.createDocumentFragment();
      d.entries.forEach(function (s) {
        var tr = el('tr');
        tr.appendChild(el('td', 'num', s.rank));
        var th = el('th', null, s.member);
        th.setAttribute('scope', 'row');
        tr.appendChild(th);
        tr.appendChild(el('td', 'num', s.score));
        f.appendChild(tr);
      });
      while (boardBody.firstChild) boardBody.removeChild(boardBody.firstChild);
      boardBody.appendChild(f);
      var none = document.getElementById('no-scores');
      // No scores: the table (headers only) is left out, the sentence says so.
      document.getElementById('board').hidden = d.entries.length === 0;
      none.hidden = d.entries.length > 0;
      none.textContent = 'No scores yet.';
    }).catch(function () { /* keep the last table; the next poll retries */ });
  }
  setInterval(board, 5000);
})();
`;
