// The routes of roomgate's own pages (rendered by src/pages/), on both ports. The status page and
// its stream are always on the admin port (its "/" leads there), and on the public port as
// `status.public` says: 'off' (not served there: the path goes to the app like any other), 'token'
// (the admin token, as HTTP Basic password, which a browser prompts for, or as a bearer token),
// 'open'. The public port never shows backend URLs. The lobby page and "New room" are on the
// public port while api.enabled and api.publicReads; the page lists listed rooms only, without
// backend ids (src/shared-data/listing.ts). Read-only: GET and HEAD, anything else 405.
import { requestAddress, throttledVerdict, type AuthThrottle } from '../http/auth-throttle.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TokenCheck } from '../http/auth.js';
import { Errors, type HttpError } from '../http/errors.js';
import { pageHeaders, sendText as rawText } from '../http/replies.js';
import { streamsFull, type StreamSlots } from '../http/stream-slots.js';
import type { RenderedPage } from '../pages/html.js';
import { DEFAULT_BOARD, LOBBY_PATH, NEW_ROOM_PATH, loadLobby, newRoomName, renderLobbyPage, roomHref, roomPathTemplate } from '../pages/lobby-page.js';
import { STATUS_PATH, STATUS_STREAM_PATH, collectStatus, renderStatusPage, type StatusView } from '../pages/status-page.js';
import type { Listing } from '../shared-data/listing.js';
import type { SharedDataStore } from '../shared-data/store.js';
import { API_PREFIX } from './api-routes.js';
import { BOARD_PATTERN } from './api-schemas.js';
import { sendHttpError, sendText, type ControlApp, type RouteConfig } from './app.js';
import { StatusStream } from './status-stream.js';

export type StatusAccess = 'off' | 'token' | 'open';
export const STATUS_REALM = 'roomgate status';

/** The status page's paths (the page with and without its slash, and its stream). */
export const STATUS_PATHS: readonly string[] = ['/_roomgate', STATUS_PATH, STATUS_STREAM_PATH];
/** The lobby page's paths. */
export const LOBBY_PATHS: readonly string[] = [LOBBY_PATH, `${LOBBY_PATH}/`, NEW_ROOM_PATH];

const READ_ONLY = 'read-only: GET or HEAD\n';
const BOARD_MESSAGE = 'board: one leaderboard name of 1 to 64 characters from A-Z a-z 0-9 _ . : -';

export interface StatusRoutesOptions {
  readonly view: StatusView;
  /** Backend URLs and their events: the admin port only. */
  readonly internal: boolean;
  /** This port's event stream slots (api.maxStreams). */
  readonly slots: StreamSlots;
  /** How often the stream compares the snapshot (default 1000 ms). */
  readonly intervalMs?: number;
  /** The token check of status.public: 'token' (null: open). */
  readonly token?: TokenCheck | null;
  /** Failed token attempts per client address (auth.maxFailures); null: not limited. */
  readonly throttle?: AuthThrottle | null;
  readonly prettyJson: boolean;
}

/** Registers the status page, its stream and (admin port) "/" leading there; returns the stream to close at shutdown. */
export function registerStatusRoutes(app: ControlApp, o: StatusRoutesOptions): StatusStream {
  const stream = new StatusStream({
    snapshot: () => collectStatus(o.view, { internal: o.internal }),
    intervalMs: o.intervalMs ?? 1000,
    pingMs: 15_000,
    retryMs: 2_000,
    maxBufferedBytes: 1 << 20,
  });
  const token = o.token ?? null;
  const config: RouteConfig = { kind: 'page', ...(token ? { authorize: (req: FastifyRequest) => statusAuth(token, o.throttle ?? null, req) } : {}) };
  const page = (_req: FastifyRequest, reply: FastifyReply): void => {
    sendPage(reply, renderStatusPage(collectStatus(o.view, { internal: o.internal }), { internal: o.internal }));
  };
  for (const url of ['/_roomgate', STATUS_PATH]) app.all(url, { config }, readOnly(page));
  app.all(
    STATUS_STREAM_PATH,
    { config },
    readOnly((req, reply) => {
      if (req.method === 'HEAD') return void reply.code(200).headers({ 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store' }).send();
      // In the one error shape, as the lobby stream's 503.
      if (!o.slots.take(reply.raw)) return sendHttpError(reply, streamsFull(o.slots.max), o.prettyJson, false);
      reply.hijack();
      if (!stream.open(req.raw, reply.raw)) {
        const e = Errors.unavailable();
        rawText(reply.raw, e.status, `${e.message}\n`, e.headers);
      }
    }),
  );
  if (o.internal) {
    app.all('/', { config: { kind: 'page' } }, readOnly((_req, reply) => sendText(reply, 302, `see ${STATUS_PATH}\n`, { Location: STATUS_PATH })));
  }
  return stream;
}

export interface LobbyRoutesOptions {
  readonly sharedData: SharedDataStore;
  /** Which rooms the page may name (api.listRooms; metadata lists the others). */
  readonly listing: Listing;
  /** The gateway's room key validator (names made by "New room" must pass it). */
  readonly validateRoom: (room: string) => boolean;
  /** room.pagePaths and room.pathPrefix: the lobby links to a room's page through the first page path. */
  readonly roomPagePaths: readonly string[];
  readonly roomPathPrefix: string;
}

export function registerLobbyRoutes(app: ControlApp, o: LobbyRoutesOptions): void {
  const roomPath = roomPathTemplate(o.roomPagePaths, o.roomPathPrefix);
  const config: RouteConfig = { kind: 'page' };
  const querystring = z.object({
    board: z
      .string({ error: BOARD_MESSAGE })
      .optional()
      .refine((b) => b === undefined || b === '' || BOARD_PATTERN.test(b), { error: BOARD_MESSAGE }),
  });
  for (const url of [LOBBY_PATH, `${LOBBY_PATH}/`]) {
    app.all(
      url,
      { config, schema: { querystring } },
      readOnly(async (req, reply) => {
        const data = await loadLobby(o.sharedData, o.listing, (req.query as z.output<typeof querystring>).board || DEFAULT_BOARD);
        sendPage(reply, renderLobbyPage(data, { roomPath, apiPrefix: API_PREFIX }));
      }),
    );
  }
  // "New room": a fresh name, and off to its page (a plain form, so it works without JavaScript).
  app.all(
    NEW_ROOM_PATH,
    { config },
    readOnly((_req, reply) => {
      const room = newRoomName(o.validateRoom);
      const href = room === null ? null : roomHref(roomPath, room);
      if (href === null) throw Errors.internal('no generated room name matches room.pattern; name the room yourself');
      sendText(reply, 303, `see ${href}\n`, { Location: href });
    }),
  );
}

/** status.public 'token': Basic (any user name, the admin token as password) or Bearer; 401 prompts the browser. */
function statusAuth(token: TokenCheck, throttle: AuthThrottle | null, req: FastifyRequest): HttpError | null {
  if (!token.configured) return Errors.forbidden('status.public is "token" but no admin.token is configured: nobody can be let in');
  const verdict = throttledVerdict(token, throttle, 'status', req.headers.authorization, requestAddress(req.raw));
  if (verdict === 'ok') return null;
  if (typeof verdict !== 'string') return verdict;
  return Errors.unauthorized('the status page needs the admin token: any user name, the token as password (or Authorization: Bearer <token>)', {
    headers: { 'WWW-Authenticate': `Basic realm="${STATUS_REALM}", charset="UTF-8"` },
  });
}

type Handler<R extends FastifyRequest> = (req: R, reply: FastifyReply) => void | Promise<void>;

/** GET and HEAD reach the handler; anything else gets 405. */
function readOnly<R extends FastifyRequest>(h: Handler<R>): (req: R, reply: FastifyReply) => Promise<void> {
  return async (req, reply) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendText(reply, 405, READ_ONLY, { Allow: 'GET, HEAD' });
    await h(req, reply);
  };
}

function sendPage(reply: FastifyReply, page: RenderedPage): void {
  reply.code(200).headers(pageHeaders(page.csp)).send(page.html);
}
