// X-Forwarded-* handling. A client's own X-Forwarded-* headers are believed only when the peer is
// a configured trusted proxy; otherwise they are replaced, so djust's DJUST_TRUSTED_PROXY_COUNT=1
// (client = last XFF entry) always sees the address roomgate saw.
import { BlockList, isIP } from 'node:net';
import { connectionNamed, HOP_BY_HOP } from '../http/hop-by-hop.js';
import { isRoomgateField, ownerFields, type Owner } from '../http/ownership.js';

export interface ForwardContext {
  /** The TCP peer address as the socket reports it. */
  readonly peer: string | undefined;
  /** The client connection is TLS. */
  readonly encrypted: boolean;
  /** Path prefix roomgate stripped (e.g. "/r/42"), sent on as X-Forwarded-Prefix. */
  readonly strippedPrefix: string | null;
  /** The room the request is routed for and its placement epoch: X-Roomgate-Room and X-Roomgate-Epoch. */
  readonly owner?: Owner | null;
}

// Headers that claim something about the client: dropped when the peer is not trusted.
const CLIENT_CLAIMS = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-prefix', 'forwarded', 'x-real-ip']);
// Names a Connection header may not take away: the body's framing (dropping Content-Length while
// the body is still sent lets the backend read the body as a further request: smuggling), Host,
// and what roomgate itself sets. A Connection token naming one of them is ignored.
const NEVER_HOP_BY_HOP = new Set(['content-length', 'host', ...CLIENT_CLAIMS]);

/** "::ffff:10.0.0.1" -> "10.0.0.1": logs, XFF and trust checks use the plain IPv4 form. */
export function normalizeAddress(addr: string | undefined): string {
  if (!addr) return 'unknown';
  return addr.startsWith('::ffff:') && isIP(addr.slice(7)) === 4 ? addr.slice(7) : addr;
}

export class Forwarding {
  private readonly trusted: BlockList | null;

  constructor(trustedProxies: readonly string[]) {
    if (trustedProxies.length === 0) {
      this.trusted = null;
      return;
    }
    this.trusted = new BlockList();
    for (const entry of trustedProxies) {
      const [addr = '', bits] = entry.split('/');
      const family = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.trusted.addAddress(addr, family);
      else this.trusted.addSubnet(addr, Number(bits), family);
    }
  }

  isTrusted(peer: string): boolean {
    if (this.trusted === null) return false;
    const family = isIP(peer);
    return family !== 0 && this.trusted.check(peer, family === 6 ? 'ipv6' : 'ipv4');
  }

  /** "https" or "http" as the client saw it: a trusted proxy's word, else our own socket. */
  proto(rawHeaders: readonly string[], ctx: ForwardContext): string {
    const own = ctx.encrypted ? 'https' : 'http';
    if (!this.isTrusted(normalizeAddress(ctx.peer))) return own;
    const claimed = firstHeader(rawHeaders, 'x-forwarded-proto');
    return claimed === 'https' || claimed === 'http' ? claimed : own;
  }

  /**
   * The header list to send to the backend, as a flat [name, value, ...] array like rawHeaders.
   * Host and Origin pass unchanged. Hop-by-hop headers (and those Connection names) are dropped;
   * keepUpgrade (WebSocket handshakes) keeps Upgrade and sends Connection: Upgrade.
   */
  headers(rawHeaders: readonly string[], ctx: ForwardContext, keepUpgrade: boolean): string[] {
    const peer = normalizeAddress(ctx.peer);
    const trusted = this.isTrusted(peer);
    const out: string[] = [];
    let xff = '';
    let proto: string | undefined;
    let fwdHost: string | undefined;
    let fwdPrefix: string | undefined;
    let host: string | undefined;
    // Headers named in Connection are hop-by-hop too; every Connection line counts.
    const dropNamed = connectionTokens(rawHeaders);
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      const name = rawHeaders[i] as string;
      const value = rawHeaders[i + 1] as string;
      const lower = name.toLowerCase();
      // "X_Forwarded_For" reaches a WSGI/ASGI app as HTTP_X_FORWARDED_FOR, the same variable as
      // the real header (Django merges them): underscore spellings of a claim are never passed on.
      if (lower.includes('_') && CLIENT_CLAIMS.has(lower.replaceAll('_', '-'))) continue;
      // X-Roomgate-* is roomgate's word to the backend (the room and its epoch): never a client's,
      // trusted proxy or not.
      if (isRoomgateField(lower)) continue;
      if (CLIENT_CLAIMS.has(lower)) {
        if (!trusted) continue;
        if (lower === 'x-forwarded-for') xff = xff ? `${xff}, ${value}` : value;
        else if (lower === 'x-forwarded-proto') proto ??= value;
        else if (lower === 'x-forwarded-host') fwdHost ??= value;
        else if (lower === 'x-forwarded-prefix') fwdPrefix ??= value;
        else out.push(name, value);
        continue;
      }
      if (HOP_BY_HOP.has(lower) || dropNamed?.has(lower)) {
        // A handshake keeps its Upgrade header; Connection is rewritten below.
        if (keepUpgrade && lower === 'upgrade') out.push(name, value);
        continue;
      }
      if (lower === 'host') host ??= value;
      out.push(name, value);
    }
    if (keepUpgrade) out.push('Connection', 'Upgrade');
    out.push('X-Forwarded-For', xff ? `${xff}, ${peer}` : peer);
    out.push('X-Forwarded-Proto', proto ?? (ctx.encrypted ? 'https' : 'http'));
    const h = fwdHost ?? host;
    if (h !== undefined) out.push('X-Forwarded-Host', h);
    if (ctx.strippedPrefix !== null) out.push('X-Forwarded-Prefix', (fwdPrefix ?? '') + ctx.strippedPrefix);
    else if (fwdPrefix !== undefined) out.push('X-Forwarded-Prefix', fwdPrefix);
    if (ctx.owner) out.push(...ownerFields(ctx.owner));
    return out;
  }
}

function connectionTokens(rawHeaders: readonly string[]): Set<string> | null {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === 'connection') values.push(rawHeaders[i + 1] as string);
  }
  return values.length === 0 ? null : connectionNamed(values, NEVER_HOP_BY_HOP);
}

function firstHeader(rawHeaders: readonly string[], lowerName: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === lowerName) return rawHeaders[i + 1];
  }
  return undefined;
}
