// One call to a backend's room handoff hooks (docs/handoff.md): POST {handoff.path}/{step} on the
// backend's own address, with the handoff id, the room, the epoch and the sender, signed for the
// step's own purpose and for that backend alone (src/http/call-proof.ts), so no call passes as
// another, none as a push, and none at another backend; each call is recorded (backend-calls.ts).
// The answer's body is read (an export's is the room's state) up to a cap; one deadline covers
// the connect and the whole answer.
import type { BackendTls } from '../backends/backend-tls.js';
import type { Socket } from 'node:net';
import { backendConnect, backendPost, maybeSent } from './backend-call.js';
import type { CallPurpose } from '../http/call-proof.js';
import type { BackendCalls } from './backend-calls.js';
import type { Backend } from './pool.js';

export type HookStep = 'hello' | 'export' | 'import' | 'release' | 'resume' | 'messages';

export interface HookCall {
  readonly step: HookStep;
  /** The handoff id (hello: a random id). */
  readonly id: string;
  /** '' for hello: the fields are then not sent. */
  readonly room: string;
  readonly epoch: string;
  readonly body: Buffer;
  /** X-Roomgate-Socket (the messages step: whose messages these are). */
  readonly socket?: string;
  /** A connection opened ahead for this call (HookClient.connect); absent: one of its own. */
  readonly connection?: Socket;
}

export type HookAnswer =
  /** The backend answered (any status); `body` is at most maxBodyBytes. */
  | { readonly kind: 'answer'; readonly status: number; readonly body: Buffer }
  /** No complete answer within the deadline. */
  | { readonly kind: 'timeout' }
  /** The connection failed; `sent`: the request may have reached the backend before it broke. */
  | { readonly kind: 'unreachable'; readonly why: string; readonly sent: boolean }
  /** The answer's body was larger than maxBodyBytes (not read further). */
  | { readonly kind: 'too-large' };

export interface HookClientOptions {
  readonly path: string;
  /** Signs each call for its backend and records it (/events, roomgate_backend_calls_total). */
  readonly calls: BackendCalls;
  /** X-Roomgate-Sender: this gateway's id. */
  readonly sender: string;
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  readonly backendTls: BackendTls;
  /** Starts a call's deadline; returns its cancel (tests fire deadlines themselves). Default setTimeout. */
  readonly deadline?: (fire: () => void, ms: number) => () => void;
}

function timeout(fire: () => void, ms: number): () => void {
  const t = setTimeout(fire, ms);
  return () => clearTimeout(t);
}

const PURPOSE: Readonly<Record<HookStep, CallPurpose>> = {
  hello: 'handoff-hello',
  export: 'handoff-export',
  import: 'handoff-import',
  release: 'handoff-release',
  resume: 'handoff-resume',
  messages: 'handoff-messages',
};

/** The call's own fields, [name, value, ...], after Host and the body's: the ids and the proof. */
function fields(o: HookClientOptions, backend: Backend, call: HookCall): string[] {
  const out = ['X-Roomgate-Message-Id', call.id, 'X-Roomgate-Sender', o.sender];
  if (call.room !== '') out.push('X-Roomgate-Room', call.room, 'X-Roomgate-Epoch', call.epoch);
  if (call.socket !== undefined) out.push('X-Roomgate-Socket', call.socket);
  const claims = { purpose: PURPOSE[call.step], destination: backend.id, id: call.id, room: call.room, epoch: call.epoch, sender: o.sender, body: call.body };
  return [...out, ...o.calls.sign(claims)];
}

/** What the call record says of an answer: its status, or why there was none. */
function resultOf(a: HookAnswer): number | 'timeout' | 'unreachable' | 'too-large' {
  return a.kind === 'answer' ? a.status : a.kind;
}

export class HookClient {
  constructor(private readonly o: HookClientOptions) {}

  /** A connection to the backend opened now for a call made later (its `connection`); destroyed by the opener if unused. */
  connect(backend: Backend): Socket {
    return backendConnect(backend, this.o.backendTls);
  }

  call(backend: Backend, call: HookCall): Promise<HookAnswer> {
    const { o } = this;
    const startedMs = Date.now();
    return new Promise((resolve) => {
      let settled = false;
      const done = (out: HookAnswer): void => {
        if (settled) return;
        settled = true;
        cancel();
        req.destroy();
        o.calls.record({ backend: backend.id, call: PURPOSE[call.step], id: call.id, room: call.room, result: resultOf(out), startedMs });
        resolve(out);
      };
      // One connection per call: an export or import retried is a second call the receiver must
      // recognise as the first (src/runtime/backend-call.ts).
      const type = call.step === 'import' ? 'application/octet-stream' : 'application/json';
      const req = backendPost(backend, `${o.path}/${call.step}`, type, call.body.length, fields(o, backend, call), o.backendTls, call.connection);
      const cancel = (o.deadline ?? timeout)(() => done({ kind: 'timeout' }), o.timeoutMs);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > o.maxBodyBytes) return done({ kind: 'too-large' });
          chunks.push(c);
        });
        res.on('end', () => done({ kind: 'answer', status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', (err: NodeJS.ErrnoException) => done({ kind: 'unreachable', why: err.code ?? err.message, sent: true }));
      });
      req.on('error', (err: NodeJS.ErrnoException) => done({ kind: 'unreachable', why: err.code ?? err.message, sent: maybeSent(err) }));
      req.end(call.body);
    });
  }
}

/** A 2xx answer. */
export function succeeded(a: HookAnswer): a is { kind: 'answer'; status: number; body: Buffer } {
  return a.kind === 'answer' && a.status >= 200 && a.status < 300;
}

/** What a failed call was, for the log and the admin answer (nothing of the body). */
export function describe(step: HookStep, a: HookAnswer): string {
  switch (a.kind) {
    case 'answer':
      return `${step} answered ${a.status}`;
    case 'timeout':
      return `${step} did not answer in time`;
    case 'unreachable':
      return `${step} failed: ${a.why}`;
    case 'too-large':
      return `${step} answer over the size limit (handoff.maxStateBytes)`;
  }
}
