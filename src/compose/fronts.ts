// The fronts: the listeners and wire forms that turn client bytes into requests for the data
// plane and the control plane (the public port over HTTP/1.1, HTTP/2 and the byte-level page
// path, the redirect port, the admin port's limits), the TLS certificates they serve, and the
// request pipeline every front hands its requests to.
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { LoadedConfig } from '../config/load.js';
import type { ControlPlane } from '../control/control-plane.js';
import { createTargetRule, type TargetRule } from '../http/target.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { LeanPages } from '../proxy/lean-pages.js';
import { applyConnectionLimits, type PublicLimits } from '../server/connection-limit.js';
import { H2Front } from '../server/h2-front.js';
import { LeanFront } from '../server/lean-connection.js';
import { createPublicServer } from '../server/public-server.js';
import { createRedirectServer } from '../server/redirect-server.js';
import { hstsValue, loadTls, TlsReloader } from '../server/tls-config.js';
import { RequestPipeline, type OwnPaths } from '../pipeline/pipeline.js';
import type { DataPlane } from './data-plane.js';

export interface Fronts {
  /** The public port's HTTP/1.1 server (TLS or plain); the other fronts take connections from it. */
  readonly server: Server;
  /** HTTP/2 connections of the TLS port; null without TLS or with http2.enabled false. */
  readonly h2: H2Front | null;
  /** The byte-level page path (plain HTTP and HTTP/1.1 over TLS), or null when switched off. */
  readonly lean: { readonly front: LeanFront; readonly pages: LeanPages } | null;
  /** tls.redirectPort: plain HTTP answered with redirects to https; null when not configured. */
  readonly redirect: Server | null;
  /** The public port's certificate reloads; null without TLS. */
  readonly tls: TlsReloader | null;
  readonly admin: Server | null;
  /** The public listener's connection limit and where it comes from (logged at start). */
  readonly connectionLimits: PublicLimits;
}

export interface FrontDeps {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly control: ControlPlane;
  readonly data: DataPlane;
  readonly isReady: () => boolean;
  /** The public port once listening (the redirect port points there). */
  readonly port: () => number;
  /** The TLS session ticket keys to start with. */
  readonly ticketKeys: Buffer;
}

/** The one order every front hands its canonical requests by (src/pipeline/pipeline.ts), with its parts. */
export function pipelineOf(data: DataPlane, control: OwnPaths, isReady: () => boolean): RequestPipeline {
  return new RequestPipeline({
    isReady,
    control,
    statics: data.statics,
    methods: data.methods,
    roomKey: data.router,
    cache: data.cache,
    cookies: data.cookies,
    forward: data.forwarder,
    pages: data.httpProxy,
    leanPages: data.leanPages,
    upgrades: data.upgradeProxy,
    ...(data.handoffWait ? { handoffWait: data.handoffWait } : {}),
  });
}

export function buildFronts(config: LoadedConfig, deps: FrontDeps): Fronts {
  const { logger, metrics, data, isReady } = deps;
  // One canonical target for every front, and the paths only roomgate calls on a backend.
  const target = createTargetRule({ reserved: [config.push.path, config.handoff.path], pathPrefix: config.room.sources.includes('path-prefix') ? config.room.pathPrefix : null });
  const certificates = loadTls(config, deps.ticketKeys);
  const redirect =
    certificates && config.tls.redirectPort !== null
      ? createRedirectServer({ httpsPort: deps.port, isReady, maxHeaderBytes: config.listen.maxHeaderBytes, headersTimeoutMs: config.listen.headersTimeoutMs })
      : null;
  const pipeline = pipelineOf(data, deps.control, isReady);
  const h2 = certificates && config.http2.enabled ? buildH2(config, deps, target, pipeline) : null;
  const server = createPublicServer({
    tls: certificates,
    hsts: hstsValue(config),
    http2: h2 !== null,
    maxHeaderBytes: config.listen.maxHeaderBytes,
    maxHeaders: config.listen.maxHeaders,
    target,
    allow: data.methods.allow,
    headersTimeoutMs: config.listen.headersTimeoutMs,
    requestTimeoutMs: config.listen.requestTimeoutMs,
    keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
    roomHeader: config.room.header.toLowerCase(),
    pipeline,
    metrics,
    logger,
  });
  h2?.attach(server as HttpsServer);
  let lean: Fronts['lean'] = null;
  if (data.leanPages) {
    const front = buildLeanFront(config, deps, target, pipeline);
    // After the h2 front took its hook: the lean front sees the HTTP/1.1 connections first.
    front.attach(server, certificates !== null);
    lean = { front, pages: data.leanPages };
  }
  const tls = certificates ? new TlsReloader(certificates, server as HttpsServer, logger) : null;
  const admin = deps.control.adminServer;
  const connectionLimits = applyConnectionLimits(config, { public: server, redirect, admin }, metrics, logger);
  return { server, h2, lean, redirect, tls, admin, connectionLimits };
}

function buildH2(config: LoadedConfig, deps: FrontDeps, target: TargetRule, pipeline: RequestPipeline): H2Front {
  return new H2Front({
    maxConcurrentStreams: config.http2.maxConcurrentStreams,
    maxResets: config.http2.maxResets,
    resetWindowS: config.http2.resetWindowS,
    maxHeaderBytes: config.listen.maxHeaderBytes,
    maxHeaders: config.listen.maxHeaders,
    target,
    allow: deps.data.methods.allow,
    idleTimeoutMs: config.listen.keepAliveTimeoutMs,
    requestTimeoutMs: config.listen.requestTimeoutMs,
    hsts: hstsValue(config),
    roomHeader: config.room.header.toLowerCase(),
    pipeline,
    webSockets: config.http2.websockets,
    metrics: deps.metrics,
    logger: deps.logger,
  });
}

function buildLeanFront(config: LoadedConfig, deps: FrontDeps, target: TargetRule, pipeline: RequestPipeline): LeanFront {
  return new LeanFront({
    limits: { maxHeaderBytes: config.listen.maxHeaderBytes, maxHeaders: config.listen.maxHeaders, roomHeader: config.room.header.toLowerCase() },
    headersTimeoutMs: config.listen.headersTimeoutMs,
    keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
    clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
    target,
    pipeline,
    metrics: deps.metrics,
  });
}
