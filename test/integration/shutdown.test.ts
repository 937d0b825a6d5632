// Graceful shutdown and demo mode against real gateway processes (they get the signals), and the
// health endpoints under load (processes: the load is made here) and with every backend dead. The
// demo backends of the SIGTERM tests and the dead-backends gateway run in the test's process
// (test/support/here.ts).
import { connect } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { runCliHere } from '../cli/in-process.js';
import { startBackendsHere, startGatewayHere, stopAllHere, type BackendHere } from '../support/here.js';
import { Client, startBackends, startGateway, stop, stopAll, waitFor, writeConfig, pingPong, withTimeout } from '../support/processes.js';
import { freePortRange } from '../support/ports.js';

// Polls an async check (the harness's waitFor awaits it).
const poll = waitFor;

/** Demo backend pids started by a gateway (not tracked by the harness): killed here if still alive. */
const demoPids: number[] = [];

afterAll(async () => {
  for (const pid of demoPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  await stopAll();
  await stopAllHere();
});

// --- helpers -------------------------------------------------------------------------------

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Status and time of a GET, bounded by timeoutMs; status 0 when it failed or timed out. */
async function timedGet(url: string, timeoutMs = 1_000): Promise<{ status: number; ms: number; error?: string; backend?: string | null }> {
  const t0 = performance.now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - t0, backend: res.headers.get('x-backend-id') };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    return { status: 0, ms: performance.now() - t0, error: cause?.code ?? (err as Error).name };
  }
}

/** Result of opening a fresh TCP connection: 'connected' or the error code (ECONNREFUSED, ...). */
function tcpConnect(port: number, timeoutMs = 1_000): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      s.destroy();
      resolve('timeout');
    }, timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve('connected');
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code ?? 'error');
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

async function backendSockets(b: BackendHere): Promise<number> {
  const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(2_000) });
  return ((await res.json()) as { sockets: number }).sockets;
}



// --- SIGTERM -------------------------------------------------------------------------------

/** A grace no test here waits out: a tenth of it is the guard against a hang. */
const LONG_GRACE_MS = 120_000;

describe('SIGTERM', () => {
  let backends: BackendHere[];

  // The grace is judged by what the gateway does and logs, not by this process's clock: a grace
  // long past any guard here shows the sockets are kept while it lasts, and a short one that runs
  // out shows the sockets left are closed then (the gateway's own log times it).
  it('keeps live sockets with readiness false and the listener closed while the grace lasts, and exits 0 once the last one ends', async () => {
    backends = await startBackendsHere(['s1', 's2']);
    const gw = await startGateway({ backends, config: { shutdown: { graceMs: LONG_GRACE_MS } } });
    const rooms = ['grace-a', 'grace-b', 'grace-c'];
    const clients = rooms.map((r) => new Client(`${gw.wsUrl}/ws/live/?room=${r}`));
    await Promise.all(clients.map((c, i) => c.join(rooms[i]!)));
    const admin = `http://127.0.0.1:${gw.adminPort}`;
    expect((await timedGet(`${admin}/readyz`)).status).toBe(200);

    gw.child.kill('SIGTERM');
    await poll('readyz 503 on the admin port', 5_000, async () => (await timedGet(`${admin}/readyz`)).status === 503);
    expect((await timedGet(`${admin}/healthz`)).status).toBe(200);
    // The public listener is closed: a new connection, plain or WebSocket, is refused.
    await poll('public port to refuse connections', 5_000, async () => (await tcpConnect(gw.port)) === 'ECONNREFUSED');
    const late = new Client(`${gw.wsUrl}/ws/live/?room=grace-a`);
    await expect(withTimeout(late.opened, 5_000, 'late socket')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    // ...while the live ones still carry frames both ways, more than once during the grace.
    await Promise.all(clients.map((c) => pingPong(c)));
    await sleep(300);
    await Promise.all(clients.map((c) => pingPong(c)));
    expect(clients.map((c) => c.closeCode)).toEqual([null, null, null]);
    expect((await timedGet(`${admin}/readyz`)).status).toBe(503);

    // The last socket ending ends the grace: exit 0 long before it would have run out (the
    // guard is a hang guard, a tenth of the grace).
    for (const c of clients) c.ws.close();
    expect(await withTimeout(gw.exited, LONG_GRACE_MS / 10, 'gateway exit once the sockets ended')).toBe(0);
    expect(gw.logs().some((l) => l.msg === 'grace period over: closing remaining sockets')).toBe(false);
    await poll('backends to report 0 sockets', 5_000, async () => (await Promise.all(backends.map(backendSockets))).every((n) => n === 0));
  });

  it('closes the sockets left when graceMs runs out, and exits 0; the backends are untouched', async () => {
    const graceMs = 500;
    const gw = await startGateway({ backends, config: { shutdown: { graceMs } } });
    const rooms = ['over-a', 'over-b', 'over-c'];
    const clients = rooms.map((r) => new Client(`${gw.wsUrl}/ws/live/?room=${r}`));
    await Promise.all(clients.map((c, i) => c.join(rooms[i]!)));

    gw.child.kill('SIGTERM');
    // Guards against a hang only: when the grace ran out is read from the gateway's own log.
    await withTimeout(Promise.all(clients.map((c) => c.closed)), 15_000, 'live sockets to be closed');
    expect(await withTimeout(gw.exited, 15_000, 'gateway exit')).toBe(0);
    const logged = (msg: string): Record<string, unknown> | undefined => gw.logs().find((l) => l.msg === msg);
    const stopping = logged('stopping: readiness is now false');
    const over = logged('grace period over: closing remaining sockets');
    expect(over?.sockets).toBe(3);
    // Not before the grace ran out (Date's millisecond rounding allowed for).
    expect(Date.parse(String(over?.time)) - Date.parse(String(stopping?.time))).toBeGreaterThanOrEqual(graceMs - 1);

    // The backends are untouched: still running, their end of every socket closed.
    for (const b of backends) {
      expect((await timedGet(`${b.url}/healthz`)).status).toBe(200);
    }
    await poll('backends to report 0 sockets', 5_000, async () => (await Promise.all(backends.map(backendSockets))).every((n) => n === 0));
  });

  it('exits 0 at once when there is no live socket (an idle keep-alive connection does not hold it)', async () => {
    // A grace and a keep-alive timeout far past the guard: waiting for either fails the test.
    const gw = await startGateway({ backends, config: { shutdown: { graceMs: LONG_GRACE_MS }, listen: { keepAliveTimeoutMs: LONG_GRACE_MS } } });
    const page = await timedGet(`${gw.url}/game/quick/`); // leaves an idle keep-alive connection
    expect(page.status).toBe(200);
    gw.child.kill('SIGTERM');
    expect(await withTimeout(gw.exited, LONG_GRACE_MS / 10, 'gateway exit')).toBe(0);
  });
});

// --- demo mode -------------------------------------------------------------------------------

describe('demo mode', () => {
  it('starts 3 demo backends, routes as `roomgate where` says, and stops them all on SIGTERM', async () => {
    const basePort = await freePortRange(3);
    const configFile = writeConfig({ demo: { basePort }, listen: { port: 0 } });
    const gw = await startGateway({ args: ['--config', configFile] });
    const started = gw.logs().filter((l) => l.msg === 'demo backend started');
    expect(started.map((l) => l.backend)).toEqual(['demo-1', 'demo-2', 'demo-3']);
    const pids = started.map((l) => Number(l.backendPid));
    demoPids.push(...pids);
    expect(new Set(pids).size).toBe(3);
    expect(pids).not.toContain(gw.child.pid);
    for (const pid of pids) expect(alive(pid)).toBe(true);

    const page = await timedGet(`${gw.url}/game/lobby/`, 5_000);
    expect(page.status).toBe(200);
    const where = await runCliHere(['where', 'lobby', '--json', '--config', configFile, '--admin', `http://127.0.0.1:${gw.adminPort}`]);
    expect(where.code, where.stderr).toBe(0);
    const [row] = JSON.parse(where.stdout) as { room: string; backend: string; url: string }[];
    expect(row?.backend).toBe(page.backend);
    // The witness: a socket of the room is held by that very demo backend, on its port.
    const c = new Client(`${gw.wsUrl}/ws/live/?room=lobby`);
    expect(await c.join('lobby')).toBe(row?.backend);
    const rooms = (await (await fetch(`${row?.url}/_backend/rooms`, { signal: AbortSignal.timeout(2_000) })).json()) as { id: string; rooms: Record<string, number> };
    expect(rooms).toMatchObject({ id: row?.backend, rooms: { lobby: 1 } });
    await c.close();

    gw.child.kill('SIGTERM');
    expect(await withTimeout(gw.exited, 8_000, 'gateway exit')).toBe(0);
    await waitFor('demo backends to be gone', 3_000, () => pids.every((pid) => !alive(pid)));
    // Their ports are free again.
    for (let i = 0; i < 3; i++) expect(await tcpConnect(basePort + i)).toBe('ECONNREFUSED');
  });

  // BUG (see report): a second signal during the grace period exits at once ("second signal:
  // exiting now", exit 1) without stopping the demo backends, which keep running and keep their
  // ports, so the next `roomgate start` fails with "is its port in use?".
  it('does not leave the demo backends running when a second SIGTERM cuts the grace period short', async () => {
    const basePort = await freePortRange(3);
    const gw = await startGateway({ config: { demo: { basePort }, listen: { port: 0 } } });
    const pids = gw.logs().filter((l) => l.msg === 'demo backend started').map((l) => Number(l.backendPid));
    demoPids.push(...pids);
    expect(pids).toHaveLength(3);
    // A live socket holds the gateway in its grace period (10 s by default).
    const c = new Client(`${gw.wsUrl}/ws/live/?room=lobby`);
    await c.join('lobby');
    gw.child.kill('SIGTERM');
    await waitFor('grace period to start', 2_000, () => gw.logs().some((l) => l.msg === 'stopping: readiness is now false'));
    gw.child.kill('SIGTERM');
    expect(await withTimeout(gw.exited, 3_000, 'gateway exit')).toBe(1);
    await waitFor('demo backends to be gone', 2_000, () => pids.every((pid) => !alive(pid))).catch(() => undefined);
    expect(pids.filter(alive), 'demo backend pids still running 2 s after the gateway exited').toEqual([]);
  });
});

// --- health endpoints --------------------------------------------------------------------------

describe('/healthz and /readyz', () => {
  it('answer 200 on both ports while the gateway proxies a steady load', async () => {
    // Processes: the load below is generated in this process, and must not share its event loop
    // with the gateway it loads (nor with the backends answering it).
    const backends = await startBackends(['h1', 'h2', 'h3']);
    const gw = await startGateway({ backends });
    const admin = `http://127.0.0.1:${gw.adminPort}`;

    // 200 sockets in 100 rooms of 2: every event is broadcast back to both members.
    const clients = Array.from({ length: 200 }, (_, i) => new Client(`${gw.wsUrl}/ws/live/?room=load-${i % 100}`));
    await withTimeout(Promise.all(clients.map((c, i) => c.join(`load-${i % 100}`))), 15_000, '200 sockets to join');

    // Every probe and page is answered (probes 200): the outcome, not its time. The limit is one only a hang breaks
    // (this process's event loop stalled 2 s on a loaded 2-core machine); health latency under
    // load is measured in bench/, and the slowest answer is reported with any failure.
    const bound = 15_000;
    // The load runs in this process too: its own event-loop delay is reported with any failure.
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    let running = true;
    let pages = 0;
    const pageErrors: string[] = [];
    const events = setInterval(() => {
      for (const [i, c] of clients.entries()) c.send({ type: 'event', data: { i, t: Date.now() } });
    }, 200);
    const pageLoops = Array.from({ length: 20 }, async (_, k) => {
      while (running) {
        // `bound`, as the probes: a 5 s limit timed pages out on a loaded machine.
        const r = await timedGet(`${gw.url}/game/load-${k}/`, bound);
        if (r.status === 200) pages++;
        else pageErrors.push(`${r.status} ${r.error ?? ''}`.trim());
      }
    });
    // Health checks on a fixed beat, not one after another, so a slow answer cannot hide the next.
    const urls = [`${gw.url}/healthz`, `${gw.url}/readyz`, `${admin}/healthz`, `${admin}/readyz`];
    const checks: Promise<{ url: string; status: number; ms: number; error?: string }>[] = [];
    const beat = setInterval(() => {
      for (const url of urls) checks.push(timedGet(url, bound).then((r) => ({ url, ...r })));
    }, 100);
    // At least 2 s of load and 8 beats (32 probes): on a loaded machine this process's own loop
    // (the 200 clients) fired fewer than 8 beats in 2 s; the probes are counted, not the clock.
    await sleep(2_000);
    await waitFor('32 health probes sent under load', 30_000, () => checks.length >= 32);
    clearInterval(beat);
    const health = await Promise.all(checks);
    running = false;
    clearInterval(events);
    await Promise.all(pageLoops);
    lag.disable();

    const slowest = Math.max(...health.map((h) => h.ms));
    const context = `slowest health answer ${Math.round(slowest)} ms; this process's event-loop delay max ${Math.round(lag.max / 1e6)} ms`;
    expect(health.filter((h) => h.status !== 200), context).toEqual([]);
    // The load was real: pages kept flowing and every socket got broadcasts.
    expect(pageErrors).toEqual([]);
    expect(pages).toBeGreaterThanOrEqual(40);
    const patches = clients.map((c) => c.messages.filter((m) => m.type === 'patch').length);
    expect(Math.min(...patches)).toBeGreaterThan(0);
    expect(clients.every((c) => c.closeCode === null)).toBe(true);
    await Promise.all(clients.map((c) => c.close()));
    await stop(gw);
  });

  it('answer 200 when every backend is dead', async () => {
    const backends = await startBackendsHere(['x1', 'x2']);
    const gw = await startGatewayHere({ backends });
    // Gone: each closes every connection and its port.
    await Promise.all(backends.map((b) => b.backend.close()));
    // Let the gateway find out (the first request marks both down).
    const page = await timedGet(`${gw.url}/game/gone/`, 3_000);
    expect(page.status).toBeGreaterThanOrEqual(502);
    expect((await timedGet(`${gw.url}/game/gone/`, 3_000)).status).toBe(503);
    for (const base of [gw.url, `http://127.0.0.1:${gw.adminPort}`]) {
      const h = await timedGet(`${base}/healthz`);
      expect(h.status, `${base}/healthz`).toBe(200);
      expect(h.backend, 'answered by the gateway itself').toBeNull();
      expect((await timedGet(`${base}/readyz`)).status, `${base}/readyz`).toBe(200);
    }
  });
});
