// Active health checks against real sockets: the demo backend as a real child process (killed and
// restarted on the same port), small in-test servers for what the demo backend cannot do (500s,
// hangs, slow answers, a bare TCP listener), and child processes to prove stop() lets the
// process exit. Intervals are short; every wait has a timeout; nothing is left running.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HealthChecker, type HealthEvent, type HealthOptions, type HealthTarget } from '../../src/backends/health.js';
import { nativeProbe, socketProbe, type OpenProbe } from '../../src/backends/probe-link.js';
import { chooseRelay } from '../../src/proxy/native-relay.js';
import { BACKEND, ROOT, startBackend, stop, stopAll, waitFor, type Proc } from '../support/processes.js';

// --- helpers -------------------------------------------------------------------------------

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(stopAll);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// timeoutMs: a check that should pass must not fail on a busy machine (one timed out at 1.1 s on
// 2 loaded cores); the tests of a timeout set their own short one.
const FAST: HealthOptions = { path: '/healthz', intervalMs: 80, timeoutMs: 10_000, rise: 2, fall: 3 };

/**
 * The two ways a check's connection is opened (src/backends/probe-link.ts): the checks against
 * in-test servers run on both.
 */
const CONNECTIONS: [string, OpenProbe][] = [
  ['a Node socket', socketProbe],
  ['the native probe', nativeProbe(chooseRelay('native').addon as NonNullable<ReturnType<typeof chooseRelay>['addon']>)],
];
/** The connection checker() uses (a describe over CONNECTIONS sets it before its tests). */
let connectWith: OpenProbe = socketProbe;

interface Harness {
  checker: HealthChecker;
  events: HealthEvent[];
  /** checker.history(id) as it was when each event fired (index matches events). */
  historyAtEvent: { ok: boolean; error?: string }[][];
}

function checker(opts: Partial<HealthOptions> = {}): Harness {
  const events: HealthEvent[] = [];
  const historyAtEvent: Harness['historyAtEvent'] = [];
  const c: HealthChecker = new HealthChecker({ ...FAST, open: connectWith, ...opts }, (ev) => {
    events.push(ev);
    historyAtEvent.push([...c.history(ev.id)]);
  });
  cleanups.push(() => c.stop());
  return { checker: c, events, historyAtEvent };
}

const target = (id: string, port: number): HealthTarget => ({ id, host: '127.0.0.1', port });

/** How many results at the end of a history have this outcome. */
function trailing(history: readonly { ok: boolean }[], ok: boolean): number {
  let n = 0;
  for (let i = history.length - 1; i >= 0 && history[i]?.ok === ok; i--) n++;
  return n;
}

interface TestServer {
  port: number;
  requests: http.IncomingMessage[];
  connections: number;
  open: number;
  /** Most requests being handled at once (a request ends when its response is finished). */
  maxInflight: number;
}

/** A real HTTP server on 127.0.0.1; closed (and its sockets destroyed) after the test. */
async function httpServer(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<TestServer> {
  const s: TestServer = { port: 0, requests: [], connections: 0, open: 0, maxInflight: 0 };
  let inflight = 0;
  const server = http.createServer((req, res) => {
    s.requests.push(req);
    s.maxInflight = Math.max(s.maxInflight, ++inflight);
    res.once('close', () => inflight--);
    handler(req, res);
  });
  server.on('connection', (sock) => {
    s.connections++;
    s.open++;
    sock.once('close', () => s.open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  s.port = (server.address() as net.AddressInfo).port;
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  );
  return s;
}

/** A port nobody listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** Child processes this file spawns itself (the harness tracks only its own). */
const children = new Set<Proc>();
afterAll(async () => {
  await Promise.all([...children].map((p) => stop(p, 'SIGKILL', 5_000)));
});

function spawnNode(args: string[]): Proc {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  if (child.stdout) createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
  child.stderr?.on('data', (d: Buffer) => lines.push(String(d)));
  const proc: Proc = { child, lines, exited };
  children.add(proc);
  return proc;
}

// --- tests ---------------------------------------------------------------------------------

describe('HealthChecker against the demo backend (real process)', () => {
  it('starts up, stays up while the backend answers, and sends no event', async () => {
    const b = await startBackend('h-up');
    const h = checker();
    h.checker.setTargets([target('b', b.port)]);
    expect(h.checker.state('b')).toBe('up'); // optimistic before any check
    await waitFor('3 checks', 5_000, () => h.checker.history('b').length >= 3);
    expect(h.checker.history('b').every((r) => r.ok)).toBe(true);
    expect(h.events).toEqual([]);
    await stop(b, 'SIGKILL');
  });

  it('goes down after exactly `fall` refused checks, and back up after `rise` passes on the same port', async () => {
    const b = await startBackend('h-kill');
    const h = checker({ rise: 2, fall: 3 });
    h.checker.setTargets([target('b', b.port)]);
    await waitFor('2 passes', 5_000, () => trailing(h.checker.history('b'), true) >= 2);

    await stop(b, 'SIGKILL');
    await waitFor('down event', 5_000, () => h.events.length >= 1);
    expect(h.events[0]).toMatchObject({ id: 'b', state: 'down', reason: '3 failed checks: ECONNREFUSED' });
    // Not before: when the change fired, exactly 3 failures followed the last pass.
    const atDown = h.historyAtEvent[0] ?? [];
    expect(trailing(atDown, false)).toBe(3);
    expect(atDown[atDown.length - 4]?.ok).toBe(true);
    expect(h.checker.state('b')).toBe('down');

    // The same backend comes back on the same port.
    const again = spawnNode([BACKEND, '--port', String(b.port), '--id', 'x']);
    await waitFor('restarted backend listening', 10_000, () => again.lines.some((l) => l.includes('"listening"')));
    await waitFor('up event', 5_000, () => h.events.length >= 2);
    expect(h.events[1]).toMatchObject({ id: 'b', state: 'up', reason: '2 passed checks' });
    const atUp = h.historyAtEvent[1] ?? [];
    expect(trailing(atUp, true)).toBe(2);
    expect(atUp[atUp.length - 3]?.ok).toBe(false);

    // Each change is reported once: more passes add no events.
    await waitFor('2 more passes', 5_000, () => trailing(h.checker.history('b'), true) >= 4);
    expect(h.events.map((e) => e.state)).toEqual(['down', 'up']);
    await stop(again, 'SIGKILL');
  });
});

describe.each(CONNECTIONS)('HealthChecker HTTP checks (in-test servers), on %s', (_name, opener) => {
  beforeAll(() => void (connectWith = opener));
  it('fails on 500, passes on 3xx', async () => {
    const bad = await httpServer((_req, res) => res.writeHead(500).end('boom'));
    const redirect = await httpServer((_req, res) => res.writeHead(302, { Location: '/elsewhere' }).end());
    const h = checker({ fall: 2 });
    h.checker.setTargets([target('bad', bad.port), target('redirect', redirect.port)]);
    await waitFor('bad down', 5_000, () => h.events.length >= 1);
    expect(h.events[0]).toMatchObject({ id: 'bad', state: 'down', reason: '2 failed checks: HTTP 500' });
    await waitFor('3 redirect checks', 5_000, () => h.checker.history('redirect').length >= 3);
    expect(h.checker.history('redirect').every((r) => r.ok)).toBe(true);
    expect(h.checker.state('redirect')).toBe('up');
    expect(h.events).toHaveLength(1);
  });

  it('fails a check that hangs past timeoutMs (no answer, or a head and a stalled body) and closes its socket', async () => {
    const silent = await httpServer(() => undefined); // never answers
    const stalled = await httpServer((_req, res) => {
      res.writeHead(200, { 'Content-Length': '100' });
      res.write('partial'); // ...and never the rest
    });
    const h = checker({ timeoutMs: 150, intervalMs: 50, fall: 2 });
    h.checker.setTargets([target('silent', silent.port), target('stalled', stalled.port)]);
    await waitFor('both down', 5_000, () => h.events.length >= 2);
    for (const id of ['silent', 'stalled']) {
      expect(h.events.find((e) => e.id === id)?.reason).toBe('2 failed checks: timeout after 150 ms');
      // Timers never fire early; allow for rounding only.
      for (const r of h.checker.history(id)) expect(r.ms).toBeGreaterThanOrEqual(140);
    }
    // Neither server ever closes a connection itself: every one of them was destroyed by the checker.
    h.checker.stop();
    await waitFor('all check sockets closed', 3_000, () => silent.open === 0 && stalled.open === 0);
    expect(silent.connections).toBeGreaterThanOrEqual(2);
  });

  it('passes a slow answer within timeoutMs and never doubles a check that outlasts the interval', async () => {
    const slow = await httpServer((_req, res) => {
      setTimeout(() => res.end('ok'), 250);
    });
    const h = checker({ intervalMs: 50, timeoutMs: 10_000 });
    h.checker.setTargets([target('slow', slow.port)]);
    await waitFor('3 checks', 5_000, () => h.checker.history('slow').length >= 3);
    for (const r of h.checker.history('slow')) {
      expect(r.ok).toBe(true);
      expect(r.ms).toBeGreaterThanOrEqual(240);
    }
    expect(slow.maxInflight).toBe(1);
    expect(h.events).toEqual([]);
  });

  it('sends a fresh connection per check with Connection: close, its User-Agent and Host', async () => {
    const plain = await httpServer((_req, res) => res.end('ok'));
    const named = await httpServer((_req, res) => res.end('ok'));
    const a = checker({ path: '/health?deep=1' });
    const b = checker({ hostHeader: 'app.example.com' });
    a.checker.setTargets([target('plain', plain.port)]);
    b.checker.setTargets([target('named', named.port)]);
    await waitFor('3 requests each', 5_000, () => plain.requests.length >= 3 && named.requests.length >= 3);
    a.checker.stop();
    b.checker.stop();
    for (const req of plain.requests) {
      expect(req.method).toBe('GET');
      expect(req.url).toBe('/health?deep=1');
      expect(req.headers.host).toBe(`127.0.0.1:${plain.port}`);
      expect(req.headers.connection).toBe('close');
      expect(req.headers['user-agent']).toBe('roomgate-health');
    }
    expect(named.requests.every((r) => r.headers.host === 'app.example.com')).toBe(true);
    expect(plain.connections).toBe(plain.requests.length); // one connection per check, never reused
  });
});

describe.each(CONNECTIONS)('HealthChecker TCP checks (path null), on %s', (_name, opener) => {
  beforeAll(() => void (connectWith = opener));
  it('passes on a listening port without sending a byte, fails on a closed one', async () => {
    let connections = 0;
    let bytes = 0;
    const listener = net.createServer((sock) => {
      connections++;
      sock.on('data', (d) => (bytes += d.length));
      sock.on('error', () => undefined); // a reset from a check is not this test's concern
      sock.on('end', () => sock.end()); // the checker ends at once; answer the FIN
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => listener.close(() => r())));
    const open = (listener.address() as net.AddressInfo).port;
    const closed = await closedPort();

    const h = checker({ path: null, fall: 2 });
    h.checker.setTargets([target('open', open), target('closed', closed)]);
    await waitFor('closed down', 5_000, () => h.events.length >= 1);
    expect(h.events[0]).toMatchObject({ id: 'closed', state: 'down', reason: '2 failed checks: ECONNREFUSED' });
    await waitFor('3 open checks', 5_000, () => h.checker.history('open').length >= 3);
    expect(h.checker.history('open').every((r) => r.ok)).toBe(true);
    expect(h.checker.state('open')).toBe('up');
    expect(connections).toBeGreaterThanOrEqual(3);
    expect(bytes).toBe(0);
  });
});

describe('HealthChecker targets, passive failures and stop()', () => {
  it('setTargets checks new targets at once, stops removed ones, keeps state and counters of kept ones', async () => {
    const dead = await closedPort();
    const kept = await httpServer((_req, res) => res.end('ok'));
    const removed = await httpServer((_req, res) => res.end('ok'));
    const added = await httpServer((_req, res) => res.end('ok'));
    // A long interval: any result within a few seconds can only come from the immediate first check.
    const h = checker({ intervalMs: 20_000, rise: 1, fall: 1 });
    h.checker.setTargets([target('dead', dead), target('kept', kept.port), target('removed', removed.port)]);
    expect(['dead', 'kept', 'removed'].map((id) => h.checker.state(id))).toEqual(['up', 'up', 'up']);
    await waitFor('first checks', 5_000, () =>
      ['dead', 'kept', 'removed'].every((id) => h.checker.history(id).length === 1),
    );
    expect(h.events).toMatchObject([{ id: 'dead', state: 'down' }]);

    h.checker.setTargets([target('dead', dead), target('kept', kept.port), target('added', added.port)]);
    expect(h.checker.state('dead')).toBe('down'); // kept state
    expect(h.checker.state('added')).toBe('up');
    expect(h.checker.state('removed')).toBeUndefined();
    expect(h.checker.history('removed')).toEqual([]);
    await waitFor('added checked at once', 5_000, () => h.checker.history('added').length === 1);
    await sleep(200);
    expect(h.checker.history('dead')).toHaveLength(1); // kept targets are not re-checked by a reload
    expect(h.checker.history('kept')).toHaveLength(1);
    expect(kept.requests).toHaveLength(1);
    expect(removed.requests).toHaveLength(1);
    expect(h.events).toHaveLength(1);
  });

  it('reportFailure counts toward fall (down without waiting for checks) and schedules nothing', async () => {
    const s = await httpServer((_req, res) => res.end('ok'));
    const h = checker({ intervalMs: 20_000, fall: 3 });
    h.checker.setTargets([target('b', s.port)]);
    await waitFor('first check', 5_000, () => h.checker.history('b').length === 1);

    h.checker.reportFailure('b', 'ECONNREFUSED');
    h.checker.reportFailure('b', 'ECONNREFUSED');
    expect(h.checker.state('b')).toBe('up'); // not before fall
    h.checker.reportFailure('b', 'ECONNREFUSED');
    expect(h.checker.state('b')).toBe('down'); // at once, not one interval later
    expect(h.events).toMatchObject([{ id: 'b', state: 'down', reason: '3 failed checks: proxy: ECONNREFUSED' }]);
    expect(h.checker.history('b').slice(1)).toMatchObject([
      { ok: false, ms: 0, error: 'proxy: ECONNREFUSED' },
      { ok: false, ms: 0, error: 'proxy: ECONNREFUSED' },
      { ok: false, ms: 0, error: 'proxy: ECONNREFUSED' },
    ]);
    expect(() => h.checker.reportFailure('unknown', 'ECONNREFUSED')).not.toThrow();
    await sleep(200);
    expect(s.requests).toHaveLength(1);
  });

  it('stop() aborts in-flight checks, fires no timer and no onChange afterwards', async () => {
    const silent = await httpServer(() => undefined);
    const dead = await closedPort();
    // 'dead' fails its immediate first check and needs a second one, due ~500 ms later, to go down.
    const h = checker({ intervalMs: 500, timeoutMs: 10_000, fall: 2 });
    h.checker.setTargets([target('silent', silent.port), target('dead', dead)]);
    await waitFor('silent check in flight, dead checked once', 5_000, () => silent.open === 1 && h.checker.history('dead').length === 1);
    h.checker.stop();
    expect(h.events).toEqual([]);

    await waitFor('in-flight check aborted', 3_000, () => silent.open === 0);
    await sleep(1_200); // two intervals: without stop(), 'dead' would have gone down
    expect(h.events).toEqual([]);
    expect(silent.connections).toBe(1);
    expect(h.checker.state('dead')).toBeUndefined();
    h.checker.setTargets([target('silent', silent.port)]); // final: a late reload starts nothing
    await sleep(100);
    expect(silent.connections).toBe(1);
  });

  it.each(['a Node socket', 'the native probe'])('a process exits by itself after stop(), even with a check in flight (%s)', async (connection) => {
    const silent = await httpServer(() => undefined);
    const dist = (file: string): string => JSON.stringify(pathToFileURL(join(ROOT, 'dist/src', file)).href);
    const native = connection === 'the native probe';
    const script = (callStop: boolean): string => `
      import { HealthChecker } from ${dist('backends/health.js')};
      import { nativeProbe } from ${dist('backends/probe-link.js')};
      import { chooseRelay } from ${dist('proxy/native-relay.js')};
      const open = ${native ? "nativeProbe(chooseRelay('native').addon)" : 'undefined'};
      const c = new HealthChecker({ path: '/', intervalMs: 50, timeoutMs: 30000, rise: 1, fall: 1, open }, () => {});
      c.setTargets([{ id: 's', host: '127.0.0.1', port: ${silent.port} }]);
      setTimeout(() => { ${callStop ? 'c.stop();' : ''} console.log('done', silent()); }, 300);
      function silent() { return c.history('s').length; }`;
    const stopped = spawnNode(['--input-type=module', '-e', script(true)]);
    // Control: the same without stop() stays alive (its check's connection is open for 30 s), so
    // this test can tell a leak from a clean exit.
    const control = spawnNode(['--input-type=module', '-e', script(false)]);

    const code = await Promise.race([stopped.exited, sleep(10_000).then(() => 'still running after 10 s')]);
    expect(code, stopped.lines.join('\n')).toBe(0);
    // The check was in flight (no result yet) when stop() came.
    expect(stopped.lines).toContain('done 0');
    await waitFor('control ran', 5_000, () => control.lines.includes('done 0'));
    await sleep(1_000);
    expect(control.child.exitCode).toBeNull();
    await stop(control, 'SIGKILL');
  });

  it('rejects options that cannot work', () => {
    const noop = (): void => undefined;
    expect(() => new HealthChecker({ ...FAST, rise: 0 }, noop)).toThrow(/rise/);
    expect(() => new HealthChecker({ ...FAST, fall: 1.5 }, noop)).toThrow(/fall/);
    expect(() => new HealthChecker({ ...FAST, intervalMs: 0 }, noop)).toThrow(/intervalMs/);
    expect(() => new HealthChecker({ ...FAST, timeoutMs: -1 }, noop)).toThrow(/timeoutMs/);
  });
});
