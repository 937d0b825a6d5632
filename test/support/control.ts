// The control plane without a gateway: a ControlPlane over a fake RuntimeView (our own port: plain
// data and recorded commands) and whatever shared-data store the test gives, with the
// configuration's defaults for every key a test does not set. For inject() tests and for tests
// that hand a real node:http server's requests to it.
import type { BackendCallRecord } from '../../src/runtime/backend-calls.js';
import type { HistorySnapshot } from '../../src/observability/history.js';
import { emptyHistory } from './history.js';
import { Writable } from 'node:stream';
import { configSchema, type Config } from '../../src/config/schema.js';
import { ControlPlane, type ControlPlaneOptions } from '../../src/control/control-plane.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import type { BackendAdminState } from '../../src/placement/store.js';
import type {
  BackendEventView,
  BackendSnapshot,
  CacheSnapshot,
  DrainProgress,
  HandoffEvent,
  HandoffOutcome,
  HandoffSnapshot,
  PushEvent,
  GatewaySnapshot,
  RoomExplanation,
  RuntimeView,
} from '../../src/runtime/views.js';
import type { SharedDataStore } from '../../src/shared-data/store.js';
import { REBALANCE_OFF } from '../../src/runtime/rebalance.js';

type Section = 'admin' | 'api' | 'status' | 'room' | 'push' | 'auth';
export type ControlConfig = Pick<Config, Section>;
export type ControlConfigOverrides = { [K in Section]?: Partial<Config[K]> };

/** The defaults of every control-plane key, with the test's own values on top. */
export function controlConfig(over: ControlConfigOverrides = {}): ControlConfig {
  const d = configSchema.parse({});
  return {
    admin: { ...d.admin, ...over.admin },
    api: { ...d.api, ...over.api },
    status: { ...d.status, ...over.status },
    room: { ...d.room, ...over.room },
    push: { ...d.push, ...over.push },
    // Off unless a test asks: many tests send wrong tokens on purpose, all from one inject() address
    // (the throttle's own tests: test/control/auth-throttle.test.ts).
    auth: { ...d.auth, maxFailures: 0, ...over.auth },
  };
}

/** A logger whose lines (JSON strings) the test can read. */
export function memoryLogger(level = 'debug'): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = createLogger(
    level,
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString('utf8'));
        cb();
      },
    }),
  );
  return { logger, lines };
}

/** A RuntimeView of plain data; commands are recorded and change the data, or fail when told to. */
export class FakeView implements RuntimeView {
  snapshot: GatewaySnapshot = { gatewayId: 'gw-test', store: 'memory', degraded: false, ready: true, sockets: 3, rooms: 2 };
  list: BackendSnapshot[] = [
    fakeBackend('b1', 'http://10.0.0.1:8000', { rooms: 2, sockets: 3 }),
    fakeBackend('b2', 'http://10.0.0.2:8000', { weight: 2 }),
  ];
  historyData: HistorySnapshot = emptyHistory(['b1', 'b2']);
  eventList: BackendEventView[] = [{ at: '2025-01-01T00:00:00.000Z', kind: 'joined', backend: 'b1', detail: 'http://10.0.0.1:8000', roomsMoved: 0, liveRoomsMoved: 0 }];
  readonly commands: { id: string; state: BackendAdminState | null }[] = [];
  /** setAdminState rejects with this (the store is down). */
  storeDown: Error | null = null;
  metricsFail = false;

  gateway(): GatewaySnapshot {
    return this.snapshot;
  }
  history(): HistorySnapshot {
    return this.historyData;
  }
  /** Pushes are the gateway's (test/integration/push.test.ts); the fake has no room live. */
  async pushToRoom(): Promise<{ kind: 'not-live' }> {
    return { kind: 'not-live' };
  }
  async pushToLiveRooms(): Promise<{ kind: 'sent'; id: string; rooms: number; backends: Record<string, never>; unplaced: number }> {
    return { kind: 'sent', id: 'fake', rooms: 0, backends: {}, unplaced: 0 };
  }
  /** The page cache is off in the fake (the gateway tests exercise the real one). */
  /** The page cache's figures; null: off. */
  cacheSnapshot: CacheSnapshot | null = null;
  cache(): CacheSnapshot | null {
    return this.cacheSnapshot;
  }
  async purgeCache(): Promise<{ purged: number; shared: boolean }> {
    return { purged: 0, shared: false };
  }
  backends(): readonly BackendSnapshot[] {
    return this.list;
  }
  backend(id: string): BackendSnapshot | null {
    return this.list.find((b) => b.id === id) ?? null;
  }
  pushes(): readonly PushEvent[] {
    return [];
  }

  backendCalls(): readonly BackendCallRecord[] {
    return [];
  }

  events(): readonly BackendEventView[] {
    return this.eventList;
  }
  async explainRoom(room: string): Promise<RoomExplanation> {
    return { room, placement: null, cached: false, backend: 'b1', reason: 'ring', wouldPlace: true, socketsHere: 0 };
  }
  async setAdminState(id: string, state: BackendAdminState | null): Promise<void> {
    if (this.storeDown) throw this.storeDown;
    this.commands.push({ id, state });
    this.list = this.list.map((b) =>
      b.id === id ? { ...b, admin: state, state: state === null ? 'up' : state.state === 'draining' ? 'draining' : 'maintenance' } : b,
    );
  }
  async metrics(): Promise<{ contentType: string; text: string }> {
    if (this.metricsFail) throw new Error('registry broke');
    return { contentType: 'text/plain; version=0.0.4; charset=utf-8', text: 'roomgate_live_sockets{backend="b1"} 3\n' };
  }
  handoffData: HandoffSnapshot = { inProgress: [], recent: [], drains: [], rebalance: REBALANCE_OFF, waiting: 0 };
  /** moveRoom's calls, and what it answers (default: moved). */
  readonly moves: { room: string; to: string; id: string | undefined }[] = [];
  moveAnswer = (room: string, to: string, id?: string): HandoffOutcome => ({ refusal: null, event: fakeHandoff({ id: id ?? 'h-fake', room, to, result: 'moved' }) });
  /** drainWithHandoff's calls. */
  readonly handoffDrains: string[] = [];
  handoffs(): HandoffSnapshot {
    return this.handoffData;
  }
  async moveRoom(room: string, to: string, id?: string): Promise<HandoffOutcome> {
    this.moves.push({ room, to, id });
    return this.moveAnswer(room, to, id);
  }
  drainWithHandoff(backend: string): DrainProgress {
    this.handoffDrains.push(backend);
    return { backend, startedAt: '2025-01-01T00:00:00.000Z', moved: 0, failed: 0, left: 0, sockets: { resumed: 0, reconnected: 0, messages: 0 }, done: false, reason: '' };
  }
}

/** A handoff record as the log keeps it: moved b1 -> b2 unless `over` says otherwise. */
export function fakeHandoff(over: Partial<HandoffEvent> = {}): HandoffEvent {
  return {
    id: 'h-1',
    room: 'chess',
    from: 'b1',
    to: 'b2',
    trigger: 'move',
    stage: 'done',
    result: 'moved',
    reason: '',
    epoch: 7,
    release: 'released',
    bytes: 120,
    at: '2025-01-01T00:00:00.000Z',
    ms: 42,
    ...over,
  };
}

export function fakeBackend(id: string, url: string, over: Partial<BackendSnapshot> = {}): BackendSnapshot {
  return {
    id,
    url,
    weight: 1,
    state: 'up',
    health: 'up',
    passiveDownUntil: null,
    admin: null,
    removed: false,
    rooms: 0,
    sockets: 0,
    inflight: 0,
    healthHistory: [{ at: 1_700_000_000_000, ok: true, ms: 1 }],
    handoffHooks: 'unknown',
    ...over,
  };
}

export interface ControlHarness {
  readonly control: ControlPlane;
  readonly view: FakeView;
}

export function makeControl(
  store: SharedDataStore,
  over: ControlConfigOverrides = {},
  extra: Partial<Omit<ControlPlaneOptions, 'config' | 'sharedData'>> = {},
): ControlHarness {
  const view = (extra.view as FakeView | undefined) ?? new FakeView();
  const control = new ControlPlane({ config: controlConfig(over), view, sharedData: store, logger: extra.logger ?? memoryLogger('silent').logger, ...extra });
  return { control, view };
}
