// Cross-room push on the public API (docs/push.md): POST /_roomgate/api/rooms/{room}/messages with a
// token of the push scope (push.tokens) delivers the JSON body to the backend that holds the room
// (RuntimeView.pushToRoom, src/runtime/push.ts). Answers: 202 with the message id, 404
// room_not_live, 503 with Retry-After, 502 when the backend refused it, 504 on timeout.
import { requestAddress, throttledVerdict, type AuthThrottle } from '../http/auth-throttle.js';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TokenCheck } from '../http/auth.js';
import { Errors, errorMessage, type HttpError } from '../http/errors.js';
import { JSON_HEADERS } from '../http/replies.js';
import type { FanoutOutcome, PushOutcome } from '../runtime/push.js';
import type { RuntimeView } from '../runtime/views.js';
import { IDEMPOTENCY_PENDING, type SharedDataStore } from '../shared-data/store.js';
import { API_PREFIX } from './api-routes.js';
import type { ControlApp, RouteConfig } from './app.js';
import { ErrorBody, LIMITS, roomParams } from './api-schemas.js';

export interface PushRoutesOptions {
  readonly view: Pick<RuntimeView, 'pushToRoom' | 'pushToLiveRooms'>;
  /** Where Idempotency-Keys are claimed (shared by the gateways that share the store). */
  readonly store: Pick<SharedDataStore, 'claimIdempotency' | 'settleIdempotency' | 'releaseIdempotency'>;
  readonly idempotencyWindowMs: number;
  /** Tokens of the push scope. Empty: pushes refused (403). */
  readonly tokens: readonly string[];
  /** Failed token attempts per client address (auth.maxFailures); null: not limited. */
  readonly throttle?: AuthThrottle | null;
  readonly validateRoom: (room: string) => boolean;
  /** Largest message (bytes of JSON); 413 beyond. */
  readonly maxBytes: number;
  readonly bodyTimeoutMs?: number;
}

/** An Idempotency-Key: visible ASCII, 1 to 255 characters. */
const IDEMPOTENCY_KEY = /^[!-~]{1,255}$/;

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

/** Who sent it, as the backend is told (X-Roomgate-Sender): the caller's word, or "api". */
const SENDER = /^[A-Za-z0-9_.:@/-]{1,128}$/;

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

const err = (description: string) => ({ description, content: { 'application/json': { schema: ErrorBody } } });

export function registerPushRoutes(app: ControlApp, o: PushRoutesOptions): void {
  const tokens = new TokenCheck(o.tokens);
  const authorize = (req: FastifyRequest): HttpError | null => {
    if (!tokens.configured) return Errors.forbidden('pushes are disabled: no push token is configured (set push.tokens, or ROOMGATE_PUSH_TOKENS)');
    const verdict = throttledVerdict(tokens, o.throttle ?? null, 'push', req.headers.authorization, requestAddress(req.raw));
    if (typeof verdict !== 'string') return verdict;
    if (verdict === 'missing') return Errors.unauthorized('missing bearer token: send Authorization: Bearer <push token>', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate push"' } });
    if (verdict === 'wrong') return Errors.unauthorized('wrong bearer token for pushes (push.tokens)', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate push", error="invalid_token"' } });
    const sender = req.headers['x-roomgate-sender'];
    if (sender !== undefined && (typeof sender !== 'string' || !SENDER.test(sender))) {
      return Errors.badRequest('X-Roomgate-Sender must be 1 to 128 characters from A-Z a-z 0-9 _ . : @ / -');
    }
    const key = req.headers['idempotency-key'];
    if (key !== undefined && (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))) {
      return Errors.badRequest('Idempotency-Key must be 1 to 255 visible ASCII characters');
    }
    return null;
  };
  // The body is passed on as sent, once it is known to be JSON.
  const parse = (text: string): unknown => {
    if (text.trim() === '') throw Errors.badRequest('empty body: a JSON message is expected');
    try {
      JSON.parse(text);
    } catch (e) {
      throw Errors.badRequest(`body is not valid JSON: ${errorMessage(e)}`);
    }
    return text;
  };
  const config: RouteConfig = {
    kind: 'api',
    authorize,
    body: { cap: o.maxBytes, what: 'push message', timeoutMs: o.bodyTimeoutMs ?? LIMITS.bodyTimeoutMs, excess: 'close', parse },
  };

  app.post(
    `${API_PREFIX}/rooms/:room/messages`,
    {
      config,
      schema: {
        tags: ['push'],
        operationId: 'pushToRoom',
        summary: 'Delivers a JSON message to the backend that holds the room.',
        description: [
          'POSTs the body, as sent, to `push.path` on the backend the room is placed on, with X-Roomgate-Room, X-Roomgate-Epoch,',
          'X-Roomgate-Message-Id and X-Roomgate-Sender (the caller\'s X-Roomgate-Sender, else "api"). Never places a room.',
          'At most once per call: a call that ends in 503 or 504 may or may not have reached the backend (docs/push.md). With an',
          'Idempotency-Key, a retry (same key, same room) within push.idempotencyWindowMs gets the first answer again with',
          'Idempotent-Replayed: true, through any gateway sharing the store, and is not delivered again. When the backend refuses it or',
          'cannot be reached and the room has moved meanwhile (a fresh read of its placement shows another epoch), it is delivered once',
          'more to the new owner with the same message id (202 with movedFrom), else 409 room_moved.',
        ].join(' '),
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

  app.post(
    `${API_PREFIX}/messages`,
    {
      config,
      schema: {
        tags: ['push'],
        operationId: 'pushToLiveRooms',
        summary: 'Delivers a JSON message to every live room (or those whose key starts with ?prefix=): one request per backend.',
        description: [
          'Live rooms are those with live sockets through any gateway (presence). Each backend gets one POST to `push.path` with',
          'X-Roomgate-Fanout: 1, X-Roomgate-Message-Id, X-Roomgate-Sender and the body {"rooms": [{"room", "epoch"}...], "message": <the body as sent>}.',
          'The answer sums up each backend\'s result; a room whose backend cannot take it now is counted as unplaced. No Idempotency-Key.',
        ].join(' '),
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
