/**
 * Demo backend for roomgate: a single-process room app shaped like a djust
 * (Django LiveView) game server.
 *
 * Room state lives only in this process's memory, exactly like a djust app
 * without a channel layer: the sockets of each room, and its moves (every `event` is one, counted
 * and kept among the last few), which the room handoff's hooks carry to another process
 * (handoff.ts, docs/handoff.md). That is the whole point: if a proxy ever splits one
 * room across two of these processes, the members of that room stop seeing each
 * other, and `/_backend/rooms` on each backend makes the split visible. The
 * roomgate tests use these backends as that witness.
 *
 * CLI:  node dist/examples/demo-backend/server.js --port N --id ID [--host H] [--tick-ms N]
 *         [--healthz-status N] [--allowed-hosts NAME,NAME] [--handoff-path PATH] [--handoff-version 1|2]
 *       (env PORT, BACKEND_ID, HOST, TICK_MS as fallbacks; port 0 = ephemeral)
 *       --healthz-status: what GET /healthz answers (default 200; 404 = an app without the route).
 *       --allowed-hosts: like Django's ALLOWED_HOSTS: a request or upgrade whose Host (without
 *         port) is not listed gets 400. Default: any Host.
 *       --handoff-path: where the room handoff's hooks are served (roomgate's handoff.path,
 *         default /_roomgate/handoff; docs/handoff.md). They verify roomgate's proof like pushes.
 *       --handoff-version: the protocol its hello says (default 2: it takes a held socket's
 *         messages; 1: the hooks without them, as an app that has not moved to version 2).
 *       env ROOMGATE_BACKEND_KEYS: this backend's own keys, comma-separated, as
 *         `roomgate backend-key ID` prints them (ROOMGATE_BACKEND_KEYS_FILE: a file holding them,
 *         read again on SIGHUP, so keys rotate without a restart); without one every push and
 *         handoff call is refused (403). ROOMGATE_BACKEND_ID: this backend's id in roomgate's
 *         configuration, the destination every call's proof must name (default: --id).
 *       SIGUSR2 toggles GET /healthz between its status and 503 (health checks fail while the
 *       process keeps serving everything else).
 *       These make it behave like the apps roomgate's health checks must cope with; each is
 *       off by default, and none can be switched over HTTP.
 * djust's HTTP fallback: a POST to /game/{room}/ with X-Djust-Event is the room's next move, answered
 * with its number as `version` (test/support/djust-client.mjs sends it while its socket is closed).
 * When listening it prints exactly one JSON line to stdout:
 *       {"event":"listening","id":"ID","port":<actual port>}
 * Everything else goes to stderr so a parent process can parse stdout safely.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, realpathSync } from 'node:fs';
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { WebSocketServer, WebSocket } from 'ws';
import type { RawData } from 'ws';
import { keyProblem } from '../../src/http/call-proof.js';
import { createCallCheck } from './call-check.js';
import { CLOSE_SERVICE_RESTART, createHandoff, DEFAULT_HANDOFF_PATH, HANDOFF_VERSION } from './handoff.js';
import { createMoveStore } from './room-moves.js';

export interface DemoBackendOptions {
  port?: number;
  host?: string;
  id: string;
  /** Broadcast a ~140-byte tick frame to every room every N ms (0 = off). */
  tickMs?: number;
  /** Status of GET /healthz (default 200; 404: an app without the route). */
  healthzStatus?: number;
  /** Like Django's ALLOWED_HOSTS: other Host names (port ignored) get 400. Default: any. */
  allowedHosts?: readonly string[];
  /** This backend's own keys (`roomgate backend-key ID`); none: every push and handoff call refused. */
  callKeys?: readonly string[];
  /** This backend's id in roomgate's configuration, which every call's proof names; default `id`. */
  callerId?: string;
  /** Where the room handoff's hooks are served (roomgate's handoff.path); default /_roomgate/handoff. */
  handoffPath?: string;
  /** The handoff protocol version its hello answers: 2 (default; it takes held messages) or 1. */
  handoffVersion?: 1 | 2;
  /** Rooms whose moves are kept without a socket here; past it the oldest such room is forgotten. */
  maxRoomStates?: number;
}

export interface DemoBackend {
  port: number;
  id: string;
  /** Makes GET /healthz answer 503 (true) or its configured status again (false); SIGUSR2 in the CLI. */
  failHealth(fail: boolean): void;
  readonly healthFailing: boolean;
  /** Replaces the keys calls are verified with (a rotation: the new set overlaps the old). */
  setCallKeys(keys: readonly string[]): void;
  close(): Promise<void>;
}

const SLOW_MAX_MS = 60_000;
const BIG_MAX_KB = 10_240;
/** A pushed message is at most this big (roomgate's push.maxBytes is smaller by default). */
const PUSH_MAX_BYTES = 1 << 20;
const TICK_FRAME_BYTES = 140;
/** Same rule roomgate uses; anything else in the header is ignored, never reflected. */
const FORWARDED_PREFIX_RE = /^\/[A-Za-z0-9_.:/-]{0,200}$/;
const MAX_ROOM_LENGTH = 128;
const MAX_ROOM_STATES = 10_000;
/** The HTTP fallback's event body, at most (djust's events are small). */
const HTTP_EVENT_MAX_BYTES = 4096;
/** What a client's event gets while its room is frozen by a handoff: send it again after the reconnect. */
const ROOM_MOVING = { type: 'error', error: 'room-moving', retry: true, message: 'the room is moving to another server: send it again after the reconnect' } as const;

interface Client {
  sessionId: string;
  /** The room the socket mounted. */
  room: string | null;
  /** The room roomgate routed the handshake by (X-Roomgate-Room): where its pushes go until it mounts. */
  handshakeRoom: string | null;
  /** `room` query parameter of the socket URL: last-resort room for mount. */
  queryRoom: string | null;
}

/** Banner colours (white text on each, 4.5:1 or more); a backend's id picks one, so tabs compare at a glance. */
export const GAME_PAGE_TONES = ['#1d4ed8', '#047857', '#b91c1c', '#6d28d9', '#9a3412', '#0e7490'] as const;
const GAME_PAGE_TONES_COUNT = GAME_PAGE_TONES.length;

/** The close reason of a room's sockets when a handoff moved the room (with 1012): the page tells a planned move by it. */
const ROOM_MOVED = 'room moved';

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
          // A handoff's release closes the room's sockets with 1012 "room moved" (handoff.ts): a
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
      var wait = backoff(failures++);
      status.textContent = 'Disconnected (code ' + ev.code + '); reconnecting in ' + (wait / 1000).toFixed(1) + ' s (attempt ' + failures + ')';
      setTimeout(connect, wait);
    };
  }
  connect();
})();
`;
const PAGE_SCRIPT_CSP = `'sha256-${createHash('sha256').update(PAGE_SCRIPT).digest('base64')}'`;

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
const PAGE_STYLE_CSP = `'sha256-${createHash('sha256').update(PAGE_STYLE).digest('base64')}'`;

/** A backend's banner colour; the page script has the same rule (tone()) for a room that moved. */
export function toneOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return h % GAME_PAGE_TONES.length;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function renderGamePage(id: string, room: string, wsPath: string): string {
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

function renderIndexPage(id: string): string {
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

/** Split req.url without `new URL()`: a path like `//host/x` must not become a host. */
function splitUrl(raw: string | undefined): { pathname: string; query: URLSearchParams } {
  const url = raw ?? '/';
  const q = url.indexOf('?');
  return q < 0
    ? { pathname: url, query: new URLSearchParams() }
    : { pathname: url.slice(0, q), query: new URLSearchParams(url.slice(q + 1)) };
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

function validRoom(room: string | null | undefined): string | null {
  return room && room.length <= MAX_ROOM_LENGTH ? room : null;
}

/** Room from a djust mount url (location.pathname, possibly behind a /r/{room} prefix). */
function roomFromUrl(url: unknown): string | null {
  if (typeof url !== 'string') return null;
  const m = /\/game\/([^/?#]+)\//.exec(url);
  return m?.[1] ? validRoom(safeDecode(m[1])) : null;
}

function intParam(value: string | null, max: number): number {
  const n = Number.parseInt(value ?? '', 10);
  return Number.isFinite(n) && n > 0 ? Math.min(n, max) : 0;
}

export function startDemoBackend(opts: DemoBackendOptions): Promise<DemoBackend> {
  const id = opts.id;
  const host = opts.host ?? '127.0.0.1';
  const tickMs = opts.tickMs ?? 0;
  const healthzStatus = opts.healthzStatus ?? 200;
  const allowedHosts = opts.allowedHosts === undefined ? null : new Set(opts.allowedHosts.map((h) => h.toLowerCase()));
  let callKeys = opts.callKeys ?? [];
  const checkCall = createCallCheck(opts.callerId ?? id, () => callKeys);
  let healthFailing = false;

  /** Django's rule: the Host without its port must be listed (when a list is given). */
  function hostAllowed(req: IncomingMessage): boolean {
    if (allowedHosts === null) return true;
    const host = (req.headers.host ?? '').toLowerCase();
    const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
    return allowedHosts.has(name);
  }

  const rooms = new Map<string, Set<WebSocket>>();
  const clients = new Map<WebSocket, Client>();
  /**
   * Sockets that have not mounted, by the room their handshake was routed by: a push reaches them
   * too (a plain client in the room sees it without speaking the mount protocol).
   */
  const unmounted = new Map<string, Set<WebSocket>>();

  function setUnmounted(ws: WebSocket, room: string | null, on: boolean): void {
    if (room === null) return;
    let set = unmounted.get(room);
    if (on) {
      if (!set) unmounted.set(room, (set = new Set()));
      set.add(ws);
    } else if (set?.delete(ws) && set.size === 0) unmounted.delete(room);
  }

  /** A pushed message to every socket of the room, mounted or only routed there; how many got it. */
  function pushToRoom(room: string, msg: unknown): number {
    const frame = JSON.stringify(msg);
    let n = 0;
    for (const set of [rooms.get(room), unmounted.get(room)]) {
      for (const ws of set ?? []) {
        if (ws.readyState !== WebSocket.OPEN) continue;
        ws.send(frame);
        n++;
      }
    }
    return n;
  }
  /**
   * The placement epoch each room is held under (X-Roomgate-Epoch, docs/ownership.md). Epochs only
   * grow. A newer one for a room with live sockets here means its placement was written again in
   * place (the store lost its data and the gateways put it back): nothing moved, the room stays.
   * A newer one for a room without live sockets here may follow a move away and back: whatever
   * this process kept of the room (its moves) is stale and is dropped, unless a handoff froze it.
   * An older one is a request routed before the newer placement: a push under it is refused, and
   * so is one under an epoch a handoff released (the epoch fence).
   */
  const epochs = new Map<string, number>();

  /** Notes the epoch a request of `room` came with; false when it is older than the one held, or released. */
  function noteEpoch(room: string, epoch: number): boolean {
    if (!Number.isSafeInteger(epoch) || epoch <= 0) return true; // 0: routed without a stored placement
    if (handoff.fenced(room, epoch)) return false;
    const held = epochs.get(room);
    if (held !== undefined && epoch < held) return false;
    if (held !== undefined && epoch > held && !live(room) && !handoff.frozen(room)) moves.drop(room);
    epochs.set(room, Math.max(epoch, held ?? 0));
    return true;
  }

  /** Whether the room has sockets here, mounted or routed by it. */
  function live(room: string): boolean {
    return rooms.has(room) || unmounted.has(room);
  }

  const moves = createMoveStore(opts.maxRoomStates ?? MAX_ROOM_STATES, (room) => live(room) || handoff.frozen(room));
  const handoff = createHandoff(opts.handoffPath ?? DEFAULT_HANDOFF_PATH, {
    checkCall,
    moves,
    heldEpoch: (room) => epochs.get(room),
    setEpoch: (room, epoch) => epochs.set(room, Math.max(epoch, epochs.get(room) ?? 0)),
    holds: (room) => live(room) || moves.get(room) !== undefined,
    closeRoom(room, code) {
      // Every socket the gateway counts in the room: mounted there, or routed by it.
      for (const [ws, client] of clients) if (client.room === room || client.handshakeRoom === room) ws.close(code, ROOM_MOVED);
    },
    applyMessages(room, socketId, messages) {
      // The held socket's events, in order, as if it had sent them here: each one a move in the room.
      for (const m of messages) {
        const msg = eventOf(m);
        if (msg === null) continue;
        broadcast(room, { type: 'patch', room, from: `held:${socketId}`, data: msg.data ?? null, move: moves.record(room, `held:${socketId}`, msg.data).n });
      }
    },
    version: opts.handoffVersion ?? HANDOFF_VERSION,
    log: (line) => process.stderr.write(`demo-backend ${id}: ${line}\n`),
  });

  /** The room and epoch roomgate says a request belongs to, if it says so. */
  function ownerOf(req: IncomingMessage): { room: string; epoch: number } | null {
    const room = validRoom(typeof req.headers['x-roomgate-room'] === 'string' ? req.headers['x-roomgate-room'] : null);
    if (room === null) return null;
    return { room, epoch: Number(req.headers['x-roomgate-epoch'] ?? '0') };
  }

  // --- room bookkeeping -------------------------------------------------------

  function broadcast(room: string, msg: unknown, except?: WebSocket): void {
    const members = rooms.get(room);
    if (!members) return;
    const frame = JSON.stringify(msg); // serialise once, not per member
    for (const ws of members) {
      if (ws !== except && ws.readyState === WebSocket.OPEN) ws.send(frame);
    }
  }

  function leaveRoom(ws: WebSocket, client: Client): void {
    const room = client.room;
    if (room === null) return;
    client.room = null;
    const members = rooms.get(room);
    if (!members) return;
    members.delete(ws);
    if (members.size === 0) rooms.delete(room); // empty rooms must vanish from /_backend/rooms
    else broadcast(room, { type: 'presence', room, members: members.size });
  }

  function joinRoom(ws: WebSocket, client: Client, room: string): number {
    setUnmounted(ws, client.handshakeRoom, false);
    let members = rooms.get(room);
    if (!members) rooms.set(room, (members = new Set()));
    members.add(ws);
    client.room = room;
    return members.size;
  }

  function send(ws: WebSocket, msg: unknown): void {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
  }

  // --- WebSocket protocol ----------------------------------------------------

  function onMessage(ws: WebSocket, client: Client, data: RawData, isBinary: boolean): void {
    let msg: unknown;
    try {
      if (isBinary) throw new Error('binary');
      msg = JSON.parse(data.toString());
    } catch {
      send(ws, { type: 'error', message: 'expected a JSON text frame' });
      return;
    }
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
      send(ws, { type: 'error', message: 'expected a JSON object' });
      return;
    }
    const m = msg as Record<string, unknown>;

    switch (m.type) {
      case 'mount': {
        // Explicit room wins, then the djust url, then the socket's ?room=.
        const explicit =
          typeof m.room === 'string' || typeof m.room === 'number' ? validRoom(String(m.room)) : null;
        const room = explicit ?? roomFromUrl(m.url) ?? client.queryRoom;
        if (!room) {
          send(ws, { type: 'error', message: 'mount needs a room (room field, /game/{room}/ url or ?room=)' });
          return;
        }
        // A second mount is a djust live_redirect: leave the old room first.
        if (client.room !== room) {
          leaveRoom(ws, client);
          joinRoom(ws, client, room);
          broadcast(room, { type: 'presence', room, members: rooms.get(room)?.size ?? 0 }, ws);
        }
        // `moves`: the room's state, which a handoff carries to the next owner.
        send(ws, { type: 'mounted', room, backend: id, members: rooms.get(room)?.size ?? 0, moves: moves.count(room) });
        return;
      }
      case 'ping':
        // Allowed before mount: it is a keepalive and carries no room state.
        send(ws, { type: 'pong' });
        return;
      case 'event':
        if (client.room === null) {
          send(ws, { type: 'error', message: 'mount before sending events' });
          return;
        }
        // Closing (a handoff released the room): not taken, and the close tells the client so.
        if (ws.readyState !== WebSocket.OPEN) return;
        if (handoff.frozen(client.room)) {
          // Never dropped silently: the client sees it and sends it again once it is on the new owner.
          send(ws, ROOM_MOVING);
          return;
        }
        // `move` acknowledges the event: from here on it is in the room's state (and in any export).
        broadcast(client.room, { type: 'patch', room: client.room, from: client.sessionId, data: m.data ?? null, move: moves.record(client.room, client.sessionId, m.data).n });
        return;
      default:
        send(ws, {
          type: 'error',
          message: client.room === null ? 'mount first' : `unknown message type ${JSON.stringify(m.type ?? null)}`,
        });
    }
  }

  const wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  // Let the proxy (and tests) see which backend answered the upgrade too.
  wss.on('headers', (headers) => headers.push(`X-Backend-Id: ${id}`));

  wss.on('connection', (ws: WebSocket, req: IncomingMessage) => {
    const owner = ownerOf(req);
    if (owner && handoff.fenced(owner.room, owner.epoch)) {
      // The epoch fence: this room was handed off under that epoch; its sockets belong elsewhere now.
      ws.on('error', () => ws.terminate()); // a peer gone mid-close must not crash the process
      ws.close(CLOSE_SERVICE_RESTART, ROOM_MOVED);
      return;
    }
    if (owner) noteEpoch(owner.room, owner.epoch);
    const client: Client = {
      sessionId: randomBytes(12).toString('hex'),
      room: null,
      handshakeRoom: owner?.room ?? null,
      queryRoom: validRoom(splitUrl(req.url).query.get('room')),
    };
    clients.set(ws, client);
    setUnmounted(ws, client.handshakeRoom, true);
    ws.on('message', (data, isBinary) => onMessage(ws, client, data, isBinary));
    ws.on('close', () => {
      leaveRoom(ws, client);
      setUnmounted(ws, client.handshakeRoom, false);
      clients.delete(ws);
    });
    ws.on('error', () => {
      /* 'close' follows; nothing to add */
    });
    // djust's server speaks first.
    send(ws, { type: 'connect', session_id: client.sessionId, backend: id });
  });

  // --- HTTP ---------------------------------------------------------------------

  function text(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  function json(res: ServerResponse, status: number, value: unknown): void {
    const body = JSON.stringify(value);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  function echo(req: IncomingMessage, res: ServerResponse): void {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () =>
      json(res, 200, {
        id,
        method: req.method,
        url: req.url,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bodyBytes: bytes,
        bodySha256: hash.digest('hex'),
        remoteAddress: req.socket.remoteAddress ?? null,
      }),
    );
    req.on('error', () => res.destroy());
  }

  /**
   * A message roomgate delivers to a room held here (docs/push.md): handed as a `push` frame to
   * every socket of the room, those that mounted it and those whose handshake was routed by it and
   * that have not mounted (yet); the answer says how many (X-Roomgate-Sockets). 409 when the room is held under a newer epoch (the message is for a copy
   * that is gone) or the request names no room.
   */
  function receivePush(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= PUSH_MAX_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      if (size > PUSH_MAX_BYTES) return text(res, 413, 'too large\n');
      const body = Buffer.concat(chunks);
      const refusal = checkCall(req, body, req.headers['x-roomgate-fanout'] === '1' ? 'push-fanout' : 'push');
      if (refusal !== null) return text(res, 403, `push refused: ${refusal}\n`);
      if (req.headers['x-roomgate-fanout'] === '1') return receiveFanout(req, res, body);
      const owner = ownerOf(req);
      if (owner === null) return text(res, 409, 'no room\n');
      if (!noteEpoch(owner.room, owner.epoch)) return text(res, 409, 'this room is held under a newer epoch\n');
      let message: unknown;
      try {
        message = JSON.parse(body.toString('utf8'));
      } catch {
        return text(res, 400, 'not JSON\n');
      }
      const sockets = pushToRoom(owner.room, { type: 'push', room: owner.room, id: req.headers['x-roomgate-message-id'] ?? null, sender: req.headers['x-roomgate-sender'] ?? null, message });
      // The count roomgate passes on to the caller and its status page (docs/push.md).
      res.writeHead(204, { 'X-Roomgate-Sockets': String(sockets) });
      res.end();
    });
    req.on('error', () => res.destroy());
  }

  /** A fan-out: {rooms: [{room, epoch}], message}, one push frame per room held here under that epoch. */
  function receiveFanout(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    let parsed: { rooms?: unknown; message?: unknown };
    try {
      parsed = JSON.parse(body.toString('utf8')) as { rooms?: unknown; message?: unknown };
    } catch {
      return text(res, 400, 'not JSON\n');
    }
    if (!Array.isArray(parsed.rooms)) return text(res, 400, 'no rooms\n');
    let sockets = 0;
    for (const r of parsed.rooms as unknown[]) {
      const one = typeof r === 'object' && r !== null ? (r as { room?: unknown; epoch?: unknown }) : {};
      const room = validRoom(typeof one.room === 'string' ? one.room : null);
      if (room === null || !noteEpoch(room, Number(one.epoch ?? 0))) continue;
      sockets += pushToRoom(room, { type: 'push', room, id: req.headers['x-roomgate-message-id'] ?? null, sender: req.headers['x-roomgate-sender'] ?? null, message: parsed.message });
    }
    res.writeHead(204, { 'X-Roomgate-Sockets': String(sockets) });
    res.end();
  }

  function big(res: ServerResponse, kb: number): void {
    const chunk = Buffer.alloc(64 * 1024, 'roomgate-demo-big-body\n');
    let left = kb * 1024;
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': left });
    // Respect backpressure so a slow proxy really sees a streamed body.
    const pump = (): void => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  }

  /**
   * djust's HTTP fallback, minimal (what a page sends while its socket is closed): a POST to the
   * game page with `X-Djust-Event`, its JSON body the event's data; recorded as a move like a
   * socket's event and answered with the move number as the version (the room's, not a view's:
   * the demo has no per-view version). A frozen room refuses it as a socket's event is refused.
   */
  function httpEvent(req: IncomingMessage, res: ServerResponse, pathname: string): void {
    const game = /^\/game\/([^/]+)\/$/.exec(pathname);
    const room = game?.[1] ? validRoom(safeDecode(game[1])) : null;
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= HTTP_EVENT_MAX_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      if (room === null) return text(res, 404, 'not found\n');
      if (size > HTTP_EVENT_MAX_BYTES) return text(res, 413, 'event too large\n');
      let data: unknown = null;
      try {
        data = JSON.parse(Buffer.concat(chunks).toString() || 'null');
      } catch {
        return text(res, 400, 'expected a JSON body\n');
      }
      if (handoff.frozen(room)) return json(res, 503, ROOM_MOVING);
      const move = moves.record(room, 'http', data).n;
      broadcast(room, { type: 'patch', room, from: 'http', data, move });
      json(res, 200, { type: 'patch', room, from: 'http', data, move, version: move });
    });
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader('X-Backend-Id', id);
    const { pathname, query } = splitUrl(req.url);
    const isGet = req.method === 'GET' || req.method === 'HEAD';

    if (!hostAllowed(req)) {
      req.resume();
      return text(res, 400, 'Bad Request (400): Host not in allowed hosts\n');
    }
    if (pathname.startsWith('/_backend/echo')) return echo(req, res);
    if (req.method === 'POST' && pathname === '/_roomgate/push') return receivePush(req, res);
    if (handoff.serve(req, res, pathname)) return;
    if (req.method === 'POST' && req.headers['x-djust-event'] !== undefined) return httpEvent(req, res, pathname);

    // Other routes ignore the body; drain it so keep-alive connections stay usable.
    req.resume();

    const game = /^\/game\/([^/]+)\/$/.exec(pathname);
    const room = game?.[1] ? validRoom(safeDecode(game[1])) : null;
    if (isGet && room) {
      const prefixHeader = req.headers['x-forwarded-prefix'];
      const prefix =
        typeof prefixHeader === 'string' && FORWARDED_PREFIX_RE.test(prefixHeader)
          ? prefixHeader.replace(/\/+$/, '') // "/r/42/" and "/r/42" mean the same mount point
          : '';
      const body = renderGamePage(id, room, `${prefix}/ws/live/`);
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'Cache-Control': 'no-store',
        'Content-Security-Policy': `default-src 'none'; script-src ${PAGE_SCRIPT_CSP}; style-src ${PAGE_STYLE_CSP}; connect-src 'self' ws: wss:`,
      });
      res.end(body);
      return;
    }
    if (isGet && pathname === '/') {
      const body = renderIndexPage(id);
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'Cache-Control': 'no-store',
        'Content-Security-Policy': `default-src 'none'; style-src ${PAGE_STYLE_CSP}`,
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    if (isGet && pathname === '/healthz') {
      if (healthFailing) return text(res, 503, 'failing on purpose (SIGUSR2)\n');
      return text(res, healthzStatus, healthzStatus === 200 ? 'ok' : healthzStatus === 404 ? 'not found\n' : `status ${healthzStatus}\n`);
    }
    if (isGet && pathname === '/_backend/rooms') {
      // fromEntries defines own properties, so a room called "__proto__" is listed like any other.
      const counts = Object.fromEntries([...rooms].map(([name, members]) => [name, members.size]));
      return json(res, 200, { id, rooms: counts, sockets: clients.size });
    }
    const movesOf = /^\/_backend\/moves\/([^/]+)$/.exec(pathname);
    const movesRoom = movesOf?.[1] ? validRoom(safeDecode(movesOf[1])) : null;
    if (isGet && movesRoom !== null) {
      // A room's state as this process holds it (tests and the chaos runs count the moves kept).
      const state = moves.get(movesRoom);
      return json(res, 200, { id, room: movesRoom, epoch: epochs.get(movesRoom) ?? null, moves: state?.moves ?? 0, last: state?.last ?? [], frozen: handoff.frozen(movesRoom) });
    }
    if (isGet && pathname === '/_backend/slow') {
      const ms = intParam(query.get('ms'), SLOW_MAX_MS);
      const timer = setTimeout(() => json(res, 200, { id, sleptMs: ms }), ms);
      res.on('close', () => clearTimeout(timer)); // client or proxy gave up
      return;
    }
    if (isGet && pathname === '/_backend/big') return big(res, intParam(query.get('kb'), BIG_MAX_KB));
    text(res, 404, 'not found\n');
  }

  const server = http.createServer(onRequest);

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if (!hostAllowed(req)) {
      socket.end(`HTTP/1.1 400 Bad Request\r\nX-Backend-Id: ${id}\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nbad request\n`);
      return;
    }
    if (!splitUrl(req.url).pathname.endsWith('/ws/live/')) {
      socket.end(
        `HTTP/1.1 404 Not Found\r\nX-Backend-Id: ${id}\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });

  // --- ticks (benchmarks) --------------------------------------------------------

  let tick: NodeJS.Timeout | undefined;
  if (tickMs > 0) {
    tick = setInterval(() => {
      const t = Date.now();
      // Pad so the whole frame is ~TICK_FRAME_BYTES: a fixed, realistic frame size for throughput numbers.
      const bare = JSON.stringify({ type: 'tick', t, pad: '' }).length;
      const frame = { type: 'tick', t, pad: '.'.repeat(Math.max(0, TICK_FRAME_BYTES - bare)) };
      for (const room of rooms.keys()) broadcast(room, frame);
    }, tickMs);
  }

  // --- lifecycle ----------------------------------------------------------------

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= (async () => {
      if (tick) clearInterval(tick);
      handoff.close();
      const sockets = [...clients.keys()];
      const closed = sockets.map(
        (ws) => new Promise<void>((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve() : ws.once('close', () => resolve()))),
      );
      for (const ws of sockets) ws.close(CLOSE_SERVICE_RESTART, 'service restart');
      // Give clients a moment to answer the close handshake, then stop waiting:
      // ws's own close timeout (30 s) is far beyond our 2 s shutdown budget.
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(closed), new Promise<void>((r) => (grace = setTimeout(r, 1000)))]);
      clearTimeout(grace);
      for (const ws of clients.keys()) ws.terminate();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // keep-alive and in-flight (e.g. /slow) requests
      });
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    })();
    return closing;
  }

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      const addr = server.address();
      const port = typeof addr === 'object' && addr ? addr.port : (opts.port ?? 0);
      resolve({
        port,
        id,
        close,
        failHealth: (fail) => {
          healthFailing = fail;
        },
        get healthFailing() {
          return healthFailing;
        },
        setCallKeys: (keys) => {
          callKeys = keys;
        },
      });
    });
  });
}

// --- CLI ---------------------------------------------------------------------------

function parseArgs(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${arg}`);
    const eq = arg.indexOf('=');
    if (eq > 0) out[arg.slice(2, eq)] = arg.slice(eq + 1);
    else {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value`);
      out[arg.slice(2)] = value;
    }
  }
  return out;
}

function intArg(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max) throw new Error(`--${name} must be an integer 0..${max}, got ${value}`);
  return n;
}

function healthzStatusArg(value: string | undefined): number {
  const n = intArg('healthz-status', value, 200, 599);
  if (n < 200) throw new Error(`--healthz-status must be an HTTP status 200..599, got ${value}`);
  return n;
}

/** A held message that is an event ({"type": "event", "data": ...}), or null. */
function eventOf(m: string | Buffer): { data?: unknown } | null {
  if (typeof m !== 'string') return null;
  try {
    const msg = JSON.parse(m) as unknown;
    return typeof msg === 'object' && msg !== null && (msg as { type?: unknown }).type === 'event' ? (msg as { data?: unknown }) : null;
  } catch {
    return null;
  }
}

function badVersion(value: string): never {
  throw new Error(`--handoff-version must be 1 or 2, got ${value}`);
}

/** roomgate's handoff.path: an absolute path the hooks are served under. */
function handoffPathArg(value: string): string {
  if (!/^\/[A-Za-z0-9_.\/-]{1,200}$/.test(value)) throw new Error(`--handoff-path must be an absolute path, got ${value}`);
  return value;
}

/**
 * This backend's keys: ROOMGATE_BACKEND_KEYS, or the file ROOMGATE_BACKEND_KEYS_FILE names (keys
 * separated by commas or new lines). A text that is not a key stops the start with the reason.
 */
function callKeysOf(env: NodeJS.ProcessEnv): string[] {
  const text = env.ROOMGATE_BACKEND_KEYS_FILE ? readFileSync(env.ROOMGATE_BACKEND_KEYS_FILE, 'utf8') : (env.ROOMGATE_BACKEND_KEYS ?? '');
  const keys = text.split(/[,\n]/).map((s) => s.trim()).filter(Boolean);
  for (const k of keys) {
    const problem = keyProblem(k);
    if (problem) throw new Error(`ROOMGATE_BACKEND_KEYS: ${problem}`);
  }
  return keys;
}

async function main(): Promise<void> {
  let backend: DemoBackend;
  try {
    const args = parseArgs(process.argv.slice(2));
    backend = await startDemoBackend({
      port: intArg('port', args.port ?? process.env.PORT, 0, 65_535),
      // Empty env values count as unset.
      host: args.host ?? (process.env.HOST || '127.0.0.1'),
      id: args.id ?? (process.env.BACKEND_ID || `backend-${process.pid}`),
      tickMs: intArg('tick-ms', args['tick-ms'] ?? process.env.TICK_MS, 0, 3_600_000),
      healthzStatus: healthzStatusArg(args['healthz-status']),
      ...(args['allowed-hosts'] === undefined ? {} : { allowedHosts: args['allowed-hosts'].split(',').map((h) => h.trim()).filter(Boolean) }),
      ...(args['handoff-path'] === undefined ? {} : { handoffPath: handoffPathArg(args['handoff-path']) }),
      ...(args['handoff-version'] === undefined ? {} : { handoffVersion: args['handoff-version'] === '1' ? 1 : args['handoff-version'] === '2' ? 2 : badVersion(args['handoff-version']) }),
      callKeys: callKeysOf(process.env),
      ...(process.env.ROOMGATE_BACKEND_ID ? { callerId: process.env.ROOMGATE_BACKEND_ID } : {}),
    });
  } catch (err) {
    process.stderr.write(`demo-backend: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  // The one line a parent process waits for; nothing else is written to stdout.
  process.stdout.write(`${JSON.stringify({ event: 'listening', id: backend.id, port: backend.port })}\n`);

  const shutdown = (signal: string): void => {
    process.stderr.write(`demo-backend ${backend.id}: ${signal}, closing\n`);
    // Hard stop well inside the 2 s budget even if something hangs.
    setTimeout(() => process.exit(0), 1800).unref();
    backend.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  // A rotation: the keys file is read again, and the new set replaces the old.
  process.on('SIGHUP', () => {
    try {
      backend.setCallKeys(callKeysOf(process.env));
      process.stderr.write(`demo-backend ${backend.id}: SIGHUP, call keys read again\n`);
    } catch (err) {
      process.stderr.write(`demo-backend ${backend.id}: SIGHUP, the call keys stay as they were: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  });
  process.on('SIGUSR2', () => {
    backend.failHealth(!backend.healthFailing);
    process.stderr.write(`demo-backend ${backend.id}: SIGUSR2, /healthz ${backend.healthFailing ? 'fails (503)' : 'answers again'}\n`);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

function isMainModule(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return import.meta.url === pathToFileURL(entry).href;
  }
}

if (isMainModule()) void main();
