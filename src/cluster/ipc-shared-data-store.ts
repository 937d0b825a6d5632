// A worker's shared-data store (presence, lobby, metadata, leaderboards) when the gateway runs with
// `--workers N` and no Redis: every call goes to the primary's one MemorySharedDataStore state over
// IPC (store-host.ts), so presence is summed over the workers and the lobby, metadata and
// leaderboards are one. Lobby events come from the primary to every worker (the lobby stream of
// each worker pushes changes made through any worker). Fails fast like the Redis store; once the
// primary is gone every call rejects at once and `available` is false.
import type { CachePurge, HandoffSignal, LobbyPage, LobbyQuery, LobbyRoom, Online, PresenceAnswer, PresenceDelta, Ranked, RoomMeta, RoomPresence, ScoreMode, SharedDataEvent, SharedDataStore } from '../shared-data/store.js';
import type { RpcPeer } from './ipc-rpc.js';
import { SHARED_EVENT } from './store-host.js';

export class IpcSharedDataStore implements SharedDataStore {
  /** The primary's memory store. */
  readonly kind = 'memory' as const;

  /** Nothing to connect: the primary process holds the data (over IPC). */
  connect(): Promise<void> {
    return Promise.resolve();
  }
  private readonly listeners = new Set<(ev: SharedDataEvent) => void>();

  constructor(private readonly rpc: RpcPeer) {
    rpc.on(SHARED_EVENT, (ev) => this.emit(ev as SharedDataEvent));
    rpc.onClose(() => this.emit({ type: 'available', available: false }));
  }

  get available(): boolean {
    return !this.rpc.closed;
  }

  claimIdempotency(key: string, ttlMs: number): Promise<string | null> {
    return this.rpc.call('shared.claimIdempotency', [key, ttlMs]);
  }

  async settleIdempotency(key: string, answer: string, ttlMs: number): Promise<void> {
    await this.rpc.call('shared.settleIdempotency', [key, answer, ttlMs]);
  }

  async releaseIdempotency(key: string): Promise<void> {
    await this.rpc.call('shared.releaseIdempotency', [key]);
  }

  async publishCachePurge(purge: CachePurge): Promise<void> {
    await this.rpc.call('shared.publishCachePurge', [purge]);
  }

  async publishHandoff(signal: HandoffSignal): Promise<void> {
    await this.rpc.call('shared.publishHandoff', [signal]);
  }

  otherGateways(): Promise<string[]> {
    return this.rpc.call('shared.otherGateways');
  }

  /** null (unchanged) goes over IPC as null: the primary keeps this worker's report. */
  publishPresence(rooms: readonly RoomPresence[] | PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer> {
    return this.rpc.call('shared.publishPresence', [rooms, ttlMs]);
  }

  async withdrawPresence(): Promise<void> {
    await this.rpc.call('shared.withdrawPresence');
  }

  online(): Promise<Online> {
    return this.rpc.call('shared.online');
  }

  lobby(q: LobbyQuery): Promise<LobbyPage> {
    return this.rpc.call('shared.lobby', [q]);
  }

  room(room: string): Promise<LobbyRoom | null> {
    return this.rpc.call('shared.room', [room]);
  }

  async setMeta(room: string, meta: RoomMeta, pinned: boolean, listed = true): Promise<void> {
    await this.rpc.call('shared.setMeta', [room, meta, pinned, listed]);
  }

  deleteMeta(room: string): Promise<boolean> {
    return this.rpc.call('shared.deleteMeta', [room]);
  }

  score(board: string, member: string, value: number, mode: ScoreMode): Promise<number> {
    return this.rpc.call('shared.score', [board, member, value, mode]);
  }

  top(board: string, offset: number, limit: number): Promise<Ranked[]> {
    return this.rpc.call('shared.top', [board, offset, limit]);
  }

  member(board: string, member: string): Promise<Ranked | null> {
    return this.rpc.call('shared.member', [board, member]);
  }

  around(board: string, member: string, n: number): Promise<Ranked[]> {
    return this.rpc.call('shared.around', [board, member, n]);
  }

  boardExists(board: string): Promise<boolean> {
    return this.rpc.call('shared.boardExists', [board]);
  }

  boardSize(board: string): Promise<number> {
    return this.rpc.call('shared.boardSize', [board]);
  }

  subscribe(listener: (ev: SharedDataEvent) => void): () => void {
    const l = (ev: SharedDataEvent): void => listener(ev);
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** Withdraws this worker's presence in the primary and drops the listeners. */
  async close(): Promise<void> {
    this.listeners.clear();
    if (!this.rpc.closed) await this.rpc.call('shared.close');
  }

  private emit(ev: SharedDataEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(ev);
      } catch {
        // A listener's failure is its own; the others still get the event.
      }
    }
  }
}
