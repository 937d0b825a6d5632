// A drain token through the primary of `roomgate start --workers 2` (real processes): the primary
// forwards each admin request to a worker from 127.0.0.1, so the worker must learn the client's
// address from the primary (src/http/forwarded-peer.ts) to bind a drain token to the caller's own
// backend. Clients here connect from 127.0.0.2 (Linux routes all of 127/8 to loopback): backend
// b2's URL is on 127.0.0.2, b1's on 127.0.0.1 (the primary's own address towards its workers).
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBackend, startGateway, stopAll, type BackendProc, type GatewayProc } from '../support/processes.js';

const TOKEN = 'workers-drain-admin-token-0123456789';
const DRAIN = 'workers-drain-token-0123456789';
const PRIMARY_LISTENING = (l: string): boolean => l.includes('"msg":"listening"') && l.includes('"role":"primary"');

let b1: BackendProc;
let gw: GatewayProc;

beforeAll(async () => {
  b1 = await startBackend('b1');
  gw = await startGateway({
    config: {
      backends: [
        { id: 'b1', url: b1.url },
        { id: 'b2', url: `http://127.0.0.2:${b1.port}` },
      ],
      admin: { token: TOKEN },
    },
    env: { ROOMGATE_DRAIN_TOKENS: DRAIN },
    args: ['--workers', '2'],
    readyLine: PRIMARY_LISTENING,
  });
}, 60_000);

afterAll(stopAll);

/** POST to the primary's admin port from `from`, with extra headers. */
function post(path: string, from: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; worker: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: gw.adminPort, localAddress: from, method: 'POST', path, headers: { authorization: `Bearer ${DRAIN}`, 'content-type': 'application/json', ...headers }, timeout: 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, worker: res.headers['x-roomgate-worker'] as string | undefined }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer')));
    req.on('error', reject);
    req.end('{}');
  });
}

describe('a drain token through the primary of --workers 2', () => {
  it("drains the caller's own backend, seen by the worker at the client's address, not the primary's", async () => {
    const own = await post('/backends/b2/drain', '127.0.0.2');
    expect(own.status, own.body).toBe(200);
    expect(own.worker).toMatch(/^[12]$/);
    expect(JSON.parse(own.body)).toMatchObject({ id: 'b2', state: 'draining' });
    expect((await post('/backends/b2/undrain', '127.0.0.2')).status).toBe(200);
    // b1 is on 127.0.0.1, the address the worker's connection comes from: not the caller's.
    const other = await post('/backends/b1/drain', '127.0.0.2');
    expect(other.status, other.body).toBe(403);
    expect(JSON.parse(other.body).error.message).toMatch(/only the backend the request comes from/);
  });

  it("a client's own forwarded-address headers are dropped by the primary and never believed", async () => {
    const forged: Record<string, string>[] = [{ 'x-roomgate-peer': '127.0.0.1' }, { 'x-roomgate-peer': '127.0.0.1', 'x-roomgate-peer-key': 'a-guess-at-the-key' }];
    for (const headers of forged) {
      const r = await post('/backends/b1/drain', '127.0.0.2', headers);
      expect(r.status, JSON.stringify(headers)).toBe(403);
    }
  });
});
