// GET /_roomgate/api/online: live sockets summed over every gateway (the shared store's presence).
import { responses, type ApiContext } from '../api-routes.js';
import { Online } from '../api-schemas.js';
import type { ControlApp } from '../app.js';

export interface PresenceRoutesOptions {
  readonly api: ApiContext;
}

/** A fastify plugin, registered with prefix API_PREFIX. */
export async function presenceRoutes(app: ControlApp, o: PresenceRoutesOptions): Promise<void> {
  const { api, call, send } = o.api;
  app.get(
    '/online',
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
}
