// A small request/response RPC over a Node IPC channel: between the cluster primary and a worker
// (process.send), or a parent and a forked child. Calls carry ids and a timeout each; once the
// other side is gone every pending and later call rejects at once with RpcClosedError naming it.
// Events are fire-and-forget, in order with the calls' answers (one channel). Messages are JSON
// (the default IPC serialization): send plain data, Maps as entry arrays. Messages that are not
// this protocol's (prom-client's, Node's own) are ignored, so the channel can be shared.
import type { ChildProcess } from 'node:child_process';
import type { Worker } from 'node:cluster';
import type { EventEmitter } from 'node:events';
import { errorMessage } from '../http/errors.js';

/** The IPC channel to one other process, whatever kind of process object holds it. */
export interface IpcChannel {
  readonly connected: boolean;
  /** Sends one message; `done` gets the error if it could not be sent (channel closed). */
  send(message: unknown, done: (err: Error | null) => void): void;
  onMessage(listener: (message: unknown) => void): () => void;
  /** The channel closed (the other process exited or disconnected). */
  onClose(listener: () => void): () => void;
}

function listen(emitter: EventEmitter, events: readonly string[], listener: (message: unknown) => void): () => void {
  for (const e of events) emitter.on(e, listener);
  return () => {
    for (const e of events) emitter.off(e, listener);
  };
}

/** This process's channel to its parent (a cluster worker's or a forked child's). */
export function channelToParent(proc: NodeJS.Process = process): IpcChannel {
  return {
    get connected() {
      return proc.connected === true && typeof proc.send === 'function';
    },
    send(message, done) {
      if (typeof proc.send !== 'function' || !proc.connected) return done(new Error('no IPC channel to the parent process'));
      try {
        proc.send(message, undefined, undefined, (err) => done(err ?? null));
      } catch (err) {
        done(err as Error);
      }
    },
    onMessage: (l) => listen(proc, ['message'], l),
    onClose: (l) => listen(proc, ['disconnect'], l),
  };
}

/** The channel to a forked child or a cluster worker. */
export function channelToChild(child: ChildProcess | Worker): IpcChannel {
  const isWorker = 'isConnected' in child;
  return {
    get connected() {
      return isWorker ? (child as Worker).isConnected() : (child as ChildProcess).connected;
    },
    send(message, done) {
      const cb = (err: Error | null): void => done(err ?? null);
      try {
        if (isWorker) (child as Worker).send(message as object, undefined, cb);
        else (child as ChildProcess).send(message as object, cb);
      } catch (err) {
        done(err as Error);
      }
    },
    onMessage: (l) => listen(child, ['message'], l),
    onClose: (l) => listen(child, ['disconnect', 'exit'], l),
  };
}

export class RpcError extends Error {
  override name = 'RpcError';
}
/** No answer within the call's timeout (the answer, if it ever comes, is dropped). */
export class RpcTimeoutError extends RpcError {
  override name = 'RpcTimeoutError';
}
/** The other process is gone (or this peer was closed): nothing can be sent or answered. */
export class RpcClosedError extends RpcError {
  override name = 'RpcClosedError';
}
/** The other side's handler threw (or had no handler for the method); its message is kept. */
export class RpcRemoteError extends RpcError {
  override name = 'RpcRemoteError';
}

const TAG = 'roomgate-rpc/1';

type Message =
  | { readonly tag: typeof TAG; readonly kind: 'req'; readonly id: number; readonly method: string; readonly args: readonly unknown[] }
  | { readonly tag: typeof TAG; readonly kind: 'res'; readonly id: number; readonly ok: true; readonly value?: unknown }
  | { readonly tag: typeof TAG; readonly kind: 'res'; readonly id: number; readonly ok: false; readonly error: string }
  | { readonly tag: typeof TAG; readonly kind: 'event'; readonly topic: string; readonly payload?: unknown };

function isMessage(m: unknown): m is Message {
  return typeof m === 'object' && m !== null && (m as { tag?: unknown }).tag === TAG;
}

export type RpcHandler = (...args: unknown[]) => unknown;

export interface RpcOptions {
  /** Default timeout of a call (ms). */
  readonly timeoutMs: number;
  /** The other side, for error messages: "the primary process", "worker 2 (pid 123)". */
  readonly peerName: string;
}

interface Pending {
  readonly method: string;
  readonly resolve: (v: unknown) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class RpcPeer {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly handlers = new Map<string, RpcHandler>();
  private readonly topics = new Map<string, Set<(payload: unknown) => void>>();
  private readonly closeListeners = new Set<(reason: string) => void>();
  private readonly detach: (() => void)[];
  private closedReason: string | null = null;

  constructor(
    private readonly channel: IpcChannel,
    private readonly o: RpcOptions,
  ) {
    this.detach = [channel.onMessage((m) => this.receive(m)), channel.onClose(() => this.close(`${o.peerName} is gone (IPC channel closed)`))];
    if (!channel.connected) this.close(`${o.peerName} is gone (no IPC channel)`);
  }

  /** True once the other side is gone or close() was called. */
  get closed(): boolean {
    return this.closedReason !== null;
  }

  get peerName(): string {
    return this.o.peerName;
  }

  /** Calls `method` on the other side; rejects with RpcTimeoutError, RpcClosedError or RpcRemoteError. */
  call<T = unknown>(method: string, args: readonly unknown[] = [], timeoutMs = this.o.timeoutMs): Promise<T> {
    if (this.closedReason !== null) return Promise.reject(new RpcClosedError(`${method}: ${this.closedReason}`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcTimeoutError(`${method}: no answer from ${this.o.peerName} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
      this.channel.send({ tag: TAG, kind: 'req', id, method, args } satisfies Message, (err) => {
        if (!err) return;
        const p = this.pending.get(id);
        if (!p) return;
        this.pending.delete(id);
        clearTimeout(p.timer);
        // A closed channel is the other side gone; anything else (a value JSON cannot carry) is ours.
        p.reject(this.closedReason !== null || !this.channel.connected ? new RpcClosedError(`${method}: ${this.closedReason ?? `${this.o.peerName} is gone (IPC channel closed)`}`) : new RpcError(`${method}: cannot send: ${err.message}`));
      });
    });
  }

  /** Serves `method` to the other side: the handler's value (or promise) is the answer. One per method. */
  handle(method: string, handler: RpcHandler): void {
    if (this.handlers.has(method)) throw new Error(`rpc: a handler for ${method} exists already`);
    this.handlers.set(method, handler);
  }

  /** Sends an event (no answer, no error if the other side is gone). */
  emit(topic: string, payload?: unknown): void {
    if (this.closedReason !== null) return;
    this.channel.send({ tag: TAG, kind: 'event', topic, payload } satisfies Message, () => undefined);
  }

  /** Listens to the other side's events on `topic`; returns the unsubscribe function. */
  on(topic: string, listener: (payload: unknown) => void): () => void {
    let set = this.topics.get(topic);
    if (!set) this.topics.set(topic, (set = new Set()));
    const l = (p: unknown): void => listener(p);
    set.add(l);
    return () => set.delete(l);
  }

  /** Called once when the peer closes (the other side gone, or close()). Immediately if already closed. */
  onClose(listener: (reason: string) => void): void {
    if (this.closedReason !== null) listener(this.closedReason);
    else this.closeListeners.add(listener);
  }

  /** Stops listening; pending and later calls reject with RpcClosedError. */
  close(reason = 'the RPC peer was closed'): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    for (const d of this.detach) d();
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(new RpcClosedError(`${p.method}: ${reason}`));
    }
    for (const l of this.closeListeners) {
      try {
        l(reason);
      } catch {
        // One listener's failure does not keep the others from hearing of the close.
      }
    }
    this.closeListeners.clear();
  }

  private receive(m: unknown): void {
    if (!isMessage(m) || this.closedReason !== null) return;
    switch (m.kind) {
      case 'req':
        void this.answer(m.id, m.method, m.args);
        return;
      case 'res': {
        const p = this.pending.get(m.id);
        if (!p) return; // timed out already: the late answer is dropped
        this.pending.delete(m.id);
        clearTimeout(p.timer);
        if (m.ok) p.resolve(m.value);
        else p.reject(new RpcRemoteError(`${p.method}: ${m.error}`));
        return;
      }
      case 'event':
        for (const l of this.topics.get(m.topic) ?? []) {
          try {
            l(m.payload);
          } catch {
            // A listener's failure is its own.
          }
        }
    }
  }

  private async answer(id: number, method: string, args: readonly unknown[]): Promise<void> {
    let reply: Message;
    const handler = this.handlers.get(method);
    try {
      if (!handler) throw new Error(`no handler for "${method}"`);
      reply = { tag: TAG, kind: 'res', id, ok: true, value: await handler(...(Array.isArray(args) ? args : [])) };
    } catch (err) {
      reply = { tag: TAG, kind: 'res', id, ok: false, error: errorMessage(err) };
    }
    if (this.closedReason !== null) return;
    this.channel.send(reply, (err) => {
      // An answer JSON cannot carry becomes an error answer rather than a silent timeout.
      if (err && this.channel.connected) {
        this.channel.send({ tag: TAG, kind: 'res', id, ok: false, error: `the answer could not be sent: ${err.message}` } satisfies Message, () => undefined);
      }
    });
  }
}
