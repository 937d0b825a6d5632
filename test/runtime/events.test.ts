// "Operator experience 3", item 5: each room move belongs to its own cause on the status page's
// Recent events. EventLog (src/runtime/events.ts) counts a move against the event of the backend
// the room left; a room handoff is its own cause: a `roomgate move` gets a 'handoff' event of its
// own, rebalancing's moves add up under one 'rebalance' event per target, a drain with handoff's
// under the drain's event. Then through a real gateway (in process) and two real backends serving
// the hooks: a move through the admin API is not credited to the backend's start-up 'joined'.
import type WebSocket from 'ws';
import { afterAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { EventLog } from '../../src/runtime/events.js';
import { HandoffTestBackend, handoffPairConfig, openMountedRoom } from '../support/handoff-test-backend.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, withTimeout } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const rows = (log: EventLog): unknown[] => log.list().map((e) => [e.kind, e.backend, e.detail, e.roomsMoved, e.liveRoomsMoved]);

describe('EventLog: a handoff is a cause of its own', () => {
  it('a roomgate move gets its own event, not the start-up joined of its backend', () => {
    const log = new EventLog();
    log.add('joined', 'b1', 'http://10.0.0.1:8000', 1);
    log.add('joined', 'b2', 'http://10.0.0.2:8000', 1);
    log.moved('b1', true, { trigger: 'move', to: 'b2' }, 2);
    log.moved('b1', false, { trigger: 'move', to: 'b2' }, 3);
    expect(rows(log)).toEqual([
      ['joined', 'b1', 'http://10.0.0.1:8000', 0, 0],
      ['joined', 'b2', 'http://10.0.0.2:8000', 0, 0],
      ['handoff', 'b1', 'roomgate move to b2', 1, 1],
      ['handoff', 'b1', 'roomgate move to b2', 1, 0],
    ]);
    // A move without a cause (a failover's reconnect) still counts against the backend's latest event.
    log.add('down', 'b1', '3 failed checks', 4);
    log.moved('b1', true);
    expect(log.list().at(-1)).toMatchObject({ kind: 'down', roomsMoved: 1, liveRoomsMoved: 1 });
  });

  it("a drain with handoff counts under the drain's event; rebalancing under one event per target", () => {
    const log = new EventLog();
    log.add('joined', 'b1', 'u1', 1);
    log.add('draining', 'b1', 'deadline 2030-01-01T00:00:00.000Z', 2);
    log.moved('b1', true, { trigger: 'drain', to: 'b2' }, 3);
    log.moved('b1', true, { trigger: 'drain', to: 'b3' }, 3);
    log.add('active', 'b1', '', 4);
    log.moved('b2', true, { trigger: 'rebalance', to: 'b1' }, 5);
    log.moved('b2', true, { trigger: 'rebalance', to: 'b1' }, 6);
    log.moved('b2', true, { trigger: 'rebalance', to: 'b3' }, 7);
    // No draining event of its own in the log (it scrolled out): the drain's move gets its own.
    log.moved('b4', false, { trigger: 'drain', to: 'b1' }, 8);
    expect(rows(log)).toEqual([
      ['joined', 'b1', 'u1', 0, 0],
      ['draining', 'b1', 'deadline 2030-01-01T00:00:00.000Z', 2, 2],
      ['active', 'b1', '', 0, 0],
      ['rebalance', 'b2', 'rebalancing to b1', 2, 2],
      ['rebalance', 'b2', 'rebalancing to b3', 1, 1],
      ['handoff', 'b4', 'drain with handoff to b1', 1, 0],
    ]);
  });
});

describe('Recent events after a real move handoff', () => {
  const TOKEN = 'events-admin-token-0123456789abcdef';
  const dir = scopeTempDir('roomgate-events-');
  let b1: HandoffTestBackend | undefined;
  let b2: HandoffTestBackend | undefined;
  let gw: Gateway | undefined;
  let ws: WebSocket | undefined;

  afterAll(async () => {
    ws?.terminate();
    await gw?.stop();
    await Promise.all([b1?.close(), b2?.close()]);
  });

  it('the move is its own event with 1 live room moved; the joined events moved none', async () => {
    b1 = await new HandoffTestBackend('b1', [CALL_SECRET]).start();
    b2 = await new HandoffTestBackend('b2', [CALL_SECRET]).start();
    gw = await startInProcessGateway(dir, b1.url, handoffPairConfig(b1, b2, TOKEN, CALL_SECRET));
    const mounted = await openMountedRoom(gw.port, 'ev-1', (socket) => (ws = socket));
    const from = mounted.backend;
    const to = from === 'b1' ? 'b2' : 'b1';
    const admin = (path: string, init: RequestInit = {}): Promise<Response> =>
      fetch(`http://127.0.0.1:${gw!.adminPort}${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, signal: AbortSignal.timeout(10_000) });
    const moved = await admin('/rooms/ev-1/move', { method: 'POST', body: JSON.stringify({ to }) });
    expect(moved.status).toBe(200);
    expect(await withTimeout(mounted.closed, 5_000, 'the release')).toBe(1012);
    const { events } = (await (await admin('/events')).json()) as { events: { kind: string; backend: string; detail: string; roomsMoved: number; liveRoomsMoved: number }[] };
    expect(events.filter((e) => e.kind === 'joined').map((e) => [e.backend, e.roomsMoved])).toEqual([
      ['b1', 0],
      ['b2', 0],
    ]);
    expect(events.filter((e) => e.kind === 'handoff')).toEqual([expect.objectContaining({ backend: from, detail: `roomgate move to ${to}`, roomsMoved: 1, liveRoomsMoved: 1 })]);
    // The status page shows it so.
    const page = await (await admin('/_roomgate/')).text();
    expect(page).toMatch(new RegExp(`<td data-label="Event">handoff</td>\\s*<th scope="row" class="mono" data-label="Backend">${from}</th>\\s*<td data-col="detail" data-label="Detail">roomgate move to ${to}</td>\\s*<td class="num" data-label="Rooms moved">1</td>`));
  }, 30_000);
});
