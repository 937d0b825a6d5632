// Composition root: builds every part from the configuration with explicit dependencies (so a
// test can run two gateways in one process) and owns start, reload and stop.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { MemorySharedDataStore } from './shared-data/memory-store.js';
import { RedisSharedDataStore } from './shared-data/redis-store.js';
import type { SharedDataStore } from './shared-data/store.js';
import { DnsDiscovery } from './backends/discovery.js';
import { EventLog } from './backends/events.js';
import { HealthChecker } from './backends/health.js';
import { BackendPool, type Backend } from './backends/pool.js';
import type { LoadedConfig, ResolvedBackend } from './config/load.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { MemoryPlacementStore } from './placement/memory-store.js';
import { Placer } from './placement/placer.js';
import { RedisPlacementStore } from './placement/redis-store.js';
import type { BackendAdminState, PlacementStore } from './placement/store.js';
import { Admission } from './proxy/admission.js';
import { Forwarding } from './proxy/forwarded.js';
import { HttpProxy } from './proxy/http-proxy.js';
import { Router } from './proxy/router.js';
import { TunnelRegistry } from './proxy/tunnels.js';
import { UpgradeProxy } from './proxy/upgrade-proxy.js';
import { createKeyExtractor } from './room/extract.js';
import { createRoomSigner, type RoomSigner } from './room/signing.js';
import { withVerifyCache } from './room/verify-cache.js';
import { createRoomValidator } from './room/validate.js';
import { ControlPlane } from './control/control-plane.js';
import { createPublicServer } from './server/public-server.js';
import type { BackendSnapshot, RuntimeView } from './runtime/views.js';
import { StaticFiles } from './static/serve.js';

export interface GatewayOptions {
  readonly logger: Logger;
  /** Shared in-memory store state (several gateways in one process, for tests), or a cluster worker's IPC store. */
  readonly store?: PlacementStore;
  /** Presence, lobby and leaderboards from elsewhere (a cluster worker's IPC store); default per the config. */
  readonly sharedData?: SharedDataStore;
}

/** The cookie signer for a configuration; null when the cookie is a plain room key. */
export function signerFor(config: LoadedConfig, secrets: readonly string[]): RoomSigner | null {
  if (!config.cookie.signed) return null;
  return createRoomSigner({
    secrets,
    format: config.cookie.format,
    cookieName: config.cookie.name,
    salt: config.cookie.salt,
    maxAgeS: config.cookie.maxAgeS,
  });
}

export class Gateway {
  readonly id = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  readonly metrics: Metrics;
  readonly pool: BackendPool;
  readonly tunnels = new TunnelRegistry();
  readonly events = new EventLog();
  readonly store: PlacementStore;
  /** Presence, lobby and leaderboards. */
  readonly sharedData: SharedDataStore;
  /** The admin API, the public API and the pages (src/control/), on fastify; proxied traffic never reaches it. */
  readonly control: ControlPlane;
  readonly placer: Placer;
  readonly health: HealthChecker;
  readonly admission: Admission;
  /** What the control plane (admin API, pages) sees and may ask. */
  readonly view: RuntimeView;
  private readonly discovery: DnsDiscovery | null;
  private readonly server: Server;
  private readonly admin: Server | null;
  private readonly httpProxy: HttpProxy;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private presenceFailing = false;
  private ready = false;
  private stopping: Promise<void> | null = null;

  constructor(
    public config: LoadedConfig,
    private readonly opts: GatewayOptions,
  ) {
    const { logger } = opts;
    this.view = this.makeView();
    const metrics = (this.metrics = createMetrics(() => this.pool.backends.map((b) => [b.id, b.liveSockets] as [string, number])));
    this.health = new HealthChecker(
      {
        path: config.health.path,
        intervalMs: config.health.intervalMs,
        timeoutMs: config.health.timeoutMs,
        rise: config.health.rise,
        fall: config.health.fall,
        hostHeader: config.health.host ?? undefined,
      },
      (ev) => {
        const b = this.pool.get(ev.id);
        if (!b) return;
        b.health = ev.state;
        b.healthReason = ev.reason;
        metrics.backendStateChanges.inc({ backend: ev.id, state: ev.state, via: 'active' });
        this.events.add(ev.state, ev.id, ev.reason);
        logger.warn({ backend: ev.id, state: ev.state, reason: ev.reason }, `backend ${ev.state}`);
        if (ev.state !== 'down' || b.liveSockets === 0) return;
        // health.onDown 'keep' (default): a failed check is weaker evidence than sockets that carry
        // frames; they live until they end by themselves (a dead backend's connections fail and
        // close at once) or the operator drains the backend, and decide() keeps their rooms' new
        // sockets with them.
        if (config.health.onDown === 'keep') {
          logger.warn({ backend: ev.id, sockets: b.liveSockets }, 'backend down by its health checks: no new rooms; its live sockets are kept (health.onDown: keep)');
          return;
        }
        // 'close': a backend that fails its checks is dead or hung for this gateway: closing its
        // sockets lets their clients reconnect once the room is re-placed.
        // Panic guard: with no other backend routable, the fault is likelier on this side (this
        // gateway overloaded, its network) than in every backend at once, and closed clients could
        // only reconnect into 503s: the sockets are kept until a backend is routable again.
        const now = Date.now();
        if (!this.pool.backends.some((o) => o.id !== ev.id && o.routable(now))) {
          logger.warn({ backend: ev.id, sockets: b.liveSockets }, 'backend down but no other backend is up: its live sockets are kept');
        } else {
          const closed = this.tunnels.closeBackend(ev.id);
          logger.warn({ backend: ev.id, closed }, 'closed sockets of a down backend');
        }
      },
    );
    this.pool = new BackendPool([], config.proxy.passiveDownMs, {
      onPassive: (b, state, reason) => {
        metrics.backendStateChanges.inc({ backend: b.id, state, via: 'passive' });
        logger.warn({ backend: b.id, state, reason }, `backend passively marked ${state}`);
        if (state === 'down') {
          this.health.reportFailure(b.id, reason);
          this.events.add('down', b.id, `passive: ${reason}`);
        }
      },
      onMembership: (added, removed) => {
        for (const b of added) this.events.add('joined', b.id, b.config.url);
        for (const b of removed) this.events.add('removed', b.id, b.config.url);
        if (added.length || removed.length) {
          logger.info({ added: added.map((b) => b.id), removed: removed.map((b) => b.id) }, 'backend list changed');
        }
        this.health.setTargets(this.pool.backends.filter((b) => !b.removed).map((b) => ({ id: b.id, host: b.config.host, port: b.config.port })));
      },
    });
    this.pool.setBackends(config.backends);

    const redisConfigured = Boolean(config.redis.url) || config.redis.sentinels.length > 0 || config.redis.clusterNodes.length > 0;
    // What both Redis stores share: where Redis is, the key prefix, fail-fast timing, logging.
    const redis = {
      url: config.redis.url,
      sentinels: config.redis.sentinels,
      sentinelName: config.redis.sentinelName,
      clusterNodes: config.redis.clusterNodes,
      keyPrefix: config.redis.keyPrefix,
      gatewayId: this.id,
      commandTimeoutMs: config.redis.commandTimeoutMs,
      onLog: (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => logger[level](fields ?? {}, msg),
    };
    this.store =
      opts.store ??
      (redisConfigured
        ? new RedisPlacementStore({ ...redis, timing: { idleTtlMs: config.placement.idleTtlMs, gatewayTtlMs: config.placement.gatewayTtlMs } })
        : new MemoryPlacementStore(this.id, { idleTtlMs: config.placement.idleTtlMs, gatewayTtlMs: config.placement.gatewayTtlMs }));

    this.sharedData =
      opts.sharedData ??
      (redisConfigured
        ? new RedisSharedDataStore({ ...redis, presenceTtlMs: config.presence.ttlMs })
        : new MemorySharedDataStore(this.id, { presenceTtlMs: config.presence.ttlMs }));
    const validateRoom = createRoomValidator(config.room.pattern);
    this.control = new ControlPlane({ config, view: this.view, sharedData: this.sharedData, logger });

    this.placer = new Placer({
      store: this.store,
      pool: this.pool,
      tunnels: this.tunnels,
      logger,
      noRoom: config.room.noRoom,
      boundFactor: config.placement.boundedLoadFactor,
      loadMetric: config.placement.loadMetric,
      retryAfterS: config.proxy.retryAfterS,
      onDown: config.health.onDown,
      cacheTtlMs: config.placement.cacheTtlMs,
      idleTtlMs: config.placement.idleTtlMs,
      onPlaced: (room, from, to, forced, liveMoved) => {
        metrics.placements.inc({ kind: from === null ? 'new' : forced ? 'forced-move' : 'move' });
        if (from !== null) {
          this.events.moved(liveMoved);
          logger.info({ room, from, to, forced }, 'room placed on another backend');
        }
      },
      onDegraded: (degraded) => metrics.degraded.set(degraded ? 1 : 0),
    });
    this.store.subscribe((ev) => {
      if (ev.type !== 'backend-state') return;
      const kind = ev.state?.state ?? 'active';
      this.events.add(kind, ev.id, ev.state?.deadline ? `deadline ${new Date(ev.state.deadline).toISOString()}` : '');
      logger.warn({ backend: ev.id, state: kind, deadline: ev.state?.deadline ?? null }, 'backend administrative state changed');
    });

    let secrets = config.cookie.secrets;
    if (config.cookie.signed && secrets.length === 0) {
      secrets = [randomBytes(32).toString('base64url')];
      logger.warn(
        "no cookie secret configured (cookie.secrets or ROOMGATE_COOKIE_SECRETS): using a random one; room cookies will not survive a restart and gateways will not accept each other's cookies",
      );
    }
    const signer = signerFor(config, secrets);
    const router = new Router({
      extractKey: createKeyExtractor({
        sources: config.room.sources,
        validate: validateRoom,
        queryParam: config.room.queryParam,
        pathPrefix: config.room.pathPrefix,
        pagePaths: config.room.pagePaths,
        cookieName: config.cookie.name,
        // Verified cookies are reused for a second: no HMAC per request of a known room.
        signer: signer && withVerifyCache(signer, { maxEntries: 10_000, ttlMs: 1_000 }),
      }),
      placer: this.placer,
      pool: this.pool,
      roomHeader: config.room.header.toLowerCase(),
      metrics,
      logger,
    });
    const forwarding = new Forwarding(config.proxy.trustedProxies);
    this.httpProxy = new HttpProxy({
      router,
      pool: this.pool,
      forwarding,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      responseTimeoutMs: config.proxy.responseTimeoutMs,
      maxIdleSocketsPerBackend: config.proxy.maxIdleSocketsPerBackend,
      roomCookie: config.cookie.setOnPages
        ? {
            name: config.cookie.name,
            maxAgeS: config.cookie.maxAgeS,
            encode: signer ? (room, now) => signer.sign(room, now) : (room) => room,
          }
        : null,
      metrics,
      logger,
    });
    this.admission = new Admission({
      maxInflight: config.admission.maxInflightUpgrades,
      perSecond: config.admission.upgradesPerSecond,
      retryAfterS: config.admission.retryAfterS,
    });
    const upgradeProxy = new UpgradeProxy({
      router,
      pool: this.pool,
      forwarding,
      tunnels: this.tunnels,
      admission: this.admission,
      placementOf: (room) => this.placer.cachedPlacement(room)?.backend ?? null,
      websocketPaths: config.proxy.websocketPaths,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      responseTimeoutMs: config.proxy.responseTimeoutMs,
      idleTimeoutMs: config.proxy.websocketIdleTimeoutMs,
      metrics,
      logger,
    });
    // Static mounts are served here, never proxied (the directories were checked at load).
    const statics =
      config.static.mounts.length > 0
        ? new StaticFiles({
            mounts: config.static.mounts,
            maxAgeS: config.static.maxAgeS,
            hashedNames: config.static.hashedNames,
            onResponse: (status) => metrics.staticResponses.inc({ status: String(status) }),
            logger,
          })
        : null;
    const isReady = (): boolean => this.ready;
    this.server = createPublicServer({
      maxHeaderBytes: config.listen.maxHeaderBytes,
      maxHeaders: config.listen.maxHeaders,
      headersTimeoutMs: config.listen.headersTimeoutMs,
      requestTimeoutMs: config.listen.requestTimeoutMs,
      keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
      isReady,
      onRequest: (req, res) => {
        // roomgate's own paths (control plane) and static mounts are answered here; everything else is the app's.
        const url = req.url ?? '/';
        if (this.control.owns(url)) this.control.handle(req, res);
        else if (statics?.owns(url)) statics.handle(req, res);
        else this.httpProxy.handle(req, res);
      },
      onUpgrade: (req, socket, head) => upgradeProxy.handle(req, socket, head),
      metrics,
      logger,
    });
    this.admin = this.control.adminServer;
    const dns = config.discovery.dns;
    this.discovery = dns
      ? new DnsDiscovery(
          { name: dns.name, type: dns.type, port: dns.port, intervalMs: dns.intervalMs, servers: dns.servers },
          (backends) => this.pool.setBackends(backends),
          (err) => logger.warn({ err: err.message }, 'DNS discovery failed; keeping the last backend list'),
        )
      : null;
  }

  private makeView(): RuntimeView {
    const snapshot = (id: string, now: number): BackendSnapshot | null => {
      const b = this.pool.get(id);
      if (!b) return null;
      return {
        id: b.id,
        url: b.config.url,
        weight: b.config.weight,
        state: b.state(now),
        health: b.health,
        passiveDownUntil: b.downUntil > now ? b.downUntil : null,
        admin: b.admin,
        removed: b.removed,
        rooms: b.rooms,
        sockets: b.liveSockets,
        inflight: b.inflight,
        healthHistory: this.health.history(b.id),
      };
    };
    return {
      gateway: () => ({
        gatewayId: this.id,
        store: this.store.kind,
        degraded: this.placer.isDegraded,
        ready: this.ready,
        sockets: this.tunnels.size,
        rooms: this.tunnels.roomCount,
      }),
      backends: (now) => this.pool.backends.map((b) => snapshot(b.id, now) as BackendSnapshot),
      backend: snapshot,
      events: () => this.events.list(),
      explainRoom: async (room, now) => {
        const e = await this.placer.explain(room, now, false);
        const d = e.decision;
        return {
          room,
          placement: e.placement,
          cached: e.cached,
          backend: 'route' in d ? d.route : null,
          reason: d.reason,
          wouldPlace: 'route' in d && d.place !== undefined,
          socketsHere: this.tunnels.socketsInRoom(room),
        };
      },
      setAdminState: (id, state) => this.setAdminState(id, state),
      metrics: async () => ({ contentType: this.metrics.registry.contentType, text: await this.metrics.registry.metrics() }),
    };
  }

  async start(): Promise<void> {
    const { listen, admin } = this.config;
    const { logger } = this.opts;
    try {
      if (this.discovery) this.pool.setBackends(await this.discovery.start());
      // Not fatal: without Redis the gateway routes from its cache and the ring, the API answers
      // 503, and both stores keep reconnecting by themselves.
      const connects: Promise<void>[] = [];
      if (this.store instanceof RedisPlacementStore) connects.push(this.store.connect());
      if (this.sharedData instanceof RedisSharedDataStore) connects.push(this.sharedData.connect());
      const failed = (await Promise.allSettled(connects)).find((r) => r.status === 'rejected');
      if (failed) logger.error({ err: String((failed as PromiseRejectedResult).reason?.message ?? failed) }, 'Redis unreachable at start: degraded mode');
      await listenOn(this.server, listen.host, listen.port);
      // Exclusive: a cluster worker's admin listener is its own, never shared round-robin.
      if (this.admin) await listenOn(this.admin, admin.host, admin.port, true);
    } catch (err) {
      // Half-started is not started: release whatever did bind, so the process can exit.
      await this.release();
      throw err;
    }
    this.metrics.degraded.set(this.placer.isDegraded ? 1 : 0);
    this.heartbeatTimer = setInterval(() => void this.tick(), this.config.placement.heartbeatMs);
    this.heartbeatTimer.unref();
    void this.tick();
    this.ready = true;
    logger.info(
      {
        port: this.port,
        host: listen.host,
        adminPort: this.adminPort,
        gatewayId: this.id,
        store: this.store.kind,
        backends: this.pool.backends.map((b) => `${b.id}=${b.config.url}`),
      },
      'listening',
    );
  }

  /** Every heartbeat: exchange live rooms and loads with the store, publish presence, enforce drain deadlines. */
  private async tick(): Promise<void> {
    const now = Date.now();
    const live = this.tunnels.liveRooms();
    await Promise.all([this.placer.heartbeat(now, live), this.publishPresence(live)]);
    for (const b of this.pool.backends) this.enforceDrainDeadline(b, now);
    this.pool.sweep();
  }

  /**
   * One batched write per heartbeat, whatever the number of sockets: the socket path itself never
   * talks to the store. After an outage the next heartbeat makes the counts right again.
   */
  private async publishPresence(live: ReturnType<TunnelRegistry['liveRooms']>): Promise<void> {
    try {
      await this.sharedData.publishPresence(live, this.config.presence.ttlMs);
      if (this.presenceFailing) this.opts.logger.warn('presence published again: shared data store reachable');
      this.presenceFailing = false;
    } catch (err) {
      if (!this.presenceFailing) this.opts.logger.error({ err: (err as Error).message }, 'presence not published: shared data store unreachable (routing is unaffected)');
      this.presenceFailing = true;
    }
  }

  /**
   * A drain deadline that passed, or maintenance: the backend is gone for every gateway, so its
   * remaining sockets are closed and their rooms placed elsewhere on reconnect. (A backend only
   * removed from the list keeps its sockets: a reload never drops one by itself.)
   */
  private enforceDrainDeadline(b: Backend, now: number): void {
    if (b.liveSockets === 0 || b.removed || !b.gone(now)) return;
    const closed = this.tunnels.closeBackend(b.id);
    const why = b.admin?.state === 'maintenance' ? 'maintenance' : 'drain deadline passed';
    this.events.add(b.admin?.state === 'maintenance' ? 'maintenance' : 'drain-deadline', b.id, `closed ${closed} sockets`);
    this.opts.logger.warn({ backend: b.id, closed }, `${why}: closed the remaining sockets; their rooms are placed elsewhere`);
  }

  /** Sets a backend's administrative state for every gateway sharing the store. */
  async setAdminState(id: string, state: BackendAdminState | null): Promise<void> {
    await this.store.setBackendState(id, state);
    const b = this.pool.get(id);
    if (b) b.admin = state;
  }

  /** SIGHUP: applies a new configuration's backend list (static); the rest needs a restart. */
  reload(next: LoadedConfig): { applied: string[]; needsRestart: string[] } {
    const applied: string[] = [];
    const needsRestart: string[] = [];
    for (const key of Object.keys(next) as (keyof LoadedConfig)[]) {
      if (JSON.stringify(next[key]) === JSON.stringify(this.config[key])) continue;
      if (key === 'backends' && !this.discovery) {
        this.pool.setBackends(next.backends as ResolvedBackend[]);
        applied.push(key);
      } else needsRestart.push(key);
    }
    this.config = { ...this.config, backends: next.backends };
    this.opts.logger.warn({ applied, needsRestart }, 'configuration reloaded');
    return { applied, needsRestart };
  }

  get port(): number {
    return (this.server.address() as AddressInfo | null)?.port ?? 0;
  }

  get adminPort(): number | null {
    return this.admin ? ((this.admin.address() as AddressInfo | null)?.port ?? null) : null;
  }

  get isReady(): boolean {
    return this.ready;
  }

  /**
   * Graceful stop: readiness goes false, after readinessDelayMs the listener closes, live sockets
   * get graceMs to end by themselves, then whatever is left is closed.
   */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    const { logger } = this.opts;
    const { readinessDelayMs, graceMs } = this.config.shutdown;
    this.ready = false;
    logger.info({ sockets: this.tunnels.size, readinessDelayMs, graceMs }, 'stopping: readiness is now false');
    if (readinessDelayMs > 0) await sleep(readinessDelayMs);
    this.control.closeStreams(); // lobby and status streams would otherwise hold connections open
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (this.tunnels.size > 0 && Date.now() < deadline) await sleep(Math.min(100, deadline - Date.now()));
    if (this.tunnels.size > 0) logger.info({ sockets: this.tunnels.size }, 'grace period over: closing remaining sockets');
    this.tunnels.destroyAll();
    // Requests still in flight on keep-alive connections are cut at the same deadline.
    this.server.closeAllConnections();
    await closed;
    await this.release();
    logger.info('stopped');
  }

  /** Timers, checks, store connections, agents and the admin listener. */
  private async release(): Promise<void> {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.health.stop();
    this.discovery?.stop();
    this.placer.close();
    this.httpProxy.close();
    await this.control.close();
    if (this.server.listening) this.server.close();
    // A clean stop removes this gateway's presence at once instead of waiting for it to expire.
    await this.sharedData.withdrawPresence().catch(() => undefined);
    await Promise.all([this.store.close().catch(() => undefined), this.sharedData.close().catch(() => undefined)]);
    if (this.admin?.listening) {
      await new Promise<void>((resolve) => {
        this.admin?.close(() => resolve());
        this.admin?.closeAllConnections();
      });
    }
  }
}

function listenOn(server: Server, host: string, port: number, exclusive = false): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen({ port, host, exclusive }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
