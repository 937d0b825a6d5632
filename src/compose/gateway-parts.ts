// Builds every part of one gateway from the configuration, in dependency order, with explicit
// dependencies (so a test can run two gateways in one process). The Gateway (src/gateway.ts) owns
// what happens to the parts over time: start, reload and stop.
import { BACKEND_TLS_UNVERIFIED, loadBackendTls } from '../backends/backend-tls.js';
import type { DnsDiscovery } from '../backends/discovery.js';
import type { LoadedConfig } from '../config/load.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { HandoffRuntime } from '../runtime/handoff-setup.js';
import type { History } from '../observability/history.js';
import type { Logger } from '../observability/logger.js';
import { createMetrics, type Metrics } from '../observability/metrics.js';
import type { PlacementStore } from '../placement/store.js';
import type { SharedDataStore } from '../shared-data/store.js';
import { buildControlSide } from './control-plane.js';
import { buildDataPlane, type DataPlane } from './data-plane.js';
import { buildFronts, type Fronts } from './fronts.js';
import { backendGaugeReadings, backendSockets, buildDiscovery, buildRuntime, type Runtime } from './runtime.js';
import { chooseStores, type Stores } from './stores.js';
import { chooseRelay } from '../proxy/native-relay.js';

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
  /** A cluster worker: the key of the client address its primary forwards with admin requests. */
  readonly adminPeerKey?: string;
  /** The page cache's clock for freshness and grace (ms); tests move it. Default Date.now. */
  readonly cacheClock?: () => number;
}

/** What the parts read of the Gateway's own state while running. */
export interface GatewayState {
  readonly gatewayId: string;
  readonly isReady: () => boolean;
  /** Sections the last reload changed that only a restart applies (the status page says so). */
  readonly restartNeeded: () => readonly string[];
  /** The public port once listening. */
  readonly port: () => number;
  /** The TLS session ticket keys to start with. */
  readonly ticketKeys: Buffer;
}

export interface GatewayParts {
  readonly metrics: Metrics;
  /** The last 15 minutes of figures (status page plots). */
  readonly history: History;
  readonly stores: Stores;
  readonly runtime: Runtime;
  /** The admin API, the public API and the pages; proxied traffic never reaches it. */
  readonly control: ControlPlane;
  /** Room handoffs (stopped with the gateway). */
  readonly handoff: HandoffRuntime;
  readonly data: DataPlane;
  readonly fronts: Fronts;
  readonly discovery: DnsDiscovery | null;
}

export function composeGateway(config: LoadedConfig, opts: GatewayOptions, state: GatewayState): GatewayParts {
  const { logger } = opts;
  const { gatewayId } = state;
  // Read at scrape time, once everything exists.
  let runtime: Runtime;
  const metrics = createMetrics(
    () => backendSockets(runtime.pool),
    () => backendGaugeReadings(runtime.pool),
  );
  // Read at start (a bad file: a ConfigError naming the field); pages, sockets and checks share it.
  const backendTls = loadBackendTls(config.backendTls);
  if (!backendTls.verify) logger.warn(BACKEND_TLS_UNVERIFIED);
  const stores = chooseStores(config, { gatewayId, logger, metrics, store: opts.store, sharedData: opts.sharedData });
  // Chosen once, here: the relay carries tunnels, and its addon also opens the health checks'
  // connections (proxy.relay: javascript loads no addon at all).
  const relay = chooseRelay(config.proxy.relay);
  runtime = buildRuntime(config, { logger, metrics, backendTls, stores, probeAddon: relay.addon });
  let data: DataPlane | undefined;
  const cache = () => data?.cache ?? null;
  // A purge made through any gateway's admin API (this one's included: purging twice is harmless).
  stores.sharedData.subscribe((ev) => {
    if (ev.type === 'cache-purge') cache()?.purge(ev.purge);
  });
  const { history, control, handoff } = buildControlSide(config, {
    gatewayId,
    logger,
    metrics,
    backendTls,
    stores,
    runtime,
    cache,
    relay: () => data?.relay ?? null,
    restartNeeded: state.restartNeeded,
    isReady: state.isReady,
    adminPeerKey: opts.adminPeerKey,
  });
  // The pool's list is applied only now that every listener of its changes exists.
  runtime.pool.setBackends(config.backends);
  data = buildDataPlane(config, { logger, metrics, backendTls, runtime, relay, cacheClock: opts.cacheClock, followsSockets: (id) => handoff.followsSockets(id), pageWait: (room) => handoff.pageWait(room), resumesOn: (id) => handoff.resumesOn(id) });
  const fronts = buildFronts(config, { logger, metrics, control, data, isReady: state.isReady, port: state.port, ticketKeys: state.ticketKeys });
  const discovery = buildDiscovery(config, runtime.pool, logger);
  return { metrics, history, stores, runtime, control, handoff, data, fronts, discovery };
}
