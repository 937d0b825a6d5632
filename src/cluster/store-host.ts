// The primary's side of the in-memory stores of a `--workers N` gateway without Redis: one
// MemoryPlacementState and one MemorySharedDataState for all workers, one store handle per worker (a
// worker is a gateway: its own heartbeat report, busy rooms and presence), served over the
// worker's RPC peer. Every store event is broadcast to every worker, as Redis pub/sub would.
// Workers use IpcPlacementStore and IpcSharedDataStore (same method names, see ipc-*-store.ts).
import { parseHandoffSignal } from '../shared-data/handoff-signal.js';
import { MemorySharedDataState, MemorySharedDataStore } from '../shared-data/memory-store.js';
import type { CachePurge, LobbyQuery, PresenceDelta, RoomMeta, RoomPresence, ScoreMode } from '../shared-data/store.js';
import { MemoryPlacementState, MemoryPlacementStore } from '../placement/memory-store.js';
import type { BackendAdminState, LiveReport, PlaceOptions } from '../placement/store.js';
import type { RpcPeer } from './ipc-rpc.js';

export interface StoreHostTiming {
  readonly idleTtlMs: number;
  readonly gatewayTtlMs: number;
  readonly presenceTtlMs: number;
  /** placement.maxIdleRooms, for all workers together. */
  readonly maxIdleRooms?: number;
  readonly onEvicted?: (count: number) => void;
}

/** Event topics the workers' stores listen to. */
export const PLACEMENT_EVENT = 'placement.event';
export const SHARED_EVENT = 'shared.event';

export class StoreHost {
  private readonly placements = new MemoryPlacementState();
  private readonly sharedData = new MemorySharedDataState();
  private readonly peers = new Set<RpcPeer>();

  constructor(
    private readonly timing: StoreHostTiming,
    private readonly now: () => number = Date.now,
  ) {
    this.placements.listeners.add((ev) => this.broadcast(PLACEMENT_EVENT, ev));
    this.sharedData.listeners.add((ev) => this.broadcast(SHARED_EVENT, ev));
  }

  /** Workers attached now. */
  get size(): number {
    return this.peers.size;
  }

  /**
   * Serves the stores to one worker as gateway `gatewayId`. Returns the detach function, to call
   * when the worker is gone (stopped or died): its heartbeat report and its presence are removed
   * at once (its sockets died with it), and the other workers hear of it.
   */
  attach(peer: RpcPeer, gatewayId: string): () => Promise<void> {
    const { idleTtlMs, gatewayTtlMs, maxIdleRooms, onEvicted } = this.timing;
    const p = new MemoryPlacementStore(gatewayId, { idleTtlMs, gatewayTtlMs, maxIdleRooms, onEvicted }, this.placements, this.now);
    const s = new MemorySharedDataStore(gatewayId, { presenceTtlMs: this.timing.presenceTtlMs }, this.sharedData, this.now);
    const str = (v: unknown): string => v as string;
    const num = (v: unknown): number => v as number;

    peer.handle('placement.get', (room) => p.get(str(room)));
    peer.handle('placement.place', (room, backend, epoch, opts) => p.place(str(room), str(backend), num(epoch), opts as PlaceOptions));
    peer.handle('placement.reserveEpoch', () => p.reserveEpoch());
    peer.handle('placement.heartbeat', (report) => p.heartbeat(report as LiveReport));
    peer.handle('placement.roomsPerBackend', async () => [...(await p.roomsPerBackend())]);
    peer.handle('placement.setBackendState', (id, state) => p.setBackendState(str(id), state as BackendAdminState | null));
    peer.handle('placement.backendStates', async () => [...(await p.backendStates())]);
    peer.handle('placement.close', () => p.close());

    peer.handle('shared.publishPresence', (rooms, ttlMs) => s.publishPresence(rooms as RoomPresence[] | PresenceDelta | null, num(ttlMs)));
    peer.handle('shared.claimIdempotency', (key, ttlMs) => s.claimIdempotency(str(key), num(ttlMs)));
    peer.handle('shared.settleIdempotency', (key, answer, ttlMs) => s.settleIdempotency(str(key), str(answer), num(ttlMs)));
    peer.handle('shared.releaseIdempotency', (key) => s.releaseIdempotency(str(key)));
    peer.handle('shared.publishCachePurge', (purge) => s.publishCachePurge(purge as CachePurge));
    // A worker's signal is checked as Redis' would be: the primary passes on only a well-formed one.
    peer.handle('shared.publishHandoff', async (signal) => {
      const checked = parseHandoffSignal(signal);
      if (checked !== undefined) await s.publishHandoff(checked);
    });
    peer.handle('shared.otherGateways', () => s.otherGateways());
    peer.handle('shared.withdrawPresence', () => s.withdrawPresence());
    peer.handle('shared.online', () => s.online());
    peer.handle('shared.lobby', (q) => s.lobby(q as LobbyQuery));
    peer.handle('shared.room', (room) => s.room(str(room)));
    peer.handle('shared.setMeta', (room, meta, pinned, listed) => s.setMeta(str(room), meta as RoomMeta, pinned === true, listed !== false));
    peer.handle('shared.deleteMeta', (room) => s.deleteMeta(str(room)));
    peer.handle('shared.score', (board, member, value, mode) => s.score(str(board), str(member), num(value), mode as ScoreMode));
    peer.handle('shared.top', (board, offset, limit) => s.top(str(board), num(offset), num(limit)));
    peer.handle('shared.member', (board, member) => s.member(str(board), str(member)));
    peer.handle('shared.around', (board, member, n) => s.around(str(board), str(member), num(n)));
    peer.handle('shared.boardExists', (board) => s.boardExists(str(board)));
    peer.handle('shared.boardSize', (board) => s.boardSize(str(board)));
    peer.handle('shared.close', () => s.close());

    this.peers.add(peer);
    let detached: Promise<void> | null = null;
    return () => {
      detached ??= (async () => {
        this.peers.delete(peer);
        await p.close();
        await s.close();
      })();
      return detached;
    };
  }

  private broadcast(topic: string, payload: unknown): void {
    for (const peer of this.peers) peer.emit(topic, payload);
  }
}
