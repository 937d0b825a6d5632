import { describe, expect, it } from 'vitest';
import { decide, type BackendView, type DecideView } from '../../src/placement/decide.js';
import { buildRing } from '../../src/placement/ring.js';

const ids = ['a', 'b', 'c'];
const ring = buildRing(ids.map((id) => ({ id, weight: 1 })));
const bv = (id: string, over: Partial<BackendView> = {}): BackendView => ({ id, routable: true, acceptsNew: true, gone: false, removed: false, checksDownOnly: false, weight: 1, load: 0, busy: 0, ...over });
const up = (over: Partial<BackendView> = {}): BackendView[] => ids.map((id) => bv(id, over));
const view = (backends: BackendView[], over: Partial<DecideView> = {}): DecideView => ({
  ring,
  backends,
  placement: null,
  liveOnPlacement: false,
  onDown: 'keep',
  noRoom: 'least-loaded',
  boundFactor: 0,
  tieBreak: 0,
  retryAfterS: 3,
  ...over,
});
const rooms = Array.from({ length: 200 }, (_, i) => `room-${i}`);

describe('decide: new rooms', () => {
  it('places a new room on its ring owner', () => {
    for (const room of rooms) {
      expect(decide(room, view(up()))).toEqual({ route: ring.first(room), reason: 'ring', place: { expectedEpoch: 0, from: null, force: false, overrideLive: false } });
    }
  });

  it('skips backends that take no new rooms (down, draining, weight 0) in ring order', () => {
    for (const room of rooms) {
      const [owner, next] = ring.walk(room);
      const backends = up().map((b) => (b.id === owner ? { ...b, acceptsNew: false } : b));
      expect(decide(room, view(backends))).toMatchObject({ route: next, reason: 'ring-skip' });
    }
  });

  it('answers 503 with Retry-After when nothing takes new rooms', () => {
    const none = up({ routable: false, acceptsNew: false });
    expect(decide('x', view(none))).toEqual({ reject: 503, reason: 'no-backend', retryAfterS: 3 });
    expect(decide(null, view(none))).toEqual({ reject: 503, reason: 'no-backend', retryAfterS: 3 });
  });
});

describe('decide: sticky placements', () => {
  it('keeps a placed room on its backend whatever the ring says (join, recovery, weights)', () => {
    for (const room of rooms) {
      const elsewhere = ids.find((id) => id !== ring.first(room))!;
      const d = decide(room, view(up(), { placement: { backend: elsewhere, epoch: 4 } }));
      expect(d).toEqual({ route: elsewhere, reason: 'sticky' });
    }
  });

  it('keeps a room on a draining backend (routable, takes no new rooms) and ignores bounded loads', () => {
    const backends = up().map((b) => (b.id === 'a' ? { ...b, acceptsNew: false, load: 1000 } : b));
    expect(decide('r', view(backends, { placement: { backend: 'a', epoch: 1 }, boundFactor: 1.25 }))).toEqual({ route: 'a', reason: 'sticky' });
  });

  it('re-places a room whose backend is down, as a compare-and-set that is not forced', () => {
    for (const room of rooms.slice(0, 50)) {
      const owner = ring.first(room)!;
      const backends = up().map((b) => (b.id === owner ? { ...b, routable: false, acceptsNew: false } : b));
      const d = decide(room, view(backends, { placement: { backend: owner, epoch: 7 } }));
      expect(d).toMatchObject({ route: ring.walk(room)[1], place: { expectedEpoch: 7, from: owner, force: false, overrideLive: false } });
    }
  });

  it('forces the move when the backend is gone for everyone or unknown', () => {
    const backends = up().map((b) => (b.id === 'a' ? { ...b, routable: false, acceptsNew: false, gone: true } : b));
    // Gone (maintenance, drain deadline): forced, but the move waits for live sockets to be closed.
    expect(decide('r', view(backends, { placement: { backend: 'a', epoch: 2 } }))).toMatchObject({ place: { from: 'a', force: true, overrideLive: false, expectedEpoch: 2 } });
    // Removed (nobody closes its sockets) or unknown: the move does not wait for them.
    const removed = backends.map((b) => (b.id === 'a' ? { ...b, removed: true } : b));
    expect(decide('r', view(removed, { placement: { backend: 'a', epoch: 2 } }))).toMatchObject({ place: { from: 'a', force: true, overrideLive: true } });
    expect(decide('r', view(up(), { placement: { backend: 'zz', epoch: 2 } }))).toMatchObject({ place: { from: 'zz', force: true, overrideLive: true } });
  });
});

describe('decide: rooms stay whole when their backend fails its health checks (health.onDown)', () => {
  /** The owner of each room, down only by its active checks; its rooms were placed there. */
  const checksDown = (room: string, over: Partial<BackendView> = {}): BackendView[] => {
    const owner = ring.first(room)!;
    return up().map((b) => (b.id === owner ? { ...b, routable: false, acceptsNew: false, checksDownOnly: true, ...over } : b));
  };

  it('keep: a room with live sockets here on that backend keeps going there (no placement written)', () => {
    for (const room of rooms.slice(0, 50)) {
      const owner = ring.first(room)!;
      const d = decide(room, view(checksDown(room), { placement: { backend: owner, epoch: 3 }, liveOnPlacement: true }));
      expect(d).toEqual({ route: owner, reason: 'sticky-live' });
    }
  });

  it('keep, but no live socket of the room here: the room is placed elsewhere (not forced)', () => {
    for (const room of rooms.slice(0, 50)) {
      const owner = ring.first(room)!;
      const d = decide(room, view(checksDown(room), { placement: { backend: owner, epoch: 3 }, liveOnPlacement: false }));
      expect(d).toMatchObject({ route: ring.walk(room)[1], place: { expectedEpoch: 3, from: owner, force: false, overrideLive: false } });
    }
  });

  it('a backend that is also passively down (refused a connection), or gone, is not kept', () => {
    const room = rooms[0]!;
    const owner = ring.first(room)!;
    const placement = { backend: owner, epoch: 3 };
    // The pool says checksDownOnly: false for a passive mark, and for a gone backend.
    const passive = decide(room, view(checksDown(room, { checksDownOnly: false }), { placement, liveOnPlacement: true }));
    expect(passive).toMatchObject({ route: ring.walk(room)[1], place: { from: owner, force: false, overrideLive: false } });
    const gone = decide(room, view(checksDown(room, { checksDownOnly: false, gone: true }), { placement, liveOnPlacement: true }));
    expect(gone).toMatchObject({ route: ring.walk(room)[1], place: { from: owner, force: true, overrideLive: false } });
  });

  it('close: today\'s rule, the room is placed elsewhere even with live sockets here', () => {
    const room = rooms[1]!;
    const owner = ring.first(room)!;
    const d = decide(room, view(checksDown(room), { placement: { backend: owner, epoch: 3 }, liveOnPlacement: true, onDown: 'close' }));
    expect(d).toMatchObject({ route: ring.walk(room)[1], place: { from: owner, force: false, overrideLive: false } });
  });

  it('never gives a down backend a new room, and a routable placement stays plain sticky', () => {
    for (const room of rooms.slice(0, 50)) {
      const d = decide(room, view(checksDown(room), { liveOnPlacement: true }));
      expect(d).toMatchObject({ route: ring.walk(room)[1], reason: 'ring-skip' });
    }
    expect(decide('r', view(up(), { placement: { backend: 'a', epoch: 1 }, liveOnPlacement: true }))).toEqual({ route: 'a', reason: 'sticky' });
  });
});

describe('decide: bounded loads', () => {
  it('skips a full backend at placement time only', () => {
    // a holds 10 rooms, b and c none: capacity ceil(1.25 * 11 / 3) = 5, so a is full.
    const backends = up().map((b) => (b.id === 'a' ? { ...b, load: 10 } : b));
    const aRooms = rooms.filter((r) => ring.first(r) === 'a');
    expect(aRooms.length).toBeGreaterThan(10);
    for (const room of aRooms) {
      const d = decide(room, view(backends, { boundFactor: 1.25 }));
      expect(d).toMatchObject({ reason: 'bounded-skip' });
      expect('route' in d && d.route).not.toBe('a');
    }
    // The same rooms without the bound stay on the ring owner.
    for (const room of aRooms) expect(decide(room, view(backends))).toMatchObject({ route: 'a', reason: 'ring' });
  });

  it('keeps every backend within ceil(c * average) while placing many rooms', () => {
    const load: Record<string, number> = { a: 0, b: 0, c: 0 };
    for (let i = 0; i < 3000; i++) {
      const d = decide(`k${i}`, view(ids.map((id) => bv(id, { load: load[id] })), { boundFactor: 1.1 }));
      if (!('route' in d)) throw new Error('rejected');
      load[d.route]!++;
      const cap = Math.ceil((1.1 * (i + 1)) / 3);
      for (const id of ids) expect(load[id]).toBeLessThanOrEqual(cap);
    }
  });

  it('respects weights in the capacity', () => {
    const w = buildRing([{ id: 'a', weight: 2 }, { id: 'b', weight: 1 }]);
    const load: Record<string, number> = { a: 0, b: 0 };
    for (let i = 0; i < 3000; i++) {
      const d = decide(`k${i}`, view([bv('a', { weight: 2, load: load.a }), bv('b', { load: load.b })], { ring: w, boundFactor: 1.1 }));
      if ('route' in d) load[d.route]!++;
    }
    expect(load.a! / load.b!).toBeGreaterThan(1.6);
    expect(load.a! / load.b!).toBeLessThan(2.4);
  });
});

describe('decide: no room key', () => {
  it('sends keyless requests to the least-busy backend that takes new rooms, rotating ties', () => {
    const loads: BackendView[] = [bv('a', { busy: 5 }), bv('b', { busy: 2 }), bv('c', { busy: 0, acceptsNew: false })];
    expect(decide(null, view(loads))).toEqual({ route: 'b', reason: 'no-room' });
    const ties = [0, 1, 2].map((t) => decide(null, view(up(), { tieBreak: t })));
    expect(ties.map((d) => ('route' in d ? d.route : null)).sort()).toEqual(['a', 'b', 'c']);
  });

  it('rejects keyless requests when the policy says so', () => {
    expect(decide(null, view(up(), { noRoom: 'reject' }))).toEqual({ reject: 400, reason: 'no-room' });
  });
});
