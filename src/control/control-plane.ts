// The control plane: roomgate's own HTTP answers, on fastify. Two apps, neither listening by
// itself: the admin port's (our node:http server hands it every request) and the public port's
// (the public server asks owns(url) and hands it only roomgate's own paths: the API under
// /_roomgate/api, the lobby pages, the status page as status.public allows). Upgrades and proxied
// requests never reach fastify. It sees the running gateway only through a RuntimeView.
//
// The first fastify app of a process costs 100-200 ms of CPU (modules fastify loads on first use,
// zod and swagger compiling): that is paid once when this module is imported (warmUp below), not
// when a gateway builds its control plane with its first health probes in flight. Building the
// apps is asynchronous; requests that arrive before they are ready wait for them.
import { AuthThrottle } from '../http/auth-throttle.js';
import { ROOM_PIN_SCRIPT_PATH } from '../pages/room-pin-script.js';
import { registerScriptRoutes } from './script-routes.js';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TokenCheck } from '../http/auth.js';
import { Errors, errorMessage } from '../http/errors.js';
import { allowedHostSet, hostRefusal } from '../http/host-check.js';
import { StreamSlots } from '../http/stream-slots.js';
import type { LoadedConfig } from '../config/load.js';
import { pino } from 'pino';
import type { Logger } from '../observability/logger.js';
import { createRoomValidator } from '../room/validate.js';
import type { RuntimeView } from '../runtime/views.js';
import { healthAnswer } from '../http/health-answer.js';
import type { SharedDataStore } from '../shared-data/store.js';
import { ADMIN_ROUTES_HINT, registerAdminRoutes } from './admin-routes.js';
import { API_PREFIX, apiRouteLabel } from './api-routes.js';
import { registerHandoffRoutes } from './routes/handoff.js';
import type { AddressLookup } from './drain-scope.js';
import { clip, createControlApp, pathOf, type ControlApp, type RouteEntry } from './app.js';
import type { LobbyStream } from './lobby-stream.js';
import { registerOpenApi } from './openapi.js';
import { LOBBY_PATHS, STATUS_PATHS, registerLobbyRoutes, registerStatusRoutes } from './page-routes.js';
import { registerPublicApi } from './routes/public-api.js';
import type { StatusStream } from './status-stream.js';

/** Client addresses the failed-token throttle remembers at once (oldest dropped first). */
const AUTH_ADDRESSES = 10_000;

export interface ControlPlaneOptions {
  readonly config: Pick<LoadedConfig, 'admin' | 'api' | 'status' | 'room' | 'push' | 'auth'>;
  /** A request answered 429 by the failed-token throttle (metrics), by surface. */
  readonly onAuthThrottled?: (surface: string) => void;
  readonly view: RuntimeView;
  readonly sharedData: SharedDataStore;
  readonly logger: Logger;
  /** Test knobs: the status stream's compare interval, the lobby stream's ping, the body deadline. */
  readonly statusIntervalMs?: number;
  readonly streamPingMs?: number;
  readonly bodyTimeoutMs?: number;
  /** Test knob: resolves a backend's host name for admin.drainFrom (default: the system's lookup). */
  readonly addressLookup?: AddressLookup;
  /** A cluster worker: the key of the client address its primary forwards (src/http/forwarded-peer.ts). */
  readonly adminPeerKey?: string;
}

interface Apps {
  readonly publicApp: ControlApp;
  readonly publicRoutes: readonly RouteEntry[];
  readonly adminApp: ControlApp | null;
  readonly adminRoutes: readonly RouteEntry[];
  readonly lobbyStream: LobbyStream | null;
  readonly statusStreams: readonly StatusStream[];
}

export class ControlPlane {
  /** The admin listener (not listening until the gateway starts it); null with admin.enabled false. */
  readonly adminServer: http.Server | null;
  /** Hands a public-port request that owns() claims to the public app. */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void;
  private readonly api: boolean;
  private readonly pagePaths: ReadonlySet<string>;
  private readonly building: Promise<Apps>;
  private apps: Apps | null = null;
  private streamsClosed = false;

  constructor(private readonly o: ControlPlaneOptions) {
    const { config } = o;
    this.api = config.api.enabled;
    this.pagePaths = new Set([
      ...(config.api.enabled && config.api.publicReads ? LOBBY_PATHS : []),
      ...(config.status.public !== 'off' ? STATUS_PATHS : []),
      ...(config.room.sources.includes('pin') ? [ROOM_PIN_SCRIPT_PATH] : []),
    ]);
    this.handle = (req, res) => this.route(false, req, res);
    this.adminServer = config.admin.enabled ? http.createServer((req, res) => this.route(true, req, res)) : null;
    this.building = this.build();
    this.building.catch((err: unknown) => o.logger.error({ err: errorMessage(err) }, 'control plane failed to start'));
  }

  /**
   * Whether a public-port request is roomgate's own. Every proxied request passes here: one
   * prefix check unless the path starts with /_roomgate.
   */
  owns(url: string): boolean {
    if (!url.startsWith('/_roomgate')) return false;
    if (this.api && url.startsWith(API_PREFIX)) return true;
    return this.pagePaths.has(pathOf(url));
  }

  /** Both apps are built and ready. */
  async ready(): Promise<void> {
    await this.building;
  }

  get publicApp(): ControlApp {
    return this.built().publicApp;
  }

  /** The public app's routes as fastify registered them (url, methods, kind). */
  get publicRoutes(): readonly RouteEntry[] {
    return this.built().publicRoutes;
  }

  get adminApp(): ControlApp | null {
    return this.built().adminApp;
  }

  get adminPort(): number | null {
    return (this.adminServer?.address() as AddressInfo | null)?.port ?? null;
  }

  /** Open event streams (lobby and status, both ports). */
  get streams(): number {
    const a = this.apps;
    return a ? (a.lobbyStream?.size ?? 0) + a.statusStreams.reduce((n, s) => n + s.size, 0) : 0;
  }

  /** Ends every event stream (shutdown): they would otherwise hold connections open. Later stream requests get 503. */
  closeStreams(): void {
    this.streamsClosed = true;
    if (!this.apps) return;
    this.apps.lobbyStream?.close();
    for (const s of this.apps.statusStreams) s.close();
  }

  /** Streams, then both apps (neither listens: nothing to wait for). The admin listener is the gateway's to close. */
  async close(): Promise<void> {
    this.closeStreams();
    const apps = await this.building.catch(() => null);
    if (apps) await Promise.all([apps.publicApp.close(), apps.adminApp?.close()]);
  }

  private built(): Apps {
    if (!this.apps) throw new Error('control plane not ready yet: await ready()');
    return this.apps;
  }

  private route(admin: boolean, req: IncomingMessage, res: ServerResponse): void {
    const apps = this.apps;
    const app = apps && (admin ? apps.adminApp : apps.publicApp);
    if (app) return app.routing(req, res);
    this.building.then(
      () => this.route(admin, req, res),
      () => res.destroy(),
    );
  }

  private async build(): Promise<Apps> {
    const { config, logger, view, sharedData } = this.o;
    const o = this.o;
    const validateRoom = createRoomValidator(config.room.pattern);
    const statusStreams: StatusStream[] = [];
    const knobs = {
      ...(o.statusIntervalMs === undefined ? {} : { intervalMs: o.statusIntervalMs }),
    };

    // The public port: api.maxStreams slots shared by the lobby and the public status streams.
    const publicSlots = new StreamSlots(config.api.maxStreams);
    // One table for every surface and both ports: guesses at one token count against all of them.
    const throttle = new AuthThrottle({ maxFailures: config.auth.maxFailures, windowMs: config.auth.windowMs, maxAddresses: AUTH_ADDRESSES, onThrottled: o.onAuthThrottled });
    const pub = createControlApp({
      logger,
      prettyJson: false,
      exposeInternalErrors: false,
      internalErrorLog: 'public api: internal error',
      routeLabel: (req) => apiRouteLabel(req.url),
      notFound: (req) => Errors.notFound(`no route ${clip(pathOf(req.url))}: see ${API_PREFIX}/openapi.json`),
    });
    let lobbyStream: LobbyStream | null = null;
    if (config.api.enabled) {
      await registerOpenApi(pub.app);
      lobbyStream = (
        await registerPublicApi(pub.app, {
          api: {
            store: sharedData,
            tokens: config.api.tokens,
            throttle,
            validateRoom,
            publicReads: config.api.publicReads,
            listing: { patterns: config.api.listRooms },
            maxMetaBytes: config.api.maxMetaBytes,
            streamIntervalMs: config.api.streamIntervalMs,
            streamSlots: publicSlots,
            logger,
            streamPingMs: o.streamPingMs,
            bodyTimeoutMs: o.bodyTimeoutMs,
          },
          push: {
            view,
            store: sharedData,
            idempotencyWindowMs: config.push.idempotencyWindowMs,
            tokens: config.push.tokens,
            throttle,
            validateRoom,
            maxBytes: config.push.maxBytes,
            bodyTimeoutMs: o.bodyTimeoutMs,
          },
        })
      ).stream;
      if (config.api.publicReads) {
        registerLobbyRoutes(pub.app, { sharedData, listing: { patterns: config.api.listRooms }, validateRoom, roomPagePaths: config.room.pagePaths, roomPathPrefix: config.room.pathPrefix });
      }
    }
    if (config.room.sources.includes('pin')) registerScriptRoutes(pub.app);
    if (config.status.public !== 'off') {
      const token = config.status.public === 'token' ? new TokenCheck([config.admin.token]) : null;
      statusStreams.push(registerStatusRoutes(pub.app, { view, internal: false, slots: publicSlots, token, throttle, prettyJson: false, ...knobs }));
    }

    let adm: ReturnType<typeof createControlApp> | null = null;
    if (config.admin.enabled) {
      const allowedHosts = allowedHostSet(config.admin.allowedHosts);
      adm = createControlApp({
        logger,
        prettyJson: true,
        exposeInternalErrors: true,
        internalErrorLog: 'admin: internal error',
        notFound: () => Errors.notFound(ADMIN_ROUTES_HINT),
        // Before anything else, the status page included: a rebound name never reads a byte.
        front: (req) => {
          const refused = hostRefusal(req.headers.host, allowedHosts);
          if (refused) return { error: refused };
          const health = healthAnswer(req.url, () => view.gateway().ready);
          return health ? { text: health } : null;
        },
      });
      const tokens = { token: config.admin.token, drainTokens: config.admin.drainTokens };
      registerAdminRoutes(adm.app, { view, sharedData, ...tokens, drainFrom: config.admin.drainFrom, lookup: o.addressLookup, peerKey: o.adminPeerKey, throttle, validateRoom, roomPattern: config.room.pattern });
      registerHandoffRoutes(adm.app, { view, ...tokens, throttle, validateRoom, roomPattern: config.room.pattern });
      // The admin port has slots of its own: public clients can never take the operator's status page away.
      statusStreams.push(registerStatusRoutes(adm.app, { view, internal: true, slots: new StreamSlots(config.api.maxStreams), prettyJson: true, ...knobs }));
    }
    await Promise.all([pub.app.ready(), adm?.app.ready()]);
    this.apps = {
      publicApp: pub.app,
      publicRoutes: pub.routes,
      adminApp: adm?.app ?? null,
      adminRoutes: adm?.routes ?? [],
      lobbyStream,
      statusStreams,
    };
    // A stop that came first: no stream may open after it.
    if (this.streamsClosed) this.closeStreams();
    return this.apps;
  }
}

/** One throwaway app with every part the real ones use, so that the first gateway's is cheap. */
async function warmUp(): Promise<void> {
  const logger = pino({ enabled: false });
  const { app } = createControlApp({ logger, prettyJson: false, exposeInternalErrors: false, internalErrorLog: '', notFound: () => Errors.notFound() });
  await registerOpenApi(app);
  await app.ready();
  // The document's generator too (zod to JSON Schema of every component).
  await app.inject({ method: 'GET', url: `${API_PREFIX}/openapi.json` });
  await app.close();
}
await warmUp();
