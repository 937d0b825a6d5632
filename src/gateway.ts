// Composition root: builds every part from the configuration with explicit dependencies (so a
// test can run two gateways in one process) and owns start and stop.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminServer } from './api/admin-server.js';
import { BackendPool } from './backends/pool.js';
import type { LoadedConfig } from './config/load.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { Forwarding } from './proxy/forwarded.js';
import { HttpProxy } from './proxy/http-proxy.js';
import { Router } from './proxy/router.js';
import { TunnelRegistry } from './proxy/tunnels.js';
import { UpgradeProxy } from './proxy/upgrade-proxy.js';
import { createKeyExtractor } from './room/extract.js';
import { createRoomSigner, type RoomSigner } from './room/signing.js';
import { createRoomValidator } from './room/validate.js';
import { createPublicServer } from './server/public-server.js';

export interface GatewayOptions {
  readonly logger: Logger;
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
  readonly metrics: Metrics;
  readonly pool: BackendPool;
  readonly tunnels = new TunnelRegistry();
  private readonly server: Server;
  private readonly admin: Server | null;
  private readonly httpProxy: HttpProxy;
  private ready = false;
  private stopping: Promise<void> | null = null;

  constructor(
    readonly config: LoadedConfig,
    private readonly opts: GatewayOptions,
  ) {
    const { logger } = opts;
    if (config.backends.length === 0) throw new Error('no backends configured');
    this.pool = new BackendPool(config.backends, config.proxy.passiveDownMs, {
      onStateChange: (b, state, reason) => {
        this.metrics.backendStateChanges.inc({ backend: b.id, state });
        logger.warn({ backend: b.id, state, reason }, `backend ${state}`);
      },
    });
    this.metrics = createMetrics(() => this.pool.backends.map((b) => [b.id, b.liveSockets] as [string, number]));

    let secrets = config.cookie.secrets;
    if (config.cookie.signed && secrets.length === 0) {
      secrets = [randomBytes(32).toString('base64url')];
      logger.warn(
        'no cookie secret configured (cookie.secrets or ROOMGATE_COOKIE_SECRETS): using a random one; room cookies will not survive a restart and gateways will not accept each other\'s cookies',
      );
    }
    const signer = signerFor(config, secrets);
    const router = new Router({
      extractKey: createKeyExtractor({
        sources: config.room.sources,
        validate: createRoomValidator(config.room.pattern),
        queryParam: config.room.queryParam,
        pathPrefix: config.room.pathPrefix,
        pagePaths: config.room.pagePaths,
        cookieName: config.cookie.name,
        signer,
      }),
      pool: this.pool,
      roomHeader: config.room.header.toLowerCase(),
      noRoom: config.room.noRoom,
      retryAfterS: config.proxy.retryAfterS,
      metrics: this.metrics,
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
      metrics: this.metrics,
      logger,
    });
    const upgradeProxy = new UpgradeProxy({
      router,
      pool: this.pool,
      forwarding,
      tunnels: this.tunnels,
      websocketPaths: config.proxy.websocketPaths,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      responseTimeoutMs: config.proxy.responseTimeoutMs,
      idleTimeoutMs: config.proxy.websocketIdleTimeoutMs,
      metrics: this.metrics,
      logger,
    });
    const isReady = (): boolean => this.ready;
    this.server = createPublicServer({
      maxHeaderBytes: config.listen.maxHeaderBytes,
      headersTimeoutMs: config.listen.headersTimeoutMs,
      keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
      isReady,
      onRequest: (req, res) => this.httpProxy.handle(req, res),
      onUpgrade: (req, socket, head) => upgradeProxy.handle(req, socket, head),
      metrics: this.metrics,
      logger,
    });
    this.admin = config.admin.enabled
      ? createAdminServer({ pool: this.pool, tunnels: this.tunnels, metrics: this.metrics, isReady })
      : null;
  }

  async start(): Promise<void> {
    const { listen, admin } = this.config;
    try {
      await listenOn(this.server, listen.host, listen.port);
      if (this.admin) await listenOn(this.admin, admin.host, admin.port);
    } catch (err) {
      // Half-started is not started: release whatever did bind, so the process can exit.
      this.server.close();
      this.admin?.close();
      this.httpProxy.close();
      throw err;
    }
    this.ready = true;
    this.opts.logger.info(
      { port: this.port, host: listen.host, adminPort: this.adminPort, backends: this.config.backends.map((b) => `${b.id}=${b.url}`) },
      'listening',
    );
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
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (this.tunnels.size > 0 && Date.now() < deadline) await sleep(Math.min(100, deadline - Date.now()));
    if (this.tunnels.size > 0) logger.info({ sockets: this.tunnels.size }, 'grace period over: closing remaining sockets');
    this.tunnels.destroyAll();
    // Requests still in flight on keep-alive connections are cut at the same deadline.
    this.server.closeAllConnections();
    await closed;
    this.httpProxy.close();
    if (this.admin) {
      await new Promise<void>((resolve) => {
        this.admin?.close(() => resolve());
        this.admin?.closeAllConnections();
      });
    }
    logger.info('stopped');
  }
}

function listenOn(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
