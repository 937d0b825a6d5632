// The admin listener (loopback by default): metrics, backends, where-is-room, events, and the
// drain / maintenance controls (bearer token). Never on the public port.
import http from 'node:http';
import type { Gateway } from '../gateway.js';
import { TokenCheck } from '../http/auth.js';
import { adminHostAllowed, allowedHostSet, sendMisdirected } from '../http/host-check.js';
import type { AdminState } from '../placement/store.js';
import { MAX_ROOM_KEY_LENGTH, type RoomValidator } from '../room/validate.js';
import { healthAnswer } from '../server/public-server.js';

export interface AdminServerOptions {
  readonly gateway: Gateway;
  /** Token for writes (Bearer, or Basic password; see src/http/auth.ts); '' refuses every write. */
  readonly token: string;
  readonly isReady: () => boolean;
  /** admin.allowedHosts: names accepted in Host besides IP literals and localhost. */
  readonly allowedHosts: readonly string[];
  /** The gateway's room key validator (room.pattern): /rooms/KEY answers only for valid keys. */
  readonly validateRoom: RoomValidator;
  /** room.pattern, to say in the 400 what a key must match. */
  readonly roomPattern: string;
}

const MAX_BODY = 4096;
const DEFAULT_DRAIN_DEADLINE_MS = 10 * 60_000;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** More fields of the JSON error body. */
    readonly detail: Readonly<Record<string, unknown>> = {},
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

export function createAdminServer(o: AdminServerOptions): http.Server {
  const tokens = new TokenCheck([o.token]);
  const authorized = (req: http.IncomingMessage): void => {
    if (!tokens.configured) throw new HttpError(403, 'admin writes are disabled: set admin.token (or ROOMGATE_ADMIN_TOKEN)');
    if (!tokens.accepts(req.headers.authorization)) {
      throw new HttpError(401, 'missing or wrong bearer token: send Authorization: Bearer <admin.token>', {}, { 'WWW-Authenticate': 'Bearer realm="roomgate admin"' });
    }
  };

  const allowedHosts = allowedHostSet(o.allowedHosts);
  return http.createServer((req, res) => {
    // Before anything else, the status page included: a rebound name never reads a byte.
    if (!adminHostAllowed(req.headers.host, allowedHosts)) return sendMisdirected(res, req.headers.host ?? '');
    const health = healthAnswer(req.url, o.isReady);
    if (health) return send(res, health.status, health.body, 'text/plain');
    // The status page (HTML) and its stream; / leads there.
    if (o.gateway.pages.handleAdmin(req, res)) return;
    handle(o, req, authorized).then(
      (r) => (typeof r === 'string' ? send(res, 200, r, o.gateway.metrics.registry.contentType) : sendJson(res, 200, r)),
      (err: Error) =>
        err instanceof HttpError ? sendJson(res, err.status, { error: err.message, ...err.detail }, err.headers) : sendJson(res, 500, { error: err.message }),
    );
  });
}

async function handle(o: AdminServerOptions, req: http.IncomingMessage, authorize: (req: http.IncomingMessage) => void): Promise<unknown> {
  const gw = o.gateway;
  const url = new URL(req.url ?? '/', 'http://admin');
  let parts: string[];
  try {
    parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    throw new HttpError(400, 'malformed percent-encoding in the path');
  }
  const method = req.method ?? 'GET';
  const now = Date.now();

  if (method === 'GET' && url.pathname === '/metrics') return gw.metrics.registry.metrics();
  if (method === 'GET' && url.pathname === '/status') {
    return {
      gatewayId: gw.id,
      store: gw.store.kind,
      degraded: gw.placer.isDegraded,
      ready: o.isReady(),
      sockets: gw.tunnels.size,
      rooms: gw.tunnels.roomCount,
    };
  }
  if (method === 'GET' && url.pathname === '/backends') {
    return { backends: gw.pool.backends.map((b) => backendJson(gw, b.id, now)), sockets: gw.tunnels.size, rooms: gw.tunnels.roomCount, degraded: gw.placer.isDegraded };
  }
  if (method === 'GET' && url.pathname === '/events') return { events: gw.events.list() };
  if (parts[0] === 'backends' && parts.length === 2 && method === 'GET') {
    const id = parts[1] as string;
    if (!gw.pool.get(id)) throw new HttpError(404, `no backend "${id}"`);
    return backendJson(gw, id, now);
  }
  if (parts[0] === 'backends' && parts.length === 3 && method === 'POST') {
    authorize(req);
    const id = parts[1] as string;
    const action = parts[2] as string;
    if (!gw.pool.get(id)) throw new HttpError(404, `no backend "${id}"`);
    const body = (await readJson(req)) as { deadlineMs?: unknown };
    let state: { state: AdminState; deadline: number | null; since: number } | null;
    if (action === 'drain') {
      // deadlineMs: null drains with no deadline (rooms leave only as they empty).
      const ms = body.deadlineMs === undefined ? DEFAULT_DRAIN_DEADLINE_MS : body.deadlineMs;
      if (ms !== null && (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)) {
        throw new HttpError(400, 'deadlineMs must be a number of milliseconds >= 0, or null for no deadline');
      }
      state = { state: 'draining', deadline: ms === null ? null : now + ms, since: now };
    } else if (action === 'maintenance') state = { state: 'maintenance', deadline: null, since: now };
    else if (action === 'undrain' || action === 'activate') state = null;
    else throw new HttpError(404, `unknown action "${action}": drain, undrain, maintenance`);
    await gw.setAdminState(id, state).catch((err: Error) => {
      throw new HttpError(503, `placement store unavailable: ${err.message}`);
    });
    return backendJson(gw, id, now);
  }
  if (parts[0] === 'rooms' && parts.length === 2 && method === 'GET') {
    const room = parts[1] as string;
    // The same check as routing: a key the gateway would never route is not looked up (nor sent to the store).
    if (!o.validateRoom(room)) {
      throw new HttpError(400, `invalid room key: it must match room.pattern ${o.roomPattern} and be 1 to ${MAX_ROOM_KEY_LENGTH} characters`, {
        pattern: o.roomPattern,
        maxLength: MAX_ROOM_KEY_LENGTH,
      });
    }
    const e = await gw.placer.explain(room, now, false);
    const d = e.decision;
    return {
      room,
      placement: e.placement,
      cached: e.cached,
      backend: 'route' in d ? d.route : null,
      reason: d.reason,
      wouldPlace: 'route' in d && d.place !== undefined,
      socketsHere: gw.tunnels.socketsInRoom(room),
    };
  }
  throw new HttpError(404, 'not found: GET /metrics /status /backends /backends/ID /events /rooms/ROOM; POST /backends/ID/{drain,undrain,maintenance}');
}

function backendJson(gw: Gateway, id: string, now: number): unknown {
  const b = gw.pool.get(id);
  if (!b) return null;
  return {
    id: b.id,
    url: b.config.url,
    weight: b.config.weight,
    state: b.state(now),
    health: b.health,
    passiveDownUntil: b.downUntil > now ? new Date(b.downUntil).toISOString() : null,
    admin: b.admin ? { ...b.admin, deadline: b.admin.deadline ? new Date(b.admin.deadline).toISOString() : null, since: new Date(b.admin.since).toISOString() } : null,
    removed: b.removed,
    rooms: b.rooms,
    sockets: b.liveSockets,
    inflight: b.inflight,
    healthHistory: gw.health.history(b.id),
  };
}

function readJson(req: http.IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      // Past the cap the rest is read and dropped, so the 413 still reaches the client.
      if (size > MAX_BODY) reject(new HttpError(413, `body over ${MAX_BODY} bytes`));
      else chunks.push(c);
    });
    req.on('end', () => {
      if (size > MAX_BODY) return;
      const text = Buffer.concat(chunks).toString('utf8').trim();
      if (text === '') return resolve({});
      try {
        const v = JSON.parse(text) as unknown;
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
        resolve(v);
      } catch {
        reject(new HttpError(400, 'body must be a JSON object'));
      }
    });
    req.on('error', reject);
  });
}

function send(res: http.ServerResponse, status: number, body: string, type: string, headers: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  send(res, status, `${JSON.stringify(body, null, 2)}\n`, 'application/json', headers);
}
