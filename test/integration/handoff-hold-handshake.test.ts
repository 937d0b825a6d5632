// A tunnel whose room's hold began while its 101 was on its way (commit b6b783f): the tunnel is
// counted in its room, and so held, from its handshake on, and it must stay on the JavaScript relay
// at the 101, where the hold keeps what its client sends. Handed to the native relay there, its
// client's next message went to the frozen old owner past the hold: a click lost.
//
// A real gateway (in process, proxy.relay: native) in front of two in-process version-2 hook
// backends (test/support/handoff-test-backend.ts), each behind a gate: a raw TCP pass-through that
// holds back a WebSocket handshake's answer (the 101) until the test lets it go. The handshake
// reaches the owner, the room's move begins and holds the room (its export arrives, and waits),
// then the 101 goes out, then the client clicks: the click is kept by the hold, never reaches the
// old owner, and is delivered to the new owner with the `messages` hook.
import net, { type AddressInfo, type Socket } from 'node:net';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { HandoffTestBackend, hellosAnswered, moveRoom } from '../support/handoff-test-backend.js';
import { bounded, startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, waitFor, withTimeout } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'handoff-hold-handshake-token-0123456789';
const WAIT_MS = 5_000;
const dir = scopeTempDir('roomgate-hold-101-');
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A WebSocket handshake that reached a gate: its room, and the release of the backend's answer. */
interface HeldHandshake {
  readonly room: string;
  readonly gate: Gate;
  /** Lets the backend's answer (the 101 and what follows) through, and everything after it. */
  readonly answer: () => void;
}

/**
 * A raw TCP pass-through in front of a backend. Every connection is relayed both ways as is,
 * except a WebSocket handshake (`GET /ws/...`): its bytes reach the backend at once, the backend's
 * answer is kept until the test calls `answer()`.
 */
class Gate {
  url = '';
  private readonly server = net.createServer((from) => this.pass(from));
  private readonly sockets = new Set<Socket>();
  private waiters: ((h: HeldHandshake) => void)[] = [];
  private readonly arrived: HeldHandshake[] = [];

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Resolves with the next WebSocket handshake that reaches this gate. */
  handshake(): Promise<HeldHandshake> {
    const h = this.arrived.shift();
    return h !== undefined ? Promise.resolve(h) : new Promise((r) => this.waiters.push(r));
  }

  private pass(from: Socket): void {
    const u = new URL(this.target);
    const to = net.connect(Number(u.port), u.hostname);
    for (const s of [from, to]) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        from.destroy();
        to.destroy();
      });
    }
    // Decided on the gateway's request line: a WebSocket handshake's answer is kept until answer().
    let head: Buffer | null = Buffer.alloc(0);
    let kept: Buffer[] | null = null;
    from.on('data', (c: Buffer) => {
      to.write(c);
      if (head === null) return;
      head = Buffer.concat([head, c]);
      const line = head.indexOf('\r\n');
      if (line === -1) return;
      const m = /^GET \/ws\/\?room=([^ &]+)/.exec(head.subarray(0, line).toString('latin1'));
      head = null;
      if (m === null) return;
      kept = [];
      const h: HeldHandshake = {
        room: m[1] as string,
        gate: this,
        answer: () => {
          if (kept !== null && !from.destroyed) for (const b of kept) from.write(b);
          kept = null;
        },
      };
      const w = this.waiters.shift();
      if (w !== undefined) w(h);
      else this.arrived.push(h);
    });
    to.on('data', (c: Buffer) => (kept !== null ? kept.push(c) : from.write(c)));
    from.on('end', () => to.end());
    to.on('end', () => from.end());
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** The gateway's roomgate_handoff_held_bytes now: client bytes a hold keeps. */
async function heldBytes(gw: Gateway): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(WAIT_MS) });
  return Number(/^roomgate_handoff_held_bytes (\d+)$/m.exec(await res.text())?.[1] ?? 0);
}

describe('a tunnel whose room\'s hold began while its 101 was on its way (native relay)', () => {
  it('stays where the hold keeps its client\'s click: the frozen owner never gets it, the new owner does', async () => {
    const [b1, b2] = await Promise.all(['b1', 'b2'].map((id) => new HandoffTestBackend(id, [CALL_SECRET]).start()));
    const backends = [b1!, b2!];
    for (const b of backends) b.version2 = true;
    cleanups.push(() => Promise.all(backends.map((b) => b.close())).then(() => undefined));
    const gates = await Promise.all(backends.map((b) => new Gate(b.url).start()));
    cleanups.push(() => Promise.all(gates.map((g) => g.close())).then(() => undefined));
    // The gateway knows the backends by their gates' addresses (the ids are what the calls are signed for).
    const gw = await startInProcessGateway(dir, gates[0]!.url, {
      backends: backends.map((b, i) => ({ id: b.id, url: gates[i]!.url })),
      health: { path: null },
      admin: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
      backendCalls: { secrets: [CALL_SECRET] },
      proxy: { relay: 'native', websocketPaths: ['/ws/'] },
      handoff: { timeoutMs: 2_000 },
    });
    cleanups.push(() => bounded(gw.stop(), 8_000, 'the gateway stopping'));
    // A tunnel opened after the hellos is followed (and so can be held).
    await hellosAnswered(gw.adminPort, TOKEN);

    // The handshake reaches the room's owner; its 101 is kept at the gate.
    const room = 'hold-101';
    const arrived = Promise.race(gates.map((g) => g.handshake()));
    const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/ws/?room=${room}`, { handshakeTimeout: WAIT_MS, perMessageDeflate: false });
    ws.on('error', () => undefined);
    cleanups.push(async () => ws.terminate());
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    const received: string[] = [];
    ws.on('message', (d) => received.push(String(d)));
    const h = await withTimeout(arrived, WAIT_MS, 'the handshake at the owner');
    expect(h.room).toBe(room);
    const [from, to] = h.gate === gates[0] ? [b1!, b2!] : [b2!, b1!];
    await waitFor('the owner read the handshake', WAIT_MS, () => from.socketIds.get(room)?.[0]);
    const socketId = from.socketIds.get(room)![0] as string;

    // The room's move: the hold begins before the export is called, and the export waits.
    let letGo = (): void => undefined;
    from.behave.set('export', { until: new Promise<void>((r) => (letGo = r)) });
    const exporting = from.arrival('export');
    const moved = moveRoom(gw.adminPort, TOKEN, room, to.id);
    // A failure before the move is awaited below: its export let go, its answer (or the gateway's stop) not unhandled.
    moved.catch(() => undefined);
    cleanups.push(async () => letGo());
    await withTimeout(exporting, WAIT_MS, 'the export at the old owner (the room held)');

    // Now the 101 reaches the gateway, and the client; then the client clicks.
    h.answer();
    await withTimeout(new Promise((r, j) => (ws.once('open', r), ws.once('error', j))), WAIT_MS, 'the 101 at the client');
    await withTimeout(new Promise<void>((r, j) => ws.send('click', (err) => (err ? j(err) : r()))), WAIT_MS, 'the click written');
    // Either the hold keeps it, or (handed to the native relay at the 101) it reaches the frozen owner.
    const where = await waitFor('the click kept by the hold or relayed to the old owner', WAIT_MS, async () => {
      if (from.log.includes(`message ${room} click`)) return 'relayed to the frozen old owner';
      return (await heldBytes(gw)) > 0 ? 'kept by the hold' : undefined;
    });
    expect(where).toBe('kept by the hold');

    // The move completes: the old owner's release closes the socket (1012), the click goes to the new owner.
    letGo();
    const done = await withTimeout(moved, WAIT_MS, 'the move');
    expect(done.result).toBe('moved');
    expect(done.held).toEqual({ sockets: 1, resumed: 0, messages: 1, lostSockets: 0 });
    expect(to.messagesCalls).toEqual([{ socket: socketId, body: { socket: socketId, messages: [{ text: 'click' }] } }]);
    expect(from.log.filter((l) => l.includes('click'))).toEqual([]);
    expect(await withTimeout(closed, WAIT_MS, 'the client socket closed')).toBe(1012);
    expect(received.map((m) => JSON.parse(m) as { type: string; backend: string })).toEqual([{ type: 'mounted', backend: from.id, room }]);
  });
});
