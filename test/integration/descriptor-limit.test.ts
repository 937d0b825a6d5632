// The whole process at its descriptor limit (issue 26 item 5): a gateway (child process) whose
// open-file limit is lowered under it with prlimit(1), then more connections than it can accept:
// the process must not end, and once the connections are gone it answers again. With the derived limit (listen.maxConnections
// 0) the same flood never reaches EMFILE: the connections over the limit are closed and counted,
// and the admin port answers all along.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { httpRequest, metricValue, startGateway, stop, stopAll, waitFor, type GatewayProc } from '../support/processes.js';

const opened: net.Socket[] = [];

afterEach(() => {
  for (const s of opened.splice(0)) s.destroy();
});
afterAll(async () => {
  await stopAll();
});

/** Lowers the running process's soft and hard open-file limit. */
function prlimit(pid: number, n: number): void {
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${n}:${n}`], { timeout: 5_000 });
}

/** n connections, each resolved once connected or failed (the kernel accepts before the app does). */
async function connectMany(port: number, n: number): Promise<void> {
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) => {
          const s = net.connect({ port, host: '127.0.0.1' }, () => resolve());
          s.on('error', () => resolve());
          opened.push(s);
        }),
    ),
  );
}

const alive = (gw: GatewayProc): boolean => gw.child.exitCode === null && gw.child.signalCode === null;

describe('the gateway at its open-file limit', () => {
  it('an explicit limit above the descriptors: the process runs out of them and lives; it answers again once the connections are gone', async () => {
    const gw = await startGateway({ backends: ['b1=http://127.0.0.1:9'], config: { health: { intervalMs: 60_000 }, listen: { maxConnections: 100_000 } } });
    const pid = gw.child.pid!;
    prlimit(pid, 64);
    await connectMany(gw.port, 120);
    // At the limit: (libuv closes what it cannot accept, and emits the rare accept error it cannot
    // handle on the server, where roomgate's listener logs it: the unit test covers that.)
    await waitFor('the descriptors used up', 10_000, () => (readdirSync(`/proc/${pid}/fd`).length >= 62 ? true : undefined));
    await expect(httpRequest(gw.port, '/healthz', { timeoutMs: 1_000 })).rejects.toThrow();
    expect(alive(gw)).toBe(true);
    for (const s of opened.splice(0)) s.destroy();
    await waitFor('/healthz answered again', 10_000, async () => ((await httpRequest(gw.port, '/healthz').catch(() => null))?.status === 200 ? true : undefined));
    expect(alive(gw)).toBe(true);
    await stop(gw);
  });

  it('the derived limit keeps the reserve: connections over it are closed and counted, the admin port answers throughout', async () => {
    // Derived from this process's limit at start (here a large one), so the limit is set low enough
    // for the test by descriptorReserve: (limit - reserve) / 2 = 40 connections.
    const probe = await startGateway({ backends: ['b1=http://127.0.0.1:9'], config: { health: { intervalMs: 60_000 } } });
    const { descriptors } = probe.logs().find((l) => l.msg === 'listening') as { descriptors: number };
    await stop(probe);
    const gw = await startGateway({ backends: ['b1=http://127.0.0.1:9'], config: { health: { intervalMs: 60_000 }, listen: { descriptorReserve: descriptors - 80 } } });
    expect(gw.logs().find((l) => l.msg === 'listening')).toMatchObject({ maxConnections: 40, descriptors });
    await connectMany(gw.port, 100);
    await waitFor('60 refused', 10_000, async () => ((await metricValue(gw, 'roomgate_connections_refused_total', { listener: 'public', reason: 'limit' })) >= 60 ? true : undefined));
    expect((await httpRequest(gw.adminPort, '/healthz')).status).toBe(200);
    expect((await httpRequest(gw.adminPort, '/readyz')).status).toBe(200);
    expect(gw.logs().some((l) => l.msg === 'listener error (accepting connections continues)')).toBe(false);
    expect(alive(gw)).toBe(true);
    await stop(gw);
  });
});
