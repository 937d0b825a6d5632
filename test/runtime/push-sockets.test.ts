// The receiver's count (docs/push.md, "The backend's side"): a receiver may say on its 2xx answer
// how many sockets it handed the message to (X-Roomgate-Sockets: N); roomgate passes that figure on
// in its 202 (`sockets`, per backend for a fan-out), in the admin API's push log and on the status
// page's Recent pushes. A receiver that says nothing (204) stays valid: no `sockets` at all. A
// count that is not one (signed, fractional, repeated, too long, words) is no count, never an
// error. An in-process gateway in front of an in-process receiver whose answer each test sets.
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET } from '../support/processes.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'push-token-0123456789abcdef';
const dir = scopeTempDir('roomgate-push-sockets-');
/** The raw header lines the receiver's push answer carries (name, value, name, value...). */
let answerFields: string[] = [];
let backend: http.Server;
let gw: Gateway;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/_roomgate/push') {
        res.writeHead(204, answerFields);
        return res.end();
      }
      res.writeHead(200, { 'Content-Type': 'text/html' }).end('page');
    });
  });
  const url = await listenOnLoopback(backend);
  gw = await startInProcessGateway(dir, url, {
    health: { path: null },
    push: { tokens: [TOKEN] },
    backendCalls: { secrets: [CALL_SECRET] },
    admin: { enabled: true, host: '127.0.0.1', port: 0 },
    placement: { heartbeatMs: 200 },
    presence: { ttlMs: 1_000 },
  });
});

afterAll(async () => {
  await gw?.stop();
  await closeServer(backend);
});

async function push(path: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${gw.port}${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: '{"text":"hello"}',
    signal: AbortSignal.timeout(5_000),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function placed(room: string): Promise<void> {
  const page = await fetch(`http://127.0.0.1:${gw.port}/game/${room}/`, { signal: AbortSignal.timeout(5_000) });
  expect(page.status).toBe(200);
  await page.arrayBuffer();
}

async function adminText(path: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { signal: AbortSignal.timeout(5_000) });
  expect(res.status).toBe(200);
  return res.text();
}

describe("the receiver's socket count", () => {
  it('202 carries the count the receiver gave; the push log and the status page show it', async () => {
    await placed('counted');
    answerFields = ['X-Roomgate-Sockets', '3'];
    const a = await push('/_roomgate/api/rooms/counted/messages');
    expect(a.status).toBe(202);
    expect(a.json).toMatchObject({ room: 'counted', backend: 'b1', sockets: 3 });

    const events = JSON.parse(await adminText('/events')) as { pushes: { target: string; sockets: number | null }[] };
    expect(events.pushes.at(-1)).toMatchObject({ target: 'counted', result: 'delivered', sockets: 3 });
    const page = await adminText('/_roomgate/');
    expect(page).toContain('<th scope="col" class="num">Sockets</th>');
    expect(page).toMatch(/data-label="Room">counted<\/th>[\s\S]*?<td class="num" data-label="Sockets">3<\/td>/);
  });

  it('a receiver that says nothing (204 alone) stays valid: no sockets in the answer, an empty cell', async () => {
    await placed('silent');
    answerFields = [];
    const a = await push('/_roomgate/api/rooms/silent/messages');
    expect(a.status).toBe(202);
    expect(a.json).toMatchObject({ room: 'silent', backend: 'b1' });
    expect(a.json).not.toHaveProperty('sockets');
    const events = JSON.parse(await adminText('/events')) as { pushes: { target: string; sockets: number | null }[] };
    expect(events.pushes.at(-1)).toMatchObject({ target: 'silent', sockets: null });
    expect(await adminText('/_roomgate/')).toMatch(/data-label="Room">silent<\/th>[\s\S]*?<td class="num" data-label="Sockets"><\/td>/);
  });

  it('what is not a count is ignored, never an error: 0 is a count', async () => {
    await placed('odd');
    const cases: [string[], number | undefined][] = [
      [['X-Roomgate-Sockets', '0'], 0],
      [['X-Roomgate-Sockets', '007'], 7],
      [['X-Roomgate-Sockets', '999999999'], 999_999_999],
      [['X-Roomgate-Sockets', '1000000000'], undefined],
      [['X-Roomgate-Sockets', '-1'], undefined],
      [['X-Roomgate-Sockets', '2.5'], undefined],
      [['X-Roomgate-Sockets', '1e3'], undefined],
      [['X-Roomgate-Sockets', ' 4x'], undefined],
      [['X-Roomgate-Sockets', 'many'], undefined],
      [['X-Roomgate-Sockets', '2', 'X-Roomgate-Sockets', '3'], undefined],
    ];
    for (const [fields, want] of cases) {
      answerFields = fields;
      const a = await push('/_roomgate/api/rooms/odd/messages');
      expect(a.status, fields.join(' ')).toBe(202);
      expect(a.json.sockets, fields.join(' ')).toBe(want);
    }
  });

  it("a fan-out: each backend's count in its part; the push log sums them", async () => {
    // A fan-out reaches live rooms (presence): a socket of the room held open through the gateway,
    // which the receiver (no WebSocket server) answers with a bare 101.
    let held: import('node:stream').Duplex | undefined;
    backend.once('upgrade', (_req, socket) => (held = socket).write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${ACCEPT}\r\n\r\n`));
    const ws = await openRawSocket('/ws/live/?room=fan-1');
    try {
      answerFields = ['X-Roomgate-Sockets', '5'];
      await expect
        .poll(async () => (await push('/_roomgate/api/messages?prefix=fan-')).json, { timeout: 5_000 })
        .toMatchObject({ rooms: 1, backends: { b1: { rooms: 1, result: 'delivered', status: 204, sockets: 5 } } });
      const events = JSON.parse(await adminText('/events')) as { pushes: { call: string; sockets: number | null }[] };
      expect(events.pushes.at(-1)).toMatchObject({ call: 'fanout', result: 'sent', sockets: 5 });
    } finally {
      ws.destroy();
      held?.destroy();
    }
  });
});

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
/** RFC 6455's example: the accept value of KEY. */
const ACCEPT = 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=';

/** A WebSocket handshake through the gateway, held open (the backend answers it with a 101). */
function openRawSocket(path: string): Promise<import('node:net').Socket> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port: gw.port,
      path,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': KEY },
      timeout: 5_000,
    });
    req.on('upgrade', (_res, socket) => resolve(socket));
    req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
    req.on('error', reject);
    req.end();
  });
}
