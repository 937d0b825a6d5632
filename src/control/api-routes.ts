// The public data API under /_roomgate/api/ (on the public port, handed over by the public server):
// what every route of it shares. The routes themselves are fastify plugins, one per resource, in
// src/control/routes/ (registered in order by routes/public-api.ts under API_PREFIX); here are the
// prefix, the log label, the store gate (when the shared store fails, a route answers 503 and the
// gateway keeps proxying), the write token check, the JSON body rule and the documented answers.
// Room keys go through the gateway's validator before any store call (the routes' params schemas).
import { requestAddress, throttledVerdict, type AuthThrottle } from '../http/auth-throttle.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TokenCheck } from '../http/auth.js';
import { Errors, errorMessage, type HttpError } from '../http/errors.js';
import { JSON_HEADERS } from '../http/replies.js';
import type { StreamSlots } from '../http/stream-slots.js';
import type { Logger } from '../observability/logger.js';
import type { Listing } from '../shared-data/listing.js';
import type { SharedDataStore } from '../shared-data/store.js';
import type { RouteConfig } from './app.js';
import { ERROR_RESPONSES, ErrorBody, LIMITS, roomParams } from './api-schemas.js';

export const API_PREFIX = '/_roomgate/api';

export interface ApiRoutesOptions {
  readonly store: SharedDataStore;
  /** Tokens allowed to write (metadata, scores), as Bearer or Basic password. Empty: writes refused (403, `api.tokens`). */
  readonly tokens: readonly string[];
  /** Failed token attempts per client address (auth.maxFailures); null: not limited. */
  readonly throttle?: AuthThrottle | null;
  /** The gateway's room key validator. */
  readonly validateRoom: (room: string) => boolean;
  /** api.publicReads: serve the reads that need no token (presence, lobby, its stream, one room, leaderboards). */
  readonly publicReads: boolean;
  /** api.listRooms: the rooms those reads may name beside the ones listed by their metadata. */
  readonly listing: Listing;
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

/** What the API's route plugins share: one per public app, so the store gate's log limit is one for all. */
export interface ApiContext {
  /** Runs a store call; any rejection (or a store that says it is down) becomes a 503, logged at most every 10 s. */
  readonly call: <T>(f: (s: SharedDataStore) => Promise<T>) => Promise<T>;
  /** 403 (no tokens configured) or 401 (missing or wrong token); constant time in the token. */
  readonly authorize: (req: FastifyRequest) => HttpError | null;
  /** The config of an API route (JSON errors, 405 with Allow). */
  readonly api: (c?: Omit<RouteConfig, 'kind'>) => RouteConfig;
  /** The config of a write: the token, then a JSON body of at most cap bytes. */
  readonly write: (cap: number, what: string) => RouteConfig;
  /** A 200 with a JSON value. */
  readonly send: (reply: FastifyReply, value: unknown) => FastifyReply;
  /** The path parameter {room}, checked with the gateway's validator. */
  readonly RoomParams: ReturnType<typeof roomParams>;
  /** Which rooms the public reads may name (src/shared-data/listing.ts). */
  readonly listing: Listing;
  /** api.publicReads: the reads that need no token are served. */
  readonly publicReads: boolean;
}

/** Security requirements of a write: the token as Bearer or as Basic password. */
export const SECURITY: { [scheme: string]: string[] }[] = [{ bearer: [] }, { basic: [] }];

/** The first segment after the prefix (e.g. "rooms"), for logs: no room key or member in a log line. */
export function apiRouteLabel(url: string): string {
  const seg = url.slice(API_PREFIX.length + 1).split(/[/?]/)[0] ?? '';
  return /^[a-z.]{1,20}$/.test(seg) ? seg : '?';
}

/** A store call rejected (or the store says it is down). */
class StoreError extends Error {}

export function createApiContext(o: ApiRoutesOptions): ApiContext {
  const tokens = new TokenCheck(o.tokens);
  const bodyTimeoutMs = o.bodyTimeoutMs ?? LIMITS.bodyTimeoutMs;
  let storeFailures = 0;
  let lastStoreLog = 0;

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

  const authorize = (req: FastifyRequest): HttpError | null => {
    if (!tokens.configured) return Errors.forbidden('writes through the public API are disabled: no token is configured (set api.tokens, or ROOMGATE_API_TOKENS)');
    const verdict = throttledVerdict(tokens, o.throttle ?? null, 'api', req.headers.authorization, requestAddress(req.raw));
    if (typeof verdict !== 'string') return verdict;
    if (verdict === 'missing') return Errors.unauthorized('missing bearer token: send Authorization: Bearer <token>', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate"' } });
    if (verdict === 'wrong') return Errors.unauthorized('wrong bearer token', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate", error="invalid_token"' } });
    return null;
  };

  const api = (c: Omit<RouteConfig, 'kind'> = {}): RouteConfig => ({ kind: 'api', ...c });
  return {
    call,
    authorize,
    api,
    write: (cap, what) => api({ authorize, body: { cap, what, timeoutMs: bodyTimeoutMs, excess: 'close', parse: jsonBody } }),
    send: (reply, value) => reply.code(200).headers(JSON_HEADERS).send(value),
    RoomParams: roomParams(o.validateRoom),
    listing: o.listing,
    publicReads: o.publicReads,
  };
}

function jsonBody(text: string): unknown {
  if (text.trim() === '') throw Errors.badRequest('empty body: a JSON object is expected');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw Errors.badRequest(`body is not valid JSON: ${errorMessage(err)}`);
  }
}

/** The documented answers of a route: its success, and the errors that follow from what it does. */
export function responses(
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
