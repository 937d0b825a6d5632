// The Python example (examples/djust-push/app.py): a Django backend (real Django, /usr/bin/python3)
// behind a real gateway: its page sees the room and its epoch, a push through the gateway lands in
// the room's in-memory state, its own sender pushes through the gateway, a push under an older
// epoch is refused by the receiver, and so is every push without roomgate's proof (forged, stale,
// replayed); a client cannot reach the receiver through the gateway at all.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliHere } from '../cli/in-process.js';
import { backendEnv, ROOT, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { EXPECTED_RECEIVER_ANSWERS, forgedPushes, signedPushHeaders } from '../support/push-receiver.js';

const PYTHON = '/usr/bin/python3';
const APP = join(ROOT, 'examples/djust-push/app.py');
const TOKEN = 'push-token-0123456789abcdef';
let django: ChildProcess;
let backendUrl = '';
let gw: GatewayProc;

function run(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [APP, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.resume();
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

beforeAll(async () => {
  django = spawn(PYTHON, [APP, 'serve', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...backendEnv('dj') } });
  let lines = '';
  django.stdout?.on('data', (c: Buffer) => (lines += c.toString('utf8')));
  let errors = '';
  django.stderr?.on('data', (c: Buffer) => (errors += c.toString('utf8')));
  const port = await waitFor(`the Django example listening (${errors})`, 20_000, () => {
    const m = /"port": (\d+)/.exec(lines);
    return m ? Number(m[1]) : undefined;
  });
  backendUrl = `http://127.0.0.1:${port}`;
  gw = await startGateway({ backends: [`dj=${backendUrl}`], config: { health: { path: null }, push: { tokens: [TOKEN] } } });
}, 30_000);

afterAll(async () => {
  await stopAll();
  if (django && django.exitCode === null && django.signalCode === null) {
    const exited = new Promise((r) => django.once('exit', r));
    django.kill('SIGKILL');
    await exited;
  }
});

const state = async (room: string): Promise<{ epoch: number | null; inbox: { id: string; sender: string; message: unknown }[] }> =>
  (await (await fetch(`${backendUrl}/_state/${room}/`, { signal: AbortSignal.timeout(5_000) })).json()) as never;

describe('the Django example behind roomgate', () => {
  it("its page sees the room's epoch; a push and its own sender reach the room's state; an older epoch is refused", async () => {
    // Other rooms first, so this room's epoch is above 1 and an older one (not 0: "no placement") exists.
    for (const other of ['dj-a', 'dj-b']) expect((await fetch(`${gw.url}/game/${other}/?room=${other}`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
    const page = await fetch(`${gw.url}/game/dj-1/?room=dj-1`, { signal: AbortSignal.timeout(5_000) });
    expect(page.status).toBe(200);
    const epoch = Number(/epoch (\d+)/.exec(await page.text())?.[1]);
    expect(epoch).toBeGreaterThan(1);

    const res = await fetch(`${gw.url}/_roomgate/api/rooms/dj-1/messages`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', 'X-Roomgate-Sender': 'room:lobby' },
      body: '{"type":"announce"}',
      signal: AbortSignal.timeout(5_000),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    expect(await state('dj-1')).toEqual({ room: 'dj-1', epoch, inbox: [{ id, sender: 'room:lobby', message: { type: 'announce' } }] });

    // The example's own sender, as a background job would run it.
    const sent = await run(['send', gw.url, 'dj-1', '{"n": 2}', '--token', TOKEN, '--sender', 'job:cron']);
    expect(sent.code).toBe(0);
    expect(JSON.parse(sent.out)).toMatchObject({ status: 202, answer: { room: 'dj-1', backend: 'dj' } });
    expect((await state('dj-1')).inbox.at(-1)).toMatchObject({ sender: 'job:cron', message: { n: 2 } });

    // Straight to the receiver, signed but under an older epoch: refused, the state unchanged.
    const stale = await fetch(`${backendUrl}/_roomgate/push`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...signedPushHeaders('dj', 'dj-1', epoch - 1, 'old-1', '{}') },
      body: '{}',
      signal: AbortSignal.timeout(5_000),
    });
    expect(stale.status).toBe(409);
    expect((await state('dj-1')).inbox).toHaveLength(2);

    // A wrong token through the sender: a non-zero exit with the gateway's answer.
    const refused = await run(['send', gw.url, 'dj-1', '{}', '--token', 'wrong-token-0123456789abcdef']);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.out)).toMatchObject({ status: 401 });
  });

  it('refuses every push without a valid proof, and a client reaches no receiver through the gateway', async () => {
    expect(await forgedPushes(`${backendUrl}/_roomgate/push`, 'dj', 'dj-forged', 1)).toEqual(EXPECTED_RECEIVER_ANSWERS);
    const inbox = (await state('dj-forged')).inbox;
    expect(inbox.map((m) => m.message)).toEqual([{ genuine: true }]);
    for (const target of ['/_roomgate/push?room=dj-forged', '/r/dj-forged/_roomgate/push']) {
      const r = await fetch(`${gw.url}${target}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Roomgate-Room': 'dj-forged' }, body: '{}', signal: AbortSignal.timeout(5_000) });
      expect(r.status, target).toBe(404);
    }
    expect((await state('dj-forged')).inbox).toHaveLength(1);
  });

  it('roomgate check-backend passes every push check against it (it serves no handoff hooks: --skip handoff)', async () => {
    const r = await runCliHere(['check-backend', backendUrl, '--id', 'dj', '--skip', 'handoff'], { ROOMGATE_BACKEND_KEYS: backendEnv('dj').ROOMGATE_BACKEND_KEYS as string });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('16 of 16 checks passed');
  });
});
