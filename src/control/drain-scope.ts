// What a drain token (admin.drainTokens) may change, once src/control/admin-writes.ts let it in on
// a drain or undrain: never a backend in maintenance (only admin.token ends that), and with
// admin.drainFrom "backend" only the backend the request comes from: its peer address must be one
// of the drained backend's own addresses (its URL's host, resolved as the proxy resolves it when it
// is a name). A backend pod's preStop hook drains itself; the same token from another pod drains
// nothing. The answer says what to do; the log says what was compared.
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import { backendHosts } from '../backends/host-addresses.js';
import { clientAddress } from '../http/forwarded-peer.js';
import { Errors, type HttpError } from '../http/errors.js';
import type { BackendSnapshot } from '../runtime/views.js';

export type DrainFrom = 'backend' | 'anywhere';

/** The addresses a host name resolves to (every family). */
export type AddressLookup = (host: string) => Promise<readonly string[]>;

/** The addresses the proxy connects to for this name (src/backends/host-addresses.ts: kept answers). */
export const keptLookup: AddressLookup = (host) =>
  new Promise((resolve, reject) => {
    backendHosts.lookup(host, { all: true }, (err, addresses) => (err ? reject(err) : resolve((addresses as LookupAddress[]).map((a) => a.address))));
  });

/** An IPv4 address as a dual-stack socket reports it (::ffff:10.0.0.5) compares as itself. */
export function plainAddress(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return (m ? (m[1] as string) : address).toLowerCase();
}

/** The addresses of a backend: its URL's host, or what that name resolves to. */
async function backendAddresses(url: string, lookup: AddressLookup): Promise<readonly string[]> {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  return isIP(host) ? [host] : lookup(host);
}

function notOwn(id: string): HttpError {
  return Errors.forbidden(`a drain token drains and undrains only the backend the request comes from; send it from backend "${id}" itself, or use admin.token`);
}

export interface DrainScopeOptions {
  readonly from: DrainFrom;
  /** Default: the addresses the proxy connects to (backendHosts). */
  readonly lookup?: AddressLookup;
  /** A cluster worker: the key of the client address its primary forwards. */
  readonly peerKey?: string;
}

/** Null when the drain token may change backend `b` from where `req` came; else the 403 (the detail logged). */
export async function drainTokenRefusal(req: FastifyRequest, b: BackendSnapshot, o: DrainScopeOptions): Promise<HttpError | null> {
  const log = { backend: b.id, action: (req.url.split('?')[0] ?? '').split('/').pop() };
  if (b.admin?.state === 'maintenance') {
    req.log.warn(log, 'admin: a drain token was refused: the backend is in maintenance');
    return Errors.forbidden(`backend "${b.id}" is in maintenance: only admin.token changes it`);
  }
  if (o.from === 'anywhere') return null;
  const peer = plainAddress(clientAddress(req.raw, o.peerKey));
  let addresses: readonly string[];
  try {
    addresses = (await backendAddresses(b.url, o.lookup ?? keptLookup)).map(plainAddress);
  } catch (err) {
    req.log.warn({ ...log, peer, url: b.url, err: (err as Error).message }, "admin: a drain token was refused: the backend's address could not be resolved");
    return notOwn(b.id);
  }
  if (addresses.includes(peer)) return null;
  req.log.warn({ ...log, peer, addresses }, "admin: a drain token was refused: the request did not come from the backend's own address (admin.drainFrom: backend)");
  return notOwn(b.id);
}
