// GET /_roomgate/api/online: live sockets summed over every gateway (the shared store's presence),
// as counts only: no room key, no backend id.
import { publicOnline } from '../../shared-data/listing.js';
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
        summary: 'Live sockets in total, and rooms with live sockets (listed or not: counts, no key).',
        response: responses({ 200: { description: 'The counts.', schema: Online } }, { store: true }),
      },
    },
    async (_req, reply) => send(reply, publicOnline(await call((s) => s.online()))),
  );
}
