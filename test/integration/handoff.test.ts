// Room handoff through a real gateway (in process) in front of two in-process backends that serve
// the hooks and verify every call (test/support/handoff-test-backend.ts): the admin API's move and
// drain with handoff, the CLI's `move` and `drain --handoff` (in this process: test/cli/in-process.ts), a live client
// through the gateway closed with 1012 by the old owner's release and landing on the new one with
// the room's state, the status page and the metrics. The orchestrator's failure cases are in
// test/runtime/handoff.test.ts.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { HandoffTestBackend, handoffPairConfig } from '../support/handoff-test-backend.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, waitFor, withTimeout } from '../support/processes.js';
import { runCliHere } from '../cli/in-process.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'handoff-admin-token-0123456789';
const dir = scopeTempDir('roomgate-handoff-');
let b1: HandoffTestBackend;
let b2: HandoffTestBackend;
let gw: Gateway;
let env: Record<string, string>;
const clients = new Set<WebSocket>();

beforeAll(async () => {
  b1 = await new HandoffTestBackend('b1', [CALL_SECRET]).start();
  b2 = await new HandoffTestBackend('b2', [CALL_SECRET]).start();
  gw = await startInProcessGateway(dir, b1.url, {
    ...handoffPairConfig(b1, b2, TOKEN, CALL_SECRET),
    placement: { heartbeatMs: 200 },
    presence: { ttlMs: 1_000 },
  });
  env = { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gw.adminPort}`, ROOMGATE_ADMIN_TOKEN: TOKEN };
});

afterAll(async () => {
  for (const c of clients) c.terminate();
  await gw?.stop();
  await Promise.all([b1?.close(), b2?.close()]);
});

/** A client of the room through the gateway: the backend it landed on, and its close code when closed. */
async function joinRoom(room: string): Promise<{ backend: string; closed: Promise<number> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/ws/?room=${room}`, { handshakeTimeout: 5_000 });
  clients.add(ws);
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  const mounted = await withTimeout(new Promise<{ backend: string }>((resolve, reject) => {
    ws.once('message', (data) => resolve(JSON.parse(String(data)) as { backend: string }));
    ws.once('error', reject);
  }), 5_000, `${room} mounted`);
  return { backend: mounted.backend, closed };
}

function backend(id: string): HandoffTestBackend {
  return id === 'b1' ? b1 : b2;
}

async function admin(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // a page
  }
  return { status: res.status, json, text };
}

describe('room handoff through the gateway', () => {
  it('POST /rooms/{room}/move: the client is closed with 1012, reconnects to the new owner, and the state is there', async () => {
    const c = await joinRoom('hand-1');
    const from = c.backend;
    const to = from === 'b1' ? 'b2' : 'b1';
    const state = backend(from).rooms.get('hand-1')?.state;
    expect(state).toBe(`started on ${from}`);
    const r = await admin('POST', '/rooms/hand-1/move', { to });
    expect(r.status).toBe(200);
    expect(r.json.handoff).toMatchObject({ room: 'hand-1', from, to, result: 'moved', release: 'released' });
    // The old owner's release closed it (1012), relayed by the gateway: not cut by the move.
    expect(await withTimeout(c.closed, 5_000, 'the close')).toBe(1012);
    const again = await joinRoom('hand-1');
    expect(again.backend).toBe(to);
    expect(backend(to).rooms.get('hand-1')?.state).toBe(state);
    expect(backend(from).rooms.has('hand-1')).toBe(false);

    const page = await admin('GET', '/_roomgate/');
    expect(page.text).toContain('<dd id="handoff-hooks">b1 yes, b2 yes</dd>');
    expect(page.text).toMatch(/data-label="Room">hand-1<\/th>\s*<td class="mono" data-label="From">b[12]<\/td>/);
    const metrics = (await admin('GET', '/metrics')).text;
    expect(metrics).toMatch(/^roomgate_handoffs_total\{result="moved"\} [1-9]/m);
    expect(metrics).toMatch(/^roomgate_handoff_seconds_count\{result="moved"\} [1-9]/m);
    expect((await admin('GET', '/backends/b1')).json.handoffHooks).toBe('yes');
  });

  it('roomgate move ROOM --to BACKEND: one line in a pipe, --json, and the errors', async () => {
    const c = await joinRoom('hand-2');
    const to = c.backend === 'b1' ? 'b2' : 'b1';
    const moved = await runCliHere(['move', 'hand-2', '--to', to, '--id', 'cli-1'], env);
    expect(moved.stderr).toBe('');
    expect(moved.code).toBe(0);
    expect(moved.stdout).toMatch(new RegExp(`^hand-2\\t${c.backend}\\t${to}\\tmoved\\treleased\\t\\d+\\n$`));
    // The same id again is the same handoff (its record), not a second move.
    const again = await runCliHere(['move', 'hand-2', '--to', to, '--id', 'cli-1', '--json'], env);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: 'cli-1', room: 'hand-2', from: c.backend, to, result: 'moved' });
    const unknown = await runCliHere(['move', 'hand-2', '--to', 'b9'], env);
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toContain('roomgate: move hand-2: 404 no backend "b9"');
    const notLive = await runCliHere(['move', 'nobody-here', '--to', to], env);
    expect(notLive.code).toBe(2);
    expect(notLive.stderr).toContain('hint: a room is live once a client opens it');
    const same = await runCliHere(['move', 'hand-2', '--to', to], env);
    expect(same.code).toBe(1);
    expect(same.stderr).toContain(`409 the room is already on ${to}`);
    expect((await runCliHere(['move', 'hand-2'], env)).code).toBe(2);
  });

  it('roomgate drain BACKEND --handoff: every live room moves now with its state; the drain is done when it holds none', async () => {
    // Rooms until three are live on b1.
    const onB1: { room: string; closed: Promise<number> }[] = [];
    for (let i = 0; onB1.length < 3 && i < 60; i++) {
      const c = await joinRoom(`drain-${i}`);
      if (c.backend === 'b1') onB1.push({ room: `drain-${i}`, closed: c.closed });
    }
    expect(onB1).toHaveLength(3);
    const d = await runCliHere(['drain', 'b1', '--handoff', '--deadline', '10m'], env);
    expect(d.code).toBe(0);
    expect(d.stdout).toMatch(/^b1\tdraining\t\S+\n$/);
    try {
      const drain = await waitFor('the drain with handoff done', 15_000, async () => {
        const ev = (await admin('GET', '/events')).json.handoffs as { drains: { backend: string; done: boolean; moved: number; failed: number }[] };
        return ev.drains.find((x) => x.backend === 'b1' && x.done);
      });
      expect(drain).toMatchObject({ moved: 3, failed: 0 });
      for (const r of onB1) {
        expect(await withTimeout(r.closed, 5_000, `${r.room} closed`)).toBe(1012);
        expect(b2.rooms.get(r.room)?.state).toBe('started on b1');
        expect(b1.rooms.has(r.room)).toBe(false);
      }
      // What a client of a moved room finds: the new owner.
      expect((await joinRoom(onB1[0]!.room)).backend).toBe('b2');
    } finally {
      await runCliHere(['undrain', 'b1'], env);
    }
  });
});
