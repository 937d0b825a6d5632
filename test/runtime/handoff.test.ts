// The room handoff orchestrator (src/runtime/handoff.ts) in process: real hook calls over loopback
// to two in-process test backends that verify every call's proof (test/support/
// handoff-test-backend.ts), a real Placer and pool, a TunnelRegistry with plain tunnel objects,
// and both placement stores: the memory store and the Redis store on a real redis-server. Every
// case of the protocol: the state moves, an import refused, an export timing out, the new owner
// dying before the move, the old owner dying mid-export, the store down, the release not
// answering, idempotency, the bound per backend, an app without hooks. Deadlines are fired by the
// test when the hanging call has arrived (events, no sleeps).
import { BackendCalls } from '../../src/runtime/backend-calls.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { defaultBackendTls } from '../../src/backends/backend-tls.js';
import { signCall } from '../../src/http/call-proof.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryPlacementStore } from '../../src/placement/memory-store.js';
import { RedisPlacementStore } from '../../src/placement/redis-store.js';
import type { PlacementStore } from '../../src/placement/store.js';
import { HookClient } from '../../src/runtime/handoff-calls.js';
import { HandoffDrains } from '../../src/runtime/handoff-drain.js';
import { HandoffLog } from '../../src/runtime/handoff-log.js';
import { Handoffs, type HandoffOutcome } from '../../src/runtime/handoff.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { TunnelRegistry, type Tunnel } from '../../src/runtime/tunnels.js';
import { HandoffTestBackend } from '../support/handoff-test-backend.js';
import { CALL_SECRET, waitFor, withTimeout } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';
import type { Placer } from '../../src/runtime/placer.js';
import { testPlacer } from '../support/runtime-parts.js';

const logger = createLogger('silent', { write: () => undefined });
const TIMING = { idleTtlMs: 60_000, gatewayTtlMs: 5_000 };
const SECRETS = [CALL_SECRET];

interface TestTunnel extends Tunnel {
  closed: boolean;
}

/** One gateway's runtime around the handoff: pool, tunnels, placer, the orchestrator. */
interface Rig {
  readonly store: PlacementStore;
  readonly placer: Placer;
  readonly pool: BackendPool;
  readonly tunnels: TunnelRegistry;
  readonly handoffs: Handoffs;
  readonly log: HandoffLog;
  readonly metrics: ReturnType<typeof createMetrics>;
  /** Deadlines of hook calls still running: the test fires them. */
  readonly deadlines: (() => void)[];
  tunnel(room: string, backend: string): TestTunnel;
}

function backendConfig(b: HandoffTestBackend): ResolvedBackend {
  const u = new URL(b.url);
  return { id: b.id, url: b.url, host: u.hostname, port: Number(u.port), weight: 1 };
}

function rig(store: PlacementStore, backends: readonly HandoffTestBackend[], o: { maxConcurrent?: number; signed?: boolean } = {}): Rig {
  const pool = new BackendPool(backends.map(backendConfig), 600_000);
  const tunnels = new TunnelRegistry(pool);
  const placer = testPlacer({
    store,
    pool,
    tunnels,
    logger,
    idleTtlMs: TIMING.idleTtlMs,
    recoveryRingMs: TIMING.gatewayTtlMs,
  });
  const deadlines: (() => void)[] = [];
  const calls = new HookClient({
    path: '/_roomgate/handoff',
    calls: new BackendCalls(SECRETS),
    sender: 'gw-test',
    timeoutMs: 5_000,
    maxBodyBytes: 1_000_000,
    backendTls: defaultBackendTls(),
    deadline: (fire) => {
      deadlines.push(fire);
      return () => {
        const i = deadlines.indexOf(fire);
        if (i >= 0) deadlines.splice(i, 1);
      };
    },
  });
  const metrics = createMetrics(() => []);
  const log = new HandoffLog();
  const handoffs = new Handoffs({
    placer,
    pool,
    store,
    tunnels,
    call: (b, c) => calls.call(b, c),
    // As a gateway does: each call's connection opened while the step before runs.
    connect: (b) => calls.connect(b),
    log,
    metrics,
    logger,
    leaseMs: 30_000,
    maxConcurrentPerBackend: o.maxConcurrent ?? 4,
    signed: () => o.signed ?? true,
  });
  const tunnel = (room: string, backend: string): TestTunnel => {
    const t: TestTunnel = {
      room,
      backendId: backend,
      closed: false,
      close() {
        this.closed = true;
      },
    };
    tunnels.add(t);
    return t;
  };
  rigs.push(placer);
  return { store, placer, pool, tunnels, handoffs, log, metrics, deadlines, tunnel };
}

const rigs: Placer[] = [];

async function counter(r: Rig, result: string): Promise<number> {
  const m = (await r.metrics.handoffs.get()).values.find((v) => v.labels.result === result);
  return m?.value ?? 0;
}

/** Once the hook call `arrived` (b.arrival(step), asked before the call starts): fire the gateway's deadline of that call. */
async function fireDeadlineWhen(arrived: Promise<void>, r: Rig): Promise<void> {
  await withTimeout(arrived, 5_000, 'the hanging call');
  const fire = r.deadlines.at(-1);
  if (!fire) throw new Error('no deadline running');
  fire();
}

function steps(b: HandoffTestBackend): string[] {
  return b.calls.map((c) => c.step);
}

const stores: [string, () => Promise<{ store: PlacementStore; redis?: RedisServer }>][] = [
  ['memory store', async () => ({ store: new MemoryPlacementStore('gw-test', TIMING) })],
  [
    'Redis store',
    async () => {
      const redis = await startRedis();
      const store = new RedisPlacementStore({ url: redis.url, keyPrefix: 'ho:', gatewayId: 'gw-test', timing: TIMING, commandTimeoutMs: 1_000 });
      await store.connect({ timeoutMs: 5_000 });
      return { store, redis };
    },
  ],
];

afterAll(async () => {
  await stopAllRedis();
});

describe.each(stores)('room handoff with the %s', (name, makeStore) => {
  let store: PlacementStore;
  let redis: RedisServer | undefined;
  let b1: HandoffTestBackend;
  let b2: HandoffTestBackend;
  let r: Rig;

  beforeAll(async () => {
    ({ store, redis } = await makeStore());
  });
  afterAll(async () => {
    await store.close();
  });
  beforeEach(async () => {
    b1 = await new HandoffTestBackend('b1', SECRETS).start();
    b2 = await new HandoffTestBackend('b2', SECRETS).start();
    r = rig(store, [b1, b2]);
  });
  afterEach(async () => {
    for (const p of rigs.splice(0)) p.close();
    await Promise.all([b1.close(), b2.close()]);
  });

  /** A live room on b1 with its state there; its placement's epoch. */
  let roomSeq = 0;
  async function liveRoom(state = 'moves:3'): Promise<{ room: string; epoch: number }> {
    const room = `${name.split(' ')[0]}-room-${++roomSeq}`;
    const placed = await store.place(room, 'b1', 0, { force: false });
    if (!placed.ok) throw new Error('not placed');
    b1.seed(room, state, placed.placement.epoch);
    // Its placement event has reached the gateway (Redis: by pub/sub), so it does not close
    // sockets a test opens next as a move's would.
    await waitFor('the placement event', 5_000, () => r.placer.cachedPlacement(room)?.epoch === placed.placement.epoch);
    return { room, epoch: placed.placement.epoch };
  }

  it('moves the room with its state: export, import at the new epoch, placement moved by CAS, release', async () => {
    const { room, epoch } = await liveRoom('moves:7');
    const out = await r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    expect(out.refusal).toBeNull();
    expect(out.event).toMatchObject({ room, from: 'b1', to: 'b2', result: 'moved', stage: 'done', release: 'released', reason: '' });
    const now = await store.get(room);
    expect(now?.backend).toBe('b2');
    expect(now?.epoch).toBe(out.event.epoch);
    expect(now!.epoch).toBeGreaterThan(epoch);
    // The new owner holds the state at the epoch the placement got; the old one dropped it.
    expect(b2.rooms.get(room)).toEqual({ state: 'moves:7', epoch: now!.epoch, frozenBy: null });
    expect(b1.rooms.has(room)).toBe(false);
    expect(steps(b1)).toEqual(['hello', 'export', 'release']);
    expect(steps(b2)).toEqual(['hello', 'import']);
    expect(b1.calls.find((c) => c.step === 'export')).toMatchObject({ epoch: String(epoch), status: 200 });
    expect(b2.calls.find((c) => c.step === 'import')).toMatchObject({ epoch: String(now!.epoch), status: 204 });
    expect(await counter(r, 'moved')).toBe(1);
    expect(r.log.recent().at(-1)).toMatchObject({ room, result: 'moved' });
    expect(r.log.inProgress()).toEqual([]);
    expect(r.handoffs.support('b1')).toBe('yes');
  });

  it('import refused: rolled back, the old owner resumed, placement untouched, nothing lost', async () => {
    const { room, epoch } = await liveRoom('moves:4');
    b2.behave.set('import', { refuse: 500 });
    const out = await r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    expect(out.event).toMatchObject({ result: 'rolled-back', reason: 'import answered 500' });
    expect(await store.get(room)).toEqual({ backend: 'b1', epoch });
    expect(b1.rooms.get(room)).toEqual({ state: 'moves:4', epoch, frozenBy: null });
    expect(steps(b1)).toEqual(['hello', 'export', 'resume']);
    expect(await counter(r, 'rolled-back')).toBe(1);
  });

  it('export timing out: rolled back (resume sent), placement untouched', async () => {
    const { room, epoch } = await liveRoom();
    b1.behave.set('export', 'hang');
    const arrived = b1.arrival('export');
    const running = r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    await waitFor('the handoff in progress', 5_000, () => r.log.inProgress().length === 1);
    expect(r.log.inProgress()[0]).toMatchObject({ room, from: 'b1', to: 'b2', result: null });
    await fireDeadlineWhen(arrived, r);
    b1.behave.delete('export');
    const out = await running;
    expect(out.event).toMatchObject({ result: 'rolled-back', reason: 'export did not answer in time' });
    expect(await store.get(room)).toEqual({ backend: 'b1', epoch });
    expect(steps(b1)).toEqual(['hello', 'resume']);
    expect(steps(b2)).toEqual(['hello']);
  });

  it('the new owner dying before the move: rolled back, the room stays with its state', async () => {
    const { room, epoch } = await liveRoom('moves:9');
    b2.behave.set('import', 'die');
    const out = await r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    expect(out.event.result).toBe('rolled-back');
    expect(out.event.reason).toMatch(/^import failed: /);
    expect(await store.get(room)).toEqual({ backend: 'b1', epoch });
    expect(b1.rooms.get(room)).toEqual({ state: 'moves:9', epoch, frozenBy: null });
    expect(steps(b1)).toEqual(['hello', 'export', 'resume']);
  });

  it('the old owner dying mid-export: the room placed empty on the new owner, its sockets cut, reported', async () => {
    const { room, epoch } = await liveRoom();
    const onOld = r.tunnel(room, 'b1');
    b1.behave.set('export', 'die');
    const out = await r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    expect(out.event.result).toBe('owner-lost');
    expect(out.event.reason).toMatch(/old owner b1 died during the export .*state of the room is lost; placed empty on b2/);
    const now = await store.get(room);
    expect(now?.backend).toBe('b2');
    expect(now!.epoch).toBeGreaterThan(epoch);
    expect(b2.rooms.has(room)).toBe(false);
    expect(onOld.closed).toBe(true);
    expect(await counter(r, 'owner-lost')).toBe(1);
  });

  it('the release not answering: moved all the same, the room sockets on the old backend cut', async () => {
    const { room } = await liveRoom();
    const onOld = r.tunnel(room, 'b1');
    const onNew = r.tunnel(room, 'b2');
    b1.behave.set('release', 'hang');
    const arrived = b1.arrival('release');
    const running = r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    await fireDeadlineWhen(arrived, r);
    const out = await running;
    expect(out.event).toMatchObject({ result: 'moved', release: 'cut' });
    expect(out.event.reason).toBe('release did not answer in time: cut 1 socket of the room on b1');
    expect(onOld.closed).toBe(true);
    expect(onNew.closed).toBe(false);
    expect((await store.get(room))?.backend).toBe('b2');
  });

  it('a release slower than RELEASE_GRACE_MS: this gateway cuts its sockets on the old backend before the deadline, as the other gateways do at the move', async () => {
    const { room } = await liveRoom();
    const onOld = r.tunnel(room, 'b1');
    b1.behave.set('release', 'hang');
    const arrived = b1.arrival('release');
    const running = r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    await withTimeout(arrived, 5_000, 'the hanging release');
    // The release still hangs (its deadline not fired): the room must not stay on b1 through this gateway.
    await waitFor('the sockets on the old backend cut while the release hangs', 5_000, () => onOld.closed);
    expect(r.deadlines.length).toBeGreaterThan(0);
    await fireDeadlineWhen(Promise.resolve(), r);
    const out = await running;
    expect(out.event).toMatchObject({ result: 'moved', release: 'cut' });
    expect(out.event.reason).toBe('release did not answer in time: cut 1 socket of the room on b1');
  });

  it('the old owner holds no state (export 404): the placement moves with nothing to import', async () => {
    const placed = await store.place(`${name}-empty`.replace(' ', '-'), 'b1', 0, { force: false });
    expect(placed.ok).toBe(true);
    const out = await r.handoffs.move({ room: `${name}-empty`.replace(' ', '-'), to: 'b2', trigger: 'move' });
    expect(out.event).toMatchObject({ result: 'moved-empty', bytes: 0 });
    expect(steps(b2)).toEqual(['hello']);
  });

  it('idempotent by handoff id: the same id twice is one handoff; for another room it is refused', async () => {
    const { room } = await liveRoom();
    const [a, b] = await Promise.all([r.handoffs.move({ room, to: 'b2', id: 'h-1', trigger: 'move' }), r.handoffs.move({ room, to: 'b2', id: 'h-1', trigger: 'move' })]);
    expect(a).toBe(b);
    expect(steps(b1).filter((s) => s === 'export')).toHaveLength(1);
    const again = await r.handoffs.move({ room, to: 'b2', id: 'h-1', trigger: 'move' });
    expect(again.event.result).toBe('moved');
    const other = await r.handoffs.move({ room: 'another', to: 'b2', id: 'h-1', trigger: 'move' });
    expect(other.refusal).toBe('id-conflict');
  });

  it('bounded per backend: a handoff beyond handoff.maxConcurrentPerBackend is refused, and may be tried again', async () => {
    r = rig(store, [b1, b2], { maxConcurrent: 1 });
    const first = await liveRoom();
    const second = await liveRoom();
    b1.behave.set('export', 'hang');
    const running = r.handoffs.move({ room: first.room, to: 'b2', trigger: 'move' });
    await withTimeout(b1.arrival('export'), 5_000, 'export');
    const refused = await r.handoffs.move({ room: second.room, to: 'b2', id: 'h-2', trigger: 'move' });
    expect(refused.refusal).toBe('too-many');
    expect(refused.event.result).toBe('refused');
    const fire = r.deadlines.at(-1);
    fire?.();
    b1.behave.delete('export');
    await running;
    const retried = await r.handoffs.move({ room: second.room, to: 'b2', id: 'h-2', trigger: 'move' });
    expect(retried.event.result).toBe('moved');
  });

  it('an app without the hooks keeps today behaviour: refused, nothing frozen, placement untouched', async () => {
    const { room, epoch } = await liveRoom();
    b2.hooks = false;
    const out = await r.handoffs.move({ room, to: 'b2', trigger: 'move' });
    expect(out.refusal).toBe('no-hooks');
    expect(out.event.reason).toContain('b2 (none)');
    expect(steps(b1)).toEqual(['hello']);
    expect(await store.get(room)).toEqual({ backend: 'b1', epoch });
    expect(r.handoffs.support('b2')).toBe('no');
  });

  it('refused before any call: unsigned, unknown target, a room not placed, already there', async () => {
    const { room } = await liveRoom();
    const expectRefusal = async (out: Promise<HandoffOutcome>, refusal: string): Promise<void> => expect((await out).refusal).toBe(refusal);
    await expectRefusal(rig(store, [b1, b2], { signed: false }).handoffs.move({ room, to: 'b2', trigger: 'move' }), 'unsigned');
    await expectRefusal(r.handoffs.move({ room, to: 'b9', trigger: 'move' }), 'unknown-backend');
    await expectRefusal(r.handoffs.move({ room: 'never-placed', to: 'b2', trigger: 'move' }), 'not-placed');
    await expectRefusal(r.handoffs.move({ room, to: 'b1', trigger: 'move' }), 'same-backend');
    await expectRefusal(r.handoffs.move({ room, to: 'b2', from: 'b2', trigger: 'drain' }), 'not-on-backend');
    expect(b1.calls).toEqual([]);
  });

  if (name === 'Redis store') {
    it('the store down: refused, never half done; nothing called', async () => {
      const { room } = await liveRoom();
      await redis!.kill();
      await waitFor('store unavailable', 5_000, () => !store.available);
      const out = await r.handoffs.move({ room, to: 'b2', trigger: 'move' });
      expect(out.refusal).toBe('store-unavailable');
      expect(b1.calls).toEqual([]);
      await redis!.restart();
      await waitFor('store available again', 10_000, () => store.available);
    });
  }
});

describe('the test backend verifies every hook call', () => {
  it('an unsigned call, or one signed for another purpose, is refused with 403', async () => {
    const b = await new HandoffTestBackend('b1', SECRETS).start();
    try {
      b.seed('r', 'x');
      const post = async (headers: Record<string, string>): Promise<number> =>
        (await fetch(`${b.url}/_roomgate/handoff/export`, { method: 'POST', headers, body: '{"leaseMs":1000}', signal: AbortSignal.timeout(5_000) })).status;
      const fields = { 'X-Roomgate-Message-Id': 'h', 'X-Roomgate-Room': 'r', 'X-Roomgate-Epoch': '1', 'X-Roomgate-Sender': 'gw' };
      const proof = (purpose: 'handoff-export' | 'handoff-import' | 'push'): Record<string, string> => {
        const l = signCall(SECRETS, { purpose, destination: 'b1', id: 'h', room: 'r', epoch: '1', sender: 'gw', body: Buffer.from('{"leaseMs":1000}') }, Date.now());
        return { [l[0]!]: l[1]!, [l[2]!]: l[3]!, [l[4]!]: l[5]! };
      };
      expect(await post(fields)).toBe(403);
      expect(await post({ ...fields, ...proof('handoff-import') })).toBe(403);
      expect(await post({ ...fields, ...proof('push') })).toBe(403);
      expect(b.rooms.get('r')?.frozenBy).toBeNull();
      expect(await post({ ...fields, ...proof('handoff-export') })).toBe(200);
    } finally {
      await b.close();
    }
  });
});

describe('a drain with handoff', () => {
  let b1: HandoffTestBackend;
  let b2: HandoffTestBackend;
  let r: Rig;
  let store: MemoryPlacementStore;

  beforeEach(async () => {
    b1 = await new HandoffTestBackend('b1', SECRETS).start();
    b2 = await new HandoffTestBackend('b2', SECRETS).start();
    store = new MemoryPlacementStore('gw-drain', TIMING);
    r = rig(store, [b1, b2], { maxConcurrent: 2 });
  });
  afterEach(async () => {
    for (const p of rigs.splice(0)) p.close();
    await Promise.all([b1.close(), b2.close()]);
  });

  function drains(batch: number): HandoffDrains {
    return new HandoffDrains({
      move: (req) => r.handoffs.move(req),
      support: (id) => r.handoffs.support(id),
      running: (id) => r.handoffs.running(id),
      pool: r.pool,
      // This gateway's live rooms: what a tunnel still open on the backend says.
      liveRoomsOn: async (backend) => r.tunnels.liveRooms().flatMap((x) => (x.backend === backend ? [x.room] : [])),
      batch,
      maxConcurrentPerBackend: 2,
      logger,
    });
  }

  /** n live rooms on b1 with their state there, each with a socket through this gateway. */
  async function liveRooms(n: number): Promise<string[]> {
    const rooms: string[] = [];
    for (let i = 0; i < n; i++) {
      const room = `d-${i}`;
      const p = await store.place(room, 'b1', 0, { force: false });
      if (!p.ok) throw new Error('not placed');
      b1.seed(room, `state ${i}`, p.placement.epoch);
      r.tunnel(room, 'b1');
      rooms.push(room);
    }
    return rooms;
  }

  it('moves every live room of the backend, in batches, and is done when none is left to try', async () => {
    const rooms = await liveRooms(5);
    r.pool.setAdmin('b1', { state: 'draining', deadline: null, since: Date.now() });
    const { progress, done } = drains(3).start('b1');
    await withTimeout(done, 10_000, 'the drain');
    expect(progress).toMatchObject({ backend: 'b1', moved: 5, failed: 0, done: true, reason: '' });
    for (const [i, room] of rooms.entries()) {
      expect((await store.get(room))?.backend).toBe('b2');
      expect(b2.rooms.get(room)?.state).toBe(`state ${i}`);
    }
    // Batches of at most handoff.maxConcurrentPerBackend (2), whatever drainBatch (3): none refused as too many.
    expect(r.log.recent().filter((e) => e.result === 'refused' && e.reason.includes('maxConcurrentPerBackend'))).toEqual([]);
  });

  it('a room whose handoff fails is tried once more, then left to the drain as today; counted as failed', async () => {
    await liveRooms(2);
    b2.behave.set('import', { refuse: 503 });
    r.pool.setAdmin('b1', { state: 'draining', deadline: null, since: Date.now() });
    const { progress, done } = drains(2).start('b1');
    await withTimeout(done, 10_000, 'the drain');
    expect(progress).toMatchObject({ moved: 0, failed: 2, done: true });
    expect(b2.calls.filter((c) => c.step === 'import')).toHaveLength(4);
    expect((await store.get('d-0'))?.backend).toBe('b1');
    expect(b1.rooms.get('d-0')?.frozenBy).toBeNull();
  });

  it('ends when the backend is no longer draining (undrained)', async () => {
    await liveRooms(1);
    const { progress, done } = drains(2).start('b1');
    await withTimeout(done, 10_000, 'the drain');
    expect(progress).toMatchObject({ moved: 0, done: true, reason: 'backend b1 is no longer draining' });
    expect(b1.calls).toEqual([]);
  });
});
