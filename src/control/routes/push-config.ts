// What the two push routes of the public API share (docs/push.md): the push scope's token
// (push.tokens), the checks of X-Roomgate-Sender and Idempotency-Key before the body is read, the
// body rule (any JSON, passed on as sent) and the documented form of an error answer.
import { requestAddress, throttledVerdict, type AuthThrottle } from '../../http/auth-throttle.js';
import type { FastifyRequest } from 'fastify';
import { TokenCheck } from '../../http/auth.js';
import { Errors, errorMessage, type HttpError } from '../../http/errors.js';
import type { RuntimeView } from '../../runtime/views.js';
import type { SharedDataStore } from '../../shared-data/store.js';
import { ErrorBody, LIMITS } from '../api-schemas.js';
import type { RouteConfig } from '../app.js';

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

/** Who sent it, as the backend is told (X-Roomgate-Sender): the caller's word, or "api". */
const SENDER = /^[A-Za-z0-9_.:@/-]{1,128}$/;

/** A documented error answer (the API's one error shape). */
export const pushError = (description: string) => ({ description, content: { 'application/json': { schema: ErrorBody } } });

/** The config of both push routes (one object, one token check). */
export function pushRouteConfig(o: Pick<PushRoutesOptions, 'tokens' | 'throttle' | 'maxBytes' | 'bodyTimeoutMs'>): RouteConfig {
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
  return {
    kind: 'api',
    authorize,
    body: { cap: o.maxBytes, what: 'push message', timeoutMs: o.bodyTimeoutMs ?? LIMITS.bodyTimeoutMs, excess: 'close', parse },
  };
}
