// The per-tab room pin script (src/pages/room-pin-script.ts) as the public port serves it: the bytes
// whose SRI pages name (docs/per-tab-rooms.md states the same value, roomgate_kit carries it),
// immutable caching under a versioned name, a 304 for its one ETag, read-only, and not served when
// the pin source is off (the path then goes to the app). Its browser behaviour is
// test/chaos/per-tab-rooms.test.ts and test/browser/room-pin-csp.test.ts.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { ROOM_PIN_SCRIPT, ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI } from '../../src/pages/room-pin-script.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { ROOT } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-pin-script-');
const seen: string[] = [];
const app = http.createServer((req, res) => {
  seen.push(req.url ?? '');
  res.end('app');
});
let on: Gateway;
let off: Gateway;

beforeAll(async () => {
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
  on = await startInProcessGateway(dir, url, { health: { path: null } });
  off = await startInProcessGateway(dir, url, { health: { path: null }, room: { sources: ['query', 'cookie'] } });
});

afterAll(async () => {
  await Promise.all([on?.stop(), off?.stop()]);
  await new Promise<void>((resolve) => app.close(() => resolve()));
});

function get(g: Gateway, headers: Record<string, string> = {}, method = 'GET') {
  return fetch(`http://127.0.0.1:${g.port}${ROOM_PIN_SCRIPT_PATH}`, { method, headers, signal: AbortSignal.timeout(5_000) });
}

describe('the room pin script', () => {
  it('is served byte for byte with the SRI pages name, immutable, never sniffed', async () => {
    const res = await get(on);
    const body = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(200);
    expect(body.toString('utf8')).toBe(ROOM_PIN_SCRIPT);
    expect(`sha384-${createHash('sha384').update(body).digest('base64')}`).toBe(ROOM_PIN_SCRIPT_SRI);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    // CSP-friendly: nothing evaluated from a string.
    expect(ROOM_PIN_SCRIPT).not.toMatch(/\beval\b|new Function|setTimeout\(\s*['"]/);
    expect(seen).toEqual([]);
  });

  it('answers its ETag with 304, HEAD without a body, other methods 405', async () => {
    const etag = (await get(on)).headers.get('etag') as string;
    expect((await get(on, { 'if-none-match': etag })).status).toBe(304);
    const head = await get(on, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    expect((await get(on, {}, 'POST')).status).toBe(405);
  });

  it('the docs and roomgate_kit name the SRI this gateway serves', () => {
    expect(readFileSync(join(ROOT, 'docs/per-tab-rooms.md'), 'utf8')).toContain(ROOM_PIN_SCRIPT_SRI);
    expect(readFileSync(join(ROOT, 'python/roomgate_kit/pins.py'), 'utf8')).toContain(`ROOM_PIN_SCRIPT_SRI = "${ROOM_PIN_SCRIPT_SRI}"`);
  });

  it('is the app\'s path when the pin source is off', async () => {
    const res = await get(off);
    expect(await res.text()).toBe('app');
    expect(seen).toEqual([ROOM_PIN_SCRIPT_PATH]);
  });
});
