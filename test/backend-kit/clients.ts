// What the kit's tests call it with: roomgate's own signer (BackendCalls, src/runtime) for pushes
// and resume handshakes, roomgate's own hook client (HookClient) for the handoff hooks, and a `ws`
// client that records frames and how its socket ended.
import { request } from 'node:http';
import { WebSocket } from 'ws';
import { defaultBackendTls } from '../../src/backends/backend-tls.js';
import type { CallPurpose } from '../../src/http/call-proof.js';
import { BackendCalls } from '../../src/runtime/backend-calls.js';
import { HookClient, type HookAnswer, type HookStep } from '../../src/runtime/handoff-calls.js';
import { BackendPool, type Backend } from '../../src/runtime/pool.js';

export const SECRETS = ['kit-test-secret-one-0123456789abcdef'];
export const SENDER = 'gw-kit-test';

export function withTimeout<T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)))]).finally(() => clearTimeout(timer));
}

/** The gateway's view of a backend at `port`, for its hook client. */
export function backendAt(id: string, port: number): Backend {
  const pool = new BackendPool([{ id, url: `http://127.0.0.1:${port}`, host: '127.0.0.1', port, weight: 1 }], 600_000);
  return pool.get(id) as Backend;
}

/** Calls a hook as roomgate does (signed for the step's purpose and the backend's id). */
export function hook(secrets: readonly string[], backend: Backend, step: HookStep, c: { id: string; room?: string; epoch?: number; body?: string; socket?: string }): Promise<HookAnswer> {
  const client = new HookClient({ path: '/_roomgate/handoff', calls: new BackendCalls(secrets), sender: SENDER, timeoutMs: 5_000, maxBodyBytes: 1 << 20, backendTls: defaultBackendTls() });
  return client.call(backend, { step, id: c.id, room: c.room ?? '', epoch: String(c.epoch ?? ''), body: Buffer.from(c.body ?? ''), ...(c.socket === undefined ? {} : { socket: c.socket }) });
}

/** The proof fields roomgate's signer makes for a call, as a header object. */
export function signed(secrets: readonly string[], purpose: CallPurpose, destination: string, c: { id: string; room: string; epoch: string; body: string; sender?: string }): Record<string, string> {
  const sender = c.sender ?? SENDER;
  const list = new BackendCalls(secrets).sign({ purpose, destination, id: c.id, room: c.room, epoch: c.epoch, sender, body: Buffer.from(c.body) });
  const out: Record<string, string> = { 'X-Roomgate-Message-Id': c.id, 'X-Roomgate-Sender': sender };
  if (c.room !== '') Object.assign(out, { 'X-Roomgate-Room': c.room, 'X-Roomgate-Epoch': c.epoch });
  for (let i = 0; i < list.length; i += 2) out[list[i] as string] = list[i + 1] as string;
  return out;
}

/** POSTs a body with headers; the status and the body's text. */
export function post(port: number, path: string, headers: Record<string, string>, body: string): Promise<{ status: number; sockets: string | undefined; text: string }> {
  return withTimeout(
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, sockets: res.headers['x-roomgate-sockets'] as string | undefined, text: Buffer.concat(chunks).toString() }));
      });
      req.on('error', reject);
      req.end(body);
    }),
    `POST ${path}`,
  );
}

export type Frame = Record<string, unknown> & { type: string };

export class Client {
  readonly frames: Frame[] = [];
  private waiters: (() => void)[] = [];
  readonly closed: Promise<number>;
  /** The handshake's end: 101, or the status it was refused with. */
  readonly opened: Promise<number>;
  constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      this.frames.push(JSON.parse(d.toString()) as Frame);
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((r) => ws.once('close', (code) => r(code)));
    this.opened = new Promise((r) => {
      ws.once('open', () => r(101));
      ws.once('unexpected-response', (_req, res) => {
        r(res.statusCode ?? 0);
        res.resume();
        ws.terminate();
      });
    });
    ws.on('error', () => {});
  }

  async next(type: string): Promise<Frame> {
    return withTimeout(
      (async () => {
        for (;;) {
          const i = this.frames.findIndex((f) => f.type === type);
          if (i >= 0) return this.frames.splice(i, 1)[0] as Frame;
          await new Promise<void>((r) => this.waiters.push(r));
        }
      })(),
      `a ${type} frame`,
    );
  }

  send(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }
}

export function connect(port: number, headers: Record<string, string> = {}): Client {
  return new Client(new WebSocket(`ws://127.0.0.1:${port}/ws/live/`, { headers }));
}
