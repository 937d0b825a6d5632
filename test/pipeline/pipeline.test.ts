// The request pipeline in process: a real node:http server hands each request to a RequestPipeline
// whose parts (control plane, static mounts, the app's page path) are small recording handlers,
// so what is checked is the order itself: health before everything, roomgate's own paths before
// static mounts, both before the app, and the byte-level front's question (goesToTheApp) agreeing
// with where request() sends the same path. No gateway is started; every wait has a timeout.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestPipeline, type OwnPaths, type PipelineOptions } from '../../src/pipeline/pipeline.js';
import { requestOf } from '../../src/http/client-request.js';
import { createMethodPolicy } from '../../src/http/methods.js';
import { createLogger } from '../../src/observability/logger.js';
import { Forwarding } from '../../src/forward/forwarded.js';
import { PageCookies } from '../../src/proxy/page-cookie.js';
import type { KeyResult } from '../../src/room/extract.js';

/** A part that claims the paths starting with `prefix` and answers with its name. */
function part(name: string, prefix: string): OwnPaths {
  return {
    owns: (url) => url.startsWith(prefix),
    handle: (_req, res) => {
      res.writeHead(200, { 'X-Answered-By': name });
      res.end(name);
    },
  };
}

let ready = true;
const upgrades: string[] = [];
const NO_KEY = { room: null, source: null, pinRefused: null } as unknown as KeyResult;

/**
 * The app's steps (5 to 9) as small recording parts: a page the forwarding core is given answers
 * "app" itself; an upgrade records its target and closes the socket.
 */
function appParts(): Pick<PipelineOptions, 'methods' | 'roomKey' | 'cache' | 'cookies' | 'forward' | 'pages' | 'leanPages' | 'upgrades'> {
  return {
    methods: createMethodPolicy([]),
    roomKey: { keyFor: () => NO_KEY },
    cache: null,
    cookies: new PageCookies(null, new Forwarding([]), createLogger('silent')),
    forward: { route: (x) => x.send(null as never, null, 1) },
    pages: {
      refuse: () => undefined,
      readBody: (_r, _res, then) => then({ kind: 'none' }),
      cacheWriter: () => {
        throw new Error('no cache here');
      },
      exchange: (_r, res) => ({
        path: 'page',
        room: null,
        source: null,
        gone: () => false,
        send: () => {
          res.writeHead(200, { 'X-Answered-By': 'app' });
          res.end('app');
        },
        refuse: () => undefined,
      }),
    },
    leanPages: null,
    upgrades: {
      take: () => true,
      refusal: () => null,
      refuseHandshake: () => undefined,
      refuse: () => undefined,
      exchange: (r, _key, socket) => ({
        path: 'upgrade',
        room: null,
        source: null,
        gone: () => false,
        send: () => void (upgrades.push(r.target), socket.destroy()),
        refuse: () => undefined,
      }),
    },
  };
}

const pipeline = new RequestPipeline({
  isReady: () => ready,
  // The control plane claims /_roomgate/ and, to test the order, also /healthz-like and static-like paths.
  control: part('control', '/_roomgate/'),
  statics: part('static', '/static/'),
  ...appParts(),
});
const request = (p: RequestPipeline) => (req: http.IncomingMessage, res: http.ServerResponse) => p.request(requestOf(req, 'x-room', false) as NonNullable<ReturnType<typeof requestOf>>, req, res);
const server = http.createServer(request(pipeline));
let base = '';

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function get(path: string): Promise<{ status: number; by: string | null; body: string }> {
  const res = await fetch(base + path, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, by: res.headers.get('x-answered-by'), body: await res.text() };
}

describe('the request pipeline', () => {
  const cases: [string, string][] = [
    ['/healthz', 'health'],
    ['/healthz?probe=1', 'health'],
    ['/readyz', 'health'],
    ['/_roomgate/api/lobby', 'control'],
    ['/_roomgate/status', 'control'],
    ['/static/app.js', 'static'],
    ['/', 'app'],
    ['/game/42', 'app'],
    ['/healthzx', 'app'],
    ['/r/42/_roomgate/api', 'app'],
  ];

  it.each(cases)('%s goes to %s', async (path, where) => {
    const r = await get(path);
    expect(r.status).toBe(200);
    if (where === 'health') {
      expect(r.by).toBeNull();
      expect(r.body).toMatch(/^(ok|ready)\n$/);
    } else expect(r.by).toBe(where);
  });

  it("the byte-level front's question agrees with where request() sends each path", async () => {
    for (const [path, where] of cases) expect(pipeline.goesToTheApp(path), path).toBe(where === 'app');
  });

  it('health comes before roomgate\'s own paths: a control plane claiming everything still does not get /healthz', async () => {
    const greedy = new RequestPipeline({
      isReady: () => true,
      control: part('control', '/'),
      statics: null,
      ...appParts(),
    });
    expect(greedy.goesToTheApp('/healthz')).toBe(false);
    expect(greedy.goesToTheApp('/anything')).toBe(false);
    const s = http.createServer(request(greedy));
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    try {
      const port = (s.address() as AddressInfo).port;
      const health = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5_000) });
      expect(health.headers.get('x-answered-by')).toBeNull();
      expect(await health.text()).toBe('ok\n');
      const other = await fetch(`http://127.0.0.1:${port}/x`, { signal: AbortSignal.timeout(5_000) });
      expect(other.headers.get('x-answered-by')).toBe('control');
      await other.text();
    } finally {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });

  it('readiness: /readyz is 503 while stopping, /healthz stays 200', async () => {
    ready = false;
    try {
      expect(await get('/readyz')).toMatchObject({ status: 503, body: 'shutting down\n' });
      expect(await get('/healthz')).toMatchObject({ status: 200, body: 'ok\n' });
    } finally {
      ready = true;
    }
  });

  it('an upgrade always goes to the app', async () => {
    const server2 = http.createServer();
    server2.on('upgrade', (req, socket, head) => pipeline.upgrade(requestOf(req, 'x-room', true) as NonNullable<ReturnType<typeof requestOf>>, socket as import('node:net').Socket, head));
    await new Promise<void>((resolve) => server2.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server2.address() as AddressInfo).port;
      await new Promise<void>((resolve) => {
        const req = http.request({ port, host: '127.0.0.1', path: '/_roomgate/status', headers: { Connection: 'Upgrade', Upgrade: 'websocket' }, timeout: 5_000 });
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        req.end();
      });
      expect(upgrades).toEqual(['/_roomgate/status']);
    } finally {
      server2.closeAllConnections();
      await new Promise<void>((resolve) => server2.close(() => resolve()));
    }
  });
});
