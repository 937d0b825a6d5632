// Cross-room push to every live room (docs/push.md): POST /_roomgate/api/messages with a token of
// the push scope, one request per backend (RuntimeView.pushToLiveRooms, src/runtime/push.ts); the
// answer sums up each backend's result. No Idempotency-Key.
import { z } from 'zod';
import { Errors, errorMessage } from '../../http/errors.js';
import { JSON_HEADERS } from '../../http/replies.js';
import type { FanoutOutcome } from '../../runtime/push.js';
import type { ControlApp, RouteConfig } from '../app.js';
import { pushError as err, type PushRoutesOptions } from './push-config.js';

export interface FanoutRoutesOptions extends Pick<PushRoutesOptions, 'view'> {
  /** pushRouteConfig: the push token and the body rule (the same object as the one-room push's). */
  readonly config: RouteConfig;
}

const FanoutQuery = z.object({
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,128}$/, { error: 'prefix must be 1 to 128 characters from A-Z a-z 0-9 _ . : -' })
    .optional()
    .meta({ description: 'Only live rooms whose key starts with this.' }),
});

const FanoutAccepted = z.object({
  id: z.string().meta({ description: 'The message id every backend got (X-Roomgate-Message-Id).' }),
  rooms: z.number().meta({ description: 'Live rooms found.' }),
  unplaced: z.number().meta({ description: 'Of those, rooms whose backend cannot take it now (not delivered).' }),
  backends: z
    .record(
      z.string(),
      z.object({
        rooms: z.number(),
        result: z.enum(['delivered', 'refused', 'timeout', 'unavailable']),
        status: z.number().optional(),
        sockets: z.number().optional().meta({ description: 'How many sockets the backend handed it to, when its answer said so (X-Roomgate-Sockets).' }),
      }),
    )
    .meta({ description: 'Per backend: the rooms sent to it, what became of its one request and, when it said, how many sockets it reached.' }),
});

const DESCRIPTION = [
  'Live rooms are those with live sockets through any gateway (presence). Each backend gets one POST to `push.path` with',
  'X-Roomgate-Fanout: 1, X-Roomgate-Message-Id, X-Roomgate-Sender and the body {"rooms": [{"room", "epoch"}...], "message": <the body as sent>}.',
  'The answer sums up each backend\'s result; a room whose backend cannot take it now is counted as unplaced. No Idempotency-Key.',
].join(' ');

/** A fastify plugin, registered with prefix API_PREFIX. */
export async function fanoutRoutes(app: ControlApp, o: FanoutRoutesOptions): Promise<void> {
  app.post(
    '/messages',
    {
      config: o.config,
      schema: {
        tags: ['push'],
        operationId: 'pushToLiveRooms',
        summary: 'Delivers a JSON message to every live room (or those whose key starts with ?prefix=): one request per backend.',
        description: DESCRIPTION,
        security: [{ bearer: [] }, { basic: [] }],
        querystring: FanoutQuery,
        body: z.unknown().meta({ description: 'Any JSON value, at most push.maxBytes bytes as sent.' }),
        response: {
          202: { description: 'Sent; the summary per backend.', content: { 'application/json': { schema: FanoutAccepted } } },
          400: err('A bad prefix, a body that is not JSON, a bad X-Roomgate-Sender, or an Idempotency-Key (single-room pushes only).'),
          401: err('Missing or wrong push token.'),
          429: err('Too many wrong tokens from this address (auth.maxFailures per auth.windowMs; code too_many_requests, Retry-After).'),
          403: err('Pushes are disabled (no push.tokens).'),
          405: err('Another method than POST (Allow: POST).'),
          408: err('The body did not arrive in time.'),
          413: err('The body is over push.maxBytes, or more live rooms than push.maxFanoutRooms (narrow it with ?prefix=).'),
          500: err('An internal error.'),
          503: err('store_unavailable: the shared store (presence) cannot be read now.'),
        } as never,
      },
    },
    async (req, reply) => {
      if (req.headers['idempotency-key'] !== undefined) throw Errors.badRequest('Idempotency-Key is for pushes to one room (POST /rooms/{room}/messages)');
      const sender = (req.headers['x-roomgate-sender'] as string | undefined) ?? 'api';
      const prefix = (req.query as { prefix?: string }).prefix;
      let out: FanoutOutcome;
      try {
        out = await o.view.pushToLiveRooms(prefix, req.body as string, sender);
      } catch (e) {
        throw Errors.storeUnavailable(`the live rooms cannot be read now: ${errorMessage(e)}`);
      }
      if (out.kind === 'too-many') throw Errors.payloadTooLarge(`more than ${out.max} live rooms (push.maxFanoutRooms): narrow it with ?prefix=`);
      return reply.code(202).headers(JSON_HEADERS).send({ id: out.id, rooms: out.rooms, unplaced: out.unplaced, backends: out.backends });
    },
  );
}
