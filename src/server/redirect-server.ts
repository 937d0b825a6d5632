// The plain-HTTP listener beside the TLS port (tls.redirectPort): every request gets a 308 to the
// same path on https, except the health paths, answered here (load balancers and kubelets often
// probe in plain HTTP). Nothing is proxied and no body is read: the answer goes out as soon as
// the head is in, and the connection closes after it.
import { clientRefusal, redirectText, refusalText } from '../http/refusals.js';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { healthAnswer } from '../http/health-answer.js';
import { isHostValue } from '../http/syntax.js';
import { sendText } from '../http/replies.js';

export interface RedirectServerOptions {
  /** The TLS port the redirect points at (443 is left out of the URL). */
  readonly httpsPort: () => number;
  readonly isReady: () => boolean;
  readonly maxHeaderBytes: number;
  readonly headersTimeoutMs: number;
}

export function createRedirectServer(o: RedirectServerOptions): http.Server {
  const server = http.createServer({ maxHeaderSize: o.maxHeaderBytes, headersTimeout: o.headersTimeoutMs, requestTimeout: o.headersTimeoutMs });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const health = healthAnswer(req.url, o.isReady);
    if (health) return send(res, health.status, health.body, {});
    const location = httpsUrl(req, o.httpsPort());
    if (location === null) return send(res, 400, clientRefusal('redirect-no-host').body, {});
    try {
      send(res, 308, redirectText(location), { Location: location });
    } catch {
      // A target Node's parser let through but its header check refuses: an answer, not a crash.
      if (!res.headersSent) send(res, 400, clientRefusal('redirect-target').body, {});
      else res.destroy();
    }
  });
  // Upgrades and CONNECT: no tunnel on the plain port; the client is told where to go instead.
  server.on('upgrade', (_req, socket) => socket.end(refusalText('redirect-upgrade')));
  server.on('connect', (_req, socket) => socket.end(refusalText('connect')));
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end(refusalText('bad-request'));
    else socket.destroy();
  });
  return server;
}

/** https://host[:port]/path for a request, or null when its Host cannot be used. */
export function httpsUrl(req: Pick<IncomingMessage, 'url' | 'headers'>, httpsPort: number): string | null {
  const host = req.headers.host;
  if (typeof host !== 'string' || !isHostValue(host)) return null;
  // The name without the plain port; the TLS port added unless it is https's own.
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0];
  const url = req.url ?? '/';
  // Only a path is carried over: an absolute-form target or anything else becomes "/".
  const path = url.startsWith('/') && !url.startsWith('//') ? url : '/';
  return `https://${name}${httpsPort === 443 ? '' : `:${httpsPort}`}${path}`;
}

/** Every answer here closes its connection: the port serves one request per client. */
function send(res: ServerResponse, status: number, body: string, extra: Record<string, string>): void {
  sendText(res, status, body, { ...extra, Connection: 'close' });
}
