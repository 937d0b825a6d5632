// Registers the public data API's route plugins on the public app, one per resource, each under
// API_PREFIX and in the order the OpenAPI document lists them: presence, the lobby, rooms,
// leaderboards, then the pushes. Each is awaited, so the routes are in place (and the swagger
// generator has seen them) before whatever the caller registers next. With api.publicReads false
// the reads that need no token (presence, the lobby, one room, leaderboard pages) are not
// registered at all: 404 and absent from the document, like any route that is not there.
import { API_PREFIX, createApiContext, type ApiRoutesOptions } from '../api-routes.js';
import type { ControlApp } from '../app.js';
import type { LobbyStream } from '../lobby-stream.js';
import { fanoutRoutes } from './fanout.js';
import { leaderboardRoutes } from './leaderboards.js';
import { lobbyRoutes, lobbyStreamOf } from './lobby.js';
import { presenceRoutes } from './presence.js';
import { pushRouteConfig, type PushRoutesOptions } from './push-config.js';
import { roomMessageRoutes } from './room-messages.js';
import { roomRoutes } from './rooms.js';

export interface PublicApiOptions {
  readonly api: ApiRoutesOptions;
  readonly push: PushRoutesOptions;
}

/** The routes of /_roomgate/api/ (the OpenAPI document's own route is registerOpenApi's); the lobby stream, for the control plane to close. */
export async function registerPublicApi(app: ControlApp, o: PublicApiOptions): Promise<{ readonly stream: LobbyStream }> {
  const api = createApiContext(o.api);
  const stream = lobbyStreamOf({ store: o.api.store, listing: o.api.listing, intervalMs: o.api.streamIntervalMs, pingMs: o.api.streamPingMs, logger: o.api.logger });
  const prefix = API_PREFIX;
  if (api.publicReads) {
    await app.register(presenceRoutes, { prefix, api });
    await app.register(lobbyRoutes, { prefix, api, stream, streamSlots: o.api.streamSlots });
  }
  await app.register(roomRoutes, { prefix, api, maxMetaBytes: o.api.maxMetaBytes });
  await app.register(leaderboardRoutes, { prefix, api });
  const config = pushRouteConfig(o.push);
  await app.register(roomMessageRoutes, { prefix, config, view: o.push.view, store: o.push.store, idempotencyWindowMs: o.push.idempotencyWindowMs, validateRoom: o.push.validateRoom });
  await app.register(fanoutRoutes, { prefix, config, view: o.push.view });
  return { stream };
}
