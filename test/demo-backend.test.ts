/**
 * The demo backend is the witness in roomgate's integration tests, so it is
 * tested here as a real child process, exactly as roomgate runs it.
 */
import { backendEnv } from './support/processes.js';
import { EXPECTED_RECEIVER_ANSWERS, forgedPushes, signedFanoutHeaders, signedPushHeaders, signedRoomlessPushHeaders } from './support/push-receiver.js';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn, execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { WebSocket } from 'ws';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = path.join(ROOT, 'examples/demo-backend/server.ts');
const DIST = path.join(ROOT, 'dist/examples/demo-backend/server.js');

/**
 * `npm test` builds first, so dist/ is normally fresh. When vitest is run
 * directly (or the rest of the tree does not compile yet), compile just this
 * file to the very same dist path with the project's compiler options.
 */
function ensureBuilt(): void {
  if (existsSync(DIST) && statSync(DIST).mtimeMs >= statSync(SRC).mtimeMs) return;
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  // prettier-ignore
  execFileSync(process.execPath, [tsc,
    '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--lib', 'ES2023',
    '--types', 'node', '--rootDir', ROOT, '--outDir', path.join(ROOT, 'dist'), '--strict',
    '--noUncheckedIndexedAccess', '--noImplicitOverride', '--noFallthroughCasesInSwitch', '--esModuleInterop',
    '--skipLibCheck', '--sourceMap', '--verbatimModuleSyntax', SRC,
  ], { cwd: ROOT, stdio: 'pipe', timeout: 60_000 });
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// --- child process ---------------------------------------------------------------

interface Backend {
  proc: ChildProcess;
  port: number;
  id: string;
  line: string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: Backend[] = [];

async function startBackend(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Backend> {
  const proc = spawn(process.execPath, [DIST, ...args], {
    cwd: ROOT,
    env: { ...process.env, PORT: '', BACKEND_ID: '', HOST: '', TICK_MS: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const partial: Backend = { proc, port: 0, id: '', line: '', stderr: () => err, exited };
  started.push(partial);

  const line = await withTimeout(
    new Promise<string>((resolve, reject) => {
      let out = '';
      proc.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const nl = out.indexOf('\n');
        if (nl >= 0) resolve(out.slice(0, nl));
      });
      proc.once('exit', (code) => reject(new Error(`backend exited early (${code}): ${err}`)));
    }),
    10_000,
    'backend listening line',
  );
  const parsed = JSON.parse(line) as { event: string; id: string; port: number };
  return Object.assign(partial, { port: parsed.port, id: parsed.id, line });
}

async function stopBackend(b: Backend): Promise<void> {
  if (b.proc.exitCode === null && b.proc.signalCode === null) b.proc.kill('SIGTERM');
  try {
    await withTimeout(b.exited, 5_000, 'backend exit');
  } catch {
    b.proc.kill('SIGKILL');
    await withTimeout(b.exited, 5_000, 'backend exit after SIGKILL');
  }
}

// --- HTTP / WebSocket helpers --------------------------------------------------------------

interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function request(
  port: number,
  reqPath: string,
  opts: { method?: string; headers?: Record<string, string>; body?: Buffer } = {},
): Promise<HttpResult> {
  return withTimeout(
    new Promise<HttpResult>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port, path: reqPath, method: opts.method ?? 'GET', headers: opts.headers, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(opts.body);
    }),
    10_000,
    `${opts.method ?? 'GET'} ${reqPath}`,
  );
}

/** The status of a refused upgrade (-1: a socket error instead), within 5 s. */
function upgradeRefusal(url: string, what: string): Promise<number> {
  const ws = new WebSocket(url);
  return withTimeout(
    new Promise<number>((resolve) => {
      ws.once('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0);
        res.resume();
        ws.terminate();
      });
      ws.once('error', () => resolve(-1));
    }),
    5_000,
    what,
  ).finally(() => ws.terminate());
}

/** Polls reqPath until it answers `status` (a signal takes effect a moment after it is sent). */
async function waitForStatus(port: number, reqPath: string, status: number, headers: Record<string, string> = {}): Promise<HttpResult> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const res = await request(port, reqPath, { headers });
    if (res.status === status) return res;
    if (Date.now() > deadline) throw new Error(`timed out after 5000 ms waiting for ${reqPath} to answer ${status} (last ${res.status})`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function getJson<T>(port: number, reqPath: string): Promise<T> {
  const res = await request(port, reqPath);
  expect(res.status).toBe(200);
  return JSON.parse(res.body.toString()) as T;
}

type Msg = Record<string, unknown> & { type: string };

/** A ws client that queues every frame from the very first one (the server speaks first). */
class Client {
  readonly ws: WebSocket;
  private readonly queue: Msg[] = [];
  private waiter: (() => void) | undefined;
  readonly opened: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(port: number, wsPath = '/ws/live/', headers: Record<string, string> = {}) {
    this.ws = new WebSocket(`ws://127.0.0.1:${port}${wsPath}`, { headers });
    this.ws.on('message', (data) => {
      this.queue.push(JSON.parse(data.toString()) as Msg);
      this.waiter?.();
    });
    this.opened = withTimeout(
      new Promise((resolve, reject) => {
        this.ws.once('open', () => resolve());
        this.ws.once('error', reject);
      }),
      5_000,
      'ws open',
    );
    this.closed = new Promise((resolve) => this.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  /** Next frame, in order. */
  next(ms = 5_000): Promise<Msg> {
    return withTimeout(
      new Promise<Msg>((resolve) => {
        const take = (): void => {
          const m = this.queue.shift();
          if (m) {
            this.waiter = undefined;
            resolve(m);
          } else this.waiter = take;
        };
        take();
      }),
      ms,
      'ws frame',
    );
  }

  /** Skip frames until one of `type` arrives (presence frames may interleave). */
  async nextOf(type: string, ms = 5_000): Promise<Msg> {
    for (;;) {
      const m = await this.next(ms);
      if (m.type === type) return m;
    }
  }

  pending(): Msg[] {
    return [...this.queue];
  }

  async close(): Promise<void> {
    if (this.ws.readyState !== WebSocket.CLOSED) this.ws.close();
    await withTimeout(this.closed, 5_000, 'ws close');
  }
}

const clients: Client[] = [];

async function connect(port: number, wsPath?: string, headers?: Record<string, string>): Promise<{ c: Client; sessionId: string }> {
  const c = new Client(port, wsPath, headers);
  clients.push(c);
  await c.opened;
  const hello = await c.next();
  expect(hello.type).toBe('connect');
  return { c, sessionId: hello.session_id as string };
}

async function mount(port: number, mountMsg: Record<string, unknown>, wsPath?: string) {
  const conn = await connect(port, wsPath);
  conn.c.send({ type: 'mount', ...mountMsg });
  const mounted = await conn.c.nextOf('mounted');
  return { ...conn, mounted };
}

interface RoomsBody {
  id: string;
  rooms: Record<string, number>;
  sockets: number;
}

/** Close handling is asynchronous on the server: poll until the counts match. */
async function expectRooms(port: number, rooms: Record<string, number>, sockets: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  let last: RoomsBody | undefined;
  while (Date.now() < deadline) {
    last = await getJson<RoomsBody>(port, '/_backend/rooms');
    if (JSON.stringify(sortKeys(last.rooms)) === JSON.stringify(sortKeys(rooms)) && last.sockets === sockets) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  expect(last).toEqual({ id: expect.any(String), rooms, sockets });
}

function sortKeys(o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}

// --- tests -------------------------------------------------------------------------------

let b1: Backend;

beforeAll(async () => {
  ensureBuilt();
  b1 = await startBackend(['--port', '0', '--id', 'b1'], backendEnv('b1'));
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await Promise.all(started.map(stopBackend));
  for (const b of started) expect(b.proc.exitCode !== null || b.proc.signalCode !== null).toBe(true);
});

describe('demo backend: process and HTTP', () => {
  it('prints exactly the listening line with the real port', () => {
    expect(b1.line).toBe(`{"event":"listening","id":"b1","port":${b1.port}}`);
    expect(b1.port).toBeGreaterThan(0);
  });

  it('answers /healthz and tags every response with X-Backend-Id', async () => {
    const ok = await request(b1.port, '/healthz');
    expect(ok.status).toBe(200);
    expect(ok.body.toString()).toBe('ok');
    expect(ok.headers['x-backend-id']).toBe('b1');

    const missing = await request(b1.port, '/nope');
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toMatch(/^text\/plain/);
    expect(missing.headers['x-backend-id']).toBe('b1');
  });

  it('serves the game page naming the backend and room, with the default ws path', async () => {
    const res = await request(b1.port, '/game/42/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['x-backend-id']).toBe('b1');
    expect(res.headers['set-cookie']).toBeUndefined();
    const html = res.body.toString();
    expect(html).toContain('<html lang="en">');
    expect(html).toMatch(/<title>[^<]+<\/title>/);
    expect(html).toContain('<p id="served-by">Served by backend <strong>b1</strong> for room <strong>42</strong></p>');
    expect(html).toContain('<meta name="djust-ws-path" content="/ws/live/">');
    expect(html).toContain('<script>');
  });

  it('honours a valid X-Forwarded-Prefix in the ws path', async () => {
    const res = await request(b1.port, '/game/42/', { headers: { 'X-Forwarded-Prefix': '/r/42' } });
    expect(res.body.toString()).toContain('<meta name="djust-ws-path" content="/r/42/ws/live/">');
  });

  it.each([
    ['markup injection', '/r/42"><script>alert(1)</script>'],
    ['not a path', 'https://evil.example'],
    ['too long', `/${'a'.repeat(201)}`],
    ['spaces', '/r/4 2'],
  ])('ignores a malicious X-Forwarded-Prefix (%s)', async (_name, prefix) => {
    const res = await request(b1.port, '/game/42/', { headers: { 'X-Forwarded-Prefix': prefix } });
    expect(res.status).toBe(200);
    const html = res.body.toString();
    expect(html).toContain('<meta name="djust-ws-path" content="/ws/live/">');
    expect(html).not.toContain('alert(1)');
    expect(html).not.toContain('evil.example');
  });

  it('escapes the room name in the page', async () => {
    const html = (await request(b1.port, '/game/%3Cb%3Ex/')).body.toString();
    expect(html).toContain('room <strong>&#60;b&#62;x</strong>');
    expect(html).not.toContain('<b>x');
  });

  it('echoes a streamed 1 MB POST: method, url, body size and sha256', async () => {
    const body = randomBytes(1024 * 1024);
    const res = await request(b1.port, '/_backend/echo/deep/path?q=1&x=y', {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'X-Test': 'yes' },
      body,
    });
    expect(res.status).toBe(200);
    expect(res.headers['x-backend-id']).toBe('b1');
    const echo = JSON.parse(res.body.toString()) as Record<string, unknown> & { headers: Record<string, string> };
    expect(echo.id).toBe('b1');
    expect(echo.method).toBe('POST');
    expect(echo.url).toBe('/_backend/echo/deep/path?q=1&x=y');
    expect(echo.bodyBytes).toBe(body.length);
    expect(echo.bodySha256).toBe(createHash('sha256').update(body).digest('hex'));
    expect(echo.headers['x-test']).toBe('yes');
    expect(echo.rawHeaders).toEqual(expect.arrayContaining(['X-Test', 'yes']));
    expect(echo.remoteAddress).toMatch(/127\.0\.0\.1/);
  });

  it('echoes any method with an empty body', async () => {
    const echo = JSON.parse((await request(b1.port, '/_backend/echo', { method: 'DELETE' })).body.toString());
    expect(echo).toMatchObject({ method: 'DELETE', url: '/_backend/echo', bodyBytes: 0 });
    expect(echo.bodySha256).toBe(createHash('sha256').digest('hex'));
  });

  it('serves /_backend/slow after the delay and /_backend/big in full', async () => {
    const t0 = Date.now();
    const slow = await request(b1.port, '/_backend/slow?ms=150');
    expect(slow.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);

    const big = await request(b1.port, '/_backend/big?kb=300');
    expect(big.status).toBe(200);
    expect(big.body.length).toBe(300 * 1024);
  });
});

describe('demo backend: djust-style WebSocket', () => {
  it('speaks first with a connect frame, and answers ping', async () => {
    const { c, sessionId } = await connect(b1.port);
    expect(sessionId).toMatch(/^[0-9a-f]{16,}$/);
    c.send({ type: 'ping' });
    expect(await c.next()).toEqual({ type: 'pong' });
    await c.close();
  });

  it('reports errors for malformed JSON and events before mount, and keeps the socket', async () => {
    const { c } = await connect(b1.port);
    c.send('{not json');
    expect(await c.next()).toMatchObject({ type: 'error', message: expect.any(String) });
    c.send({ type: 'event', data: 1 });
    expect(await c.next()).toMatchObject({ type: 'error' });
    c.send({ type: 'mount', url: '/no/room/here/' });
    expect(await c.next()).toMatchObject({ type: 'error' });
    c.send({ type: 'ping' });
    expect(await c.next()).toEqual({ type: 'pong' });
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
    await c.close();
  });

  it("push receiver: hands a message to the room's sockets; an epoch older than the one held is refused, a newer one is noted and the room kept", async () => {
    const a = await mount(b1.port, { room: 'pushed' });
    let n = 0;
    const post = (epoch: number, body: string) =>
      request(b1.port, '/_roomgate/push', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...signedPushHeaders('b1', 'pushed', epoch, n++ === 0 ? 'm1' : `m${n}`, body, 'job:t') },
        body: Buffer.from(body),
      });
    const first = await post(3, '{"n":1}');
    expect(first.status).toBe(204);
    // The answer says how many sockets got it (docs/push.md): roomgate passes it on.
    expect(first.headers['x-roomgate-sockets']).toBe('1');
    expect(await a.c.nextOf('push')).toEqual({ type: 'push', room: 'pushed', id: 'm1', sender: 'job:t', message: { n: 1 } });
    // Older than the epoch the room is held under: for a copy that is gone.
    expect((await post(2, '{}')).status).toBe(409);
    expect((await post(3, 'not json')).status).toBe(400);
    // Newer, with live sockets here: the placement was written again in place (the store lost its
    // data); the room and its sockets stay, and 5 is the epoch held from now on.
    expect((await post(5, '{"n":2}')).status).toBe(204);
    expect(await a.c.nextOf('push')).toMatchObject({ message: { n: 2 } });
    expect((await post(4, '{}')).status).toBe(409);
    expect(a.c.ws.readyState).toBe(WebSocket.OPEN);
    await a.c.close();
    // No room named: refused.
    const noRoom = signedRoomlessPushHeaders('b1', 'm-none', '{}');
    expect((await request(b1.port, '/_roomgate/push', { method: 'POST', headers: noRoom, body: Buffer.from('{}') })).status).toBe(409);
  });

  it('push receiver: a socket that never mounts gets the pushes of the room its handshake was routed by; the answer counts every socket reached', async () => {
    // As roomgate routes them: the handshake carries X-Roomgate-Room.
    const plain = await connect(b1.port, '/ws/live/', { 'X-Roomgate-Room': 'plain', 'X-Roomgate-Epoch': '1' });
    const mounted = await mount(b1.port, { room: 'plain' });
    // Routed by "plain", mounting another room (a live_redirect, or a tab with another tab's room
    // cookie): refused by the fence, once, with 4400 (the page does not reconnect after it).
    const moved = await connect(b1.port, '/ws/live/', { 'X-Roomgate-Room': 'plain', 'X-Roomgate-Epoch': '1' });
    moved.c.send({ type: 'mount', room: 'elsewhere' });
    expect(await moved.c.nextOf('error')).toMatchObject({ error: 'wrong-room' });
    expect((await moved.c.closed).code).toBe(4400);
    const body = '{"text":"hello"}';
    const r = await request(b1.port, '/_roomgate/push', { method: 'POST', headers: { 'Content-Type': 'application/json', ...signedPushHeaders('b1', 'plain', 1, 'p-1', body) }, body: Buffer.from(body) });
    expect(r.status).toBe(204);
    expect(r.headers['x-roomgate-sockets']).toBe('2');
    expect(await plain.c.nextOf('push')).toMatchObject({ room: 'plain', id: 'p-1', message: { text: 'hello' } });
    expect(await mounted.c.nextOf('push')).toMatchObject({ room: 'plain', id: 'p-1' });
    // Closed sockets are not counted; a room with no socket here: 0, still taken (204).
    await plain.c.close();
    await mounted.c.close();
    await expectRooms(b1.port, {}, 0);
    const again = await request(b1.port, '/_roomgate/push', { method: 'POST', headers: { 'Content-Type': 'application/json', ...signedPushHeaders('b1', 'plain', 1, 'p-2', body) }, body: Buffer.from(body) });
    expect([again.status, again.headers['x-roomgate-sockets']]).toEqual([204, '0']);
  });

  it('push receiver: a fan-out counts the sockets of every room it reached; a hostile rooms list is skipped, never a crash', async () => {
    const a = await mount(b1.port, { room: 'fan-a' });
    const b = await connect(b1.port, '/ws/live/', { 'X-Roomgate-Room': 'fan-b', 'X-Roomgate-Epoch': '1' });
    const body = JSON.stringify({ rooms: [null, 7, 'x', { room: 'fan-a', epoch: 1 }, { room: 'fan-b', epoch: 1 }, { room: 'fan-none', epoch: 1 }], message: { n: 1 } });
    const r = await request(b1.port, '/_roomgate/push', { method: 'POST', headers: { 'Content-Type': 'application/json', ...signedFanoutHeaders('b1', 'f-1', body) }, body: Buffer.from(body) });
    expect([r.status, r.headers['x-roomgate-sockets']]).toEqual([204, '2']);
    expect(await a.c.nextOf('push')).toMatchObject({ room: 'fan-a', message: { n: 1 } });
    expect(await b.c.nextOf('push')).toMatchObject({ room: 'fan-b', message: { n: 1 } });
    expect((await request(b1.port, '/healthz')).status).toBe(200);
    await a.c.close();
    await b.c.close();
  });

  it('push receiver: refuses every push without a valid proof (unsigned, forged, stale, replayed, moved to another room, epoch, body or purpose)', async () => {
    const a = await mount(b1.port, { room: 'forged' });
    expect(await forgedPushes(`http://127.0.0.1:${b1.port}/_roomgate/push`, 'b1', 'forged', 1)).toEqual(EXPECTED_RECEIVER_ANSWERS);
    // Only the genuine one reached the room's socket.
    expect(await a.c.nextOf('push')).toMatchObject({ message: { genuine: true } });
    // Nothing else arrives before the answer to a ping sent after all of them.
    a.c.send({ type: 'ping' });
    const between: Msg[] = [];
    for (let m = await a.c.next(); m.type !== 'pong'; m = await a.c.next()) between.push(m);
    expect(between.filter((m) => m.type === 'push')).toEqual([]);
    await a.c.close();
  });

  it('push receiver: without a key (ROOMGATE_BACKEND_KEYS unset) every push is refused', async () => {
    const bare = await startBackend(['--port', '0', '--id', 'bare'], { ...backendEnv('bare'), ROOMGATE_BACKEND_KEYS: '' });
    const body = '{}';
    const r = await request(bare.port, '/_roomgate/push', { method: 'POST', headers: { 'Content-Type': 'application/json', ...signedPushHeaders('bare', 'r', 1, 'x', body) }, body: Buffer.from(body) });
    expect(r.status).toBe(403);
  });

  it('rejects upgrades on other paths', async () => {
    expect(await upgradeRefusal(`ws://127.0.0.1:${b1.port}/not/live/`, 'upgrade rejection')).toBe(404);
  });

  it('counts sockets per room across mounts, a room move and closes', async () => {
    await expectRooms(b1.port, {}, 0);

    // url (djust's location.pathname, also behind a /r/{room} prefix), explicit room, ?room= query.
    const a = await mount(b1.port, { url: '/game/alpha/' }, '/r/alpha/ws/live/');
    expect(a.mounted).toEqual({ type: 'mounted', room: 'alpha', backend: 'b1', members: 1, moves: 0, version: 1 });
    const b = await mount(b1.port, { url: '/r/alpha/game/alpha/?x=1' });
    expect(b.mounted).toMatchObject({ room: 'alpha', members: 2 });
    expect(await a.c.nextOf('presence')).toEqual({ type: 'presence', room: 'alpha', members: 2 });
    const c = await mount(b1.port, { url: '/game/ignored/', room: 'beta' });
    expect(c.mounted).toMatchObject({ room: 'beta', members: 1 });
    const d = await mount(b1.port, { url: '/' }, '/ws/live/?room=gamma');
    expect(d.mounted).toMatchObject({ room: 'gamma', members: 1 });
    const idle = await connect(b1.port); // connected but never mounted: counted in sockets only
    await expectRooms(b1.port, { alpha: 2, beta: 1, gamma: 1 }, 5);

    // A second mount is a live_redirect: d leaves gamma (dropped) and joins beta.
    d.c.send({ type: 'mount', room: 42 });
    expect(await d.c.nextOf('mounted')).toMatchObject({ room: '42', members: 1 });
    d.c.send({ type: 'mount', url: '/game/beta/' });
    expect(await d.c.nextOf('mounted')).toMatchObject({ room: 'beta', members: 2 });
    await expectRooms(b1.port, { alpha: 2, beta: 2 }, 5);

    await a.c.close();
    expect(await b.c.nextOf('presence')).toEqual({ type: 'presence', room: 'alpha', members: 1 });
    await expectRooms(b1.port, { alpha: 1, beta: 2 }, 4);

    await Promise.all([b.c.close(), c.c.close(), d.c.close(), idle.c.close()]);
    await expectRooms(b1.port, {}, 0);
  });

  it('broadcasts events to every member of the room, sender included, and nobody else; each is a move of the room, numbered, and mounted reports them', async () => {
    const a = await mount(b1.port, { room: 'x' });
    const b = await mount(b1.port, { room: 'x' });
    const other = await mount(b1.port, { room: 'y' });
    await a.c.nextOf('presence'); // b joined

    a.c.send({ type: 'event', data: { move: 'e4', n: [1, 2] } });
    // `version`: each socket's own sequence of view frames (its `mounted` was 1), as djust's client follows it.
    const patch = { type: 'patch', room: 'x', from: a.sessionId, data: { move: 'e4', n: [1, 2] }, move: 1, version: 2 };
    expect(await a.c.nextOf('patch')).toEqual(patch);
    expect(await b.c.nextOf('patch')).toEqual(patch);
    b.c.send({ type: 'event', data: 'e5' });
    expect(await a.c.nextOf('patch')).toMatchObject({ from: b.sessionId, move: 2 });
    // The room's state: a socket that mounts now is told how many moves were made.
    const late = await mount(b1.port, { room: 'x' });
    expect(late.mounted).toMatchObject({ room: 'x', members: 3, moves: 2 });
    await late.c.close();

    // Both room-x members already have the patch, so it was broadcast before the
    // server reads this ping: if "other" had received it, it would come first.
    other.c.send({ type: 'ping' });
    expect(await other.c.next()).toEqual({ type: 'pong' });
    expect(other.c.pending()).toEqual([]);

    await Promise.all([a.c.close(), b.c.close(), other.c.close()]);
    await expectRooms(b1.port, {}, 0);
  });
});

describe('demo backend: lifecycle', () => {
  it('takes id, port and tick from the environment and sends ~140-byte ticks', async () => {
    const b = await startBackend([], { BACKEND_ID: 'envb', PORT: '0', TICK_MS: '30' });
    expect(b.id).toBe('envb');
    const { c } = await mount(b.port, { room: 't' });
    const raw = await withTimeout(
      new Promise<string>((resolve) =>
        c.ws.on('message', (d) => {
          const s = d.toString();
          if (s.includes('"tick"')) resolve(s);
        }),
      ),
      5_000,
      'tick frame',
    );
    expect(Buffer.byteLength(raw)).toBeGreaterThanOrEqual(130);
    expect(Buffer.byteLength(raw)).toBeLessThanOrEqual(150);
    expect(JSON.parse(raw)).toMatchObject({ type: 'tick', t: expect.any(Number), pad: expect.any(String) });
    await c.close();
    await stopBackend(b);
  });

  it('on SIGTERM closes every socket with 1012 and exits 0', async () => {
    const b = await startBackend(['--id', 'term', '--port', '0', '--host', '127.0.0.1']);
    const mounted = await mount(b.port, { room: 'bye' });
    const idle = await connect(b.port);

    // The limits guard against a hang only (the sockets are closed, not left to time out).
    b.proc.kill('SIGTERM');
    const [m, i] = await Promise.all([
      withTimeout(mounted.c.closed, 10_000, 'mounted socket close'),
      withTimeout(idle.c.closed, 10_000, 'idle socket close'),
    ]);
    expect(m.code).toBe(1012);
    expect(i.code).toBe(1012);
    const exit = await withTimeout(b.exited, 10_000, 'process exit');
    expect(exit).toEqual({ code: 0, signal: null });
    expect(b.stderr()).not.toMatch(/Error/);
  });

  it('behaves like apps health checks must cope with: --healthz-status, --allowed-hosts, SIGUSR2', async () => {
    const noRoute = await startBackend(['--port', '0', '--id', 'nr', '--healthz-status', '404']);
    expect((await request(noRoute.port, '/healthz')).status).toBe(404);
    expect((await request(noRoute.port, '/game/1/')).status).toBe(200);

    // Django's ALLOWED_HOSTS: the Host name counts, its port does not.
    const dj = await startBackend(['--port', '0', '--id', 'dj', '--allowed-hosts', 'app.example,other.example']);
    expect((await request(dj.port, '/healthz')).status).toBe(400); // Host: 127.0.0.1:PORT
    expect((await request(dj.port, '/healthz', { headers: { host: 'APP.example:8000' } })).status).toBe(200);
    expect((await request(dj.port, '/game/1/', { headers: { host: 'other.example' } })).status).toBe(200);
    expect((await request(dj.port, '/game/1/', { headers: { host: 'evil.example' } })).status).toBe(400);
    expect(await upgradeRefusal(`ws://127.0.0.1:${dj.port}/ws/live/`, 'upgrade with a Host not allowed')).toBe(400);

    // SIGUSR2: /healthz fails (503) while pages and sockets go on; again: it answers again.
    dj.proc.kill('SIGUSR2');
    const failing = await waitForStatus(dj.port, '/healthz', 503, { host: 'app.example' });
    expect(failing.body.toString()).toMatch(/SIGUSR2/);
    expect((await request(dj.port, '/game/1/', { headers: { host: 'app.example' } })).status).toBe(200);
    dj.proc.kill('SIGUSR2');
    await waitForStatus(dj.port, '/healthz', 200, { host: 'app.example' });

    // Bad values stop it with a message.
    const bad = spawn(process.execPath, [DIST, '--port', '0', '--healthz-status', '99'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    bad.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => bad.once('exit', (c) => resolve(c)));
    try {
      expect(await withTimeout(exited, 5_000, 'bad flag exit')).toBe(1);
    } finally {
      if (bad.exitCode === null) bad.kill('SIGKILL');
    }
    expect(err).toMatch(/--healthz-status must be an HTTP status 200\.\.599, got 99/);
  });

  it('exports startDemoBackend for in-process use', async () => {
    const mod = (await import(pathToFileURL(DIST).href)) as typeof import('../examples/demo-backend/server.js');
    const backend = await mod.startDemoBackend({ port: 0, host: '127.0.0.1', id: 'inproc' });
    try {
      expect(backend.id).toBe('inproc');
      const rooms = await getJson<RoomsBody>(backend.port, '/_backend/rooms');
      expect(rooms).toEqual({ id: 'inproc', rooms: {}, sockets: 0 });
      const { c } = await mount(backend.port, { room: 'in' });
      const closed = c.closed;
      await withTimeout(backend.close(), 3_000, 'in-process close');
      expect((await withTimeout(closed, 3_000, 'socket close')).code).toBe(1012);
    } finally {
      await backend.close();
    }
  });
});
