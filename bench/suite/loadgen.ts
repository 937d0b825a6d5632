/**
 * The load generator: a child process (pinned with the backends) that holds WebSocket clients and
 * answers the orchestrator over IPC. Several can run side by side when one process may not hold
 * all the sockets (open-files limit); the orchestrator merges their answers.
 *
 * Commands (each answered with {id, ok, ...} or {id, ok: false, error}):
 *   open {clients, concurrency, mode, pingMs, timeoutMs}
 *        opens every client (at most `concurrency` handshakes in flight) and answers when all are
 *        done: opened, failed, the time to open of each (histogram), and (room, backend) pairs
 *        from the welcome frames. mode `game`: a client is done at its welcome frame and then
 *        sends a 60-byte input every 400 ms (random phase); `idle`: done at its welcome, then a
 *        ping every pingMs (random phase); `burst`: done at its 101 (time to open = handshake).
 *   window-start / window-end
 *        counts frames, latencies (now - send time in the frame), inputs, pongs and unexpected
 *        closes between the two.
 *   close
 *        closes every socket.
 * Exits when the IPC channel closes.
 */
import { INPUT_BYTES, INPUT_EVERY_MS, broadcastTs, browserHeaders, padTo, parseWelcome, wallMs } from './protocol.js';
import { Histogram, type HistogramData } from './stats.js';
import { serveIpc } from './ipc-child.js';
import { Ticker } from './ticker.js';
import { WsClient } from './wsclient.js';

export interface ClientSpec {
  readonly port: number;
  /** /ws/live/ with the query, if any. */
  readonly path: string;
  readonly origin: string;
  readonly cookie: string;
  /** wss to the proxy. */
  readonly tls?: boolean;
}

export type Mode = 'game' | 'idle' | 'burst';

export type Command =
  | { cmd: 'open'; id: number; clients: ClientSpec[]; concurrency: number; mode: Mode; pingMs: number; timeoutMs: number }
  | { cmd: 'window-start'; id: number }
  | { cmd: 'window-end'; id: number }
  | { cmd: 'close'; id: number };

export interface OpenResult {
  opened: number;
  failed: number;
  errors: string[];
  elapsedMs: number;
  openHist: HistogramData;
  /** [room, backend] for each socket whose welcome frame came. */
  welcome: [string, string][];
}

export interface WindowResult {
  elapsedMs: number;
  frames: number;
  inputs: number;
  pongs: number;
  closed: number;
  /** Sockets open at the end of the window. */
  alive: number;
  latency: HistogramData;
}

interface Client {
  readonly ws: WsClient;
  inputSeq: number;
}

const clients = new Set<Client>();
const latency = new Histogram();
let counting = false;
let windowStart = 0;
let frames = 0;
let inputs = 0;
let pongs = 0;
let closedUnexpectedly = 0;
let closing = false;

const inputs400 = new Ticker<Client>(INPUT_EVERY_MS, (c) => {
  if (!c.ws.isOpen) return;
  c.inputSeq++;
  c.ws.sendText(padTo(`{"type":"event","event":"move","seq":${c.inputSeq},"data":{"x":1}}`, INPUT_BYTES));
  if (counting) inputs++;
});
let pinger: Ticker<Client> | undefined;

function openOne(spec: ClientSpec, mode: Mode, timeoutMs: number, hist: Histogram, welcome: [string, string][]): Promise<void> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const ws = new WsClient({ host: '127.0.0.1', port: spec.port, path: spec.path, headers: browserHeaders(spec.origin, spec.cookie), timeoutMs, tls: spec.tls === true });
    const client: Client = { ws, inputSeq: 0 };
    let settled = false;
    const timer = setTimeout(() => fail(new Error(`no welcome frame within ${timeoutMs} ms`)), timeoutMs);
    const done = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      hist.record(performance.now() - t0);
      clients.add(client);
      resolve();
    };
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.terminate();
      reject(err);
    };
    ws.onMessage = (data) => {
      if (data[0] === 0x42 /* B */) {
        if (counting) {
          frames++;
          latency.record(wallMs() - broadcastTs(data));
        }
        return;
      }
      const w = parseWelcome(data);
      if (!w) return;
      welcome.push([w[1], w[0]]);
      if (mode === 'game') {
        inputs400.add(client, Math.random());
        done();
      } else if (mode === 'idle') {
        pinger?.add(client, Math.random());
        done();
      }
    };
    ws.onPong = () => {
      if (counting) pongs++;
    };
    ws.onOpen = () => {
      if (mode === 'burst') done();
    };
    ws.onClose = (err) => {
      inputs400.delete(client);
      pinger?.delete(client);
      if (clients.delete(client) && !closing && counting) closedUnexpectedly++;
      fail(err ?? new Error('closed before open'));
    };
  });
}

async function open(c: Extract<Command, { cmd: 'open' }>): Promise<OpenResult> {
  closing = false;
  if (c.mode === 'idle') pinger ??= new Ticker<Client>(c.pingMs, (cl) => cl.ws.ping());
  const hist = new Histogram();
  const welcome: [string, string][] = [];
  const errors = new Map<string, number>();
  let next = 0;
  let opened = 0;
  let failed = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= c.clients.length) return;
      try {
        await openOne(c.clients[i]!, c.mode, c.timeoutMs, hist, welcome);
        opened++;
      } catch (err) {
        failed++;
        const msg = (err as Error).message;
        errors.set(msg, (errors.get(msg) ?? 0) + 1);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(c.concurrency, c.clients.length) }, () => worker()));
  const elapsedMs = performance.now() - t0;
  return { opened, failed, errors: [...errors].map(([m, n]) => `${n} x ${m}`).slice(0, 5), elapsedMs, openHist: hist.toJSON(), welcome };
}

async function closeAll(): Promise<void> {
  closing = true;
  counting = false;
  const all = [...clients];
  clients.clear();
  for (const c of all) c.ws.terminate();
  inputs400.clear();
  pinger?.clear();
  pinger = undefined;
}

async function handle(c: Command): Promise<unknown> {
  switch (c.cmd) {
    case 'open':
      return open(c);
    case 'window-start':
      latency.reset();
      frames = inputs = pongs = closedUnexpectedly = 0;
      counting = true;
      windowStart = performance.now();
      return {};
    case 'window-end': {
      counting = false;
      const r: WindowResult = { elapsedMs: performance.now() - windowStart, frames, inputs, pongs, closed: closedUnexpectedly, alive: clients.size, latency: latency.toJSON() };
      return r;
    }
    case 'close':
      await closeAll();
      return {};
  }
}

serveIpc<Command>(handle);
