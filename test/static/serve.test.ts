// StaticFiles in this process behind a plain node:http server: streaming edge cases that need the
// file changed under a response in flight, and descriptor accounting (/proc/self/fd).
import { mkdirSync, mkdtempSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { StaticFiles } from '../../src/static/serve.js';
import { waitFor, withTimeout } from '../support/processes.js';
import { drain, fdsUnder, openResponse, rawRequest } from './raw-request.js';

// Sparse: large enough that a paused client leaves most of it unread (socket buffers are a few MB).
const BIG = 64 * 1024 * 1024;

describe('StaticFiles streaming', () => {
  let dir: string;
  let server: Server;
  let port: number;
  const statuses: number[] = [];

  const sparse = (name: string): string => {
    const file = join(dir, name);
    writeFileSync(file, '');
    truncateSync(file, BIG);
    return file;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'roomgate-static-serve-'));
    mkdirSync(join(dir, 'files'));
    writeFileSync(join(dir, 'files', 'small.txt'), 'hello\n');
    const files = new StaticFiles({
      mounts: [
        { prefix: '/static/', dir: join(dir, 'files') },
        { prefix: '/static/nested/', dir },
      ],
      maxAgeS: 60,
      hashedNames: null,
      onResponse: (s) => statuses.push(s),
      logger: createLogger('silent'),
    });
    server = http.createServer((req, res) => {
      if (files.owns(req.url ?? '/')) files.handle(req, res);
      else {
        res.writeHead(418);
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await withTimeout(new Promise<void>((resolve) => server.close(() => resolve())), 5_000, 'server close');
    rmSync(dir, { recursive: true, force: true });
  });

  it('matches the longest prefix and leaves other paths alone', async () => {
    expect((await rawRequest(port, '/static/small.txt')).body.toString()).toBe('hello\n');
    expect((await rawRequest(port, '/static/nested/files/small.txt')).body.toString()).toBe('hello\n');
    expect((await rawRequest(port, '/other')).status).toBe(418);
    expect((await rawRequest(port, '/static')).status).toBe(418);
    expect(statuses.slice(0, 2)).toEqual([200, 200]);
  });

  it('cuts the connection when the file shrinks under a response (never a short body)', async () => {
    sparse('files/shrinks.bin');
    const { res } = await openResponse(port, '/static/shrinks.bin');
    expect(res.statusCode).toBe(200);
    expect(Number(res.headers['content-length'])).toBe(BIG);
    await new Promise((r) => setTimeout(r, 100));
    truncateSync(join(dir, 'files', 'shrinks.bin'), 1000);
    // Cut at once, not left waiting for bytes that will never come (until a keep-alive timeout).
    const got = await drain(res, 3_000);
    expect(got.complete).toBe(false);
    expect(got.bytes).toBeLessThan(BIG);
    await waitFor('descriptor released', 5_000, () => fdsUnder(dir).length === 0);
  });

  it('sends a file deleted under a response whole, from its open descriptor', async () => {
    sparse('files/deleted.bin');
    const { res } = await openResponse(port, '/static/deleted.bin');
    expect(res.statusCode).toBe(200);
    unlinkSync(join(dir, 'files', 'deleted.bin'));
    const got = await drain(res, 30_000);
    expect(got).toEqual({ bytes: BIG, complete: true });
    await waitFor('descriptor released', 5_000, () => fdsUnder(dir).length === 0);
    expect((await rawRequest(port, '/static/deleted.bin')).status).toBe(404);
  });

  it('closes the file when the client goes away mid-body', async () => {
    sparse('files/abandoned.bin');
    for (let i = 0; i < 5; i++) {
      const { req, res } = await openResponse(port, '/static/abandoned.bin');
      await withTimeout(new Promise((r) => res.once('data', r)), 5_000, 'first body chunk');
      req.destroy();
    }
    await waitFor('descriptors released', 5_000, () => fdsUnder(dir).length === 0);
  });

  it('closes the file after HEAD, 304, 412, 416 and refusals', async () => {
    const etag = (await rawRequest(port, '/static/small.txt', {}, 'HEAD')).headers.etag ?? '';
    expect(etag).not.toBe('');
    expect((await rawRequest(port, '/static/small.txt', { 'If-None-Match': etag })).status).toBe(304);
    expect((await rawRequest(port, '/static/small.txt', { 'If-Match': '"nope"' })).status).toBe(412);
    expect((await rawRequest(port, '/static/small.txt', { Range: 'bytes=100-' })).status).toBe(416);
    expect((await rawRequest(port, '/static/small.txt', {}, 'DELETE')).status).toBe(405);
    expect((await rawRequest(port, '/static/nested/files')).status).toBe(404);
    // Closed right after the answer (close runs on the thread pool).
    await waitFor('descriptors released', 2_000, () => fdsUnder(dir).length === 0);
  });
});
