// Rebalancing through a whole gateway (in process): real WebSockets through it to in-process
// backends that serve the handoff hooks (test/support/handoff-test-backend.ts), a reload (SIGHUP's
// path) that adds a backend. Off by default nothing moves; on, live rooms move to the new backend
// with their state until the skew is under the factor, their clients closed with 1012 by the old
// owner; a reload that turns it off stops it. The rate and every rule are in rebalance.test.ts
// and rebalance-plan.test.ts; this checks the wiring: the composition, start, reload, /events.
import { afterEach, describe, expect, it } from 'vitest';
import type { LoadedConfig, ResolvedBackend } from '../../src/config/load.js';
import type { Gateway } from '../../src/gateway.js';
import { HandoffTestBackend, openMountedRoom } from '../support/handoff-test-backend.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, waitFor, withTimeout } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-rebalance-');
let closers: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const c of closers.reverse()) await c();
  closers = [];
});

function resolved(b: HandoffTestBackend): ResolvedBackend {
  const u = new URL(b.url);
  return { id: b.id, url: b.url, host: u.hostname, port: Number(u.port), weight: 1 };
}

async function setUp(rebalance: Record<string, unknown> | null): Promise<{ gw: Gateway; b: HandoffTestBackend[] }> {
  const b = await Promise.all(['b1', 'b2', 'b3'].map((id) => new HandoffTestBackend(id, [CALL_SECRET]).start()));
  closers.push(() => Promise.all(b.map((x) => x.close())));
  const gw = await startInProcessGateway(dir, b[0]?.url ?? '', {
    backends: b.slice(0, 2).map((x) => ({ id: x.id, url: x.url })),
    health: { path: null },
    backendCalls: { secrets: [CALL_SECRET] },
    admin: { enabled: true, host: '127.0.0.1', port: 0 },
    placement: { heartbeatMs: 200 },
    presence: { ttlMs: 1_000 },
    ...(rebalance === null ? {} : { handoff: { rebalance } }),
  });
  closers.push(() => gw.stop());
  return { gw, b };
}

interface Socket {
  readonly room: string;
  readonly backend: string;
  readonly closed: Promise<number>;
}

/** A room's socket through the gateway, once its backend's `mounted` arrived. */
function openRoom(gw: Gateway, room: string): Promise<Socket> {
  return openMountedRoom(gw.port, room, (ws) => closers.push(async () => ws.terminate()));
}

async function events(gw: Gateway): Promise<{ rebalance: { enabled: boolean; targets: string[]; moved: number }; recent: { room: string; trigger: string; result: string; to: string }[] }> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/events`, { signal: AbortSignal.timeout(5_000) });
  return ((await res.json()) as { handoffs: never }).handoffs;
}

function withB3(gw: Gateway, b3: HandoffTestBackend, rebalance?: Partial<LoadedConfig['handoff']['rebalance']>): LoadedConfig {
  const c = gw.config;
  return { ...c, backends: [...c.backends, resolved(b3)], handoff: { ...c.handoff, rebalance: { ...c.handoff.rebalance, ...rebalance } } };
}

describe('rebalancing through a gateway', () => {
  it('is off by default: a backend added by a reload gets no live room', async () => {
    const { gw, b } = await setUp(null);
    for (let i = 0; i < 8; i++) await openRoom(gw, `off-${i}`);
    expect(gw.reload(withB3(gw, b[2] as HandoffTestBackend)).applied).toEqual(['backends']);
    // Off, a backend's return starts nothing: no target, now or later.
    expect((await events(gw)).rebalance).toMatchObject({ enabled: false, targets: [], moved: 0 });
    // Only hellos (asked at start: which tunnels are followed), no handoff.
    expect(b.flatMap((x) => x.calls).filter((c) => c.step !== 'hello')).toEqual([]);
  });

  it('on: live rooms move to the backend a reload adds, with their state, until the skew is under the factor; a reload turns it off', async () => {
    const { gw, b } = await setUp({ enabled: true, skewFactor: 1.5, roomsPerMinute: 600 });
    const [b1, b2, b3] = b as [HandoffTestBackend, HandoffTestBackend, HandoffTestBackend];
    const sockets: Socket[] = [];
    for (let i = 0; i < 12; i++) sockets.push(await openRoom(gw, `on-${i}`));
    gw.reload(withB3(gw, b3));
    await waitFor('rebalancing to end', 15_000, async () => {
      const s = (await events(gw)).rebalance;
      return s.targets.length === 0 && s.moved > 0;
    });
    const moved = sockets.filter((s) => b3.rooms.has(s.room));
    expect(moved.length).toBe((await events(gw)).rebalance.moved);
    // The state the old owner held arrived on b3 (the test backend's state names where it began).
    for (const s of moved) expect(b3.rooms.get(s.room)?.state).toBe(`started on ${s.backend}`);
    // The old owner released each: its clients closed with 1012, to reconnect to b3.
    for (const s of moved) expect(await withTimeout(s.closed, 5_000, `${s.room} closed`)).toBe(1012);
    const left = (id: string): number => sockets.filter((s) => s.backend === id && !b3.rooms.has(s.room)).length;
    expect(Math.max(left('b1'), left('b2'))).toBeLessThanOrEqual(1.5 * moved.length);
    expect((await events(gw)).recent.filter((e) => e.trigger === 'rebalance').map((e) => e.result)).toEqual(moved.map(() => 'moved'));
    // A moved room's next socket lands on b3 and finds its state there.
    const again = await openRoom(gw, moved[0]?.room ?? '');
    expect(again.backend).toBe('b3');
    // A reload turning it off applies at once (the rest of the handoff section would wait for a restart).
    expect(gw.reload({ ...gw.config, handoff: { ...gw.config.handoff, rebalance: { ...gw.config.handoff.rebalance, enabled: false } } }).applied).toEqual(['handoff.rebalance']);
    expect((await events(gw)).rebalance.enabled).toBe(false);
    // Every export came from b1 or b2, never from b3.
    expect(b3.calls.filter((c) => c.step === 'export')).toEqual([]);
    expect([...b1.calls, ...b2.calls].filter((c) => c.step === 'export').length).toBe(moved.length);
  });
});
