// A push whose first delivery was refused re-reads the room's placement from the store
// (Placer.explainFresh). When that read fails (the store stopped answering, and this gateway
// enters degraded mode on it), the room's last known placement must survive: in degraded mode it
// is all routing has ("the last known placement, however old, beats the ring"). Dropping it sent
// the room's next request to its ring owner: a room split.
import http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { adminPost } from '../support/room-clients.js';
import { startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';

const TOKEN = 'push-token-0123456789abcdef';
const ADMIN_TOKEN = 'admin-token-0123456789abcdef';

/** A backend that names itself in its pages; its push path answers pushStatus. */
function backend(id: string): { server: http.Server; pushStatus: number } {
  const b = { server: null as unknown as http.Server, pushStatus: 204 };
  b.server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/_roomgate/push') return res.writeHead(b.pushStatus).end();
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end(id);
    });
  });
  return b;
}

function call(port: number, method: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (body !== undefined) Object.assign(headers, { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' });
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

const b1 = backend('b1');
const b2 = backend('b2');
let redis: RedisServer;
let gw: GatewayProc;

beforeAll(async () => {
  redis = await startRedis();
  const [u1, u2] = await Promise.all([listenOnLoopback(b1.server), listenOnLoopback(b2.server)]);
  gw = await startGateway({
    backends: [`b1=${u1}`, `b2=${u2}`],
    config: {
      health: { path: null },
      redis: { url: redis.url, commandTimeoutMs: 300 },
      placement: { cacheTtlMs: 60_000 },
      push: { tokens: [TOKEN], timeoutMs: 1_000 },
      admin: { token: ADMIN_TOKEN },
    },
  });
}, 60_000);

afterAll(async () => {
  try {
    process.kill(redis.pid, 'SIGCONT');
  } catch {
    // already gone
  }
  await stopAll();
  await stopAllRedis();
  await Promise.all([closeServer(b1.server), closeServer(b2.server)]);
});

const page = async (room: string): Promise<string> => {
  const a = await call(gw.port, 'GET', `/page?room=${room}`);
  expect(a.status).toBe(200);
  return a.text;
};

it('a refused push whose fresh re-read fails keeps the room where it is placed (no move to its ring owner in degraded mode)', async () => {
  const room = 'fresh-read-1';
  // Placed on its ring owner, then moved to the other backend (maintenance), which stays its home
  // once the ring owner is back: its placement now differs from the ring.
  const ringOwner = await page(room);
  const home = ringOwner === 'b1' ? 'b2' : 'b1';
  expect((await adminPost(gw, `/backends/${ringOwner}/maintenance`, ADMIN_TOKEN)).status).toBe(200);
  expect(await page(room)).toBe(home);
  expect((await adminPost(gw, `/backends/${ringOwner}/undrain`, ADMIN_TOKEN)).status).toBe(200);
  expect(await page(room)).toBe(home);

  // The home backend refuses the push; the store stops answering (no RST: commands time out).
  (home === 'b1' ? b1 : b2).pushStatus = 500;
  process.kill(redis.pid, 'SIGSTOP');
  const p = await call(gw.port, 'POST', `/_roomgate/api/rooms/${room}/messages`, '{"n":1}');
  expect(p.status).toBe(502); // refused, and the placement could not be read again: the first answer stands
  await waitFor('degraded mode', 5_000, () => gw.logs().find((l) => String(l.msg).includes('placement store unreachable')));
  // Degraded: the room's last known placement routes it, as it did before the push.
  expect(await page(room)).toBe(home);
}, 30_000);
