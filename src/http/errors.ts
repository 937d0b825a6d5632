// The one catalogue of the errors roomgate answers itself, on the admin port, the public API and
// the pages (fastify's lib/errors.js is the model): each entry is made once with
// createError(code, status, message) and thrown as an HttpError wherever it happens. The code is
// what a client sees in the one error shape, {"error": {"code": "...", "message": "..."}}; the
// pages say the message as plain text. Extra fields (invalid_room_key's pattern and maxLength) go
// inside the error object; headers (Retry-After, Allow, WWW-Authenticate) travel with the error.

/** Every code a client can see. */
export type ErrorCode =
  | 'bad_request'
  | 'invalid_room_key'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'payload_too_large'
  | 'misdirected_request'
  | 'bad_gateway'
  | 'room_not_live'
  | 'room_moved'
  | 'conflict'
  | 'gateway_timeout'
  | 'store_unavailable'
  | 'too_many_streams'
  | 'too_many_requests'
  | 'unavailable'
  | 'internal';

export type HeaderMap = Readonly<Record<string, string>>;

export class HttpError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly status: number,
    message: string,
    readonly headers: HeaderMap = {},
    /** More fields of the error object. */
    readonly detail: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }

  /** The one error shape. */
  body(): { error: { code: ErrorCode; message: string } & Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.detail } };
  }
}

export interface ErrorFactory {
  (message?: string, more?: { readonly headers?: HeaderMap; readonly detail?: Readonly<Record<string, unknown>> }): HttpError;
  readonly code: ErrorCode;
  readonly status: number;
  readonly message: string;
}

/** One catalogue entry: the code, its HTTP status, its default message and headers. */
export function createError(code: ErrorCode, status: number, message: string, headers: HeaderMap = {}): ErrorFactory {
  const make = (msg?: string, more: { readonly headers?: HeaderMap; readonly detail?: Readonly<Record<string, unknown>> } = {}): HttpError =>
    new HttpError(code, status, msg ?? message, { ...headers, ...more.headers }, more.detail);
  return Object.assign(make, { code, status, message });
}

/** Retry-After of store_unavailable (the store reconnects by itself). */
export const STORE_RETRY_AFTER_S = 2;
/** Retry-After of too_many_streams: a slot frees only when a client leaves. */
export const STREAMS_FULL_RETRY_AFTER_S = 5;

export const Errors = {
  badRequest: createError('bad_request', 400, 'bad request'),
  /** A request body that did not arrive in time (the API's code stays bad_request). */
  bodyTimeout: createError('bad_request', 408, 'request body not received in time', { Connection: 'close' }),
  invalidRoomKey: createError('invalid_room_key', 400, 'invalid room key'),
  unauthorized: createError('unauthorized', 401, 'missing or wrong token'),
  forbidden: createError('forbidden', 403, 'forbidden'),
  notFound: createError('not_found', 404, 'not found'),
  methodNotAllowed: createError('method_not_allowed', 405, 'method not allowed'),
  payloadTooLarge: createError('payload_too_large', 413, 'request body too large'),
  misdirected: createError('misdirected_request', 421, 'Host not accepted here', { Connection: 'close' }),
  internal: createError('internal', 500, 'internal error'),
  badGateway: createError('bad_gateway', 502, 'bad gateway'),
  /** A push for a room that has no placement: nobody holds it. */
  roomNotLive: createError('room_not_live', 404, 'the room is not live: no backend holds it'),
  /** A push whose room moved during the delivery, and whose new owner did not take it either. */
  roomMoved: createError('room_moved', 409, 'the room moved while the message was delivered; not delivered'),
  gatewayTimeout: createError('gateway_timeout', 504, 'the backend did not answer in time'),
  conflict: createError('conflict', 409, 'conflict'),
  storeUnavailable: createError(
    'store_unavailable',
    503,
    'the shared data store is unavailable (lobby, presence and leaderboards); routing is unaffected, retry shortly',
    { 'Retry-After': String(STORE_RETRY_AFTER_S) },
  ),
  /** Too many wrong tokens from one client address (src/http/auth-throttle.ts); Retry-After is set per answer. */
  tooManyAttempts: createError('too_many_requests', 429, 'too many wrong tokens from this address; retry later'),
  tooManyStreams: createError('too_many_streams', 503, 'too many event streams open on this port', { 'Retry-After': String(STREAMS_FULL_RETRY_AFTER_S) }),
  /** Nothing that could answer is ready (shutting down, no worker yet). */
  unavailable: createError('unavailable', 503, 'shutting down', { 'Retry-After': '5' }),
} as const;

/** The message of anything thrown. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
