// The djust-shaped example (examples/djust-push/app.py, on roomgate_kit): two daphne processes
// (Debian's Django 3.2, Channels 4.0, daphne 4.0) behind a real gateway. Its page sees the room and
// its epoch; a push through the gateway lands in the room's state, its own sender pushes through
// the gateway, a push under an older epoch is refused, and so is every push without roomgate's
// proof; a client reaches no receiver through the gateway. A room moves between the two with
// resume while a client that behaves as djust's does (test/support/djust-client.mjs) clicks: its
// socket stays open, its versions continue on the new process with no event lost or doubled, and
// djust's HTTP fallback is answered there with the version that follows. `roomgate check-backend`
// passes every check against it, the resume handshake's among them.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signCall } from '../../src/http/call-proof.js';
import { runCliHere } from '../cli/in-process.js';
import { startDaphne, stopDaphnes, type DaphneApp } from '../support/daphne.js';
import { DjustClient } from '../support/djust-client.mjs';
import { hellosAnswered, moveRoom } from '../support/handoff-test-backend.js';
import { backendEnv, CALL_SECRET, ROOT, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { EXPECTED_RECEIVER_ANSWERS, forgedPushes, signedPushHeaders } from '../support/push-receiver.js';

const PYTHON = '/usr/bin/python3';
const DIR = join(ROOT, 'examples/djust-push');
const APP = join(DIR, 'app.py');
const TOKEN = 'push-token-0123456789abcdef';
const ADMIN = 'djust-example-admin-token-0123456789';
const IDS = ['dj-a', 'dj-b'] as const;
const apps = new Map<string, DaphneApp>();
const clients: DjustClient[] = [];
let gw: GatewayProc;

function run(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [APP, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
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
  const started = await Promise.all(IDS.map((id) => startDaphne(backendEnv(id), { cwd: DIR, asgi: 'app:application' })));
  IDS.forEach((id, i) => apps.set(id, started[i] as DaphneApp));
  gw = await startGateway({
    backends: IDS.map((id) => ({ id, url: (apps.get(id) as DaphneApp).url })),
    config: { health: { path: null }, push: { tokens: [TOKEN] }, admin: { enabled: true, host: '127.0.0.1', port: 0, token: ADMIN } },
  });
  // Sockets opened after every hello is known are made ready for a resume.
  await hellosAnswered(gw.adminPort, ADMIN);
}, 60_000);

afterAll(async () => {
  for (const c of clients.splice(0)) c.stop();
  await stopAll();
  await stopDaphnes();
});

interface RoomState {
  room: string;
  epoch: number | null;
  clicks: number;
  views: Record<string, number>;
  inbox: { id: string; sender: string; message: unknown }[];
}

const stateAt = async (id: string, room: string): Promise<RoomState> => (await (await fetch(`${(apps.get(id) as DaphneApp).url}/_state/${room}/`, { signal: AbortSignal.timeout(5_000) })).json()) as RoomState;

/** The backend that holds `room` (the one whose table has an epoch for it) and its state there. */
async function holder(room: string): Promise<{ id: string; url: string; state: RoomState }> {
  for (const id of IDS) {
    const state = await stateAt(id, room);
    if (state.epoch !== null) return { id, url: (apps.get(id) as DaphneApp).url, state };
  }
  throw new Error(`no backend holds ${room}`);
}

/** A djust client on the room's page through the gateway (the per-tab prefix routes it), with its page session cookie. */
function djust(room: string, session: string): DjustClient {
  const origin = `http://127.0.0.1:${gw.port}`;
  const pagePath = `/r/${room}/game/${room}/`;
  const cookie = `djust_session=${session}`;
  const WS = class extends WebSocket {
    constructor(url: string) {
      super(url, { origin, headers: { cookie } });
    }
  };
  const c = new DjustClient({
    WebSocket: WS,
    fetch: (url, init) => fetch(url, { ...init, headers: { ...init.headers, cookie }, signal: AbortSignal.timeout(15_000) }),
    location: { protocol: 'http:', host: `127.0.0.1:${gw.port}`, pathname: pagePath, href: `${origin}${pagePath}` },
    release: '3186',
    wsPath: `/r/${room}/ws/live/`,
    heartbeatMs: 0,
  });
  clients.push(c);
  return c.start();
}

/** Clicks once and waits for the answer (over the socket or the HTTP fallback). */
async function clickAndWait(c: DjustClient): Promise<void> {
  const ev = c.sendEvent('click');
  await waitFor(`click ${ev.ref} answered`, 10_000, () => (ev.ackedAt !== null || ev.failed !== null ? true : undefined), 10);
  expect(ev.failed).toBeNull();
}

describe('the djust-shaped example behind roomgate', () => {
  it("its page sees the room's epoch; a push and its own sender reach the room's state; an older epoch is refused", async () => {
    // Other rooms first, so this room's epoch is above 1 and an older one (not 0: "no placement") exists.
    for (const other of ['dj-x', 'dj-y']) expect((await fetch(`${gw.url}/game/${other}/?room=${other}`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
    const page = await fetch(`${gw.url}/game/dj-1/?room=dj-1`, { signal: AbortSignal.timeout(5_000) });
    expect(page.status).toBe(200);
    expect(page.headers.get('set-cookie')).toMatch(/^djust_session=[A-Za-z0-9_-]{16,}/);
    const epoch = Number(/epoch (\d+)/.exec(await page.text())?.[1]);
    expect(epoch).toBeGreaterThan(1);
    const at = await holder('dj-1');
    expect(at.state.epoch).toBe(epoch);

    const res = await fetch(`${gw.url}/_roomgate/api/rooms/dj-1/messages`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', 'X-Roomgate-Sender': 'room:lobby' },
      body: '{"type":"announce"}',
      signal: AbortSignal.timeout(5_000),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    expect((await stateAt(at.id, 'dj-1')).inbox).toEqual([{ id, sender: 'room:lobby', message: { type: 'announce' } }]);

    // The example's own sender, as a background job would run it.
    const sent = await run(['send', gw.url, 'dj-1', '{"n": 2}', '--token', TOKEN, '--sender', 'job:cron']);
    expect(sent.code).toBe(0);
    expect(JSON.parse(sent.out)).toMatchObject({ status: 202, answer: { room: 'dj-1', backend: at.id } });
    expect((await stateAt(at.id, 'dj-1')).inbox.at(-1)).toMatchObject({ sender: 'job:cron', message: { n: 2 } });

    // Straight to the receiver, signed but under an older epoch: refused, the state unchanged.
    const stale = await fetch(`${at.url}/_roomgate/push`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...signedPushHeaders(at.id, 'dj-1', epoch - 1, 'old-1', '{}') },
      body: '{}',
      signal: AbortSignal.timeout(5_000),
    });
    expect(stale.status).toBe(409);
    expect((await stateAt(at.id, 'dj-1')).inbox).toHaveLength(2);

    // A wrong token through the sender: a non-zero exit with the gateway's answer.
    const refused = await run(['send', gw.url, 'dj-1', '{}', '--token', 'wrong-token-0123456789abcdef']);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.out)).toMatchObject({ status: 401 });
  });

  it('refuses every push without a valid proof, and a client reaches no receiver through the gateway', async () => {
    const url = (apps.get('dj-a') as DaphneApp).url;
    expect(await forgedPushes(`${url}/_roomgate/push`, 'dj-a', 'dj-forged', 1)).toEqual(EXPECTED_RECEIVER_ANSWERS);
    expect((await stateAt('dj-a', 'dj-forged')).inbox.map((m) => m.message)).toEqual([{ genuine: true }]);
    for (const target of ['/_roomgate/push?room=dj-forged', '/r/dj-forged/_roomgate/push', '/_roomgate/handoff/hello?room=dj-forged']) {
      const r = await fetch(`${gw.url}${target}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Roomgate-Room': 'dj-forged' }, body: '{}', signal: AbortSignal.timeout(5_000) });
      expect(r.status, target).toBe(404);
    }
    expect((await stateAt('dj-a', 'dj-forged')).inbox).toHaveLength(1);
  });

  it("a move with resume: djust's socket stays open, its versions continue on the new process, no click lost or doubled; the HTTP fallback gets the version that follows", async () => {
    const room = 'dj-move';
    const session = 'sessionOfTheMovingTab01';
    const c = djust(room, session);
    await waitFor('mounted', 10_000, () => (c.mounted ? true : undefined));
    // A second tab of the room, another page session: it gets a patch for every click of the first.
    const other = djust(room, 'sessionOfTheOtherTab0002');
    await waitFor('mounted', 10_000, () => (other.mounted ? true : undefined));
    for (let i = 0; i < 5; i++) await clickAndWait(c);
    const from = await holder(room);
    const to = IDS.find((id) => id !== from.id) as string;
    // Clicks keep coming while the room moves: sent without waiting, each answered in the end.
    let clicking = true;
    const clicker = (async () => {
      while (clicking) {
        if (c.mounted) c.sendEvent('click');
        if (other.mounted) other.sendEvent('click');
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const moved = await moveRoom(gw.adminPort, ADMIN, room, to);
    clicking = false;
    await clicker;
    const duringMove = c.events.length + other.events.length - 5;
    expect(duringMove).toBeGreaterThan(0);
    expect(moved.result, JSON.stringify(moved)).toBe('moved');
    expect(moved.held, JSON.stringify(moved)).toMatchObject({ sockets: 2, resumed: 2, lostSockets: 0 });
    for (let i = 0; i < 5; i++) await clickAndWait(c);
    await waitFor('every click answered', 10_000, () => (c.unacknowledged().length + other.unacknowledged().length === 0 ? true : undefined), 20);

    // The sockets never closed, nothing was re-mounted, no page reload, no resync, nothing doubled.
    const clicks = c.events.length + other.events.length;
    // A tab's own clicks are answered above; the patch of the other tab's last click may still be
    // on its way to it (a lost one never comes: the wait fails).
    await waitFor('every patch of either tab at both', 10_000, () => (c.version === 1 + clicks && other.version === 1 + clicks ? true : undefined), 20);
    for (const tab of [c, other]) {
      expect(tab.closes).toEqual([]);
      expect(tab.mounts).toHaveLength(1);
      expect(tab.reloads).toEqual([]);
      expect(tab.resyncs).toBe(0);
      expect(tab.errors).toEqual([]);
      expect(tab.doubled()).toEqual([]);
      // The versions went on: one per click of either tab from the mount's 1, the later ones from the new process.
      expect(tab.version).toBe(1 + clicks);
    }
    const there = await stateAt(to, room);
    expect(there.clicks).toBe(clicks);
    expect(there.views[session]).toBe(c.version);
    expect((await stateAt(from.id, room)).epoch).toBeNull(); // released there

    // djust's HTTP fallback while its socket is closed (a network blip): the new process answers
    // with the version that follows the socket's, then the client reconnects and mounts again.
    const before = c.version as number;
    (c as unknown as { ws: WebSocket }).ws.terminate();
    await waitFor('the socket closed', 5_000, () => (c.closes.length === 1 ? true : undefined), 5);
    const viaHttp = c.sendEvent('click');
    expect(viaHttp.via).toBe('http');
    await viaHttp.done;
    expect(viaHttp.httpStatus).toBe(200);
    expect(c.version).toBe(before + 1);
    expect(c.reloads).toEqual([]);
    expect((await stateAt(to, room)).clicks).toBe(clicks + 1);
    // The other tab gets that click's patch over its socket, with its own next version.
    await waitFor("the other tab's patch", 5_000, () => (other.version === 2 + clicks ? true : undefined), 10);
    expect(other.resyncs).toBe(0);
    await waitFor('mounted again', 10_000, () => (c.mounts.length === 2 && c.mounted ? true : undefined));
  }, 60_000);

  it("djust's HTTP fallback from a page the room has no view of: the click applied and answered with a fresh view, never refused", async () => {
    // djust sends an X-Djust-Event POST once: a refusal would be a lost click.
    const room = 'dj-unseen';
    expect((await fetch(`${gw.url}/game/${room}/?room=${room}`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
    const post = (cookie?: string): Promise<Response> =>
      fetch(`${gw.url}/game/${room}/?room=${room}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Djust-Event': 'click', ...(cookie === undefined ? {} : { Cookie: `djust_session=${cookie}` }) },
        body: '{}',
        signal: AbortSignal.timeout(5_000),
      });
    const unseen = 'UnseenPage0123456789';
    const first = await post(unseen);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ version: 1, clicks: 1 });
    // The view is kept from then on: the next answer follows it.
    expect(await (await post(unseen)).json()).toEqual({ version: 2, clicks: 2 });
    // No cookie at all: applied too, a view of its own at 1 that nothing can name later.
    const anonymous = await post();
    expect(anonymous.status).toBe(200);
    expect(await anonymous.json()).toEqual({ version: 1, clicks: 3 });
    const at = await holder(room);
    expect(at.state.clicks).toBe(3);
    expect(at.state.views).toEqual({ [unseen]: 2 });
  });

  it("a failed resume's fallback: the messages hook applies a socket's held clicks once, skipping what is not a frame", async () => {
    const room = 'dj-move'; // held by the new process since the move above
    const at = await holder(room);
    const socket = 'CCCCCCCCCCCCCCCCCCCCCC';
    const click = JSON.stringify({ type: 'event', event: 'click', params: {}, ref: 1 });
    const body = JSON.stringify({ socket, messages: [{ text: 'not json' }, { text: click }, { binary: Buffer.from('\u0000').toString('base64') }, { text: '[1]' }, { text: click }] });
    const call = async (id: string, nowMs = Date.now()): Promise<number> => {
      const fields = { id, room, epoch: String(at.state.epoch), sender: 'gw-test', body: Buffer.from(body) };
      const proof = signCall([CALL_SECRET], { purpose: 'handoff-messages', destination: at.id, ...fields }, nowMs);
      const headers: Record<string, string> = { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': fields.epoch, 'X-Roomgate-Sender': 'gw-test', 'X-Roomgate-Socket': socket, 'Content-Type': 'application/json' };
      for (const i of [0, 2, 4]) headers[proof[i] as string] = proof[i + 1] as string;
      return (await fetch(`${at.url}/_roomgate/handoff/messages`, { method: 'POST', headers, body, signal: AbortSignal.timeout(5_000) })).status;
    };
    expect(await call('h-messages-1')).toBe(204);
    expect((await stateAt(at.id, room)).clicks).toBe(at.state.clicks + 2);
    // roomgate's retry, signed anew (a second later: the same second's proof would be a replay): applied once.
    expect(await call('h-messages-1', Date.now() + 1_000)).toBe(204);
    expect((await stateAt(at.id, room)).clicks).toBe(at.state.clicks + 2);
  });

  it("its roomgate-specific code (the lines marked # rg) is under 100 lines, the count docs/python-kit.md says", () => {
    const marked = readFileSync(APP, 'utf8').split('\n').filter((l) => l.includes('# rg')).length;
    expect(marked).toBeLessThan(100);
    expect(readFileSync(join(ROOT, 'docs/python-kit.md'), 'utf8')).toContain(`Its roomgate-specific code is ${marked} lines`);
  });

  it('roomgate check-backend passes every check against it, the resume handshake among them', async () => {
    const r = await runCliHere(['check-backend', (apps.get('dj-a') as DaphneApp).url, '--id', 'dj-a'], { ROOMGATE_BACKEND_KEYS: backendEnv('dj-a').ROOMGATE_BACKEND_KEYS as string });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/pass +hello: genuine: 200 \{"version": 2, "messages": true, "resume": true\}/);
    expect(r.stdout.match(/^pass +resume handshake: /gm)).toHaveLength(5);
    expect(r.stdout).toMatch(/(\d+) of \1 checks passed/);
  });
});
