// A TCP fault injector for chaos tests: 127.0.0.1:port -> host:targetPort, byte for byte, whose
// link can be switched at runtime between
//   pass        forward as is (also `restore()`);
//   delay(ms)   every chunk held ms before it is forwarded, both directions, order kept;
//   stall       nothing forwarded either way (data, FIN or RST), connections kept open, sockets
//               not read (the senders' kernel buffers fill up); new connections are accepted and
//               connected to the target, and stall too. What a frozen peer or a congested link
//               looks like from both ends;
//   reset       every live connection gets a RST on both sides (socket.resetAndDestroy()), and so
//               does every new one right after it is accepted, while in this mode;
//   blackhole   a network partition, the hardest case: no RST, no FIN, nothing comes back. Live
//               connections stop delivering anything, as in `stall`; new connections are accepted
//               but never connected to the target, read or answered.
// What is held while stalled or black-holed (unread bytes, a FIN, a RST) is delivered in order on
// restore, as TCP delivers what it retransmitted once a partition heals; a partition that outlasts
// TCP's patience is `blackhole()` followed by `reset()`.
//
// Why a black hole cannot drop SYNs here: the kernel completes the three-way handshake of a
// listening socket by itself and user space only ever accept()s established connections, so a
// proxy in user space cannot leave a SYN unanswered (that takes a packet filter or tc netem: root
// and a network namespace). A client's connect() through a black hole therefore succeeds at once,
// as through a load balancer or NAT in front of a partition (docker-proxy, a cloud LB); what the
// client then sees is what a partition gives it: requests and probes that are never answered and a
// connection that never closes. Its connect timeout is not exercised. Likewise the proxy's kernel
// still ACKs both sides and answers their TCP keepalive probes: keepalive cannot see this.
//
// The proxy runs in a worker thread: its own event loop, so a test busy with many clients does not
// delay (or stretch the delays of) the bytes it forwards. close() destroys every connection, closes
// the listener and ends the worker; closeAllFaultProxies() does that for every proxy still open.
import { Worker } from 'node:worker_threads';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const { host, port: targetPort } = workerData;

let mode = 'pass';
let delayMs = 0;
let accepted = 0;
let resets = 0;
const links = new Set();
const holding = () => mode === 'stall' || mode === 'blackhole';

// One direction of a link: chunks (and a final 'end' or 'reset') queued with the time they are due.
class Flow {
  constructor(link) {
    this.link = link;
    this.src = null;
    this.dst = null;
    this.queue = [];
    this.lastDue = 0;
    this.timer = null;
    this.blocked = false;
  }
  push(item) {
    const now = Date.now();
    const due = Math.max(now + (mode === 'delay' ? delayMs : 0), this.lastDue);
    this.lastDue = due;
    this.queue.push({ due, item });
    this.pump();
  }
  pump() {
    clearTimeout(this.timer);
    this.timer = null;
    if (holding() || this.blocked || this.link.closed) return;
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const wait = head.due - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => this.pump(), wait);
        return;
      }
      this.queue.shift();
      if (head.item === 'end') this.dst.end();
      else if (head.item === 'reset') return this.link.reset();
      else if (!this.dst.write(head.item)) {
        // Backpressure: stop reading the source until the destination drains.
        this.blocked = true;
        this.src.pause();
        this.dst.once('drain', () => {
          this.blocked = false;
          if (!holding()) this.src.resume();
          this.pump();
        });
        return;
      }
    }
  }
}

class Link {
  constructor(client) {
    this.client = client;
    this.upstream = null;
    this.closed = false;
    this.up = new Flow(this);
    this.down = new Flow(this);
    this.up.src = client;
    this.down.dst = client;
    this.watch(client, this.up);
    links.add(this);
  }
  connect() {
    if (this.upstream || this.closed) return;
    const upstream = net.connect({ host, port: targetPort, allowHalfOpen: true });
    this.upstream = upstream;
    this.up.dst = upstream;
    this.down.src = upstream;
    if (holding()) upstream.pause();
    this.watch(upstream, this.down);
  }
  watch(socket, flow) {
    socket.on('data', (chunk) => flow.push(chunk));
    socket.on('end', () => flow.push('end'));
    // An error (the target refused, a peer reset) reaches the other side as a RST, in its turn.
    socket.on('error', () => flow.push('reset'));
    socket.on('close', () => {
      if (this.client.destroyed && (!this.upstream || this.upstream.destroyed)) this.forget();
    });
  }
  pause() {
    this.client.pause();
    this.upstream?.pause();
    for (const f of [this.up, this.down]) {
      clearTimeout(f.timer);
      f.timer = null;
    }
  }
  resume() {
    this.connect();
    for (const f of [this.up, this.down]) {
      if (!f.blocked) f.src?.resume();
      f.pump();
    }
  }
  reset() {
    if (this.closed) return;
    resets++;
    this.forget();
    for (const s of [this.client, this.upstream]) if (s && !s.destroyed) s.resetAndDestroy();
  }
  destroy() {
    this.forget();
    this.client.destroy();
    this.upstream?.destroy();
  }
  forget() {
    this.closed = true;
    links.delete(this);
    for (const f of [this.up, this.down]) clearTimeout(f.timer);
  }
}

const server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true }, (client) => {
  accepted++;
  client.on('error', () => undefined);
  if (mode === 'reset') {
    resets++;
    client.resetAndDestroy();
    return;
  }
  const link = new Link(client);
  if (mode === 'blackhole') return; // accepted, never connected, read or answered
  link.connect();
  if (!holding()) client.resume();
});

function setMode(next, ms) {
  const wasHolding = holding();
  mode = next;
  delayMs = ms ?? 0;
  if (mode === 'reset') for (const l of [...links]) l.reset();
  else if (holding()) for (const l of links) l.pause();
  else if (wasHolding) for (const l of [...links]) l.resume();
}

parentPort.on('message', ({ id, cmd, mode: next, ms }) => {
  const reply = (r) => parentPort.postMessage({ id, ...r });
  switch (cmd) {
    case 'listen':
      server.once('error', (err) => reply({ error: err.code || err.message }));
      server.listen(0, '127.0.0.1', () => reply({ port: server.address().port }));
      return;
    case 'mode':
      setMode(next, ms);
      return reply({});
    case 'stats':
      return reply({ stats: { mode, accepted, resets, live: links.size } });
    case 'close':
      for (const l of [...links]) l.destroy();
      server.close(() => reply({}));
      return;
  }
});
`;

/** How long close() waits for the worker to end. */
const TERMINATE_MS = 5_000;

export type FaultMode = 'pass' | 'delay' | 'stall' | 'reset' | 'blackhole';

export interface FaultStats {
  readonly mode: FaultMode;
  /** Connections accepted since start. */
  readonly accepted: number;
  /** Connections ended with a RST by reset(). */
  readonly resets: number;
  /** Connections open now (accepted and not closed on both sides). */
  readonly live: number;
}

const open = new Set<FaultProxy>();

/** 127.0.0.1:port -> host:targetPort through a link that tests can break; see the top of this file. */
export class FaultProxy {
  private readonly worker: Worker;
  private nextId = 0;
  private readonly pending = new Map<number, (r: { port?: number; error?: string; stats?: FaultStats }) => void>();
  private closing: Promise<void> | null = null;
  port = 0;

  private constructor(targetPort: number, host: string) {
    this.worker = new Worker(WORKER, { eval: true, workerData: { host, port: targetPort } });
    this.worker.on('message', (m: { id: number; port?: number; error?: string; stats?: FaultStats }) => {
      this.pending.get(m.id)?.(m);
      this.pending.delete(m.id);
    });
    open.add(this);
  }

  /** A proxy in `pass` mode, listening on a free port of 127.0.0.1. */
  static async start(targetPort: number, host = '127.0.0.1'): Promise<FaultProxy> {
    const p = new FaultProxy(targetPort, host);
    try {
      const r = await p.call('listen');
      if (r.error !== undefined || r.port === undefined) throw new Error(`fault proxy: listen failed: ${r.error}`);
      p.port = r.port;
      return p;
    } catch (err) {
      await p.close();
      throw err;
    }
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get redisUrl(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  private call(cmd: string, args: { mode?: FaultMode; ms?: number } = {}): Promise<{ port?: number; error?: string; stats?: FaultStats }> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`fault proxy: ${cmd} timed out`));
      }, 5_000);
      this.pending.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      this.worker.postMessage({ id, cmd, ...args });
    });
  }

  private async mode(mode: FaultMode, ms = 0): Promise<void> {
    if (this.closing) throw new Error('fault proxy: closed');
    await this.call('mode', { mode, ms });
  }

  /** Forward as is; whatever stall or blackhole held is delivered now, in order. */
  restore(): Promise<void> {
    return this.mode('pass');
  }

  /** Every chunk from now on held ms before it is forwarded, both directions. */
  delay(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new RangeError(`fault proxy: delay must be >= 0 ms, got ${ms}`);
    return this.mode('delay', ms);
  }

  stall(): Promise<void> {
    return this.mode('stall');
  }

  reset(): Promise<void> {
    return this.mode('reset');
  }

  blackhole(): Promise<void> {
    return this.mode('blackhole');
  }

  async stats(): Promise<FaultStats> {
    const r = await this.call('stats');
    if (!r.stats) throw new Error('fault proxy: no stats');
    return r.stats;
  }

  /** Destroys every connection, closes the listener, ends the worker. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      open.delete(this);
      await this.call('close').catch(() => undefined);
      // Bounded: once, a chaos run's teardown waited on terminate() past vitest's 60 s hook limit
      // and its processes were never stopped (they came after it). The worker's own close above
      // has ended its connections and listener; a worker that has not ended in 5 s is let go
      // (unref: it cannot keep the process alive) and said so.
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        this.worker.terminate().then(() => true),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(false), TERMINATE_MS))),
      ]).finally(() => clearTimeout(timer));
      if (!ended) {
        this.worker.unref();
        process.stderr.write(`fault proxy on port ${this.port}: its worker did not end within ${TERMINATE_MS} ms of terminate(); let go\n`);
      }
    })();
    return this.closing;
  }
}

/** Closes every FaultProxy still open (afterAll). */
export async function closeAllFaultProxies(): Promise<void> {
  await Promise.all([...open].map((p) => p.close()));
}
