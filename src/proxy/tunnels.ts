// Live upgraded sockets ("tunnels"): per room and per backend, for load figures, metrics and
// shutdown. Touched once when a tunnel opens and once when it closes; never per frame.
import type { Socket } from 'node:net';
import type { Backend } from '../backends/pool.js';

export interface Tunnel {
  readonly room: string | null;
  readonly backend: Backend;
  readonly client: Socket;
  readonly upstream: Socket;
}

export class TunnelRegistry {
  private readonly all = new Set<Tunnel>();
  private readonly perRoom = new Map<string, number>();

  get size(): number {
    return this.all.size;
  }

  add(t: Tunnel): void {
    if (this.all.has(t)) return;
    this.all.add(t);
    t.backend.liveSockets++;
    if (t.room !== null) this.perRoom.set(t.room, (this.perRoom.get(t.room) ?? 0) + 1);
  }

  remove(t: Tunnel): void {
    if (!this.all.delete(t)) return;
    t.backend.liveSockets--;
    if (t.room === null) return;
    const n = (this.perRoom.get(t.room) ?? 1) - 1;
    if (n <= 0) this.perRoom.delete(t.room);
    else this.perRoom.set(t.room, n);
  }

  /** Live sockets of a room through this gateway. */
  socketsInRoom(room: string): number {
    return this.perRoom.get(room) ?? 0;
  }

  get roomCount(): number {
    return this.perRoom.size;
  }

  /** Closes every tunnel at once (end of the shutdown grace period). */
  destroyAll(): void {
    for (const t of this.all) {
      t.client.destroy();
      t.upstream.destroy();
    }
  }
}
