// What every app that serves the room handoff's hooks must guarantee (docs/handoff.md, "The
// protocol"), checked against any backend that speaks the demo's djust-shaped protocol (connect,
// mount -> mounted with `moves`, event -> patch with `move`): the demo backend and the Django
// Channels example run the same list. Calls go straight to the backends, signed as roomgate signs
// them; sockets open as roomgate routes them (X-Roomgate-Room, X-Roomgate-Epoch). Every check uses
// rooms of its own, so the checks are independent and can run against backends already in use.
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { signCall, type CallPurpose } from '../../src/http/call-proof.js';
import { CALL_SECRET, Client, waitFor, withTimeout } from './processes.js';

export interface HandoffBackend {
  /** Its id as roomgate names it: every call's proof is made for it (its own key). */
  readonly id: string;
  /** http://host:port of the backend itself. */
  readonly url: string;
  /** ws://host:port/ws/live/ */
  readonly wsUrl: string;
}

export interface HandoffContract {
  /** The room's owner (exports, is released or resumed). */
  readonly a: HandoffBackend;
  /** The second backend (imports). */
  readonly b: HandoffBackend;
  /** handoff.path as the backends serve it. */
  readonly path: string;
  /** push.path as the backends serve it (the epoch fence applies to pushes too). */
  readonly pushPath: string;
  /** Prefix of the rooms the checks use. */
  readonly prefix: string;
  /**
   * The close code a released (or fenced) socket gets: 1012 (service restart) as the protocol
   * asks; 1000 under Daphne, whose Autobahn sends no other code below 3000 from a server.
   */
  readonly releaseCloseCode: 1012 | 1000;
  /** What its hello answers: {"version": 1}, or {"version": 2, "messages": true} for an app that takes held messages. */
  readonly hello: Readonly<Record<string, unknown>>;
  /** How many moves a backend holds of a room (0: nothing), by the app's own test route. */
  heldMoves(be: HandoffBackend, room: string): Promise<number>;
}

type Step = 'hello' | 'export' | 'import' | 'release' | 'resume';

interface CallOptions {
  readonly id?: string;
  readonly room?: string;
  /** A string: an epoch no JavaScript number holds exactly. */
  readonly epoch?: number | string;
  readonly body?: string | Buffer;
  /** The purpose the proof is made for (default: the step's own). */
  readonly purpose?: CallPurpose;
  readonly nowMs?: number;
  readonly secret?: string;
  /** The room the proof is made for, when it is not the one the call names. */
  readonly proofRoom?: string;
  /** The backend the proof is made for (default: the one called), and the destination it names. */
  readonly proofFor?: string;
  /** X-Roomgate-Destination as sent, when it differs from the backend the proof was made for. */
  readonly destinationField?: string;
  /** Replaces the proof fields: a replay sends the very headers of an earlier call. */
  readonly headers?: Record<string, string>;
}

export interface CallAnswer {
  readonly status: number;
  readonly type: string | null;
  readonly body: Buffer;
  /** The headers it was sent with (to replay it). */
  readonly sent: Record<string, string>;
}

/** One call to a hook, signed as roomgate signs it unless told otherwise. */
export async function callHook(be: HandoffBackend, path: string, step: Step, o: CallOptions = {}): Promise<CallAnswer> {
  const body = Buffer.isBuffer(o.body) ? o.body : Buffer.from(o.body ?? (step === 'export' ? '{"leaseMs":10000}' : ''));
  const id = o.id ?? `hello-${randomBytes(6).toString('hex')}`;
  const room = o.room ?? '';
  const epoch = o.epoch === undefined ? '' : String(o.epoch);
  const fields: Record<string, string> = { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': 'gw-test' };
  if (room !== '') fields['X-Roomgate-Room'] = room;
  if (epoch !== '') fields['X-Roomgate-Epoch'] = epoch;
  const destination = o.proofFor ?? be.id;
  const proof = signCall([o.secret ?? CALL_SECRET], { purpose: o.purpose ?? `handoff-${step}`, destination, id, room: o.proofRoom ?? room, epoch, sender: 'gw-test', body }, o.nowMs ?? Date.now());
  const signed: Record<string, string> = Object.fromEntries([0, 2, 4].map((i) => [proof[i] as string, proof[i + 1] as string]));
  if (o.destinationField !== undefined) signed['X-Roomgate-Destination'] = o.destinationField;
  const sent = o.headers ?? { ...fields, ...signed };
  const res = await fetch(`${be.url}${path}/${step}`, { method: 'POST', headers: sent, body, signal: AbortSignal.timeout(5_000) });
  return { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()), sent };
}

/** A socket of `room` as roomgate routes it under `epoch`, mounted; with the `mounted` frame. */
export async function joinRoom(be: HandoffBackend, room: string, epoch: number): Promise<{ c: Client; mounted: Record<string, unknown> }> {
  const c = new Client(be.wsUrl, { headers: { 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': String(epoch), Origin: be.url } });
  await c.opened;
  await c.next('connect', 5_000);
  c.send({ type: 'mount', room, url: `/game/${room}/` });
  return { c, mounted: await c.next('mounted', 5_000) };
}

const ofType = (c: Client, type: string): Record<string, unknown>[] => c.messages.filter((m) => m.type === type);

/** Sends a move and waits for what it got: the `patch` acknowledging it, or an `error`. */
export async function move(c: Client, data: unknown): Promise<Record<string, unknown>> {
  const [patches, errors] = [ofType(c, 'patch').length, ofType(c, 'error').length];
  c.send({ type: 'event', data });
  return waitFor('the answer to a move', 5_000, () => (ofType(c, 'patch').length > patches ? ofType(c, 'patch')[patches] : ofType(c, 'error')[errors]));
}

async function closeAll(...clients: Client[]): Promise<void> {
  await Promise.all(clients.map((c) => withTimeout(c.close(), 5_000, 'socket close').catch(() => undefined)));
}

/** A fresh room on `a` under epoch 1 with `n` moves acknowledged; its socket stays open. */
async function roomWithMoves(k: HandoffContract, name: string, n: number): Promise<{ room: string; c: Client }> {
  const room = `${k.prefix}-${name}-${randomBytes(3).toString('hex')}`;
  const { c } = await joinRoom(k.a, room, 1);
  for (let i = 1; i <= n; i++) expect(await move(c, { i })).toMatchObject({ type: 'patch', move: i });
  return { room, c };
}

/** A second later than now: a retry signs anew, so its proof differs from the first call's. */
const later = (): number => Date.now() + 1_000;
const ROOM_MOVING = { type: 'error', error: 'room-moving', retry: true };

export interface Guarantee {
  readonly name: string;
  check(k: HandoffContract): Promise<void>;
}

export const HANDOFF_GUARANTEES: readonly Guarantee[] = [
  {
    name: 'hello answers its version as JSON ({"version":1}, or {"version":2,"messages":true} with "resume":true when it resumes sockets)',
    async check(k) {
      const a = await callHook(k.a, k.path, 'hello');
      expect([a.status, a.type?.split(';')[0], JSON.parse(a.body.toString())]).toEqual([200, 'application/json', k.hello]);
    },
  },
  {
    name: 'export answers the state as an opaque blob and freezes the room; an event while frozen gets the client-visible refusal, and a room not held here 404',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'export', 3);
      const x = await callHook(k.a, k.path, 'export', { id: `h-${room}`, room, epoch: 1 });
      expect([x.status, x.type?.split(';')[0], x.body.length > 0]).toEqual([200, 'application/octet-stream', true]);
      expect(await move(c, { late: true })).toMatchObject(ROOM_MOVING);
      // The refused move is not in the room: a socket that mounts now sees the 3 taken before.
      const other = await joinRoom(k.a, room, 1);
      expect(other.mounted.moves).toBe(3);
      expect(c.ws.readyState).toBe(c.ws.OPEN);
      expect((await callHook(k.a, k.path, 'resume', { id: `h-${room}`, room, epoch: 1 })).status).toBeLessThan(300);
      const none = await callHook(k.a, k.path, 'export', { id: `h-none-${room}`, room: `${room}-nowhere`, epoch: 1 });
      expect(none.status).toBe(404);
      await closeAll(c, other.c);
    },
  },
  {
    name: 'import on a second backend restores the room under the new epoch: its mounted reports the same moves',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'import', 4);
      const id = `h-${room}`;
      const x = await callHook(k.a, k.path, 'export', { id, room, epoch: 1 });
      expect(x.status).toBe(200);
      const i = await callHook(k.b, k.path, 'import', { id, room, epoch: 2, body: x.body });
      expect(i.status).toBeGreaterThanOrEqual(200);
      expect(i.status).toBeLessThan(300);
      const there = await joinRoom(k.b, room, 2);
      expect(there.mounted.moves).toBe(4);
      // The game goes on there, from where it was.
      expect(await move(there.c, { after: true })).toMatchObject({ type: 'patch', move: 5 });
      // A blob of another room, or no blob at all, restores nothing.
      expect((await callHook(k.b, k.path, 'import', { id: `${id}-other`, room: `${room}-other`, epoch: 2, body: x.body })).status).toBe(400);
      expect((await callHook(k.b, k.path, 'import', { id: `${id}-junk`, room: `${room}-junk`, epoch: 2, body: '{"v":1' })).status).toBe(400);
      await callHook(k.a, k.path, 'release', { id, room, epoch: 1 });
      await closeAll(c, there.c);
    },
  },
  {
    name: "the epochs roomgate's Redis store issues are taken: 16 digits (ms x 1000), up to 2^53 - 1",
    async check(k) {
      // The Redis placement store's epochs never fall below the clock in microseconds-ish units
      // (src/placement/redis-store.ts): 1.8e15 today, 16 digits. A receiver that reads fewer
      // digits refuses every handoff of a deployment that shares placements through Redis.
      const epoch = Date.now() * 1000;
      const { room, c: mover } = await roomWithMoves(k, 'redis-epoch', 2);
      const id = `h-${room}`;
      const x = await callHook(k.a, k.path, 'export', { id, room, epoch });
      expect(x.status).toBe(200);
      const i = await callHook(k.b, k.path, 'import', { id, room, epoch: epoch + 1, body: x.body });
      expect(i.status).toBeLessThan(300);
      expect((await callHook(k.a, k.path, 'release', { id, room, epoch })).status).toBeLessThan(300);
      const there = await joinRoom(k.b, room, epoch + 1);
      expect(there.mounted.moves).toBe(2);
      // Past 2^53 - 1 an epoch is no longer an exact integer: refused, never rounded.
      expect((await callHook(k.a, k.path, 'export', { id: `${id}-big`, room, epoch: '9007199254740993' })).status).toBe(400);
      await closeAll(mover, there.c);
    },
  },
  {
    name: "release closes the room's sockets with 1012 (1000 under Daphne) and drops its state; the epoch fence then refuses the old epoch (socket closed the same way, push 409)",
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'release', 2);
      const unmounted = new Client(k.a.wsUrl, { headers: { 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '1', Origin: k.a.url } });
      await unmounted.next('connect', 5_000);
      const id = `h-${room}`;
      expect((await callHook(k.a, k.path, 'export', { id, room, epoch: 1 })).status).toBe(200);
      const r = await callHook(k.a, k.path, 'release', { id, room, epoch: 1 });
      expect(r.status).toBeGreaterThanOrEqual(200);
      expect(r.status).toBeLessThan(300);
      expect(await withTimeout(c.closed, 5_000, 'the mounted socket closed')).toBe(k.releaseCloseCode);
      expect(await withTimeout(unmounted.closed, 5_000, 'the routed socket closed')).toBe(k.releaseCloseCode);
      const late = new Client(k.a.wsUrl, { headers: { 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '1', Origin: k.a.url } });
      expect(await withTimeout(late.closed, 5_000, 'a late socket closed')).toBe(k.releaseCloseCode);
      const body = '{"late":true}';
      const p = signCall([CALL_SECRET], { purpose: 'push', destination: k.a.id, id: `p-${room}`, room, epoch: '1', sender: 'api', body: Buffer.from(body) }, Date.now());
      const pushed = await fetch(`${k.a.url}${k.pushPath}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '1', 'X-Roomgate-Message-Id': `p-${room}`, 'X-Roomgate-Sender': 'api', ...Object.fromEntries([0, 2, 4].map((i) => [p[i] as string, p[i + 1] as string])) },
        body,
        signal: AbortSignal.timeout(5_000),
      });
      expect(pushed.status).toBe(409);
      expect(await k.heldMoves(k.a, room)).toBe(0);
      // Nothing of the room was kept: if it comes back here (a newer epoch), it starts from 0.
      const back = await joinRoom(k.a, room, 3);
      expect(back.mounted.moves).toBe(0);
      await closeAll(back.c);
    },
  },
  {
    name: 'resume lifts the freeze: the next event is taken, after the ones in the blob',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'resume', 2);
      const id = `h-${room}`;
      expect((await callHook(k.a, k.path, 'export', { id, room, epoch: 1 })).status).toBe(200);
      expect(await move(c, { frozen: true })).toMatchObject(ROOM_MOVING);
      const r = await callHook(k.a, k.path, 'resume', { id, room, epoch: 1 });
      expect([r.status >= 200, r.status < 300]).toEqual([true, true]);
      expect(await move(c, { again: true })).toMatchObject({ type: 'patch', move: 3 });
      await closeAll(c);
    },
  },
  {
    name: 'an export that arrives after roomgate resumed the handoff (it gave up waiting) is refused 409: the room is not frozen for a lease',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'late', 1);
      const id = `h-${room}`;
      const r = await callHook(k.a, k.path, 'resume', { id, room, epoch: 1 });
      expect([r.status >= 200, r.status < 300]).toEqual([true, true]);
      expect((await callHook(k.a, k.path, 'export', { id, room, epoch: 1, nowMs: later() })).status).toBe(409);
      expect(await move(c, { notFrozen: true })).toMatchObject({ type: 'patch', move: 2 });
      await closeAll(c);
    },
  },
  {
    name: 'the freeze is a lease: without release or resume the room resumes by itself after leaseMs',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'lease', 1);
      expect((await callHook(k.a, k.path, 'export', { id: `h-${room}`, room, epoch: 1, body: '{"leaseMs":300}' })).status).toBe(200);
      expect(await move(c, { early: true })).toMatchObject(ROOM_MOVING);
      // Polled (never a timing assertion): the room takes moves again within a few seconds.
      const taken = await waitFor('the lease to expire', 10_000, async () => {
        const answer = await move(c, { retry: true });
        if (answer.type === 'patch') return answer;
        await new Promise((r) => setTimeout(r, 100));
        return undefined;
      });
      expect(taken).toMatchObject({ move: 2 });
      await closeAll(c);
    },
  },
  {
    name: 'a call without a valid proof is refused with 403 and changes nothing: unsigned, another secret, stale, another purpose, another room, another backend, replayed',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'forged', 1);
      const id = `h-${room}`;
      const exp = (o: CallOptions): Promise<number> => callHook(k.a, k.path, 'export', { id, room, epoch: 1, ...o }).then((a) => a.status);
      const attempts = {
        unsigned: await exp({ headers: { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '1' } }),
        'another secret': await exp({ secret: 'another-secret-0123456789abcdef0123' }),
        'stale (2 minutes old)': await exp({ nowMs: Date.now() - 120_000 }),
        'made for import': await exp({ purpose: 'handoff-import' }),
        'made for a push': await exp({ purpose: 'push' }),
        'made for another room': await exp({ proofRoom: `${room}-other` }),
        // Hardening: one pod can neither replay another's calls nor sign one for another.
        'made for another backend (a replay)': await exp({ proofFor: k.b.id }),
        "another backend's key naming this backend": await exp({ proofFor: k.b.id, destinationField: k.a.id }),
        'hello signed as export': (await callHook(k.a, k.path, 'hello', { purpose: 'handoff-export' })).status,
      };
      expect(attempts).toEqual(Object.fromEntries(Object.keys(attempts).map((name) => [name, 403])));
      expect(await move(c, { stillLive: true })).toMatchObject({ type: 'patch', move: 2 });
      // A genuine export, then its very request again: a replay (a retry signs anew).
      const genuine = await callHook(k.a, k.path, 'export', { id, room, epoch: 1 });
      expect(genuine.status).toBe(200);
      expect((await callHook(k.a, k.path, 'export', { id, room, epoch: 1, headers: genuine.sent })).status).toBe(403);
      const resumed = await callHook(k.a, k.path, 'resume', { id, room, epoch: 1 });
      expect((await callHook(k.a, k.path, 'resume', { id, room, epoch: 1, headers: resumed.sent })).status).toBe(403);
      await closeAll(c);
    },
  },
  {
    name: 'idempotent by handoff id: export again answers the same blob, import, release and resume again answer 2xx',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'again', 2);
      const id = `h-${room}`;
      const first = await callHook(k.a, k.path, 'export', { id, room, epoch: 1 });
      const second = await callHook(k.a, k.path, 'export', { id, room, epoch: 1, nowMs: later() });
      expect([first.status, second.status]).toEqual([200, 200]);
      expect(second.body.equals(first.body)).toBe(true);
      const ok = (s: number): boolean => s >= 200 && s < 300;
      const imports = [await callHook(k.b, k.path, 'import', { id, room, epoch: 2, body: first.body }), await callHook(k.b, k.path, 'import', { id, room, epoch: 2, body: first.body, nowMs: later() })];
      expect(imports.map((a) => ok(a.status))).toEqual([true, true]);
      const releases = [await callHook(k.a, k.path, 'release', { id, room, epoch: 1 }), await callHook(k.a, k.path, 'release', { id, room, epoch: 1, nowMs: later() })];
      expect(releases.map((a) => ok(a.status))).toEqual([true, true]);
      expect(await withTimeout(c.closed, 5_000, 'released socket')).toBe(k.releaseCloseCode);
      // A rolled-back handoff: resume twice.
      const other = await roomWithMoves(k, 'again-resume', 1);
      const rid = `h-${other.room}`;
      expect((await callHook(k.a, k.path, 'export', { id: rid, room: other.room, epoch: 1 })).status).toBe(200);
      const resumes = [await callHook(k.a, k.path, 'resume', { id: rid, room: other.room, epoch: 1 }), await callHook(k.a, k.path, 'resume', { id: rid, room: other.room, epoch: 1, nowMs: later() })];
      expect(resumes.map((a) => ok(a.status))).toEqual([true, true]);
      expect(await move(other.c, { after: true })).toMatchObject({ type: 'patch', move: 2 });
      await closeAll(other.c);
    },
  },
  {
    name: 'hostile calls get a 4xx, never a crash, and leave the room live: unknown step, GET, a bad lease, no room, no epoch, an oversized blob',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'hostile', 1);
      const id = `h-${room}`;
      const raw = async (step: string, method: string): Promise<number> => {
        const res = await fetch(`${k.a.url}${k.path}/${step}`, { method, signal: AbortSignal.timeout(5_000) });
        await res.arrayBuffer();
        return res.status;
      };
      const exp = (o: CallOptions): Promise<number> => callHook(k.a, k.path, 'export', { id, ...o }).then((a) => a.status);
      const statuses = {
        'unknown step': await raw('explode', 'POST'),
        GET: await raw('export', 'GET'),
        'negative lease': await exp({ room, epoch: 1, body: '{"leaseMs":-1}' }),
        'lease not a number': await exp({ room, epoch: 1, body: '{"leaseMs":"10"}' }),
        'body not an object': await exp({ room, epoch: 1, body: '[1]' }),
        'no room': await exp({ epoch: 1 }),
        'no epoch': await exp({ room }),
        'epoch not a number': await exp({ room, epoch: -3 }),
        'a 3 MB blob': (await callHook(k.b, k.path, 'import', { id, room, epoch: 2, body: Buffer.alloc(3 << 20, 32) })).status,
      };
      for (const [name, status] of Object.entries(statuses)) expect([name, status >= 400 && status < 500]).toEqual([name, true]);
      expect([statuses['unknown step'], statuses.GET]).toEqual([404, 405]);
      expect(await move(c, { stillLive: true })).toMatchObject({ type: 'patch', move: 2 });
      expect((await callHook(k.a, k.path, 'hello')).status).toBe(200);
      await closeAll(c);
    },
  },
  {
    name: 'a second handoff of a frozen room answers 409 (export, release and resume under another id); the first one goes on',
    async check(k) {
      const { room, c } = await roomWithMoves(k, 'second', 1);
      const id = `h-${room}`;
      expect((await callHook(k.a, k.path, 'export', { id, room, epoch: 1 })).status).toBe(200);
      expect((await callHook(k.a, k.path, 'export', { id: `${id}-2`, room, epoch: 1 })).status).toBe(409);
      expect((await callHook(k.a, k.path, 'release', { id: `${id}-2`, room, epoch: 1 })).status).toBe(409);
      expect((await callHook(k.a, k.path, 'resume', { id: `${id}-2`, room, epoch: 1 })).status).toBe(409);
      expect(await move(c, { frozen: true })).toMatchObject(ROOM_MOVING);
      expect((await callHook(k.a, k.path, 'resume', { id, room, epoch: 1 })).status).toBeLessThan(300);
      expect(await move(c, { after: true })).toMatchObject({ type: 'patch', move: 2 });
      await closeAll(c);
    },
  },
];
