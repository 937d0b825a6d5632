// djust's client as /work/shared/djust-facts.md describes it, reduced to what a reconnect storm
// needs (test/chaos/reconnect-storm.test.ts): the server speaks first ("connect"), the client
// mounts its room; after any close it reconnects on djust's schedule: reconnect attempt n waits
// max(500, rand * min(1000 * 2^(n-1), 30000)) ms, an opened socket resets n, and after 10 failed
// attempts in a row the client gives up (djust then falls back to SSE or shows its error overlay).
// A browser's WebSocket cannot read an HTTP answer, so a 503 with Retry-After is one more failed
// attempt, as a reset or a refused connection is (Retry-After is recorded, not obeyed).
// Every attempt is recorded with its outcome, and every outage of a mounted socket with the time
// its client was mounted again.
//
// The sockets are the bench suite's lean client (bench/suite/wsclient.ts: a browser's handshake,
// checked, and unfragmented frames), not `ws`: thousands of browsers are emulated in one process
// on a machine whose cores the gateways and backends share, and the client side must cost little
// for the times to be roomgate's. Everything started here is torn down by stopAllDjustClients();
// every attempt is bounded by a handshake and a mount timeout.
import { WsClient } from '../../bench/suite/wsclient.js';
import { djustDelay } from './game-clients.js';
import type { GatewayTarget } from './room-clients.js';

/** djust's client: reconnect attempts in a row before it gives up. */
export const DJUST_MAX_ATTEMPTS = 10;

/** How one connection attempt ended. */
export type AttemptOutcome =
  | 'mounted'
  /** roomgate's own 503s, by the first words of its answer (src/http/refusals.ts). */
  | 'busy' // admission: too many connections at once
  | 'moving' // the room is being placed by another request
  | 'unavailable' // no backend can take it
  | `http-${number}` // any other HTTP answer instead of 101
  | 'error' // reset, refused, handshake timeout, closed before mount
  | 'mount-timeout';

export interface AttemptRecord {
  readonly startedAt: number;
  /** How late its timer fired (ms past the wait djust drew; 0 for a page load): the emulating process's own lag. */
  lateMs: number;
  /** When the 101 arrived (0: never). */
  openedAt: number;
  endedAt: number;
  outcome: AttemptOutcome;
  retryAfter: string | null;
  detail: string;
}

/** A mounted socket's close, and when its client was mounted again. */
export interface Outage {
  readonly closedAt: number;
  /** How it ended ("closed by the server (1012)", "closed", ...). */
  readonly reason: string;
  readonly from: string;
  /** When the next connection reached "mounted" (null: not yet, or never). */
  backAt: number | null;
  to: string | null;
  /** Reconnect attempts it took (1: the first one mounted). */
  attempts: number;
  /**
   * The waits djust's schedule drew before those attempts, summed: what the outage lasts with
   * instant handshakes. The rest of it (backAt - closedAt - scheduledMs) went to the attempts.
   */
  scheduledMs: number;
}

export interface DjustClientOptions {
  /** Bounds of one attempt (a browser has its own; these keep the test finite). */
  readonly handshakeTimeoutMs?: number;
  readonly mountTimeoutMs?: number;
}

const openSockets = new Set<WsClient>();
const allClients = new Set<DjustClient>();

const BODY_OUTCOMES: readonly [string, AttemptOutcome][] = [
  ['too many connections at once', 'busy'],
  ['this room is moving', 'moving'],
  ['the service is unavailable', 'unavailable'],
];

/** The outcome an HTTP answer to a handshake stands for. */
export function refusalOutcome(status: number, body: string): AttemptOutcome {
  if (status === 503) for (const [start, outcome] of BODY_OUTCOMES) if (body.startsWith(start)) return outcome;
  return `http-${status}`;
}

/** One djust-shaped client of one room through one gateway. */
export class DjustClient {
  readonly attempts: AttemptRecord[] = [];
  readonly outages: Outage[] = [];
  state: 'idle' | 'connecting' | 'live' | 'waiting' | 'gave-up' | 'stopped' = 'idle';
  /** Backend of the live (mounted) connection, or null. */
  backend: string | null = null;
  /** djust's counter: reconnect attempts since the last opened socket. */
  private tries = 0;
  private ws: WsClient | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** When the pending reconnect's wait ends (0: none pending). */
  private due = 0;

  constructor(
    readonly room: string,
    readonly gateway: GatewayTarget,
    private readonly o: DjustClientOptions = {},
  ) {
    allClients.add(this);
  }

  get live(): boolean {
    return this.state === 'live';
  }

  /** The first connection (djust's page load, not a reconnect). */
  start(): this {
    if (this.state === 'idle') this.attempt();
    return this;
  }

  stop(): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ws?.terminate();
    allClients.delete(this);
  }

  /** Outages that began at or after t. */
  outagesSince(t: number): Outage[] {
    return this.outages.filter((o) => o.closedAt >= t);
  }

  attemptsSince(t: number): AttemptRecord[] {
    return this.attempts.filter((a) => a.startedAt >= t);
  }

  /** djust's onclose: the next attempt on its schedule, or give up after the last one. */
  private reconnect(): void {
    if (this.state === 'stopped') return;
    if (this.tries >= DJUST_MAX_ATTEMPTS) {
      this.state = 'gave-up';
      return;
    }
    this.tries++;
    this.state = 'waiting';
    const delay = djustDelay(this.tries);
    const outage = this.outages.at(-1);
    if (outage !== undefined && outage.backAt === null) outage.scheduledMs += delay;
    this.due = Date.now() + delay;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.attempt();
    }, delay);
  }

  private attempt(): void {
    if (this.state === 'stopped') return;
    this.state = 'connecting';
    const now = Date.now();
    const rec: AttemptRecord = { startedAt: now, lateMs: this.due === 0 ? 0 : now - this.due, openedAt: 0, endedAt: 0, outcome: 'error', retryAfter: null, detail: '' };
    this.due = 0;
    this.attempts.push(rec);
    const outage = this.outages.at(-1);
    if (outage !== undefined && outage.backAt === null) outage.attempts++;
    const url = new URL(this.gateway.wsUrl);
    const ws = new WsClient({
      host: url.hostname,
      port: Number(url.port),
      path: `/ws/live/?room=${encodeURIComponent(this.room)}`,
      headers: { Origin: `http://${url.host}` },
      timeoutMs: this.o.handshakeTimeoutMs ?? 10_000,
    });
    this.ws = ws;
    openSockets.add(ws);
    let hello: string | null = null;
    const mountTimer = setTimeout(() => {
      rec.outcome = 'mount-timeout';
      ws.terminate();
      this.closed(ws, rec, 'mount timeout');
    }, this.o.mountTimeoutMs ?? 10_000);
    ws.onOpen = () => {
      // djust's onopen resets its counter.
      this.tries = 0;
      rec.openedAt = Date.now();
    };
    ws.onRefused = (status, head, body) => {
      rec.retryAfter = /\r\nretry-after:\s*(\S+)/i.exec(head)?.[1] ?? null;
      const text = body.toString('utf8');
      rec.outcome = refusalOutcome(status, text);
      rec.detail = `${status} ${text.trim().slice(0, 60)}`;
    };
    ws.onMessage = (data) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      } catch {
        return;
      }
      if (msg.type === 'connect' && hello === null) {
        hello = String(msg.backend);
        ws.sendText(JSON.stringify({ type: 'mount', room: this.room, url: `/game/${this.room}/` }));
      } else if (msg.type === 'mounted' && rec.outcome !== 'mounted') {
        clearTimeout(mountTimer);
        this.mounted(ws, rec, String(msg.backend), hello, String(msg.room));
      }
    };
    ws.onClose = (err) => {
      clearTimeout(mountTimer);
      this.closed(ws, rec, err?.message ?? 'closed');
    };
  }

  private mounted(ws: WsClient, rec: AttemptRecord, backend: string, hello: string | null, room: string): void {
    if (backend !== hello || room !== this.room) {
      rec.detail = `mounted ${room} on ${backend} after connect from ${String(hello)}`;
      ws.terminate();
      this.closed(ws, rec, rec.detail);
      return;
    }
    rec.outcome = 'mounted';
    rec.endedAt = Date.now();
    this.backend = backend;
    this.state = 'live';
    const outage = this.outages.at(-1);
    if (outage !== undefined && outage.backAt === null) {
      outage.backAt = rec.endedAt;
      outage.to = backend;
    }
  }

  /** The attempt's socket is gone; once per socket (terminate() does not call onClose, the paths that use it call this). */
  private closed(ws: WsClient, rec: AttemptRecord, reason: string): void {
    if (!openSockets.delete(ws)) return;
    if (this.ws === ws) this.ws = null;
    if (this.state === 'stopped') return;
    const now = Date.now();
    if (rec.outcome === 'mounted') {
      this.outages.push({ closedAt: now, reason, from: this.backend ?? '?', backAt: null, to: null, attempts: 0, scheduledMs: 0 });
      this.backend = null;
    } else {
      rec.endedAt = now;
      if (rec.detail === '') rec.detail = reason;
    }
    this.reconnect();
  }
}

/** Stops every DjustClient and closes every socket this module opened. */
export function stopAllDjustClients(): void {
  for (const c of [...allClients]) c.stop();
  for (const ws of openSockets) ws.terminate();
  openSockets.clear();
}

/** Attempts that did not mount, by outcome ("busy" 12, "error" 3, ...), most frequent first. */
export function failedAttempts(attempts: readonly AttemptRecord[]): [AttemptOutcome, number][] {
  const counts = new Map<AttemptOutcome, number>();
  for (const a of attempts) if (a.outcome !== 'mounted') counts.set(a.outcome, (counts.get(a.outcome) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]);
}

/** How many outages took 1, 2, 3, ... reconnect attempts ("1: 2950, 2: 50"). */
export function attemptsHistogram(outages: readonly Outage[]): string {
  const counts = new Map<number, number>();
  for (const o of outages) if (o.backAt !== null) counts.set(o.attempts, (counts.get(o.attempts) ?? 0) + 1);
  return [...counts]
    .sort((a, b) => a[0] - b[0])
    .map(([n, c]) => `${n}: ${c}`)
    .join(', ');
}
