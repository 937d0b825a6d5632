// The status page's live feed (GET /_roomgate/status/stream): Server-Sent Events, one
// `status` event with a whole snapshot (the StatusSnapshot JSON) when a client connects and then
// whenever the snapshot changes, checked every intervalMs; a `: ping` comment keeps idle proxies
// from timing the stream out. One timer serves every client and runs only while there are clients.
//
//   retry: 2000
//   event: status    data: {gatewayId, store, degraded, ready, sockets, rooms, backends, events, ...}
import type { IncomingMessage, ServerResponse } from 'node:http';
import { openEventStream } from './sse.js';

export interface StatusStreamOptions {
  /** The current snapshot; called once per interval while clients are connected. */
  readonly snapshot: () => unknown;
  /** How often the snapshot is compared with the last one sent (ms). */
  readonly intervalMs: number;
  /** A `: ping` comment this often (ms). */
  readonly pingMs: number;
  /** The `retry:` field (EventSource reconnection delay, ms). */
  readonly retryMs: number;
  /** A client that does not read and has this much queued is disconnected. */
  readonly maxBufferedBytes: number;
}

export class StatusStream {
  private readonly clients = new Set<ServerResponse>();
  private timer: NodeJS.Timeout | null = null;
  private lastJson = '';
  private lastPing = 0;
  private closed = false;

  constructor(private readonly o: StatusStreamOptions) {}

  get size(): number {
    return this.clients.size;
  }

  /**
   * Takes over the response; false (nothing written) once closed. How many may be open is the
   * caller's StreamSlots (api.maxStreams).
   */
  open(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.closed) return false;
    openEventStream(req, res);
    this.clients.add(res);
    res.on('close', () => this.drop(res));
    if (!this.timer) {
      this.lastJson = JSON.stringify(this.o.snapshot());
      this.lastPing = Date.now();
      this.timer = setInterval(() => this.tick(), this.o.intervalMs);
      this.timer.unref();
    }
    this.write(res, `retry: ${this.o.retryMs}\n\nevent: status\ndata: ${this.lastJson}\n\n`);
    return true;
  }

  /** Ends every stream and the timer (shutdown). */
  close(): void {
    this.closed = true;
    for (const res of [...this.clients]) {
      this.clients.delete(res);
      res.end();
    }
    this.stop();
  }

  private tick(): void {
    let json: string;
    try {
      json = JSON.stringify(this.o.snapshot());
    } catch {
      return; // a snapshot that cannot be taken now is tried again next tick
    }
    const now = Date.now();
    if (json !== this.lastJson) {
      this.lastJson = json;
      this.lastPing = now;
      for (const res of [...this.clients]) this.write(res, `event: status\ndata: ${json}\n\n`);
    } else if (now - this.lastPing >= this.o.pingMs) {
      this.lastPing = now;
      for (const res of [...this.clients]) this.write(res, ': ping\n\n');
    }
  }

  private write(res: ServerResponse, frame: string): void {
    if (res.writableEnded || res.destroyed) return;
    if (res.writableLength > this.o.maxBufferedBytes) {
      this.drop(res);
      res.destroy();
      return;
    }
    res.write(frame);
  }

  private drop(res: ServerResponse): void {
    if (this.clients.delete(res) && this.clients.size === 0) this.stop();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
