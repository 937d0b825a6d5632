// The backend kit end to end, in this process: a small app on it (kit-app.ts) called by roomgate's
// own hook client and signer over real sockets. The fence on handshakes and mounts, the push
// receiver, the hooks (hello, export/import/release, the lease, 409s) and a resume: the socket's
// state in the export, the resumed socket attached to the imported room with no greeting.
import { afterEach, describe, expect, it } from 'vitest';
import { backendKeys } from '../../src/http/call-proof.js';
import { succeeded } from '../../src/runtime/handoff-calls.js';
import { backendAt, connect, hook, post, SECRETS, signed, withTimeout, type Client } from './clients.js';
import { startKitApp, type KitApp } from './kit-app.js';

const apps: KitApp[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.ws.terminate();
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function app(id: string, o: Parameters<typeof startKitApp>[2] = {}): Promise<KitApp> {
  const a = await startKitApp(id, () => backendKeys(SECRETS, id), o);
  apps.push(a);
  return a;
}

const SOCKET = 'AAAAAAAAAAAAAAAAAAAAAA';

function routed(a: KitApp, room: string, epoch: number, socket?: string): Client {
  const c = connect(a.port, { 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': String(epoch), ...(socket === undefined ? {} : { 'X-Roomgate-Socket': socket }) });
  clients.push(c);
  return c;
}

function pushTo(a: KitApp, id: string, room: string, epoch: number, body = '{"hi":1}'): Promise<{ status: number; sockets: string | undefined }> {
  return post(a.port, '/_roomgate/push', signed(SECRETS, 'push', id, { id: `p-${Math.random()}`, room, epoch: String(epoch), body }), body);
}

describe('backend kit: the fence', () => {
  it('a socket under an older epoch is refused before accept; after a release the old epoch is accepted and closed 1012, pushes under it 409', async () => {
    const a = await app('b1');
    const s = routed(a, 'r', 5);
    expect(await s.opened).toBe(101);
    await s.next('connect');
    expect(await routed(a, 'r', 4).opened).toBe(403);
    expect((await pushTo(a, 'b1', 'r', 5)).sockets).toBe('1');
    expect(succeeded(await hook(SECRETS, backendAt('b1', a.port), 'release', { id: 'h1', room: 'r', epoch: 5 }))).toBe(true);
    expect(await withTimeout(s.closed, 'release close')).toBe(1012);
    const late = routed(a, 'r', 5);
    expect(await late.opened).toBe(101);
    expect(await withTimeout(late.closed, 'fenced close')).toBe(1012);
    expect((await pushTo(a, 'b1', 'r', 5)).status).toBe(409);
    // A newer epoch is a new placement: the room starts again.
    expect((await pushTo(a, 'b1', 'r', 6)).status).toBe(204);
  });

  it('a mount of another room than the socket was routed for is refused once (4400), and so is a mount on a socket without a room key', async () => {
    const a = await app('b1');
    const s = routed(a, 'r', 1);
    await s.next('connect');
    s.send({ type: 'mount', room: 'other' });
    expect(await withTimeout(s.closed, 'wrong-room close')).toBe(4400);
    const keyless = connect(a.port);
    clients.push(keyless);
    await keyless.next('connect');
    keyless.send({ type: 'mount', room: 'r' });
    expect(await withTimeout(keyless.closed, 'keyless close')).toBe(4400);
    const right = routed(a, 'r', 1);
    await right.next('connect');
    right.send({ type: 'mount', room: 'r' });
    expect(await right.next('mounted')).toMatchObject({ count: 0 });
  });
});

describe('backend kit: the push receiver', () => {
  it('delivers to the room\'s sockets and counts them; refuses a replay, a fan-out proof and a wrong destination (403), no room (409)', async () => {
    const a = await app('b1');
    const [x, y] = [routed(a, 'r', 1), routed(a, 'r', 1)];
    await Promise.all([x.next('connect'), y.next('connect')]);
    const body = '{"hello":true}';
    const h = signed(SECRETS, 'push', 'b1', { id: 'p-1', room: 'r', epoch: '1', body });
    expect(await post(a.port, '/_roomgate/push', h, body)).toMatchObject({ status: 204, sockets: '2' });
    expect(await x.next('push')).toMatchObject({ message: { hello: true } });
    expect((await post(a.port, '/_roomgate/push', h, body)).status).toBe(403);
    expect((await post(a.port, '/_roomgate/push', signed(SECRETS, 'push-fanout', 'b1', { id: 'p-2', room: 'r', epoch: '1', body }), body)).status).toBe(403);
    expect((await post(a.port, '/_roomgate/push', signed(SECRETS, 'push', 'b2', { id: 'p-3', room: 'r', epoch: '1', body }), body)).status).toBe(403);
    expect((await post(a.port, '/_roomgate/push', signed(SECRETS, 'push', 'b1', { id: 'p-4', room: '', epoch: '', body }), body)).status).toBe(409);
    const fan = JSON.stringify({ rooms: [{ room: 'r', epoch: 1 }, { room: 'gone', epoch: 'x' }, { room: '__proto__', epoch: 1 }], message: { all: 1 } });
    const fanned = await post(a.port, '/_roomgate/push', { ...signed(SECRETS, 'push-fanout', 'b1', { id: 'f-1', room: '', epoch: '', body: fan }), 'X-Roomgate-Fanout': '1' }, fan);
    expect(fanned).toMatchObject({ status: 204, sockets: '2' });
  });
});

describe('backend kit: hostile calls', () => {
  it('a call without a proof that can hold is refused before its body is read (403, not 413); a signed one past the bound 413; an app part that throws 500, never a crash', async () => {
    const a = await app('b1', {
      maxBodyBytes: 1024,
      deliver: () => {
        throw new Error('the app broke');
      },
    });
    const big = 'x'.repeat(4096);
    expect((await post(a.port, '/_roomgate/push', { 'X-Roomgate-Room': 'r', 'X-Roomgate-Epoch': '1' }, big)).status).toBe(403);
    expect((await post(a.port, '/_roomgate/push', signed(SECRETS, 'push', 'b2', { id: 'p-0', room: 'r', epoch: '1', body: big }), big)).status).toBe(403);
    expect((await post(a.port, '/_roomgate/push', signed(SECRETS, 'push', 'b1', { id: 'p-1', room: 'r', epoch: '1', body: big }), big)).status).toBe(413);
    expect((await post(a.port, '/_roomgate/handoff/nope', {}, '')).status).toBe(404);
    const thrown = await post(a.port, '/_roomgate/push', signed(SECRETS, 'push', 'b1', { id: 'p-2', room: 'r', epoch: '1', body: '{}' }), '{}');
    expect([thrown.status, JSON.parse(thrown.text)]).toEqual([500, { error: 'the call could not be served' }]);
    expect(a.seen.some((l) => l.includes('the app broke'))).toBe(true);
    expect((await post(a.port, '/_roomgate/push', signed(SECRETS, 'push', 'b1', { id: 'p-3', room: '', epoch: '', body: '{}' }), '{}')).status).toBe(409);
  });
});

describe('backend kit: the handoff hooks', () => {
  it('hello says what the app gives: version 2 with messages and resume; resume off; version 1', async () => {
    const hello = async (a: KitApp): Promise<unknown> => {
      const r = await hook(SECRETS, backendAt(a.kit === undefined ? '' : 'b1', a.port), 'hello', { id: 'hello-1' });
      return r.kind === 'answer' ? JSON.parse(r.body.toString()) : r;
    };
    expect(await hello(await app('b1'))).toEqual({ version: 2, messages: true, resume: true });
    expect(await hello(await app('b1', { resume: false }))).toEqual({ version: 2, messages: true });
    expect(await hello(await app('b1', { handoffVersion: 1 }))).toEqual({ version: 1 });
  });

  it('export freezes (an event is refused, not lost), the same id gets the same blob, another id 409; the lease lifts the freeze', async () => {
    const a = await app('b1');
    const b1 = backendAt('b1', a.port);
    const s = routed(a, 'r', 3);
    await s.next('connect');
    s.send({ type: 'mount', room: 'r' });
    await s.next('mounted');
    s.send({ type: 'event' });
    expect(await s.next('count')).toMatchObject({ count: 1 });
    // A lease of 2 s: the calls that must land inside it take well under that even on a loaded machine
    // (a 300 ms lease ran out before the room-moving check once, at load 20).
    const first = await hook(SECRETS, b1, 'export', { id: 'h1', room: 'r', epoch: 3, body: '{"leaseMs":2000}' });
    // A retry is signed anew; a retry within the same second would be the same proof (a replay), so
    // its body differs in a space, as a retry made a second later differs in its timestamp.
    const again = await hook(SECRETS, b1, 'export', { id: 'h1', room: 'r', epoch: 3, body: '{"leaseMs": 2000}' });
    expect(first.kind === 'answer' && again.kind === 'answer' && first.status === 200 && first.body.equals(again.body)).toBe(true);
    expect(await hook(SECRETS, b1, 'export', { id: 'h2', room: 'r', epoch: 3, body: '{"leaseMs":2000}' })).toMatchObject({ status: 409 });
    s.send({ type: 'event' });
    expect(await s.next('error')).toMatchObject({ error: 'room-moving' });
    await withTimeout(new Promise((r) => setTimeout(r, 2_100)), 'the lease');
    s.send({ type: 'event' });
    expect(await s.next('count')).toMatchObject({ count: 2 });
    expect(await hook(SECRETS, b1, 'export', { id: 'h1', room: 'r', epoch: 3, body: '{"leaseMs":  2000}' })).toMatchObject({ status: 409 });
    expect(await hook(SECRETS, b1, 'import', { id: 'h3', room: 'r', epoch: 2, body: first.kind === 'answer' ? first.body.toString() : '' })).toMatchObject({ status: 409 });
  });
});

/** The resume handshake roomgate opens at the new owner: signed for handoff-resume-socket over the socket id. */
function resumeHeaders(id: string, room: string, epoch: number, handoff: string, socket: string, purpose: 'handoff-resume-socket' | 'handoff-resume' = 'handoff-resume-socket'): Record<string, string> {
  // A sender of its own per handshake: two made in one second would otherwise be the same proof.
  const sender = `gw-${Math.random().toString(36).slice(2)}`;
  return { ...signed(SECRETS, purpose, id, { id: handoff, room, epoch: String(epoch), body: socket, sender }), 'X-Roomgate-Socket': socket, 'X-Roomgate-Resume': handoff };
}

function resumeAt(a: KitApp, headers: Record<string, string>): Client {
  const c = connect(a.port, headers);
  clients.push(c);
  return c;
}

describe('backend kit: version 2', () => {
  it('resume: the socket\'s state travels in the export; the resumed socket joins the imported room with no greeting and its session goes on', async () => {
    const [a, b] = [await app('b1'), await app('b2')];
    const s = routed(a, 'r', 3, SOCKET);
    await s.next('connect');
    s.send({ type: 'mount', room: 'r' });
    await s.next('mounted');
    s.send({ type: 'event' });
    expect(await s.next('count')).toMatchObject({ count: 1, n: 3 });
    const blob = await hook(SECRETS, backendAt('b1', a.port), 'export', { id: 'h1', room: 'r', epoch: 3, body: '{"leaseMs":5000}' });
    expect(blob.kind === 'answer' && blob.status).toBe(200);
    const body = blob.kind === 'answer' ? blob.body.toString() : '';
    expect(await hook(SECRETS, backendAt('b2', b.port), 'import', { id: 'h1', room: 'r', epoch: 4, body })).toMatchObject({ status: 204 });
    expect(b.counts.get('r')).toBe(1);
    // Refused, each before anything is attached: another purpose, another backend, a socket not in the export.
    expect(await resumeAt(b, resumeHeaders('b2', 'r', 4, 'h1', SOCKET, 'handoff-resume')).opened).toBe(403);
    expect(await resumeAt(b, resumeHeaders('b1', 'r', 4, 'h1', SOCKET)).opened).toBe(403);
    expect(await resumeAt(b, resumeHeaders('b2', 'r', 4, 'h1', 'BBBBBBBBBBBBBBBBBBBBBB')).opened).toBe(409);
    expect(await resumeAt(b, resumeHeaders('b2', 'r', 4, 'h9', SOCKET)).opened).toBe(409);
    const headers = resumeHeaders('b2', 'r', 4, 'h1', SOCKET);
    const resumed = resumeAt(b, headers);
    expect(await resumed.opened).toBe(101);
    resumed.send({ type: 'event' });
    // The first frame it gets is the answer to its event: no greeting, and the session's frame count goes on.
    expect(await resumed.next('count')).toMatchObject({ count: 2, n: 4 });
    expect(resumed.frames).toEqual([]);
    expect(b.seen).toContain(`resumed r ${SOCKET} s0`);
    expect(b.seen.filter((l) => l.startsWith('greeted'))).toEqual([]);
    // A push reaches it as a socket of the room; the same handshake again is a replay; a new one finds no state.
    expect((await pushTo(b, 'b2', 'r', 4)).sockets).toBe('1');
    expect(await resumeAt(b, headers).opened).toBe(403);
    expect(await resumeAt(b, resumeHeaders('b2', 'r', 4, 'h1', SOCKET)).opened).toBe(409);
    expect(await resumeAt(a, resumeHeaders('b1', 'r', 3, 'h1', SOCKET)).opened).toBe(409); // frozen there
  });

  it('an app without resume refuses the resume handshake (409) and exports its own blob as is; messages are applied once', async () => {
    const a = await app('b1', { resume: false });
    const s = routed(a, 'r', 2, SOCKET);
    await s.next('connect');
    s.send({ type: 'mount', room: 'r' });
    await s.next('mounted');
    s.send({ type: 'event' });
    await s.next('count');
    const blob = await hook(SECRETS, backendAt('b1', a.port), 'export', { id: 'h1', room: 'r', epoch: 2, body: '{"leaseMs":5000}' });
    expect(blob.kind === 'answer' ? JSON.parse(blob.body.toString()) : null).toEqual({ room: 'r', count: 1 });
    expect(await hook(SECRETS, backendAt('b1', a.port), 'resume', { id: 'h1', room: 'r', epoch: 2 })).toMatchObject({ status: 204 });
    expect(await resumeAt(a, resumeHeaders('b1', 'r', 2, 'h1', SOCKET)).opened).toBe(409);
    const held = JSON.stringify({ socket: SOCKET, messages: [{ text: '{"type":"event"}' }, { binary: 'AAE=' }] });
    const call = { id: 'h2', room: 'r', epoch: 2, body: held, socket: SOCKET };
    expect(await hook(SECRETS, backendAt('b1', a.port), 'messages', call)).toMatchObject({ status: 204 });
    expect(await hook(SECRETS, backendAt('b1', a.port), 'messages', { ...call, body: `${held} ` })).toMatchObject({ status: 204 });
    expect(a.seen.filter((l) => l.startsWith('applied'))).toEqual([`applied r ${SOCKET} 2`]);
    expect(a.counts.get('r')).toBe(3);
    expect(await hook(SECRETS, backendAt('b1', a.port), 'messages', { ...call, id: 'h3', body: '{"socket":"x","messages":[]}' })).toMatchObject({ status: 400 });
  });
});
