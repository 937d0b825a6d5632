// The edge's confirmed defects, each as an attacker would try it: raw bytes into the real gateway
// (in the test's process, test/support/here.ts: a crash there fails the run as a dead child
// would fail alive()), real backends that log what they parsed. Every case here failed before its
// fix; the conformance corpus (test/conformance) covers the classes around them.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHere, stopAllHere, type GatewayHere } from '../support/here.js';
import { stopAll, waitFor } from '../support/processes.js';
import { startRawBackend, type RawBackend } from '../conformance/backend.js';
import { aliveProblem, closeLoggingBackends, exchange, HANDSHAKE, loggingBackend, statuses, type Seen } from '../conformance/raw.js';

const rawBackends: RawBackend[] = [];

async function alive(gw: GatewayHere): Promise<void> {
  expect(await aliveProblem(gw)).toBeNull();
}

afterAll(async () => {
  await stopAllHere();
  await stopAll(); // the gateways' config files
  await closeLoggingBackends();
  await Promise.all(rawBackends.map((b) => b.close()));
});

describe('request smuggling and request-head rules', () => {
  let gw: GatewayHere;
  let be: Awaited<ReturnType<typeof loggingBackend>>;
  beforeAll(async () => {
    be = await loggingBackend();
    gw = await startGatewayHere({ backends: [`b1=${be.url}`], config: { health: { path: null }, listen: { requestTimeoutMs: 1_000, headersTimeoutMs: 1_000 } } });
  });

  it('a Connection header naming Content-Length does not unframe the body (the issue\'s repro)', async () => {
    const before = be.seen.length;
    const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
    const r = await exchange(gw.port, [`GET /a HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`]);
    expect(statuses(r.text)).toEqual([200]);
    await waitFor('the request at the backend', 5_000, () => be.seen.length > before);
    // A later request on the same pooled connection shows whether anything else was parsed there.
    await fetch(`${gw.url}/after`, { signal: AbortSignal.timeout(5_000) });
    const got = be.seen.slice(before).map((s) => [s.method, s.url, s.body.toString()]);
    expect(got).toEqual([
      ['GET', '/a', smuggled],
      ['GET', '/after', ''],
    ]);
  });

  it('Connection: Host or X-Forwarded-For cannot strip them; underscore spellings are dropped', async () => {
    const before = be.seen.length;
    const r = await exchange(gw.port, ['GET /h HTTP/1.1\r\nHost: game.example\r\nConnection: Host, X-Forwarded-For\r\nX_Forwarded_For: 6.6.6.6\r\n\r\n']);
    expect(statuses(r.text)).toEqual([200]);
    await waitFor('the request', 5_000, () => be.seen.length > before);
    const s = be.seen[before] as Seen;
    expect(s.host).toBe('game.example');
    const names = s.rawHeaders.filter((_v, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names.filter((n) => n.replaceAll('_', '-') === 'x-forwarded-for')).toEqual(['x-forwarded-for']);
    expect(s.rawHeaders[s.rawHeaders.findIndex((n) => n === 'X-Forwarded-For') + 1]).toBe('127.0.0.1');
  });

  it('refuses two Host headers, HTTP/1.0 without Host, HTTP/2.0 in a request line, CONNECT, and 2,100 tiny headers', async () => {
    const before = be.seen.length;
    expect(statuses((await exchange(gw.port, ['GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'])).text)).toEqual([400]);
    expect(statuses((await exchange(gw.port, ['GET / HTTP/1.0\r\n\r\n'])).text)).toEqual([400]);
    expect(statuses((await exchange(gw.port, ['GET / HTTP/2.0\r\nHost: a\r\n\r\n'])).text)).toEqual([505]);
    const connect = await exchange(gw.port, ['CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n']);
    expect(statuses(connect.text)).toEqual([405]);
    expect(connect.text).toMatch(/\r\nAllow: GET, HEAD/);
    const many = Array.from({ length: 2_100 }, () => 'a:b\r\n').join('');
    expect(statuses((await exchange(gw.port, [`GET / HTTP/1.1\r\nHost: a\r\n${many}\r\n`])).text)).toEqual([431]);
    expect(be.seen.length).toBe(before);
    await alive(gw);
  });

  it('rewrites an absolute-form target to origin form, its authority as Host, before health and own paths', async () => {
    const before = be.seen.length;
    const r = await exchange(gw.port, ['GET http://app.example/a?x=1 HTTP/1.1\r\nHost: other.example\r\n\r\n']);
    expect(statuses(r.text)).toEqual([200]);
    await waitFor('the request', 5_000, () => be.seen.length > before);
    expect(be.seen[before]).toMatchObject({ url: '/a?x=1', host: 'app.example' });
    const health = await exchange(gw.port, ['GET http://app.example/healthz HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n']);
    expect(health.text).toMatch(/^HTTP\/1\.1 200 [^]*\r\n\r\nok\n$/);
    expect(statuses((await exchange(gw.port, ['GET ftp://app.example/a HTTP/1.1\r\nHost: a\r\n\r\n'])).text)).toEqual([400]);
    const options = await exchange(gw.port, ['OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
    expect(statuses(options.text)).toEqual([200]);
    expect(options.text).toMatch(/\r\nAllow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n/);
    expect(be.seen.length).toBe(before + 1);
  });

  it('a body that trickles in is cut with 408 after listen.requestTimeoutMs', async () => {
    const parts = ['POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\n\r\n', ...Array.from({ length: 40 }, () => 'x')];
    // The body would be whole after 40 x 200 ms = 8 s: a 408 is the gateway cutting it short.
    const r = await exchange(gw.port, parts, { gapMs: 200, timeoutMs: 15_000 });
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('the backend answers an upgrade with something other than 101', () => {
  it('the client gets that answer and a close; nothing it sends later reaches the backend', async () => {
    // A node:http server with no upgrade listener answers a handshake like any request and keeps
    // the connection: before the fix, roomgate then piped the client's next bytes into it.
    const be = await loggingBackend((_req, res) => {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('no websockets here');
    });
    const gw = await startGatewayHere({ backends: [`b1=${be.url}`], config: { health: { path: null } } });
    const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
    const r = await exchange(gw.port, [HANDSHAKE('/ws/live/') + smuggled, smuggled], { gapMs: 300, timeoutMs: 3_000 });
    expect(statuses(r.text)).toEqual([404]);
    expect(r.text).toContain('no websockets here');
    expect(r.text).toMatch(/\r\nConnection: close\r\n/i);
    expect(r.closed).toBe(true);
    await new Promise((res) => setTimeout(res, 300));
    // roomgate's own hello at start (its calls are signed) is not the client's.
    expect(be.seen.map((s) => s.url).filter((u) => u !== '/_roomgate/handoff/hello')).toEqual(['/ws/live/']);
    await alive(gw);
  });
});

describe('malformed backend answers', () => {
  let gw: GatewayHere;
  let be: RawBackend;
  let answer = Buffer.alloc(0);
  beforeAll(async () => {
    be = await startRawBackend({ answer: () => ({ bytes: answer }) });
    rawBackends.push(be);
    gw = await startGatewayHere({ backends: [`b1=${be.url}`], config: { health: { path: null } } });
  });

  const cases: [string, string][] = [
    ['status 000', 'HTTP/1.1 000 X\r\nContent-Length: 2\r\n\r\nhi'],
    ['status 099', 'HTTP/1.1 099 X\r\nContent-Length: 2\r\n\r\nhi'],
    ['status 600', 'HTTP/1.1 600 X\r\nContent-Length: 2\r\n\r\nhi'],
    ['control byte in the reason', 'HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nhi'],
    ['DEL in the reason', 'HTTP/1.1 200 O\x7fK\r\nContent-Length: 2\r\n\r\nhi'],
    ['HTTP/2.0 status line', 'HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nhi'],
    ['101 to a plain GET', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'],
    ['gzip transfer coding', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhi'],
    ['300 header lines', `HTTP/1.1 200 OK\r\n${'a: b\r\n'.repeat(300)}Content-Length: 2\r\n\r\nhi`],
  ];
  for (const [name, bytes] of cases) {
    it(`${name}: 502, and the gateway lives`, async () => {
      answer = Buffer.from(bytes, 'latin1');
      const r = await exchange(gw.port, ['GET /page HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'], { timeoutMs: 5_000 });
      expect(statuses(r.text)).toEqual([502]);
      await alive(gw);
    });
  }
});

describe('upgrade handshakes', () => {
  let gw: GatewayHere;
  let upgrades: { url: string; rawHeaders: string[] }[];
  beforeAll(async () => {
    upgrades = [];
    const be = await loggingBackend();
    be.server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
      upgrades.push({ url: req.url ?? '', rawHeaders: req.rawHeaders });
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n');
    });
    gw = await startGatewayHere({ backends: [`b1=${be.url}`], config: { health: { path: null }, proxy: { websocketPaths: ['/ws/live/'] } } });
  });

  it('passes non-ASCII header bytes on exactly (latin1, not re-encoded as UTF-8)', async () => {
    const r = await exchange(gw.port, [HANDSHAKE('/ws/live/', 'X-Player: caf\xe9\r\n')]);
    expect(statuses(r.text)).toEqual([101]);
    const last = upgrades.at(-1) as { rawHeaders: string[] };
    expect(last.rawHeaders[last.rawHeaders.indexOf('X-Player') + 1]).toBe('caf\xe9');
  });

  it('refuses a handshake with a body (chunked or Content-Length)', async () => {
    const before = upgrades.length;
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/ws/live/', 'Transfer-Encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n'])).text)).toEqual([400]);
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/ws/live/', 'Content-Length: 5\r\n') + 'hello'])).text)).toEqual([400]);
    expect(upgrades.length).toBe(before);
  });

  it('matches websocketPaths after the room prefix is stripped, on the canonical path (dot-segments resolved first)', async () => {
    const before = upgrades.length;
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/r/42/ws/live/')])).text)).toEqual([101]);
    expect(upgrades.at(-1)?.url).toBe('/ws/live/');
    // "/ws/live/../../admin" is "/admin": outside the WebSocket paths, whatever it began with.
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/ws/live/../../admin')])).text)).toEqual([404]);
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/ws/live/%2e%2E/admin')])).text)).toEqual([404]);
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/ws/live/%2Fadmin')])).text)).toEqual([400]);
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/admin/')])).text)).toEqual([404]);
    expect(upgrades.length).toBe(before + 1);
    // And what it resolves to is what the backend gets.
    expect(statuses((await exchange(gw.port, [HANDSHAKE('/r/42/x/%2E%2E/ws/live/')])).text)).toEqual([101]);
    expect(upgrades.at(-1)?.url).toBe('/ws/live/');
  });
});

describe('retries after a reset of a reused backend connection', () => {
  it('GET is sent again on a fresh connection; a body-less POST is not (502, seen once)', async () => {
    // Answers the first request of each connection and resets the connection on the second.
    const be = await loggingBackend((req, res, seen) => {
      if (seen.onConnection > 1) req.socket.destroy();
      else res.end('ok');
    });
    const gw = await startGatewayHere({ backends: [`b1=${be.url}`], config: { health: { path: null } } });
    // Raw bytes: Node's client would add Content-Length: 0 to a POST, and that is a body.
    const request = async (method: string, path: string): Promise<number> =>
      statuses((await exchange(gw.port, [`${method} ${path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`], { timeoutMs: 5_000 })).text)[0] ?? 0;
    expect(await request('GET', '/warm-1')).toBe(200);
    expect(await request('GET', '/get')).toBe(200);
    expect(be.seen.filter((s) => s.url === '/get').length).toBe(2);
    // GET and HEAD take the byte-level path, whose backend connections are its own: the warm-up of
    // the connection the POST reuses is a request node:http's path carries (OPTIONS).
    expect(await request('OPTIONS', '/warm-2')).toBe(200);
    expect(await request('POST', '/post')).toBe(502);
    await new Promise((r) => setTimeout(r, 200));
    expect(be.seen.filter((s) => s.url === '/post').length).toBe(1);
  });
});
