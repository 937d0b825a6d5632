// room.pinInject with the page cache (docs/per-tab-rooms.md#injection-by-roomgate): the cache's
// fill injects before it stores, so each room's page is stored with its own pin (the key has the
// room) and a hit is that stored page byte for byte, on the byte-level front (the stored wire
// bytes) and on node:http alike; the stored page carries no validators of the backend's, and a
// HEAD from the cache has the injected page's length.
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { createPinSigner } from '../../src/room/signing.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';

/** The cookie secret startInProcessGateway gives every gateway. */
const SECRET = '0123456789abcdef0123456789abcdef';
const PAGE = '<!doctype html><html><head><title>p</title></head><body>room page</body></html>';
const fetches = new Map<string, number>();
let backend: http.Server;
let dir: string;
const gateways: Record<'lean' | 'node', Gateway> = {} as Record<'lean' | 'node', Gateway>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'roomgate-pin-cache-'));
  backend = http.createServer((req, res) => {
    const key = `${String(req.headers['x-roomgate-room'])} ${req.url ?? ''}`;
    fetches.set(key, (fetches.get(key) ?? 0) + 1);
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'public, max-age=60', ETag: '"v1"', 'Content-Length': Buffer.byteLength(PAGE) });
    res.end(req.method === 'HEAD' ? undefined : PAGE);
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  const start = (leanPages: boolean): Promise<Gateway> =>
    startInProcessGateway(dir, url, { health: { path: null }, proxy: { leanPages }, cache: { paths: ['/'] }, room: { pinInject: true }, cookie: { secrets: [SECRET], setOnPages: false } });
  [gateways.lean, gateways.node] = await Promise.all([start(true), start(false)]);
});

afterAll(async () => {
  await Promise.all(Object.values(gateways).map((g) => g?.stop()));
  await new Promise<void>((r) => backend?.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

interface Got {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

function get(g: Gateway, path: string, method = 'GET'): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: g.port, path, method, headers: { Host: 'a.example' }, agent: false, timeout: 4_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** The room of the pin a page carries (verified with the gateway's secret), or null. */
function pinnedRoom(body: string): string | null {
  const m = /<head><meta name="roomgate-pin" content="([^"]+)"><script src="\/_roomgate\/room-pin\.v1\.js" integrity="sha384-[^"]+" crossorigin="anonymous"><\/script><title>/.exec(body);
  if (m === null) return null;
  const v = createPinSigner([SECRET], 604_800).verify(m[1] as string, Date.now());
  return v.ok ? v.room : null;
}

describe.each(['lean', 'node'] as const)('room.pinInject with the page cache, %s front', (front) => {
  it("each room's page is stored with its own pin; a hit is the stored page", async () => {
    const g = gateways[front];
    const path = `/p-${front}`;
    const a1 = await get(g, `/r/a${path}`);
    expect(a1.status).toBe(200);
    expect(pinnedRoom(a1.body)).toBe('a');
    expect(a1.headers['cache-status']).toMatch(/stored/);
    expect(a1.headers.etag).toBeUndefined();
    expect(Number(a1.headers['content-length'])).toBe(Buffer.byteLength(a1.body));
    const a2 = await get(g, `/r/a${path}`);
    expect(a2.headers['cache-status']).toMatch(/hit/);
    expect(a2.body).toBe(a1.body);
    expect(a2.headers.etag).toBeUndefined();
    expect(Number(a2.headers['content-length'])).toBe(Buffer.byteLength(a2.body));
    const b = await get(g, `/r/b${path}`);
    expect(pinnedRoom(b.body)).toBe('b');
    expect(b.headers['cache-status']).toMatch(/stored/);
    // One fetch per room: the second page of room a came from the store.
    expect([fetches.get(`a ${path}`), fetches.get(`b ${path}`)]).toEqual([1, 1]);
    const head = await get(g, `/r/a${path}`, 'HEAD');
    expect(head.headers['cache-status']).toMatch(/hit/);
    expect(Number(head.headers['content-length'])).toBe(Buffer.byteLength(a1.body));
  });
});
