// The admin listener of a `--workers N` gateway, run by the primary (workers open no shared admin
// port: cluster would hand each admin connection to a random worker). It answers /healthz and
// /readyz itself, /metrics summed over all workers (metrics.ts), /workers (the primary's view), and
// forwards every other request (/status, /backends, /rooms/ROOM, /events, drain/undrain/
// maintenance, the status page) to one worker's own admin listener on a private loopback port:
// the lowest-numbered ready worker, or the one named by an `X-Roomgate-Worker: N` request header.
// The answer carries `X-Roomgate-Worker`. Placements, drain states, rooms placed and presence are
// shared, so any worker answers those for all; socket counts and health histories are that worker's.
import http from 'node:http';
import { Errors } from '../http/errors.js';
import { HOP_BY_HOP } from '../http/hop-by-hop.js';
import { allowedHostSet, hostRefusal } from '../http/host-check.js';
import { plainResponse, sendError, sendJson } from '../http/replies.js';
import type { Logger } from '../observability/logger.js';
import { healthAnswer } from '../http/health-answer.js';
import { forwardedPeerHeaders, isPeerHeader } from '../http/forwarded-peer.js';

export interface ClusterAdminOptions {
  readonly isReady: () => boolean;
  /** The aggregated Prometheus text. */
  readonly metrics: () => Promise<string>;
  readonly metricsContentType: string;
  /** GET /workers. */
  readonly workers: () => unknown;
  /**
   * The admin port of the worker that answers: `wanted` (from X-Roomgate-Worker) or, when null,
   * the lowest-numbered ready one. Null when that worker is not ready (or there is none).
   */
  readonly target: (wanted: number | null) => { readonly index: number; readonly port: number } | null;
  readonly logger: Logger;
  /** admin.allowedHosts: names accepted in Host besides IP literals and localhost (DNS rebinding guard). */
  readonly allowedHosts: readonly string[];
  /** Sent with the client's address on every forwarded request (src/http/forwarded-peer.ts); the workers know it. */
  readonly peerKey: string;
}

/** A forwarded request gets no more than this for the worker's response head (streams may last). */
const FORWARD_HEAD_TIMEOUT_MS = 10_000;
export const WORKER_HEADER = 'x-roomgate-worker';

export function createClusterAdminServer(o: ClusterAdminOptions): http.Server {
  const allowedHosts = allowedHostSet(o.allowedHosts);
  return http.createServer((req, res) => {
    // Checked here for /metrics and /workers; the worker's own listener checks the Host it forwards too.
    const refused = hostRefusal(req.headers.host, allowedHosts);
    if (refused) return sendError(res, refused, true);
    const health = healthAnswer(req.url, o.isReady);
    if (health) return send(res, health.status, health.body, 'text/plain');
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      o.metrics().then(
        (text) => send(res, 200, text, o.metricsContentType),
        (err: Error) => sendError(res, Errors.internal(`metrics: ${err.message}`), true),
      );
      return;
    }
    if (req.method === 'GET' && path === '/workers') return sendJson(res, 200, o.workers(), {}, true);
    forward(o, req, res);
  });
}

function forward(o: ClusterAdminOptions, req: http.IncomingMessage, res: http.ServerResponse): void {
  const raw = req.headers[WORKER_HEADER];
  let wanted: number | null = null;
  if (raw !== undefined) {
    wanted = typeof raw === 'string' && /^\d{1,3}$/.test(raw.trim()) ? Number(raw) : NaN;
    if (!Number.isInteger(wanted)) {
      req.resume();
      return sendError(res, Errors.badRequest(`${WORKER_HEADER} must be a worker number (see GET /workers)`), true);
    }
  }
  const target = o.target(wanted);
  if (!target) {
    req.resume();
    const message = wanted === null ? 'no worker is ready yet' : `worker ${wanted} does not exist or is not ready (see GET /workers)`;
    return sendError(res, Errors.unavailable(message, { headers: { 'Retry-After': '1' } }), true);
  }
  const headers: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k) && k !== WORKER_HEADER && !isPeerHeader(k)) headers[k] = v;
  // Who the client is: the worker sees the primary's 127.0.0.1 (a drain token is bound to an address).
  Object.assign(headers, forwardedPeerHeaders(req, o.peerKey));
  const upstream = http.request({ host: '127.0.0.1', port: target.port, method: req.method, path: req.url, headers, agent: false });
  const timer = setTimeout(() => upstream.destroy(new Error(`no answer within ${FORWARD_HEAD_TIMEOUT_MS} ms`)), FORWARD_HEAD_TIMEOUT_MS);
  upstream.on('response', (up) => {
    clearTimeout(timer);
    const out: http.OutgoingHttpHeaders = { [WORKER_HEADER]: String(target.index) };
    for (const [k, v] of Object.entries(up.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = v;
    res.writeHead(up.statusCode ?? 502, out);
    up.pipe(res);
    up.on('error', () => res.destroy());
  });
  upstream.on('error', (err) => {
    clearTimeout(timer);
    o.logger.warn({ worker: target.index, err: err.message, path: req.url }, 'admin request to a worker failed');
    if (res.headersSent) res.destroy();
    else sendError(res, Errors.badGateway(`worker ${target.index} did not answer: ${err.message}`, { headers: { [WORKER_HEADER]: String(target.index) } }), true);
  });
  // The client went away: so does the forwarded request (a status stream, say).
  res.on('close', () => {
    clearTimeout(timer);
    if (!upstream.destroyed) upstream.destroy();
  });
  req.pipe(upstream);
}

/** Plain text (health, Prometheus) with its content type. */
function send(res: http.ServerResponse, status: number, body: string, type: string): void {
  if (res.headersSent) return;
  const r = plainResponse(status, body, { 'Content-Type': type });
  res.writeHead(status, r.headers);
  res.end(r.body);
}
