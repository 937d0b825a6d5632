// The demo backend's resume (protocol version 2, on the backend kit): a room moved with a socket's
// own state, and the socket roomgate resumes at the new owner continues its session there: no
// `connect` greeting, the same session, the room mounted, and its view's `version` sequence going
// on. With --handoff-resume off (handoffResume: false) its hello offers messages only.
import { describe, expect, it } from 'vitest';
import { backendAt, hook, SECRETS, signed } from './backend-kit/clients.js';
import { demoInProcess } from './support/demo-in-process.js';

const SOCKET = 'CCCCCCCCCCCCCCCCCCCCCC';
const { demo: start, open } = demoInProcess();
const demo = (id: string, handoffResume = true) => start(id, { handoffResume });

describe('demo backend: resume', () => {
  it('a resumed socket goes on with its session on the new owner: no greeting, same session, its version sequence continued', async () => {
    const [a, b] = [await demo('d1'), await demo('d2')];
    const s = open(a.port, { 'X-Roomgate-Room': 'chess', 'X-Roomgate-Epoch': '3', 'X-Roomgate-Socket': SOCKET });
    const session = (await s.next('connect')).session_id;
    s.send({ type: 'mount', room: 'chess' });
    expect(await s.next('mounted')).toMatchObject({ version: 1, moves: 0 });
    s.send({ type: 'event', data: 'e4' });
    expect(await s.next('patch')).toMatchObject({ move: 1, version: 2 });
    const exported = await hook(SECRETS, backendAt('d1', a.port), 'export', { id: 'm1', room: 'chess', epoch: 3, body: '{"leaseMs":5000}' });
    const blob = exported.kind === 'answer' ? exported.body.toString() : '';
    expect(await hook(SECRETS, backendAt('d2', b.port), 'import', { id: 'm1', room: 'chess', epoch: 4, body: blob })).toMatchObject({ status: 204 });
    expect(await hook(SECRETS, backendAt('d1', a.port), 'release', { id: 'm1', room: 'chess', epoch: 3 })).toMatchObject({ status: 204 });
    const resumed = open(b.port, {
      ...signed(SECRETS, 'handoff-resume-socket', 'd2', { id: 'm1', room: 'chess', epoch: '4', body: SOCKET }),
      'X-Roomgate-Socket': SOCKET,
      'X-Roomgate-Resume': 'm1',
    });
    expect(await resumed.opened).toBe(101);
    resumed.send({ type: 'event', data: 'e5' });
    expect(await resumed.next('patch')).toMatchObject({ from: session, move: 2, version: 3 });
    expect(resumed.frames.filter((f) => f.type === 'connect' || f.type === 'mounted')).toEqual([]);
    const rooms = (await (await fetch(`http://127.0.0.1:${b.port}/_backend/rooms`)).json()) as { rooms: Record<string, number> };
    expect(rooms.rooms).toEqual({ chess: 1 });
  });

  it('--handoff-resume off: the hello offers messages only, and a resume handshake is refused', async () => {
    const a = await demo('d1', false);
    const hello = await hook(SECRETS, backendAt('d1', a.port), 'hello', { id: 'x' });
    expect(hello.kind === 'answer' ? JSON.parse(hello.body.toString()) : null).toEqual({ version: 2, messages: true });
    const c = open(a.port, { ...signed(SECRETS, 'handoff-resume-socket', 'd1', { id: 'm1', room: 'chess', epoch: '4', body: SOCKET }), 'X-Roomgate-Socket': SOCKET, 'X-Roomgate-Resume': 'm1' });
    expect(await c.opened).toBe(409);
  });
});
