// The public app with inject() (no port), and the one decision the public server asks of the
// control plane per request: owns(url). Which paths are roomgate's (API while api.enabled, lobby
// pages, the status page only as status.public says), the pages' answers (headers, HEAD, 405,
// board parameter, New room), status.public token and open. And, over a real port, that closing
// the control plane ends open event streams at once (shutdown never waits for them).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { makeControl } from '../support/control.js';

const ADMIN_TOKEN = 'status-admin-token-0123456789';
const store = new MemorySharedDataStore('gw-pages', { presenceTtlMs: 60_000 });
const planes: ControlPlane[] = [];

async function plane(over: Parameters<typeof makeControl>[1]): Promise<ControlPlane> {
  const { control } = makeControl(store, over);
  planes.push(control);
  await control.ready();
  return control;
}

afterAll(async () => {
  await Promise.all(planes.map((p) => p.close()));
});

describe('owns(): what the public port hands to the control plane', () => {
  it('the API (while enabled), the lobby pages, the status page only with status.public on; nothing else', async () => {
    const off = await plane({});
    const open = await plane({ status: { public: 'open' } });
    const noApi = await plane({ api: { enabled: false } });
    for (const url of ['/_roomgate/api/online', '/_roomgate/api', '/_roomgate/apix', '/_roomgate/lobby', '/_roomgate/lobby/?board=x', '/_roomgate/lobby/new']) {
      expect(off.owns(url), url).toBe(true);
      expect(noApi.owns(url), url).toBe(false);
    }
    for (const url of ['/_roomgate', '/_roomgate/', '/_roomgate/status/stream', '/_roomgate/?x=1']) {
      expect(off.owns(url), url).toBe(false);
      expect(open.owns(url), url).toBe(true);
    }
    for (const url of ['/', '/game/1/', '/_roomgate/other', '/_roomgatex', '/r/1/_roomgate/lobby', '/static/_roomgate/api']) {
      expect(open.owns(url), url).toBe(false);
    }
  });
});

describe('the lobby pages', () => {
  let cp: ControlPlane;
  beforeAll(async () => {
    cp = await plane({ room: { pagePaths: ['/play/{room}/'] } });
    await store.publishPresence([{ room: 'lobby-room', backend: 'b1', sockets: 2, since: Date.now() }, { room: 'private-7f3a9c2e', backend: 'b1', sockets: 1, since: Date.now() }], 60_000);
    // Listed by its metadata (the app's choice); the other room is nobody's business.
    await store.setMeta('lobby-room', { title: 'Lobby room' }, false);
  });

  it('the lobby: HTML with the hardening headers and its rooms; HEAD without a body; other methods 405', async () => {
    const r = await cp.publicApp.inject({ method: 'GET', url: '/_roomgate/lobby' });
    expect(r.statusCode).toBe(200);
    expect(r.headers).toMatchObject({
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    });
    expect(r.headers['content-security-policy']).toMatch(/^default-src 'none'/);
    expect(r.body).toContain('/play/lobby-room/');
    expect(r.body).not.toContain('private-7f3a9c2e');
    const head = await cp.publicApp.inject({ method: 'HEAD', url: '/_roomgate/lobby/' });
    expect(head.statusCode).toBe(200);
    expect(head.body).toBe('');
    for (const method of ['POST', 'DELETE', 'OPTIONS'] as const) {
      const x = await cp.publicApp.inject({ method, url: '/_roomgate/lobby' });
      expect(x.statusCode, method).toBe(405);
      expect(x.headers.allow).toBe('GET, HEAD');
      expect(x.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(x.body).toBe('read-only: GET or HEAD\n');
    }
  });

  it('?board=: one valid leaderboard name, else 400 in plain text', async () => {
    expect((await cp.publicApp.inject({ url: '/_roomgate/lobby?board=weekly' })).statusCode).toBe(200);
    expect((await cp.publicApp.inject({ url: '/_roomgate/lobby?board=' })).statusCode).toBe(200);
    for (const q of ['board=a%20b', 'board=a&board=b', `board=${'x'.repeat(65)}`]) {
      const r = await cp.publicApp.inject({ url: `/_roomgate/lobby?${q}` });
      expect(r.statusCode, q).toBe(400);
      expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(r.body).toBe('board: one leaderboard name of 1 to 64 characters from A-Z a-z 0-9 _ . : -\n');
    }
  });

  it('New room: 303 to a fresh room page that room.pattern accepts; 500 in text when no name can match', async () => {
    const r = await cp.publicApp.inject({ url: '/_roomgate/lobby/new' });
    expect(r.statusCode).toBe(303);
    expect(r.headers.location).toMatch(/^\/play\/[a-z]+-[a-z]+-\d{4}\/$/);
    expect(r.body).toBe(`see ${r.headers.location}\n`);
    const strict = await plane({ room: { pattern: '^Z$' } });
    const none = await strict.publicApp.inject({ url: '/_roomgate/lobby/new' });
    expect(none.statusCode).toBe(500);
    expect(none.body).toBe('no generated room name matches room.pattern; name the room yourself\n');
  });
});

describe('the status page on the public port', () => {
  it('token: 401 with a Basic challenge (before the method is looked at), 200 with the admin token as password; never backend URLs', async () => {
    const cp = await plane({ status: { public: 'token' }, admin: { token: ADMIN_TOKEN } });
    for (const [method, auth] of [
      ['GET', undefined],
      ['GET', 'Bearer nope'],
      ['POST', undefined],
    ] as const) {
      const r = await cp.publicApp.inject({ method, url: '/_roomgate/', headers: auth ? { authorization: auth } : {} });
      expect(r.statusCode).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Basic realm="roomgate status", charset="UTF-8"');
      expect(r.body).toBe('the status page needs the admin token: any user name, the token as password (or Authorization: Bearer <token>)\n');
    }
    const ok = await cp.publicApp.inject({ url: '/_roomgate/', headers: { authorization: `Basic ${Buffer.from(`me:${ADMIN_TOKEN}`).toString('base64')}` } });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('gw-test');
    expect(ok.body).not.toContain('10.0.0.');
    const stream = await cp.publicApp.inject({ method: 'HEAD', url: '/_roomgate/status/stream', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(stream.statusCode).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
  });

  it('token without admin.token: 403 in text; open: anyone', async () => {
    const cp = await plane({ status: { public: 'token' }, admin: { token: '' } });
    const r = await cp.publicApp.inject({ url: '/_roomgate', headers: { authorization: 'Bearer x' } });
    expect(r.statusCode).toBe(403);
    expect(r.body).toBe('status.public is "token" but no admin.token is configured: nobody can be let in\n');
    const open = await plane({ status: { public: 'open' } });
    expect((await open.publicApp.inject({ url: '/_roomgate' })).statusCode).toBe(200);
  });
});

describe('shutdown with open event streams', () => {
  it('closeStreams() ends lobby and status streams at once; the listener then closes without waiting', async () => {
    const cp = await plane({ status: { public: 'open' }, api: { streamIntervalMs: 100 } });
    const server = http.createServer((req, res) => (cp.owns(req.url ?? '/') ? cp.handle(req, res) : res.end()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const port = (server.address() as AddressInfo).port;
    try {
      const open = (path: string): Promise<http.IncomingMessage> =>
        new Promise((resolve, reject) => {
          const req = http.get({ host: '127.0.0.1', port, path, timeout: 5_000 }, resolve);
          req.on('timeout', () => req.destroy(new Error(`no answer from ${path}`)));
          req.on('error', reject);
        });
      const streams = await Promise.all([open('/_roomgate/api/lobby/stream'), open('/_roomgate/status/stream')]);
      for (const s of streams) expect(s.statusCode).toBe(200);
      expect(cp.streams).toBe(2);
      const ended = streams.map((s) => new Promise<void>((resolve) => s.on('end', resolve).resume()));
      const t = Date.now();
      cp.closeStreams();
      await Promise.race([Promise.all(ended), new Promise((_, reject) => setTimeout(() => reject(new Error('streams still open after 3 s')), 3_000))]);
      expect(cp.streams).toBe(0);
      // Later stream requests: 503 (the lobby stream in the error shape, the status stream in text).
      const again = await open('/_roomgate/api/lobby/stream');
      expect(again.statusCode).toBe(503);
      again.resume();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await closed;
      expect(Date.now() - t).toBeLessThan(3_000);
    } finally {
      server.closeAllConnections();
      if (server.listening) server.close();
    }
  });
});
