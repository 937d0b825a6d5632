// The one catalogue of the answers the data plane makes itself in place of a backend's (no room
// key, no backend, a backend that failed, a method roomgate does not forward), the way fastify
// keeps its errors in one file. Each entry: the status, the one line a client is told (what it can
// act on, never which backend or why it failed: that goes to the log and the admin port), the log
// reason and the metric label. Every path (byte-level pages, node:http, HTTP/2, upgrades, cache
// fills) renders an answer from here, so a refusal reads the same on every front.
//
// The rendered answer carries a request id (X-Request-Id and in the body) that the log line of the
// same refusal names, so a user's report can be matched with the detail. A browser (Accept names
// text/html) gets a page: the operator's own for that status (`proxy.errorPages`), else a built-in
// one; every other client gets plain text.

import { rawResponse } from './replies.js';

export const REFUSALS = {
  'no-room-key': { status: 400, text: 'this request needs a room key', log: 'no valid room key and room.noRoom is reject' },
  'no-backend': { status: 503, text: 'the service is unavailable, retry shortly', log: 'no backend can take the request' },
  'room-moving': { status: 503, text: 'this room is moving, retry shortly', log: 'the room is being placed by another request' },
  'room-handoff': { status: 503, text: 'this room is moving, retry shortly', log: "a page request waited past the bound for its room's handoff (handoff.timeoutMs per step)" },
  'backend-busy': { status: 503, text: 'too many connections at once, retry shortly', log: 'admission limit of the backend' },
  'backend-unavailable': { status: 502, text: 'the service is unavailable, retry shortly', log: 'the backend could not be reached or broke the connection' },
  'backend-timeout': { status: 504, text: 'the service did not answer in time', log: 'the backend did not answer in time' },
  'bad-backend-answer': { status: 502, text: 'the service sent an answer that cannot be relayed', log: 'the backend sent an invalid answer' },
  internal: { status: 500, text: 'internal error', log: 'internal error while routing' },
  'method-not-allowed': { status: 405, text: 'this method is not allowed here', log: 'a method outside proxy.methods' },
  'method-unknown': { status: 501, text: 'this method is not implemented', log: 'a method roomgate does not know' },
  'body-too-large': { status: 413, text: 'the request body is too large', log: 'a body over proxy.maxBodyBytes' },
  'room-pin-malformed': { status: 400, text: 'the room pin of this page is malformed: reload the page', log: 'a room pin that does not parse or names a room room.pattern refuses' },
  'room-pin-refused': { status: 403, text: 'the room pin of this page is not valid or has expired: reload the page', log: 'a room pin with a bad signature (not one of cookie.secrets) or older than room.pinMaxAgeS' },
  'body-timeout': { status: 408, text: 'the request body stopped arriving', log: 'a streamed body idle for proxy.bodyIdleTimeoutMs' },
} as const satisfies Record<string, { readonly status: number; readonly text: string; readonly log: string }>;

export type RefusalCode = keyof typeof REFUSALS;

/**
 * The answers to a client's own mistakes, told as they are (the client can fix them): a request
 * head roomgate will not route, a handshake it will not carry, a connection it closes. Plain text
 * with Connection: close, counted in roomgate_client_errors_total under the status, logged at
 * debug. Written by the head checks (request-head.ts, h2-request-head.ts, target.ts), the fronts
 * and the upgrade path; `{limit}` is filled in by clientRefusal().
 */
export const CLIENT_REFUSALS = {
  'bad-request': { status: 400, text: 'bad request' },
  'http-version': { status: 505, text: 'only HTTP/1.0 and HTTP/1.1 are spoken here' },
  'too-many-header-lines': { status: 431, text: 'more than {limit} request header lines' },
  'headers-too-large': { status: 431, text: 'request headers too large' },
  'head-timeout': { status: 408, text: 'request timeout' },
  'method-not-parsed': { status: 501, text: 'this method is not implemented' },
  'transfer-encoding': { status: 400, text: 'Transfer-Encoding other than "chunked" is not accepted' },
  'host-twice': { status: 400, text: 'more than one Host header' },
  'host-missing': { status: 400, text: 'a Host header is required' },
  'host-invalid': { status: 400, text: 'invalid Host header' },
  'host-not-authority': { status: 400, text: 'the Host header differs from :authority' },
  'target-host-invalid': { status: 400, text: 'invalid host in the request target' },
  'asterisk-not-options': { status: 400, text: 'the "*" target is only for OPTIONS' },
  'target-not-path-or-url': { status: 400, text: 'the request target must be a path (or an absolute http(s) URL)' },
  'target-not-path': { status: 400, text: 'the request target must be a path' },
  'target-character': { status: 400, text: 'the request target holds a character a URL may not carry unencoded' },
  'target-fragment': { status: 400, text: 'a "#" in the request target' },
  'path-backslash': { status: 400, text: 'a backslash in the request path' },
  'path-bad-escape': { status: 400, text: 'a malformed percent-escape in the request path' },
  'path-encoded-slash': { status: 400, text: 'an encoded "/" or "\\" in the request path' },
  'path-encoded-control': { status: 400, text: 'an encoded control character, space or DEL in the request path' },
  'path-bad-utf8': { status: 400, text: 'a percent-escape in the request path that is not UTF-8' },
  'reserved-path': { status: 404, text: 'not found' },
  'h2-scheme': { status: 400, text: 'the :scheme must be https' },
  'control-character': { status: 400, text: 'a header value holds a control character' },
  connect: { status: 405, text: 'CONNECT is not supported' },
  'websocket-no-path': { status: 400, text: 'a WebSocket needs a path' },
  'websocket-method': { status: 400, text: 'WebSocket upgrades must use GET' },
  'websocket-only': { status: 400, text: 'only WebSocket upgrades are proxied' },
  'websocket-key': { status: 400, text: 'missing Sec-WebSocket-Key or Sec-WebSocket-Version' },
  'websocket-body': { status: 400, text: 'a WebSocket handshake has no body' },
  'websocket-route': { status: 404, text: 'no WebSocket route here' },
  'redirect-no-host': { status: 400, text: 'a Host header naming this server is needed to redirect to https' },
  'redirect-target': { status: 400, text: 'this target cannot be redirected' },
  'redirect-upgrade': { status: 400, text: 'use wss:// on the TLS port' },
} as const satisfies Record<string, { readonly status: number; readonly text: string }>;

export type ClientRefusalCode = keyof typeof CLIENT_REFUSALS;

/** A client mistake's answer: its status and plain-text body. */
export interface ClientRefusal {
  readonly status: number;
  readonly body: string;
}

/** A client mistake's status and body (`limit` fills `{limit}`). */
export function clientRefusal<C extends ClientRefusalCode>(code: C, limit?: number): { readonly status: (typeof CLIENT_REFUSALS)[C]['status']; readonly body: string } {
  const entry = CLIENT_REFUSALS[code];
  const text: string = entry.text;
  return { status: entry.status, body: `${limit === undefined ? text : text.replace('{limit}', String(limit))}\n` };
}

/** One refusal as a path asks for it: the code and what the answer or the log needs beyond it. */
export interface Refusal {
  readonly code: RefusalCode;
  /** Retry-After in seconds (503, 502). */
  readonly retryAfterS?: number;
  /** Extra response fields (Allow of a 405). */
  readonly headers?: Readonly<Record<string, string>>;
  /** For the log only: why (backends down and their reasons, the error code...). */
  readonly detail?: string;
  /** For the log and the metrics only: the backend concerned, or "none". */
  readonly backend?: string;
}

/** An answer ready to write: the status, the fields (framing included) and the body. */
export interface RenderedRefusal {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Operator pages by status: an HTML template where `{{status}}`, `{{message}}` and `{{requestId}}` are filled in. */
export type ErrorPages = ReadonlyMap<number, string>;

/** True when the client prefers a page: its Accept names text/html (browsers' navigations do). */
export function wantsHtml(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('text/html');
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const BUILT_IN_PAGE =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
  '<title>{{status}}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#222}' +
  'small{color:#666}</style></head><body><h1>{{status}}</h1><p>{{message}}</p><p><small>request id {{requestId}}</small></p></body></html>\n';

/** The answer for a refusal, for a client whose Accept is `accept`. */
export function renderRefusal(r: Refusal, requestId: string, accept: string | undefined, pages: ErrorPages): RenderedRefusal {
  const entry = REFUSALS[r.code];
  const fields: Record<string, string> = { 'X-Request-Id': requestId, 'Cache-Control': 'no-store', ...r.headers };
  if (r.retryAfterS !== undefined) fields['Retry-After'] = String(r.retryAfterS);
  let body: string;
  if (wantsHtml(accept)) {
    const template = pages.get(entry.status) ?? BUILT_IN_PAGE;
    body = template.replaceAll('{{status}}', String(entry.status)).replaceAll('{{message}}', escapeHtml(entry.text)).replaceAll('{{requestId}}', escapeHtml(requestId));
    fields['Content-Type'] = 'text/html; charset=utf-8';
    fields['X-Content-Type-Options'] = 'nosniff';
  } else {
    body = `${entry.text}\nrequest id: ${requestId}\n`;
    fields['Content-Type'] = 'text/plain; charset=utf-8';
  }
  fields['Content-Length'] = String(Buffer.byteLength(body));
  return { status: entry.status, headers: fields, body };
}

/** A client mistake as a whole raw HTTP/1.1 answer (Connection: close), for sockets node:http no longer parses. */
export function refusalText(code: ClientRefusalCode, headers: Readonly<Record<string, string>> = {}): string {
  const r = clientRefusal(code);
  return rawResponse(r.status, r.body, headers);
}

/** The body of the redirect port's 308 to https (tls.redirectPort): where to go, nothing else. */
export function redirectText(location: string): string {
  return `see ${location}\n`;
}
