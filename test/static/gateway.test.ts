// Static mounts through a real gateway process (dist/), with a real backend behind it: headers,
// conditional requests, ranges, precompressed variants, cache policy, traversal attempts, and
// that everything outside the mount is still proxied.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, runCli, startBackend, startGateway, stopAll, waitFor, withTimeout, writeConfig, type GatewayProc } from '../support/processes.js';
import { fdsUnder, openResponse, rawRequest } from './raw-request.js';

const APP_JS = 'export const hello = "roomgate";\n'.repeat(200);
const MTIME = new Date('2024-03-01T10:00:00Z');

describe('static mounts on a running gateway', () => {
  let base: string;
  let dir: string;
  let gw: GatewayProc;
  let big: Buffer;
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') => rawRequest(gw.port, path, headers, method);

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'roomgate-static-gw-'));
    dir = join(base, 'staticfiles');
    mkdirSync(join(dir, 'css'), { recursive: true });
    mkdirSync(join(dir, 'sub'));
    mkdirSync(join(base, 'outside'));
    writeFileSync(join(dir, 'app.js'), APP_JS);
    writeFileSync(join(dir, 'app.js.br'), brotliCompressSync(APP_JS));
    writeFileSync(join(dir, 'app.js.gz'), gzipSync(APP_JS));
    writeFileSync(join(dir, 'app.3f2a9c1b.js'), 'hashed();\n');
    writeFileSync(join(dir, 'css', 'base.5af66c1b1797.css'), 'body { color: red; }\n');
    writeFileSync(join(dir, 'plain.txt'), 'no variants here\n');
    writeFileSync(join(dir, 'staticfiles.json'), '{"paths": {}}\n');
    writeFileSync(join(dir, '.env'), 'SECRET_KEY=do-not-serve\n');
    writeFileSync(join(dir, 'sub', 'inner.txt'), 'inner\n');
    writeFileSync(join(base, 'outside', 'secret.txt'), 'outside the root\n');
    symlinkSync(join(base, 'outside', 'secret.txt'), join(dir, 'escape.txt'));
    big = randomBytes(1024 * 1024 + 7);
    writeFileSync(join(dir, 'big.bin'), big);
    for (const f of ['app.js', 'app.js.br', 'app.js.gz']) utimesSync(join(dir, f), MTIME, MTIME);
    const backend = await startBackend('b1');
    gw = await startGateway({ backends: [backend], config: { static: { mounts: [{ prefix: '/static/', dir }] } } });
  });

  afterAll(async () => {
    await stopAll();
    rmSync(base, { recursive: true, force: true });
  });

  it('serves a file with its validators, type, length and cache headers, never from a backend', async () => {
    const res = await get('/static/app.js');
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe(APP_JS);
    expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(APP_JS)));
    expect(res.headers.etag).toMatch(/^"[0-9a-f]+-[0-9a-f]+"$/);
    expect(res.headers['last-modified']).toBe(MTIME.toUTCString());
    expect(res.headers['cache-control']).toBe('public, max-age=60');
    expect(res.headers['accept-ranges']).toBe('bytes');
    expect(res.headers.vary).toBe('Accept-Encoding');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['x-backend-id']).toBeUndefined();
    expect((await get('/static/app.js?v=3')).body.toString()).toBe(APP_JS);
    expect((await get('/static/staticfiles.json')).headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('answers HEAD with the same head and no body', async () => {
    const [full, head] = await Promise.all([get('/static/app.js'), get('/static/app.js', {}, 'HEAD')]);
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    for (const h of ['content-type', 'content-length', 'etag', 'last-modified', 'cache-control']) expect([h, head.headers[h]]).toEqual([h, full.headers[h]]);
  });

  it('answers 304 by ETag and by date, and 200 when the validator does not match', async () => {
    const { etag, 'last-modified': lastModified } = (await get('/static/app.js')).headers;
    const byTag = await get('/static/app.js', { 'If-None-Match': etag! });
    expect(byTag.status).toBe(304);
    expect(byTag.body.length).toBe(0);
    expect(byTag.headers.etag).toBe(etag);
    expect(byTag.headers['cache-control']).toBe('public, max-age=60');
    expect((await get('/static/app.js', { 'If-None-Match': `"nope", W/${etag}` })).status).toBe(304);
    expect((await get('/static/app.js', { 'If-None-Match': '"nope"' })).status).toBe(200);
    expect((await get('/static/app.js', { 'If-Modified-Since': lastModified! })).status).toBe(304);
    expect((await get('/static/app.js', { 'If-Modified-Since': 'Fri, 01 Mar 2024 09:59:59 GMT' })).status).toBe(200);
    // If-None-Match wins over If-Modified-Since.
    expect((await get('/static/app.js', { 'If-None-Match': '"nope"', 'If-Modified-Since': lastModified! })).status).toBe(200);
    expect((await get('/static/app.js', { 'If-Match': '"nope"' })).status).toBe(412);
  });

  it('answers single ranges with 206, impossible ones with 416, several with the whole file', async () => {
    const size = big.length;
    const first = await get('/static/big.bin', { Range: 'bytes=0-9' });
    expect(first.status).toBe(206);
    expect(first.headers['content-range']).toBe(`bytes 0-9/${size}`);
    expect(first.headers['content-length']).toBe('10');
    expect(first.body.equals(big.subarray(0, 10))).toBe(true);
    const open = await get('/static/big.bin', { Range: `bytes=${size - 100}-` });
    expect(open.headers['content-range']).toBe(`bytes ${size - 100}-${size - 1}/${size}`);
    expect(open.body.equals(big.subarray(size - 100))).toBe(true);
    const suffix = await get('/static/big.bin', { Range: 'bytes=-7' });
    expect(suffix.status).toBe(206);
    expect(suffix.body.equals(big.subarray(size - 7))).toBe(true);
    const middle = await get('/static/big.bin', { Range: 'bytes=500000-600000' });
    expect(middle.body.equals(big.subarray(500000, 600001))).toBe(true);

    const beyond = await get('/static/big.bin', { Range: `bytes=${size}-` });
    expect(beyond.status).toBe(416);
    expect(beyond.headers['content-range']).toBe(`bytes */${size}`);
    const several = await get('/static/big.bin', { Range: 'bytes=0-1,5-6' });
    expect(several.status).toBe(200);
    expect(several.body.equals(big)).toBe(true);
    // HEAD ignores Range.
    expect((await get('/static/big.bin', { Range: 'bytes=0-9' }, 'HEAD')).status).toBe(200);
  });

  it('applies a range under If-Range only while the validator matches', async () => {
    const { etag, 'last-modified': lastModified } = (await get('/static/app.js', {}, 'HEAD')).headers;
    expect((await get('/static/app.js', { Range: 'bytes=0-3', 'If-Range': etag! })).status).toBe(206);
    expect((await get('/static/app.js', { Range: 'bytes=0-3', 'If-Range': lastModified! })).status).toBe(206);
    const stale = await get('/static/app.js', { Range: 'bytes=0-3', 'If-Range': '"old"' });
    expect(stale.status).toBe(200);
    expect(stale.body.toString()).toBe(APP_JS);
  });

  it('serves the precompressed variant the client accepts, brotli first, each with its own ETag', async () => {
    const identity = await get('/static/app.js');
    const br = await get('/static/app.js', { 'Accept-Encoding': 'gzip, deflate, br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(br.headers.vary).toBe('Accept-Encoding');
    expect(br.body.equals(readFileSync(join(dir, 'app.js.br')))).toBe(true);
    expect(brotliDecompressSync(br.body).toString()).toBe(APP_JS);
    const gz = await get('/static/app.js', { 'Accept-Encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).toString()).toBe(APP_JS);
    expect((await get('/static/app.js', { 'Accept-Encoding': 'br;q=0, gzip' })).headers['content-encoding']).toBe('gzip');
    expect((await get('/static/app.js', { 'Accept-Encoding': 'identity' })).headers['content-encoding']).toBeUndefined();
    expect(new Set([identity.headers.etag, br.headers.etag, gz.headers.etag]).size).toBe(3);
    // A validator of one coding does not revalidate another.
    expect((await get('/static/app.js', { 'Accept-Encoding': 'br', 'If-None-Match': br.headers.etag! })).status).toBe(304);
    expect((await get('/static/app.js', { 'If-None-Match': br.headers.etag! })).status).toBe(200);
    // Ranges count the variant's bytes.
    const part = await get('/static/app.js', { 'Accept-Encoding': 'br', Range: 'bytes=0-3' });
    expect(part.status).toBe(206);
    expect(part.headers['content-encoding']).toBe('br');
    expect(part.headers['content-range']).toBe(`bytes 0-3/${br.body.length}`);
    expect(part.body.equals(br.body.subarray(0, 4))).toBe(true);
    // No variant on disk: identity, whatever the client accepts.
    const plain = await get('/static/plain.txt', { 'Accept-Encoding': 'br, gzip' });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.toString()).toBe('no variants here\n');
  });

  it('caches content-hashed names for a year, immutable', async () => {
    for (const p of ['/static/app.3f2a9c1b.js', '/static/css/base.5af66c1b1797.css']) {
      const res = await get(p);
      expect([p, res.status, res.headers['cache-control']]).toEqual([p, 200, 'public, max-age=31536000, immutable']);
    }
    expect((await get('/static/plain.txt')).headers['cache-control']).toBe('public, max-age=60');
  });

  it('refuses traversal, encoded separators, NUL, dotfiles, directories and escaping symlinks', async () => {
    // Dot segments are resolved before anything matches (the canonical target, src/http/target.ts):
    // a traversal out of the mount is a path outside it, which the app behind answers (never a file).
    for (const path of ['/static/../package.json', '/static/css/../../outside/secret.txt', '/static/%2e%2e/outside/secret.txt', '/static/%2E%2E/%2E%2E/etc/passwd']) {
      const res = await get(path);
      expect(res.headers['x-backend-id'], path).toBeDefined();
      expect(res.body.toString()).not.toMatch(/SECRET_KEY|root:|"name": "roomgate"/);
    }
    const cases: [string, number][] = [
      ['/static/css/../app.js/../../static/sub/../.env', 404],
      ['/static/..%2foutside%2fsecret.txt', 400],
      ['/static/..%5c..%5cetc%5cpasswd', 400],
      ['/static/app.js%00.png', 400],
      ['/static/%E0%A4%A', 400],
      ['/static/%252e%252e/outside/secret.txt', 404],
      ['/static/escape.txt', 404],
      ['/static/.env', 404],
      ['/static/%2eenv', 404],
      ['/static/sub/', 404],
      ['/static/sub', 404],
      ['/static/', 404],
      ['/static//etc/passwd', 404],
      ['/static/missing.js', 404],
    ];
    for (const [path, status] of cases) {
      const res = await get(path);
      expect([path, res.status]).toEqual([path, status]);
      expect(res.body.toString()).not.toMatch(/outside the root|SECRET_KEY|root:/);
      expect(res.headers['x-backend-id']).toBeUndefined();
    }
    expect((await get('/static/sub/inner.txt')).body.toString()).toBe('inner\n');
  });

  it('allows GET and HEAD only', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) {
      const res = await get('/static/app.js', {}, method);
      expect([method, res.status, res.headers.allow]).toEqual([method, 405, 'GET, HEAD']);
    }
  });

  it('still proxies everything outside the mount to the backend', async () => {
    const page = await get('/game/lobby/');
    expect(page.status).toBe(200);
    expect(page.headers['x-backend-id']).toBe('b1');
    for (const p of ['/static', '/staticfiles/app.js', '/STATIC/app.js', '/r/42/static/app.js']) {
      const res = await get(p);
      expect([p, res.headers['x-backend-id']]).toEqual([p, 'b1']);
    }
    expect((await get('/healthz')).status).toBe(200);
  });

  it('counts static responses by status', async () => {
    await get('/static/plain.txt');
    await get('/static/nothing-here');
    expect(await metricValue(gw, 'roomgate_static_responses_total', { status: '200' })).toBeGreaterThan(0);
    expect(await metricValue(gw, 'roomgate_static_responses_total', { status: '404' })).toBeGreaterThan(0);
  });

  it('leaves no file open after complete, aborted and refused responses', async () => {
    const pid = gw.child.pid!;
    const { req, res } = await openResponse(gw.port, '/static/big.bin');
    await withTimeout(new Promise((r) => res.once('data', r)), 5_000, 'first body chunk');
    req.destroy();
    await Promise.all([get('/static/big.bin'), get('/static/app.js', { 'Accept-Encoding': 'br' }, 'HEAD'), get('/static/escape.txt'), get('/static/big.bin', { Range: 'bytes=99999999-' })]);
    await waitFor('gateway descriptors on static files released', 5_000, () => fdsUnder(base, pid).length === 0);
  });
});

describe('static mount configuration through the CLI', () => {
  afterAll(stopAll);

  it('refuses a missing directory at load, naming the field and the fix', async () => {
    const missing = join(tmpdir(), `roomgate-no-such-dir-${process.pid}`);
    const r = await runCli(['check-config', '--config', writeConfig({ static: { mounts: [{ prefix: '/static/', dir: missing }] } })]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `static.mounts.0.dir: got ${JSON.stringify(missing)}, which does not exist; expected a readable directory: create it (e.g. python manage.py collectstatic) or fix the path\n`,
    );
  });
});
