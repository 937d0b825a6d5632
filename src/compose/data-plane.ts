// The data plane's rules and forwarding paths (src/proxy/, src/cache/, src/static/), built from the
// configuration: the router (room key, placement), the forwarding core, the page cache, both page
// transports, the upgrade path with its admission, the static mounts. The request pipeline that
// orders them and the fronts that feed it are built in fronts.ts.
import { Forwarder } from '../forward/forwarder.js';
import { randomBytes } from 'node:crypto';
import type { BackendTls } from '../backends/backend-tls.js';
import { PageCache } from '../cache/page-cache.js';
import type { LoadedConfig } from '../config/load.js';
import { createMethodPolicy, type MethodPolicy } from '../http/methods.js';
import { pinTagsWith, type PinTagsFor } from '../http/pin-inject.js';
import { ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI } from '../pages/room-pin-script.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { Admission } from '../proxy/admission.js';
import { Forwarding } from '../forward/forwarded.js';
import { HttpProxy } from '../proxy/http-proxy.js';
import { LeanPages } from '../proxy/lean-pages.js';
import { PageCookies, type RoomCookieSettings } from '../proxy/page-cookie.js';
import { readErrorPages, Refuser } from '../proxy/refuser.js';
import { Router } from '../proxy/router.js';
import { UpgradeProxy } from '../proxy/upgrade-proxy.js';
import { NativeRelay, type ChosenRelay, type RelayChoice } from '../proxy/native-relay.js';
import { createKeyExtractor } from '../room/extract.js';
import { createPinSigner, signerFor, type RoomSigner } from '../room/signing.js';
import { createRoomValidator } from '../room/validate.js';
import { withVerifyCache } from '../room/verify-cache.js';
import { hstsValue } from '../server/tls-config.js';
import { StaticFiles } from '../static/serve.js';
import type { Runtime } from './runtime.js';

export interface DataPlane {
  /** The room key and the placement decision (step 7 of the pipeline, and the forwarding core's placement). */
  readonly router: Router;
  /** The one forwarding core every path sends through (step 9). */
  readonly forwarder: Forwarder;
  /** The room cookie page answers set. */
  readonly cookies: PageCookies;
  /** The page cache; null when cache.paths is empty. */
  readonly cache: PageCache | null;
  /** Which methods are proxied: the one rule every front's answers agree with (src/http/methods.ts). */
  readonly methods: MethodPolicy;
  readonly httpProxy: HttpProxy;
  readonly upgradeProxy: UpgradeProxy;
  /** Which relay carries open tunnels (proxy.relay), and why. */
  readonly relay: RelayChoice;
  /** Static mounts, served here and never proxied; null without mounts. */
  readonly statics: StaticFiles | null;
  /** The byte-level page path, or null when proxy.leanPages is off. */
  readonly leanPages: LeanPages | null;
  /** Step 8a: page requests of a room in handoff wait for its end (src/runtime/handoff-pages.ts). */
  readonly handoffWait?: { wait(room: string | null): Promise<boolean> | null };
}

export interface DataPlaneDeps {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly backendTls: BackendTls;
  readonly runtime: Runtime;
  /** The page cache's clock (tests move it); default Date.now. */
  readonly cacheClock?: () => number;
  /** Whether new tunnels are followed message by message, so a version-2 handoff can hold them. */
  readonly followsSockets?: (backendId: string) => boolean;
  /** A page request of a room in handoff waits for its end (src/runtime/handoff-pages.ts). */
  readonly pageWait?: (room: string | null) => Promise<boolean> | null;
  /** Whether a new followed tunnel to the backend is made ready for a resume (src/proxy/tunnel-resume.ts). */
  readonly resumesOn?: (backendId: string) => boolean;
  /** The relay proxy.relay chose (chooseRelay), with the addon when it is the native one. */
  readonly relay: ChosenRelay;
}

export function buildDataPlane(config: LoadedConfig, deps: DataPlaneDeps): DataPlane {
  const { logger, metrics, runtime } = deps;
  const secrets = cookieSecrets(config, logger);
  const signer = signerFor(config, secrets);
  // Per-tab pins are keyed with the cookie's secrets whatever the cookie's format (docs/per-tab-rooms.md).
  const pinSigner = secrets.length > 0 ? createPinSigner(secrets, config.room.pinMaxAgeS) : null;
  const router = buildRouter(config, deps, signer, pinSigner);
  const forwarding = new Forwarding(config.proxy.trustedProxies);
  // The one forwarding core every path sends through (src/forward/forwarder.ts).
  const forwarder = new Forwarder({ placement: router, pool: runtime.pool, metrics, logger });
  const pinTags = pinTagsFor(config, pinSigner);
  const cache = buildCache(config, deps, forwarder, forwarding, pinTags);
  const methods = createMethodPolicy(config.proxy.extraMethods);
  // roomgate's own answers, one catalogue for every path (src/http/refusals.ts).
  const refuser = new Refuser({ pages: readErrorPages(config.proxy.errorPages), logger, metrics });
  // What both page paths (node:http's and the byte-level one) are given alike.
  const cookies = new PageCookies(roomCookieFor(config, signer), forwarding, logger);
  const pagePaths = {
    forwarder,
    refuser,
    pool: runtime.pool,
    forwarding,
    connectTimeoutMs: config.proxy.connectTimeoutMs,
    responseTimeoutMs: config.proxy.responseTimeoutMs,
    maxIdleSocketsPerBackend: config.proxy.maxIdleSocketsPerBackend,
    backendIdleTimeoutMs: config.proxy.backendIdleTimeoutMs,
    clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
    rewriteLocation: config.proxy.rewriteLocation,
    cookies,
    metrics,
    logger,
    pinTags,
  };
  const httpProxy = new HttpProxy({
    ...pagePaths,
    backendTls: deps.backendTls,
    body: { bufferBytes: config.proxy.bufferBodyBytes, maxBytes: config.proxy.maxBodyBytes },
    bodyIdleTimeoutMs: config.proxy.bodyIdleTimeoutMs,
  });
  const { relay } = deps;
  metrics.relayInfo.set({ relay: relay.relay, configured: relay.configured }, 1);
  const upgradeProxy = buildUpgradeProxy(config, deps, { forwarder, refuser, forwarding }, relay.addon);
  const leanPages = config.proxy.leanPages
    ? new LeanPages({ ...pagePaths, keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs, hsts: hstsValue(config) })
    : null;
  const { pageWait } = deps;
  const handoffWait = pageWait ? { wait: pageWait } : undefined;
  const choice: RelayChoice = { configured: relay.configured, relay: relay.relay, why: relay.why };
  return { router, forwarder, cookies, cache, methods, httpProxy, upgradeProxy, relay: choice, statics: buildStatics(config, deps), leanPages, ...(handoffWait ? { handoffWait } : {}) };
}

/**
 * The configured cookie secrets; with a signed cookie and none configured, a random one (and a
 * warning: cookies then die with the process and other gateways reject them).
 */
function cookieSecrets(config: LoadedConfig, logger: Logger): readonly string[] {
  if (!config.cookie.signed || config.cookie.secrets.length > 0) return config.cookie.secrets;
  logger.warn(
    "no cookie secret configured (cookie.secrets or ROOMGATE_COOKIE_SECRETS): using a random one; room cookies will not survive a restart and gateways will not accept each other's cookies",
  );
  return [randomBytes(32).toString('base64url')];
}

function buildRouter(config: LoadedConfig, deps: DataPlaneDeps, signer: RoomSigner | null, pinSigner: RoomSigner | null): Router {
  return new Router({
    extractKey: createKeyExtractor({
      sources: config.room.sources,
      validate: createRoomValidator(config.room.pattern),
      queryParam: config.room.queryParam,
      pathPrefix: config.room.pathPrefix,
      pagePaths: config.room.pagePaths,
      cookieName: config.cookie.name,
      // Verified cookies are reused for a second: no HMAC per request of a known room.
      signer: signer && withVerifyCache(signer, { maxEntries: 10_000, ttlMs: 1_000 }),
      pinParam: config.room.pinParam,
      pinSigner: pinSigner && withVerifyCache(pinSigner, { maxEntries: 10_000, ttlMs: 1_000 }),
    }),
    placer: deps.runtime.placer,
    pool: deps.runtime.pool,
    metrics: deps.metrics,
    logger: deps.logger,
  });
}

/** The page cache (per process), asked by both page paths; off until cache.paths lists something. */
/**
 * room.pinInject: the tags a page of a room gets (src/http/pin-inject.ts), the pin signed when the
 * page is sent (or stored); null when off, or with no secret to sign with (the configuration check
 * refuses that combination).
 */
function pinTagsFor(config: LoadedConfig, pinSigner: RoomSigner | null): PinTagsFor | null {
  if (!config.room.pinInject || pinSigner === null) return null;
  const tags = pinTagsWith({ scriptPath: ROOM_PIN_SCRIPT_PATH, sri: ROOM_PIN_SCRIPT_SRI, param: config.room.pinParam });
  return (room) => tags(pinSigner.sign(room, Date.now()));
}

function buildCache(config: LoadedConfig, deps: DataPlaneDeps, forwarder: Forwarder, forwarding: Forwarding, pinTags: PinTagsFor | null): PageCache | null {
  if (config.cache.paths.length === 0) return null;
  return new PageCache({
    config: config.cache,
    roomCookieName: config.cookie.name,
    forwarder,
    pool: deps.runtime.pool,
    forwarding,
    backendTls: deps.backendTls,
    connectTimeoutMs: config.proxy.connectTimeoutMs,
    responseTimeoutMs: config.proxy.responseTimeoutMs,
    maxIdleSocketsPerBackend: config.proxy.maxIdleSocketsPerBackend,
    backendIdleTimeoutMs: config.proxy.backendIdleTimeoutMs,
    rewriteLocation: config.proxy.rewriteLocation,
    metrics: deps.metrics,
    logger: deps.logger,
    pinTags,
    ...(deps.cacheClock ? { now: deps.cacheClock } : {}),
  });
}

/** cookie.setOnPages: the room cookie pages set (signed when the cookie is); null when off. */
function roomCookieFor(config: LoadedConfig, signer: RoomSigner | null): RoomCookieSettings | null {
  if (!config.cookie.setOnPages) return null;
  return {
    name: config.cookie.name,
    maxAgeS: config.cookie.maxAgeS,
    encode: signer ? (room, now) => signer.sign(room, now) : (room) => room,
  };
}

function buildUpgradeProxy(
  config: LoadedConfig,
  deps: DataPlaneDeps,
  shared: { readonly forwarder: Forwarder; readonly refuser: Refuser; readonly forwarding: Forwarding },
  addon: ChosenRelay['addon'],
): UpgradeProxy {
  const { runtime } = deps;
  const admission = new Admission({
    maxInflight: config.admission.maxInflightUpgrades,
    perSecond: config.admission.upgradesPerSecond,
    retryAfterS: config.admission.retryAfterS,
  });
  return new UpgradeProxy({
    ...shared,
    pool: runtime.pool,
    tunnels: runtime.tunnels,
    admission,
    placementOf: (room) => runtime.placer.cachedPlacement(room)?.backend ?? null,
    websocketPaths: config.proxy.websocketPaths,
    backendTls: deps.backendTls,
    connectTimeoutMs: config.proxy.connectTimeoutMs,
    responseTimeoutMs: config.proxy.responseTimeoutMs,
    idleTimeoutMs: config.proxy.websocketIdleTimeoutMs,
    clientSilenceMs: config.proxy.websocketClientSilenceMs,
    clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
    rewriteLocation: config.proxy.rewriteLocation,
    metrics: deps.metrics,
    logger: deps.logger,
    ...(deps.followsSockets ? { followsMessages: deps.followsSockets } : {}),
    ...(deps.resumesOn ? { resumesOn: deps.resumesOn } : {}),
    nativeRelay: addon === null ? null : new NativeRelay(addon, NativeRelay.tickFor(config.proxy.websocketIdleTimeoutMs, config.proxy.websocketClientSilenceMs, config.proxy.clientWriteTimeoutMs)),
  });
}

/** Static mounts are served here, never proxied (the directories were checked at load). */
function buildStatics(config: LoadedConfig, deps: DataPlaneDeps): StaticFiles | null {
  if (config.static.mounts.length === 0) return null;
  return new StaticFiles({
    mounts: config.static.mounts,
    maxAgeS: config.static.maxAgeS,
    hashedNames: config.static.hashedNames,
    onResponse: (status) => deps.metrics.staticResponses.inc({ status: String(status) }),
    logger: deps.logger,
  });
}
