/**
 * The orchestrator's side of the load generator: starts N loadgen.js processes (pinned to the
 * load core), splits a workload's clients between them, and merges their answers. The IPC worker
 * (a child answering {id, ok, ...} to each command) is shared with the soak's clients (bench/soak).
 */
import { join } from 'node:path';
import type { ClientSpec, Command, Mode, OpenResult, WindowResult } from './loadgen.js';
import { startProc, stopProc, type Proc } from './procs.js';
import { Histogram } from './stats.js';

const LOADGEN = join(import.meta.dirname, 'loadgen.js');

/** A command without its id (distributes over the union). */
export type Body<T> = T extends unknown ? Omit<T, 'id'> : never;

interface Reply {
  id: number;
  ok: boolean;
  error?: string;
  [k: string]: unknown;
}

/** A child process that answers each IPC command {id, ...} with {id, ok, ...}, and {id: 0} once ready. */
export class IpcWorker<C extends { id: number }> {
  private nextId = 1;
  private readonly pending = new Map<number, (r: Reply) => void>();
  readonly ready: Promise<void>;

  constructor(readonly proc: Proc) {
    let onReady: () => void = () => undefined;
    this.ready = new Promise((resolve) => (onReady = resolve));
    proc.child.on('message', (m: Reply) => {
      if (m.id === 0) return onReady();
      const cb = this.pending.get(m.id);
      this.pending.delete(m.id);
      cb?.(m);
    });
    void proc.exited.then(() => {
      for (const cb of this.pending.values()) cb({ id: -1, ok: false, error: `load generator exited:\n  ${proc.output.slice(-10).join('\n  ')}` });
      this.pending.clear();
    });
  }

  call<T>(c: Body<C>): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, (r) => (r.ok ? resolve(r as unknown as T) : reject(new Error(r.error ?? 'load generator error'))));
      this.proc.child.send({ ...c, id });
    });
  }
}

/** Starts `n` copies of the Node script `script` on `cpu` and waits (15 s at most) until each is ready. */
export async function startIpcWorkers<C extends { id: number }>(name: string, script: string, n: number, cpu: string): Promise<IpcWorker<C>[]> {
  const workers = Array.from({ length: n }, (_, i) => new IpcWorker<C>(startProc(`${name} ${i + 1}`, process.execPath, [script], { cpu, ipc: true })));
  await Promise.all(
    workers.map((w) =>
      Promise.race([
        w.ready,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${w.proc.name} did not start:\n  ${w.proc.output.join('\n  ')}`)), 15_000)),
      ]),
    ),
  );
  return workers;
}

export class LoadGen {
  private constructor(private readonly workers: IpcWorker<Command>[]) {}

  /** Starts `n` load generator processes on `cpu`. */
  static async start(n: number, cpu: string): Promise<LoadGen> {
    return new LoadGen(await startIpcWorkers<Command>('loadgen', LOADGEN, n, cpu));
  }

  get size(): number {
    return this.workers.length;
  }

  get pids(): number[] {
    return this.workers.map((w) => w.proc.pid);
  }

  /**
   * Opens `clients` spread over the workers in contiguous slices (callers list a room's clients
   * together, so a room stays in one process unless the slices must cut it).
   */
  async open(clients: ClientSpec[], o: { concurrency: number; mode: Mode; pingMs?: number; timeoutMs?: number }): Promise<OpenResult> {
    const n = Math.min(this.workers.length, Math.max(1, clients.length));
    const per = Math.ceil(clients.length / n);
    const conc = Math.max(1, Math.ceil(o.concurrency / n));
    const parts = await Promise.all(
      this.workers.slice(0, n).map((w, i) =>
        w.call<OpenResult>({
          cmd: 'open',
          clients: clients.slice(i * per, (i + 1) * per),
          concurrency: conc,
          mode: o.mode,
          pingMs: o.pingMs ?? 30_000,
          timeoutMs: o.timeoutMs ?? 20_000,
        }),
      ),
    );
    const hist = new Histogram();
    for (const p of parts) hist.merge(p.openHist);
    return {
      opened: parts.reduce((s, p) => s + p.opened, 0),
      failed: parts.reduce((s, p) => s + p.failed, 0),
      errors: parts.flatMap((p) => p.errors),
      elapsedMs: Math.max(...parts.map((p) => p.elapsedMs)),
      openHist: hist.toJSON(),
      welcome: parts.flatMap((p) => p.welcome),
    };
  }

  async windowStart(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.call({ cmd: 'window-start' })));
  }

  async windowEnd(): Promise<WindowResult & { hist: Histogram }> {
    const parts = await Promise.all(this.workers.map((w) => w.call<WindowResult>({ cmd: 'window-end' })));
    const hist = new Histogram();
    for (const p of parts) hist.merge(p.latency);
    return {
      elapsedMs: Math.max(...parts.map((p) => p.elapsedMs)),
      frames: parts.reduce((s, p) => s + p.frames, 0),
      inputs: parts.reduce((s, p) => s + p.inputs, 0),
      pongs: parts.reduce((s, p) => s + p.pongs, 0),
      closed: parts.reduce((s, p) => s + p.closed, 0),
      alive: parts.reduce((s, p) => s + p.alive, 0),
      latency: hist.toJSON(),
      hist,
    };
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.call({ cmd: 'close' })));
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => stopProc(w.proc, 2_000)));
  }
}
