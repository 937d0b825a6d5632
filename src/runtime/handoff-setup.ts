// The room handoff parts of one gateway, built from the configuration: the hook client, the
// orchestrator, the drains with handoff and their log, rebalancing, and what the RuntimeView shows
// of them.
import type { Socket } from 'node:net';
import type { BackendTls } from '../backends/backend-tls.js';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { PlacementStore } from '../placement/store.js';
import type { SharedDataStore } from '../shared-data/store.js';
import type { BackendCalls } from './backend-calls.js';
import { HookClient, type HookAnswer, type HookCall } from './handoff-calls.js';
import { HandoffDrains, type DrainProgress } from './handoff-drain.js';
import type { HookSupport } from './handoff-hello.js';
import { HandoffLog, type HandoffEvent } from './handoff-log.js';
import { HoldAsk } from './handoff-ask.js';
import { HandoffPageWaits } from './handoff-pages.js';
import { RemoteHolds } from './handoff-remote.js';
import { Handoffs, RELEASE_GRACE_MS, type HandoffOutcome } from './handoff.js';
import type { Placer } from './placer.js';
import type { Backend, BackendPool } from './pool.js';
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
  /** Requests (pages and WebSocket handshakes) waiting now for a handoff of their room here (step 8a). */
  readonly waiting: number;
}

export interface HandoffParts {
  readonly placer: Placer;
  readonly pool: BackendPool;
  readonly store: PlacementStore;
  readonly tunnels: TunnelRegistry;
  readonly sharedData: Pick<SharedDataStore, 'lobby' | 'claimIdempotency' | 'publishHandoff' | 'otherGateways' | 'subscribe'>;
  readonly backendTls: BackendTls;
  readonly gatewayId: string;
  /** Signs each hook call for its backend and records it (shared with pushes). */
  readonly calls: BackendCalls;
  readonly metrics: Pick<Metrics, 'handoffs' | 'handoffSeconds' | 'handoffHeld' | 'handoffSockets' | 'handoffHeldMessages' | 'handoffHeldBytes' | 'rebalanceMoves'>;
  readonly logger: Logger;
  /** Rebalancing's timer (RebalancerOptions.after): tests fire it themselves. */
  readonly after?: (ms: number, fn: () => Promise<void>) => () => void;
}

export interface HandoffRuntime {
  support(backendId: string): HookSupport;
  /** Whether a new tunnel is followed message by message (a handoff may then hold it). */
  followsSockets(backendId: string): boolean;
  /** A page request of a room in handoff here waits (null: it is in none): the pipeline's step 8a. */
  pageWait(room: string | null): Promise<boolean> | null;
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
  /** Starts rebalancing and asks every backend's hello; settles once they answered (bounded). */
  start(): Promise<void>;
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
  const pages = new HandoffPageWaits(c.timeoutMs);
  const call = (b: Backend, hook: HookCall): Promise<HookAnswer> => client.call(b, hook);
  const { moves, ask, remote } = buildMoves(c, p, { log, pages, call, connect: (b) => client.connect(b) });
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
    move: (req) => moves.move(req),
    support: (id) => moves.support(id),
    running: (id) => moves.running(id),
    pool: p.pool,
    liveRoomsOn,
    batch: c.drainBatch,
    maxConcurrentPerBackend: c.maxConcurrentPerBackend,
    logger: p.logger,
  });
  const rebalancer = new Rebalancer(
    {
      move: (req) => moves.move(req),
      hooks: (id) => moves.hooks(id),
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
    support: (id) => moves.support(id),
    followsSockets: (id) => moves.followsSockets(id),
    resumesOn: (id) => moves.resumesOn(id),
    pageWait: (room) => pages.wait(room),
    snapshot: () => ({ inProgress: log.inProgress(), recent: log.recent(), drains: drains.list().map((d) => ({ ...d, sockets: { ...d.sockets } })), rebalance: rebalancer.state(), waiting: pages.waiting }),
    move: (room, to, id) => moves.move({ room, to, trigger: 'move', ...(id === undefined ? {} : { id }) }),
    drain: (backend) => drains.start(backend).progress,
    backendBack: (backend) => rebalancer.backendBack(backend),
    configureRebalance: (settings) => rebalancer.configure(settings),
    start: () => {
      rebalancer.start();
      return moves.askHellos();
    },
    stop: () => {
      ask.close();
      remote.close();
      drains.stop();
      rebalancer.stop();
    },
  };
}

/**
 * The orchestrator, with version 2 through every gateway: this gateway asks the others to hold
 * their sockets of a room it moves (handoff-ask.ts), and holds its own for theirs (handoff-remote.ts).
 */
function buildMoves(
  c: LoadedConfig['handoff'],
  p: HandoffParts,
  d: { readonly log: HandoffLog; readonly pages: HandoffPageWaits; readonly call: (b: Backend, hook: HookCall) => Promise<HookAnswer>; readonly connect: (b: Backend) => Socket },
): { moves: Handoffs; ask: HoldAsk; remote: RemoteHolds } {
  const held = { tunnels: p.tunnels, limits: { perSocketBytes: c.heldBytesPerSocket, perRoomBytes: c.heldBytesPerRoom }, timeoutMs: c.timeoutMs, resume: { sender: p.gatewayId, sign: (claims: Parameters<typeof p.calls.sign>[0]) => p.calls.sign(claims) } };
  const ask = new HoldAsk({ gatewayId: p.gatewayId, store: p.sharedData, timeoutMs: c.timeoutMs, logger: p.logger });
  let moves: Handoffs | undefined;
  const remote = new RemoteHolds({
    gatewayId: p.gatewayId,
    store: p.sharedData,
    placements: p.store,
    held,
    follows: () => moves?.canHold() === true,
    holdsLocally: (room) => moves?.holdsRoom(room) === true,
    placer: p.placer,
    tunnels: p.tunnels,
    pool: p.pool,
    call: d.call,
    pages: d.pages,
    metrics: p.metrics,
    logger: p.logger,
    releaseGraceMs: RELEASE_GRACE_MS,
    resumes: (id) => {
      const b = p.pool.get(id);
      return b !== undefined && moves?.hello.resumes(b) === true;
    },
  });
  moves = new Handoffs({
    placer: p.placer,
    pool: p.pool,
    store: p.store,
    tunnels: p.tunnels,
    call: d.call,
    connect: d.connect,
    log: d.log,
    metrics: p.metrics,
    logger: p.logger,
    leaseMs: c.leaseMs,
    maxConcurrentPerBackend: c.maxConcurrentPerBackend,
    signed: () => p.calls.signed,
    held,
    others: { ask: (...a) => ask.ask(...a), end: (...a) => ask.end(...a), holding: (room) => remote.holding(room) },
    pages: d.pages,
  });
  return { moves, ask, remote };
}
