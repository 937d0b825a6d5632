// A small in-process backend that serves the room handoff hooks (docs/handoff.md) as an app would:
// every call verified with the call proof for the purpose of the endpoint it serves, replays
// refused, idempotent by handoff id, the room frozen under a lease after an export, its state
// handed over as an opaque blob, its sockets closed with 1012 on release. Pages answer 200 and
// WebSockets (/ws/?room=R) join the room, so a gateway in front of it has live rooms. A test can
// tell each hook to refuse (an HTTP status), hang (never answer: the test fires the gateway's
// deadline), or die (the connection cut and the listener closed: the backend is gone), and can
// wait for a call to arrive. With `resumes` set it is a receiver that resumes (docs/handoff.md,
// version 2): each socket's messages are acknowledged with a per-socket sequence number that
// travels in the export, and a resumed socket (the signed resume handshake) is attached to the
// imported room without a greeting, its sequence continued. Every server is closed by close();
// nothing is left behind.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { backendKeys, verifyCall, type CallPurpose } from '../../src/http/call-proof.js';
import { waitFor } from './processes.js';

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
  /** true: version 2 with `resume` too: acks with a per-socket sequence, resumed sockets taken. */
  resumes = false;
  /** true: the WebSockets negotiate permessage-deflate (every message compressed). */
  deflate = false;
  /** The resume handshake answered with this status (the signed one refused), or never answered. */
  resumeAnswer: number | 'hang' | null = null;
  /** Each resumed socket taken: its X-Roomgate-Socket, in order. */
  readonly resumed: string[] = [];
  /** The extensions each resumed socket negotiated (ws's names). */
  readonly resumedExtensions: string[] = [];
  /** The last sequence number acknowledged per socket id (resume mode), carried in the export. */
  readonly seqs = new Map<string, number>();
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
  private readonly wssDeflate = new WebSocketServer({ noServer: true, perMessageDeflate: { threshold: 0 } });
  private readonly held = new Set<Socket>();
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
      if (header(req, 'x-roomgate-resume') !== undefined) return this.resumeSocket(req, socket as Socket, head, room);
      // A room's first socket here starts its state, at the epoch roomgate sent.
      if (!this.rooms.has(room)) this.rooms.set(room, { state: `started on ${this.id}`, epoch: Number(header(req, 'x-roomgate-epoch') ?? 0), frozenBy: null });
      const socketId = header(req, 'x-roomgate-socket');
      if (socketId !== undefined) this.socketIds.set(room, [...(this.socketIds.get(room) ?? []), socketId]);
      this.server$(req).handleUpgrade(req, socket, head, (ws) => {
        this.attach(ws, room, socketId ?? '');
        ws.send(JSON.stringify({ type: 'mounted', backend: this.id, room }));
      });
    });
  }

  private server$(req: http.IncomingMessage): WebSocketServer {
    return this.deflate && /permessage-deflate/i.test(header(req, 'sec-websocket-extensions') ?? '') ? this.wssDeflate : this.wss;
  }

  /** A socket joins the room; in resume mode each message it sends is acknowledged with its next sequence number. */
  private attach(ws: WebSocket, room: string, socketId: string): void {
    ws.on('message', (d) => {
      this.log.push(`message ${room} ${String(d)}`);
      if (!this.resumes) return;
      const seq = (this.seqs.get(socketId) ?? 0) + 1;
      this.seqs.set(socketId, seq);
      ws.send(JSON.stringify({ type: 'ack', seq, backend: this.id, text: String(d) }));
    });
    let set = this.sockets.get(room);
    if (!set) this.sockets.set(room, (set = new Set()));
    set.add(ws);
    ws.on('close', () => set.delete(ws));
  }

  /**
   * The resume handshake: verified as a call for `handoff-resume-socket` whose body is the socket
   * id, for a room imported here at that epoch; then the socket is attached with no greeting.
   */
  private resumeSocket(req: http.IncomingMessage, socket: Socket, head: Buffer, room: string): void {
    const socketId = header(req, 'x-roomgate-socket') ?? '';
    const id = header(req, 'x-roomgate-resume') ?? '';
    const epoch = header(req, 'x-roomgate-epoch') ?? '';
    this.log.push(`arrive resume-socket`);
    if (this.resumeAnswer === 'hang') return void this.held.add(socket);
    const claims = { purpose: 'handoff-resume-socket' as CallPurpose, destination: this.id, id, room, epoch, sender: header(req, 'x-roomgate-sender') ?? '', body: Buffer.from(socketId) };
    const proofFields = { timestamp: header(req, 'x-roomgate-timestamp'), signature: header(req, 'x-roomgate-signature'), destination: header(req, 'x-roomgate-destination') };
    const v = verifyCall(backendKeys(this.secrets, this.id), claims, proofFields, Date.now());
    const here = this.rooms.get(room);
    const status = this.resumeAnswer ?? (!this.resumes || !v.ok || this.proofs.has(v.proof) || here === undefined || String(here.epoch) !== epoch || id !== header(req, 'x-roomgate-message-id') ? 403 : 101);
    if (status !== 101) return void socket.end(`HTTP/1.1 ${status} No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    if (v.ok) this.proofs.add(v.proof);
    this.socketIds.set(room, [...(this.socketIds.get(room) ?? []), socketId]);
    this.server$(req).handleUpgrade(req, socket, head, (ws) => {
      this.resumed.push(socketId);
      this.resumedExtensions.push(ws.extensions);
      this.attach(ws, room, socketId);
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
    for (const s of this.held) s.destroy();
    for (const w of [this.wss, this.wssDeflate]) {
      for (const c of w.clients) c.terminate();
      w.close();
    }
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
    if (step === 'hello') return answer(200, this.resumes ? '{"version":2,"messages":true,"resume":true}' : this.version2 ? '{"version":2,"messages":true}' : '{"version":1}', 'application/json');
    if (step === 'messages') {
      if (!this.version2 && !this.resumes) return answer(404, 'not found');
      this.messagesCalls.push({ socket: header(req, 'x-roomgate-socket') ?? '', body: JSON.parse(body.toString('utf8')) as unknown });
      return answer(204);
    }
    if (step === 'export') void this.settled(room).then(() => this.export(id, room, answer));
    else if (step === 'import') this.import(id, room, Number(epoch), body, answer);
    else if (step === 'release') this.release(id, room, answer);
    else this.resume(id, room, answer);
  }

  /**
   * Resume mode: the export covers every message its sockets received before it, as an app's must.
   * ws inflates compressed messages asynchronously, so a message roomgate passed before the hold
   * may still be on its way to the 'message' event: wait (bounded) until each socket's receiver
   * has nothing pending. ws 8's receiver state: 0 (reading the next frame's header) and no
   * buffered bytes is idle.
   */
  private async settled(room: string): Promise<void> {
    if (!this.resumes) return;
    const busy = (): boolean =>
      [...(this.sockets.get(room) ?? [])].some((ws) => {
        const r = (ws as unknown as { _receiver?: { _state: number; _bufferedBytes: number } })._receiver;
        return r !== undefined && (r._state !== 0 || r._bufferedBytes > 0);
      });
    const until = Date.now() + 1_000;
    do await new Promise((r) => setImmediate(r));
    while (busy() && Date.now() < until);
  }

  private export(id: string, room: string, answer: (s: number, out?: Buffer | string, type?: string) => void): void {
    const again = this.exported.get(id);
    if (again) return answer(200, again, 'application/octet-stream');
    const r = this.rooms.get(room);
    if (!r) return answer(404, 'room not here');
    if (r.frozenBy !== null) return answer(409, 'room frozen by another handoff');
    r.frozenBy = id;
    // Resume mode: each socket's sequence travels with the room (the per-socket part of the state).
    const seqs = Object.fromEntries((this.socketIds.get(room) ?? []).map((s) => [s, this.seqs.get(s) ?? 0]));
    const blob = Buffer.from(JSON.stringify(this.resumes ? { state: r.state, seqs } : { state: r.state }));
    this.exported.set(id, blob);
    answer(200, blob, 'application/octet-stream');
  }

  private import(id: string, room: string, epoch: number, body: Buffer, answer: (s: number) => void): void {
    if (!this.doneIds.has(`import ${id}`)) {
      const { state, seqs } = JSON.parse(body.toString('utf8')) as { state: string; seqs?: Record<string, number> };
      this.rooms.set(room, { state, epoch, frozenBy: null });
      for (const [s, n] of Object.entries(seqs ?? {})) this.seqs.set(s, n);
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
    for (const ws of [...this.wss.clients, ...this.wssDeflate.clients]) ws.terminate();
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

/** Resolves once the gateway at `adminPort` knows every backend's hello (a socket opened after it is followed, or made ready for a resume). */
export async function hellosAnswered(adminPort: number | null, token: string): Promise<void> {
  await waitFor('every hello answered', 10_000, async () => {
    const res = await fetch(`http://127.0.0.1:${adminPort}/backends`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5_000) });
    const list = ((await res.json()) as { backends: { handoffHooks?: string }[] }).backends;
    return list.every((b) => b.handoffHooks === 'yes') ? true : undefined;
  }, 100);
}

/** Moves a room through the admin API: the handoff's record (a refusal's too). */
export async function moveRoom(adminPort: number | null, token: string, room: string, to: string): Promise<Record<string, any>> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/rooms/${room}/move`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to }),
    signal: AbortSignal.timeout(10_000),
  });
  const j = (await res.json()) as { handoff?: Record<string, any>; error?: { handoff?: Record<string, any> } };
  return (j.handoff ?? j.error?.handoff) as Record<string, any>;
}

/** The backends' log lines in the order they were written, one sequence across both ("<id> <line>"). */
export function interleaved(...bs: HandoffTestBackend[]): string[] {
  const all: string[] = [];
  for (const b of bs) {
    const push = b.log.push.bind(b.log);
    b.log.push = (...lines: string[]) => {
      all.push(...lines.map((l) => `${b.id} ${l}`));
      return push(...lines);
    };
  }
  return all;
}
