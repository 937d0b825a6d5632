// A small in-process backend that serves the room handoff hooks (docs/handoff.md) as an app would:
// every call verified with the call proof for the purpose of the endpoint it serves, replays
// refused, idempotent by handoff id, the room frozen under a lease after an export, its state
// handed over as an opaque blob, its sockets closed with 1012 on release. Pages answer 200 and
// WebSockets (/ws/?room=R) join the room, so a gateway in front of it has live rooms. A test can
// tell each hook to refuse (an HTTP status), hang (never answer: the test fires the gateway's
// deadline), or die (the connection cut and the listener closed: the backend is gone), and can
// wait for a call to arrive. Every server is closed by close(); nothing is left behind.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { backendKeys, verifyCall, type CallPurpose } from '../../src/http/call-proof.js';

export type Step = 'hello' | 'export' | 'import' | 'release' | 'resume' | 'messages';
export type Behaviour = { readonly refuse: number } | { readonly until: Promise<void> } | 'hang' | 'die';

export interface RoomState {
  /** The app's state of the room (a test writes it; it travels as the blob). */
  state: string;
  epoch: number;
  /** Frozen by an export (handoff id), until release, resume or the lease's end. */
  frozenBy: string | null;
}

export interface CallSeen {
  readonly step: Step;
  readonly id: string;
  readonly room: string;
  readonly epoch: string;
  readonly status: number;
}

const STEPS: readonly Step[] = ['hello', 'export', 'import', 'release', 'resume', 'messages'];

function header(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

export class HandoffTestBackend {
  readonly rooms = new Map<string, RoomState>();
  readonly calls: CallSeen[] = [];
  readonly behave = new Map<Step, Behaviour>();
  /** false: no hooks at all (hello 404, like an app that has none). */
  hooks = true;
  /** true: the hello says version 2 with `messages` (docs/handoff.md), and the messages hook is served. */
  version2 = false;
  /** In order: `arrive <step>` as each hook call arrives, `message <room> <text>` as each socket message does. */
  readonly log: string[] = [];
  /** Each messages call taken: its X-Roomgate-Socket and body. */
  readonly messagesCalls: { socket: string; body: unknown }[] = [];
  /** The X-Roomgate-Socket of each socket's handshake, by room. */
  readonly socketIds = new Map<string, string[]>();
  /** Each export's answer, by handoff id: the same export twice answers the same blob. */
  private readonly exported = new Map<string, Buffer>();
  private readonly doneIds = new Set<string>();
  private readonly proofs = new Set<string>();
  private readonly sockets = new Map<string, Set<WebSocket>>();
  private readonly hanging = new Set<http.ServerResponse>();
  private waiters: { step: Step; resolve: () => void }[] = [];
  private readonly server: http.Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly conns = new Set<Socket>();
  url = '';

  constructor(
    readonly id: string,
    private readonly secrets: readonly string[],
    readonly path = '/_roomgate/handoff',
  ) {
    this.server = http.createServer((req, res) => this.onRequest(req, res));
    this.server.on('connection', (s: Socket) => {
      this.conns.add(s);
      s.on('close', () => this.conns.delete(s));
    });
    this.server.on('upgrade', (req, socket, head) => {
      const room = new URL(req.url ?? '/', 'http://x').searchParams.get('room') ?? '';
      // A room's first socket here starts its state, at the epoch roomgate sent.
      if (!this.rooms.has(room)) this.rooms.set(room, { state: `started on ${this.id}`, epoch: Number(header(req, 'x-roomgate-epoch') ?? 0), frozenBy: null });
      const socketId = header(req, 'x-roomgate-socket');
      if (socketId !== undefined) this.socketIds.set(room, [...(this.socketIds.get(room) ?? []), socketId]);
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (d) => this.log.push(`message ${room} ${String(d)}`));
        let set = this.sockets.get(room);
        if (!set) this.sockets.set(room, (set = new Set()));
        set.add(ws);
        ws.on('close', () => set.delete(ws));
        ws.send(JSON.stringify({ type: 'mounted', backend: this.id, room }));
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The room as the app holds it before a handoff. */
  seed(room: string, state: string, epoch = 1): void {
    this.rooms.set(room, { state, epoch, frozenBy: null });
  }

  /** Resolves when the next call of this step arrives (before it is answered). */
  arrival(step: Step): Promise<void> {
    return new Promise((resolve) => this.waiters.push({ step, resolve }));
  }

  socketsOf(room: string): number {
    return this.sockets.get(room)?.size ?? 0;
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    for (const c of this.wss.clients) c.terminate();
    this.wss.close();
    if (!this.server.listening) return;
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      const step = STEPS.find((s) => path === `${this.path}/${s}`);
      if (!step || req.method !== 'POST') return void res.writeHead(200, { 'Content-Type': 'text/html' }).end(`page of ${this.id}`);
      this.hook(step, req, res, Buffer.concat(chunks));
    });
  }

  private hook(step: Step, req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): void {
    const id = header(req, 'x-roomgate-message-id') ?? '';
    const room = header(req, 'x-roomgate-room') ?? '';
    const epoch = header(req, 'x-roomgate-epoch') ?? '';
    const answer = (status: number, out: Buffer | string = '', type = 'text/plain'): void => {
      this.calls.push({ step, id, room, epoch, status });
      res.writeHead(status, { 'Content-Type': type }).end(out);
    };
    this.log.push(`arrive ${step}`);
    const arrived = this.waiters.filter((w) => w.step === step);
    this.waiters = this.waiters.filter((w) => w.step !== step);
    for (const w of arrived) w.resolve();
    const b = this.behave.get(step);
    if (b === 'hang') return void this.hanging.add(res);
    if (b === 'die') return this.die(req);
    if (b !== undefined && 'until' in b) {
      // Answered as usual once the test lets it go.
      this.behave.delete(step);
      return void b.until.then(() => this.hook(step, req, res, body));
    }
    if (b !== undefined) return answer(b.refuse, 'refused by the test');
    if (!this.hooks) return answer(404, 'not found');
    // The purpose is the endpoint's, never read from the request.
    const purpose = `handoff-${step}` as CallPurpose;
    // Its own keys only, as `roomgate backend-key` gives them (the secrets never reach a backend).
    const claims = { purpose, destination: this.id, id, room, epoch, sender: header(req, 'x-roomgate-sender') ?? '', body };
    const proofFields = { timestamp: header(req, 'x-roomgate-timestamp'), signature: header(req, 'x-roomgate-signature'), destination: header(req, 'x-roomgate-destination') };
    const v = verifyCall(backendKeys(this.secrets, this.id), claims, proofFields, Date.now());
    if (!v.ok || this.proofs.has(v.proof)) return answer(403, 'forbidden');
    this.proofs.add(v.proof);
    if (step === 'hello') return answer(200, this.version2 ? '{"version":2,"messages":true}' : '{"version":1}', 'application/json');
    if (step === 'messages') {
      if (!this.version2) return answer(404, 'not found');
      this.messagesCalls.push({ socket: header(req, 'x-roomgate-socket') ?? '', body: JSON.parse(body.toString('utf8')) as unknown });
      return answer(204);
    }
    if (step === 'export') this.export(id, room, answer);
    else if (step === 'import') this.import(id, room, Number(epoch), body, answer);
    else if (step === 'release') this.release(id, room, answer);
    else this.resume(id, room, answer);
  }

  private export(id: string, room: string, answer: (s: number, out?: Buffer | string, type?: string) => void): void {
    const again = this.exported.get(id);
    if (again) return answer(200, again, 'application/octet-stream');
    const r = this.rooms.get(room);
    if (!r) return answer(404, 'room not here');
    if (r.frozenBy !== null) return answer(409, 'room frozen by another handoff');
    r.frozenBy = id;
    const blob = Buffer.from(JSON.stringify({ state: r.state }));
    this.exported.set(id, blob);
    answer(200, blob, 'application/octet-stream');
  }

  private import(id: string, room: string, epoch: number, body: Buffer, answer: (s: number) => void): void {
    if (!this.doneIds.has(`import ${id}`)) {
      const { state } = JSON.parse(body.toString('utf8')) as { state: string };
      this.rooms.set(room, { state, epoch, frozenBy: null });
      this.doneIds.add(`import ${id}`);
    }
    answer(204);
  }

  private release(id: string, room: string, answer: (s: number) => void): void {
    const r = this.rooms.get(room);
    if (r?.frozenBy === id) this.rooms.delete(room);
    for (const ws of this.sockets.get(room) ?? []) ws.close(1012, 'room moved');
    answer(204);
  }

  private resume(id: string, room: string, answer: (s: number) => void): void {
    const r = this.rooms.get(room);
    if (r?.frozenBy === id) r.frozenBy = null;
    answer(204);
  }

  /** The backend dies: this connection cut, the listener closed (no call reaches it any more). */
  private die(req: http.IncomingMessage): void {
    this.server.close();
    req.socket.destroy();
    for (const c of this.conns) c.destroy();
    for (const ws of this.wss.clients) ws.terminate();
  }
}

/** A room's socket through a gateway's public port, once its backend's `mounted` arrived. */
export interface MountedSocket {
  readonly ws: WebSocket;
  readonly room: string;
  readonly backend: string;
  readonly closed: Promise<number>;
}

export async function openMountedRoom(port: number, room: string, onOpen: (ws: WebSocket) => void = () => undefined): Promise<MountedSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws/?room=${room}`, { handshakeTimeout: 5_000 });
  onOpen(ws);
  const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
  let timer: NodeJS.Timeout | undefined;
  const mounted = await Promise.race([
    new Promise<{ backend: string }>((resolve, reject) => {
      ws.once('message', (d) => resolve(JSON.parse(String(d)) as { backend: string }));
      ws.once('error', reject);
    }),
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`room ${room} not mounted within 5000 ms`)), 5_000))),
  ]).finally(() => clearTimeout(timer));
  return { ws, room, backend: mounted.backend, closed };
}

/** A gateway's configuration in front of two hook-serving backends: admin writes with `token`, signed calls, no health checks. */
export function handoffPairConfig(b1: HandoffTestBackend, b2: HandoffTestBackend, token: string, secret: string): Record<string, unknown> {
  return {
    backends: [
      { id: 'b1', url: b1.url },
      { id: 'b2', url: b2.url },
    ],
    health: { path: null },
    admin: { enabled: true, host: '127.0.0.1', port: 0, token },
    backendCalls: { secrets: [secret] },
  };
}
