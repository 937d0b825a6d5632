// The fence on a `ws` server's handshakes (fence.ts) and the resume handshake of protocol version 2
// (docs/handoff.md, "Resume"): every upgrade the app routes to the kit is either refused before
// accept, accepted and closed at once (fenced: 1012), resumed (attached to the imported room with
// no greeting, continuing the socket's session from its state in the export), or handed to the
// app with the room, epoch and socket id roomgate routed it by. A socket of a room is in the room
// table until it ends: a release closes it, a push reaches it.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { CLOSE_SERVICE_RESTART, ownerOf, ROOM_MOVED, socketIdOf, verdict } from './fence.js';
import { field, type Verifier } from './proofs.js';
import type { RoomTable } from './rooms.js';
import type { SocketStates } from './socket-states.js';

/** What roomgate routed a socket by. */
export interface SocketInfo {
  /** null: the socket came without a room key. */
  readonly room: string | null;
  readonly epoch: number;
  /** X-Roomgate-Socket (protocol version 2), or null. */
  readonly socketId: string | null;
}

/** A socket roomgate resumed here: its room was imported with its state (`exportSocket`'s value). */
export interface ResumedSocket extends SocketInfo {
  readonly room: string;
  readonly socketId: string;
  readonly handoffId: string;
  readonly state: unknown;
}

export interface UpgradeOptions {
  readonly wss: WebSocketServer;
  readonly rooms: RoomTable<WebSocket>;
  readonly verify: Verifier;
  readonly resumable: SocketStates;
  /** Whether this app resumes sockets (it gave exportSocket and resumeSocket). */
  readonly resume: boolean;
  /** The socket ids of the room's sockets, for their states in an export. */
  readonly ids: WeakMap<WebSocket, string>;
  /** Refuse a socket under an older epoch than the room is held under (403); false: accept it. */
  readonly refuseOlder: boolean;
  onSocket(ws: WebSocket, req: IncomingMessage, info: SocketInfo): void;
  onResume(ws: WebSocket, req: IncomingMessage, resumed: ResumedSocket): void;
}

/** Refuses a handshake before accept, with a status and a short reason (never anything internal). */
function refuse(socket: Duplex, status: 400 | 403 | 409, text: string): void {
  const words = { 400: 'Bad Request', 403: 'Forbidden', 409: 'Conflict' }[status];
  const body = `${text}\n`;
  socket.end(`HTTP/1.1 ${status} ${words}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** Keeps an accepted socket in its room's set until it ends. */
function track(o: UpgradeOptions, ws: WebSocket, room: string | null, socketId: string | null): void {
  if (socketId !== null) o.ids.set(ws, socketId);
  if (room === null) return;
  o.rooms.join(room, ws);
  ws.once('close', () => o.rooms.leave(room, ws));
}

/** The resume handshake: checked, then attached; or the refusal that leaves the socket to the `messages` hook. */
function resumeSocket(o: UpgradeOptions, req: IncomingMessage, socket: Duplex, head: Buffer, handoffId: string): void {
  const { room, epoch } = ownerOf(req.headers);
  const socketId = socketIdOf(req.headers);
  const named = field(req.headers, 'x-roomgate-message-id');
  if (room === null || socketId === null || epoch === 0 || (named !== undefined && named !== handoffId)) return refuse(socket, 400, 'a resume names its room, epoch, socket and handoff');
  const refused = o.verify(req.headers, Buffer.from(socketId, 'utf8'), 'handoff-resume-socket', { id: handoffId });
  if (refused !== null) return refuse(socket, 403, `resume refused: ${refused}`);
  if (!o.resume) return refuse(socket, 409, 'this backend does not resume sockets');
  const held = o.rooms.get(room);
  if (held === undefined || held.epoch !== epoch || held.frozenBy !== null || o.rooms.fenced(room, epoch)) return refuse(socket, 409, 'this room is not held here under that epoch');
  const state = o.resumable.take(room, socketId, handoffId, epoch);
  if (state === null) return refuse(socket, 409, 'no state of this socket from that handoff');
  o.wss.handleUpgrade(req, socket, head, (ws) => {
    track(o, ws, room, socketId);
    o.onResume(ws, req, { room, epoch, socketId, handoffId, state: state.state });
  });
}

/** Handles one upgrade the app routed to its `ws` server (noServer: true). */
export function upgrade(o: UpgradeOptions, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  socket.on('error', () => socket.destroy()); // a peer gone mid-handshake must not crash the process
  const handoffId = field(req.headers, 'x-roomgate-resume');
  if (handoffId !== undefined) return resumeSocket(o, req, socket, head, handoffId);
  const info: SocketInfo = { ...ownerOf(req.headers), socketId: socketIdOf(req.headers) };
  const seen = verdict(o.rooms, info);
  // Routed before a newer placement of the room: refused before accept (its client retries and is routed anew).
  if (seen === 'older' && o.refuseOlder) return refuse(socket, 403, 'this room is held here under a newer placement');
  o.wss.handleUpgrade(req, socket, head, (ws) => {
    if (seen === 'moved') {
      // The epoch fence: the room was handed off under that epoch; its sockets belong elsewhere now.
      ws.on('error', () => ws.terminate());
      ws.close(CLOSE_SERVICE_RESTART, ROOM_MOVED);
      return;
    }
    track(o, ws, info.room, info.socketId);
    o.onSocket(ws, req, info);
  });
}
