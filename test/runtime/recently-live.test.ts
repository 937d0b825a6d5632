// A room counts as live on a backend while it has sockets there, and for RECENTLY_LIVE_MS after
// its last one there ended (a dead backend drops its sockets before their clients reconnect and
// move the room: issue 31, item 6). The event log counts each move against the backend it left.
import { describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { EventLog } from '../../src/runtime/events.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { RECENTLY_LIVE_MS, TunnelRegistry, type Tunnel } from '../../src/runtime/tunnels.js';

const backend = (id: string, port: number): ResolvedBackend => ({ id, url: `http://127.0.0.1:${port}`, host: '127.0.0.1', port, weight: 1 });

describe('TunnelRegistry.wasLive', () => {
  it('is true while the room has sockets on the backend and for RECENTLY_LIVE_MS after the last one ended there', () => {
    let now = 1_000_000;
    const reg = new TunnelRegistry(new BackendPool([backend('b1', 1), backend('b2', 2)], 1_000), () => now);
    const t = (room: string, backendId: string): Tunnel => ({ room, backendId, close: () => undefined });
    const a = t('r', 'b1');
    const b = t('r', 'b1');
    reg.add(a);
    reg.add(b);
    expect(reg.wasLive('r', 'b1')).toBe(true);
    expect(reg.wasLive('r', 'b2')).toBe(false);
    reg.remove(a);
    now += RECENTLY_LIVE_MS; // one socket is still open: live whatever the clock says
    expect(reg.wasLive('r', 'b1')).toBe(true);
    reg.remove(b);
    now += RECENTLY_LIVE_MS - 1;
    expect(reg.wasLive('r', 'b1')).toBe(true);
    expect(reg.wasLive('r', 'b2')).toBe(false);
    expect(reg.wasLive('other', 'b1')).toBe(false);
    now += 1;
    expect(reg.wasLive('r', 'b1')).toBe(false);
  });

  it('remembers the backend the room ended on last, and a bounded number of rooms', () => {
    const now = 5_000;
    const reg = new TunnelRegistry(new BackendPool([backend('b1', 1), backend('b2', 2)], 1_000), () => now);
    const t1: Tunnel = { room: 'r', backendId: 'b1', close: () => undefined };
    const t2: Tunnel = { room: 'r', backendId: 'b2', close: () => undefined };
    reg.add(t1);
    reg.remove(t1);
    reg.add(t2);
    reg.remove(t2);
    expect(reg.wasLive('r', 'b2')).toBe(true);
    expect(reg.wasLive('r', 'b1')).toBe(false);
    // 10 000 rooms are remembered at most: the oldest is forgotten first.
    for (let i = 0; i < 10_000; i++) {
      const x: Tunnel = { room: `x${i}`, backendId: 'b1', close: () => undefined };
      reg.add(x);
      reg.remove(x);
    }
    expect(reg.wasLive('r', 'b2')).toBe(false);
    expect(reg.wasLive('x0', 'b1')).toBe(true);
    expect(reg.wasLive('x9999', 'b1')).toBe(true);
  });
});

describe('EventLog.moved', () => {
  it('counts a move against the latest event of the backend the room left', () => {
    const log = new EventLog();
    log.add('down', 'b2', 'passive: refused', 1);
    log.add('down', 'b2', '3 failed checks', 2);
    log.add('draining', 'b3', '', 3);
    log.moved('b2', true);
    log.moved('b2', false);
    log.moved('b9', true); // no event of its own: not counted anywhere
    expect(log.list().map((e) => [e.kind, e.backend, e.roomsMoved, e.liveRoomsMoved])).toEqual([
      ['down', 'b2', 0, 0],
      ['down', 'b2', 2, 1],
      ['draining', 'b3', 0, 0],
    ]);
  });
});
