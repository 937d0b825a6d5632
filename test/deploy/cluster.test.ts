// `npm run demo:cluster` end to end: its entry (dist/src/demo/cluster.js) with free ports starts
// Redis, three demo backends and two gateways; a room opened through gateway A and through
// gateway B reaches one backend, and presence/lobby on either gateway count the sockets of both.
// SIGTERM stops everything: no child process is left. Failures to start (no redis-server, a port
// in use) exit with a clear message and leave nothing behind either. Every wait has a timeout.
//
// Leftovers are found two ways: the pids the cluster reports, and (Linux) any process whose
// environment carries this run's marker variable, which every descendant inherits.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { LobbyPage, LobbyRoom, Online } from '../../src/shared-data/store.js';
import { Client, ROOT, stopAll, waitFor, withTimeout } from '../support/processes.js';

const ENTRY = join(ROOT, 'dist/src/demo/cluster.js');
const FREE_PORTS = ['--port', '0', '--port-b', '0', '--admin-port', '0', '--admin-port-b', '0', '--backend-port', '0', '--redis-port', '0'];
const API = '/_roomgate/api';

interface Ready {
  event: 'ready';
  redis: { url: string; pid: number | null };
  backends: { id: string; url: string; pid: number }[];
  gateways: { name: string; url: string; adminUrl: string; port: number; adminPort: number; pid: number }[];
  pids: number[];
}

interface Run {
  child: ChildProcess;
  marker: string;
  stdout: string[];
  stderr: string[];
  exited: Promise<number | string>;
}

const runs: Run[] = [];

function run(args: string[], env: NodeJS.ProcessEnv = process.env): Run {
  const marker = randomBytes(8).toString('hex');
  const child = spawn(process.execPath, [ENTRY, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, ROOMGATE_DEMO_TEST_MARKER: marker } });
  const r: Run = {
    child,
    marker,
    stdout: [],
    stderr: [],
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'))),
  };
  createInterface({ input: child.stdout! }).on('line', (l) => r.stdout.push(l));
  createInterface({ input: child.stderr! }).on('line', (l) => r.stderr.push(l));
  runs.push(r);
  return r;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Pids of live processes whose environment carries the marker (Linux /proc; [] elsewhere). */
function marked(marker: string): number[] {
  if (!existsSync('/proc/self/environ')) return [];
  const needle = `ROOMGATE_DEMO_TEST_MARKER=${marker}`;
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(needle)) out.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return out;
}

/** Direct children of pid (Linux /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Nothing of this run is alive: not the cluster, not a reported pid, not a marked process. */
async function expectNothingLeft(r: Run, pids: readonly number[] = []): Promise<void> {
  await withTimeout(r.exited, 30_000, 'demo:cluster exit');
  await waitFor('every child of demo:cluster gone', 5_000, () => pids.every((p) => !alive(p)) && marked(r.marker).length === 0).catch(() => undefined);
  expect(pids.filter(alive), 'reported pids still alive').toEqual([]);
  expect(marked(r.marker), 'processes with the run marker still alive').toEqual([]);
}

async function getJson<T>(url: string): Promise<{ status: number; body: T }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: (await res.json()) as T };
}

afterEach(() => {
  // A failed test must not leave its cluster behind: kill the process group of every child too.
  for (const r of runs) {
    if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    for (const pid of marked(r.marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
});

afterAll(async () => {
  await stopAll(); // the WebSocket clients
  await Promise.all(runs.map((r) => withTimeout(r.exited, 10_000, 'cluster exit').catch(() => undefined)));
});

describe('npm run demo:cluster', () => {
  it('is an npm script running the compiled entry', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['demo:cluster']).toMatch(/node dist\/src\/demo\/cluster\.js/);
    expect(existsSync(ENTRY), `${ENTRY} (run npm run build first)`).toBe(true);
  });

  it('runs Redis, three backends and two gateways; one room through A and B reaches one backend; presence and lobby count both; SIGTERM leaves nothing', async () => {
    const r = run([...FREE_PORTS, '--json']);
    const line = await Promise.race([
      waitFor('the ready line', 30_000, () => r.stdout.find((l) => l.includes('"event":"ready"'))),
      r.exited.then((code) => {
        throw new Error(`demo:cluster exited (${code}):\n${r.stderr.join('\n')}`);
      }),
    ]);
    const ready = JSON.parse(line) as Ready;
    expect(ready.backends.map((b) => b.id)).toEqual(['b1', 'b2', 'b3']);
    expect(ready.gateways.map((g) => g.name)).toEqual(['a', 'b']);
    expect(ready.redis.pid).toBeGreaterThan(0);
    expect(new Set(ready.pids).size).toBe(6);
    // The banner names the URLs to open.
    expect(r.stderr.join('\n')).toContain(`http://localhost:${ready.gateways[0]!.port}/game/chess/`);
    expect(r.stderr.join('\n')).toContain(`http://localhost:${ready.gateways[1]!.port}/game/chess/`);
    expect(r.stderr.join('\n')).toContain(`http://localhost:${ready.gateways[0]!.port}/_roomgate/lobby `);
    // Every process the cluster started is one it reports (Linux: its direct children).
    if (existsSync('/proc/self/stat')) expect(childrenOf(r.child.pid!).sort()).toEqual([...ready.pids].sort());

    const [a, b] = ready.gateways as [Ready['gateways'][number], Ready['gateways'][number]];
    const ws = (g: typeof a): string => g.url.replace(/^http/, 'ws');
    const room = `deploy-${randomBytes(3).toString('hex')}`;

    // A page through B names the backend; sockets through A and B land on that same backend.
    const page = await fetch(`${b.url}/game/${room}/`, { signal: AbortSignal.timeout(5_000) });
    expect(page.status).toBe(200);
    const servedBy = /Served by backend <strong>([^<]+)<\/strong>/.exec(await page.text())?.[1];
    const viaA = new Client(`${ws(a)}/ws/live/?room=${room}`);
    const backendA = await viaA.join(room);
    const viaB = new Client(`${ws(b)}/ws/live/?room=${room}`);
    const backendB = await viaB.join(room);
    expect(backendB).toBe(backendA);
    expect(servedBy).toBe(backendA);
    // The backend itself sees both sockets in one room (the two gateways did not split it).
    const mounted = viaB.messages.find((m) => m.type === 'mounted');
    expect(mounted?.members).toBe(2);
    const backendUrl = ready.backends.find((x) => x.id === backendA)!.url;
    const rooms = await getJson<{ rooms: Record<string, number> }>(`${backendUrl}/_backend/rooms`);
    expect(rooms.body.rooms[room]).toBe(2);

    // Presence and lobby, asked of either gateway, count the socket held by each (through Redis).
    for (const g of [a, b]) {
      const one = await waitFor(`room ${room} with 2 sockets on gateway ${g.name}`, 10_000, async () => {
        const res = await getJson<LobbyRoom>(`${g.url}${API}/rooms/${room}`);
        return res.status === 200 && res.body.sockets === 2 ? res.body : undefined;
      });
      // The public reads: listed (the cluster demo lists every room), no backend id.
      expect(one).not.toHaveProperty('backend');
      const lobby = await getJson<LobbyPage>(`${g.url}${API}/lobby?prefix=${room}`);
      expect(lobby.body.rooms.map((x) => [x.room, x.sockets])).toEqual([[room, 2]]);
      const online = await getJson<Online>(`${g.url}${API}/online`);
      expect(online.body.total).toBeGreaterThanOrEqual(2);
      // The operator's view on the admin port has the backend.
      const full = await getJson<LobbyPage>(`${g.adminUrl}/lobby?prefix=${room}`);
      expect(full.body.rooms.map((x) => [x.room, x.sockets, x.backend])).toEqual([[room, 2, backendA]]);
      // The lobby page the banner prints.
      const page = await fetch(`${g.url}/_roomgate/lobby`, { signal: AbortSignal.timeout(5_000) });
      expect(page.status).toBe(200);
      await page.arrayBuffer();
    }

    await Promise.all([withTimeout(viaA.close(), 5_000, 'close A'), withTimeout(viaB.close(), 5_000, 'close B')]);
    r.child.kill('SIGTERM');
    expect(await withTimeout(r.exited, 30_000, 'demo:cluster exit after SIGTERM')).toBe(0);
    await expectNothingLeft(r, ready.pids);
    // The gateways' ports are free again.
    await expect(fetch(`${a.url}/healthz`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
  });

  it('says how to install redis-server when it is missing, and exits 2 with nothing started', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: '/nonexistent' };
    delete env.REDIS_SERVER;
    const r = run(FREE_PORTS, env);
    expect(await withTimeout(r.exited, 15_000, 'demo:cluster exit')).toBe(2);
    const err = r.stderr.join('\n');
    expect(err).toMatch(/redis-server not found/);
    expect(err).toMatch(/apt-get install redis-server/);
    expect(err).toMatch(/--redis-url/);
    await expectNothingLeft(r);
  });

  it('stops what it started when a gateway cannot listen (port in use), exits 1 naming the port', async () => {
    const busy: Server = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const port = (busy.address() as { port: number }).port;
    try {
      const r = run(['--port', '0', '--port-b', String(port), '--admin-port', '0', '--admin-port-b', '0', '--backend-port', '0']);
      expect(await withTimeout(r.exited, 30_000, 'demo:cluster exit')).toBe(1);
      expect(r.stderr.join('\n')).toMatch(new RegExp(`gateway-b[\\s\\S]*${port}`));
      await expectNothingLeft(r);
    } finally {
      await new Promise<void>((resolve) => busy.close(() => resolve()));
    }
  });

  it('refuses a bad flag with usage and exit 2', async () => {
    const r = run(['--port', 'eighty']);
    expect(await withTimeout(r.exited, 15_000, 'demo:cluster exit')).toBe(2);
    expect(r.stderr.join('\n')).toMatch(/--port: got "eighty"/);
    await expectNothingLeft(r);
  });
});
