// The public listener. Health checks are answered first, before any routing, and never touch
// a backend; everything else goes to the proxies. Proxied traffic does not go through a web
// framework: no body parsing, no routing tables on the hot path.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { rawResponse } from '../proxy/errors.js';

export interface PublicServerOptions {
  readonly maxHeaderBytes: number;
  readonly headersTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly isReady: () => boolean;
  readonly onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  readonly onUpgrade: (req: IncomingMessage, socket: Socket, head: Buffer) => void;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

/** /healthz and /readyz: answered by the gateway itself, with or without a query string. */
export function healthAnswer(url: string | undefined, isReady: () => boolean): { status: number; body: string } | null {
  if (url === undefined) return null;
  if (url === '/healthz' || url.startsWith('/healthz?')) return { status: 200, body: 'ok\n' };
  if (url === '/readyz' || url.startsWith('/readyz?')) {
    return isReady() ? { status: 200, body: 'ready\n' } : { status: 503, body: 'shutting down\n' };
  }
  return null;
}

export function createPublicServer(o: PublicServerOptions): http.Server {
  const server = http.createServer({
    maxHeaderSize: o.maxHeaderBytes,
    headersTimeout: o.headersTimeoutMs,
    keepAliveTimeout: o.keepAliveTimeoutMs,
    // Long uploads and slow pages are bounded by proxy timeouts, not by a whole-request timer.
    requestTimeout: 0,
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const health = healthAnswer(req.url, o.isReady);
    if (health) {
      res.writeHead(health.status, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-store', 'Content-Length': health.body.length });
      res.end(health.body);
      return;
    }
    o.onRequest(req, res);
  });
  server.on('upgrade', o.onUpgrade);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // Only sockets still parsed as HTTP reach here, never an upgraded one.
    const code = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    if (err.code !== 'ECONNRESET') o.metrics.clientErrors.inc({ code: String(code) });
    o.logger.debug({ err: err.code, code }, 'client error');
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const body = code === 431 ? 'request headers too large\n' : code === 408 ? 'request timeout\n' : 'bad request\n';
    socket.end(rawResponse(code, body));
  });
  return server;
}
