// A rolling restart of demo backends with room handoff, the steps the chaos scenarios share
// (test/chaos/handoff-rolling-restart.test.ts, test/chaos/djust-handoff.test.ts): each backend in
// turn drained with handoff (through a gateway's admin API or `roomgate drain --handoff`) until it
// holds no room, stopped, started again on its port and undrained. The cluster is the one
// test/support/two-gateways.ts starts; a restarted backend takes its predecessor's index in
// `backends`, the array the split watcher reads.
import { expect } from 'vitest';
import { runCli, startBackend, stop, waitFor, type BackendProc, type GatewayProc } from './processes.js';
import { adminBackends, adminGet, adminPost } from './room-clients.js';

/** The drain's deadline: far beyond the test, so a room is only ever moved by its handoff. */
const DEADLINE_MS = 600_000;

export interface RollingCluster {
  readonly backends: BackendProc[];
  readonly gwA: GatewayProc;
  readonly gwB: GatewayProc;
  /** The gateways' admin token. */
  readonly token: string;
  /** Each backend's extra arguments, again when it is restarted (e.g. `--handoff-resume on`). */
  readonly backendArgs?: readonly string[];
}

/** Each gateway's config in a rolling-restart scenario. */
export function rollingConfig(token: string): (redisUrl: string, bs: readonly BackendProc[]) => Record<string, unknown> {
  return (redisUrl, bs) => ({
    backends: bs.map((b) => ({ id: b.id, url: b.url })),
    redis: { url: redisUrl, commandTimeoutMs: 500 },
    health: { intervalMs: 500, timeoutMs: 400 },
    placement: { heartbeatMs: 200, gatewayTtlMs: 1_000 },
    presence: { ttlMs: 2_000 },
    admin: { token },
    // 600 sockets reconnecting in waves are the point here, not admission control.
    admission: { upgradesPerSecond: 0 },
  });
}

export async function roomsOn(b: BackendProc): Promise<number> {
  const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(2_000) });
  return Object.keys(((await res.json()) as { rooms: Record<string, number> }).rooms).length;
}

export interface DrainFigures {
  backend: string;
  via: string;
  moved: number;
  failed: number;
  startedAt: number;
  ms: number;
  reissued: number;
}

interface DrainProgress {
  backend: string;
  startedAt: string;
  moved: number;
  failed: number;
  done: boolean;
  reason: string;
}

async function drainDone(gw: GatewayProc, backend: string, since: number): Promise<DrainProgress> {
  return waitFor(
    `the drain with handoff of ${backend} done`,
    60_000,
    async () => {
      const ev = await adminGet<{ handoffs: { drains: DrainProgress[] } }>(gw, '/events');
      return ev.handoffs.drains.find((d) => d.backend === backend && d.done && Date.parse(d.startedAt) >= since - 1_000);
    },
    100,
  );
}

/** Drains backend `i` with handoff through `gw` (the admin API, or the CLI), until it holds no room. */
export async function drainWithHandoff(c: RollingCluster, i: number, gw: GatewayProc, via: 'api' | 'cli'): Promise<DrainFigures> {
  const b = c.backends[i] as BackendProc;
  const t0 = Date.now();
  let reissued = 0;
  const issue = async (): Promise<void> => {
    if (via === 'api') {
      const r = await adminPost(gw, `/backends/${b.id}/drain`, c.token, { handoff: true, deadlineMs: DEADLINE_MS });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    } else {
      const r = await runCli(['drain', b.id, '--handoff', '--deadline', '10m'], { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gw.adminPort}`, ROOMGATE_ADMIN_TOKEN: c.token });
      expect(r.code, r.stderr).toBe(0);
    }
  };
  await issue();
  let moved = 0;
  let failed = 0;
  for (;;) {
    const since = Date.now();
    const d = await drainDone(gw, b.id, reissued === 0 ? t0 : since);
    moved += d.moved;
    failed += d.failed;
    // Presence lags a heartbeat: a room it had not reported yet is moved by the drain's next count,
    // or, once the drain is over, by issuing it again (counted: the table says how often).
    const empty = await waitFor(`${b.id} holding no room`, 5_000, async () => (await roomsOn(b)) === 0, 100).catch(() => false);
    if (empty) break;
    if (++reissued > 3) {
      const recent = (await adminGet<{ handoffs: { recent: unknown[] } }>(gw, '/events')).handoffs.recent.slice(-5);
      throw new Error(`${b.id} still holds ${await roomsOn(b)} rooms after ${reissued} drains with handoff (last: ${JSON.stringify(d)}); recent handoffs: ${JSON.stringify(recent)}`);
    }
    await issue();
  }
  return { backend: b.id, via: `${via === 'api' ? 'admin API' : 'CLI'} of gateway ${gw === c.gwA ? 'A' : 'B'}`, moved, failed, startedAt: t0, ms: Date.now() - t0, reissued };
}

/** Stops backend `i` (SIGTERM), starts it again on its port, waits until both gateways see it up, undrains it. */
export async function restartBackend(c: RollingCluster, i: number): Promise<number> {
  const old = c.backends[i] as BackendProc;
  const t0 = Date.now();
  await stop(old, 'SIGTERM');
  const fresh = await startBackend(old.id, ['--port', String(old.port), ...(c.backendArgs ?? [])]);
  c.backends[i] = fresh;
  for (const gw of [c.gwA, c.gwB]) await waitFor(`${old.id} up for the gateway`, 15_000, async () => (await adminBackends(gw)).get(old.id)?.health === 'up', 100);
  const r = await adminPost(c.gwA, `/backends/${old.id}/undrain`, c.token);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return Date.now() - t0;
}

/** The plan both scenarios follow: b1 and b3 through gateway A's admin API, b2 with the CLI against gateway B. */
export function rollingPlan(c: RollingCluster): readonly (readonly [number, GatewayProc, 'api' | 'cli'])[] {
  return [
    [0, c.gwA, 'api'],
    [1, c.gwB, 'cli'],
    [2, c.gwA, 'api'],
  ];
}

/** One handoff's time (hello to release), as each gateway recorded its latest (100 each). */
export async function handoffTimes(c: RollingCluster): Promise<number[]> {
  return (await Promise.all([c.gwA, c.gwB].map((gw) => adminGet<{ handoffs: { recent: { result: string; ms: number }[] } }>(gw, '/events'))))
    .flatMap((e) => e.handoffs.recent)
    .filter((h) => h.result === 'moved')
    .map((h) => h.ms);
}
