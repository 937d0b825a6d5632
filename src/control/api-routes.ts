// The public data API under /_roomgate/api/ (on the public port, handed over by the public server):
// who is online, the lobby (also as Server-Sent Events), one room, room metadata (token),
// leaderboards (scores: token), and the OpenAPI document made from these routes. Nothing here
// touches routing: when the shared store fails, these routes answer 503 and the gateway keeps
// proxying. Room keys go through the gateway's validator before any store call.
import { requestAddress, throttledVerdict, type AuthThrottle } from '../http/auth-throttle.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TokenCheck } from '../http/auth.js';
import { Errors, errorMessage, type HttpError } from '../http/errors.js';
import { JSON_HEADERS } from '../http/replies.js';
import { streamsFull, type StreamSlots } from '../http/stream-slots.js';
import type { Logger } from '../observability/logger.js';
import type { LobbyQuery as StoreLobbyQuery, Ranked as RankedValue, RoomMeta as RoomMetaValue, SharedDataStore } from '../shared-data/store.js';
import type { ControlApp, RouteConfig } from './app.js';
import {
  BoardParams,
  BoardQuery,
  ERROR_RESPONSES,
  ErrorBody,
  LIMITS,
  Leaderboard,
  LobbyPage,
  LobbyQuery,
  LobbyRoom,
  MemberNeighbours,
  MemberParams,
  MemberQuery,
  Online,
  PinnedQuery,
  Ranked,
  RoomMeta,
  ScoreBatchResult,
  ScoresBody,
  roomParams,
} from './api-schemas.js';
import { LobbyStream } from './lobby-stream.js';

export const API_PREFIX = '/_roomgate/api';

export interface ApiRoutesOptions {
  readonly store: SharedDataStore;
  /** Tokens allowed to write (metadata, scores), as Bearer or Basic password. Empty: writes refused (403, `api.tokens`). */
  readonly tokens: readonly string[];
  /** Failed token attempts per client address (auth.maxFailures); null: not limited. */
  readonly throttle?: AuthThrottle | null;
  /** The gateway's room key validator. */
  readonly validateRoom: (room: string) => boolean;
  /** Largest metadata body (bytes of JSON); 413 beyond. */
  readonly maxMetaBytes: number;
  /** SSE: changes are pushed at most this often. */
  readonly streamIntervalMs: number;
  /** The public port's event stream slots (api.maxStreams, shared with the public status stream). */
  readonly streamSlots: StreamSlots;
  readonly logger: Logger;
  /** SSE `: ping` comment period (default 15 s; tests shorten it). */
  readonly streamPingMs?: number;
  /** A request body must arrive within this (default 10 s; 408 otherwise). */
  readonly bodyTimeoutMs?: number;
}

const BATCH_CONCURRENCY = 50;
const SECURITY: { [scheme: string]: string[] }[] = [{ bearer: [] }, { basic: [] }];

/** Runs fn over items, at most `size` at a time, keeping the order of results. */
async function inGroups<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

/** The first segment after the prefix (e.g. "rooms"), for logs: no room key or member in a log line. */
export function apiRouteLabel(url: string): string {
  const seg = url.slice(API_PREFIX.length + 1).split(/[/?]/)[0] ?? '';
  return /^[a-z.]{1,20}$/.test(seg) ? seg : '?';
}

/** A store call rejected (or the store says it is down). */
class StoreError extends Error {}

/** The documented answers of a route: its success, and the errors that follow from what it does. */
function responses(
  success: Record<number, { description: string; schema?: z.ZodType; type?: string }>,
  can: { input?: boolean; write?: boolean; body?: boolean; notFound?: boolean; store?: boolean; stream?: boolean },
): Record<number, z.ZodType> {
  // Content forms (description and schema per content type), typed as schemas for fastify's type provider.
  const out: Record<number, never> = {};
  for (const [status, s] of Object.entries(success)) {
    out[Number(status)] = (s.schema ? { description: s.description, content: { [s.type ?? 'application/json']: { schema: s.schema } } } : z.undefined().describe(s.description)) as never;
  }
  const err = (status: keyof typeof ERROR_RESPONSES, description: string = ERROR_RESPONSES[status]): void => {
    out[status] = { description, content: { 'application/json': { schema: ErrorBody } } } as never;
  };
  if (can.input) err(400);
  if (can.write) {
    err(401);
    err(403);
    err(429);
  }
  if (can.body) {
    err(408);
    err(413);
  }
  if (can.notFound) err(404);
  err(405);
  err(500);
  if (can.stream) {
    err(
      503,
      'No stream now: every event stream slot of this port is taken (code too_many_streams, `api.maxStreams`, Retry-After: 5; a slot frees when a stream closes), the store is down or the gateway is shutting down (code store_unavailable, Retry-After: 2).',
    );
  } else if (can.store) err(503);
  return out;
}

export function registerApiRoutes(app: ControlApp, o: ApiRoutesOptions): { readonly stream: LobbyStream } {
  const tokens = new TokenCheck(o.tokens);
  const bodyTimeoutMs = o.bodyTimeoutMs ?? LIMITS.bodyTimeoutMs;
  const stream = new LobbyStream({
    store: o.store,
    intervalMs: o.streamIntervalMs,
    pingMs: o.streamPingMs ?? 15_000,
    retryMs: 2_000,
    resyncThreshold: 200,
    maxBufferedBytes: 1 << 20,
    logger: o.logger,
  });
  let storeFailures = 0;
  let lastStoreLog = 0;

  /** Runs a store call; any rejection (or a store that says it is down) becomes a 503, logged at most every 10 s. */
  const call = async <T>(f: (s: SharedDataStore) => Promise<T>): Promise<T> => {
    try {
      if (!o.store.available) throw new StoreError('store reports unavailable');
      try {
        return await f(o.store);
      } catch (err) {
        throw new StoreError(errorMessage(err));
      }
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      storeFailures++;
      const now = Date.now();
      if (now - lastStoreLog >= 10_000) {
        lastStoreLog = now;
        o.logger.warn({ err: err.message, failures: storeFailures }, 'public api: shared store unavailable (503)');
        storeFailures = 0;
      }
      throw Errors.storeUnavailable();
    }
  };

  /** 403 (no tokens configured) or 401 (missing or wrong token); constant time in the token. */
  const authorize = (req: FastifyRequest): HttpError | null => {
    if (!tokens.configured) return Errors.forbidden('writes through the public API are disabled: no token is configured (set api.tokens, or ROOMGATE_API_TOKENS)');
    const verdict = throttledVerdict(tokens, o.throttle ?? null, 'api', req.headers.authorization, requestAddress(req.raw));
    if (typeof verdict !== 'string') return verdict;
    if (verdict === 'missing') return Errors.unauthorized('missing bearer token: send Authorization: Bearer <token>', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate"' } });
    if (verdict === 'wrong') return Errors.unauthorized('wrong bearer token', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate", error="invalid_token"' } });
    return null;
  };

  const jsonBody = (text: string): unknown => {
    if (text.trim() === '') throw Errors.badRequest('empty body: a JSON object is expected');
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw Errors.badRequest(`body is not valid JSON: ${errorMessage(err)}`);
    }
  };
  const api = (c: Omit<RouteConfig, 'kind'> = {}): RouteConfig => ({ kind: 'api', ...c });
  const write = (cap: number, what: string): RouteConfig => api({ authorize, body: { cap, what, timeoutMs: bodyTimeoutMs, excess: 'close', parse: jsonBody } });
  const send = (reply: FastifyReply, value: unknown): FastifyReply => reply.code(200).headers(JSON_HEADERS).send(value);
  const RoomParams = roomParams(o.validateRoom);
  const boardNotFound = (board: string): HttpError => Errors.notFound(`no leaderboard "${board}" (a board exists once it has a score)`);
  const rankedAfterWrite = async (board: string, member: string): Promise<RankedValue> => {
    const r = await call((s) => s.member(board, member));
    if (!r) return call(() => Promise.reject(new Error(`score of "${member}" on "${board}" missing right after it was written`)));
    return r;
  };

  app.get(
    `${API_PREFIX}/online`,
    {
      config: api(),
      schema: {
        tags: ['presence'],
        operationId: 'getOnline',
        summary: 'Live sockets: total, rooms with live sockets, sockets per backend.',
        response: responses({ 200: { description: 'The counts.', schema: Online } }, { store: true }),
      },
    },
    async (_req, reply) => send(reply, await call((s) => s.online())),
  );

  app.get(
    `${API_PREFIX}/lobby`,
    {
      config: api(),
      schema: {
        tags: ['lobby'],
        operationId: 'getLobby',
        summary: 'One page of the lobby, filtered and sorted.',
        querystring: LobbyQuery,
        response: responses({ 200: { description: 'The page.', schema: LobbyPage } }, { input: true, store: true }),
      },
    },
    async (req, reply) => {
      const q = lobbyQuery(req.query);
      return send(reply, await call((s) => s.lobby(q)));
    },
  );

  app.get(
    `${API_PREFIX}/lobby/stream`,
    {
      config: api(),
      schema: {
        tags: ['lobby'],
        operationId: 'streamLobby',
        summary: 'The lobby as Server-Sent Events.',
        description: [
          'Takes the same query parameters as GET /lobby. The stream starts with `retry: 2000`, then',
          '`event: snapshot` (data: the first page of the query and `online`). Changes of rooms made on any gateway follow',
          'as `event: rooms` (data: {rooms: [LobbyRoom | {room, gone: true}], online}), at most once per `api.streamIntervalMs`',
          '(default 500 ms): every change of an interval is in one event; a room that left the query\'s view (empty, or no',
          'longer matching status, backend or minSockets) is sent as `{"room", "gone": true}`. Changed rooms may fall outside',
          'the requested page (sort, offset, limit): the client places them itself. A comment line `: ping` comes every 15 s.',
          'While the shared store is down the stream sends `event: unavailable` (data: Error) once and stays open; when the',
          'store is back it sends a fresh `event: snapshot`, which replaces the whole list (a very large change set is also',
          'sent as a snapshot). The stream ends when the gateway shuts down; EventSource reconnects after 2 s.',
        ].join(' '),
        querystring: LobbyQuery,
        response: responses(
          {
            200: {
              description: 'An event stream (text/event-stream): snapshot, rooms, unavailable events and ping comments.',
              type: 'text/event-stream',
              schema: z.string().meta({
                description: 'Frames: `event: snapshot` (a LobbyPage with `online`), `event: rooms` (changed rooms and `online`), `event: unavailable` (an Error).',
                examples: ['retry: 2000\n\nevent: snapshot\ndata: {"rooms":[],"total":0,"nextOffset":null,"online":{"total":0,"rooms":0,"byBackend":{}}}\n\n'],
              }),
            },
          },
          { input: true, stream: true },
        ),
      },
    },
    (req, reply) => {
      const q = lobbyQuery(req.query);
      if (stream.isClosed) throw Errors.storeUnavailable('the gateway is shutting down: the lobby stream is closed');
      if (req.method === 'HEAD') return reply.code(200).headers({ 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store' }).send();
      if (!o.streamSlots.take(reply.raw)) throw streamsFull(o.streamSlots.max);
      reply.hijack();
      stream.open(req.raw, reply.raw, q);
      return reply;
    },
  );

  app.get(
    `${API_PREFIX}/rooms/:room`,
    {
      config: api(),
      schema: {
        tags: ['lobby'],
        operationId: 'getRoom',
        summary: 'One room: live (sockets > 0), or known by its metadata only (sockets 0).',
        params: RoomParams,
        response: responses({ 200: { description: 'The room.', schema: LobbyRoom } }, { input: true, notFound: true, store: true }),
      },
    },
    async (req, reply) => {
      const r = await call((s) => s.room(req.params.room));
      if (!r) throw Errors.notFound('no such room: it has no live sockets and no pinned metadata');
      return send(reply, r);
    },
  );

  app.put(
    `${API_PREFIX}/rooms/:room/meta`,
    {
      config: write(o.maxMetaBytes, 'room metadata'),
      schema: {
        tags: ['lobby'],
        operationId: 'putRoomMeta',
        summary: "Sets (replaces) a room's metadata.",
        description: [
          'The body is the metadata itself: any JSON object, at most `api.maxMetaBytes` bytes (default 4096) as sent, else',
          '413. Its `status` field, if a string, is what GET /lobby?status= filters on. Without `pinned`, metadata lives while',
          'the room has live sockets, and for one presence TTL (presence.ttlMs) after it was set or after the room was last',
          'reported live, so it can be set just before the first socket arrives. With `?pinned=true` it stays until deleted',
          '(GET /rooms/{room} then finds the room even when empty; the lobby lists live rooms only). The answer is the room as',
          'stored; a room without live sockets has sockets 0, backend "" and since = when the metadata was set.',
        ].join(' '),
        security: SECURITY,
        params: RoomParams,
        querystring: PinnedQuery,
        body: RoomMeta,
        response: responses({ 200: { description: 'The room with its new metadata.', schema: LobbyRoom } }, { input: true, write: true, body: true, store: true }),
      },
    },
    async (req, reply) => {
      const room = req.params.room;
      const meta = req.body as RoomMetaValue;
      const pinned = req.query.pinned ?? false;
      // Unpinned metadata of a room without live sockets is kept for one presence TTL (so it can be
      // set just before the first socket arrives); the store decides, the answer shows the result.
      await call((s) => s.setMeta(room, meta, pinned));
      const r = (await call((s) => s.room(room))) ?? { room, backend: '', sockets: 0, since: new Date().toISOString(), meta, pinned };
      return send(reply, r);
    },
  );

  app.delete(
    `${API_PREFIX}/rooms/:room/meta`,
    {
      config: api({ authorize }),
      schema: {
        tags: ['lobby'],
        operationId: 'deleteRoomMeta',
        summary: "Removes a room's metadata (pinned or not).",
        security: SECURITY,
        params: RoomParams,
        response: responses({ 204: { description: 'Removed.' } }, { input: true, write: true, notFound: true, store: true }),
      },
    },
    async (req, reply) => {
      if (!(await call((s) => s.deleteMeta(req.params.room)))) throw Errors.notFound('the room has no metadata');
      return reply.code(204).headers({ 'Cache-Control': 'no-store' }).send();
    },
  );

  app.get(
    `${API_PREFIX}/leaderboards/:board`,
    {
      config: api(),
      schema: {
        tags: ['leaderboards'],
        operationId: 'getLeaderboard',
        summary: 'One page of a board, highest score first (rank 1). 404 for a board without any score.',
        params: BoardParams,
        querystring: BoardQuery,
        response: responses({ 200: { description: 'The page.', schema: Leaderboard } }, { input: true, notFound: true, store: true }),
      },
    },
    async (req, reply) => {
      const board = req.params.board;
      const offset = req.query.offset ?? 0;
      const limit = req.query.limit ?? LIMITS.boardDefaultLimit;
      if (!(await call((s) => s.boardExists(board)))) throw boardNotFound(board);
      const [size, entries] = await Promise.all([call((s) => s.boardSize(board)), call((s) => s.top(board, offset, limit))]);
      return send(reply, { board, size, entries, nextOffset: offset + entries.length < size && entries.length > 0 ? offset + entries.length : null });
    },
  );

  app.get(
    `${API_PREFIX}/leaderboards/:board/members/:member`,
    {
      config: api(),
      schema: {
        tags: ['leaderboards'],
        operationId: 'getLeaderboardMember',
        summary: "A member's score and rank; with `around`, the member and its neighbours.",
        params: MemberParams,
        querystring: MemberQuery,
        response: responses(
          { 200: { description: 'Ranked without `around`, MemberNeighbours with it.', schema: Ranked.or(MemberNeighbours) } },
          { input: true, notFound: true, store: true },
        ),
      },
    },
    async (req, reply) => {
      const { board, member } = req.params;
      const around = req.query.around;
      if (!(await call((s) => s.boardExists(board)))) throw boardNotFound(board);
      const missing = (): HttpError => Errors.notFound(`"${member.length > 64 ? `${member.slice(0, 64)}...` : member}" has no score on leaderboard "${board}"`);
      if (around === undefined) {
        const r = await call((s) => s.member(board, member));
        if (!r) throw missing();
        return send(reply, r);
      }
      const entries = await call((s) => s.around(board, member, around));
      if (!entries.some((e) => e.member === member)) throw missing();
      return send(reply, { board, member, entries });
    },
  );

  app.post(
    `${API_PREFIX}/leaderboards/:board/scores`,
    {
      config: write(LIMITS.maxScoreBodyBytes, 'score body'),
      schema: {
        tags: ['leaderboards'],
        operationId: 'postScores',
        summary: 'Writes one score, or a batch of up to 1000; the board is created by its first score.',
        description: [
          'Body at most 65536 bytes. A batch is validated entirely before anything is written (one bad entry: 400, nothing',
          "written); its entries are applied in order. The answer gives each member's score and rank after the write (for a",
          'batch: after the whole batch, in the order of the entries, so a member listed twice appears twice with its final score).',
          'A batch is not a transaction: if the store fails midway (503), part of it may have been written.',
        ].join(' '),
        security: SECURITY,
        params: BoardParams,
        body: ScoresBody,
        response: responses(
          { 200: { description: 'Ranked for one score, ScoreBatchResult for a batch.', schema: Ranked.or(ScoreBatchResult) } },
          { input: true, write: true, body: true, store: true },
        ),
      },
    },
    async (req, reply) => {
      const board = req.params.board;
      const body = req.body;
      if ('scores' in body) {
        const writes = body.scores;
        // In groups: 1000 concurrent calls on one Redis connection can outlast its command timeout.
        await inGroups(writes, BATCH_CONCURRENCY, (w) => call((s) => s.score(board, w.member, w.score, w.mode)));
        const distinct = [...new Set(writes.map((w) => w.member))];
        const ranked = await inGroups(distinct, BATCH_CONCURRENCY, (m) => rankedAfterWrite(board, m));
        const byMember = new Map(ranked.map((r) => [r.member, r]));
        return send(reply, { board, scores: writes.map((w) => byMember.get(w.member) as RankedValue) });
      }
      await call((s) => s.score(board, body.member, body.score, body.mode));
      return send(reply, await rankedAfterWrite(board, body.member));
    },
  );

  return { stream };
}

function lobbyQuery(q: z.output<typeof LobbyQuery>): StoreLobbyQuery {
  const sort = q.sort ?? 'sockets';
  const out: { -readonly [K in keyof StoreLobbyQuery]: StoreLobbyQuery[K] } = {
    sort,
    order: q.order ?? (sort === 'sockets' ? 'desc' : 'asc'),
    offset: q.offset ?? 0,
    limit: q.limit ?? LIMITS.lobbyDefaultLimit,
  };
  if (q.status !== undefined) out.status = q.status;
  if (q.backend !== undefined) out.backend = q.backend;
  if (q.prefix !== undefined) out.prefix = q.prefix;
  if (q.minSockets !== undefined) out.minSockets = q.minSockets;
  return out;
}
