// The primary of `roomgate start --workers N`: forks N workers (each a Gateway on the one public
// port: each binding it with SO_REUSEPORT, or sharing the primary's through the cluster module,
// per `--balance`), and owns what must exist once:
// - without Redis, the placement and shared-data stores (store-host.ts), served to the workers
//   over IPC, so the workers agree on placements as gateways sharing a Redis do;
// - sidecars given by the CLI (the demo backends), started once, their list sent to the workers;
// - the admin port (admin.ts): /metrics summed over the workers, the rest forwarded to a worker;
// - one cookie secret when none is configured (each worker making its own would refuse the
//   others' cookies);
// - the workers' log lines, relayed whole to stdout (several processes writing one pipe could
//   interleave lines);
// - signals: SIGTERM/SIGINT stop every worker gracefully, then the primary exits (a second signal
//   kills them at once); SIGHUP re-reads the configuration and sends it to every worker.
// A worker that exits unexpectedly is started again, with back-off. If the primary dies, Node
// cluster exits every worker at once (their IPC channel closed).
import { newTicketKeys, startTicketKeyRotation } from '../server/ticket-keys.js';
import { randomBytes } from 'node:crypto';
import cluster, { type Worker } from 'node:cluster';
import type http from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { Readable } from 'node:stream';
import { pino } from 'pino';
import type { LoadedConfig } from '../config/load.js';
import type { Balance } from './count.js';
import { onStopSignals } from '../lifecycle/signals.js';
import { createLogger, exitAfterFlush, type Logger } from '../observability/logger.js';
import { createClusterAdminServer } from './admin.js';
import { newPeerKey } from '../http/forwarded-peer.js';
import { limitConnections } from '../server/connection-limit.js';
import { channelToChild, RpcPeer } from './ipc-rpc.js';
import { HistoryMerger } from './history-merge.js';
import { ClusterMetrics } from './metrics.js';
import { INIT, IPC_TIMEOUT_MS, METRICS, READY, RELOAD, STOP, TICKET_KEYS, WORKER_ENV, type WorkerInit, type WorkerReady } from './protocol.js';
import { StoreHost } from './store-host.js';

/**
 * Processes the primary runs beside its workers, given by the CLI (the demo backends): started
 * once before the workers, stopped after them, killed on a second signal.
 */
export interface Sidecars {
  start(): Promise<void>;
  /** The configuration the workers run (e.g. with the sidecars' backends filled in). */
  configFor(c: LoadedConfig): LoadedConfig;
  stop(): Promise<void>;
  killNow(): void;
}

export interface PrimaryOptions {
  readonly workers: number;
  /** How the workers share the public port (count.ts). */
  readonly balance: Balance;
  readonly sidecars?: Sidecars;
  /** Reads the configuration again (SIGHUP). */
  readonly reloadConfig: () => LoadedConfig;
  /** Every worker listens (the CLI prints its banner). */
  readonly onListening?: (info: { readonly port: number; readonly adminPort: number | null }) => void;
}

/** A worker that lived this long before it died starts again at once (back-off reset). */
const STABLE_MS = 30_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 30_000;
/** From fork to "ready" (listening). */
const WORKER_START_TIMEOUT_MS = 30_000;
/** After the workers' own grace period, stragglers are killed. */
const STOP_MARGIN_MS = 10_000;
const METRICS_TIMEOUT_MS = 3_000;

interface Slot {
  readonly index: number;
  worker: Worker | null;
  peer: RpcPeer | null;
  /** Withdraws the worker from the primary's stores (its report and presence). */
  detach: (() => Promise<void>) | null;
  ready: WorkerReady | null;
  startedAt: number;
  restarts: number;
  /** Unexpected exits in a row that came soon after a start (back-off). */
  failures: number;
  timer: NodeJS.Timeout | null;
  exited: Promise<void>;
}

export function redisConfigured(config: LoadedConfig): boolean {
  return Boolean(config.redis.url) || config.redis.sentinels.length > 0 || config.redis.clusterNodes.length > 0;
}

/** Starts the primary; resolves once every worker listens (it then runs until a signal). */
export async function runPrimary(config: LoadedConfig, o: PrimaryOptions): Promise<void> {
  await new ClusterPrimary(config, o).start();
}

class ClusterPrimary {
  private readonly out = pino.destination({ dest: 1, sync: false });
  private readonly logger: Logger;
  private readonly slots: Slot[];
  private readonly host: StoreHost | null;
  private readonly metrics: ClusterMetrics;
  private readonly secret: string | null;
  private workerConfig: LoadedConfig;
  /**
   * TLS session ticket keys for every worker (a session resumes on any of them), base64; replaced
   * every tls.ticketKeyRotationS and sent to every worker at once.
   */
  private ticketKeys = newTicketKeys().toString('base64');
  private readonly adminPeerKey = newPeerKey();
  private stopKeyRotation: () => void = () => undefined;
  /** With balance 'kernel': the public port every worker binds (port 0 resolved once, here). */
  private publicPort: number | null = null;
  private admin: http.Server | null = null;
  private starting = true;
  private stopping = false;
  private startup: { resolve: () => void; reject: (err: Error) => void } | null = null;
  /** The status page's plots of the whole gateway: every worker's history merged. */
  private readonly history: HistoryMerger;

  constructor(
    private readonly config: LoadedConfig,
    private readonly o: PrimaryOptions,
  ) {
    this.logger = createLogger(config.log.level, this.out).child({ role: 'primary' });
    this.slots = Array.from({ length: o.workers }, (_, i) => ({
      index: i + 1,
      worker: null,
      peer: null,
      detach: null,
      ready: null,
      startedAt: 0,
      restarts: 0,
      failures: 0,
      timer: null,
      exited: Promise.resolve(),
    }));
    this.metrics = new ClusterMetrics(() => this.slots.filter((s) => s.ready !== null).length);
    this.host = redisConfigured(config)
      ? null
      : new StoreHost({
          idleTtlMs: config.placement.idleTtlMs,
          gatewayTtlMs: config.placement.gatewayTtlMs,
          presenceTtlMs: config.presence.ttlMs,
          maxIdleRooms: config.placement.maxIdleRooms,
          onEvicted: (n) => this.metrics.idleRoomsEvicted.inc({ where: 'store' }, n),
        });
    this.secret = config.cookie.signed && config.cookie.secrets.length === 0 ? randomBytes(32).toString('base64url') : null;
    this.workerConfig = this.prepare(config);
    this.history = new HistoryMerger(() => this.slots.flatMap((s) => (s.ready && s.peer ? [s.peer] : [])), this.logger);
  }

  /** What the workers run: sidecars' backends filled in, the cluster's cookie secret, a private admin listener. */
  private prepare(c: LoadedConfig): LoadedConfig {
    const base = this.o.sidecars ? this.o.sidecars.configFor(c) : c;
    return {
      ...base,
      listen: this.publicPort === null ? base.listen : { ...base.listen, port: this.publicPort },
      cookie: { ...base.cookie, secrets: base.cookie.secrets.length === 0 && this.secret ? [this.secret] : base.cookie.secrets },
      admin: { ...base.admin, host: '127.0.0.1', port: 0 },
    };
  }

  async start(): Promise<void> {
    const { logger, config } = this;
    // From the start, not held: a signal during start-up must not leave sidecars or workers
    // behind, and stop() knows how to end a start-up half-way.
    onStopSignals({
      graceful: (signal) => void this.stop(signal),
      immediate: (signal) => {
        logger.warn({ signal }, 'second signal: killing the workers and exiting now');
        for (const s of this.slots) s.worker?.process.kill('SIGKILL');
        this.o.sidecars?.killNow();
      },
      exit: (code) => this.exit(code),
    }).ready();
    process.on('SIGHUP', () => void this.reload());
    if (this.secret) {
      logger.warn(
        "no cookie secret configured (cookie.secrets or ROOMGATE_COOKIE_SECRETS): using a random one for every worker; room cookies will not survive a restart and gateways will not accept each other's cookies",
      );
    }
    this.history.start();
    try {
      if (this.o.sidecars) {
        await this.o.sidecars.start();
        if (this.stopping) return; // a signal came meanwhile: stop() takes it from here
      }
      if (config.admin.enabled) {
        this.admin = createClusterAdminServer({
          isReady: () => !this.stopping && this.slots.some((s) => s.ready !== null),
          metrics: () => this.renderMetrics(),
          metricsContentType: this.metrics.contentType,
          workers: () => this.workersJson(),
          target: (wanted) => this.adminTarget(wanted),
          logger,
          allowedHosts: config.admin.allowedHosts,
          peerKey: this.adminPeerKey,
        });
        // The primary's own admin port: its own small limit (the workers' admin ports are private).
        const onRefused = (listener: string, reason: string): void => this.metrics.connectionsRefused.inc({ listener: `primary-${listener}`, reason });
        limitConnections(this.admin, { listener: 'admin', maxConnections: config.admin.maxConnections, perAddress: 0, onRefused, logger });
        await listenOn(this.admin, config.admin.host, config.admin.port);
      }
      if (this.o.balance === 'kernel') {
        this.publicPort = await freePublicPort(this.workerConfig.listen.host, this.workerConfig.listen.port);
        this.workerConfig = this.prepare(this.config);
      }
      if (config.tls.certs.length > 0) {
        this.stopKeyRotation = startTicketKeyRotation(config.tls.ticketKeyRotationS * 1000, (keys) => this.shareTicketKeys(keys), logger);
      }
      cluster.setupPrimary({ stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
      const allReady = new Promise<void>((resolve, reject) => {
        this.startup = { resolve, reject };
      });
      if (this.stopping) return;
      for (const slot of this.slots) this.fork(slot);
      await allReady;
      if (this.stopping) return;
    } catch (err) {
      if (this.stopping) return; // stop() is under way and exits
      await this.killAll();
      await this.o.sidecars?.stop();
      this.admin?.close();
      this.admin?.closeAllConnections();
      this.flushSync();
      throw err;
    }
    this.starting = false;
    this.startup = null;
    const port = this.slots.find((s) => s.ready)?.ready?.port ?? 0;
    const adminPort = this.admin ? ((this.admin.address() as AddressInfo | null)?.port ?? null) : null;
    logger.info(
      {
        port,
        host: config.listen.host,
        adminPort,
        workers: this.slots.length,
        balance: this.o.balance,
        workerPids: this.slots.map((s) => s.ready?.pid),
        gatewayIds: this.slots.map((s) => s.ready?.gatewayId),
        store: this.host ? 'memory (primary)' : 'redis',
        backends: this.workerConfig.backends.map((b) => `${b.id}=${b.url}`),
      },
      'listening',
    );
    this.o.onListening?.({ port, adminPort });
  }

  private fork(slot: Slot): void {
    const worker = cluster.fork({ [WORKER_ENV]: String(slot.index) });
    const pid = worker.process.pid ?? 0;
    slot.worker = worker;
    slot.ready = null;
    slot.startedAt = Date.now();
    slot.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
    relayLines(worker.process.stdout, this.out);

    const peer = new RpcPeer(channelToChild(worker), { timeoutMs: IPC_TIMEOUT_MS, peerName: `worker ${slot.index} (pid ${pid})` });
    slot.peer = peer;
    peer.handle(INIT, (): WorkerInit => ({ index: slot.index, config: this.workerConfig, ipcStores: this.host !== null, reusePort: this.o.balance === 'kernel', tlsTicketKeys: this.ticketKeys, adminPeerKey: this.adminPeerKey }));
    slot.detach = this.host ? this.host.attach(peer, `${hostname()}-${pid}-w${slot.index}`) : null;
    peer.handle(READY, (info) => {
      if (slot.worker !== worker) return false;
      this.onReady(slot, info as WorkerReady);
      return true;
    });
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (slot.worker !== worker || slot.ready) return;
      this.logger.error({ worker: slot.index, workerPid: pid, timeoutMs: WORKER_START_TIMEOUT_MS }, 'worker did not start listening in time: killing it');
      worker.process.kill('SIGKILL');
    }, WORKER_START_TIMEOUT_MS);
    worker.once('exit', (code, signal) => void this.onExit(slot, worker, code, signal));
  }

  private onReady(slot: Slot, info: WorkerReady): void {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.ready = info;
    if (this.starting) {
      if (this.slots.every((s) => s.ready)) this.startup?.resolve();
    } else {
      this.logger.info({ worker: slot.index, workerPid: info.pid, gatewayId: info.gatewayId }, 'worker listening again');
    }
  }

  private async onExit(slot: Slot, worker: Worker, code: number | null, signal: string | null): Promise<void> {
    if (slot.worker !== worker) return;
    const pid = worker.process.pid;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.peer?.close(`worker ${slot.index} (pid ${pid}) exited`);
    slot.peer = null;
    slot.worker = null;
    slot.ready = null;
    // Its sockets died with it: its heartbeat report and presence go now, not after their TTLs.
    const detach = slot.detach;
    slot.detach = null;
    await detach?.();
    if (this.stopping) {
      this.logger.info({ worker: slot.index, workerPid: pid, code, signal }, 'worker stopped');
      return;
    }
    if (this.starting) {
      const err = new Error(`worker ${slot.index} exited during start-up (${signal ?? `code ${code}`}); its error is above`);
      err.stack = err.message;
      this.startup?.reject(err);
      return;
    }
    const upMs = Date.now() - slot.startedAt;
    if (upMs >= STABLE_MS) slot.failures = 0;
    const delayMs = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** slot.failures);
    slot.failures++;
    slot.restarts++;
    this.metrics.restarts.inc();
    this.logger.error({ worker: slot.index, workerPid: pid, code, signal, upMs, restartInMs: delayMs }, 'worker exited unexpectedly: starting it again');
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (!this.stopping) this.fork(slot);
    }, delayMs);
  }

  /** New ticket keys: for workers started from now on, and sent to every running one. */
  private shareTicketKeys(keys: Buffer): void {
    this.ticketKeys = keys.toString('base64');
    for (const s of this.slots) s.peer?.emit(TICKET_KEYS, this.ticketKeys);
  }

  /** Graceful stop of every worker (each runs its own graceful shutdown), then the primary exits. */
  private async stop(signal: string): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.history.stop();
    this.metrics.stop();
    this.stopKeyRotation();
    const { logger } = this;
    logger.info({ signal, workers: this.slots.filter((s) => s.worker).length }, 'shutdown requested: stopping every worker');
    for (const s of this.slots) {
      if (s.timer) clearTimeout(s.timer);
      s.timer = null;
      const { worker, peer } = s;
      if (!worker) continue;
      // Not over IPC (the worker is still starting, say): a signal does the same. (A generous
      // timeout: a worker that got SIGINT from the terminal too would take SIGTERM as a second signal.)
      (peer ? peer.call(STOP, [], 10_000) : Promise.reject(new Error('no channel'))).catch(() => worker.process.kill('SIGTERM'));
    }
    const { readinessDelayMs, graceMs } = this.workerConfig.shutdown;
    let code = 0;
    if (!(await this.waitExited(readinessDelayMs + graceMs + STOP_MARGIN_MS))) {
      logger.warn('workers still running after their grace period: killing them');
      code = 1;
      await this.killAll();
    }
    await this.o.sidecars?.stop();
    if (this.admin) {
      const admin = this.admin;
      await new Promise<void>((resolve) => {
        admin.close(() => resolve());
        admin.closeAllConnections();
      });
    }
    logger.info('stopped');
    this.exit(code);
  }

  private async waitExited(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const all = Promise.all(this.slots.map((s) => s.exited)).then(() => true as const);
    try {
      return await Promise.race([all, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async killAll(): Promise<void> {
    this.stopping = true;
    for (const s of this.slots) {
      if (s.timer) clearTimeout(s.timer);
      s.timer = null;
      s.worker?.process.kill('SIGKILL');
    }
    await this.waitExited(5_000);
  }

  /** SIGHUP: the configuration is read once here and applied by every worker. */
  private async reload(): Promise<void> {
    let next: LoadedConfig;
    try {
      next = this.o.reloadConfig();
    } catch (err) {
      this.logger.error({ err: (err as Error).message }, 'reload refused: the running configuration stays');
      return;
    }
    const prepared = this.prepare(next);
    // As in a single process, only the backend list changes at run time: a worker started later
    // runs what the others run.
    this.workerConfig = { ...this.workerConfig, backends: prepared.backends };
    const ready = this.slots.filter((s) => s.ready && s.peer);
    const results = await Promise.allSettled(ready.map((s) => s.peer!.call<{ applied: string[]; needsRestart: string[] }>(RELOAD, [prepared])));
    const byWorker = results.map((r, i) => ({ worker: ready[i]!.index, ...(r.status === 'fulfilled' ? r.value : { error: (r.reason as Error).message }) }));
    this.logger.warn({ workers: byWorker }, 'configuration reloaded: sent to every worker');
  }

  private async renderMetrics(): Promise<string> {
    const ready = this.slots.filter((s) => s.ready && s.peer);
    const results = await Promise.allSettled(ready.map((s) => s.peer!.call<object[]>(METRICS, [], METRICS_TIMEOUT_MS)));
    const ok: object[][] = [];
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') ok.push(r.value);
      else this.logger.warn({ worker: ready[i]!.index, err: (r.reason as Error).message }, 'metrics: a worker did not answer; its figures are missing from this scrape');
    });
    return this.metrics.render(ok);
  }

  private adminTarget(wanted: number | null): { index: number; port: number } | null {
    const slot = wanted === null ? this.slots.find((s) => s.ready?.adminPort) : this.slots.find((s) => s.index === wanted);
    const port = slot?.ready?.adminPort;
    return slot && port ? { index: slot.index, port } : null;
  }

  private workersJson(): unknown {
    return {
      primaryPid: process.pid,
      balance: this.o.balance,
      store: this.host ? 'memory (primary)' : 'redis',
      workers: this.slots.map((s) => ({
        worker: s.index,
        state: this.stopping ? (s.worker ? 'stopping' : 'stopped') : s.ready ? 'ready' : s.worker ? 'starting' : 'restarting',
        pid: s.worker?.process.pid ?? null,
        gatewayId: s.ready?.gatewayId ?? null,
        startedAt: s.worker ? new Date(s.startedAt).toISOString() : null,
        restarts: s.restarts,
      })),
    };
  }

  private flushSync(): void {
    try {
      this.out.flushSync();
    } catch {
      // Nothing written yet, or stdout is gone: nothing to flush.
    }
  }

  private exit(code: number): void {
    exitAfterFlush(this.out, code);
  }
}

/** Copies a worker's stdout to ours in whole lines only (pino writes one JSON line per entry). */
function relayLines(from: Readable | null, to: { write(s: string): unknown }): void {
  if (!from) return;
  let partial = '';
  from.setEncoding('utf8');
  from.on('data', (chunk: string) => {
    const nl = chunk.lastIndexOf('\n');
    if (nl === -1) {
      partial += chunk;
      if (partial.length < 1 << 20) return;
      to.write(`${partial}\n`);
      partial = '';
      return;
    }
    to.write(partial + chunk.slice(0, nl + 1));
    partial = chunk.slice(nl + 1);
  });
  from.on('end', () => {
    if (partial !== '') to.write(`${partial}\n`);
    partial = '';
  });
}

function listenOn(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * The port the workers will bind with SO_REUSEPORT, checked free first by a plain bind: sockets
 * with SO_REUSEPORT of the same user share a port silently, so without this a second roomgate
 * started on the same port would take half of the first one's connections instead of failing.
 * Port 0 becomes one concrete port here, the same for every worker (and for a worker started again).
 */
function freePublicPort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ port, host, exclusive: true }, () => {
      const bound = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(bound));
    });
  });
}
