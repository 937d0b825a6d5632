// The room handoff parts of one gateway, built from the configuration: the hook client, the
// orchestrator, the drains with handoff and their log, rebalancing, and what the RuntimeView shows
// of them.
import type { BackendTls } from '../backends/backend-tls.js';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { PlacementStore } from '../placement/store.js';
import type { SharedDataStore } from '../shared-data/store.js';
import type { BackendCalls } from './backend-calls.js';
import { HookClient } from './handoff-calls.js';
import { HandoffDrains, type DrainProgress } from './handoff-drain.js';
import type { HookSupport } from './handoff-hello.js';
import { HandoffLog, type HandoffEvent } from './handoff-log.js';
import { Handoffs, type HandoffOutcome } from './handoff.js';
import type { Placer } from './placer.js';
import type { BackendPool } from './pool.js';
import { Rebalancer, type RebalanceSettings, type RebalanceState } from './rebalance.js';
import type { TunnelRegistry } from './tunnels.js';

export interface HandoffSnapshot {
  /** Running through this gateway, oldest first. */
  readonly inProgress: readonly HandoffEvent[];
  /** Finished (refused included), oldest first, at most 100. */
  readonly recent: readonly HandoffEvent[];
  /** Drains with handoff this gateway ran or runs (the latest per backend). */
  readonly drains: readonly DrainProgress[];
  /** Rebalancing on this gateway (handoff.rebalance). */
  readonly rebalance: RebalanceState;
}

export interface HandoffParts {
  readonly placer: Placer;
  readonly pool: BackendPool;
  readonly store: PlacementStore;
  readonly tunnels: TunnelRegistry;
  readonly sharedData: Pick<SharedDataStore, 'lobby' | 'claimIdempotency'>;
  readonly backendTls: BackendTls;
  readonly gatewayId: string;
  /** Signs each hook call for its backend and records it (shared with pushes). */
  readonly calls: BackendCalls;
  readonly metrics: Pick<Metrics, 'handoffs' | 'handoffSeconds' | 'handoffHeld' | 'handoffSockets' | 'rebalanceMoves'>;
  readonly logger: Logger;
  /** Rebalancing's timer (RebalancerOptions.after): tests fire it themselves. */
  readonly after?: (ms: number, fn: () => Promise<void>) => () => void;
}

export interface HandoffRuntime {
  support(backendId: string): HookSupport;
  /** Whether a new tunnel is followed message by message (a handoff may then hold it). */
  followsSockets(): boolean;
  /** Whether a new followed tunnel to the backend is made ready for a resume (its hello said `resume`). */
  resumesOn(backendId: string): boolean;
  snapshot(): HandoffSnapshot;
  move(room: string, to: string, id?: string): Promise<HandoffOutcome>;
  drain(backend: string): DrainProgress;
  /** A backend joined or came back (recovered, undrained): rebalancing may move rooms to it. */
  backendBack(backend: string): void;
  /** A reload's handoff.rebalance (turning it off stops a rebalance at once). */
  configureRebalance(settings: RebalanceSettings): void;
  /** The gateway started (rebalancing reacts to backends coming back from now on). */
  start(): void;
  stop(): void;
}

/** Presence pages read for a drain: rooms of a backend, 500 at a time. */
const PAGE = 500;
/** The shared data store key of the rebalancing turn (one move per interval for all gateways). */
const REBALANCE_TURN = 'rebalance\nturn';

export function createHandoffRuntime(config: Pick<LoadedConfig, 'handoff'>, p: HandoffParts): HandoffRuntime {
  const c = config.handoff;
  const client = new HookClient({
    path: c.path,
    calls: p.calls,
    sender: p.gatewayId,
    timeoutMs: c.timeoutMs,
    maxBodyBytes: c.maxStateBytes,
    backendTls: p.backendTls,
  });
  const log = new HandoffLog();
  const handoffs = new Handoffs({
    placer: p.placer,
    pool: p.pool,
    store: p.store,
    tunnels: p.tunnels,
    call: (b, call) => client.call(b, call),
    log,
    metrics: p.metrics,
    logger: p.logger,
    leaseMs: c.leaseMs,
    maxConcurrentPerBackend: c.maxConcurrentPerBackend,
    signed: () => p.calls.signed,
    held: {
      tunnels: p.tunnels,
      limits: { perSocketBytes: c.heldBytesPerSocket, perRoomBytes: c.heldBytesPerRoom },
      timeoutMs: c.timeoutMs,
      resume: { sender: p.gatewayId, sign: (claims) => p.calls.sign(claims) },
    },
  });
  // Every gateway's live rooms on the backend (presence), and this one's at once (presence lags).
  const liveRoomsOn = async (backend: string): Promise<string[]> => {
    const rooms = new Set(p.tunnels.liveRooms().flatMap((r) => (r.backend === backend ? [r.room] : [])));
    for (let offset = 0; ; ) {
      const page = await p.sharedData.lobby({ backend, sort: 'room', order: 'asc', offset, limit: PAGE });
      for (const r of page.rooms) rooms.add(r.room);
      if (page.nextOffset === null) return [...rooms];
      offset = page.nextOffset;
    }
  };
  const drains = new HandoffDrains({
    move: (req) => handoffs.move(req),
    support: (id) => handoffs.support(id),
    running: (id) => handoffs.running(id),
    pool: p.pool,
    liveRoomsOn,
    batch: c.drainBatch,
    maxConcurrentPerBackend: c.maxConcurrentPerBackend,
    logger: p.logger,
  });
  const rebalancer = new Rebalancer(
    {
      move: (req) => handoffs.move(req),
      hooks: (id) => handoffs.hooks(id),
      pool: p.pool,
      liveRoomsOn,
      storeWorks: () => p.store.available && !p.placer.isDegraded,
      // The key holds for one interval: whoever set it has the turn (null: this call did).
      takeTurn: async (ms) => (await p.sharedData.claimIdempotency(REBALANCE_TURN, ms)) === null,
      metrics: p.metrics,
      logger: p.logger,
      ...(p.after ? { after: p.after } : {}),
    },
    c.rebalance,
  );
  return {
    support: (id) => handoffs.support(id),
    followsSockets: () => handoffs.followsSockets(),
    resumesOn: (id) => handoffs.resumesOn(id),
    snapshot: () => ({ inProgress: log.inProgress(), recent: log.recent(), drains: drains.list().map((d) => ({ ...d, sockets: { ...d.sockets } })), rebalance: rebalancer.state() }),
    move: (room, to, id) => handoffs.move({ room, to, trigger: 'move', ...(id === undefined ? {} : { id }) }),
    drain: (backend) => drains.start(backend).progress,
    backendBack: (backend) => rebalancer.backendBack(backend),
    configureRebalance: (settings) => rebalancer.configure(settings),
    start: () => rebalancer.start(),
    stop: () => {
      drains.stop();
      rebalancer.stop();
    },
  };
}
