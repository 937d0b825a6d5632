// The fronts: the listeners and wire forms that turn client bytes into requests for the data
// plane and the control plane (the public port over HTTP/1.1, HTTP/2 and the byte-level page
// path, the redirect port, the admin port's limits), the TLS certificates they serve, and the one
// dispatch order every front hands a request by.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { LoadedConfig } from '../config/load.js';
import type { ControlPlane } from '../control/control-plane.js';
import { healthAnswer } from '../http/health-answer.js';
import { createTargetRule, type TargetRule } from '../http/target.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { HttpProxy } from '../proxy/http-proxy.js';
import type { LeanPages } from '../proxy/lean-pages.js';
import { applyConnectionLimits, type PublicLimits } from '../server/connection-limit.js';
import { H2Front } from '../server/h2-front.js';
import { LeanFront } from '../server/lean-connection.js';
import { createPublicServer } from '../server/public-server.js';
import { createRedirectServer } from '../server/redirect-server.js';
import { hstsValue, loadTls, TlsReloader } from '../server/tls-config.js';
import type { StaticFiles } from '../static/serve.js';
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

/** How a front hands over a request: to the node:http and h2 fronts, and to the byte-level one. */
export interface RequestDispatch {
  readonly onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  /** The byte-level front leaves these paths (answered by roomgate itself) to the node:http server. */
  readonly ownPath: (url: string) => boolean;
}

/**
 * The dispatch order, one place for every front: roomgate's own paths (health, the control plane)
 * first, then the static mounts, and everything else is the app's (the proxy).
 */
export function dispatchOrder(d: {
  readonly control: ControlPlane;
  readonly statics: StaticFiles | null;
  readonly httpProxy: HttpProxy;
  readonly isReady: () => boolean;
}): RequestDispatch {
  const { control, statics, httpProxy, isReady } = d;
  return {
    // roomgate's own paths (control plane) and static mounts are answered here; everything else is the app's.
    onRequest: (req, res) => {
      const url = req.url ?? '/';
      if (control.owns(url)) control.handle(req, res);
      else if (statics?.owns(url)) statics.handle(req, res);
      else httpProxy.handle(req, res);
    },
    ownPath: (url) => healthAnswer(url, isReady) !== null || control.owns(url) || statics?.owns(url) === true,
  };
}

export function buildFronts(config: LoadedConfig, deps: FrontDeps): Fronts {
  const { logger, metrics, data, isReady } = deps;
  // One canonical target for every front, and the paths only roomgate calls on a backend.
  const target = createTargetRule({ reserved: [config.push.path], pathPrefix: config.room.sources.includes('path-prefix') ? config.room.pathPrefix : null });
  const certificates = loadTls(config, deps.ticketKeys);
  const redirect =
    certificates && config.tls.redirectPort !== null
      ? createRedirectServer({ httpsPort: deps.port, isReady, maxHeaderBytes: config.listen.maxHeaderBytes, headersTimeoutMs: config.listen.headersTimeoutMs })
      : null;
  const dispatch = dispatchOrder({ control: deps.control, statics: data.statics, httpProxy: data.httpProxy, isReady });
  const h2 = certificates && config.http2.enabled ? buildH2(config, deps, target, dispatch) : null;
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
    isReady,
    onRequest: dispatch.onRequest,
    onUpgrade: (req, socket, head) => data.upgradeProxy.handle(req, socket, head),
    metrics,
    logger,
  });
  h2?.attach(server as HttpsServer);
  let lean: Fronts['lean'] = null;
  if (data.leanPages) {
    const front = buildLeanFront(config, deps, target, dispatch, data.leanPages);
    // After the h2 front took its hook: the lean front sees the HTTP/1.1 connections first.
    front.attach(server, certificates !== null);
    lean = { front, pages: data.leanPages };
  }
  const tls = certificates ? new TlsReloader(certificates, server as HttpsServer, logger) : null;
  const admin = deps.control.adminServer;
  const connectionLimits = applyConnectionLimits(config, { public: server, redirect, admin }, metrics, logger);
  return { server, h2, lean, redirect, tls, admin, connectionLimits };
}

function buildH2(config: LoadedConfig, deps: FrontDeps, target: TargetRule, dispatch: RequestDispatch): H2Front {
  const { upgradeProxy } = deps.data;
  return new H2Front({
    maxConcurrentStreams: config.http2.maxConcurrentStreams,
    maxResetsPerS: config.http2.maxResetsPerS,
    maxHeaderBytes: config.listen.maxHeaderBytes,
    maxHeaders: config.listen.maxHeaders,
    target,
    allow: deps.data.methods.allow,
    idleTimeoutMs: config.listen.keepAliveTimeoutMs,
    requestTimeoutMs: config.listen.requestTimeoutMs,
    hsts: hstsValue(config),
    isReady: deps.isReady,
    onRequest: dispatch.onRequest,
    onWebSocket: config.http2.websockets ? (req, socket, head) => upgradeProxy.handle(req, socket, head) : null,
    metrics: deps.metrics,
    logger: deps.logger,
  });
}

function buildLeanFront(config: LoadedConfig, deps: FrontDeps, target: TargetRule, dispatch: RequestDispatch, pages: LeanPages): LeanFront {
  return new LeanFront({
    limits: { maxHeaderBytes: config.listen.maxHeaderBytes, maxHeaders: config.listen.maxHeaders, roomHeader: config.room.header.toLowerCase() },
    headersTimeoutMs: config.listen.headersTimeoutMs,
    keepAliveTimeoutMs: config.listen.keepAliveTimeoutMs,
    clientWriteTimeoutMs: config.proxy.clientWriteTimeoutMs,
    target,
    ownPath: dispatch.ownPath,
    pages,
    metrics: deps.metrics,
  });
}
