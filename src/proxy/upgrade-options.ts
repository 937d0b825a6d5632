// The upgrade path's options, and what each side of it sees of the other: a tunnel
// (upgrade-tunnel.ts) reaches its path (UpgradeProxy, upgrade-proxy.ts) and its attempt only
// through TunnelPath and TunnelAttempt, so the two files do not import each other.
import type { Socket } from 'node:net';
import type { BackendTls } from '../backends/backend-tls.js';
import type { Exchange, Forwarder } from '../forward/forwarder.js';
import type { Forwarding } from '../forward/forwarded.js';
import type { PublicOrigin } from '../http/location.js';
import type { Refusal } from '../http/refusals.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { KeyResult } from '../room/extract.js';
import type { BackendPool } from '../runtime/pool.js';
import type { TunnelRegistry } from '../runtime/tunnels.js';
import type { Admission } from './admission.js';
import type { SilenceSweep } from './client-silence.js';
import type { Deadlines } from './deadlines.js';
import type { NativeRelay } from './native-relay.js';
import type { Refuser } from './refuser.js';

export interface UpgradeProxyOptions {
  /** The forwarding core every attempt goes through (placement, passive health, retries). */
  readonly forwarder: Forwarder;
  /** roomgate's own answers (src/http/refusals.ts): rendered, logged and counted. */
  readonly refuser: Refuser;
  readonly pool: BackendPool;
  readonly forwarding: Forwarding;
  readonly tunnels: TunnelRegistry;
  readonly admission: Admission;
  /** The backend a room is placed on as this gateway knows it now (cache), or null. */
  readonly placementOf: (room: string) => string | null;
  readonly websocketPaths: readonly string[];
  /** TLS toward https:// backends. */
  readonly backendTls: BackendTls;
  readonly connectTimeoutMs: number;
  /** Time for the backend to answer the handshake (and, for a refusal, to send its body). */
  readonly responseTimeoutMs: number;
  /** 0 = never close an idle socket. */
  readonly idleTimeoutMs: number;
  /** An open socket whose client sent nothing for this long is closed; 0 = never. */
  readonly clientSilenceMs: number;
  /** A relayed write the client has not taken for this long closes the tunnel; 0 = never. */
  readonly clientWriteTimeoutMs: number;
  /** proxy.rewriteLocation: a non-101 answer's Location or Refresh naming its backend points at the public origin. */
  readonly rewriteLocation: boolean;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /**
   * Whether a new tunnel to the backend is followed message by message (handoffs can run and the
   * backend takes held messages), so a version-2 handoff can hold it (src/proxy/tunnel-messages.ts).
   */
  readonly followsMessages?: (backendId: string) => boolean;
  /**
   * Whether a new followed tunnel to this backend is made ready for a resume (its hello said
   * `resume`, as known now): its deflate offer keeps no context, its backend's frames are followed.
   */
  readonly resumesOn?: (backendId: string) => boolean;
  /**
   * The native relay (proxy.relay), or null: an open plain tunnel is handed to it after the 101
   * (src/proxy/native-relay.ts), and a followed one taken back when a handoff holds it; TLS and
   * h2 tunnels stay on this relay.
   */
  readonly nativeRelay?: NativeRelay | null;
}

/** What a tunnel uses of its upgrade path (UpgradeProxy). */
export interface TunnelPath {
  readonly o: UpgradeProxyOptions;
  readonly forwarder: Forwarder;
  readonly native: NativeRelay | null;
  readonly silence: SilenceSweep;
  readonly stalls: Deadlines | null;
  /** roomgate's own answer in place of the backend's. */
  refuse(client: Socket, refusal: Refusal): void;
}

/** What a tunnel uses of the handshake it carries (upgrade-proxy.ts's Attempt). */
export interface TunnelAttempt extends Exchange {
  readonly room: string | null;
  readonly source: KeyResult['source'];
  /** The handshake's request line and fields, each line CRLF-terminated, without the blank line; '' once opened. */
  handshake: string;
  /** Client bytes that came right behind the handshake, sent to the backend after its 101; null once opened. */
  pending: Buffer | null;
  /** proxy.rewriteLocation's public origin for a non-101 answer, or null. */
  origin: PublicOrigin | null;
  readonly client: Socket;
  /** The client is an h2 extended CONNECT stream. */
  readonly h2: boolean;
  readonly startedAt: number;
  /** The tunnel opened: the handshake and the early bytes are let go. */
  opened(): void;
}
