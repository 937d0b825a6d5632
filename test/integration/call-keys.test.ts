// A key per backend (docs/push.md, "Verifying a call"): a real gateway (in process) in front of two
// demo backends (in process, examples/demo-backend) that hold only their own keys. Pushes and
// handoffs keep flowing while the call secrets rotate (old and new overlap, a reload applies them,
// each backend swaps its key set) and nothing is refused; every call roomgate makes is in /events
// and the metrics; a backend holding only the new key refuses a gateway that signs with the old
// secret alone (the test can fail).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoBackend, type DemoBackend } from '../../examples/demo-backend/server.js';
import type { Gateway } from '../../src/gateway.js';
import { backendKeys } from '../../src/http/call-proof.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { Client, withTimeout } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const OLD = 'old-call-secret-0123456789abcdef0123';
const NEW = 'new-call-secret-0123456789abcdef0123';
const ADMIN = 'call-keys-admin-token-0123456789';
const PUSH = 'call-keys-push-token-0123456789';
const dir = scopeTempDir('roomgate-call-keys-');
const backends: DemoBackend[] = [];
const clients: Client[] = [];
let gw: Gateway;

beforeAll(async () => {
  for (const id of ['k1', 'k2']) backends.push(await startDemoBackend({ port: 0, host: '127.0.0.1', id, callKeys: backendKeys([OLD], id) }));
  gw = await startInProcessGateway(dir, '', {
    backends: backends.map((b) => ({ id: b.id, url: `http://127.0.0.1:${b.port}` })),
    health: { path: null },
    admin: { enabled: true, host: '127.0.0.1', port: 0, token: ADMIN },
    push: { tokens: [PUSH] },
    backendCalls: { secrets: [OLD] },
  });
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await gw?.stop();
  await Promise.all(backends.map((b) => b.close()));
});

async function live(room: string): Promise<Client> {
  const c = new Client(`ws://127.0.0.1:${gw.port}/ws/live/?room=${room}`);
  clients.push(c);
  await c.next('connect', 5_000);
  c.send({ type: 'mount', room, url: `/game/${room}/` });
  await c.next('mounted', 5_000);
  return c;
}

async function push(room: string, n: number): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${gw.port}/_roomgate/api/rooms/${room}/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${PUSH}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ n }),
    signal: AbortSignal.timeout(5_000),
  });
  await r.arrayBuffer();
  return r.status;
}

async function move(room: string, to: string): Promise<{ status: number; result: string }> {
  const r = await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/${room}/move`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ to }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await r.json()) as { handoff?: { result: string } };
  return { status: r.status, result: body.handoff?.result ?? 'none' };
}

const ownerOf = async (room: string): Promise<string> =>
  ((await (await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/${room}`, { headers: { Authorization: `Bearer ${ADMIN}` }, signal: AbortSignal.timeout(5_000) })).json()) as { placement: { backend: string } }).placement.backend;

const withSecrets = (secrets: string[]) => ({ ...gw.config, backendCalls: { ...gw.config.backendCalls, secrets } });

describe('a key per backend', () => {
  it('rotates under live pushes and handoffs with nothing refused', async () => {
    const rooms = ['rot-a', 'rot-b'];
    for (const r of rooms) await live(r);
    const pushes: number[] = [];
    const moves: { status: number; result: string }[] = [];
    // One push and one move per room per round, the rounds interleaved with the rotation's steps.
    const round = async (n: number): Promise<void> => {
      for (const room of rooms) {
        pushes.push(await push(room, n));
        const from = await ownerOf(room);
        moves.push(await move(room, from === 'k1' ? 'k2' : 'k1'));
        pushes.push(await push(room, n + 0.5));
      }
    };
    await round(1);
    // 1. The gateway signs with both secrets (a reload, no restart).
    expect(gw.reload(withSecrets([OLD, NEW])).applied).toEqual(['backendCalls']);
    await round(2);
    // 2. Each backend gets its new key set: the new key alone (the old secret is still signed with).
    for (const b of backends) b.setCallKeys(backendKeys([NEW], b.id));
    await round(3);
    // 3. The old secret leaves the gateway.
    expect(gw.reload(withSecrets([NEW])).applied).toEqual(['backendCalls']);
    await round(4);
    expect(pushes.filter((s) => s !== 202)).toEqual([]);
    expect(moves.filter((m) => m.status !== 200 || m.result !== 'moved')).toEqual([]);
    expect(pushes).toHaveLength(16);
    expect(moves).toHaveLength(8);
    // The rooms' clients reconnect after each move as after any handoff; none was split.
  });

  it('records every call it makes, per backend and per handoff id, in /events and the metrics', async () => {
    await live('rec');
    const from = await ownerOf('rec');
    const to = from === 'k1' ? 'k2' : 'k1';
    const r = await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/rec/move`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ to, id: 'handoff-rec-1' }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(r.status).toBe(200);
    const events = (await (await fetch(`http://127.0.0.1:${gw.adminPort}/events`, { headers: { Authorization: `Bearer ${ADMIN}` }, signal: AbortSignal.timeout(5_000) })).json()) as {
      backendCalls: { backend: string; call: string; id: string; room: string; result: string }[];
    };
    const ofHandoff = events.backendCalls.filter((c) => c.id === 'handoff-rec-1').map((c) => [c.backend, c.call, c.result]);
    expect(ofHandoff).toEqual([
      [from, 'handoff-export', '200'],
      [to, 'handoff-import', '204'],
      [from, 'handoff-release', '204'],
    ]);
    const metrics = await gw.metrics.registry.getSingleMetricAsString('roomgate_backend_calls_total');
    expect(metrics).toMatch(new RegExp(`roomgate_backend_calls_total\\{backend="${to}",call="handoff-import",result="2xx"\\} [1-9]`));
    expect(metrics).toMatch(/call="push",result="2xx"\} [1-9]/);
    expect(metrics).not.toMatch(/result="4xx"/);
  });

  it("refuses what a backend's keys do not cover: the gateway signing with a secret the backend has no key of", async () => {
    const c = await live('refused');
    const owner = backends.find((b) => b.id === 'k1') as DemoBackend;
    const room = (await ownerOf('refused')) === 'k1' ? 'refused' : null;
    // Whichever backend holds the room gets a key of a third secret only.
    const holder = room === null ? (backends.find((b) => b.id === 'k2') as DemoBackend) : owner;
    holder.setCallKeys(backendKeys(['third-secret-0123456789abcdef0123456'], holder.id));
    try {
      expect(await push('refused', 1)).toBe(502);
      const metrics = await gw.metrics.registry.getSingleMetricAsString('roomgate_backend_calls_total');
      expect(metrics).toMatch(new RegExp(`backend="${holder.id}",call="push",result="4xx"\\} 1`));
    } finally {
      holder.setCallKeys(backendKeys([NEW], holder.id));
    }
    expect(await push('refused', 2)).toBe(202);
    await withTimeout(c.close(), 5_000, 'close');
  });
});
