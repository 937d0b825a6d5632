// The demo's game over WebSockets, shaped like a djust app: the server greets (`connect`), the
// client mounts a room (`mount` -> `mounted` with the room's `moves`), each `event` is a move of
// the room (`patch` to every member, numbered), and every frame of the view a page gets carries
// its `version` (1 at the mount, then 2, ...: djust's client follows it). The version is the page
// view's, kept in the room's state (room-moves.ts) as a djust app keeps it in the page's session:
// a page is its `djust_session` cookie, which the browser sends with the socket's handshake and
// with djust's HTTP fallback alike, or, without the cookie, its socket. Everything roomgate-specific
// is the backend kit's (src/backend-kit): the fence, the room table, pushes, the handoff hooks and
// the resume.
// This file gives the kit the app's parts: the room's moves as a blob and back, a socket's own
// state (its session, room and version) for a resume, held events applied, and push delivery.
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { WebSocket } from 'ws';
import type { RawData } from 'ws';
import { CLOSE_SERVICE_RESTART, CLOSE_WRONG_ROOM, mountRefusal, type BackendKit, type PushMeta, type ResumedSocket, type SocketInfo } from '../../src/backend-kit/index.js';
import { PAGE_KEY_MAX_LENGTH, type MoveStore } from './room-moves.js';

/** What a client's event gets while its room is frozen by a handoff: send it again after the reconnect. */
export const ROOM_MOVING = { type: 'error', error: 'room-moving', retry: true, message: 'the room is moving to another server: send it again after the reconnect' } as const;
export const MAX_ROOM_LENGTH = 128;
const SESSION_MAX_LENGTH = 64;
/** The page session cookie djust's pages carry (as examples/djust-push does): it names the page's view. */
export const PAGE_COOKIE = 'djust_session';
const COOKIE_VALUE_MAX_LENGTH = 4096;

interface Client {
  sessionId: string;
  /** The room the socket mounted. */
  room: string | null;
  /** The room roomgate routed the handshake by (X-Roomgate-Room): a mount of another room is refused. */
  readonly routed: string | null;
  /** `room` query parameter of the socket URL: last-resort room for mount. */
  readonly queryRoom: string | null;
  /** The page the socket belongs to (pageKey: its session cookie, or the socket itself). */
  readonly page: string;
  /** The last version of the view this socket was sent. */
  version: number;
}

/** A socket's own state in an export: what its session goes on from after a resume. */
interface SocketState {
  readonly session: string;
  readonly room: string | null;
  readonly version: number;
  /** Its page key (absent in the state of an older demo: the socket is its own page then). */
  readonly page?: string;
}

/**
 * The page a request or socket comes from: its `djust_session` cookie, hashed (the room's state,
 * which a handoff carries through roomgate, never holds a session id itself); null without one.
 */
export function pageKey(cookieHeader: string | string[] | undefined): string | null {
  const header = Array.isArray(cookieHeader) ? cookieHeader.join('; ') : (cookieHeader ?? '');
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== PAGE_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    if (value.length === 0 || value.length > COOKIE_VALUE_MAX_LENGTH) return null;
    return `c:${createHash('sha256').update(value).digest('base64url').slice(0, 24)}`;
  }
  return null;
}

export function validRoom(room: string | null | undefined): string | null {
  return room && room.length <= MAX_ROOM_LENGTH ? room : null;
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** Room from a djust mount url (location.pathname, possibly behind a /r/{room} prefix). */
function roomFromUrl(url: unknown): string | null {
  if (typeof url !== 'string') return null;
  const m = /\/game\/([^/?#]+)\//.exec(url);
  return m?.[1] ? validRoom(safeDecode(m[1])) : null;
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

function stateOf(value: unknown): SocketState | null {
  const s = typeof value === 'object' && value !== null ? (value as { session?: unknown; room?: unknown; version?: unknown; page?: unknown }) : {};
  if (typeof s.session !== 'string' || s.session.length === 0 || s.session.length > SESSION_MAX_LENGTH) return null;
  if (!(s.room === null || typeof s.room === 'string') || !Number.isSafeInteger(s.version) || (s.version as number) < 0) return null;
  if (!(s.page === undefined || (typeof s.page === 'string' && s.page.length > 0 && s.page.length <= PAGE_KEY_MAX_LENGTH))) return null;
  const page = typeof s.page === 'string' ? s.page : `s:${s.session}`;
  return { session: s.session, room: s.room === null ? null : validRoom(s.room), version: s.version as number, page };
}

/** The game of backend `id` over the room moves `moves`; `kit()` is the backend kit it runs on. */
export class Game {
  readonly clients = new Map<WebSocket, Client>();
  /** The mounted sockets of each room (what /_backend/rooms counts). */
  readonly members = new Map<string, Set<WebSocket>>();

  constructor(
    private readonly id: string,
    private readonly moves: MoveStore,
    private readonly kit: () => BackendKit,
  ) {}

  private send(ws: WebSocket, msg: unknown): void {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
  }

  /** A frame of the view: its page's next version (taken only for a frame really sent). */
  private sendView(ws: WebSocket, msg: Record<string, unknown>): void {
    const c = this.clients.get(ws);
    if (c === undefined || c.room === null || ws.readyState !== WebSocket.OPEN) return;
    c.version = this.moves.nextVersion(c.room, c.page, c.version);
    ws.send(JSON.stringify({ ...msg, version: c.version }));
  }

  broadcast(room: string, msg: unknown, except?: WebSocket): void {
    const frame = JSON.stringify(msg); // serialise once, not per member
    for (const ws of this.members.get(room) ?? []) if (ws !== except && ws.readyState === WebSocket.OPEN) ws.send(frame);
  }

  private patch(room: string, from: string, data: unknown): void {
    const move = this.moves.record(room, from, data).n;
    for (const ws of this.members.get(room) ?? []) this.sendView(ws, { type: 'patch', room, from, data: data ?? null, move });
  }

  /**
   * djust's HTTP fallback (an event POSTed to the page while its socket is closed): recorded as a
   * move like a socket's event, and answered with the version that follows the last one the room
   * sent to that page (`page`: its pageKey). A page the room has no view of (no cookie, or one
   * this room never saw) is never refused, which would lose the click: it gets a fresh view, at 1.
   * Null while a handoff froze the room: refused as a socket's event is (roomgate holds page
   * requests of a room in handoff, so none reaches a frozen owner through it).
   */
  httpEvent(room: string, data: unknown, page: string | null): { move: number; version: number } | null {
    if (this.kit().rooms.frozen(room)) return null;
    const move = this.moves.record(room, 'http', data).n;
    for (const ws of this.members.get(room) ?? []) this.sendView(ws, { type: 'patch', room, from: 'http', data: data ?? null, move });
    return { move, version: page === null ? 1 : this.moves.nextVersion(room, page) };
  }

  private leave(ws: WebSocket, c: Client): void {
    const room = c.room;
    if (room === null) return;
    c.room = null;
    // A page without the cookie was this socket only: no later request can name its view.
    if (c.page.startsWith('s:')) this.moves.forgetView(room, c.page);
    if (c.routed === null) this.kit().rooms.leave(room, ws);
    const set = this.members.get(room);
    if (!set) return;
    set.delete(ws);
    if (set.size === 0) this.members.delete(room); // empty rooms must vanish from /_backend/rooms
    else this.broadcast(room, { type: 'presence', room, members: set.size });
  }

  private join(ws: WebSocket, c: Client, room: string): void {
    // A socket routed by its room is in the kit's table already; one that came directly joins it
    // at its mount, so a release closes it and a push reaches it.
    if (c.routed === null) this.kit().rooms.join(room, ws);
    let set = this.members.get(room);
    if (!set) this.members.set(room, (set = new Set()));
    set.add(ws);
    c.room = room;
    this.broadcast(room, { type: 'presence', room, members: set.size }, ws);
  }

  private mount(ws: WebSocket, c: Client, m: Record<string, unknown>): void {
    // Explicit room wins, then the djust url, then the socket's ?room=.
    const explicit = typeof m.room === 'string' || typeof m.room === 'number' ? validRoom(String(m.room)) : null;
    const room = explicit ?? roomFromUrl(m.url) ?? c.queryRoom;
    if (!room) return this.send(ws, { type: 'error', message: 'mount needs a room (room field, /game/{room}/ url or ?room=)' });
    // The fence: a socket routed for one room never mounts another here (once, 4400: the page stops).
    const refusal = mountRefusal(c.routed, room, false);
    if (refusal !== null) {
      this.send(ws, { type: 'error', error: 'wrong-room', message: refusal });
      ws.close(CLOSE_WRONG_ROOM, 'wrong room');
      return;
    }
    // A second mount is a djust live_redirect (on a socket that came without a room key): leave the old room first.
    if (c.room !== room) {
      this.leave(ws, c);
      this.join(ws, c, room);
    }
    // `moves`: the room's state, which a handoff carries to the next owner. A mount starts the
    // page's view again at version 1, as djust's does (its client takes the mount's as given).
    if (ws.readyState !== WebSocket.OPEN) return;
    c.version = this.moves.startView(room, c.page);
    ws.send(JSON.stringify({ type: 'mounted', room, backend: this.id, members: this.members.get(room)?.size ?? 0, moves: this.moves.count(room), version: c.version }));
  }

  private event(ws: WebSocket, c: Client, m: Record<string, unknown>): void {
    if (c.room === null) return this.send(ws, { type: 'error', message: 'mount before sending events' });
    // Closing (a handoff released the room): not taken, and the close tells the client so.
    if (ws.readyState !== WebSocket.OPEN) return;
    // Never dropped silently: the client sees it and sends it again once it is on the new owner.
    if (this.kit().rooms.frozen(c.room)) return this.send(ws, ROOM_MOVING);
    // `move` acknowledges the event: from here on it is in the room's state (and in any export).
    this.patch(c.room, c.sessionId, m.data);
  }

  private onMessage(ws: WebSocket, c: Client, data: RawData, isBinary: boolean): void {
    let msg: unknown;
    try {
      if (isBinary) throw new Error('binary');
      msg = JSON.parse(data.toString());
    } catch {
      return this.send(ws, { type: 'error', message: 'expected a JSON text frame' });
    }
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) return this.send(ws, { type: 'error', message: 'expected a JSON object' });
    const m = msg as Record<string, unknown>;
    if (m.type === 'mount') return this.mount(ws, c, m);
    // Allowed before mount: it is a keepalive and carries no room state.
    if (m.type === 'ping') return this.send(ws, { type: 'pong' });
    if (m.type === 'event') return this.event(ws, c, m);
    this.send(ws, { type: 'error', message: c.room === null ? 'mount first' : `unknown message type ${JSON.stringify(m.type ?? null)}` });
  }

  private serve(ws: WebSocket, c: Client): void {
    this.clients.set(ws, c);
    ws.on('message', (data, isBinary) => this.onMessage(ws, c, data, isBinary));
    ws.on('close', () => {
      this.leave(ws, c);
      this.clients.delete(ws);
    });
    ws.on('error', () => {
      /* 'close' follows; nothing to add */
    });
  }

  // --- the app's parts the backend kit calls ------------------------------------

  readonly onSocket = (ws: WebSocket, req: IncomingMessage, info: SocketInfo): void => {
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const sessionId = randomBytes(12).toString('hex');
    const c: Client = { sessionId, room: null, routed: info.room, queryRoom: validRoom(query.get('room')), page: pageKey(req.headers.cookie) ?? `s:${sessionId}`, version: 0 };
    this.serve(ws, c);
    // djust's server speaks first.
    this.send(ws, { type: 'connect', session_id: c.sessionId, backend: this.id });
  };

  /** A socket roomgate moved here with its room: its session goes on, with no greeting and no `mounted`. */
  readonly resumeSocket = (ws: WebSocket, _req: IncomingMessage, r: ResumedSocket): void => {
    const state = stateOf(r.state);
    if (state === null || (state.room !== null && state.room !== r.room)) return ws.close(CLOSE_SERVICE_RESTART, 'state not resumable');
    const c: Client = { sessionId: state.session, room: null, routed: r.room, queryRoom: null, page: state.page ?? `s:${state.session}`, version: state.version };
    this.serve(ws, c);
    if (state.room !== null) {
      // The page's view came in the room's state; a state from an older demo carried the socket's only.
      this.moves.sawVersion(state.room, c.page, state.version);
      this.join(ws, c, state.room);
    }
    // The demo's own word to its page (not djust's: a djust client gets nothing on a resume): the
    // page says the room moved here without a disconnect. It carries no version: the view's go on.
    this.send(ws, { type: 'resumed', backend: this.id, room: state.room });
  };

  readonly exportSocket = (_room: string, ws: WebSocket): SocketState | undefined => {
    const c = this.clients.get(ws);
    return c === undefined ? undefined : { session: c.sessionId, room: c.room, version: c.version, page: c.page };
  };

  /**
   * The held socket's events, in order, as if it had sent them here: each one a move in the room,
   * patched to the room's sockets here (each page's next version, on a frame it gets). The sending
   * page's own socket is closing on the old owner: it is sent nothing, so its version is not taken
   * and its next answer (a mount, or the HTTP fallback's) follows the last one it saw.
   */
  readonly applyMessages = (room: string, socketId: string, messages: readonly (string | Buffer)[]): void => {
    for (const m of messages) {
      const msg = eventOf(m);
      if (msg !== null) this.patch(room, `held:${socketId}`, msg.data);
    }
  };

  /** A push, as a `push` frame to every socket of the room: mounted, or routed there and not mounted yet. */
  readonly deliver = (room: string, message: unknown, meta: PushMeta): number => {
    const frame = JSON.stringify({ type: 'push', room, id: meta.id || null, sender: meta.sender || null, message });
    let n = 0;
    for (const ws of this.kit().rooms.sockets(room)) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      ws.send(frame);
      n++;
    }
    return n;
  };

  /**
   * The room's state was dropped here (a release handed it to another process): its sockets, closing
   * now, are members of nothing here, and /_backend/rooms stops listing the room. Without this a
   * resumed socket, on its new owner from its resume's 101 on, showed the room on two processes
   * until the old socket's close reached this one (the djust chaos row's split watcher saw it).
   */
  dropped(room: string): void {
    for (const ws of this.members.get(room) ?? []) {
      const c = this.clients.get(ws);
      if (c !== undefined) c.room = null;
    }
    this.members.delete(room);
  }

  /** Whether the room has sockets here (mounted or routed by it). */
  live(room: string): boolean {
    return this.members.has(room) || this.kit().rooms.sockets(room).length > 0;
  }
}
