// Composition root: builds every part from the configuration with explicit dependencies (so a
// test can run two gateways in one process), wires them, and owns start, reload and stop. No
// rule lives here: the runtime's rules are in src/runtime/ (supervisor, placer, pool), the
// data plane's in src/proxy/, the control plane's in its own modules.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { MemorySharedDataStore } from './shared-data/memory-store.js';
import { RedisSharedDataStore } from './shared-data/redis-store.js';
import type { SharedDataStore } from './shared-data/store.js';
import { DnsDiscovery } from './backends/discovery.js';
import { EventLog } from './runtime/events.js';
import { PushLog } from './runtime/push-log.js';
import { HealthChecker } from './backends/health.js';
import { BACKEND_TLS_UNVERIFIED, loadBackendTls } from './backends/backend-tls.js';
import { BackendPool } from './runtime/pool.js';
import type { LoadedConfig, ResolvedBackend } from './config/load.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type BackendGaugeReading, type Metrics } from './observability/metrics.js';
import { History, type HistoryReading } from './observability/history.js';
import { counterTotals } from './observability/history-reading.js';
import { MemoryPlacementStore } from './placement/memory-store.js';
import { Placer } from './runtime/placer.js';
import { RedisPlacementStore } from './placement/redis-store.js';
import { loadRedisTls } from './redis/redis-tls.js';
import type { BackendAdminState, PlacementStore } from './placement/store.js';
import { Supervisor } from './runtime/supervisor.js';
import { createRuntimeView, setAdminState } from './runtime/runtime-view.js';
import { Admission } from './proxy/admission.js';
import { Forwarding } from './proxy/forwarded.js';
import { HttpProxy } from './proxy/http-proxy.js';
import { Router } from './proxy/router.js';
import { TunnelRegistry } from './runtime/tunnels.js';
import { UpgradeProxy } from './proxy/upgrade-proxy.js';
import { createKeyExtractor } from './room/extract.js';
import { createRoomSigner, type RoomSigner } from './room/signing.js';
import { withVerifyCache } from './room/verify-cache.js';
import { createRoomValidator } from './room/validate.js';
import { ControlPlane } from './control/control-plane.js';
import { createPublicServer } from './server/public-server.js';
import { LeanFront } from './server/lean-connection.js';
import { readErrorPages, Refuser } from './proxy/refuser.js';
import { createMethodPolicy } from './http/methods.js';
import { createTargetRule } from './http/target.js';
import { healthAnswer } from './http/health-answer.js';
import { LeanPages } from './proxy/lean-pages.js';
import type { RoomCookieSettings } from './proxy/page-cookie.js';
import { createRedirectServer } from './server/redirect-server.js';
import { hstsValue, loadTls, tlsSettings, TlsReloader } from './server/tls-config.js';
import { H2Front } from './server/h2-front.js';
import { applyConnectionLimits, type PublicLimits } from './server/connection-limit.js';
import { newTicketKeys, startTicketKeyRotation } from './server/ticket-keys.js';
import type { RuntimeView } from './runtime/views.js';
import { StaticFiles } from './static/serve.js';
import { PageCache } from './cache/page-cache.js';
import { PushDelivery } from './runtime/push.js';
import { createHandoffRuntime, type HandoffRuntime } from './runtime/handoff-setup.js';

export interface GatewayOptions {
  readonly logger: Logger;
  /** Shared in-memory store state (several gateways in one process, for tests), or a cluster worker's IPC store. */
  readonly store?: PlacementStore;
  /** Presence, lobby and leaderboards from elsewhere (a cluster worker's IPC store); default per the config. */
  readonly sharedData?: SharedDataStore;
  /**
   * A cluster worker with balance 'kernel': binds the public port itself with SO_REUSEPORT, beside
   * the other workers, instead of sharing the primary's listening socket.
   */
  readonly reusePort?: boolean;
  /** TLS session ticket keys shared with the other workers (48 bytes); default: this process's own. */
  readonly tlsTicketKeys?: Buffer;
  /** A cluster worker: its primary rotates the ticket keys (rotateTicketKeys), not a timer here. */
  readonly ticketKeysFromPrimary?: boolean;
  /** The page cache's clock for freshness and grace (ms); tests move it. Default Date.now. */
  readonly cacheClock?: () => number;
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
  /** The registry a cluster primary merges from its workers; the only part read from outside. */
  readonly metrics: Metrics;
  /** The last 15 minutes of figures (status page plots); a cluster worker hands it the merged one. */
  readonly history: History;
  // Everything below is owned here and reached from outside only through `view` (the control
  // plane's port: snapshots and named commands), so a reader finds each state's one owner.
  private readonly pool: BackendPool;
  private readonly tunnels: TunnelRegistry;
  private readonly events = new EventLog();
  private readonly pushLog = new PushLog();
  private readonly store: PlacementStore;
  /** Presence, lobby and leaderboards. */
  private readonly sharedData: SharedDataStore;
  /** The admin API, the public API and the pages (src/control/), on fastify; proxied traffic never reaches it. */
  private readonly control: ControlPlane;
  private readonly placer: Placer;
  private readonly health: HealthChecker;
  private readonly admission: Admission;
  /** What the control plane (admin API, pages) sees and may ask. */
  private readonly view: RuntimeView;
  private readonly discovery: DnsDiscovery | null;
  private readonly server: Server;
  /** The public port's certificate reloads; null without TLS. */
  private readonly tls: TlsReloader | null;
  /** tls.redirectPort: plain HTTP answered with redirects to https; null when not configured. */
  private readonly redirect: Server | null;
  /** HTTP/2 connections of the TLS port; null without TLS or with http2.enabled false. */
  private readonly h2: H2Front | null;
  /** The byte-level page path (plain HTTP and HTTP/1.1 over TLS), or null when switched off. */
  private readonly lean: { front: LeanFront; pages: LeanPages } | null;
  private readonly admin: Server | null;
  /** The TLS session ticket keys in use (tls.ticketKeyRotationS replaces them). */
  private ticketKeys: Buffer;
  private stopKeyRotation: () => void = () => undefined;
  /** The public listener's connection limit and where it comes from (logged at start). */
  private readonly connectionLimits: PublicLimits;
  private readonly httpProxy: HttpProxy;
  private readonly upgradeProxy: UpgradeProxy;
  /** Sections the last reload changed that only a restart applies (the status page says so). */
  private restartNeeded: readonly string[] = [];
  /** The page cache; null when cache.paths is empty. */
  private readonly cache: PageCache | null;
  private readonly supervisor: Supervisor;
  /** Room handoffs: moves and drains with handoff. */
  private readonly handoff: HandoffRuntime;
  private ready = false;
  private stopping: Promise<void> | null = null;

  constructor(
    public config: LoadedConfig,
    private readonly opts: GatewayOptions,
  ) {
    const { logger } = opts;
    const metrics = (this.metrics = createMetrics(
      () => this.pool.backends.map((b) => [b.id, b.liveSockets] as [string, number]),
      () => this.backendGaugeReadings(),
    ));
    // Read at start (a bad file: a ConfigError naming the field); pages, sockets and checks share it.
    const backendTls = loadBackendTls(config.backendTls);
    if (!backendTls.verify) logger.warn(BACKEND_TLS_UNVERIFIED);
    this.health = new HealthChecker(
      {
        path: config.health.path,
        intervalMs: config.health.intervalMs,
        timeoutMs: config.health.timeoutMs,
        rise: config.health.rise,
        fall: config.health.fall,
        hostHeader: config.health.host ?? undefined,
        tls: backendTls,
      },
      (ev) => this.supervisor.healthChanged(ev.id, ev.state, ev.reason),
    );
    this.pool = new BackendPool([], config.proxy.passiveDownMs, {
      onPassive: (b, state, reason) => this.supervisor.passiveChanged(b, state, reason),
      onMembership: (added, removed) => this.supervisor.membershipChanged(added, removed),
    });
    this.tunnels = new TunnelRegistry(this.pool);

    const redisConfigured = Boolean(config.redis.url) || config.redis.sentinels.length > 0 || config.redis.clusterNodes.length > 0;
    // What both Redis stores share: where Redis is, the key prefix, fail-fast timing, logging.
    const redis = {
      url: config.redis.url,
      sentinels: config.redis.sentinels,
      sentinelName: config.redis.sentinelName,
      clusterNodes: config.redis.clusterNodes,
      tls: loadRedisTls(config.redis),
      keyPrefix: config.redis.keyPrefix,
      gatewayId: this.id,
      commandTimeoutMs: config.redis.commandTimeoutMs,
      onLog: (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => logger[level](fields ?? {}, msg),
    };
    const storeTiming = {
      idleTtlMs: config.placement.idleTtlMs,
      gatewayTtlMs: config.placement.gatewayTtlMs,
      maxIdleRooms: config.placement.maxIdleRooms,
      onEvicted: (n: number) => metrics.idleRoomsEvicted.inc({ where: 'store' }, n),
    };
    this.store =
      opts.store ??
      (redisConfigured
        ? new RedisPlacementStore({ ...redis, timing: storeTiming })
        : new MemoryPlacementStore(this.id, storeTiming));

    this.sharedData =
      opts.sharedData ??
      (redisConfigured
        ? new RedisSharedDataStore({ ...redis, presenceTtlMs: config.presence.ttlMs })
        : new MemorySharedDataStore(this.id, { presenceTtlMs: config.presence.ttlMs }));
    const validateRoom = createRoomValidator(config.room.pattern);

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
      maxIdleRooms: config.placement.maxIdleRooms,
      onEvicted: (n) => metrics.idleRoomsEvicted.inc({ where: 'cache' }, n),
      recoveryRingMs: config.placement.gatewayTtlMs,
      onPlaced: (room, from, to, forced, liveMoved) => this.supervisor.placed(room, from, to, forced, liveMoved),
      onMovedElsewhere: (room, from, to) => this.supervisor.movedElsewhere(room, from, to),
      onDegraded: (degraded) => metrics.degraded.set(degraded ? 1 : 0),
    });
    this.supervisor = new Supervisor({
      pool: this.pool,
      tunnels: this.tunnels,
      placer: this.placer,
      sharedData: this.sharedData,
      events: this.events,
      health: this.health,
      metrics,
      logger,
      onDown: config.health.onDown,
      heartbeatMs: config.placement.heartbeatMs,
      presenceTtlMs: config.presence.ttlMs,
    });
    this.store.subscribe((ev) => this.supervisor.storeEvent(ev));
    // A purge made through any gateway's admin API (this one's included: purging twice is harmless).
    this.sharedData.subscribe((ev) => {
      if (ev.type === 'cache-purge') this.cache?.purge(ev.purge);
    });
    this.history = new History({ read: () => this.historyReading(metrics) });
    this.view = createRuntimeView({
      history: () => this.history.snapshot(),
      // Room handoff (src/runtime/handoff*.ts): moves and drains with the rooms' state.
      handoff: (this.handoff = createHandoffRuntime(config, { placer: this.placer, pool: this.pool, store: this.store, tunnels: this.tunnels, sharedData: this.sharedData, backendTls, gatewayId: this.id, metrics, logger })),
      push: new PushDelivery({
        placer: this.placer,
        pool: this.pool,
        backendTls,
        path: config.push.path,
        secrets: config.backendCalls.secrets,
        timeoutMs: config.push.timeoutMs,
        retryAfterS: config.proxy.retryAfterS,
        metrics,
        logger,
        maxFanoutRooms: config.push.maxFanoutRooms,
        requireLive: config.push.requireLive,
        log: this.pushLog,
        isLive: async (room) => ((await this.sharedData.room(room))?.sockets ?? 0) > 0,
        // Live rooms from presence (every gateway's reports), a page at a time.
        liveRooms: async (prefix, cap) => {
          const out: string[] = [];
          for (let offset = 0; ; ) {
            const page = await this.sharedData.lobby({ ...(prefix === undefined ? {} : { prefix }), sort: 'room', order: 'asc', offset, limit: 500 });
            for (const r of page.rooms) out.push(r.room);
            if (page.nextOffset === null || out.length > cap) return out;
            offset = page.nextOffset;
          }
        },
      }),
      cache: () => this.cache,
      restartNeeded: () => this.restartNeeded,
      announcePurge: (purge) => this.sharedData.publishCachePurge(purge),
      gatewayId: this.id,
      pool: this.pool,
      tunnels: this.tunnels,
      placer: this.placer,
      events: this.events,
      pushes: this.pushLog,
      store: this.store,
      health: this.health,
      metrics,
      isReady: () => this.ready,
    });
    this.control = new ControlPlane({ config, view: this.view, sharedData: this.sharedData, logger, onAuthThrottled: (surface) => metrics.authThrottled.inc({ surface }) });
    // The pool's list is applied only now that every listener of its changes exists.
    this.pool.setBackends(config.backends);

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
    // The page cache (per process), asked by both page paths; off until cache.paths lists something.
    this.cache =
      config.cache.paths.length > 0
        ? new PageCache({
            config: config.cache,
            roomCookieName: config.cookie.name,
            router,
            pool: this.pool,
            forwarding,
            backendTls,
            connectTimeoutMs: config.proxy.connectTimeoutMs,
            responseTimeoutMs: config.proxy.responseTimeoutMs,
            maxIdleSocketsPerBackend: config.proxy.maxIdleSocketsPerBackend,
            backendIdleTimeoutMs: config.proxy.backendIdleTimeoutMs,
            metrics,
            logger,
            ...(opts.cacheClock ? { now: opts.cacheClock } : {}),
          })
        : null;
    const roomCookie: RoomCookieSettings | null = config.cookie.setOnPages
      ? {
          name: config.cookie.name,
          maxAgeS: config.cookie.maxAgeS,
          encode: signer ? (room, now) => signer.sign(room, now) : (room) => room,
        }
      : null;
    // Which methods are proxied: the one rule every front's answers agree with (src/http/methods.ts).
    const methods = createMethodPolicy(config.proxy.extraMethods);
    // roomgate's own answers, one catalogue for every path (src/http/refusals.ts).
    const refuser = new Refuser({ pages: readErrorPages(config.proxy.errorPages), logger, metrics });
    // What both page paths (node:http's and the byte-level one) are given alike.
    const pagePaths = {
      router,
      refuser,
      pool: this.pool,
      forwarding,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      responseTimeoutMs: config.proxy.responseTimeoutMs,
      maxIdleSocketsPerBackend: config.proxy.maxIdleSocketsPerBackend,
      backendIdleTimeoutMs: config.proxy.backendIdleTimeoutMs,
      clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
      roomCookie,
      cache: this.cache,
      metrics,
      logger,
    };
    this.httpProxy = new HttpProxy({
      ...pagePaths,
      backendTls,
      methods,
      body: { bufferBytes: config.proxy.bufferBodyBytes, maxBytes: config.proxy.maxBodyBytes },
      bodyIdleTimeoutMs: config.proxy.bodyIdleTimeoutMs,
    });
    this.admission = new Admission({
      maxInflight: config.admission.maxInflightUpgrades,
      perSecond: config.admission.upgradesPerSecond,
      retryAfterS: config.admission.retryAfterS,
    });
    const upgradeProxy = (this.upgradeProxy = new UpgradeProxy({
      router,
      refuser,
      pool: this.pool,
      forwarding,
      tunnels: this.tunnels,
      admission: this.admission,
      placementOf: (room) => this.placer.cachedPlacement(room)?.backend ?? null,
      websocketPaths: config.proxy.websocketPaths,
      backendTls,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      responseTimeoutMs: config.proxy.responseTimeoutMs,
      idleTimeoutMs: config.proxy.websocketIdleTimeoutMs,
      clientSilenceMs: config.proxy.websocketClientSilenceMs,
      clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
      metrics,
      logger,
    }));
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
    // One canonical target for every front, and the paths only roomgate calls on a backend.
    const target = createTargetRule({ reserved: [config.push.path, config.handoff.path], pathPrefix: config.room.sources.includes('path-prefix') ? config.room.pathPrefix : null });
    this.ticketKeys = opts.tlsTicketKeys ?? newTicketKeys();
    const certificates = loadTls(config, this.ticketKeys);
    this.redirect =
      certificates && config.tls.redirectPort !== null
        ? createRedirectServer({ httpsPort: () => this.port, isReady: () => this.ready, maxHeaderBytes: config.listen.maxHeaderBytes, headersTimeoutMs: config.listen.headersTimeoutMs })
        : null;
    // roomgate's own paths (control plane) and static mounts are answered here; everything else is the app's.
    const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
      const url = req.url ?? '/';
      if (this.control.owns(url)) this.control.handle(req, res);
      else if (statics?.owns(url)) statics.handle(req, res);
      else this.httpProxy.handle(req, res);
    };
    this.h2 =
      certificates && config.http2.enabled
        ? new H2Front({
            maxConcurrentStreams: config.http2.maxConcurrentStreams,
            maxResetsPerS: config.http2.maxResetsPerS,
            maxHeaderBytes: config.listen.maxHeaderBytes,
            maxHeaders: config.listen.maxHeaders,
            target,
            allow: methods.allow,
            idleTimeoutMs: config.listen.keepAliveTimeoutMs,
            requestTimeoutMs: config.listen.requestTimeoutMs,
            hsts: hstsValue(config),
            isReady,
            onRequest,
            onWebSocket: config.http2.websockets ? (req, socket, head) => upgradeProxy.handle(req, socket, head) : null,
            metrics,
            logger,
          })
        : null;
    this.server = createPublicServer({
      tls: certificates,
      hsts: hstsValue(config),
      http2: this.h2 !== null,
      maxHeaderBytes: config.listen.maxHeaderBytes,
      maxHeaders: config.listen.maxHeaders,
      target,
      allow: methods.allow,
      headersTimeoutMs: config.listen.headersTimeoutMs,
      requestTimeoutMs: config.listen.requestTimeoutMs,
      keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
      isReady,
      onRequest,
      onUpgrade: (req, socket, head) => upgradeProxy.handle(req, socket, head),
      metrics,
      logger,
    });
    this.h2?.attach(this.server as HttpsServer);
    if (config.proxy.leanPages) {
      const pages = new LeanPages({ ...pagePaths, keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs, hsts: hstsValue(config) });
      const front = new LeanFront({
        limits: { maxHeaderBytes: config.listen.maxHeaderBytes, maxHeaders: config.listen.maxHeaders, roomHeader: config.room.header.toLowerCase() },
        headersTimeoutMs: config.listen.headersTimeoutMs,
        keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
        clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
        target,
        ownPath: (url) => healthAnswer(url, isReady) !== null || this.control.owns(url) || statics?.owns(url) === true,
        pages,
        metrics,
      });
      // After the h2 front took its hook: the lean front sees the HTTP/1.1 connections first.
      front.attach(this.server, certificates !== null);
      this.lean = { front, pages };
    } else this.lean = null;
    this.tls = certificates ? new TlsReloader(certificates, this.server as HttpsServer, logger) : null;
    this.admin = this.control.adminServer;
    this.connectionLimits = applyConnectionLimits(config, { public: this.server, redirect: this.redirect, admin: this.admin }, metrics, logger);
    const dns = config.discovery.dns;
    this.discovery = dns
      ? new DnsDiscovery(
          { name: dns.name, type: dns.type, port: dns.port, scheme: dns.scheme, intervalMs: dns.intervalMs, servers: dns.servers },
          (backends) => this.pool.setBackends(backends),
          (err) => logger.warn({ err: err.message }, 'DNS discovery failed; keeping the last backend list'),
        )
      : null;
  }

  async start(): Promise<void> {
    const { listen, admin } = this.config;
    const { logger } = this.opts;
    try {
      if (this.discovery) this.pool.setBackends(await this.discovery.start());
      // Not fatal: without Redis the gateway routes from its cache and the ring, the API answers
      // 503, and both stores keep reconnecting by themselves.
      const failed = (await Promise.allSettled([this.store.connect(), this.sharedData.connect()])).find((r) => r.status === 'rejected');
      if (failed) logger.error({ err: String((failed as PromiseRejectedResult).reason?.message ?? failed) }, 'Redis unreachable at start: degraded mode');
      await listenOn(this.server, listen.host, listen.port, this.opts.reusePort === true, this.opts.reusePort === true);
      // Shared by a cluster's workers through the primary: it only answers with redirects.
      if (this.redirect) await listenOn(this.redirect, listen.host, this.config.tls.redirectPort ?? 0);
      // Exclusive: a cluster worker's admin listener is its own, never shared round-robin.
      if (this.admin) await listenOn(this.admin, admin.host, admin.port, true);
    } catch (err) {
      // Half-started is not started: release whatever did bind, so the process can exit.
      await this.release();
      throw err;
    }
    this.supervisor.start();
    this.history.start();
    this.tls?.start(() => tlsSettings(this.config, this.ticketKeys), this.config.tls.reloadCheckMs);
    if (this.tls && this.opts.ticketKeysFromPrimary !== true) {
      this.stopKeyRotation = startTicketKeyRotation(this.config.tls.ticketKeyRotationS * 1000, (keys) => this.rotateTicketKeys(keys), this.opts.logger);
    }
    this.ready = true;
    logger.info(
      {
        port: this.port,
        host: listen.host,
        adminPort: this.adminPort,
        ...(this.tls ? { tls: true, redirectPort: this.redirect ? ((this.redirect.address() as AddressInfo | null)?.port ?? null) : null } : {}),
        gatewayId: this.id,
        maxConnections: this.connectionLimits.maxConnections,
        descriptors: this.connectionLimits.descriptors,
        store: this.store.kind,
        backends: this.pool.backends.map((b) => `${b.id}=${b.config.url}`),
      },
      'listening',
    );
  }

  /** One sample of the status page's history: counters kept anyway, figures as they are now. */
  private async historyReading(metrics: Metrics): Promise<HistoryReading> {
    const totals = await counterTotals(metrics);
    const c = this.cache?.snapshot();
    const hits = c ? c.counts.hit + c.counts.stale + c.counts['stale-if-error'] + c.counts.coalesced : 0;
    return {
      ...totals,
      backends: this.pool.backends.map((b) => ({ id: b.id, sockets: b.liveSockets, rooms: b.rooms })),
      cache: c ? { hits, answers: hits + c.counts.miss } : null,
    };
  }

  /** What the backend gauges report (at scrape time). */
  private backendGaugeReadings(): BackendGaugeReading[] {
    const now = Date.now();
    return this.pool.backends.map((b) => ({
      id: b.id,
      state: b.state(now),
      rooms: b.rooms,
      drainDeadline: b.admin?.state === 'draining' ? b.admin.deadline : null,
    }));
  }

  /** New TLS session ticket keys for new handshakes (the rotation timer, or a cluster's primary). */
  rotateTicketKeys(keys: Buffer): void {
    this.ticketKeys = keys;
    this.tls?.setTicketKeys(keys);
  }

  /** Sets a backend's administrative state for every gateway sharing the store. */
  setAdminState(id: string, state: BackendAdminState | null): Promise<void> {
    return setAdminState(this.store, this.pool, id, state);
  }

  /**
   * SIGHUP: applies a new configuration's backend list (static) and certificates; the rest needs a
   * restart, said in the log and on the status page (the cache line: its settings stay as started).
   */
  reload(next: LoadedConfig): { applied: string[]; needsRestart: string[] } {
    const applied: string[] = [];
    const needsRestart: string[] = [];
    for (const key of Object.keys(next) as (keyof LoadedConfig)[]) {
      if (key === 'tls') continue; // below: the files are read again even when the keys are the same
      if (JSON.stringify(next[key]) === JSON.stringify(this.config[key])) continue;
      if (key === 'backends' && !this.discovery) {
        this.pool.setBackends(next.backends as ResolvedBackend[]);
        applied.push(key);
      } else needsRestart.push(key);
    }
    this.config = { ...this.config, backends: next.backends };
    // TLS: certificates are read again on every reload (a renewed file keeps its name); new
    // certificate paths apply too. Turning TLS on or off changes what the port speaks: a restart.
    const nextTls = tlsSettings(next, this.ticketKeys);
    if (this.tls === null || nextTls === null) {
      if ((this.tls === null) !== (nextTls === null)) needsRestart.push('tls');
    } else if (this.tls.reload(nextTls, 'reload')) {
      applied.push('tls');
      this.config = { ...this.config, tls: next.tls };
    }
    // A failed certificate reload is logged by the reloader (the ones in use stay); a restart would
    // fail on the same files, so it is not listed as needing one.
    // Compared with the running configuration each time: a section set back needs no restart.
    this.restartNeeded = needsRestart;
    const restart = needsRestart.length > 0 ? `a restart is needed to apply ${needsRestart.join(', ')}; until then the running settings stay` : undefined;
    this.opts.logger.warn({ applied, needsRestart, ...(restart ? { restart } : {}) }, 'configuration reloaded');
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
    this.tls?.stop();
    this.stopKeyRotation();
    logger.info({ sockets: this.tunnels.size, readinessDelayMs, graceMs }, 'stopping: readiness is now false');
    if (readinessDelayMs > 0) await sleep(readinessDelayMs);
    this.control.closeStreams(); // lobby and status streams would otherwise hold connections open
    if (this.redirect?.listening) {
      this.redirect.close();
      this.redirect.closeAllConnections();
    }
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    this.lean?.front.closeIdle();
    // h2 connections are not the HTTP/1.1 server's to close: GOAWAY lets their streams finish.
    this.h2?.closeIdle();
    const deadline = Date.now() + graceMs;
    while (this.tunnels.size > 0 && Date.now() < deadline) await sleep(Math.min(100, deadline - Date.now()));
    if (this.tunnels.size > 0) logger.info({ sockets: this.tunnels.size }, 'grace period over: closing remaining sockets');
    this.tunnels.destroyAll();
    // Requests still in flight on keep-alive connections are cut at the same deadline.
    this.server.closeAllConnections();
    this.lean?.front.closeAll();
    this.h2?.closeAll();
    await closed;
    await this.release();
    logger.info('stopped');
  }

  /** Timers, checks, store connections, agents and the admin listener. */
  private async release(): Promise<void> {
    this.supervisor.stop();
    this.handoff.stop();
    this.history.stop();
    this.health.stop();
    this.discovery?.stop();
    this.placer.close();
    this.httpProxy.close();
    this.upgradeProxy.close();
    this.lean?.pages.close();
    this.cache?.close();
    await this.control.close();
    if (this.server.listening) this.server.close();
    if (this.redirect?.listening) this.redirect.close();
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

/** `exclusive`: a cluster worker's own socket, not the primary's; `reusePort`: one of several on the port. */
function listenOn(server: Server, host: string, port: number, exclusive = false, reusePort = false): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen({ port, host, exclusive, reusePort }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
