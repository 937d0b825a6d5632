// A call roomgate itself makes to a backend's own endpoints (a push, a room handoff hook): one
// POST on a connection of its own, to the backend's own address, never pooled (a pooled connection
// the backend closed would need a retry, and a push or an import sent twice is a second call).
// The callers sign it (src/http/call-proof.ts) and read its answer their own way.
import http from 'node:http';
import https from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tlsOptions, type BackendTls } from '../backends/backend-tls.js';
import { backendHosts } from '../backends/host-addresses.js';
import type { Backend } from './pool.js';

// Connection errors after which nothing reached the backend.
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

/** Whether the request may have reached the backend before its connection failed. */
export function maybeSent(err: NodeJS.ErrnoException): boolean {
  return !NOT_SENT.has(err.code ?? '');
}

function ignore(): void {}

/**
 * A connection to the backend's own address opened ahead of one call (backendPost's
 * `connection`), so its connect is off the call's path (a room handoff's next step opened while the
 * step before runs). Still one connection per call; the opener destroys it if no call takes it.
 * Its errors reach the call that takes it.
 */
export function backendConnect(backend: Backend, backendTls: BackendTls): Socket {
  const { host, port, tls } = backend.config;
  const socket = tls ? tlsConnect({ host, port, lookup: backendHosts.lookup, ...tlsOptions(backendTls, host) }) : netConnect({ host, port, lookup: backendHosts.lookup });
  socket.on('error', ignore);
  return socket;
}

/**
 * Opens the POST of `path` with `fields` after Host, Content-Type and Content-Length. A header
 * list (not an object) gets no Host from Node: the backend's own address, as its health checks
 * send it. The caller writes the body with `end()`. On `connection` (backendConnect) when given
 * and not closed, else on a connection of its own.
 */
export function backendPost(backend: Backend, path: string, contentType: string, bodyLength: number, fields: readonly string[], backendTls: BackendTls, connection?: Socket): http.ClientRequest {
  const { host, port, tls } = backend.config;
  const h = host.includes(':') ? `[${host}]` : host;
  const ahead = connection !== undefined && !connection.destroyed ? connection : undefined;
  return (tls ? https : http).request({
    host,
    port,
    method: 'POST',
    path,
    headers: ['Host', port === (tls ? 443 : 80) ? h : `${h}:${port}`, 'Content-Type', contentType, 'Content-Length', String(bodyLength), ...fields],
    ...(ahead === undefined ? { agent: false } : { createConnection: () => ahead }),
    lookup: backendHosts.lookup,
    ...(tls ? tlsOptions(backendTls, host) : {}),
  });
}
