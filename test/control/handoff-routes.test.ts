// The admin API's room handoff with inject() (no port) over a fake RuntimeView: POST
// /rooms/{room}/move (token, room key, body rules, each outcome's status and error code with the
// handoff record inside), the drain's handoff flag, and the handoffs in GET /events. The same
// routes through a real gateway and real hook calls: test/integration/handoff.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '../../src/control/control-plane.js';
import type { HandoffOutcome } from '../../src/runtime/views.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { FakeView, fakeHandoff, makeControl } from '../support/control.js';

const TOKEN = 'admin-token-0123456789abcdef';
const HOST = { host: '127.0.0.1:9090' };

let control: ControlPlane;
let view: FakeView;

beforeAll(async () => {
  const store = new MemorySharedDataStore('gw-admin', { presenceTtlMs: 60_000 });
  ({ control, view } = makeControl(store, { admin: { token: TOKEN }, room: { pattern: '^[a-z0-9-]{1,20}$' } }));
  await control.ready();
});

afterAll(async () => {
  await control.close();
});

function post(url: string, body: string | undefined, token: string | undefined = TOKEN) {
  const app = control.adminApp;
  if (!app) throw new Error('no admin app');
  return app.inject({ method: 'POST', url, headers: { ...HOST, ...(token ? { authorization: `Bearer ${token}` } : {}) }, ...(body === undefined ? {} : { payload: body }) });
}

describe('POST /rooms/{room}/move', () => {
  it('moves the room: 200 with the handoff record; the id is passed on', async () => {
    const r = await post('/rooms/chess/move', '{"to":"b2","id":"h-42"}');
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ handoff: fakeHandoff({ id: 'h-42', room: 'chess', to: 'b2' }) });
    expect(view.moves.at(-1)).toEqual({ room: 'chess', to: 'b2', id: 'h-42' });
  });

  it('needs the token; checks the room key and the body before anything moves', async () => {
    const before = view.moves.length;
    expect((await post('/rooms/chess/move', '{"to":"b2"}', '')).statusCode).toBe(401);
    expect((await post('/rooms/chess/move', '{"to":"b2"}', 'wrong-token-0123456789')).statusCode).toBe(401);
    const bad = await post('/rooms/NOT_VALID/move', '{"to":"b2"}');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('invalid_room_key');
    for (const [body, message] of [
      ['{}', 'give "to": the id of the backend the room moves to'],
      ['{"to":""}', undefined],
      ['{"to":"b2","extra":1}', undefined],
      ['{"to":"b2","id":"with space"}', 'id must be 1 to 128 visible ASCII characters'],
      ['[1]', 'body must be a JSON object'],
      ['not json', 'body must be a JSON object'],
    ] as const) {
      const r = await post('/rooms/chess/move', body);
      expect(r.statusCode, body).toBe(400);
      if (message) expect(r.json().error.message, body).toBe(message);
    }
    expect(view.moves.length).toBe(before);
  });

  it('each outcome: its status and error code, the reason as the message, the record inside', async () => {
    const cases: [HandoffOutcome, number, string][] = [
      [{ refusal: 'store-unavailable', event: fakeHandoff({ result: 'refused', reason: 'store down' }) }, 503, 'store_unavailable'],
      [{ refusal: 'too-many', event: fakeHandoff({ result: 'refused', reason: 'busy' }) }, 503, 'unavailable'],
      [{ refusal: 'unknown-backend', event: fakeHandoff({ result: 'refused', reason: 'no backend "b9"' }) }, 404, 'not_found'],
      [{ refusal: 'not-placed', event: fakeHandoff({ result: 'refused', reason: 'not live' }) }, 404, 'room_not_live'],
      [{ refusal: 'no-hooks', event: fakeHandoff({ result: 'refused', reason: 'no handoff hooks on b2 (none)' }) }, 409, 'conflict'],
      [{ refusal: 'same-backend', event: fakeHandoff({ result: 'refused', reason: 'already on b2' }) }, 409, 'conflict'],
      [{ refusal: null, event: fakeHandoff({ result: 'rolled-back', reason: 'import answered 500' }) }, 502, 'bad_gateway'],
      [{ refusal: null, event: fakeHandoff({ result: 'owner-lost', reason: 'the old owner b1 died' }) }, 502, 'bad_gateway'],
    ];
    try {
      for (const [outcome, status, code] of cases) {
        view.moveAnswer = () => outcome;
        const r = await post('/rooms/chess/move', '{"to":"b2"}');
        expect(r.statusCode, code).toBe(status);
        expect(r.json(), code).toEqual({ error: { code, message: outcome.event.reason, handoff: outcome.event } });
        if (outcome.refusal === 'too-many') expect(r.headers['retry-after']).toBe('1');
      }
      view.moveAnswer = () => ({ refusal: null, event: fakeHandoff({ result: 'moved-empty', bytes: 0 }) });
      expect((await post('/rooms/chess/move', '{"to":"b2"}')).statusCode).toBe(200);
    } finally {
      view.moveAnswer = (room, to, id) => ({ refusal: null, event: fakeHandoff({ id: id ?? 'h-fake', room, to }) });
    }
  });
});

describe('the drain with handoff', () => {
  it('{"handoff": true} drains and starts the handoffs: the backend with its handoff progress', async () => {
    const r = await post('/backends/b2/drain', '{"handoff":true,"deadlineMs":60000}');
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ id: 'b2', state: 'draining', handoff: { backend: 'b2', moved: 0, done: false } });
    expect(view.handoffDrains).toEqual(['b2']);
    expect(view.commands.at(-1)).toMatchObject({ id: 'b2', state: { state: 'draining' } });
  });

  it('without the flag (or false) a drain is as before; a flag that is not a boolean is 400', async () => {
    expect((await post('/backends/b1/drain', '{"handoff":false}')).json()).not.toHaveProperty('handoff');
    expect((await post('/backends/b1/drain', '{}')).json()).not.toHaveProperty('handoff');
    const bad = await post('/backends/b1/drain', '{"handoff":"yes"}');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toBe('handoff must be true or false');
    expect(view.handoffDrains).toEqual(['b2']);
  });

  it('the store down: 503 and no handoff starts', async () => {
    view.storeDown = new Error('redis down');
    try {
      expect((await post('/backends/b1/drain', '{"handoff":true}')).statusCode).toBe(503);
      expect(view.handoffDrains).toEqual(['b2']);
    } finally {
      view.storeDown = null;
    }
  });
});
