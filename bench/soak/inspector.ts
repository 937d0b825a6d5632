/**
 * Full garbage collections of another Node process on demand, through its inspector: the soak's
 * way to read the live heap (what survives a mark-compact) instead of heap used, which between
 * two mark-compacts also counts all the garbage promoted since the last one (V8 may let that
 * grow for minutes: a 1-minute run cannot tell it from a leak).
 *
 * No flag changes what the process runs: it is started with `--inspect-port=PORT` (where the
 * inspector would listen, it does not open it), SIGUSR1 opens it (Node's default handler; the
 * gateway installs none), and HeapProfiler.collectGarbage asks V8 for a full collection.
 */
import WebSocket from 'ws';

export interface Collector {
  /** A full collection; resolves when V8 is done. */
  collect(): Promise<void>;
  /** An expression evaluated in the process (its globals: process, ...), its JSON-able value. */
  evaluate<T>(expression: string): Promise<T>;
  /** A heap snapshot (V8's .heapsnapshot JSON text); V8 collects garbage before taking it. */
  snapshot(): Promise<string>;
  close(): void;
}

/** Opens the inspector of `pid` (which listens on `port` once SIGUSR1 arrives) and connects. */
export async function openCollector(pid: number, port: number, timeoutMs = 15_000): Promise<Collector> {
  process.kill(pid, 'SIGUSR1');
  const deadline = performance.now() + timeoutMs;
  let url: string | undefined;
  while (!url) {
    try {
      const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(2_000) })).json()) as { webSocketDebuggerUrl?: string }[];
      url = list[0]?.webSocketDebuggerUrl;
    } catch {
      /* not listening yet */
    }
    if (!url) {
      if (performance.now() > deadline) throw new Error(`the inspector of process ${pid} did not open on port ${port} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let nextId = 1;
  const pending = new Map<number, (m: { result?: unknown; error?: { message: string } }) => void>();
  let chunks: string[] = [];
  ws.on('message', (data) => {
    const m = JSON.parse(String(data)) as { id?: number; method?: string; params?: { chunk?: string } };
    if (m.method === 'HeapProfiler.addHeapSnapshotChunk') chunks.push(m.params?.chunk ?? '');
    if (m.id === undefined) return;
    const cb = pending.get(m.id);
    pending.delete(m.id);
    cb?.(m as { result?: unknown });
  });
  ws.on('error', () => undefined);
  const call = (method: string, params: Record<string, unknown> = {}, ms = timeoutMs): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`no answer to ${method} within ${ms} ms`));
      }, ms);
      pending.set(id, (m) => {
        clearTimeout(timer);
        if (m.error) reject(new Error(`${method}: ${m.error.message}`));
        else resolve(m.result);
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  return {
    collect: async () => {
      await call('HeapProfiler.collectGarbage');
    },
    evaluate: async <T>(expression: string): Promise<T> => {
      const r = (await call('Runtime.evaluate', { expression, returnByValue: true })) as { result: { value: T }; exceptionDetails?: { text: string } };
      if (r.exceptionDetails) throw new Error(`evaluate ${expression}: ${r.exceptionDetails.text}`);
      return r.result.value;
    },
    snapshot: async () => {
      chunks = [];
      await call('HeapProfiler.takeHeapSnapshot', { reportProgress: false }, 10 * timeoutMs);
      const text = chunks.join('');
      chunks = [];
      return text;
    },
    close: () => ws.close(),
  };
}
