// The answers roomgate writes itself, for both planes: short plain-text responses (the proxies,
// static files, the public listener's refusals), the same as raw HTTP/1.1 text for sockets Node's
// HTTP server no longer owns (upgrades, CONNECT, parse errors), JSON with the one error shape
// (src/http/errors.ts), and the security headers of roomgate's HTML pages. The control plane's
// fastify apps use the same header sets and serializers (src/control/app.ts).
import type { ServerResponse } from 'node:http';
import type { HeaderMap, HttpError } from './errors.js';

const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  413: 'Content Too Large',
  421: 'Misdirected Request',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** Headers and body of a short plain-text answer. */
export function plainResponse(status: number, body: string, extra: HeaderMap = {}): { headers: Record<string, string>; body: string } {
  return {
    headers: {
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': String(Buffer.byteLength(body)),
      'Cache-Control': 'no-store',
      ...extra,
    },
    body,
  };
}

/** A whole HTTP/1.1 response as text, for sockets no longer owned by Node's HTTP server (upgrades, parse errors). */
export function rawResponse(status: number, body: string, extra: HeaderMap = {}): string {
  const r = plainResponse(status, body, { ...extra, Connection: 'close' });
  let head = `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n`;
  for (const [k, v] of Object.entries(r.headers)) head += `${k}: ${v}\r\n`;
  return `${head}\r\n${r.body}`;
}

/** Headers every JSON answer of roomgate's own carries. */
export const JSON_HEADERS: HeaderMap = {
  'Content-Type': 'application/json; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

/** JSON text: compact for the API, indented with a final newline for the admin ports (read in terminals). */
export function jsonText(value: unknown, pretty = false): string {
  return pretty ? `${JSON.stringify(value, null, 2)}\n` : JSON.stringify(value);
}

/** A short plain-text answer of roomgate's own (page errors, redirects): plainResponse with the hardening headers. */
export function textResponse(status: number, text: string, extra: HeaderMap = {}): { headers: Record<string, string>; body: string } {
  return plainResponse(status, text, { 'X-Content-Type-Options': 'nosniff', ...extra });
}

/** textResponse on a plain ServerResponse. */
export function sendText(res: ServerResponse, status: number, text: string, extra: HeaderMap = {}): void {
  if (res.headersSent || res.destroyed) return;
  const r = textResponse(status, text, extra);
  res.writeHead(status, r.headers);
  res.end(r.body);
}

/** A JSON answer on a plain ServerResponse (listeners that are not fastify apps: the --workers primary's admin port). */
export function sendJson(res: ServerResponse, status: number, value: unknown, extra: HeaderMap = {}, pretty = false): void {
  if (res.headersSent || res.destroyed) return;
  const text = jsonText(value, pretty);
  res.writeHead(status, { ...JSON_HEADERS, 'Content-Length': String(Buffer.byteLength(text)), ...extra });
  res.end(text);
}

/** An HttpError in the one error shape, with its headers. */
export function sendError(res: ServerResponse, err: HttpError, pretty = false): void {
  sendJson(res, err.status, err.body(), err.headers, pretty);
}

/** Security headers of every HTML page roomgate serves (its CSP allows the page's own inline blocks by hash). */
export function pageHeaders(csp: string): Record<string, string> {
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': csp,
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  };
}
