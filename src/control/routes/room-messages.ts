// Cross-room push to one room (docs/push.md): POST /_roomgate/api/rooms/{room}/messages with a
// token of the push scope delivers the JSON body to the backend that holds the room
// (RuntimeView.pushToRoom, src/runtime/push.ts). Answers: 202 with the message id, 404
// room_not_live, 503 with Retry-After, 502 when the backend refused it, 504 on timeout. An
// Idempotency-Key makes a retry get the first answer again.
import { z } from 'zod';
import { Errors, errorMessage, type HttpError } from '../../http/errors.js';
import { JSON_HEADERS } from '../../http/replies.js';
import type { PushOutcome } from '../../runtime/push.js';
import { IDEMPOTENCY_PENDING } from '../../shared-data/store.js';
import { roomParams } from '../api-schemas.js';
import type { ControlApp, RouteConfig } from '../app.js';
import { pushError as err, type PushRoutesOptions } from './push-config.js';

export interface RoomMessageRoutesOptions extends Pick<PushRoutesOptions, 'view' | 'store' | 'idempotencyWindowMs' | 'validateRoom'> {
  /** pushRouteConfig: the push token and the body rule. */
  readonly config: RouteConfig;
}

/** An answer as recorded under an Idempotency-Key, and sent again to a retry. */
interface Recorded {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
}

/** The answer to a push's outcome (an error's shape is the API's one error shape). */
function answerOf(room: string, out: PushOutcome): Recorded {
  const error = (e: HttpError): Recorded => ({ status: e.status, headers: { ...e.headers }, body: e.body() });
  switch (out.kind) {
    case 'delivered':
      return {
        status: 202,
        headers: {},
        body: { id: out.id, room, backend: out.backend, epoch: out.epoch, ...(out.movedFrom ? { movedFrom: out.movedFrom } : {}), ...(out.sockets === undefined ? {} : { sockets: out.sockets }) },
      };
    case 'not-live':
      return error(Errors.roomNotLive(`room "${room}" is not live: no backend holds it`));
    case 'unavailable':
      return error(Errors.unavailable(`the room's backend cannot take the message now (${out.why}); retry shortly`, { headers: { 'Retry-After': String(out.retryAfterS) } }));
    case 'refused':
      return error(Errors.badGateway(`the backend answered the delivery with ${out.status}`, { detail: { id: out.id, backendStatus: out.status } }));
    case 'timeout':
      return error(Errors.gatewayTimeout(`the backend did not answer the delivery in time (message ${out.id})`, { detail: { id: out.id } }));
    case 'moved':
      return error(
        Errors.roomMoved(`room "${room}" moved while the message was delivered, and its new owner did not take it: not delivered; send it again if it still matters`, {
          detail: { id: out.id, backend: out.backend, epoch: out.epoch },
        }),
      );
  }
}

/** Nothing reached a backend: a retry under the same Idempotency-Key may run again. */
const changedNothing = (out: PushOutcome): boolean => out.kind === 'not-live' || out.kind === 'moved' || (out.kind === 'unavailable' && !out.sent);

const Accepted = z.object({
  id: z.string().meta({ description: 'The message id the backend got (X-Roomgate-Message-Id).' }),
  room: z.string(),
  backend: z.string().meta({ description: 'The backend that took it.' }),
  epoch: z.number().meta({ description: 'The placement epoch it was delivered under (X-Roomgate-Epoch).' }),
  movedFrom: z
    .object({ backend: z.string(), epoch: z.number() })
    .optional()
    .meta({ description: 'Present when the room moved during the call: the backend (and epoch) first tried, which did not take it.' }),
  sockets: z
    .number()
    .optional()
    .meta({ description: 'How many sockets the backend handed the message to, when its answer said so (X-Roomgate-Sockets, docs/push.md).' }),
});

const DESCRIPTION = [
  'POSTs the body, as sent, to `push.path` on the backend the room is placed on, with X-Roomgate-Room, X-Roomgate-Epoch,',
  'X-Roomgate-Message-Id and X-Roomgate-Sender (the caller\'s X-Roomgate-Sender, else "api"). Never places a room.',
  'At most once per call: a call that ends in 503 or 504 may or may not have reached the backend (docs/push.md). With an',
  'Idempotency-Key, a retry (same key, same room) within push.idempotencyWindowMs gets the first answer again with',
  'Idempotent-Replayed: true, through any gateway sharing the store, and is not delivered again. When the backend refuses it or',
  'cannot be reached and the room has moved meanwhile (a fresh read of its placement shows another epoch), it is delivered once',
  'more to the new owner with the same message id (202 with movedFrom), else 409 room_moved.',
].join(' ');

/** A fastify plugin, registered with prefix API_PREFIX. */
export async function roomMessageRoutes(app: ControlApp, o: RoomMessageRoutesOptions): Promise<void> {
  app.post(
    '/rooms/:room/messages',
    {
      config: o.config,
      schema: {
        tags: ['push'],
        operationId: 'pushToRoom',
        summary: 'Delivers a JSON message to the backend that holds the room.',
        description: DESCRIPTION,
        security: [{ bearer: [] }, { basic: [] }],
        params: roomParams(o.validateRoom),
        body: z.unknown().meta({ description: `Any JSON value, at most push.maxBytes bytes as sent.` }),
        response: {
          202: { description: 'The backend took the message (2xx).', content: { 'application/json': { schema: Accepted } } },
          400: err('Invalid room key, body that is not JSON, or a bad X-Roomgate-Sender.'),
          401: err('Missing or wrong push token.'),
          429: err('Too many wrong tokens from this address (auth.maxFailures per auth.windowMs; code too_many_requests, Retry-After).'),
          403: err('Pushes are disabled (no push.tokens).'),
          404: err('room_not_live: no backend holds the room (it has no placement; with push.requireLive, or no live sockets).'),
          409: err(
            'conflict: a call with this Idempotency-Key is still running; or room_moved: the room moved during the delivery, it was re-resolved once and the new owner did not take it either (not delivered).',
          ),
          408: err('The body did not arrive in time.'),
          405: err('Another method than POST (Allow: POST).'),
          413: err('The body is over push.maxBytes.'),
          500: err('An internal error.'),
          502: err("bad_gateway: the backend answered the delivery with a status other than 2xx (its status in the error's backendStatus)."),
          503: err("unavailable: the room's backend cannot take it now (down, drained, in maintenance, or refused the connection), or the store cannot check an Idempotency-Key (store_unavailable); Retry-After."),
          504: err('gateway_timeout: the backend did not answer within push.timeoutMs.'),
        } as never,
      },
    },
    async (req, reply) => {
      const room = (req.params as { room: string }).room;
      const sender = (req.headers['x-roomgate-sender'] as string | undefined) ?? 'api';
      const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
      // The key is the caller's per room: the same key for another room is another call.
      const claim = idempotencyKey === undefined ? null : `push\n${room}\n${idempotencyKey}`;
      if (claim !== null) {
        let held: string | null;
        try {
          held = await o.store.claimIdempotency(claim, o.idempotencyWindowMs);
        } catch (e) {
          throw Errors.storeUnavailable(`the shared store cannot check the Idempotency-Key now: ${errorMessage(e)}`);
        }
        if (held === IDEMPOTENCY_PENDING) throw Errors.conflict('a call with this Idempotency-Key is still running; retry once it has answered');
        if (held !== null) {
          const recorded = JSON.parse(held) as Recorded;
          return reply.code(recorded.status).headers({ ...JSON_HEADERS, ...recorded.headers, 'Idempotent-Replayed': 'true' }).send(recorded.body);
        }
      }
      const out = await o.view.pushToRoom(room, Buffer.from(req.body as string), sender);
      const answer = answerOf(room, out);
      if (claim !== null) {
        // Best effort: the answer stands even when the store cannot record it.
        const recorded = changedNothing(out) ? o.store.releaseIdempotency(claim) : o.store.settleIdempotency(claim, JSON.stringify(answer), o.idempotencyWindowMs);
        await recorded.catch(() => undefined);
      }
      return reply.code(answer.status).headers({ ...JSON_HEADERS, ...answer.headers }).send(answer.body);
    },
  );
}
