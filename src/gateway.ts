// The gateway: its parts are built by the composition (src/compose/), each from the configuration
// with explicit dependencies; this class owns what happens to them over time: start, reload
// (SIGHUP) and graceful stop. The rules live in the modules that own them: the runtime's in
// src/runtime/, the data plane's in src/proxy/, the reload policy in src/config/reload-policy.ts,
// the grace period's wait in src/lifecycle/grace.ts.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { LoadedConfig, ResolvedBackend } from './config/load.js';
import { planReload, restartNote } from './config/reload-policy.js';
import { sleep, waitForDrain } from './lifecycle/grace.js';
import type { History } from './observability/history.js';
import type { Metrics } from './observability/metrics.js';
import type { BackendAdminState } from './placement/store.js';
import type { PageCache } from './cache/page-cache.js';
import type { BackendPool } from './runtime/pool.js';
import { setAdminState } from './runtime/runtime-view.js';
import { newTicketKeys, startTicketKeyRotation } from './server/ticket-keys.js';
import { tlsSettings } from './server/tls-config.js';
import { composeGateway, type GatewayOptions, type GatewayParts } from './compose/gateway-parts.js';

export type { GatewayOptions } from './compose/gateway-parts.js';
export { signerFor } from './room/signing.js';

export class Gateway {
  readonly id = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  /** The registry a cluster primary merges from its workers; the only part read from outside. */
  readonly metrics: Metrics;
  /** The last 15 minutes of figures (status page plots); a cluster worker hands it the merged one. */
  readonly history: History;
  // Every part is owned here and reached from outside only through the runtime view (the control
  // plane's port: snapshots and named commands), so a reader finds each state's one owner.
  private readonly parts: GatewayParts;
  private readonly pool: BackendPool;
  /** The page cache; null when cache.paths is empty. */
  private readonly cache: PageCache | null;
  /** The TLS session ticket keys in use (tls.ticketKeyRotationS replaces them). */
  private ticketKeys: Buffer;
  private stopKeyRotation: () => void = () => undefined;
  /** Sections the last reload changed that only a restart applies (the status page says so). */
  private restartNeeded: readonly string[] = [];
  private ready = false;
  private stopping: Promise<void> | null = null;

  constructor(
    public config: LoadedConfig,
    private readonly opts: GatewayOptions,
  ) {
    this.ticketKeys = opts.tlsTicketKeys ?? newTicketKeys();
    this.parts = composeGateway(config, opts, {
      gatewayId: this.id,
      isReady: () => this.ready,
      restartNeeded: () => this.restartNeeded,
      port: () => this.port,
      ticketKeys: this.ticketKeys,
    });
    this.metrics = this.parts.metrics;
    this.history = this.parts.history;
    this.pool = this.parts.runtime.pool;
    this.cache = this.parts.data.cache;
  }

  async start(): Promise<void> {
    const { listen, admin } = this.config;
    const { logger } = this.opts;
    const { stores, fronts, discovery } = this.parts;
    try {
      if (discovery) this.pool.setBackends(await discovery.start());
      // Not fatal: without Redis the gateway routes from its cache and the ring, the API answers
      // 503, and both stores keep reconnecting by themselves.
      const failed = (await Promise.allSettled([stores.store.connect(), stores.sharedData.connect()])).find((r) => r.status === 'rejected');
      if (failed) logger.error({ err: String((failed as PromiseRejectedResult).reason?.message ?? failed) }, 'Redis unreachable at start: degraded mode');
      await listenOn(fronts.server, listen.host, listen.port, this.opts.reusePort === true, this.opts.reusePort === true);
      // Shared by a cluster's workers through the primary: it only answers with redirects.
      if (fronts.redirect) await listenOn(fronts.redirect, listen.host, this.config.tls.redirectPort ?? 0);
      // Exclusive: a cluster worker's admin listener is its own, never shared round-robin.
      if (fronts.admin) await listenOn(fronts.admin, admin.host, admin.port, true);
    } catch (err) {
      // Half-started is not started: release whatever did bind, so the process can exit.
      await this.release();
      throw err;
    }
    this.parts.runtime.supervisor.start();
    // The hellos first (bounded): a tunnel is followed only to a backend known to take held messages.
    await this.parts.handoff.start();
    this.history.start();
    fronts.tls?.start(() => tlsSettings(this.config, this.ticketKeys), this.config.tls.reloadCheckMs);
    if (fronts.tls && this.opts.ticketKeysFromPrimary !== true) {
      this.stopKeyRotation = startTicketKeyRotation(this.config.tls.ticketKeyRotationS * 1000, (keys) => this.rotateTicketKeys(keys), this.opts.logger);
    }
    this.ready = true;
    const { relay } = this.parts.data;
    if (relay.configured === 'auto' && relay.relay === 'javascript') logger.warn({ why: relay.why }, 'the JavaScript relay runs: the native relay is not available');
    logger.info(
      {
        port: this.port,
        host: listen.host,
        adminPort: this.adminPort,
        ...(fronts.tls ? { tls: true, redirectPort: fronts.redirect ? ((fronts.redirect.address() as AddressInfo | null)?.port ?? null) : null } : {}),
        gatewayId: this.id,
        maxConnections: fronts.connectionLimits.maxConnections,
        descriptors: fronts.connectionLimits.descriptors,
        store: stores.store.kind,
        relay: this.parts.data.relay.relay,
        backends: this.pool.backends.map((b) => `${b.id}=${b.config.url}`),
      },
      'listening',
    );
  }

  /** New TLS session ticket keys for new handshakes (the rotation timer, or a cluster's primary). */
  rotateTicketKeys(keys: Buffer): void {
    this.ticketKeys = keys;
    this.parts.fronts.tls?.setTicketKeys(keys);
  }

  /** Sets a backend's administrative state for every gateway sharing the store. */
  setAdminState(id: string, state: BackendAdminState | null): Promise<void> {
    return setAdminState(this.parts.stores.store, this.pool, id, state);
  }

  /**
   * SIGHUP: applies a new configuration's backend list (static), certificates and handoff.rebalance; the rest needs a
   * restart, said in the log and on the status page (the cache line: its settings stay as started).
   * What applies live is the reload policy's (src/config/reload-policy.ts).
   */
  reload(next: LoadedConfig): { applied: string[]; needsRestart: string[] } {
    const { tls } = this.parts.fronts;
    const nextTls = tlsSettings(next, this.ticketKeys);
    const plan = planReload(this.config, next, { backendsFromDiscovery: this.parts.discovery !== null, tlsRunning: tls !== null, tlsNext: nextTls !== null });
    const applied: string[] = [];
    const needsRestart = [...plan.needsRestart];
    if (plan.backends) {
      this.pool.setBackends(next.backends as ResolvedBackend[]);
      applied.push('backends');
    }
    this.config = { ...this.config, backends: next.backends };
    if (plan.rebalance) {
      this.parts.handoff.configureRebalance(next.handoff.rebalance);
      this.config = { ...this.config, handoff: { ...this.config.handoff, rebalance: next.handoff.rebalance } };
      applied.push('handoff.rebalance');
    }
    if (plan.backendCalls) {
      this.parts.runtime.backendCalls.setSecrets(next.backendCalls.secrets);
      this.config = { ...this.config, backendCalls: next.backendCalls };
      applied.push('backendCalls');
    }
    // A failed certificate reload is logged by the reloader (the ones in use stay); a restart would
    // fail on the same files, so it is not listed as needing one.
    if (plan.certificates && tls?.reload(nextTls, 'reload')) {
      applied.push('tls');
      this.config = { ...this.config, tls: next.tls };
    }
    this.restartNeeded = needsRestart;
    const restart = restartNote(needsRestart);
    this.opts.logger.warn({ applied, needsRestart, ...(restart ? { restart } : {}) }, 'configuration reloaded');
    return { applied, needsRestart };
  }

  get port(): number {
    return (this.parts.fronts.server.address() as AddressInfo | null)?.port ?? 0;
  }

  get adminPort(): number | null {
    const { admin } = this.parts.fronts;
    return admin ? ((admin.address() as AddressInfo | null)?.port ?? null) : null;
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
    const { fronts, control } = this.parts;
    const { tunnels } = this.parts.runtime;
    this.ready = false;
    fronts.tls?.stop();
    this.stopKeyRotation();
    logger.info({ sockets: tunnels.size, readinessDelayMs, graceMs }, 'stopping: readiness is now false');
    if (readinessDelayMs > 0) await sleep(readinessDelayMs);
    control.closeStreams(); // lobby and status streams would otherwise hold connections open
    if (fronts.redirect?.listening) {
      fronts.redirect.close();
      fronts.redirect.closeAllConnections();
    }
    const closed = new Promise<void>((resolve) => fronts.server.close(() => resolve()));
    fronts.server.closeIdleConnections();
    fronts.lean?.front.closeIdle();
    // h2 connections are not the HTTP/1.1 server's to close: GOAWAY lets their streams finish.
    fronts.h2?.closeIdle();
    const left = await waitForDrain(() => tunnels.size, graceMs);
    if (left > 0) logger.info({ sockets: left }, 'grace period over: closing remaining sockets');
    tunnels.destroyAll();
    // Requests still in flight on keep-alive connections are cut at the same deadline.
    fronts.server.closeAllConnections();
    fronts.lean?.front.closeAll();
    fronts.h2?.closeAll();
    await closed;
    await this.release();
    logger.info('stopped');
  }

  /** Timers, checks, store connections, agents and the admin listener. */
  private async release(): Promise<void> {
    const { runtime, data, fronts, control, stores, discovery, handoff } = this.parts;
    runtime.supervisor.stop();
    handoff.stop();
    this.history.stop();
    this.parts.metrics.stop();
    runtime.health.stop();
    discovery?.stop();
    runtime.placer.close();
    data.httpProxy.close();
    data.upgradeProxy.close();
    fronts.lean?.pages.close();
    this.cache?.close();
    await control.close();
    if (fronts.server.listening) fronts.server.close();
    if (fronts.redirect?.listening) fronts.redirect.close();
    // A clean stop removes this gateway's presence at once instead of waiting for it to expire.
    await stores.sharedData.withdrawPresence().catch(() => undefined);
    await Promise.all([stores.store.close().catch(() => undefined), stores.sharedData.close().catch(() => undefined)]);
    const { admin } = fronts;
    if (admin?.listening) {
      await new Promise<void>((resolve) => {
        admin.close(() => resolve());
        admin.closeAllConnections();
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
