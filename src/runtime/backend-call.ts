// A call roomgate itself makes to a backend's own endpoints (a push, a room handoff hook): one
// POST on a connection of its own, to the backend's own address, never pooled (a pooled connection
// the backend closed would need a retry, and a push or an import sent twice is a second call).
// The callers sign it (src/http/call-proof.ts) and read its answer their own way.
import http from 'node:http';
import https from 'node:https';
import { tlsOptions, type BackendTls } from '../backends/backend-tls.js';
import { backendHosts } from '../backends/host-addresses.js';
import type { Backend } from './pool.js';

// Connection errors after which nothing reached the backend.
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

/** Whether the request may have reached the backend before its connection failed. */
export function maybeSent(err: NodeJS.ErrnoException): boolean {
  return !NOT_SENT.has(err.code ?? '');
}

/**
 * Opens the POST of `path` with `fields` after Host, Content-Type and Content-Length. A header
 * list (not an object) gets no Host from Node: the backend's own address, as its health checks
 * send it. The caller writes the body with `end()`.
 */
export function backendPost(backend: Backend, path: string, contentType: string, bodyLength: number, fields: readonly string[], backendTls: BackendTls): http.ClientRequest {
  const { host, port, tls } = backend.config;
  const h = host.includes(':') ? `[${host}]` : host;
  return (tls ? https : http).request({
    host,
    port,
    method: 'POST',
    path,
    headers: ['Host', port === (tls ? 443 : 80) ? h : `${h}:${port}`, 'Content-Type', contentType, 'Content-Length', String(bodyLength), ...fields],
    agent: false,
    lookup: backendHosts.lookup,
    ...(tls ? tlsOptions(backendTls, host) : {}),
  });
}
