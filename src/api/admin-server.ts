// The admin listener (loopback by default): metrics and what this gateway knows of its backends.
// Never on the public port.
import http from 'node:http';
import type { BackendPool } from '../backends/pool.js';
import type { Metrics } from '../observability/metrics.js';
import type { TunnelRegistry } from '../proxy/tunnels.js';
import { healthAnswer } from '../server/public-server.js';

export interface AdminServerOptions {
  readonly pool: BackendPool;
  readonly tunnels: TunnelRegistry;
  readonly metrics: Metrics;
  readonly isReady: () => boolean;
}

export function createAdminServer(o: AdminServerOptions): http.Server {
  return http.createServer((req, res) => {
    const health = healthAnswer(req.url, o.isReady);
    if (health) return send(res, health.status, health.body, 'text/plain');
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n', 'text/plain');
    if (path === '/metrics') {
      o.metrics.registry.metrics().then(
        (text) => send(res, 200, text, o.metrics.registry.contentType),
        (err: Error) => send(res, 500, `metrics failed: ${err.message}\n`, 'text/plain'),
      );
      return;
    }
    if (path === '/backends') {
      const now = Date.now();
      const body = {
        backends: o.pool.backends.map((b) => ({
          id: b.id,
          url: b.config.url,
          weight: b.config.weight,
          state: b.routable(now) ? 'up' : 'down',
          downUntil: b.downUntil > now ? new Date(b.downUntil).toISOString() : null,
          sockets: b.liveSockets,
          inflight: b.inflight,
        })),
        sockets: o.tunnels.size,
        rooms: o.tunnels.roomCount,
      };
      return send(res, 200, `${JSON.stringify(body, null, 2)}\n`, 'application/json');
    }
    send(res, 404, 'not found: try /metrics or /backends\n', 'text/plain');
  });
}

function send(res: http.ServerResponse, status: number, body: string, type: string): void {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
