// A worker's placement store when the gateway runs with `--workers N` and no Redis: every call goes
// to the primary's one MemoryPlacementStore state over IPC (store-host.ts), so all workers agree on
// placements, busy rooms and drain states exactly as gateways sharing a Redis do. Events come
// from the primary to every worker. Like the Redis store it fails fast: a call the primary does
// not answer within the RPC timeout rejects (the Placer then routes from its cache, degraded), and
// once the primary is gone every call rejects at once and `available` is false.
import { isFullReport } from '../placement/store.js';
import type { BackendAdminState, HeartbeatAnswer, LiveReport, LiveRoom, PlaceOptions, PlaceResult, PlacementRecord, PlacementStore, StoreEvent } from '../placement/store.js';
import type { RpcPeer } from './ipc-rpc.js';
import { PLACEMENT_EVENT } from './store-host.js';

export class IpcPlacementStore implements PlacementStore {
  /** The primary's memory store. */
  readonly kind = 'memory' as const;

  /** Nothing to connect: the primary process holds the data (over IPC). */
  connect(): Promise<void> {
    return Promise.resolve();
  }
  private readonly listeners = new Set<(ev: StoreEvent) => void>();

  constructor(private readonly rpc: RpcPeer) {
    rpc.on(PLACEMENT_EVENT, (ev) => this.emit(ev as StoreEvent));
    rpc.onClose(() => this.emit({ type: 'available', available: false }));
  }

  get available(): boolean {
    return !this.rpc.closed;
  }

  get(room: string): Promise<PlacementRecord | null> {
    return this.rpc.call('placement.get', [room]);
  }

  place(room: string, backend: string, expectedEpoch: number, opts: PlaceOptions): Promise<PlaceResult> {
    return this.rpc.call('placement.place', [room, backend, expectedEpoch, { force: opts.force, ...(opts.epoch === undefined ? {} : { epoch: opts.epoch }) }]);
  }

  reserveEpoch(): Promise<number> {
    return this.rpc.call('placement.reserveEpoch');
  }

  /** Sends what changed only: null over IPC when nothing did, a delta's rooms when some did. */
  heartbeat(report: LiveReport): Promise<HeartbeatAnswer> {
    const entries = (live: readonly LiveRoom[]): LiveRoom[] => live.map((r) => ({ room: r.room, backend: r.backend, sockets: r.sockets }));
    const wire = report === null ? null : isFullReport(report) ? entries(report) : { rooms: entries(report.rooms), gone: report.gone };
    return this.rpc.call('placement.heartbeat', [wire]);
  }

  async roomsPerBackend(): Promise<Map<string, number>> {
    return new Map(await this.rpc.call<[string, number][]>('placement.roomsPerBackend'));
  }

  async setBackendState(id: string, state: BackendAdminState | null): Promise<void> {
    await this.rpc.call('placement.setBackendState', [id, state]);
  }

  async backendStates(): Promise<Map<string, BackendAdminState>> {
    return new Map(await this.rpc.call<[string, BackendAdminState][]>('placement.backendStates'));
  }

  subscribe(listener: (ev: StoreEvent) => void): () => void {
    const l = (ev: StoreEvent): void => listener(ev);
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** Removes this worker's heartbeat report in the primary (its rooms no longer count as busy). */
  async close(): Promise<void> {
    this.listeners.clear();
    if (!this.rpc.closed) await this.rpc.call('placement.close');
  }

  private emit(ev: StoreEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(ev);
      } catch {
        // A listener's failure is its own; the others still get the event.
      }
    }
  }
}
