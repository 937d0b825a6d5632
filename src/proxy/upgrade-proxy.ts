// Proxies WebSocket upgrades: the upgrade path of the request pipeline (src/pipeline/pipeline.ts,
// its UpgradePath, structurally): the handshake rules, admission per backend (asked by the
// forwarding core once the placement named one), then the handshake replayed on a fresh TCP
// connection, reads the backend's answer head itself (strict, bounded), and only a complete 101
// with `Upgrade: websocket` opens a tunnel that from then on only moves bytes (frames are only
// followed, header by header, on a tunnel a handoff may hold), here or, for a plain tunnel, on the
// native relay (native-relay.ts; handed over after the 101, taken back for a hold). Any other
// answer is relayed as one HTTP response and both connections are closed, so a backend that keeps
// its connection after a 200 or 404 never receives what the client sends next.
// Every answer, the 101 included, keeps the rules of every answer a backend gives (src/http/
// response-rules.ts: header lines, head bytes, what HTTP/2 cannot carry) or is a 502 before any
// byte of it is relayed, and passes on end-to-end fields only (src/http/hop-by-hop.ts).
// Until the tunnel opens roomgate may still answer 502/503/504 itself; after it, a failure only
// closes the socket (never an HTTP response inside a live WebSocket stream).
//
// This file is the path's entry (the rules, admission, the handshake as the backend sees it, an
// attempt as the forwarding core carries it); each attempt's connection pair, from the connect to
// the end of the tunnel, is an UpgradeTunnel (upgrade-tunnel.ts).
import { clientRefusal } from '../http/refusals.js';
import type { ClientRefusal, Refusal } from '../http/refusals.js';
import type { ClientRequest } from '../http/client-request.js';
import type { Socket } from 'node:net';
import type { Backend } from '../runtime/pool.js';
import type { KeyResult } from '../room/extract.js';
import { peerAddress } from '../http/peer.js';
import { rawResponse } from '../http/replies.js';
import type { Exchange, Forwarder } from '../forward/forwarder.js';
import type { Owner } from '../http/ownership.js';
import type { PublicOrigin } from '../http/location.js';
import { publicOrigin } from './request-count.js';
import type { Admission } from './admission.js';
import { SilenceSweep } from './client-silence.js';
import { Deadlines } from './deadlines.js';
import type { NativeRelay } from './native-relay.js';
import type { TunnelAttempt, TunnelPath, UpgradeProxyOptions } from './upgrade-options.js';
import { destroySelf, endWith, onClientEnd, UpgradeTunnel } from './upgrade-tunnel.js';

export type { UpgradeProxyOptions } from './upgrade-options.js';


export class UpgradeProxy implements TunnelPath {
  /** Open tunnels, swept for clients that went silent. */
  readonly silence: SilenceSweep;
  /** Tunnels whose client has not taken a relayed write yet (one sweep, no timer per write). */
  readonly stalls: Deadlines | null;
  /** Placement, passive health and retries of every attempt (src/forward/forwarder.ts). */
  readonly forwarder: Forwarder;

  /** The native relay plain tunnels move to, or null (proxy.relay). */
  readonly native: NativeRelay | null;

  constructor(readonly o: UpgradeProxyOptions) {
    this.forwarder = o.forwarder;
    this.native = o.nativeRelay ?? null;
    this.silence = new SilenceSweep(o.clientSilenceMs);
    this.stalls = o.clientWriteTimeoutMs > 0 ? new Deadlines(Deadlines.tickFor(o.clientWriteTimeoutMs)) : null;
  }

  /** Stops the sweeps (shutdown); the tunnels themselves are closed by the registry. */
  close(): void {
    this.silence.close();
    this.stalls?.close();
    this.native?.stop();
  }

  /** The client socket becomes this path's; false when it is already gone. */
  take(client: Socket): boolean {
    // Hold client bytes (if any arrive early) until the backend's 101.
    client.pause();
    client.on('error', destroySelf);
    // From here, not from the 101: a client that gives up its handshake (a FIN while it waits)
    // must be heard. The fronts keep a connection half-open (allowHalfOpen), so an 'end' nobody
    // listens to leaves the socket, and the tunnel it then opens, live with no one behind it.
    client.on('end', onClientEnd);
    // Reset before its address could be read, or already ended: the client is gone, and its
    // handshake is not sent on from an unknown sender, nor for nobody.
    if (peerAddress(client) === undefined || client.readableEnded) {
      client.destroy();
      return false;
    }
    return true;
  }

  /**
   * The handshake as the forwarding core carries it (built now: after this nothing needs the
   * request). `rest`: the bytes that came behind the head.
   */
  exchange(r: ClientRequest, key: KeyResult, client: Socket, rest: Buffer | null): Exchange {
    // A copy: the bytes may be a view of a bigger read buffer, which must not live as long as the socket.
    const pending = rest !== null && rest.length > 0 ? Buffer.from(rest) : null;
    return new Attempt(this, key.room, key.source, this.handshake(r, key), pending, publicOrigin(this.o, r), client, r.transport === 'h2', Date.now());
  }

  /**
   * Admission, asked by the forwarding core once the placement named `backend`: a reconnect wave
   * after a failover queues at the clients (they back off on 503) instead of melting the
   * survivor. Null: admitted (released when the attempt's tunnel ends).
   */
  admit(a: Attempt, backend: Backend): Refusal | null {
    if (this.o.admission.tryAcquire(backend.id, Date.now())) return null;
    this.o.logger.warn({ room: a.room, backend: backend.id, source: a.source }, 'upgrade refused by admission limits');
    this.o.metrics.admissionRefusals.inc({ backend: backend.id });
    return { code: 'backend-busy', retryAfterS: this.o.admission.retryAfterS, backend: backend.id };
  }

  /** An admitted attempt routed to `backend` (src/forward/forwarder.ts): its tunnel. */
  start(a: Attempt, backend: Backend, owner: Owner | null, attempt: number): void {
    new UpgradeTunnel(this, a, backend, attempt, owner);
  }

  /** roomgate's own answer in place of the backend's (src/http/refusals.ts), counted under its status. */
  refuse(client: Socket, refusal: Refusal): void {
    const r = this.o.refuser.render(refusal, undefined);
    this.o.metrics.upgrades.inc({ backend: refusal.backend ?? 'none', result: String(r.status) });
    endWith(client, rawResponse(r.status, r.body, r.headers));
  }

  /** A handshake roomgate will not carry: the client's own mistake, told as it is. */
  refuseHandshake(client: Socket, refusal: ClientRefusal): void {
    this.o.metrics.upgrades.inc({ backend: 'none', result: String(refusal.status) });
    endWith(client, rawResponse(refusal.status, refusal.body));
  }

  /** The rules of a WebSocket handshake roomgate carries (step 5 of the request pipeline), or the one it breaks. */
  refusal(r: ClientRequest, key: KeyResult): ClientRefusal | null {
    const ws = r.upgrade;
    if (r.method !== 'GET') return clientRefusal('websocket-method');
    if ((ws?.upgrade ?? '').toLowerCase() !== 'websocket') return clientRefusal('websocket-only');
    if (!ws?.key || !ws.version) return clientRefusal('websocket-key');
    // A handshake has no body (RFC 6455 4.1); bytes after its head are WebSocket frames, which a
    // body's framing would otherwise hide from the checks above.
    if (r.body === 'bytes') return clientRefusal('websocket-body');
    // Matched on what the backend will see: after the room prefix is stripped, on the canonical
    // target every front made (src/http/target.ts: dot segments resolved, escapes decoded).
    const q = key.forwardUrl.indexOf('?');
    const path = q === -1 ? key.forwardUrl : key.forwardUrl.slice(0, q);
    if (!this.o.websocketPaths.some((p) => path.startsWith(p))) return clientRefusal('websocket-route');
    return null;
  }

  /**
   * The client's handshake as the backend must see it: target rewritten, X-Forwarded-* set; the
   * ownership fields and the blank line are added per attempt (each attempt's placement).
   */
  private handshake(r: ClientRequest, key: KeyResult): string {
    const headers = this.o.forwarding.headers(r.rawHeaders, { peer: r.peer, encrypted: r.encrypted, strippedPrefix: key.strippedPrefix }, true);
    let text = `GET ${key.forwardUrl} HTTP/1.1\r\n`;
    for (let i = 0; i + 1 < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
    return text;
  }
}

/**
 * One handshake being forwarded (the forwarding core's Exchange): what it carries from the
 * request, and no IncomingMessage. Its tunnel keeps it for the socket's life (the forwarding core
 * is told of a lost connection with it), so once the tunnel opens it keeps only the room and the
 * key's source: the handshake text (a string built line by line, about 3 KB of heap) and the
 * early bytes are dropped (opened()).
 */
export class Attempt implements TunnelAttempt {
  readonly path = 'upgrade';
  /** Never set: an upgrade does not use pooled connections. */
  freshConnection = false;
  constructor(
    private readonly proxy: UpgradeProxy,
    readonly room: string | null,
    readonly source: KeyResult['source'],
    /** The handshake's request line and fields, each line CRLF-terminated, without the blank line. */
    public handshake: string,
    /** Client bytes that came right behind the handshake: sent to the backend only after its 101. */
    public pending: Buffer | null,
    /** proxy.rewriteLocation's public origin for a non-101 answer (src/http/location.ts), or null. */
    public origin: PublicOrigin | null,
    readonly client: Socket,
    /** The client is an h2 extended CONNECT stream: the answer must be one HTTP/2 can carry. */
    readonly h2: boolean,
    readonly startedAt: number,
  ) {}

  /** The tunnel opened: the handshake is sent for good and the early bytes are on their way. */
  opened(): void {
    this.handshake = '';
    this.pending = null;
    this.origin = null;
  }

  gone(): boolean {
    return this.client.destroyed;
  }

  admit(backend: Backend): Refusal | null {
    return this.proxy.admit(this, backend);
  }

  send(backend: Backend, owner: Owner | null, attempt: number): void {
    this.proxy.start(this, backend, owner, attempt);
  }

  /** Upgrades are counted by their answer (roomgate_upgrades_total), never by an attempt's accounting. */
  refuse(refusal: Refusal): void {
    this.proxy.refuse(this.client, refusal);
  }
}
