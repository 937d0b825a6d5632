// The client address of an admin request that the primary of `roomgate start --workers N`
// forwards to a worker's private admin listener (src/cluster/admin.ts): the worker's connection
// comes from the primary on 127.0.0.1, so the primary says who the client was in a header, with a
// key it made at start and gave its workers over IPC. A worker believes the header only with that
// key, on a connection from loopback; a client's own such headers are dropped by the primary and
// mean nothing without the key. Used where the address decides (a drain token's own backend,
// src/control/drain-scope.ts).
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { requestAddress } from './auth-throttle.js';
import { sha256 } from './digest.js';

export const PEER_HEADER = 'x-roomgate-peer';
export const PEER_KEY_HEADER = 'x-roomgate-peer-key';

/** A new key for one primary and its workers. */
export function newPeerKey(): string {
  return randomBytes(32).toString('base64url');
}

/** Whether a header is one the primary sets itself (a client's copy is dropped, never forwarded). */
export function isPeerHeader(name: string): boolean {
  return name === PEER_HEADER || name === PEER_KEY_HEADER;
}

/** The headers the primary adds to a forwarded admin request. */
export function forwardedPeerHeaders(req: IncomingMessage, key: string): Record<string, string> {
  return { [PEER_HEADER]: requestAddress(req), [PEER_KEY_HEADER]: key };
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/i;

/**
 * Who sent the request: the address the primary forwarded, when `key` is this worker's and the
 * connection is the primary's (loopback); otherwise the connection's own peer.
 */
export function clientAddress(req: IncomingMessage, key: string | null | undefined): string {
  const peer = requestAddress(req);
  if (!key || !LOOPBACK.test(peer)) return peer;
  const given = req.headers[PEER_KEY_HEADER];
  const forwarded = req.headers[PEER_HEADER];
  if (typeof given !== 'string' || typeof forwarded !== 'string' || !isIP(forwarded)) return peer;
  return timingSafeEqual(sha256(given), sha256(key)) ? forwarded : peer;
}
