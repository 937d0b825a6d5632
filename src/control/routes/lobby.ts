// The lobby on the public API: GET /_roomgate/api/lobby (one page, filtered and sorted),
// GET /_roomgate/api/lobby/stream (the same as Server-Sent Events, src/control/lobby-stream.ts) and
// GET /_roomgate/api/rooms/{room} (one room). Listed rooms only, never a backend id
// (src/shared-data/listing.ts): a room that is not listed is answered as an unknown room.
import { z } from 'zod';
import { Errors } from '../../http/errors.js';
import { streamsFull, type StreamSlots } from '../../http/stream-slots.js';
import type { Logger } from '../../observability/logger.js';
import { isListed, publicPage, publicRoom, type Listing } from '../../shared-data/listing.js';
import type { LobbyQuery as StoreLobbyQuery, SharedDataStore } from '../../shared-data/store.js';
import { responses, type ApiContext } from '../api-routes.js';
import { AdminLobbyQuery, LIMITS, LobbyPage, LobbyQuery, LobbyRoom } from '../api-schemas.js';
import type { ControlApp } from '../app.js';
import { LobbyStream } from '../lobby-stream.js';

export interface LobbyRoutesOptions {
  readonly api: ApiContext;
  /** The stream the control plane closes on shutdown (lobbyStreamOf). */
  readonly stream: LobbyStream;
  /** The public port's event stream slots (api.maxStreams, shared with the public status stream). */
  readonly streamSlots: StreamSlots;
}

/** The lobby's event stream: changes at most every intervalMs, a ping every pingMs (default 15 s). */
export function lobbyStreamOf(o: { store: SharedDataStore; listing: Listing; intervalMs: number; pingMs?: number | undefined; logger: Logger }): LobbyStream {
  return new LobbyStream({
    store: o.store,
    listing: o.listing,
    intervalMs: o.intervalMs,
    pingMs: o.pingMs ?? 15_000,
    retryMs: 2_000,
    resyncThreshold: 200,
    maxBufferedBytes: 1 << 20,
    logger: o.logger,
  });
}

const STREAM_DESCRIPTION = [
  'Takes the same query parameters as GET /lobby and shows the same rooms: listed ones only. The stream starts with `retry: 2000`, then',
  '`event: snapshot` (data: the first page of the query and `online`). Changes of rooms made on any gateway follow',
  'as `event: rooms` (data: {rooms: [LobbyRoom | {room, gone: true}], online}), at most once per `api.streamIntervalMs`',
  '(default 500 ms): every change of an interval is in one event; a room that left the query\'s view (empty, no longer',
  'listed, or no longer matching status or minSockets) is sent as `{"room", "gone": true}`. Changed rooms may fall outside',
  'the requested page (sort, offset, limit): the client places them itself. A comment line `: ping` comes every 15 s.',
  'While the shared store is down the stream sends `event: unavailable` (data: Error) once and stays open; when the',
  'store is back it sends a fresh `event: snapshot`, which replaces the whole list (a very large change set is also',
  'sent as a snapshot). The stream ends when the gateway shuts down; EventSource reconnects after 2 s.',
].join(' ');

const LOBBY_DESCRIPTION = [
  'Rooms with live sockets that are listed: by their metadata (PUT /rooms/{room}/meta, listed by default) or by a key',
  'matching one of the globs of `api.listRooms`. Any other room key is private and never named here; entries carry',
  "no backend id (the admin port's GET /lobby has it).",
].join(' ');

/** What a public read answers for a room it may not name: the same as for a room that does not exist. */
export const NO_SUCH_ROOM = 'no such room: it has no live sockets and no pinned metadata';

/** A fastify plugin, registered with prefix API_PREFIX. */
export async function lobbyRoutes(app: ControlApp, o: LobbyRoutesOptions): Promise<void> {
  const { api, call, send, listing, RoomParams } = o.api;
  const { stream, streamSlots } = o;

  app.get(
    '/lobby',
    {
      config: api(),
      schema: {
        tags: ['lobby'],
        operationId: 'getLobby',
        summary: 'One page of the lobby (listed rooms), filtered and sorted.',
        description: LOBBY_DESCRIPTION,
        querystring: LobbyQuery,
        response: responses({ 200: { description: 'The page.', schema: LobbyPage } }, { input: true, store: true }),
      },
    },
    async (req, reply) => {
      const q = lobbyQuery(req.query, listing);
      return send(reply, publicPage(await call((s) => s.lobby(q))));
    },
  );

  app.get(
    '/rooms/:room',
    {
      config: api(),
      schema: {
        tags: ['lobby'],
        operationId: 'getRoom',
        summary: 'One listed room: live (sockets > 0), or known by its metadata only (sockets 0). A room that is not listed: 404, as an unknown one.',
        params: RoomParams,
        response: responses({ 200: { description: 'The room.', schema: LobbyRoom } }, { input: true, notFound: true, store: true }),
      },
    },
    async (req, reply) => {
      const r = await call((s) => s.room(req.params.room));
      // The same answer, word for word, for a private room and an unknown one: no oracle.
      if (!r || !isListed(listing, r.room, r.listed)) throw Errors.notFound(NO_SUCH_ROOM);
      return send(reply, publicRoom(r));
    },
  );

  app.get(
    '/lobby/stream',
    {
      config: api(),
      schema: {
        tags: ['lobby'],
        operationId: 'streamLobby',
        summary: 'The lobby as Server-Sent Events.',
        description: STREAM_DESCRIPTION,
        querystring: LobbyQuery,
        response: responses(
          {
            200: {
              description: 'An event stream (text/event-stream): snapshot, rooms, unavailable events and ping comments.',
              type: 'text/event-stream',
              schema: z.string().meta({
                description: 'Frames: `event: snapshot` (a LobbyPage with `online`), `event: rooms` (changed rooms and `online`), `event: unavailable` (an Error).',
                examples: ['retry: 2000\n\nevent: snapshot\ndata: {"rooms":[],"total":0,"nextOffset":null,"online":{"total":0,"rooms":0}}\n\n'],
              }),
            },
          },
          { input: true, stream: true },
        ),
      },
    },
    (req, reply) => {
      const q = lobbyQuery(req.query, listing);
      if (stream.isClosed) throw Errors.storeUnavailable('the gateway is shutting down: the lobby stream is closed');
      if (req.method === 'HEAD') return reply.code(200).headers({ 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store' }).send();
      if (!streamSlots.take(reply.raw)) throw streamsFull(streamSlots.max);
      reply.hijack();
      stream.open(req.raw, reply.raw, q);
      return reply;
    },
  );
}

/** The store's query: the public view (listing given) or the admin port's (every live room, backend filter). */
export function lobbyQuery(q: z.output<typeof LobbyQuery> | z.output<typeof AdminLobbyQuery>, listing: Listing | null): StoreLobbyQuery {
  const sort = q.sort ?? 'sockets';
  const out: { -readonly [K in keyof StoreLobbyQuery]: StoreLobbyQuery[K] } = {
    sort,
    order: q.order ?? (sort === 'sockets' ? 'desc' : 'asc'),
    offset: q.offset ?? 0,
    limit: q.limit ?? LIMITS.lobbyDefaultLimit,
  };
  if (q.status !== undefined) out.status = q.status;
  if (q.backend !== undefined) out.backend = q.backend;
  if (listing !== null) out.listing = listing;
  if (q.prefix !== undefined) out.prefix = q.prefix;
  if (q.minSockets !== undefined) out.minSockets = q.minSockets;
  return out;
}
