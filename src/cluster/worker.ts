// One worker of `roomgate start --workers N`: a normal Gateway (its own id, health checks, placer
// cache, tunnels) on the port all workers share: bound by each with SO_REUSEPORT (balance
// 'kernel'), or the primary's, through the cluster module (balance 'primary'). It gets its
// configuration from the primary, so every worker runs the same one (and the same cookie secret).
// Without Redis its placement and shared stores are the primary's, over IPC; with Redis it has its
// own Redis connections, like a separate gateway. Its admin listener is private (127.0.0.1, any
// port): the primary serves the admin port and forwards to it.
//
// Stops gracefully (the Gateway's own stop) when the primary asks or on SIGTERM/SIGINT (a second
// signal exits at once); exits at once when the primary is gone (Node's cluster does that). SIGHUP
// is the primary's to handle: it re-reads the configuration once and sends it to every worker.
import cluster from 'node:cluster';
import type { LoadedConfig } from '../config/load.js';
import { Gateway } from '../gateway.js';
import { createLogger, exitAfterFlush, type Logger } from '../observability/logger.js';
import { onStopSignals } from '../lifecycle/signals.js';
import { channelToParent, RpcPeer } from './ipc-rpc.js';
import { IpcPlacementStore } from './ipc-placement-store.js';
import { IpcSharedDataStore } from './ipc-shared-data-store.js';
import type { HistorySnapshot } from '../observability/history.js';
import { HISTORY, INIT, IPC_TIMEOUT_MS, MERGED_HISTORY, METRICS, READY, RELOAD, STOP, TICKET_KEYS, WORKER_ENV, type WorkerInit, type WorkerReady } from './protocol.js';

/** True in a worker process forked by roomgate's primary (not in some other cluster manager's worker). */
export function isClusterWorker(): boolean {
  return cluster.isWorker && process.env[WORKER_ENV] !== undefined;
}

export async function runWorker(): Promise<void> {
  const peer = new RpcPeer(channelToParent(), { timeoutMs: IPC_TIMEOUT_MS, peerName: 'the primary process' });
  let gateway: Gateway;
  let logger: Logger;
  try {
    const init = await peer.call<WorkerInit>(INIT, [], 10_000);
    logger = createLogger(init.config.log.level).child({ worker: init.index });
    const stores = init.ipcStores ? { store: new IpcPlacementStore(peer), sharedData: new IpcSharedDataStore(peer) } : {};
    gateway = new Gateway(init.config, { logger, reusePort: init.reusePort, tlsTicketKeys: Buffer.from(init.tlsTicketKeys, 'base64'), ticketKeysFromPrimary: true, adminPeerKey: init.adminPeerKey, ...stores });
    peer.on(TICKET_KEYS, (keys) => {
      if (typeof keys === 'string') gateway.rotateTicketKeys(Buffer.from(keys, 'base64'));
    });
    await gateway.start();
  } catch (err) {
    // main() reports the error (in this tick's promise callbacks), then the worker exits with its
    // code: the primary sees a failed start. (Disconnecting would make Node's cluster exit 0.)
    peer.close();
    setImmediate(() => process.exit(typeof process.exitCode === 'number' && process.exitCode !== 0 ? process.exitCode : 1));
    throw err;
  }
  const gw = gateway;
  const log = logger;

  let stopping = false;
  const exit = (code: number): void => exitAfterFlush(log, code);
  const stop = (why: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ why }, 'worker stopping');
    gw.stop().then(
      () => exit(0),
      (err: Error) => {
        log.error({ err: err.message }, 'worker shutdown failed');
        exit(1);
      },
    );
  };

  peer.handle(METRICS, () => gw.metrics.registry.getMetricsAsJSON());
  // The status page's plots: this worker's samples out, every worker's merged back.
  peer.handle(HISTORY, () => gw.history.local());
  peer.on(MERGED_HISTORY, (h) => gw.history.useMerged(h as HistorySnapshot));
  peer.handle(RELOAD, (next) => gw.reload(next as LoadedConfig));
  peer.handle(STOP, () => {
    stop('asked by the primary');
    return true;
  });
  // The primary gone: Node's cluster module exits the worker at once (its sockets close, its own
  // listening socket with them); nothing to do here.

  onStopSignals({
    graceful: stop,
    immediate: (signal) => log.warn({ signal }, 'second signal: exiting now'),
    exit,
  }).ready();
  // A terminal hangup reaches every process of the group; the primary reloads for all workers.
  process.on('SIGHUP', () => log.debug('SIGHUP: the primary reloads the configuration for every worker'));

  const ready: WorkerReady = { gatewayId: gw.id, pid: process.pid, port: gw.port, adminPort: gw.adminPort };
  await peer.call(READY, [ready]).catch((err: Error) => log.warn({ err: err.message }, 'could not tell the primary this worker is ready'));
}
