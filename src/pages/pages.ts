// Which page answers which request, and who may see it. The status page and its stream are always
// on the admin port, and on the public port as `status.public` says: 'off' (not served there: the
// path goes to the app like any other), 'token' (the admin token, as HTTP Basic password, which a
// browser prompts for, or as a bearer token), 'open'. The public port never shows backend URLs.
// The lobby page is on the public port while api.enabled. Read-only: GET and HEAD only.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TokenCheck } from '../http/auth.js';
import { sendStreamsFull, type StreamSlots } from '../http/stream-slots.js';
import type { SharedDataStore } from '../shared-data/store.js';
import type { Logger } from '../observability/logger.js';
import { API_PREFIX, BOARD_PATTERN } from '../api/public-api.js';
import { sendPage, sendText } from './html.js';
import { DEFAULT_BOARD, LOBBY_PATH, NEW_ROOM_PATH, loadLobby, newRoomName, renderLobbyPage, roomHref, roomPathTemplate } from './lobby-page.js';
import { STATUS_PATH, STATUS_STREAM_PATH, collectStatus, renderStatusPage, type StatusView } from './status-page.js';
import { StatusStream } from './status-stream.js';

export type StatusAccess = 'off' | 'token' | 'open';

export interface PagesOptions {
  readonly view: StatusView;
  readonly sharedData: SharedDataStore;
  /** status.public */
  readonly statusPublic: StatusAccess;
  /** admin.token ('' = nobody passes the 'token' check). */
  readonly adminToken: string;
  /** Serve the lobby page (api.enabled). */
  readonly lobby: boolean;
  /** The gateway's room key validator (names made by "New room" must pass it). */
  readonly validateRoom: (room: string) => boolean;
  /** room.pagePaths and room.pathPrefix: the lobby links to a room's page through the first page path. */
  readonly roomPagePaths: readonly string[];
  readonly roomPathPrefix: string;
  readonly logger: Logger;
  /** Status stream: how often the snapshot is compared (default 1000 ms). */
  readonly statusIntervalMs?: number;
  /** The public port's event stream slots (api.maxStreams, shared with the lobby streams). */
  readonly publicStreams: StreamSlots;
  /** The admin port's event stream slots (api.maxStreams of its own). */
  readonly adminStreams: StreamSlots;
}

const STATUS_PATHS = new Set(['/_roomgate', STATUS_PATH]);
const LOBBY_PATHS = new Set([LOBBY_PATH, `${LOBBY_PATH}/`]);
export const STATUS_REALM = 'roomgate status';

export class Pages {
  private readonly adminStream: StatusStream;
  private readonly publicStream: StatusStream;
  private readonly adminToken: TokenCheck;
  private readonly roomPath: string;

  constructor(private readonly o: PagesOptions) {
    this.roomPath = roomPathTemplate(o.roomPagePaths, o.roomPathPrefix);
    const stream = (internal: boolean): StatusStream =>
      new StatusStream({
        snapshot: () => collectStatus(o.view, { internal }),
        intervalMs: o.statusIntervalMs ?? 1000,
        pingMs: 15_000,
        retryMs: 2_000,
        maxBufferedBytes: 1 << 20,
      });
    this.adminStream = stream(true);
    this.publicStream = stream(false);
    this.adminToken = new TokenCheck([o.adminToken]);
  }

  /** Open status streams on both ports. */
  get streams(): number {
    return this.adminStream.size + this.publicStream.size;
  }

  /** Admin port: the status page and stream, and "/" leads to it. False: not a page path. */
  handleAdmin(req: IncomingMessage, res: ServerResponse): boolean {
    const path = pathOf(req.url);
    if (path === '/') {
      if (!readOnly(req, res)) return true;
      sendText(res, 302, `see ${STATUS_PATH}\n`, { Location: STATUS_PATH });
      return true;
    }
    if (STATUS_PATHS.has(path) || path === STATUS_STREAM_PATH) {
      this.status(req, res, path, true);
      return true;
    }
    return false;
  }

  /** Public port: the status page as status.public allows, the lobby while enabled. False: proxy it. */
  handlePublic(req: IncomingMessage, res: ServerResponse): boolean {
    if (!req.url?.startsWith('/_roomgate')) return false; // every proxied request passes here
    const path = pathOf(req.url);
    if (STATUS_PATHS.has(path) || path === STATUS_STREAM_PATH) {
      if (this.o.statusPublic === 'off') return false;
      if (this.o.statusPublic === 'token' && !this.authorized(req, res)) return true;
      this.status(req, res, path, false);
      return true;
    }
    if (this.o.lobby && (LOBBY_PATHS.has(path) || path === NEW_ROOM_PATH)) {
      if (!readOnly(req, res)) return true;
      if (path === NEW_ROOM_PATH) this.newRoom(req, res);
      else this.lobbyPage(req, res).catch((err: unknown) => this.fail(res, err));
      return true;
    }
    return false;
  }

  /** Ends every status stream (shutdown). */
  close(): void {
    this.adminStream.close();
    this.publicStream.close();
  }

  private status(req: IncomingMessage, res: ServerResponse, path: string, internal: boolean): void {
    if (!readOnly(req, res)) return;
    if (path === STATUS_STREAM_PATH) {
      if (req.method === 'HEAD') return sendText(res, 200, '', { 'Content-Type': 'text/event-stream; charset=utf-8' });
      const slots = internal ? this.o.adminStreams : this.o.publicStreams;
      if (!slots.take(res)) return sendStreamsFull(res, slots.max);
      const stream = internal ? this.adminStream : this.publicStream;
      if (!stream.open(req, res)) sendText(res, 503, 'shutting down\n', { 'Retry-After': '5' });
      return;
    }
    try {
      const snap = collectStatus(this.o.view, { internal });
      sendPage(res, 200, renderStatusPage(snap, { internal }), req.method === 'HEAD');
    } catch (err) {
      this.fail(res, err);
    }
  }

  private async lobbyPage(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const query = new URLSearchParams(queryOf(req.url));
    const boards = query.getAll('board');
    const board = boards[0] || DEFAULT_BOARD;
    if (boards.length > 1 || !BOARD_PATTERN.test(board)) {
      return sendText(res, 400, 'board: one leaderboard name of 1 to 64 characters from A-Z a-z 0-9 _ . : -\n');
    }
    const data = await loadLobby(this.o.sharedData, board);
    sendPage(res, 200, renderLobbyPage(data, { roomPath: this.roomPath, apiPrefix: API_PREFIX }), req.method === 'HEAD');
  }

  /** "New room": a fresh name, and off to its page (a plain form, so it works without JavaScript). */
  private newRoom(req: IncomingMessage, res: ServerResponse): void {
    const room = newRoomName(this.o.validateRoom);
    const href = room === null ? null : roomHref(this.roomPath, room);
    if (href === null) return sendText(res, 500, 'no generated room name matches room.pattern; name the room yourself\n');
    sendText(res, 303, `see ${href}\n`, { Location: href });
  }

  /** Token mode: Basic (any user name, the admin token as password) or Bearer; 401 prompts the browser. */
  private authorized(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.adminToken.configured) {
      sendText(res, 403, 'status.public is "token" but no admin.token is configured: nobody can be let in\n');
      return false;
    }
    if (this.adminToken.accepts(req.headers.authorization)) return true;
    sendText(res, 401, 'the status page needs the admin token: any user name, the token as password (or Authorization: Bearer <token>)\n', {
      'WWW-Authenticate': `Basic realm="${STATUS_REALM}", charset="UTF-8"`,
    });
    return false;
  }

  private fail(res: ServerResponse, err: unknown): void {
    this.o.logger.error({ err: err instanceof Error ? err.message : String(err) }, 'page failed');
    if (res.headersSent) res.destroy();
    else sendText(res, 500, 'internal error\n');
  }
}

/** GET and HEAD pass; anything else gets 405 (and false). */
function readOnly(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method === 'GET' || req.method === 'HEAD') return true;
  sendText(res, 405, 'read-only: GET or HEAD\n', { Allow: 'GET, HEAD' });
  return false;
}

function pathOf(url: string | undefined): string {
  const u = url ?? '/';
  const q = u.indexOf('?');
  return q < 0 ? u : u.slice(0, q);
}

function queryOf(url: string | undefined): string {
  const u = url ?? '';
  const q = u.indexOf('?');
  return q < 0 ? '' : u.slice(q + 1);
}
