// What a backend sees of a request that came through roomgate: X-Forwarded-* (replaced unless the
// peer is a trusted proxy, appended to when it is), Host and Origin untouched, method, target and
// body byte for byte, hop-by-hop headers gone. The same for the WebSocket handshake, recorded by a
// real upgrade server started here.
import { createHash, randomBytes } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { backendArgs, startBackendsHere, stopBackendsHere, type BackendHere } from '../support/backends-here.js';
import { Client, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';

interface Echo {
  id: string;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  bodyBytes: number;
  bodySha256: string;
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** djust with DJUST_TRUSTED_PROXY_COUNT=1: the client is the last X-Forwarded-For entry. */
const djustClientIp = (xff: string | string[] | undefined): string | undefined =>
  String(xff ?? '')
    .split(',')
    .map((s) => s.trim())
    .at(-1);

/** Names of a rawHeaders list, lower-cased, with repeats. */
const rawNames = (raw: readonly string[]): string[] => raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

/**
 * One HTTP request with full control of the headers (a custom Host, repeats via a flat array),
 * no connection reuse, bounded in time.
 */
function request(
  base: string,
  path: string,
  o: { method?: string; headers?: Record<string, string> | string[]; body?: Buffer; chunks?: Buffer[] } = {},
): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, method: o.method ?? 'GET', path, headers: o.headers ?? {}, agent: false, timeout: 10_000 },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`request ${o.method ?? 'GET'} ${path} timed out`)));
    req.on('error', reject);
    if (o.chunks) {
      for (const c of o.chunks) req.write(c);
      req.end();
    } else req.end(o.body);
  });
}

async function echo(base: string, path: string, o: Parameters<typeof request>[2] = {}): Promise<Echo> {
  const r = await request(base, path, o);
  expect(r.status, r.body.toString().slice(0, 500)).toBe(200);
  return JSON.parse(r.body.toString()) as Echo;
}

/** Writes raw bytes, reads until the server closes (or timeoutMs), returns what came back. */
function rawExchange(port: number, data: string, timeoutMs = 5_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no close within ${timeoutMs} ms; got ${JSON.stringify(Buffer.concat(parts).toString('latin1').slice(0, 300))}`));
    }, timeoutMs);
    s.on('data', (c: Buffer) => parts.push(c));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(parts).toString('latin1'));
    });
    s.write(data);
  });
}

/** Writes raw bytes and resolves with the response head (up to the blank line); closes the socket. */
function rawHead(port: number, data: string, timeoutMs = 5_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      s.destroy();
      reject(new Error(`no response head within ${timeoutMs} ms; got ${JSON.stringify(text.slice(0, 300))}`));
    }, timeoutMs);
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end >= 0 && !done) {
        done = true;
        clearTimeout(timer);
        s.destroy();
        resolve(text.slice(0, end));
      }
    });
    s.on('error', () => undefined);
    s.on('close', () => {
      if (done) return;
      clearTimeout(timer);
      reject(new Error(`closed before a response head; got ${JSON.stringify(text.slice(0, 300))}`));
    });
    s.write(data);
  });
}

// ------------------------------------------------------------------------------------------------
// A tiny real WebSocket backend that records every handshake it is given.

interface Recorded {
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
}

const recorded: Recorded[] = [];
/** Plain requests the recording server parsed, as "METHOD url". */
const plainRequests: string[] = [];
const recServer = http.createServer((req, res) => {
  plainRequests.push(`${req.method} ${req.url}`);
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '3' });
    res.end('ok\n');
  });
});
const wss = new WebSocketServer({ noServer: true });
recServer.on('upgrade', (req, socket, head) => {
  recorded.push({ url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders });
  socket.on('error', () => socket.destroy());
  wss.handleUpgrade(req, socket, head, (ws) => {
    // The backend speaks first, like djust; then it echoes.
    ws.send(JSON.stringify({ type: 'connect', backend: 'rec' }));
    ws.on('message', (m) => ws.send(JSON.stringify({ type: 'echo', data: String(m) })));
  });
});

function recordedFor(tag: string): Promise<Recorded> {
  return waitFor(`handshake ${tag} at the recording backend`, 5_000, () => recorded.find((r) => r.url.includes(tag)));
}

const newTag = (): string => `t${randomBytes(6).toString('hex')}`;

// ------------------------------------------------------------------------------------------------

describe('forwarding: what the backend sees', () => {
  let backends: BackendHere[];
  let gw: GatewayProc; // no trusted proxies
  let gwTrusted: GatewayProc; // trusts 127.0.0.1, i.e. this test
  let gwRec: GatewayProc; // the recording server as its only backend
  let gwRecTrusted: GatewayProc;

  beforeAll(async () => {
    await new Promise<void>((resolve) => recServer.listen(0, '127.0.0.1', resolve));
    const recUrl = `http://127.0.0.1:${(recServer.address() as AddressInfo).port}`;
    // Demo backends in this process (test/support/backends-here.ts): none is signalled.
    backends = await startBackendsHere(['f1', 'f2']);
    const trusted = { proxy: { trustedProxies: ['127.0.0.1'] } };
    [gw, gwTrusted, gwRec, gwRecTrusted] = await Promise.all([
      startGateway({ backends: backendArgs(backends) }),
      startGateway({ backends: backendArgs(backends), config: trusted }),
      startGateway({ backends: [`rec=${recUrl}`] }),
      startGateway({ backends: [`rec=${recUrl}`], config: trusted }),
    ]);
  });

  afterAll(async () => {
    await stopAll();
    await stopBackendsHere();
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    recServer.closeAllConnections();
    await new Promise<void>((resolve) => recServer.close(() => resolve()));
  });

  describe('X-Forwarded-*, Host and Origin on plain requests', () => {
    it('sets X-Forwarded-For to the peer, -Proto http, -Host = Host, and leaves Host and Origin alone', async () => {
      const e = await echo(gw.url, '/_backend/echo', { headers: { Host: 'app.example:8443', Origin: 'https://app.example' } });
      expect(e.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(e.headers['x-forwarded-proto']).toBe('http');
      expect(e.headers['x-forwarded-host']).toBe('app.example:8443');
      expect(e.headers.host).toBe('app.example:8443');
      expect(e.headers.origin).toBe('https://app.example');
      expect(e.headers['x-forwarded-prefix']).toBeUndefined();
      // Exactly one of each: no second line a backend might pick instead.
      const names = rawNames(e.rawHeaders);
      for (const n of ['host', 'origin', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host']) {
        expect(names.filter((x) => x === n), n).toHaveLength(1);
      }
    });

    it('replaces X-Forwarded-* and drops Forwarded/X-Real-IP sent by an untrusted client', async () => {
      const e = await echo(gw.url, '/_backend/echo', {
        headers: {
          Host: 'app.example',
          'X-Forwarded-For': '6.6.6.6',
          'X-Forwarded-Proto': 'https',
          'X-Forwarded-Host': 'evil.example',
          'X-Forwarded-Prefix': '/evil',
          Forwarded: 'for=6.6.6.6;proto=https',
          'X-Real-IP': '6.6.6.6',
        },
      });
      expect(e.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(djustClientIp(e.headers['x-forwarded-for'])).toBe('127.0.0.1');
      expect(e.headers['x-forwarded-proto']).toBe('http');
      expect(e.headers['x-forwarded-host']).toBe('app.example');
      expect(e.headers['x-forwarded-prefix']).toBeUndefined();
      expect(e.headers.forwarded).toBeUndefined();
      expect(e.headers['x-real-ip']).toBeUndefined();
      expect(JSON.stringify(e.rawHeaders)).not.toContain('6.6.6.6');
      expect(JSON.stringify(e.rawHeaders)).not.toContain('evil');
    });

    it("keeps a trusted proxy's X-Forwarded-* and appends the peer, so chain[-1] is the hop in front", async () => {
      const e = await echo(gwTrusted.url, '/_backend/echo', {
        headers: {
          Host: 'internal:8080',
          'X-Forwarded-For': '203.0.113.7',
          'X-Forwarded-Proto': 'https',
          'X-Forwarded-Host': 'public.example',
        },
      });
      expect(e.headers['x-forwarded-for']).toBe('203.0.113.7, 127.0.0.1');
      expect(djustClientIp(e.headers['x-forwarded-for'])).toBe('127.0.0.1');
      expect(e.headers['x-forwarded-proto']).toBe('https');
      expect(e.headers['x-forwarded-host']).toBe('public.example');
      expect(e.headers.host).toBe('internal:8080');

      // Two XFF lines from the trusted hop are one list, in order, then the peer.
      const two = await echo(gwTrusted.url, '/_backend/echo', {
        headers: ['Host', 'internal', 'X-Forwarded-For', '198.51.100.1', 'X-Forwarded-For', '203.0.113.7'],
      });
      expect(two.headers['x-forwarded-for']).toBe('198.51.100.1, 203.0.113.7, 127.0.0.1');
      expect(rawNames(two.rawHeaders).filter((n) => n === 'x-forwarded-for')).toHaveLength(1);

      // Without incoming X-Forwarded-* the trusted gateway behaves like the plain one.
      const none = await echo(gwTrusted.url, '/_backend/echo', { headers: { Host: 'internal' } });
      expect(none.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(none.headers['x-forwarded-proto']).toBe('http');
      expect(none.headers['x-forwarded-host']).toBe('internal');
    });

    it('marks the room cookie Secure only when a trusted proxy says https', async () => {
      const h = { Host: 'app.example', 'X-Forwarded-Proto': 'https' };
      const trusted = await request(gwTrusted.url, '/game/fw-secure/', { headers: h });
      const untrusted = await request(gw.url, '/game/fw-secure/', { headers: h });
      expect(trusted.status).toBe(200);
      expect(untrusted.status).toBe(200);
      expect(String(trusted.headers['set-cookie'])).toMatch(/^roomgate_room=fw-secure\..*; Secure$/);
      expect(String(untrusted.headers['set-cookie'])).toMatch(/^roomgate_room=fw-secure\./);
      expect(String(untrusted.headers['set-cookie'])).not.toContain('Secure');
    });

    it('strips a /r/{room}/ prefix and says so in X-Forwarded-Prefix (appended to a trusted one)', async () => {
      const e = await echo(gw.url, '/r/fw-prefix/_backend/echo/x?a=1&b=%2F', { headers: { Host: 'app.example' } });
      expect(e.url).toBe('/_backend/echo/x?a=1&b=%2F');
      expect(e.headers['x-forwarded-prefix']).toBe('/r/fw-prefix');

      const spoofed = await echo(gw.url, '/r/fw-prefix/_backend/echo', { headers: { 'X-Forwarded-Prefix': '/evil' } });
      expect(spoofed.headers['x-forwarded-prefix']).toBe('/r/fw-prefix');

      const t = await echo(gwTrusted.url, '/r/fw-prefix/_backend/echo', { headers: { 'X-Forwarded-Prefix': '/app' } });
      expect(t.headers['x-forwarded-prefix']).toBe('/app/r/fw-prefix');
    });
  });

  describe('method, target and body', () => {
    // Canonical (src/http/target.ts): such a target passes byte for byte; the query is never rewritten.
    const ODD_TARGET = '/_backend/echo/a%3Bb/%E2%98%83;p=1/x?q=a%20b&q=2&empty=&plus=a+b&slash=%2F&enc=%25zz&dots=/../';

    it('GET: the target reaches the backend byte for byte, with no body', async () => {
      const e = await echo(gw.url, ODD_TARGET);
      expect(e.method).toBe('GET');
      expect(e.url).toBe(ODD_TARGET);
      expect(e.bodyBytes).toBe(0);
    });

    it('a target not in canonical form reaches the backend in it: what every rule judged is what the backend gets', async () => {
      const e = await echo(gw.url, '/_backend//echo/%61%2d%7e/x/../%e2%98%83/./y?slash=%2F&dots=/../');
      expect(e.url).toBe('/_backend/echo/a-~/%E2%98%83/y?slash=%2F&dots=/../');
    });

    it.each(['POST', 'PUT', 'PATCH', 'DELETE'])('%s with a Content-Length body: method, target and body unchanged', async (method) => {
      const body = randomBytes(200_000 + method.length);
      const e = await echo(gw.url, `${ODD_TARGET}&m=${method}`, {
        method,
        headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(body.length) },
        body,
      });
      expect(e.method).toBe(method);
      expect(e.url).toBe(`${ODD_TARGET}&m=${method}`);
      expect(e.bodyBytes).toBe(body.length);
      expect(e.bodySha256).toBe(sha256(body));
      expect(e.headers['content-length']).toBe(String(body.length));
    });

    // A chunked body has no Content-Length, and Transfer-Encoding is hop-by-hop, so the gateway
    // has to frame the body again on its own hop. It must never arrive unframed: on a keep-alive
    // backend connection, unframed bytes are parsed as the start of the next request.
    it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])('%s with a chunked body: body unchanged', async (method) => {
      const chunks = [randomBytes(1000), randomBytes(70_000), Buffer.from('tail')];
      const e = await echo(gw.url, `/_backend/echo?chunked=${method}`, {
        method,
        headers: { 'Transfer-Encoding': 'chunked', 'Content-Type': 'application/octet-stream' },
        chunks,
      });
      expect(e.method).toBe(method);
      expect(e.url).toBe(`/_backend/echo?chunked=${method}`);
      expect(e.bodyBytes).toBe(Buffer.concat(chunks).length);
      expect(e.bodySha256).toBe(sha256(Buffer.concat(chunks)));
    });
  });

  it('a chunked body never turns into a second request at the backend (no request smuggling)', async () => {
    const tag = newTag();
    const smuggled = `GET /smuggled-${tag} HTTP/1.1\r\nHost: internal\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n`;
    const head = await rawHead(
      gwRec.port,
      `DELETE /item-${tag} HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`,
    );
    expect(head).toMatch(/^HTTP\/1\.1 \d{3} /);
    await waitFor('the DELETE at the backend', 5_000, () => plainRequests.includes(`DELETE /item-${tag}`));
    // The smuggled bytes would be parsed right after the DELETE, from the same read; give it a moment.
    await new Promise((r) => setTimeout(r, 200));
    expect(plainRequests.filter((r) => r.includes(tag))).toEqual([`DELETE /item-${tag}`]);
  });

  describe('hop-by-hop headers', () => {
    it('does not forward Connection, the headers it names, Keep-Alive, TE, Proxy-Connection or Upgrade', async () => {
      const e = await echo(gw.url, '/_backend/echo', {
        headers: {
          Connection: 'keep-alive, X-Custom, x-other-hop',
          'X-Custom': 'secret-hop-value',
          'X-Other-Hop': 'also-hop',
          'Keep-Alive': 'timeout=99',
          TE: 'trailers',
          'Proxy-Connection': 'keep-alive',
          Upgrade: 'foo/1',
          'X-End-To-End': 'kept',
        },
      });
      for (const h of ['x-custom', 'x-other-hop', 'keep-alive', 'te', 'proxy-connection', 'upgrade']) {
        expect(e.headers[h], h).toBeUndefined();
      }
      expect(JSON.stringify(e.rawHeaders)).not.toContain('secret-hop-value');
      expect(JSON.stringify(e.rawHeaders)).not.toContain('timeout=99');
      // What the backend gets is the gateway's own hop header, not the client's list.
      expect(String(e.headers.connection ?? '')).not.toMatch(/x-custom/i);
      expect(e.headers['x-end-to-end']).toBe('kept');
    });

    it('honours every Connection header line, not only the first (RFC 9110 7.6.1)', async () => {
      const head =
        'GET /_backend/echo HTTP/1.1\r\nHost: app.example\r\nConnection: keep-alive\r\nConnection: X-Custom\r\n' +
        'X-Custom: secret-hop-value\r\nConnection: close\r\n\r\n';
      const res = await rawExchange(gw.port, head);
      expect(res).toMatch(/^HTTP\/1\.1 200 /);
      const e = JSON.parse(res.slice(res.indexOf('\r\n\r\n') + 4)) as Echo;
      expect(e.headers['x-custom']).toBeUndefined();
    });
  });

  describe('WebSocket handshake', () => {
    it('reaches the backend with X-Forwarded-*, Host, Origin, path and query as the client sent them', async () => {
      const tag = newTag();
      const c = new Client(`${gwRec.wsUrl}/ws/live/?room=fw-ws&tag=${tag}`, {
        origin: 'https://app.example',
        headers: { Host: 'app.example:8443', 'X-Forwarded-For': '6.6.6.6', 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'evil.example' },
      });
      await c.opened;
      const r = await recordedFor(tag);
      expect(r.url).toBe(`/ws/live/?room=fw-ws&tag=${tag}`);
      expect(r.headers.host).toBe('app.example:8443');
      expect(r.headers.origin).toBe('https://app.example');
      expect(r.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(djustClientIp(r.headers['x-forwarded-for'])).toBe('127.0.0.1');
      expect(r.headers['x-forwarded-proto']).toBe('http');
      expect(r.headers['x-forwarded-host']).toBe('app.example:8443');
      expect(r.headers.upgrade).toBe('websocket');
      expect(String(r.headers.connection)).toMatch(/upgrade/i);
      expect(r.headers['sec-websocket-key']).toMatch(/^[A-Za-z0-9+/]{22}==$/);
      expect(r.headers['sec-websocket-version']).toBe('13');
      expect(JSON.stringify(r.rawHeaders)).not.toContain('6.6.6.6');
      expect(JSON.stringify(r.rawHeaders)).not.toContain('evil.example');
      // And the tunnel carries frames both ways.
      await c.next('connect');
      c.send({ type: 'hello', tag });
      const back = await c.next('echo');
      expect(JSON.parse(String(back.data))).toEqual({ type: 'hello', tag });
      await c.close();
    });

    it('strips the /r/{room}/ prefix of a socket URL and sends X-Forwarded-Prefix', async () => {
      const tag = newTag();
      const c = new Client(`${gwRec.wsUrl}/r/fw-ws-prefix/ws/live/?tag=${tag}`, { origin: 'http://app.example' });
      await c.opened;
      const r = await recordedFor(tag);
      expect(r.url).toBe(`/ws/live/?tag=${tag}`);
      expect(r.headers['x-forwarded-prefix']).toBe('/r/fw-ws-prefix');
      expect(r.headers.origin).toBe('http://app.example');
      await c.close();
    });

    it("keeps a trusted proxy's X-Forwarded-For on the handshake and appends the peer", async () => {
      const tag = newTag();
      const c = new Client(`${gwRecTrusted.wsUrl}/ws/live/?room=fw-ws&tag=${tag}`, {
        origin: 'https://public.example',
        headers: { 'X-Forwarded-For': '203.0.113.7', 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'public.example' },
      });
      await c.opened;
      const r = await recordedFor(tag);
      expect(r.headers['x-forwarded-for']).toBe('203.0.113.7, 127.0.0.1');
      expect(djustClientIp(r.headers['x-forwarded-for'])).toBe('127.0.0.1');
      expect(r.headers['x-forwarded-proto']).toBe('https');
      expect(r.headers['x-forwarded-host']).toBe('public.example');
      expect(r.headers.origin).toBe('https://public.example');
      await c.close();
    });

    it("does not pass the client's other hop-by-hop headers on with the handshake", async () => {
      // ws would overwrite Connection, so this handshake is written by hand.
      const tag = newTag();
      const head = await rawHead(
        gwRec.port,
        `GET /ws/live/?tag=${tag} HTTP/1.1\r\nHost: app.example\r\nConnection: Upgrade, X-Custom\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n' +
          'X-Custom: secret-hop-value\r\nKeep-Alive: timeout=99\r\nX-End-To-End: kept\r\n\r\n',
      );
      expect(head).toMatch(/^HTTP\/1\.1 101 /);
      const r = await recordedFor(tag);
      expect(r.headers['x-end-to-end']).toBe('kept');
      expect(String(r.headers.connection)).toMatch(/upgrade/i);
      expect(r.headers.upgrade).toBe('websocket');
      expect(r.headers['x-custom']).toBeUndefined();
      expect(r.headers['keep-alive']).toBeUndefined();
    });
  });
});
