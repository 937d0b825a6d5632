// Connection limits of a listener, so that idle connections cannot take the process to its file
// descriptor limit: past it every accept fails (EMFILE), backends cannot be reached and the admin
// port's /healthz goes unanswered. The public port's limit is derived from the descriptor limit
// with a reserve kept for backend connections, Redis, files and the admin port, which has its own
// small limit; a connection over a limit is closed at once by Node (net.Server.maxConnections,
// nothing done in JS) and counted. An optional per-address cap is counted per connection (not per
// request). Every listening server also gets a permanent `error` listener: an accept error (EMFILE
// when the descriptors run out anyway) is logged, never the end of the process.
import { peerAddress, rememberPeer } from '../http/peer.js';
import { readFileSync } from 'node:fs';
import type { Server, Socket } from 'node:net';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

/** Assumed when /proc/self/limits cannot be read (not Linux): the common `ulimit -n` default. */
export const FALLBACK_DESCRIPTOR_LIMIT = 1024;
/** "unlimited" is read as this many. */
const UNLIMITED = 1_048_576;

/**
 * The process's soft limit on open files. Node has no getrlimit: on Linux it is the "Max open
 * files" line of /proc/self/limits (what `ulimit -n` set); elsewhere FALLBACK_DESCRIPTOR_LIMIT.
 */
export function descriptorLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number {
  let text: string;
  try {
    text = read();
  } catch {
    return FALLBACK_DESCRIPTOR_LIMIT;
  }
  const m = /^Max open files\s+(\S+)/m.exec(text);
  if (!m) return FALLBACK_DESCRIPTOR_LIMIT;
  if (m[1] === 'unlimited') return UNLIMITED;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? n : FALLBACK_DESCRIPTOR_LIMIT;
}

export interface PublicLimits {
  /** The process's descriptor limit the figures come from. */
  readonly descriptors: number;
  /** Descriptors kept for everything but public client connections. */
  readonly reserve: number;
  /** Public client connections at once. */
  readonly maxConnections: number;
}

/**
 * The public listener's limit: listen.maxConnections when set, else half of what the reserve
 * leaves (each client connection may hold a backend connection: a WebSocket tunnel, a page being
 * relayed). The reserve: listen.descriptorReserve when set, else max(256, 1/8 of the limit), at
 * most half of it (idle keep-alive pools to backends, Redis, static files, logs, the admin port).
 */
export function publicLimits(descriptors: number, configured: { maxConnections: number; descriptorReserve: number }): PublicLimits {
  const reserve = configured.descriptorReserve > 0 ? configured.descriptorReserve : Math.min(Math.floor(descriptors / 2), Math.max(256, Math.floor(descriptors / 8)));
  const derived = Math.max(1, Math.floor((descriptors - reserve) / 2));
  return { descriptors, reserve, maxConnections: configured.maxConnections > 0 ? configured.maxConnections : derived };
}

export interface ConnectionLimitOptions {
  /** The listener's name in metrics and logs: public, admin, redirect. */
  readonly listener: string;
  /** Connections at once; beyond, Node closes each new one on accept. 0: no limit. */
  readonly maxConnections: number;
  /** Connections at once from one client address; 0: no cap. */
  readonly perAddress: number;
  /** A connection was closed on accept ('limit' or 'per-address'). */
  readonly onRefused: (listener: string, reason: 'limit' | 'per-address') => void;
  readonly logger: Logger;
}

/** Applies the limits to a listener (before it listens) and guards it against accept errors. */
export function limitConnections(server: Server, o: ConnectionLimitOptions): void {
  guardListener(server, o.listener, o.logger);
  if (o.maxConnections > 0) {
    server.maxConnections = o.maxConnections;
    // Emitted by Node for each connection it closed at once because of maxConnections.
    server.on('drop', () => o.onRefused(o.listener, 'limit'));
  }
  if (o.perAddress > 0) perAddressCap(server, o);
}

function perAddressCap(server: Server, o: ConnectionLimitOptions): void {
  const open = new Map<string, number>();
  // One shared function for every socket: no closure per connection. Registered only for a
  // counted socket, whose address was remembered then (src/http/peer.ts owns it).
  function release(this: Socket): void {
    const address = peerAddress(this);
    if (address === undefined) return;
    const n = (open.get(address) ?? 1) - 1;
    if (n <= 0) open.delete(address);
    else open.set(address, n);
  }
  // First, before node:http, the TLS layer or the byte-level front take the socket.
  server.prependListener('connection', (socket: Socket) => {
    rememberPeer(socket);
    const address = peerAddress(socket);
    if (address === undefined) return;
    const n = open.get(address) ?? 0;
    if (n >= o.perAddress) {
      o.onRefused(o.listener, 'per-address');
      socket.destroy();
      return;
    }
    open.set(address, n + 1);
    socket.once('close', release);
  });
}

/**
 * A permanent `error` listener on a listening server: Node emits accept errors (EMFILE, ENFILE)
 * there, and with no listener the process would end. Logged at most once a second per listener.
 */
export function guardListener(server: Server, listener: string, logger: Logger): void {
  let lastLog = 0;
  let unlogged = 0;
  server.on('error', (err: NodeJS.ErrnoException) => {
    // Errors before listening are the listen() caller's (EADDRINUSE...): it has its own listener.
    if (!server.listening) return;
    const now = Date.now();
    if (now - lastLog < 1_000) {
      unlogged++;
      return;
    }
    logger.error({ listener, err: err.code ?? err.message, suppressed: unlogged }, 'listener error (accepting connections continues)');
    lastLog = now;
    unlogged = 0;
  });
}

export interface Listeners {
  readonly public: Server;
  readonly redirect: Server | null;
  readonly admin: Server | null;
}

/**
 * The limits of a gateway's listeners from its configuration: the public port's (derived or
 * configured, per-address cap), the admin port's (admin.maxConnections) and the redirect port's
 * (a quarter of the reserve, at least 64). Returns the public figures for the start log.
 */
export function applyConnectionLimits(
  config: Pick<LoadedConfig, 'listen' | 'admin'>,
  servers: Listeners,
  metrics: Pick<Metrics, 'connectionsRefused'>,
  logger: Logger,
  descriptors: number = descriptorLimit(),
): PublicLimits {
  const limits = publicLimits(descriptors, config.listen);
  const onRefused = (listener: string, reason: 'limit' | 'per-address'): void => metrics.connectionsRefused.inc({ listener, reason });
  limitConnections(servers.public, { listener: 'public', maxConnections: limits.maxConnections, perAddress: config.listen.maxConnectionsPerAddress, onRefused, logger });
  if (servers.redirect) limitConnections(servers.redirect, { listener: 'redirect', maxConnections: Math.max(64, Math.floor(limits.reserve / 4)), perAddress: config.listen.maxConnectionsPerAddress, onRefused, logger });
  if (servers.admin) limitConnections(servers.admin, { listener: 'admin', maxConnections: config.admin.maxConnections, perAddress: 0, onRefused, logger });
  if (limits.maxConnections * 2 + limits.reserve > descriptors) {
    logger.warn({ maxConnections: limits.maxConnections, descriptors, reserve: limits.reserve }, 'listen.maxConnections is above what the open-file limit allows with one backend connection each: raise `ulimit -n` or lower it');
  }
  return limits;
}
