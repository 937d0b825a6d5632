// The demo backend's pages: the game page (its script speaks the djust-shaped protocol of
// game.ts) and the index. Constants, so the script's and the style's CSP hashes are computed once.
import { createHash } from 'node:crypto';
import { CLOSE_SERVICE_RESTART, CLOSE_WRONG_ROOM, ROOM_MOVED } from '../../src/backend-kit/index.js';

/** Banner colours (white text on each, 4.5:1 or more); a backend's id picks one, so tabs compare at a glance. */
export const GAME_PAGE_TONES = ['#1d4ed8', '#047857', '#b91c1c', '#6d28d9', '#9a3412', '#0e7490'] as const;
const GAME_PAGE_TONES_COUNT = GAME_PAGE_TONES.length;

/**
 * The page script is a constant (the ws path comes from the <meta> tag, as in
 * djust), so its CSP hash can be computed once and the page can forbid every
 * other script.
 */
const PAGE_SCRIPT = `
(function () {
  var meta = document.querySelector('meta[name="djust-ws-path"]');
  var path = (meta && meta.getAttribute('content')) || '/ws/live/';
  var status = document.getElementById('status');
  var members = document.getElementById('members');
  var header = document.getElementById('backend');
  var headerId = document.getElementById('backend-id');
  var pageBackend = headerId.textContent;
  var wsBackend = document.getElementById('ws-backend');
  var moved = document.getElementById('moved');
  var pushed = document.getElementById('pushed');
  var noPushes = document.getElementById('no-pushes');
  var moves = document.getElementById('moves');
  var moveButton = document.getElementById('move');
  var moveNote = document.getElementById('move-note');
  // Concatenate with location.host (never resolve the path as a URL) so a
  // path like "//elsewhere/..." cannot point the socket at another origin.
  var proto = location.protocol === 'https:' ? 'wss://' : 'ws://';
  // Reconnect as djust's client does: exponential back-off from BASE_MS, capped at CAP_MS, each
  // wait jittered (half of it random) so the sockets of a dead backend do not all come back at once.
  var BASE_MS = 500, CAP_MS = 5000;
  var failures = 0;
  var current = null;
  var socket = null;
  // A move the server refused while the room was moving to another backend (room-moving): sent
  // again once the page has mounted the room on its new backend, so no move is lost.
  var pendingMove = null;
  var lastMove = null;
  // The last close was a handoff's release (1012 "room moved"), not a lost connection.
  var handedOff = false;
  moveButton.onclick = function () {
    lastMove = { type: 'event', data: { at: Date.now() } };
    if (socket && socket.readyState === 1) socket.send(JSON.stringify(lastMove));
  };
  function backoff(n) {
    var d = Math.min(CAP_MS, BASE_MS * Math.pow(2, n));
    return Math.round(d / 2 + Math.random() * d / 2);
  }
  // The server's tone rule (toneOf), so the banner colour follows the backend the room moved to.
  function tone(id) {
    var h = 0;
    for (var i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
    return h % ${GAME_PAGE_TONES_COUNT};
  }
  function connect() {
    var ws = new WebSocket(proto + location.host + path);
    socket = ws;
    ws.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === 'connect') {
        var b = String(msg.backend);
        wsBackend.textContent = b;
        if (current === null) {
          // The page and its socket must reach the same process: say so if they did not.
          if (b !== pageBackend) wsBackend.textContent += ' (the page came from ' + pageBackend + ': the room is split)';
        } else if (b !== current) {
          // A handoff's release closes the room's sockets with 1012 "room moved" (the backend kit): a
          // planned move. Any other close before a new backend: the old one went away.
          moved.textContent = handedOff
            ? 'Moved to backend ' + b + ' by a handoff (from backend ' + current + ')'
            : 'Moved from backend ' + current + ' to backend ' + b + ' after its connection was lost';
          moved.hidden = false;
          headerId.textContent = b;
          header.className = 'backend tone-' + tone(b);
          document.title = document.title.replace(/\\([^()]*\\)$/, '(' + b + ')');
        }
        current = b;
        status.textContent = 'Connected to backend ' + b + ', joining room';
        ws.send(JSON.stringify({ type: 'mount', url: location.pathname }));
      } else if (msg.type === 'resumed') {
        // roomgate moved the socket with its room (a handoff's resume): the same socket, a new backend.
        var r = String(msg.backend);
        if (current !== null && r !== current) {
          moved.textContent = 'Moved to backend ' + r + ' by a handoff, without a disconnect (from backend ' + current + ')';
          moved.hidden = false;
          headerId.textContent = r;
          wsBackend.textContent = r;
          header.className = 'backend tone-' + tone(r);
          document.title = document.title.replace(/\\([^()]*\\)$/, '(' + r + ')');
        }
        current = r;
        status.textContent = 'Live in room ' + msg.room + ' on backend ' + r;
      } else if (msg.type === 'push') {
        // A message roomgate delivered to the room (docs/push.md): newest first, the last few kept.
        var m = msg.message;
        var text = m !== null && typeof m === 'object' && typeof m.text === 'string' ? m.text : JSON.stringify(m);
        var li = document.createElement('li');
        li.textContent = (msg.sender ? msg.sender + ': ' : '') + text;
        pushed.insertBefore(li, pushed.firstChild);
        while (pushed.children.length > 5) pushed.removeChild(pushed.lastChild);
        noPushes.hidden = true;
      } else if (msg.type === 'patch') {
        if (typeof msg.move === 'number') moves.textContent = String(msg.move);
      } else if (msg.type === 'error' && msg.error === 'room-moving') {
        pendingMove = lastMove;
        moveNote.textContent = 'The room is moving to another backend: your move is sent again once it is there';
      } else if (msg.type === 'mounted' || msg.type === 'presence') {
        if (msg.type === 'mounted') {
          failures = 0;
          moves.textContent = String(msg.moves);
          moveButton.disabled = false;
          if (pendingMove) {
            ws.send(JSON.stringify(pendingMove));
            pendingMove = null;
            moveNote.textContent = 'Your move was sent again';
          }
        }
        members.textContent = String(msg.members);
        status.textContent = 'Live in room ' + msg.room + ' on backend ' + current;
      }
    };
    ws.onclose = function (ev) {
      handedOff = ev.code === ${CLOSE_SERVICE_RESTART} && ev.reason === ${JSON.stringify(ROOM_MOVED)};
      moveButton.disabled = true;
      // The socket was routed for another room than this page's (the room cookie of another tab):
      // a reconnect would land in the same place, so the page stops and says so (no reconnect storm).
      if (ev.code === ${CLOSE_WRONG_ROOM}) {
        status.textContent = 'This tab reached the server of another room: reload the page';
        return;
      }
      var wait = backoff(failures++);
      status.textContent = 'Disconnected (code ' + ev.code + '); reconnecting in ' + (wait / 1000).toFixed(1) + ' s (attempt ' + failures + ')';
      setTimeout(connect, wait);
    };
  }
  connect();
})();
`;
export const PAGE_SCRIPT_CSP = `'sha256-${createHash('sha256').update(PAGE_SCRIPT).digest('base64')}'`;

/** The page's only stylesheet: a constant, so its hash goes into the CSP like the script's. */
const PAGE_STYLE = `
body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1b1f24;background:#fff}
main{max-width:40rem;margin:0 auto;padding:1rem}
code{font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.backend{color:#fff;padding:1rem 1.5rem;text-align:center}
.backend p{margin:0}
.backend-label{font-size:1rem;text-transform:uppercase;letter-spacing:.08em}
.backend-id{font-size:3rem;font-weight:700;font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
a{color:#1d4ed8}
a:focus-visible{outline:3px solid #1d4ed8;outline-offset:2px}
${GAME_PAGE_TONES.map((c, i) => `.tone-${i}{background:${c}}`).join('\n')}
`;
export const PAGE_STYLE_CSP = `'sha256-${createHash('sha256').update(PAGE_STYLE).digest('base64')}'`;

/** A backend's banner colour; the page script has the same rule (tone()) for a room that moved. */
export function toneOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return h % GAME_PAGE_TONES.length;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function renderGamePage(id: string, room: string, wsPath: string): string {
  const r = escapeHtml(room);
  const b = escapeHtml(id);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="djust-ws-path" content="${escapeHtml(wsPath)}">
<title>Room ${r} - roomgate demo (${b})</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<header class="backend tone-${toneOf(id)}" id="backend">
<p class="backend-label">Backend</p>
<p class="backend-id" id="backend-id">${b}</p>
</header>
<main>
<h1>Room ${r}</h1>
<p id="served-by">Served by backend <strong>${b}</strong> for room <strong>${r}</strong></p>
<p>Members in this room: <output id="members" aria-live="polite">0</output></p>
<p>Socket connected to backend: <strong id="ws-backend">not yet</strong></p>
<p id="status" role="status">Connecting</p>
<p id="moved" role="status" hidden></p>
<h2>The game</h2>
<p>Moves in this room: <output id="moves" aria-live="polite">0</output></p>
<p><button type="button" id="move" disabled>Make a move</button> <span id="move-note" role="status"></span></p>
<h2>Pushed to this room</h2>
<ol id="pushed" aria-live="polite"></ol>
<p id="no-pushes">Nothing yet: roomgate's push API delivers here (<code>POST /_roomgate/api/rooms/${r}/messages</code>, the demo prints the command).</p>
<p><a href="/_roomgate/lobby">All rooms (the lobby, served by roomgate)</a></p>
</main>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

/** The rooms the index page (GET /) links to; roomgate's demo banner links the same ones. */
export const INDEX_ROOMS = ['chess', 'poker', 'tetris'] as const;

export function renderIndexPage(id: string): string {
  const b = escapeHtml(id);
  const rooms = INDEX_ROOMS.map((r) => `<li><a href="/game/${r}/">${r}</a></li>`).join('\n');
  const perTab = INDEX_ROOMS[INDEX_ROOMS.length - 1] ?? 'tetris';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>roomgate demo (${b})</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<header class="backend tone-${toneOf(id)}">
<p class="backend-label">Backend</p>
<p class="backend-id">${b}</p>
</header>
<main>
<h1>roomgate demo</h1>
<p>Every page and socket of a room reaches the one backend that holds it. Open a room in two tabs: both show the same backend.</p>
<h2>Game rooms</h2>
<ul id="rooms">
${rooms}
<li><a href="/r/${perTab}/game/${perTab}/">${perTab}, by path prefix (/r/${perTab}/)</a></li>
</ul>
<p><a href="/_roomgate/lobby">The lobby: every live room (served by roomgate)</a></p>
<p>This page came from backend <strong>${b}</strong>; any backend can answer it.</p>
</main>
</body>
</html>
`;
}
