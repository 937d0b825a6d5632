// A room's metadata on the public API: PUT and DELETE /_roomgate/api/rooms/{room}/meta (token). The
// metadata also lists the room (unless ?listed=false): the public reads name only listed rooms
// (src/shared-data/listing.ts); GET /rooms/{room} is a public read, in ./lobby.ts.
import { Errors } from '../../http/errors.js';
import { publicRoom } from '../../shared-data/listing.js';
import type { RoomMeta as RoomMetaValue } from '../../shared-data/store.js';
import { SECURITY, responses, type ApiContext } from '../api-routes.js';
import { LobbyRoom, MetaQuery, RoomMeta } from '../api-schemas.js';
import type { ControlApp } from '../app.js';

export interface RoomRoutesOptions {
  readonly api: ApiContext;
  /** Largest metadata body (bytes of JSON); 413 beyond. */
  readonly maxMetaBytes: number;
}

const PUT_META_DESCRIPTION = [
  'The body is the metadata itself: any JSON object, at most `api.maxMetaBytes` bytes (default 4096) as sent, else',
  '413. Its `status` field, if a string, is what GET /lobby?status= filters on. Without `pinned`, metadata lives while',
  'the room has live sockets, and for one presence TTL (presence.ttlMs) after it was set or after the room was last',
  'reported live, so it can be set just before the first socket arrives. With `?pinned=true` it stays until deleted',
  '(GET /rooms/{room} then finds the room even when empty; the lobby lists live rooms only). Setting metadata lists the',
  'room: GET /lobby, its stream, GET /rooms/{room} and the lobby page may name it; with `?listed=false` they do not (a',
  'room whose key matches `api.listRooms` is listed all the same). The answer is the room as stored, without a backend',
  'id; a room without live sockets has sockets 0 and since = when the metadata was set.',
].join(' ');

/** A fastify plugin, registered with prefix API_PREFIX. */
export async function roomRoutes(app: ControlApp, o: RoomRoutesOptions): Promise<void> {
  const { api, authorize, call, write, send, RoomParams } = o.api;

  app.put(
    '/rooms/:room/meta',
    {
      config: write(o.maxMetaBytes, 'room metadata'),
      schema: {
        tags: ['lobby'],
        operationId: 'putRoomMeta',
        summary: "Sets (replaces) a room's metadata.",
        description: PUT_META_DESCRIPTION,
        security: SECURITY,
        params: RoomParams,
        querystring: MetaQuery,
        body: RoomMeta,
        response: responses({ 200: { description: 'The room with its new metadata.', schema: LobbyRoom } }, { input: true, write: true, body: true, store: true }),
      },
    },
    async (req, reply) => {
      const room = req.params.room;
      const meta = req.body as RoomMetaValue;
      const pinned = req.query.pinned ?? false;
      const listed = req.query.listed ?? true;
      // Unpinned metadata of a room without live sockets is kept for one presence TTL (so it can be
      // set just before the first socket arrives); the store decides, the answer shows the result.
      await call((s) => s.setMeta(room, meta, pinned, listed));
      const r = (await call((s) => s.room(room))) ?? { room, backend: '', sockets: 0, since: new Date().toISOString(), meta, pinned, listed };
      return send(reply, publicRoom(r));
    },
  );

  app.delete(
    '/rooms/:room/meta',
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
}
