// Helpers for test/chaos/placement.test.ts: djust-like reconnecting room clients, the
// "one room, one backend" invariant checker (the backends' own /_backend/rooms is the witness),
// a TCP forwarder that can be cut (to give one gateway a different view of a backend), and small
// admin-API and log helpers. Everything started here is tracked and torn down by
// stopAllRoomClients() / SplitWatcher.stop() / TcpForwarder.close(); every wait has a timeout.
import { Worker } from 'node:worker_threads';
import WebSocket from 'ws';
import type { BackendProc, GatewayProc } from './processes.js';

// --- reconnecting room clients ---------------------------------------------------------------

/** One (re)connection that reached "mounted". */
export interface ConnectionRecord {
  /** Backend that sent "connect" and "mounted". */
  readonly backend: string;
  readonly startedAt: number;
  readonly mountedAt: number;
  closedAt: number | null;
  closeCode: number | null;
}

/** A handshake roomgate (or a backend) answered with something other than 101. */
export interface RefusalRecord {
  readonly at: number;
  readonly status: number;
  readonly retryAfter: string | null;
  body: string;
}

export interface RoomClientOptions {
  /** Delay before reconnecting after a close: uniform in [minDelayMs, maxDelayMs]. */
  readonly minDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Retry-After is respected, but never waited longer than this (test speed). */
  readonly retryAfterCapMs?: number;
  /** Consecutive failed attempts before the client gives up (djust: bounded retries). */
  readonly maxFailedAttempts?: number;
  readonly handshakeTimeoutMs?: number;
  /** From the start of an attempt to "mounted". */
  readonly mountTimeoutMs?: number;
}

export interface GatewayTarget {
  /** Short name for reports ("A", "B"). */
  readonly name: string;
  readonly wsUrl: string;
}

const openSockets = new Set<WebSocket>();
const allClients = new Set<RoomClient>();

type ClientState = 'idle' | 'connecting' | 'live' | 'waiting' | 'stopped' | 'gave-up';

/**
 * A djust-shaped client of one room through one gateway: opens /ws/live/?room=R, waits for the
 * backend's "connect", mounts the room, and on any close reconnects through the same gateway after
 * a short jittered delay (on 503 after Retry-After, capped). Records every connection, refusal and
 * close with its time.
 */
export class RoomClient {
  readonly connections: ConnectionRecord[] = [];
  readonly refusals: RefusalRecord[] = [];
  /** Attempts that ended before "mounted" without an HTTP answer (reset, timeout, refused). */
  readonly failures: { at: number; error: string }[] = [];
  /** Times at which a mounted connection was closed by the other side. */
  readonly closes: number[] = [];
  state: ClientState = 'idle';
  attempts = 0;
  /** Called each time a connection reaches "mounted" (e.g. to start another client right then). */
  onMounted: ((client: RoomClient, connection: ConnectionRecord) => void) | null = null;
  private ws: WebSocket | null = null;
  private timer: NodeJS.Timeout | null = null;
  private failedInARow = 0;
  private readonly o: Required<RoomClientOptions>;

  constructor(
    readonly room: string,
    readonly gateway: GatewayTarget,
    opts: RoomClientOptions = {},
  ) {
    this.o = {
      minDelayMs: 50,
      maxDelayMs: 300,
      retryAfterCapMs: 1_000,
      maxFailedAttempts: 300,
      handshakeTimeoutMs: 5_000,
      mountTimeoutMs: 5_000,
      ...opts,
    };
    allClients.add(this);
  }

  get url(): string {
    return `${this.gateway.wsUrl}/ws/live/?room=${encodeURIComponent(this.room)}`;
  }

  get live(): boolean {
    return this.state === 'live';
  }

  /** The live connection, if any. */
  get current(): ConnectionRecord | null {
    if (this.state !== 'live') return null;
    return this.connections[this.connections.length - 1] ?? null;
  }

  /** Backend of the live connection, or null. */
  get backend(): string | null {
    return this.current?.backend ?? null;
  }

  /** First connection mounted at or after t. */
  connectedSince(t: number): ConnectionRecord | undefined {
    return this.connections.find((c) => c.mountedAt >= t);
  }

  closesSince(t: number): number[] {
    return this.closes.filter((c) => c >= t);
  }

  start(): this {
    if (this.state === 'idle') this.attempt();
    return this;
  }

  /** Closes the socket for good (not counted as a close). */
  stop(): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ws?.terminate();
    allClients.delete(this);
  }

  private schedule(delayMs: number): void {
    if (this.state === 'stopped') return;
    if (this.failedInARow >= this.o.maxFailedAttempts) {
      this.state = 'gave-up';
      return;
    }
    this.state = 'waiting';
    this.timer = setTimeout(() => {
      this.timer = null;
      this.attempt();
    }, delayMs);
  }

  private jitter(): number {
    return this.o.minDelayMs + Math.random() * (this.o.maxDelayMs - this.o.minDelayMs);
  }

  private attempt(): void {
    if (this.state === 'stopped') return;
    this.state = 'connecting';
    this.attempts++;
    const startedAt = Date.now();
    const ws = new WebSocket(this.url, { handshakeTimeout: this.o.handshakeTimeoutMs });
    this.ws = ws;
    openSockets.add(ws);
    let hello: string | null = null;
    let record: ConnectionRecord | null = null;
    let refusal: RefusalRecord | null = null;
    let failure: string | null = null;
    const mountTimer = setTimeout(() => {
      if (record === null) {
        failure = 'mount timeout';
        ws.terminate();
      }
    }, this.o.mountTimeoutMs);

    ws.on('error', (err) => {
      failure ??= err.message;
    });
    ws.on('unexpected-response', (_req, res) => {
      const ra = res.headers['retry-after'];
      const r: RefusalRecord = { at: Date.now(), status: res.statusCode ?? 0, retryAfter: typeof ra === 'string' ? ra : null, body: '' };
      refusal = r;
      this.refusals.push(r);
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        r.body += d;
      });
      res.on('error', () => undefined);
      const done = setTimeout(() => ws.terminate(), 1_000);
      res.on('end', () => {
        clearTimeout(done);
        ws.terminate();
      });
    });
    ws.on('message', (data) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(String(data)) as Record<string, unknown>;
      } catch {
        return;
      }
      if (msg.type === 'connect' && hello === null) {
        hello = String(msg.backend);
        ws.send(JSON.stringify({ type: 'mount', room: this.room, url: `/game/${this.room}/` }));
      } else if (msg.type === 'mounted' && record === null) {
        clearTimeout(mountTimer);
        const backend = String(msg.backend);
        if (backend !== hello || msg.room !== this.room) {
          failure = `mounted ${String(msg.room)} on ${backend} after connect from ${String(hello)}`;
          ws.terminate();
          return;
        }
        record = { backend, startedAt, mountedAt: Date.now(), closedAt: null, closeCode: null };
        this.connections.push(record);
        this.failedInARow = 0;
        if (this.state === 'connecting') this.state = 'live';
        this.onMounted?.(this, record);
      }
    });
    ws.on('close', (code) => {
      clearTimeout(mountTimer);
      openSockets.delete(ws);
      if (this.ws === ws) this.ws = null;
      if (this.state === 'stopped') return;
      const now = Date.now();
      if (record !== null) {
        record.closedAt = now;
        record.closeCode = code;
        this.closes.push(now);
        this.schedule(this.jitter());
        return;
      }
      this.failedInARow++;
      if (refusal !== null) {
        const r: RefusalRecord = refusal;
        const ra = Number(r.retryAfter);
        const wait = r.retryAfter !== null && Number.isFinite(ra) ? Math.min(ra * 1000, this.o.retryAfterCapMs) : this.jitter();
        this.schedule(wait + Math.random() * 250);
        return;
      }
      this.failures.push({ at: now, error: failure ?? `closed ${code} before mount` });
      // Back off a little on repeated failures, never beyond the Retry-After cap.
      this.schedule(Math.min(this.jitter() * Math.min(this.failedInARow, 4), this.o.retryAfterCapMs));
    });
  }
}

/** Stops every RoomClient and terminates every socket this module opened. */
export function stopAllRoomClients(): void {
  for (const c of [...allClients]) c.stop();
  for (const ws of openSockets) ws.terminate();
  openSockets.clear();
}

/** A set of room clients and questions about all of them. */
export class RoomFleet {
  readonly clients: RoomClient[] = [];

  add(room: string, gateway: GatewayTarget, opts?: RoomClientOptions): RoomClient {
    const c = new RoomClient(room, gateway, opts).start();
    this.clients.push(c);
    return c;
  }

  get size(): number {
    return this.clients.length;
  }

  /** Stops these clients and forgets them (their rooms leave the backends). */
  remove(clients: readonly RoomClient[]): void {
    const gone = new Set(clients);
    for (const c of clients) c.stop();
    const kept = this.clients.filter((c) => !gone.has(c));
    this.clients.length = 0;
    this.clients.push(...kept);
  }

  liveCount(): number {
    return this.clients.filter((c) => c.live).length;
  }

  notLive(): RoomClient[] {
    return this.clients.filter((c) => !c.live);
  }

  gaveUp(): RoomClient[] {
    return this.clients.filter((c) => c.state === 'gave-up');
  }

  rooms(): string[] {
    return [...new Set(this.clients.map((c) => c.room))];
  }

  ofRoom(room: string): RoomClient[] {
    return this.clients.filter((c) => c.room === room);
  }

  /** room -> backends the room's live clients are mounted on (one, unless the room is split). */
  roomBackends(): Map<string, Set<string>> {
    const out = new Map<string, Set<string>>();
    for (const c of this.clients) {
      const b = c.backend;
      if (b === null) continue;
      let s = out.get(c.room);
      if (!s) out.set(c.room, (s = new Set()));
      s.add(b);
    }
    return out;
  }

  /** Every close seen by a client at or after t. */
  closesSince(t: number): { client: RoomClient; at: number }[] {
    return this.clients.flatMap((c) => c.closesSince(t).map((at) => ({ client: c, at })));
  }

  refusalsSince(t: number): { client: RoomClient; refusal: RefusalRecord }[] {
    return this.clients.flatMap((c) => c.refusals.filter((r) => r.at >= t).map((refusal) => ({ client: c, refusal })));
  }

  stop(): void {
    for (const c of this.clients) c.stop();
  }
}

// --- the invariant checker ------------------------------------------------------------------

export interface WitnessBackend {
  readonly id: string;
  readonly url: string;
}

export interface SplitViolation {
  /** Start of the sample round (ms since epoch). */
  readonly at: number;
  readonly round: number;
  readonly room: string;
  /** backend -> members of the room it held in that round. */
  readonly backends: Record<string, number>;
}

export type RoomsByBackend = Map<string, Record<string, number>>;

async function fetchRooms(b: WitnessBackend, timeoutMs: number): Promise<Record<string, number> | null> {
  try {
    const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return null;
    return ((await res.json()) as { rooms: Record<string, number> }).rooms;
  } catch {
    // Killed (refused) or hung: it holds no room anyone can reach.
    return null;
  }
}

/** Rooms held by each reachable backend, fetched in parallel (one "instant"). */
export async function sampleRooms(backends: readonly WitnessBackend[], timeoutMs = 2_000): Promise<{ rooms: RoomsByBackend; unreachable: string[] }> {
  const results = await Promise.all(backends.map(async (b) => [b.id, await fetchRooms(b, timeoutMs)] as const));
  const rooms: RoomsByBackend = new Map();
  const unreachable: string[] = [];
  for (const [id, r] of results) {
    if (r === null) unreachable.push(id);
    else rooms.set(id, r);
  }
  return { rooms, unreachable };
}

/** room -> backends holding it, from one sample. */
export function holders(sample: RoomsByBackend): Map<string, Record<string, number>> {
  const out = new Map<string, Record<string, number>>();
  for (const [backend, rooms] of sample) {
    for (const [room, n] of Object.entries(rooms)) {
      let h = out.get(room);
      if (!h) out.set(room, (h = {}));
      h[backend] = n;
    }
  }
  return out;
}

/**
 * Samples every backend's /_backend/rooms every intervalMs (a round starts when the previous one
 * ended, so rounds never overlap) and records a violation whenever one room is held by two
 * backends in the same round.
 *
 * A round is one instant only as far as its answers are close together: a room that moved the
 * legitimate way (its sockets closed on the old backend, its clients reconnected at least
 * minReconnectMs later on the new one) can show on both only in a round whose answers are spread
 * over more than minReconnectMs. So a split counts as a violation when it is seen in a tight
 * round (all answers within tightMs of the round's start) or in two consecutive rounds; a split
 * seen once in a loose round is kept apart as a suspect (reported, not failed on).
 */
export class SplitWatcher {
  readonly violations: SplitViolation[] = [];
  readonly suspects: SplitViolation[] = [];
  rounds = 0;
  tightRounds = 0;
  /** Longest round (ms): how far apart the samples of one "instant" can be. */
  maxRoundMs = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;
  /** Splits of the previous round: room -> its violation record. */
  private previous = new Map<string, SplitViolation>();
  readonly startedAt = Date.now();

  constructor(
    private readonly backends: () => readonly WitnessBackend[],
    private readonly intervalMs = 100,
    private readonly tightMs = 40,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop();
  }

  private loop(): void {
    if (this.stopped) return;
    this.running = this.round().finally(() => {
      this.running = null;
      if (!this.stopped) this.timer = setTimeout(() => this.loop(), this.intervalMs);
    });
  }

  private async round(): Promise<void> {
    const at = Date.now();
    const round = ++this.rounds;
    const { rooms } = await sampleRooms(this.backends(), 1_000);
    const spread = Date.now() - at;
    this.maxRoundMs = Math.max(this.maxRoundMs, spread);
    const tight = spread <= this.tightMs;
    if (tight) this.tightRounds++;
    const current = new Map<string, SplitViolation>();
    for (const [room, h] of holders(rooms)) {
      if (Object.keys(h).length < 2) continue;
      const v: SplitViolation = { at, round, room, backends: h };
      current.set(room, v);
      const before = this.previous.get(room);
      if (tight || before !== undefined) {
        // Seen in the previous round too: that one was no artefact of a loose round either.
        if (before !== undefined && !this.violations.includes(before)) {
          this.violations.push(before);
          this.suspects.splice(this.suspects.indexOf(before), 1);
        }
        this.violations.push(v);
      } else this.suspects.push(v);
    }
    this.previous = current;
  }

  /** Violations that started at or after t. */
  since(t: number): SplitViolation[] {
    return this.violations.filter((v) => v.at >= t);
  }

  /** One line per violation: time (ISO and ms after `origin`), room, backends with member counts. */
  describe(violations: readonly SplitViolation[] = this.violations, origin = this.startedAt): string {
    return violations
      .map((v) => `${new Date(v.at).toISOString()} (+${v.at - origin} ms, round ${v.round}) room ${v.room} on ${Object.entries(v.backends).map(([b, n]) => `${b}(${n})`).join(' + ')}`)
      .join('\n');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}

// --- a TCP forwarder that can be cut ------------------------------------------------------

// The forwarder runs in a worker thread: its own event loop, so a test process busy with hundreds
// of WebSocket clients does not delay the bytes it forwards (a gateway's health checks through it
// would time out and the gateway would see the backend flap).
const FORWARDER_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const sockets = new Set();
let server = null;
function listen(port, reply) {
  const srv = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: workerData.targetPort });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => sockets.delete(s));
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  srv.once('error', (err) => reply({ error: err.code || err.message }));
  srv.listen(port, '127.0.0.1', () => {
    server = srv;
    reply({ port: srv.address().port });
  });
}
parentPort.on('message', ({ id, cmd, port }) => {
  const reply = (r) => parentPort.postMessage({ id, ...r });
  if (cmd === 'listen') return listen(port, reply);
  if (cmd === 'cut') {
    const srv = server;
    server = null;
    for (const s of sockets) s.destroy();
    sockets.clear();
    if (!srv) return reply({});
    srv.close(() => reply({}));
  }
});
`;

/**
 * 127.0.0.1:port -> 127.0.0.1:targetPort, byte for byte (node:net, in a worker thread). cut()
 * closes the listener and destroys every connection (the target looks dead through it); restore()
 * listens on the same port again; close() also ends the worker.
 */
export class TcpForwarder {
  private readonly worker: Worker;
  private nextId = 0;
  private readonly pending = new Map<number, (r: { port?: number; error?: string }) => void>();
  private listening = false;
  port = 0;

  private constructor(targetPort: number) {
    this.worker = new Worker(FORWARDER_WORKER, { eval: true, workerData: { targetPort } });
    this.worker.on('message', (m: { id: number; port?: number; error?: string }) => {
      this.pending.get(m.id)?.(m);
      this.pending.delete(m.id);
    });
  }

  static async start(targetPort: number): Promise<TcpForwarder> {
    const f = new TcpForwarder(targetPort);
    await f.listen(0);
    return f;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private call(cmd: string, port?: number): Promise<{ port?: number; error?: string }> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`forwarder: ${cmd} timed out`));
      }, 5_000);
      this.pending.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      this.worker.postMessage({ id, cmd, port });
    });
  }

  private async listen(port: number): Promise<void> {
    const r = await this.call('listen', port);
    if (r.error !== undefined || r.port === undefined) throw new Error(`forwarder: listen on ${port} failed: ${r.error}`);
    this.port = r.port;
    this.listening = true;
  }

  /** Stops forwarding: new connections are refused, live ones are destroyed. */
  async cut(): Promise<void> {
    await this.call('cut');
    this.listening = false;
  }

  /** Forwards again, on the same port (retried briefly if the port is still held). */
  async restore(): Promise<void> {
    if (this.listening) return;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.listen(this.port);
        return;
      } catch (err) {
        if (attempt >= 20) throw err;
        await sleep(100);
      }
    }
  }

  async close(): Promise<void> {
    await this.cut().catch(() => undefined);
    await this.worker.terminate();
  }
}

// --- admin API, logs, small things ----------------------------------------------------------

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function adminGet<T = Record<string, unknown>>(gw: GatewayProc, path: string): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { signal: AbortSignal.timeout(5_000) });
  const body = (await res.json()) as T;
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

export async function adminPost(gw: GatewayProc, path: string, token: string, body: unknown = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export interface AdminBackend {
  id: string;
  url: string;
  state: string;
  health: string;
  admin: { state: string; deadline: string | null } | null;
  rooms: number;
  sockets: number;
}

/** GET /backends as id -> backend. */
export async function adminBackends(gw: GatewayProc): Promise<Map<string, AdminBackend>> {
  const body = await adminGet<{ backends: AdminBackend[] }>(gw, '/backends');
  return new Map(body.backends.map((b) => [b.id, b]));
}

export interface AdminEvent {
  at: string;
  kind: string;
  backend: string;
  detail: string;
  roomsMoved: number;
  liveRoomsMoved: number;
}

export async function adminEvents(gw: GatewayProc): Promise<AdminEvent[]> {
  return (await adminGet<{ events: AdminEvent[] }>(gw, '/events')).events;
}

/** Parsed log lines of a gateway from line index `from` on (the harness keeps them all). */
export function logsFrom(gw: GatewayProc, from: number): Record<string, unknown>[] {
  return gw.lines.slice(from).flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

/** The largest number of `times` (ms) inside any window of windowMs. */
export function maxInWindow(times: readonly number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < t.length; hi++) {
    while ((t[hi] as number) - (t[lo] as number) >= windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
}

/** Witness backends from harness processes. */
export function witnessOf(backends: Iterable<BackendProc>): WitnessBackend[] {
  return [...backends].map((b) => ({ id: b.id, url: b.url }));
}
