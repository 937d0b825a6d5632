// The forwarding core in process: a real BackendPool, Placer, memory store and Router, real TCP
// connections to in-process backends (one listening, one a closed port that refuses), and an
// Exchange that connects the way every path does. What is checked is the one rule every path now
// shares: which failures mark a backend down, which are tried again and where, what the client
// gets when nothing is left, and how the attempt's accounting is settled. No sleeps: every step
// waits on the exchange's own events, with a timeout.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { Forwarder, type Exchange } from '../../src/forward/forwarder.js';
import type { Owner } from '../../src/http/ownership.js';
import type { Refusal } from '../../src/http/refusals.js';
import type { Backend } from '../../src/runtime/pool.js';
import { backendAt, Cleanup, pageRuntime, refusedPort, roomOn, type PageRuntime } from '../support/page-transports.js';

const closers: (() => Promise<void> | void)[] = [];

const cleanup = new Cleanup();

afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
  await cleanup.run();
});

/** A backend that accepts connections (and closes them: only the connection matters here). */
async function listening(): Promise<number> {
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

/** The runtime parts a gateway wires (test/support/page-transports.ts), every backend healthy by its checks. */
function runtime(backends: ResolvedBackend[]): PageRuntime {
  return pageRuntime(backends, cleanup);
}

interface Outcome {
  /** Backends tried, in order. */
  readonly tried: string[];
  readonly refusal: Refusal | null;
  readonly counted: boolean | null;
  /** What each attempt's accounting was settled with. */
  readonly settled: (number | null)[];
}

/**
 * An exchange whose attempts connect to the backend for real. `failWith` turns a successful
 * connection into the given failure (a reset or a timeout of an answer), as a path would report it.
 */
class TestExchange implements Exchange {
  readonly path = 'page';
  readonly source = 'query';
  client = true;
  freshConnection?: boolean;
  readonly tried: string[] = [];
  readonly settled: (number | null)[] = [];
  private finish!: (o: Outcome) => void;
  readonly done = new Promise<Outcome>((resolve) => (this.finish = resolve));

  constructor(
    private readonly forwarder: Forwarder,
    readonly room: string | null,
    private readonly opts: { resendable?: boolean; afterReset?: boolean; failWith?: (tryNumber: number) => NodeJS.ErrnoException | null } = {},
  ) {}

  gone(): boolean {
    return !this.client;
  }

  send(b: Backend, _owner: Owner | null, attempt: number): void {
    this.tried.push(b.id);
    const socket = net.connect(b.config.port, b.config.host);
    const done = (status: number | null): void => void this.settled.push(status);
    socket.once('connect', () => {
      this.forwarder.connected(b);
      socket.destroy();
      const err = this.opts.failWith?.(this.tried.length) ?? null;
      if (err === null) return this.finish(this.outcome(null, null));
      this.forwarder.failed(this, { backend: b, attempt, err, resendable: this.opts.resendable, afterReset: this.afterReset(), done });
      if (this.gone()) this.finish(this.outcome(null, null));
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      this.forwarder.failed(this, { backend: b, attempt, err, resendable: this.opts.resendable, afterReset: this.afterReset(), done });
      if (this.gone()) this.finish(this.outcome(null, null));
    });
  }

  /** A new connection (the core asked for one) is never a reused one. */
  private afterReset(): boolean | undefined {
    return this.freshConnection === true ? false : this.opts.afterReset;
  }

  refuse(refusal: Refusal, counted: boolean): void {
    this.finish(this.outcome(refusal, counted));
  }

  private outcome(refusal: Refusal | null, counted: boolean | null): Outcome {
    return { tried: [...this.tried], refusal, counted, settled: [...this.settled] };
  }
}

function within<T>(p: Promise<T>, ms = 5_000): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no outcome within ${ms} ms`)), ms).unref())]);
}

const errorCode = (code: string): NodeJS.ErrnoException => Object.assign(new Error(code), { code });

describe('the forwarding core', () => {
  it('a refused connection marks its backend down and the attempt goes to the next decision', async () => {
    const [dead, live] = [await refusedPort(), await listening()];
    const rt = runtime([backendAt('dead', dead), backendAt('live', live)]);
    const room = await roomOn(rt.router, 'dead');
    const x = new TestExchange(rt.forwarder, room);
    rt.forwarder.route(x);
    const out = await within(x.done);
    expect(out.tried).toEqual(['dead', 'live']);
    expect(out.refusal).toBeNull();
    // The retried attempt is settled without a status: the request is counted once, by its answer.
    expect(out.settled).toEqual([null]);
    expect(rt.pool.get('dead')?.routable(Date.now())).toBe(false);
    expect(rt.pool.get('dead')?.unavailableReason(Date.now())).toContain('failed a connection (refused)');
    expect((await rt.metrics.proxyErrors.get()).values).toContainEqual(expect.objectContaining({ labels: { backend: 'dead', kind: 'refused' }, value: 1 }));
  });

  it('when every backend refuses: each tried once, then 502 with Retry-After, counted by the last attempt', async () => {
    const rt = runtime([backendAt('a', await refusedPort()), backendAt('b', await refusedPort())]);
    const x = new TestExchange(rt.forwarder, 'room-1');
    rt.forwarder.route(x);
    const out = await within(x.done);
    expect([...out.tried].sort()).toEqual(['a', 'b']);
    // Both down now: the third decision finds no backend, and says so.
    expect(out.refusal?.code).toBe('no-backend');
    expect(out.counted).toBe(false);
    expect(out.settled).toEqual([null, null]);
  });

  it('a body that cannot be sent again is not retried after a refused connection: 502, the backend still marked down', async () => {
    const [dead, live] = [await refusedPort(), await listening()];
    const rt = runtime([backendAt('dead', dead), backendAt('live', live)]);
    const room = await roomOn(rt.router, 'dead');
    const x = new TestExchange(rt.forwarder, room, { resendable: false });
    rt.forwarder.route(x);
    const out = await within(x.done);
    expect(out.tried).toEqual(['dead']);
    expect(out.refusal).toMatchObject({ code: 'backend-unavailable', backend: 'dead', retryAfterS: 1 });
    expect(out.counted).toBe(true);
    expect(out.settled).toEqual([502]);
    expect(rt.pool.get('dead')?.routable(Date.now())).toBe(false);
  });

  it('a reset of a reused connection is retried only when the request may be sent twice, and marks nothing down', async () => {
    const live = await listening();
    for (const afterReset of [true, false]) {
      const rt = runtime([backendAt('live', live)]);
      const x = new TestExchange(rt.forwarder, 'room-1', { afterReset, failWith: (n) => (n === 1 ? errorCode('ECONNRESET') : null) });
      rt.forwarder.route(x);
      const out = await within(x.done);
      expect(out.tried).toEqual(afterReset ? ['live', 'live'] : ['live']);
      expect(out.refusal === null).toBe(afterReset);
      if (!afterReset) expect(out.refusal?.code).toBe('backend-unavailable');
      expect(rt.pool.get('live')?.routable(Date.now())).toBe(true);
    }
  });

  it('a reused connection reset under the request: tried once more, on a new connection, whatever the number of backends', async () => {
    const live = await listening();
    const rt = runtime([backendAt('live', live)]);
    const x = new TestExchange(rt.forwarder, 'room-1', { afterReset: true, failWith: () => errorCode('ECONNRESET') });
    rt.forwarder.route(x);
    const out = await within(x.done);
    // The retry asked for a new connection; reset on that one too, it is the backend's answer: 502.
    expect(x.freshConnection).toBe(true);
    expect(out.tried).toEqual(['live', 'live']);
    expect(out.refusal?.code).toBe('backend-unavailable');
    expect(out.settled).toEqual([null, 502]);
  });

  it('a backend that does not answer in time: 504, nothing retried', async () => {
    const rt = runtime([backendAt('live', await listening())]);
    const x = new TestExchange(rt.forwarder, 'room-1', { failWith: () => errorCode('ERESPONSETIMEOUT') });
    rt.forwarder.route(x);
    const out = await within(x.done);
    expect(out.tried).toEqual(['live']);
    expect(out.refusal?.code).toBe('backend-timeout');
    expect(out.settled).toEqual([504]);
  });

  it('a client that left is not answered nor retried; its attempt is settled without a status', async () => {
    const [dead, live] = [await refusedPort(), await listening()];
    const rt = runtime([backendAt('dead', dead), backendAt('live', live)]);
    const room = await roomOn(rt.router, 'dead');
    const x = new TestExchange(rt.forwarder, room);
    x.client = false;
    // The exchange is gone before the first attempt: dispatch sends nothing at all.
    rt.forwarder.dispatch(x, await rt.router.decide(room, Date.now()), 1);
    expect(x.tried).toEqual([]);
    // Gone during an attempt: the failure is still seen by the pool, nothing else happens.
    x.client = true;
    const y = new TestExchange(rt.forwarder, room);
    y.send = function (b: Backend, owner: Owner | null, attempt: number): void {
      y.client = false;
      TestExchange.prototype.send.call(y, b, owner, attempt);
    };
    rt.forwarder.route(y);
    const out = await within(y.done);
    expect(out.tried).toEqual(['dead']);
    expect(out.refusal).toBeNull();
    expect(out.settled).toEqual([null]);
    expect(rt.pool.get('dead')?.routable(Date.now())).toBe(false);
  });

  it('a connection made marks a passively-down backend up again', async () => {
    const rt = runtime([backendAt('live', await listening())]);
    rt.pool.markDown('live', Date.now(), 'refused');
    expect(rt.pool.get('live')?.routable(Date.now())).toBe(false);
    rt.forwarder.connected(rt.pool.get('live') as Backend);
    expect(rt.pool.get('live')?.routable(Date.now())).toBe(true);
  });

  it('an answer that cannot be relayed: 502 counted by the attempt, the backend stays routable', async () => {
    const rt = runtime([backendAt('live', await listening())]);
    const x = new TestExchange(rt.forwarder, 'room-1');
    const settled: number[] = [];
    rt.forwarder.badAnswer(x, rt.pool.get('live') as Backend, 'a 101 to a request without Upgrade', (s) => settled.push(s));
    const out = await within(x.done);
    expect(out.refusal).toMatchObject({ code: 'bad-backend-answer', backend: 'live' });
    expect(out.counted).toBe(true);
    expect(settled).toEqual([502]);
    expect(rt.pool.get('live')?.routable(Date.now())).toBe(true);
  });

  it('no room key where one is needed, and no backend at all: the placement refusals, not counted by any attempt', async () => {
    const rt = runtime([]);
    const x = new TestExchange(rt.forwarder, 'room-1');
    rt.forwarder.route(x);
    const out = await within(x.done);
    expect(out.tried).toEqual([]);
    expect(out.refusal?.code).toBe('no-backend');
    expect(out.counted).toBe(false);
  });
});
