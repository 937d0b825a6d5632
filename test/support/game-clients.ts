// Game clients for the handoff chaos scenario (test/chaos/handoff-rolling-restart.test.ts): djust's
// client as /work/shared/djust-facts.md describes it (the server speaks first with "connect", the
// client mounts; after any close, 1012 included, it reconnects with djust's full jitter,
// max(500, rand * min(1000 * 2^(n-1), 30000)) ms) playing the demo backend's game: an `event`
// every moment, acknowledged by a `patch` carrying its move number. A move the server refused
// while its room moved (`room-moving`) is sent again after the next mount, as the demo page does.
// Every acknowledgement is kept per room (GameRoom), so the test can tell whether a move the app
// acknowledged ever went missing: a mount told fewer moves than were acknowledged before it
// started, or one move number acknowledged twice (the room restarted from nothing).
// Everything started here is torn down by stopAllGameClients(); every wait has a timeout.
import WebSocket from 'ws';
import type { GatewayTarget } from './room-clients.js';

/** One acknowledged move: the number the app gave it and what the client sent. */
export interface Ack {
  readonly n: number;
  readonly at: number;
  readonly client: number;
  readonly k: number;
}

/** A mount told fewer moves than the room had acknowledged before the connection started. */
export interface ShortMount {
  readonly room: string;
  readonly backend: string;
  readonly at: number;
  readonly told: number;
  readonly acknowledged: number;
}

/** A socket's life from mounted to closed, and when its client was mounted again. */
export interface Gap {
  readonly room: string;
  readonly client: number;
  readonly from: string;
  readonly closedAt: number;
  readonly code: number;
  /** When the next connection reached "mounted" (null: not yet). */
  remountedAt: number | null;
  to: string | null;
}

/** What the room's clients were told: every acknowledgement, in the order they arrived. */
export class GameRoom {
  readonly acks = new Map<number, Ack>();
  readonly duplicates: { first: Ack; second: Ack }[] = [];
  readonly shortMounts: ShortMount[] = [];
  /** (time, highest move acknowledged up to then), in time order. */
  private readonly highs: { at: number; n: number }[] = [];

  constructor(readonly room: string) {}

  ack(a: Ack): void {
    const first = this.acks.get(a.n);
    if (first !== undefined) {
      this.duplicates.push({ first, second: a });
      return;
    }
    this.acks.set(a.n, a);
    const high = Math.max(a.n, this.highs.at(-1)?.n ?? 0);
    this.highs.push({ at: a.at, n: high });
  }

  /** The highest move acknowledged strictly before t (0: none). */
  highestBefore(t: number): number {
    for (let i = this.highs.length - 1; i >= 0; i--) {
      const h = this.highs[i] as { at: number; n: number };
      if (h.at < t) return h.n;
    }
    return 0;
  }

  get highest(): number {
    return this.highs.at(-1)?.n ?? 0;
  }
}

export interface GameClientOptions {
  /** Between two moves of one client: uniform in [min, max] ms. */
  readonly moveEveryMs: readonly [number, number];
  readonly handshakeTimeoutMs?: number;
  readonly mountTimeoutMs?: number;
}

const openSockets = new Set<WebSocket>();
const allClients = new Set<GameClient>();

/** djust's reconnect delay for the n-th attempt in a row (1, 2, ...). */
export function djustDelay(n: number): number {
  return Math.max(500, Math.random() * Math.min(1000 * 2 ** (n - 1), 30_000));
}

/** A djust-shaped client of one room through one gateway, playing the game. */
export class GameClient {
  readonly gaps: Gap[] = [];
  readonly refusals: { at: number; status: number }[] = [];
  readonly failures: { at: number; error: string }[] = [];
  /** Backend of the live (mounted) connection, or null. */
  backend: string | null = null;
  mounts = 0;
  sent = 0;
  refusedMoving = 0;
  private ws: WebSocket | null = null;
  private timer: NodeJS.Timeout | null = null;
  private moveTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  private playing = true;
  private failedInARow = 0;
  private session: string | null = null;
  private seq = 0;
  /** The move sent and not yet answered; kept to send again after a `room-moving` refusal. */
  private inFlight: { k: number } | null = null;
  private pending: { k: number } | null = null;

  constructor(
    readonly id: number,
    readonly game: GameRoom,
    readonly gateway: GatewayTarget,
    private readonly o: GameClientOptions,
  ) {
    allClients.add(this);
  }

  get live(): boolean {
    return this.backend !== null;
  }

  start(): this {
    this.attempt();
    this.scheduleMove();
    return this;
  }

  /** Stops playing (the socket stays open): the moves settle before the final count. */
  quiet(): void {
    this.playing = false;
    if (this.moveTimer) clearTimeout(this.moveTimer);
    this.moveTimer = null;
  }

  stop(): void {
    this.stopped = true;
    for (const t of [this.timer, this.moveTimer]) if (t) clearTimeout(t);
    this.timer = this.moveTimer = null;
    this.ws?.terminate();
    allClients.delete(this);
  }

  private scheduleMove(): void {
    const [min, max] = this.o.moveEveryMs;
    if (this.stopped || !this.playing) return;
    this.moveTimer = setTimeout(() => {
      this.moveTimer = null;
      if (this.live && this.inFlight === null) this.send({ k: ++this.seq });
      this.scheduleMove();
    }, min + Math.random() * (max - min));
  }

  private send(move: { k: number }): void {
    if (this.ws?.readyState !== WebSocket.OPEN) return;
    this.inFlight = move;
    this.sent++;
    this.ws.send(JSON.stringify({ type: 'event', data: { c: this.id, k: move.k } }));
  }

  private reconnect(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.attempt();
    }, djustDelay(this.failedInARow + 1));
  }

  private onMessage(ws: WebSocket, startedAt: number, msg: Record<string, unknown>): void {
    if (msg.type === 'connect' && this.session === null) {
      this.session = String(msg.session_id);
      ws.send(JSON.stringify({ type: 'mount', room: this.game.room, url: `/game/${this.game.room}/` }));
    } else if (msg.type === 'mounted' && this.backend === null) {
      const backend = String(msg.backend);
      const told = Number(msg.moves);
      const acknowledged = this.game.highestBefore(startedAt);
      if (!(told >= acknowledged)) this.game.shortMounts.push({ room: this.game.room, backend, at: Date.now(), told, acknowledged });
      this.backend = backend;
      this.mounts++;
      this.failedInARow = 0;
      const gap = this.gaps.at(-1);
      if (gap && gap.remountedAt === null) {
        gap.remountedAt = Date.now();
        gap.to = backend;
      }
      // The move the old owner refused while the room moved: sent again here, as djust's page would.
      const again = this.pending;
      this.pending = null;
      if (again && this.playing) this.send(again);
    } else if (msg.type === 'patch' && msg.from === this.session && this.inFlight !== null) {
      const data = msg.data as { c?: unknown; k?: unknown } | null;
      if (data?.c !== this.id || data.k !== this.inFlight.k) return;
      this.game.ack({ n: Number(msg.move), at: Date.now(), client: this.id, k: this.inFlight.k });
      this.inFlight = null;
    } else if (msg.type === 'error' && msg.error === 'room-moving') {
      this.refusedMoving++;
      this.pending = this.inFlight;
      this.inFlight = null;
    }
  }

  private attempt(): void {
    if (this.stopped) return;
    const startedAt = Date.now();
    this.session = null;
    const ws = new WebSocket(`${this.gateway.wsUrl}/ws/live/?room=${encodeURIComponent(this.game.room)}`, { handshakeTimeout: this.o.handshakeTimeoutMs ?? 5_000 });
    this.ws = ws;
    openSockets.add(ws);
    let failure: string | null = null;
    const mountTimer = setTimeout(() => {
      if (this.backend === null) {
        failure = 'mount timeout';
        ws.terminate();
      }
    }, this.o.mountTimeoutMs ?? 5_000);
    ws.on('error', (err) => {
      failure ??= err.message;
    });
    ws.on('unexpected-response', (_req, res) => {
      this.refusals.push({ at: Date.now(), status: res.statusCode ?? 0 });
      failure = `answered ${res.statusCode}`;
      res.resume();
      ws.terminate();
    });
    ws.on('message', (data) => {
      try {
        this.onMessage(ws, startedAt, JSON.parse(String(data)) as Record<string, unknown>);
      } catch {
        // not JSON: not the game's
      }
    });
    ws.on('close', (code) => {
      clearTimeout(mountTimer);
      openSockets.delete(ws);
      if (this.ws === ws) this.ws = null;
      if (this.stopped) return;
      const from = this.backend;
      this.backend = null;
      // An unanswered move: djust's client does not know whether it was taken; it is not counted.
      this.inFlight = null;
      if (from !== null) {
        this.gaps.push({ room: this.game.room, client: this.id, from, closedAt: Date.now(), code, remountedAt: null, to: null });
      } else {
        this.failedInARow++;
        this.failures.push({ at: Date.now(), error: failure ?? `closed ${code} before mount` });
      }
      this.reconnect();
    });
  }
}

/** Stops every GameClient and terminates every socket this module opened. */
export function stopAllGameClients(): void {
  for (const c of [...allClients]) c.stop();
  for (const ws of openSockets) ws.terminate();
  openSockets.clear();
}

/**
 * The client-visible gaps of one room: the spans during which at least one of its clients was
 * closed and not yet mounted again, overlapping spans of its clients merged (ms each).
 */
export function roomGaps(gaps: readonly Gap[], since: number): number[] {
  const spans = gaps
    .filter((g) => g.closedAt >= since)
    .map((g) => [g.closedAt, g.remountedAt ?? Number.POSITIVE_INFINITY] as const)
    .sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  let cur: [number, number] | null = null;
  for (const [a, b] of spans) {
    if (cur !== null && a <= cur[1]) cur[1] = Math.max(cur[1], b);
    else {
      if (cur !== null) out.push(cur[1] - cur[0]);
      cur = [a, b];
    }
  }
  if (cur !== null) out.push(cur[1] - cur[0]);
  return out;
}
