// What the primary and its workers say to each other over the RPC channel (ipc-rpc.ts), besides
// the store calls (store-host.ts). The worker's index is in its environment from the start.
import type { LoadedConfig } from '../config/load.js';

/** Set by the primary in each worker's environment: 1..N. Marks a process as a roomgate worker. */
export const WORKER_ENV = 'ROOMGATE_WORKER_INDEX';

/** Worker -> primary, first thing: what to run. */
export const INIT = 'worker.init';
export interface WorkerInit {
  readonly index: number;
  /**
   * The configuration the primary loaded, with the demo backends filled in, the one cookie secret
   * of the cluster and the worker's private admin listener (127.0.0.1, any port).
   */
  readonly config: LoadedConfig;
  /** The primary serves the in-memory stores (no Redis configured). */
  readonly ipcStores: boolean;
  /** Bind the public port with SO_REUSEPORT (balance 'kernel'); else share the primary's (round-robin). */
  readonly reusePort: boolean;
  /** TLS session ticket keys of the whole cluster (base64, 48 bytes), so sessions resume on any worker. */
  readonly tlsTicketKeys: string;
  /** The key of the client address the primary's admin port forwards (src/http/forwarded-peer.ts). */
  readonly adminPeerKey: string;
}

/** Primary -> worker (an event): new TLS session ticket keys (base64, 48 bytes), every tls.ticketKeyRotationS. */
export const TICKET_KEYS = 'worker.ticketKeys';

/** Worker -> primary, once it listens. */
export const READY = 'worker.ready';
export interface WorkerReady {
  readonly gatewayId: string;
  readonly pid: number;
  readonly port: number;
  /** The worker's private admin listener (loopback), or null with admin.enabled false. */
  readonly adminPort: number | null;
}

/** Primary -> worker: getMetricsAsJSON() of the worker's registry. */
export const METRICS = 'worker.metrics';
/** Primary -> worker: graceful stop (the worker exits when done). */
export const STOP = 'worker.stop';
/** Primary -> worker: apply a reloaded configuration (SIGHUP); answers gateway.reload()'s result. */
export const RELOAD = 'worker.reload';

/** Timeout of the store calls and control calls (ms). */
export const IPC_TIMEOUT_MS = 2_000;

/** Primary -> worker: the worker's own status-page history (History.local()). */
export const HISTORY = 'worker.history';
/** Primary -> every worker (an event, no answer): the merged history of all workers. */
export const MERGED_HISTORY = 'cluster.history';
