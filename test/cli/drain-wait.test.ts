// `roomgate drain BACKEND --handoff --wait` (src/cli/commands/drain-wait.ts): the command waits
// until the drain has handed off every room of the backend and prints what became of the rooms and
// of the sockets in them (resumed, reconnected, held messages delivered). In this process: two demo
// backends on the Node kit that resume sockets, a gateway, real sockets mounted in rooms on both.
import WebSocket from 'ws';
import { afterAll, describe, expect, it } from 'vitest';
import { runCliHere } from './in-process.js';
import { startBackendHere, startGatewayHere, stopAllHere, type GatewayHere } from '../support/here.js';
import { waitFor, withTimeout } from '../support/processes.js';

const TOKEN = 'drain-wait-admin-token-0123456789';
const sockets = new Set<WebSocket>();

afterAll(async () => {
  for (const s of sockets) s.terminate();
  await stopAllHere();
});

/** A socket mounted in `room`; resolves with the backend that mounted it. */
async function mounted(gw: GatewayHere, room: string): Promise<string> {
  const ws = new WebSocket(`${gw.wsUrl}/ws/live/?room=${room}`, { handshakeTimeout: 5_000, perMessageDeflate: false });
  sockets.add(ws);
  const messages: Record<string, unknown>[] = [];
  ws.on('message', (d) => messages.push(JSON.parse(String(d)) as Record<string, unknown>));
  await withTimeout(new Promise((r, j) => (ws.once('open', r), ws.once('error', j))), 5_000, 'socket open');
  await waitFor('connect', 5_000, () => messages.find((m) => m.type === 'connect'));
  ws.send(JSON.stringify({ type: 'mount', room }));
  const m = await waitFor('mounted', 5_000, () => messages.find((x) => x.type === 'mounted'));
  return String(m.backend);
}

describe('roomgate drain --handoff --wait', () => {
  it('waits for the drain and prints rooms moved and what became of their sockets', async () => {
    const backends = await Promise.all(['w1', 'w2'].map((id) => startBackendHere(id, { handoffResume: true })));
    const gw = await startGatewayHere({ backends, env: { ROOMGATE_ADMIN_TOKEN: TOKEN } });
    const admin = (path: string): Promise<{ backends: { id: string; handoffHooks?: string }[] }> =>
      fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5_000) }).then((r) => r.json() as Promise<{ backends: { id: string; handoffHooks?: string }[] }>);
    // A socket opened once the gateway knows a backend's hello is followed (and can be resumed).
    await waitFor('both hellos answered', 10_000, async () => ((await admin('/backends')).backends.every((b) => b.handoffHooks === 'yes') ? true : undefined), 100);
    const on: Record<string, string> = {};
    for (const room of ['dw-1', 'dw-2', 'dw-3', 'dw-4', 'dw-5', 'dw-6']) on[room] = await mounted(gw, room);
    const drained = on['dw-1']!;
    const rooms = Object.values(on).filter((b) => b === drained).length;
    const env = { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gw.adminPort}`, ROOMGATE_ADMIN_TOKEN: TOKEN };
    const out = await runCliHere(['drain', drained, '--handoff', '--wait', '--deadline', '1m'], env);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const m = /^(\S+) drained with handoff: (\d+) rooms? moved, 0 failed, 0 left; sockets: (\d+) resumed, (\d+) reconnected; (\d+) held messages? delivered\n$/.exec(out.stdout);
    expect(m, out.stdout).not.toBeNull();
    expect(m![1]).toBe(drained);
    expect(Number(m![2])).toBe(rooms);
    // One socket per room, each kept open on the new owner.
    expect(Number(m![3])).toBe(rooms);
    expect(Number(m![4])).toBe(0);
    for (const s of sockets) expect(s.readyState).toBe(WebSocket.OPEN);
  }, 60_000);
});
