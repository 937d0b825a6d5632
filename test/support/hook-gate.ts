// An in-process HTTP proxy in front of one demo backend, so a chaos test can hit a handoff's
// timing windows on purpose rather than by luck (test/chaos/handoff-races.test.ts). The gateway is
// given the gate's URL as the backend's; every request and WebSocket upgrade is forwarded to the
// backend as is (upgrades byte for byte), except the handoff hook calls (POST {path}/{step}),
// which a test can hold at two points:
//   before(call)  awaited before the call reaches the backend; 'drop' cuts the gateway's
//                 connection without forwarding (the backend never sees the call);
//   after(call)   awaited once the backend has answered, before the answer is relayed; 'drop' cuts
//                 the gateway's connection instead (the backend acted, its answer never arrives).
// A backend that cannot be reached is a cut connection through the gate too, never an answer the
// gate made up, so the gateway sees what it would see without the gate. Each call is recorded.
// close() destroys every connection and closes the listener.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo, Socket } from 'node:net';

export type HookStep = 'hello' | 'export' | 'import' | 'release' | 'resume';

export interface GateCall {
  readonly step: HookStep;
  readonly id: string;
  readonly room: string;
  readonly at: number;
  /** The backend's answer (null: cut before, or the backend unreachable). */
  status: number | null;
}

export type GateAction = 'pass' | 'drop';

export interface GateHold {
  before?: (c: GateCall) => GateAction | void | Promise<GateAction | void>;
  after?: (c: GateCall) => GateAction | void | Promise<GateAction | void>;
}

const HOOK = /^\/_roomgate\/handoff\/(hello|export|import|release|resume)$/;

export class HookGate {
  readonly calls: GateCall[] = [];
  readonly holds = new Map<HookStep, GateHold>();
  url = '';
  private readonly server: http.Server;
  private readonly conns = new Set<Socket>();

  constructor(private readonly targetPort: number) {
    this.server = http.createServer((req, res) => void this.request(req, res));
    this.server.on('connection', (s: Socket) => this.track(s));
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => this.upgrade(req, socket, head));
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The calls of one step (for one room, if given). */
  seen(step: HookStep, room?: string): GateCall[] {
    return this.calls.filter((c) => c.step === step && (room === undefined || c.room === room));
  }

  async close(): Promise<void> {
    for (const s of this.conns) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private track(s: Socket): void {
    this.conns.add(s);
    s.on('error', () => s.destroy());
    s.on('close', () => this.conns.delete(s));
  }

  private async request(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const hook = req.method === 'POST' ? HOOK.exec(req.url ?? '') : null;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    if (hook === null) return this.forward(req, body, res, null);
    const h = (name: string): string => String(req.headers[name] ?? '');
    const call: GateCall = { step: hook[1] as HookStep, id: h('x-roomgate-message-id'), room: h('x-roomgate-room'), at: Date.now(), status: null };
    this.calls.push(call);
    const hold = this.holds.get(call.step);
    if ((await hold?.before?.(call)) === 'drop') return void res.socket?.destroy();
    return this.forward(req, body, res, call);
  }

  private forward(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, call: GateCall | null): void {
    const up = http.request({ host: '127.0.0.1', port: this.targetPort, method: req.method, path: req.url, headers: req.headers, agent: false, timeout: 60_000 }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('error', () => res.socket?.destroy());
      answer.on('end', () => void this.relay(call, answer, Buffer.concat(chunks), res));
    });
    up.on('error', () => res.socket?.destroy());
    up.on('timeout', () => up.destroy());
    up.end(body);
  }

  private async relay(call: GateCall | null, answer: http.IncomingMessage, body: Buffer, res: http.ServerResponse): Promise<void> {
    if (call !== null) {
      call.status = answer.statusCode ?? 0;
      if ((await this.holds.get(call.step)?.after?.(call)) === 'drop') return void res.socket?.destroy();
    }
    const headers = { ...answer.headers };
    delete headers['transfer-encoding'];
    res.writeHead(answer.statusCode ?? 502, { ...headers, 'content-length': body.length });
    res.end(body);
  }

  /** An upgrade: the request head written to the backend again, then bytes both ways. */
  private upgrade(req: http.IncomingMessage, socket: Socket, head: Buffer): void {
    const up = net.connect({ host: '127.0.0.1', port: this.targetPort });
    this.track(up);
    socket.on('close', () => up.destroy());
    up.on('close', () => socket.destroy());
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    up.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) up.write(head);
    socket.pipe(up);
    up.pipe(socket);
  }
}
