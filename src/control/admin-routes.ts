// The admin API (admin port, loopback by default): metrics, status, backends, where-is-room, the
// full lobby (every live room with its backend: the operator's view the public reads never give),
// events, and the drain / maintenance controls (token). Never on the public port. Before any
// route, the 404 and a malformed URL included, the Host check against DNS rebinding
// (src/http/host-check.ts) and then /healthz and /readyz are answered (ControlAppOptions.front).
import { adminWriteAuthorizer, byDrainToken, jsonObject } from './admin-writes.js';
import { drainTokenRefusal, type AddressLookup, type DrainFrom } from './drain-scope.js';
import type { AuthThrottle } from '../http/auth-throttle.js';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Errors, errorMessage, type HttpError } from '../http/errors.js';
import type { BackendAdminState } from '../placement/store.js';
import { MAX_ROOM_KEY_LENGTH, type RoomValidator } from '../room/validate.js';
import type { BackendSnapshot, RuntimeView } from '../runtime/views.js';
import type { SharedDataStore } from '../shared-data/store.js';
import { AdminLobbyQuery } from './api-schemas.js';
import { lobbyQuery } from './routes/lobby.js';
import type { ControlApp, RouteConfig } from './app.js';
import { withDrainHandoff } from './routes/handoff.js';

export interface AdminRoutesOptions {
  readonly view: RuntimeView;
  /** The shared store: GET /lobby reads every live room from it. */
  readonly sharedData: SharedDataStore;
  /** Token for writes (Bearer, or Basic password; see src/http/auth.ts); '' refuses every write. */
  readonly token: string;
  /** admin.drainTokens: allowed to drain and undrain only (src/control/drain-scope.ts). */
  readonly drainTokens?: readonly string[];
  /** admin.drainFrom (default 'backend'). */
  readonly drainFrom?: DrainFrom;
  /** Resolves a backend's host name for the drainFrom check (tests). */
  readonly lookup?: AddressLookup;
  /** A cluster worker: the key of the client address its primary forwards (src/http/forwarded-peer.ts). */
  readonly peerKey?: string;
  /** The gateway's room key validator (room.pattern): /rooms/KEY answers only for valid keys. */
  readonly validateRoom: RoomValidator;
  /** room.pattern, to say in the 400 what a key must match. */
  readonly roomPattern: string;
  /** Failed token attempts per client address (auth.maxFailures); null: not limited. */
  readonly throttle?: AuthThrottle | null;
}

const MAX_BODY = 4096;
const DEFAULT_DRAIN_DEADLINE_MS = 10 * 60_000;
const BODY_TIMEOUT_MS = 10_000;
export const ADMIN_ROUTES_HINT = 'not found: GET /metrics /status /backends /backends/ID /events /rooms/ROOM /lobby /cache; POST /backends/ID/{drain,undrain,maintenance} /cache/purge';

const DEADLINE_MESSAGE = 'deadlineMs must be a number of milliseconds >= 0, or null for no deadline';
const DrainBody = z.object({
  deadlineMs: z
    .number({ error: DEADLINE_MESSAGE })
    .min(0, { error: DEADLINE_MESSAGE })
    .nullable()
    .optional()
    .meta({ description: 'Milliseconds until the remaining sockets are closed (default 10 min); null: no deadline, rooms leave only as they empty.' }),
  handoff: z.boolean({ error: 'handoff must be true or false' }).optional().meta({ description: 'Hand off every live room of the backend now, with its state (docs/handoff.md).' }),
});
const IdParams = z.object({ id: z.string() });
const PURGE_MESSAGE = 'give "url" (a path and query, exact), "prefix" (of the path) and/or "room"';
const PurgeBody = z
  .strictObject({
    url: z.string().startsWith('/', { error: 'url must start with "/"' }).optional().meta({ description: 'Every stored answer of this exact target (path and query), any host, room or variant.' }),
    prefix: z.string().startsWith('/', { error: 'prefix must start with "/"' }).optional().meta({ description: 'Every stored answer whose target starts with this.' }),
    room: z.string().min(1).optional().meta({ description: "Only this room's answers (with url or prefix), or all of them." }),
  })
  .refine((b) => b.url !== undefined || b.prefix !== undefined || b.room !== undefined, { error: PURGE_MESSAGE });

export function registerAdminRoutes(app: ControlApp, o: AdminRoutesOptions): void {
  const v = o.view;
  const tokens = { token: o.token, drainTokens: o.drainTokens ?? [] };
  const authorize = adminWriteAuthorizer(tokens, o.throttle);
  const knownBackend = (req: FastifyRequest): HttpError | null => {
    const id = (req.params as { id?: string }).id ?? '';
    return v.backend(id, Date.now()) ? null : noBackend(id);
  };
  const read: RouteConfig = { kind: 'admin' };
  const write: RouteConfig = {
    kind: 'admin',
    authorize,
    precheck: knownBackend,
    body: { cap: MAX_BODY, what: 'body', timeoutMs: BODY_TIMEOUT_MS, excess: 'drain', parse: jsonObject },
  };
  // Drain and undrain: admin.token, or a drain token for the backend it may change.
  const drainWrite: RouteConfig = { ...write, authorize: adminWriteAuthorizer(tokens, o.throttle, 'drain') };
  const drainScope = async (req: FastifyRequest, id: string): Promise<void> => {
    if (!byDrainToken(req)) return;
    const refused = await drainTokenRefusal(req, v.backend(id, Date.now()) as BackendSnapshot, { from: o.drainFrom ?? 'backend', lookup: o.lookup, peerKey: o.peerKey });
    if (refused) throw refused;
  };

  app.get('/metrics', { config: read }, async (_req, reply) => {
    const m = await v.metrics();
    return reply.code(200).headers({ 'Content-Type': m.contentType, 'Cache-Control': 'no-store' }).send(m.text);
  });
  app.get('/status', { config: read }, async () => v.gateway());
  app.get('/backends', { config: read }, async () => {
    const g = v.gateway();
    return { backends: v.backends(Date.now()).map(backendJson), sockets: g.sockets, rooms: g.rooms, degraded: g.degraded };
  });
  app.get('/backends/:id', { config: read, schema: { params: IdParams } }, async (req) => {
    const b = v.backend(req.params.id, Date.now());
    if (!b) throw noBackend(req.params.id);
    return backendJson(b);
  });
  app.get('/events', { config: read }, async () => ({ events: v.events(), pushes: v.pushes(), handoffs: v.handoffs(), backendCalls: v.backendCalls() }));
  app.get('/rooms/:room', { config: read, schema: { params: z.object({ room: z.string() }) } }, async (req) => {
    const room = req.params.room;
    // The same check as routing: a key the gateway would never route is not looked up (nor sent to the store).
    if (!o.validateRoom(room)) {
      throw Errors.invalidRoomKey(`invalid room key: it must match room.pattern ${o.roomPattern} and be 1 to ${MAX_ROOM_KEY_LENGTH} characters`, {
        detail: { pattern: o.roomPattern, maxLength: MAX_ROOM_KEY_LENGTH },
      });
    }
    return v.explainRoom(room, Date.now());
  });

  // Every live room, listed or not, with its backend (the public GET /lobby shows listed rooms only, without backends).
  app.get('/lobby', { config: read, schema: { querystring: AdminLobbyQuery } }, async (req) => {
    const q = lobbyQuery(req.query, null);
    try {
      const [page, online] = await Promise.all([o.sharedData.lobby(q), o.sharedData.online()]);
      return { ...page, online };
    } catch (err) {
      throw Errors.storeUnavailable(`shared store unavailable: ${errorMessage(err)}`);
    }
  });

  app.get('/cache', { config: read }, async () => v.cache() ?? { enabled: false });
  const purge: RouteConfig = { kind: 'admin', authorize, body: write.body };
  app.post('/cache/purge', { config: purge, schema: { body: PurgeBody } }, async (req) => {
    if (v.cache() === null) throw Errors.notFound('the page cache is off: set cache.paths to turn it on');
    return v.purgeCache(req.body);
  });

  const setState = async (id: string, state: BackendAdminState | null): Promise<unknown> => {
    await v.setAdminState(id, state).catch((err: Error) => {
      throw Errors.storeUnavailable(`placement store unavailable: ${err.message}`);
    });
    return backendJson(v.backend(id, Date.now()) as BackendSnapshot);
  };
  app.post('/backends/:id/drain', { config: drainWrite, schema: { params: IdParams, body: DrainBody } }, async (req) => {
    await drainScope(req, req.params.id);
    const now = Date.now();
    // deadlineMs: null drains with no deadline (rooms leave only as they empty).
    const ms = req.body.deadlineMs === undefined ? DEFAULT_DRAIN_DEADLINE_MS : req.body.deadlineMs;
    const answer = await setState(req.params.id, { state: 'draining', deadline: ms === null ? null : now + ms, since: now });
    return req.body.handoff === true ? withDrainHandoff(v, req.params.id, answer) : answer;
  });
  app.post('/backends/:id/maintenance', { config: write, schema: { params: IdParams } }, async (req) =>
    setState(req.params.id, { state: 'maintenance', deadline: null, since: Date.now() }),
  );
  app.post('/backends/:id/undrain', { config: drainWrite, schema: { params: IdParams } }, async (req) => {
    await drainScope(req, req.params.id);
    return setState(req.params.id, null);
  });
  app.post('/backends/:id/activate', { config: write, schema: { params: IdParams } }, async (req) => setState(req.params.id, null));
  app.post('/backends/:id/:action', { config: write, schema: { params: z.object({ id: z.string(), action: z.string() }) } }, async (req) => {
    throw Errors.notFound(`unknown action "${req.params.action}": drain, undrain, maintenance`);
  });
}

function noBackend(id: string): HttpError {
  return Errors.notFound(`no backend "${id}"`);
}

const iso = (ms: number | null): string | null => (ms ? new Date(ms).toISOString() : null);

function backendJson(b: BackendSnapshot): unknown {
  return {
    id: b.id,
    url: b.url,
    weight: b.weight,
    state: b.state,
    health: b.health,
    passiveDownUntil: iso(b.passiveDownUntil),
    admin: b.admin ? { ...b.admin, deadline: iso(b.admin.deadline), since: new Date(b.admin.since).toISOString() } : null,
    removed: b.removed,
    rooms: b.rooms,
    sockets: b.sockets,
    inflight: b.inflight,
    healthHistory: b.healthHistory,
    handoffHooks: b.handoffHooks,
  };
}
