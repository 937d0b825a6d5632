// Hostile and broken input at the public port: oversized heads, malformed requests and upgrades,
// huge and odd room keys. Raw sockets (node:net) wherever a client library would refuse to send
// the request. Every exchange is bounded in time: a gateway that hangs fails the test.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client,
  backendRooms,
  metricValue,
  runCli,
  startBackends,
  startGateway,
  stopAll,
  waitFor,
  type BackendProc,
  type GatewayProc,
} from '../support/processes.js';

interface Exchange {
  /** Everything the server sent, as latin1 text. */
  text: string;
  /** The server closed the connection (as opposed to our timeout). */
  closed: boolean;
  ms: number;
}

/**
 * Connects, writes `data`, and reads until the server closes the connection. Rejects when the
 * server neither answers nor closes within timeoutMs (the "never hangs" bound).
 */
function exchange(port: number, data: string | Buffer, timeoutMs = 5_000): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const s = net.connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`the gateway neither answered and closed within ${timeoutMs} ms; got ${JSON.stringify(Buffer.concat(parts).toString('latin1').slice(0, 300))}`));
    }, timeoutMs);
    s.on('data', (c: Buffer) => parts.push(c));
    // EPIPE/ECONNRESET while we are still writing a huge head are expected; 'close' follows.
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(parts).toString('latin1'), closed: true, ms: Date.now() - started });
    });
    s.write(data);
  });
}

/** The status code of the first response in `text`, or null. */
const statusOf = (text: string): number | null => {
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(text);
  return m ? Number(m[1]) : null;
};

function expectAnsweredAndClosed(r: Exchange, status: number): void {
  expect(r.text.slice(0, 200)).toMatch(/^HTTP\/1\.1 \d{3} /);
  expect(statusOf(r.text), r.text.slice(0, 300)).toBe(status);
  // Nothing was switched: no 101 anywhere, and exactly one response.
  expect(r.text).not.toMatch(/HTTP\/1\.1 101/);
  expect(r.text.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
  expect(r.closed).toBe(true);
}

const HANDSHAKE_HEADERS = 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
const upgradeHead = (extra = '', target = '/ws/live/?room=bad-input', method = 'GET'): string =>
  `${method} ${target} HTTP/1.1\r\nHost: app.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE_HEADERS}${extra}\r\n`;

/** A random key of `length` characters that the room pattern allows: only its length is wrong. */
function longKey(length: number): string {
  return randomBytes(length).toString('base64url').replace(/[-_]/g, 'x').slice(0, length);
}

async function expect400(url: string, opts: ConstructorParameters<typeof Client>[1] = {}): Promise<void> {
  const c = new Client(url, opts);
  await expect(c.opened).rejects.toThrow(/unexpected response 400/);
  c.ws.terminate();
}

async function pageBackend(gw: GatewayProc, path: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${gw.url}${path}`, { headers, signal: AbortSignal.timeout(5_000) });
  await res.arrayBuffer();
  expect(res.status, path).toBe(200);
  return res.headers.get('x-backend-id') ?? '';
}

const refusedLogs = (gw: GatewayProc): number => gw.lines.filter((l) => l.includes('"msg":"room key refused"')).length;

describe('bad input', () => {
  let backends: BackendProc[];
  let ids: string[];
  let gw: GatewayProc; // default: a request without a valid key goes to the least-loaded backend
  let gwReject: GatewayProc; // room.noRoom: reject
  let backendArgs: string[];

  beforeAll(async () => {
    backends = await startBackends(['x1', 'x2', 'x3']);
    ids = backends.map((b) => b.id);
    backendArgs = backends.flatMap((b) => ['--backend', `${b.id}=${b.url}`]);
    [gw, gwReject] = await Promise.all([
      startGateway({ backends }),
      startGateway({ backends, config: { room: { noRoom: 'reject' } } }),
    ]);
  });
  afterAll(stopAll);

  async function stillServes(g: GatewayProc = gw): Promise<void> {
    const health = await fetch(`${g.url}/healthz`, { signal: AbortSignal.timeout(5_000) });
    expect(health.status).toBe(200);
    expect(ids).toContain(await pageBackend(g, '/game/still-serving/'));
    const c = new Client(`${g.wsUrl}/ws/live/?room=still-serving`);
    expect(ids).toContain(await c.join('still-serving'));
    await c.close();
  }

  async function backendSockets(): Promise<number> {
    let n = 0;
    for (const b of backends) {
      const r = (await (await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(5_000) })).json()) as { sockets: number };
      n += r.sockets;
    }
    return n;
  }

  describe('oversized request heads', () => {
    it('a head of more than 16 KB gets 431 and the connection closes; the gateway keeps serving', async () => {
      const before = await metricValue(gw, 'roomgate_client_errors_total', { code: '431' });
      const oneBig = await exchange(gw.port, `GET /game/big/ HTTP/1.1\r\nHost: app.example\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      expectAnsweredAndClosed(oneBig, 431);
      const many = Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'b'.repeat(40)}\r\n`).join('');
      const manySmall = await exchange(gw.port, `GET /game/big/ HTTP/1.1\r\nHost: app.example\r\n${many}\r\n`);
      expectAnsweredAndClosed(manySmall, 431);
      const cookie = await exchange(gw.port, `GET /game/big/ HTTP/1.1\r\nHost: app.example\r\nCookie: ${'c=d; '.repeat(4_000)}\r\n\r\n`);
      expectAnsweredAndClosed(cookie, 431);
      expect(await metricValue(gw, 'roomgate_client_errors_total', { code: '431' })).toBe(before + 3);
      await stillServes();
    });

    it('a head just under the limit is still served', async () => {
      const r = await exchange(gw.port, `GET /game/almost-big/ HTTP/1.1\r\nHost: app.example\r\nX-Big: ${'a'.repeat(12_000)}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text)).toBe(200);
      expect(r.text).toContain('Room almost-big');
    });

    it('an upgrade with a huge header gets 431, never 101, and closes', async () => {
      const before = await backendSockets();
      const r = await exchange(gw.port, upgradeHead(`X-Big: ${'a'.repeat(20_000)}\r\n`));
      expectAnsweredAndClosed(r, 431);
      const viaCookie = await exchange(gw.port, upgradeHead(`Cookie: roomgate_room=${'z'.repeat(17_000)}\r\n`));
      expectAnsweredAndClosed(viaCookie, 431);
      expect(await backendSockets()).toBe(before);
      await stillServes();
    });
  });

  describe('malformed requests', () => {
    const cases: [string, string | Buffer][] = [
      ['a garbage request line', 'GARBAGE\r\n\r\n'],
      ['binary junk (a TLS ClientHello on the plain port)', Buffer.from('16030100a5010000a10303', 'hex')],
      ['a header line without a colon', 'GET /game/x/ HTTP/1.1\r\nHost: app.example\r\nNo colon here\r\n\r\n'],
      ['Content-Length and Transfer-Encoding together', 'POST /_backend/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
      ['an upgrade with POST', upgradeHead('Content-Length: 0\r\n', '/ws/live/?room=bad-input', 'POST')],
      ['Upgrade: h2c', 'GET /ws/live/?room=bad-input HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n'],
      ['an upgrade without Sec-WebSocket-Key', 'GET /ws/live/?room=bad-input HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n'],
      ['an upgrade without Sec-WebSocket-Version', 'GET /ws/live/?room=bad-input HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'],
    ];

    it.each(cases)('%s: 400 before any 101, then closed', async (_name, data) => {
      const r = await exchange(gw.port, data);
      expectAnsweredAndClosed(r, 400);
    });

    it('none of them reached a backend, they were counted, and the gateway keeps serving', async () => {
      const before = await metricValue(gw, 'roomgate_upgrades_total', { backend: 'none', result: '400' });
      const sockets = await backendSockets();
      for (const [, data] of cases.slice(4)) expectAnsweredAndClosed(await exchange(gw.port, data), 400);
      expect(await metricValue(gw, 'roomgate_upgrades_total', { backend: 'none', result: '400' })).toBe(before + 4);
      expect(await backendSockets()).toBe(sockets);
      await stillServes();
      await stillServes(gwReject);
    });
  });

  describe('10 KB room keys', () => {
    interface SourceCase {
      source: string;
      reason: string;
      url: (key: string) => string;
      headers: (key: string) => Record<string, string>;
    }
    const sources: SourceCase[] = [
      { source: 'query', reason: 'invalid', url: (k) => `/ws/live/?room=${k}`, headers: () => ({}) },
      { source: 'header', reason: 'invalid', url: () => '/ws/live/', headers: (k) => ({ 'X-Room-Key': k }) },
      { source: 'path-prefix', reason: 'invalid', url: (k) => `/r/${k}/ws/live/`, headers: () => ({}) },
      // A signed cookie this long is refused before any crypto work: malformed.
      { source: 'cookie', reason: 'malformed', url: () => '/ws/live/', headers: (k) => ({ Cookie: `roomgate_room=${k}` }) },
    ];

    it.each(sources)('in the $source: treated as absent, counted, never logged', async ({ source, reason, url, headers }) => {
      const key = longKey(10_240);
      const labels = { source, reason };
      const [beforeReject, beforeDefault] = await Promise.all([
        metricValue(gwReject, 'roomgate_bad_room_keys_total', labels),
        metricValue(gw, 'roomgate_bad_room_keys_total', labels),
      ]);
      const [logsReject, logsDefault] = [refusedLogs(gwReject), refusedLogs(gw)];

      // noRoom: reject -> the socket is refused.
      await expect400(`${gwReject.wsUrl}${url(key)}`, { headers: headers(key) });
      // Default policy -> some backend takes it, and it works.
      const c = new Client(`${gw.wsUrl}${url(key)}`, { headers: headers(key) });
      expect(ids).toContain(await c.join(`fallback-${source}`));
      await c.close();

      expect(await metricValue(gwReject, 'roomgate_bad_room_keys_total', labels)).toBe(beforeReject + 1);
      expect(await metricValue(gw, 'roomgate_bad_room_keys_total', labels)).toBe(beforeDefault + 1);

      // The refusal is logged (at debug), but no piece of the key is.
      await waitFor('the refusal log lines', 5_000, () => refusedLogs(gwReject) > logsReject && refusedLogs(gw) > logsDefault);
      for (const g of [gw, gwReject]) {
        for (const fragment of [key.slice(0, 24), key.slice(5_000, 5_024), key.slice(-24)]) {
          const leaks = g.lines.filter((l) => l.includes(fragment)).map((l) => l.slice(0, 240));
          expect(leaks, `log lines containing ${fragment}`).toEqual([]);
        }
      }
    });
  });

  describe('odd room keys', () => {
    const NORMAL = ['lobby', 'blue', 'green', 'room:42', 'chat.general', 'Team-7_x', 'r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6'];
    const VALID_ODD = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype', '__defineGetter__', '..', '.'];
    let owner: Map<string, string>;
    let normalBefore: Map<string, string>;

    beforeAll(async () => {
      const res = await runCli(['where', ...NORMAL, ...VALID_ODD, '--json', ...backendArgs]);
      expect(res.code, res.stderr).toBe(0);
      const rows = JSON.parse(res.stdout) as { room: string; backend: string }[];
      owner = new Map(rows.map((r) => [r.room, r.backend]));
      expect(owner.size).toBe(NORMAL.length + VALID_ODD.length);
      // Where the gateway puts normal rooms before it has seen any odd key.
      normalBefore = new Map();
      for (const room of NORMAL) normalBefore.set(room, await pageBackend(gw, `/game/${encodeURIComponent(room)}/`));
      expect(normalBefore).toEqual(new Map(NORMAL.map((r) => [r, owner.get(r)])));
    });

    it('object-property names and dot keys are valid rooms: each routes to its ring owner by every source', async () => {
      const clients: Client[] = [];
      for (const key of VALID_ODD) {
        const expected = owner.get(key);
        expect(ids).toContain(expected);
        // "." and ".." as path segments would be normalised away by URL parsers; the query and
        // header carry them literally.
        if (key !== '.' && key !== '..') {
          expect(await pageBackend(gw, `/game/${key}/`), `page ${key}`).toBe(expected);
          expect(await pageBackend(gw, `/r/${key}/_backend/echo`), `prefix ${key}`).toBe(expected);
        }
        expect(await pageBackend(gw, `/_backend/echo?room=${key}`), `query ${key}`).toBe(expected);
        expect(await pageBackend(gw, '/_backend/echo', { 'X-Room-Key': key }), `header ${key}`).toBe(expected);
        // A socket of that room, even where a room key is required.
        const c = new Client(`${gwReject.wsUrl}/ws/live/?room=${encodeURIComponent(key)}`);
        clients.push(c);
        expect(await c.join(key), `socket ${key}`).toBe(expected);
      }
      // The backends (the witness) hold each odd room exactly where the ring says. Not checked for
      // "__proto__": the demo backend's /_backend/rooms builds its answer in a plain object
      // (examples/demo-backend/server.ts:352), where that name sets the prototype instead of a key,
      // so the witness cannot show it; the backend's own "mounted" reply above already did.
      const rooms = await backendRooms(backends);
      for (const key of VALID_ODD.filter((k) => k !== '__proto__')) {
        for (const [id, held] of rooms) {
          expect(Object.hasOwn(held, key) ? held[key] : 0, `${key} on ${id}`).toBe(id === owner.get(key) ? 1 : 0);
        }
      }
      await Promise.all(clients.map((c) => c.close()));
    });

    it('keys with "/", spaces, NUL, "%" or non-ASCII are treated as absent, by every source', async () => {
      // [what, query value as sent, reason]
      const queryCases: [string, string, string][] = [
        ['../x', '..%2Fx', 'invalid'],
        ['../x (raw)', '../x', 'invalid'],
        ['a b', 'a%20b', 'invalid'],
        ['a b (plus)', 'a+b', 'invalid'],
        ['NUL', '%00', 'invalid'],
        ['literal %00', '%2500', 'invalid'],
        ['é', '%C3%A9', 'invalid'],
        ['snowman', '%E2%98%83', 'invalid'],
        ['emoji', '%F0%9F%8E%B2', 'invalid'],
        ['<script>', '%3Cscript%3E', 'invalid'],
        ['truncated UTF-8', '%E2%98', 'malformed'],
        ['bad escape', '%zz', 'malformed'],
      ];
      const count = async (source: string, reason: string): Promise<number> =>
        metricValue(gwReject, 'roomgate_bad_room_keys_total', { source, reason });
      const before = {
        queryInvalid: await count('query', 'invalid'),
        queryMalformed: await count('query', 'malformed'),
        header: await count('header', 'invalid'),
        prefix: await count('path-prefix', 'invalid'),
      };
      for (const [what, value] of queryCases) {
        await expect400(`${gwReject.wsUrl}/ws/live/?room=${value}`).catch((err: Error) => {
          throw new Error(`query ${what}: ${err.message}`);
        });
      }
      for (const value of ['a b', '../x', 'a/b', '\u00e9']) {
        await expect400(`${gwReject.wsUrl}/ws/live/`, { headers: { 'X-Room-Key': value } });
      }
      for (const segment of ['..%2Fx', 'a%20b', '%00', '%E2%98%83']) await expect400(`${gwReject.wsUrl}/r/${segment}/ws/live/`);

      expect(await count('query', 'invalid')).toBe(before.queryInvalid + queryCases.filter((c) => c[2] === 'invalid').length);
      expect(await count('query', 'malformed')).toBe(before.queryMalformed + queryCases.filter((c) => c[2] === 'malformed').length);
      expect(await count('header', 'invalid')).toBe(before.header + 4);
      // "..%2Fx", "a%20b" and "%00" in a path never reach the key extractor: the canonical target
      // refuses them first (400, src/http/target.ts: an encoded "/", space, control byte); the
      // snowman is refused as a key.
      expect(await count('path-prefix', 'invalid')).toBe(before.prefix + 1);

      // With the default policy the same sockets land on some backend and work.
      for (const [what, value] of queryCases.slice(0, 4)) {
        const c = new Client(`${gw.wsUrl}/ws/live/?room=${value}`);
        expect(ids, what).toContain(await c.join('odd-fallback'));
        await c.close();
      }
      // And the CLI agrees they are not room keys.
      const where = await runCli(['where', '../x', 'a b', '%00', '\u00e9', '\u2603', ...backendArgs]);
      expect(where.code).toBe(2);
      expect(where.stdout.split('\n').filter((l) => l.includes('error: invalid room key'))).toHaveLength(5);
    });

    it('afterwards, normal rooms still go where they went before and where `roomgate where` says', async () => {
      for (const room of NORMAL) {
        expect(await pageBackend(gw, `/game/${encodeURIComponent(room)}/`), room).toBe(normalBefore.get(room));
        expect(await pageBackend(gwReject, `/game/${encodeURIComponent(room)}/`), room).toBe(owner.get(room));
      }
      for (const key of VALID_ODD) expect(await pageBackend(gw, `/_backend/echo?room=${key}`), key).toBe(owner.get(key));
    });
  });
});
