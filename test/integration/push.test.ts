// Cross-room push through a real gateway process to real backends that record what they get:
// delivery to the backend that holds the room with its ownership fields, a message id and the
// sender; every defined refusal (token, body, room key, a room nobody holds, a backend that is
// down, refuses or does not answer); and that a push never places or moves a room.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { adminGet, adminPost } from '../support/room-clients.js';
import { metricValue, startGateway, stopAll, type GatewayProc } from '../support/processes.js';

const TOKEN = 'push-token-0123456789abcdef';
const ADMIN_TOKEN = 'admin-token-0123456789abcdef';

interface Got {
  readonly backend: string;
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}
const got: Got[] = [];

/** A backend that records requests; its push path answers as `pushAnswer` says. */
class Recorder {
  /** A function runs before the answer (e.g. moves the room) and gives its status. */
  pushAnswer: 'ok' | 500 | 'hang' | (() => Promise<number>) = 'ok';
  readonly server: http.Server;
  constructor(readonly id: string) {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        got.push({ backend: id, method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        if (req.url === '/_roomgate/push') {
          const answer = this.pushAnswer;
          if (answer === 'hang') return; // never answers
          if (typeof answer === 'function') {
            void answer().then((status) => res.writeHead(status).end());
            return;
          }
          res.writeHead(answer === 'ok' ? 204 : answer);
          return res.end();
        }
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.end(`${id} ${req.url ?? ''}`);
      });
    });
  }
  start(): Promise<string> {
    return listenOnLoopback(this.server);
  }
  close(): Promise<void> {
    return closeServer(this.server);
  }
}

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly json: Record<string, unknown>;
}

function call(port: number, method: string, path: string, o: { token?: string | null; body?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.token !== null) headers.Authorization = `Bearer ${o.token ?? TOKEN}`;
    if (o.body !== undefined) headers['Content-Type'] = 'application/json';
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          // not JSON (a page)
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, json });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

const push = (gw: GatewayProc, room: string, body: string, o: { token?: string | null; headers?: Record<string, string> } = {}): Promise<Answer> =>
  call(gw.port, 'POST', `/_roomgate/api/rooms/${encodeURIComponent(room)}/messages`, { ...o, body });
const errorCode = (a: Answer): unknown => (a.json.error as { code?: unknown } | undefined)?.code;
const pushesSeen = (): Got[] => got.filter((g) => g.url === '/_roomgate/push');

const b1 = new Recorder('b1');
const b2 = new Recorder('b2');
let gw: GatewayProc;

beforeAll(async () => {
  const [u1, u2] = await Promise.all([b1.start(), b2.start()]);
  gw = await startGateway({
    backends: [`b1=${u1}`, `b2=${u2}`],
    config: { health: { path: null }, push: { tokens: [TOKEN], timeoutMs: 400, maxBytes: 1024 }, admin: { token: ADMIN_TOKEN } },
  });
});

afterAll(async () => {
  await stopAll();
  await Promise.all([b1.close(), b2.close()]);
});

/** A room placed by a page request; returns the backend that holds it. */
async function place(room: string): Promise<string> {
  const a = await call(gw.port, 'GET', `/page?room=${room}`, { token: null });
  expect(a.status).toBe(200);
  return (got.at(-1) as Got).backend;
}

describe('push to a room', () => {
  it('reaches the backend that holds the room, with the room, its epoch, a message id and the sender', async () => {
    const holder = await place('push-1');
    const epoch = String(got.at(-1)?.headers['x-roomgate-epoch']);
    const before = pushesSeen().length;
    const a = await push(gw, 'push-1', '{"move":"e2e4"}', { headers: { 'X-Roomgate-Sender': 'room:lobby' } });
    expect(a.status).toBe(202);
    expect(a.json).toMatchObject({ room: 'push-1', backend: holder, epoch: Number(epoch) });
    const seen = pushesSeen();
    expect(seen).toHaveLength(before + 1);
    const m = seen.at(-1) as Got;
    expect(m).toMatchObject({ backend: holder, method: 'POST', body: '{"move":"e2e4"}' });
    expect(m.headers['content-type']).toBe('application/json');
    expect(m.headers['x-roomgate-room']).toBe('push-1');
    expect(m.headers['x-roomgate-epoch']).toBe(epoch);
    expect(m.headers['x-roomgate-message-id']).toBe(a.json.id);
    expect(m.headers['x-roomgate-sender']).toBe('room:lobby');
    // Without a sender of its own, the caller is "api"; each message has its own id.
    const again = await push(gw, 'push-1', '[1,2,3]');
    expect(again.status).toBe(202);
    expect((pushesSeen().at(-1) as Got).headers['x-roomgate-sender']).toBe('api');
    expect(again.json.id).not.toBe(a.json.id);
    expect(await metricValue(gw, 'roomgate_pushes_total', { result: 'delivered' })).toBeGreaterThanOrEqual(2);
  });

  it('a room nobody holds is 404 room_not_live, and the push does not place it', async () => {
    const before = got.length;
    const a = await push(gw, 'never-placed', '{}');
    expect(a.status).toBe(404);
    expect(errorCode(a)).toBe('room_not_live');
    expect(got.length).toBe(before);
    const where = await adminGet<{ placement: unknown }>(gw, '/rooms/never-placed');
    expect(where.placement).toBeNull();
  });

  it('token, body and room key: each refusal says what is wrong', async () => {
    await place('push-2');
    const noToken = await push(gw, 'push-2', '{}', { token: null });
    expect(noToken.status).toBe(401);
    expect(noToken.headers['www-authenticate']).toMatch(/^Bearer/);
    expect((await push(gw, 'push-2', '{}', { token: 'wrong-token-0123456789abcdef' })).status).toBe(401);
    // A token of the API's write scope is not a push token.
    const notJson = await push(gw, 'push-2', '{not json');
    expect(notJson.status).toBe(400);
    expect(String((notJson.json.error as { message: string }).message)).toMatch(/not valid JSON/);
    const big = await push(gw, 'push-2', JSON.stringify({ pad: 'x'.repeat(2_000) }));
    expect(big.status).toBe(413);
    const badRoom = await push(gw, 'bad room!', '{}');
    expect(badRoom.status).toBe(400);
    const badSender = await push(gw, 'push-2', '{}', { headers: { 'X-Roomgate-Sender': 'two words' } });
    expect(badSender.status).toBe(400);
    expect(pushesSeen().filter((m) => m.headers['x-roomgate-room'] === 'push-2')).toHaveLength(0);
  });

  it('an Idempotency-Key delivers once: a retry gets the first answer again; another room or a call that changed nothing is not replayed', async () => {
    await place('idem-1');
    await place('idem-2');
    const key = { 'Idempotency-Key': 'order-7f3a' };
    const count = (room: string): number => pushesSeen().filter((m) => m.headers['x-roomgate-room'] === room).length;
    const first = await push(gw, 'idem-1', '{"n":1}', { headers: key });
    expect(first.status).toBe(202);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const retry = await push(gw, 'idem-1', '{"n":1}', { headers: key });
    expect(retry.status).toBe(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.json).toEqual(first.json);
    expect(count('idem-1')).toBe(1);
    // The same key for another room is another call.
    expect((await push(gw, 'idem-2', '{}', { headers: key })).status).toBe(202);
    expect(count('idem-2')).toBe(1);
    // A call that reached no backend (the room not live) gives its key up: the retry runs.
    expect((await push(gw, 'idem-3', '{}', { headers: key })).status).toBe(404);
    await place('idem-3');
    const later = await push(gw, 'idem-3', '{}', { headers: key });
    expect(later.status).toBe(202);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect((await push(gw, 'idem-1', '{}', { headers: { 'Idempotency-Key': 'with space' } })).status).toBe(400);
  });

  it("the backend's refusal is 502 with its status; no answer in push.timeoutMs is 504", async () => {
    const holder = await place('push-3');
    const r = holder === 'b1' ? b1 : b2;
    try {
      r.pushAnswer = 500;
      const refused = await push(gw, 'push-3', '{}');
      expect(refused.status).toBe(502);
      expect(refused.json.error).toMatchObject({ code: 'bad_gateway', backendStatus: 500 });
      r.pushAnswer = 'hang';
      const t0 = Date.now();
      const slow = await push(gw, 'push-3', '{}');
      expect(slow.status).toBe(504);
      expect(errorCode(slow)).toBe('gateway_timeout');
      // Not before push.timeoutMs (400 ms; a lower bound, which no slow machine breaks). The 504
      // itself is the gateway's own timer: the backend never answers.
      expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    } finally {
      r.pushAnswer = 'ok';
    }
  });

  it('with its backend down, 503 with Retry-After; the room is not moved by the push', async () => {
    const extra = new Recorder('b3');
    const u3 = await extra.start();
    const dying = new Recorder('b4');
    const u4 = await dying.start();
    const g = await startGateway({ backends: [`b3=${u3}`, `b4=${u4}`], config: { health: { path: null }, push: { tokens: [TOKEN] } } });
    try {
      let room = '';
      for (let i = 0; i < 40 && room === ''; i++) {
        await call(g.port, 'GET', `/p?room=down-${i}`, { token: null });
        if ((got.at(-1) as Got).backend === 'b4') room = `down-${i}`;
      }
      expect(room).not.toBe('');
      await dying.close();
      const a = await push(g, room, '{}');
      expect(a.status).toBe(503);
      expect(a.headers['retry-after']).toMatch(/^\d+$/);
      // Still placed on b4: only a client's request moves a room.
      const again = await push(g, room, '{}');
      expect(again.status).toBe(503);
    } finally {
      await extra.close();
    }
  });

  it('a room that moves during the delivery is delivered once more to its new owner (202 movedFrom); if that one refuses too, 409 room_moved', async () => {
    const recorder = (id: string): Recorder => (id === 'b1' ? b1 : b2);
    const holder = await place('moving-1');
    const other = holder === 'b1' ? 'b2' : 'b1';
    const epochOf = (m: Got): number => Number(m.headers['x-roomgate-epoch']);
    // The holder, on getting the push, loses the room (maintenance, then a page request places it
    // on the other backend with a new epoch) and refuses the message as no longer its own.
    const moveAway = async (): Promise<number> => {
      expect((await adminPost(gw, `/backends/${holder}/maintenance`, ADMIN_TOKEN)).status).toBe(200);
      await call(gw.port, 'GET', '/page?room=moving-1', { token: null });
      expect((got.at(-1) as Got).backend).toBe(other);
      return 409;
    };
    const count = (): number => pushesSeen().filter((m) => m.headers['x-roomgate-room'] === 'moving-1').length;
    try {
      recorder(holder).pushAnswer = moveAway;
      const a = await push(gw, 'moving-1', '{"n":1}');
      expect(a.status).toBe(202);
      const [first, second] = pushesSeen().filter((m) => m.headers['x-roomgate-room'] === 'moving-1');
      expect(first).toMatchObject({ backend: holder });
      expect(second).toMatchObject({ backend: other, body: '{"n":1}' });
      // One message: the same id at both; the new owner gets the new, larger epoch.
      expect(second?.headers['x-roomgate-message-id']).toBe(first?.headers['x-roomgate-message-id']);
      expect(epochOf(second as Got)).toBeGreaterThan(epochOf(first as Got));
      expect(a.json).toMatchObject({ backend: other, epoch: epochOf(second as Got), movedFrom: { backend: holder, epoch: epochOf(first as Got) } });

      // Back to the first backend (the other one now loses it the same way), whose answer is 409
      // as well: re-resolved once, then 409 room_moved, nothing delivered.
      await adminPost(gw, `/backends/${holder}/undrain`, ADMIN_TOKEN);
      const moveBack = async (): Promise<number> => {
        expect((await adminPost(gw, `/backends/${other}/maintenance`, ADMIN_TOKEN)).status).toBe(200);
        await call(gw.port, 'GET', '/page?room=moving-1', { token: null });
        return 409;
      };
      recorder(other).pushAnswer = moveBack;
      recorder(holder).pushAnswer = async () => 409;
      const before = count();
      const b = await push(gw, 'moving-1', '{"n":2}');
      expect(b.status).toBe(409);
      expect(b.json.error).toMatchObject({ code: 'room_moved', backend: holder });
      expect(count()).toBe(before + 2);
      expect(await metricValue(gw, 'roomgate_pushes_total', { result: 'moved' })).toBe(1);
      // The admin API's events and the status page list both calls, newest last / first.
      const { pushes } = await adminGet<{ pushes: { target: string; result: string; backend: string; call: string }[] }>(gw, '/events');
      expect(pushes.filter((p) => p.target === 'moving-1').map((p) => [p.result, p.backend])).toEqual([
        ['delivered', other],
        ['moved', holder],
      ]);
      const page = await fetch(`http://127.0.0.1:${gw.adminPort}/_roomgate/`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: AbortSignal.timeout(5_000) });
      const html = await page.text();
      const rows = html.slice(html.indexOf('<table id="pushes"'));
      expect(rows.indexOf('<span class="push-moved">moved</span>')).toBeGreaterThan(0);
      expect(rows.indexOf('<span class="push-moved">moved</span>')).toBeLessThan(rows.indexOf('<span class="push-delivered">delivered</span>'));

      // A refusal without a move is the backend's word: 502, tried once.
      recorder(holder).pushAnswer = async () => 409;
      const c = await push(gw, 'moving-1', '{"n":3}');
      expect(c.status).toBe(502);
      expect(count()).toBe(before + 3);
    } finally {
      b1.pushAnswer = 'ok';
      b2.pushAnswer = 'ok';
      await adminPost(gw, `/backends/${holder}/undrain`, ADMIN_TOKEN);
      await adminPost(gw, `/backends/${other}/undrain`, ADMIN_TOKEN);
    }
  });
});
