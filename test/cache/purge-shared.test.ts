// A purge through one gateway's admin API empties the same pages on every gateway sharing the
// store: two gateways (in this process) on one real redis-server, one real backend. With Redis
// gone, a purge still empties the gateway it was sent to and says it could not be shared.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';

const TOKEN = 'purge-token-0123456789abcdef';
let redis: RedisServer;
let backend: http.Server;
let fetched = 0;
let dir: string;
let a: Gateway;
let b: Gateway;

async function gateway(name: string): Promise<Gateway> {
  const file = join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0, token: TOKEN },
      redis: { url: redis.url, commandTimeoutMs: 500 },
      backends: [{ id: 'b1', url: `http://127.0.0.1:${(backend.address() as AddressInfo).port}` }],
      cookie: { secrets: ['0123456789abcdef0123456789abcdef'] },
      shutdown: { graceMs: 0 },
      cache: { paths: ['/'] },
    }),
  );
  const g = new Gateway(loadConfig({ env: {}, file }), { logger: createLogger('silent') });
  await g.start();
  return g;
}

function request(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = payload === undefined ? {} : { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` };
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

const page = async (g: Gateway, path: string): Promise<string> => String((await request(g.port, 'GET', path)).headers['cache-status']);
const objects = async (g: Gateway): Promise<number> => (JSON.parse((await request(g.adminPort as number, 'GET', '/cache')).text) as { objects: number }).objects;

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  redis = await startRedis();
  backend = http.createServer((req, res) => {
    fetched++;
    res.writeHead(200, { 'Cache-Control': 'max-age=60' });
    res.end(`page ${req.url ?? ''}`);
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  dir = mkdtempSync(join(tmpdir(), 'roomgate-purge-'));
  a = await gateway('a');
  b = await gateway('b');
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  backend.closeAllConnections();
  await new Promise<void>((r) => backend.close(() => r()));
  await stopAllRedis();
  rmSync(dir, { recursive: true, force: true });
});

describe('purges across gateways', () => {
  it('a purge sent to one gateway reaches the other through Redis', async () => {
    for (const g of [a, b]) {
      expect(await page(g, '/blog/1?room=r1')).toMatch(/stored$/);
      expect(await page(g, '/blog/2?room=r1')).toMatch(/stored$/);
      expect(await page(g, '/news?room=r1')).toMatch(/stored$/);
      expect(await page(g, '/blog/1?room=r1')).toMatch(/^roomgate; hit/);
    }
    expect(fetched).toBe(6); // each gateway keeps its own copies

    const purge = await request(a.adminPort as number, 'POST', '/cache/purge', { prefix: '/blog/' });
    expect(purge.status).toBe(200);
    expect(JSON.parse(purge.text)).toEqual({ purged: 2, shared: true });
    await until('gateway b purged', async () => (await objects(b)) === 1);
    expect(await objects(a)).toBe(1);
    expect(await page(b, '/blog/1?room=r1')).toMatch(/^roomgate; fwd=uri-miss/);
    expect(await page(b, '/news?room=r1')).toMatch(/^roomgate; hit/);

    // By room: every page of the room, on both.
    await request(b.adminPort as number, 'POST', '/cache/purge', { room: 'r1' });
    await until('both purged', async () => (await objects(a)) === 0 && (await objects(b)) === 0);
  });

  it('bad purges are refused with the fix in the message', async () => {
    const empty = await request(a.adminPort as number, 'POST', '/cache/purge', {});
    expect(empty.status).toBe(400);
    expect(empty.text).toContain('give \\"url\\"');
    const relative = await request(a.adminPort as number, 'POST', '/cache/purge', { url: 'blog' });
    expect(relative.status).toBe(400);
    expect(relative.text).toContain('url must start with');
  });

  it('with Redis down, the purge empties this gateway and says it was not shared', async () => {
    expect(await page(a, '/down?room=r2')).toMatch(/stored$/);
    expect(await page(b, '/down?room=r2')).toMatch(/stored$/);
    await redis.kill();
    const purge = await request(a.adminPort as number, 'POST', '/cache/purge', { url: '/down?room=r2' });
    expect(JSON.parse(purge.text)).toEqual({ purged: 1, shared: false });
    expect(await page(a, '/down?room=r2')).toMatch(/^roomgate; fwd=uri-miss/);
    // b never heard of it: its copy stays until purged there (the docs say: purge again).
    expect(await page(b, '/down?room=r2')).toMatch(/^roomgate; hit/);
  });
});
