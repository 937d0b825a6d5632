// BackendPool.unavailableReason: the one line a 503 body and its log line carry when no backend
// can take a request. Pure pool state (no sockets): health verdicts, passive marks, drain and
// maintenance, removal and weights are set the way the gateway sets them.
import { describe, expect, it } from 'vitest';
import { BackendPool } from '../../src/runtime/pool.js';
import type { ResolvedBackend } from '../../src/config/load.js';
import type { BackendAdminState } from '../../src/placement/store.js';

const NOW = 1_700_000_000_000;
const PASSIVE_DOWN_MS = 10_000;
const backend = (id: string, weight = 1): ResolvedBackend => ({ id, url: `http://10.0.0.1:${8000 + id.length}`, host: '10.0.0.1', port: 8000, weight });
const draining = (deadline: number | null): BackendAdminState => ({ state: 'draining', deadline, since: NOW - 1000 });
const maintenance: BackendAdminState = { state: 'maintenance', deadline: null, since: NOW - 1000 };

function pool(ids: readonly string[]): BackendPool {
  return new BackendPool(ids.map((id) => backend(id)), PASSIVE_DOWN_MS);
}

function checksDown(p: BackendPool, id: string, reason: string): void {
  p.setHealth(id, 'down', reason);
}

describe('BackendPool.unavailableReason', () => {
  it('no backends configured (none listed, or every one removed from the list)', () => {
    expect(pool([]).unavailableReason(NOW)).toBe('no backends configured');
    const p = pool(['b1']);
    p.socketOpened('b1'); // kept while a socket uses it
    p.setBackends([]);
    expect(p.unavailableReason(NOW)).toBe('no backends configured');
  });

  it('all down: each backend with why (failed checks, or a passive mark with the seconds left)', () => {
    const p = pool(['b1', 'b2', 'b3']);
    checksDown(p, 'b1', '3 failed checks: ECONNREFUSED');
    checksDown(p, 'b2', '3 failed checks: HTTP 503');
    p.markDown('b3', NOW - 2_500, 'refused');
    expect(p.unavailableReason(NOW)).toBe(
      'all 3 backends are down (b1: 3 failed checks: ECONNREFUSED; b2: 3 failed checks: HTTP 503; b3: failed a connection (refused), no new traffic for 8 s)',
    );
    const one = pool(['solo']);
    checksDown(one, 'solo', '2 failed checks: timeout after 1000 ms');
    expect(one.unavailableReason(NOW)).toBe('the only backend is down (solo: 2 failed checks: timeout after 1000 ms)');
  });

  it('every backend draining or in maintenance', () => {
    const p = pool(['b1', 'b2']);
    p.setAdmin('b1', draining(null));
    p.setAdmin('b2', maintenance);
    expect(p.unavailableReason(NOW)).toBe('every backend is draining or in maintenance (b1: draining; b2: maintenance)');
    p.setAdmin('b1', draining(NOW - 1));
    expect(p.unavailableReason(NOW)).toBe('every backend is draining or in maintenance (b1: drain deadline passed; b2: maintenance)');
  });

  it('a mix: down, draining, weight 0', () => {
    const p = new BackendPool([backend('b1'), backend('b2'), backend('b3', 0)], PASSIVE_DOWN_MS);
    checksDown(p, 'b1', '3 failed checks: ECONNREFUSED');
    p.setAdmin('b2', draining(NOW + 60_000));
    expect(p.unavailableReason(NOW)).toBe('no backend takes new rooms (b1: 3 failed checks: ECONNREFUSED; b2: draining; b3: weight 0)');
  });

  it('stays one short line with many backends: four are named, the rest counted', () => {
    const ids = Array.from({ length: 30 }, (_, i) => `backend-${i}`);
    const p = pool(ids);
    for (const id of ids) checksDown(p, id, '3 failed checks: ECONNREFUSED');
    const line = p.unavailableReason(NOW);
    expect(line).toMatch(/^all 30 backends are down \(backend-0: .*; backend-3: 3 failed checks: ECONNREFUSED; and 26 more\)$/);
    expect(line).not.toContain('\n');
    expect(line.length).toBeLessThan(250);
  });

  it('says so when a backend takes new rooms again (the state changed since the 503 was decided)', () => {
    const p = pool(['b1', 'b2']);
    checksDown(p, 'b1', '3 failed checks: ECONNREFUSED');
    expect(p.unavailableReason(NOW)).toBe('b2 takes new rooms again (1 of 2 backends)');
    // A passive mark ends by itself.
    const q = pool(['b1']);
    q.markDown('b1', NOW, 'connect-timeout');
    expect(q.unavailableReason(NOW + 1)).toMatch(/^the only backend is down \(b1: failed a connection \(connect-timeout\)/);
    expect(q.unavailableReason(NOW + PASSIVE_DOWN_MS)).toBe('b1 takes new rooms again (1 of 1 backends)');
  });
});

describe('BackendPool loads: a heartbeat never loses a placement made while it read the store', () => {
  it('placements after the mark are added back to the store figures; earlier ones are taken as read', () => {
    const p = pool(['b1', 'b2']);
    const before = p.loadMark();
    p.noteMove(null, 'b1'); // placed before the read began: the store's figure includes it
    const mark = p.loadMark();
    p.noteMove(null, 'b1'); // placed while the heartbeat read the store: maybe missing there
    p.noteMove('b1', 'b2'); // a move during the read
    expect(before).toBeLessThan(mark);
    p.applyLoads(
      new Map([
        ['b1', 5],
        ['b2', 2],
      ]),
      mark,
    );
    expect([p.get('b1')!.rooms, p.get('b2')!.rooms]).toEqual([5 + 1 - 1, 2 + 1]);
    // The next read (taken after those placements) is believed as it is.
    p.applyLoads(
      new Map([
        ['b1', 5],
        ['b2', 3],
      ]),
      p.loadMark(),
    );
    expect([p.get('b1')!.rooms, p.get('b2')!.rooms]).toEqual([5, 3]);
  });

  it('counts sockets and requests only through its named mutations, never below zero', () => {
    const p = pool(['b1']);
    p.socketOpened('b1');
    p.socketOpened('b1');
    p.socketClosed('b1');
    p.requestStarted('b1');
    p.requestEnded('b1');
    p.requestEnded('b1');
    expect([p.get('b1')!.liveSockets, p.get('b1')!.inflight]).toEqual([1, 0]);
  });
});
