// HTTP/2 on the TLS port: ALPN offers h2 beside http/1.1; h2 page requests are proxied to the
// HTTP/1.1 backends with the header mapping RFC 9113 asks for (:authority to Host, cookie crumbs
// joined, no pseudo-headers, a body without Content-Length sent on chunked), routed by the same
// room key as on HTTP/1.1. The limits hold against a client that ignores them (raw frames):
// concurrent streams, header lines and bytes, a body that never arrives, idle connections, and
// rapid reset. A stop sends GOAWAY and does not wait on idle h2 connections. The gateways that get
// a signal (SIGHUP, SIGTERM) are processes; the others and the demo backends are in the test's
// process (test/support/here.ts).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import https from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR, FRAME, get, RawH2 } from '../support/h2-raw.js';
import { startBackendHere, startGatewayHere, stopAllHere, type BackendHere } from '../support/here.js';
import { metricValue, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-h2-test-');
const cert = join(dir, 'a.crt');
const key = join(dir, 'a.key');
let ca: Buffer;
let backends: BackendHere[];

beforeAll(async () => {
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '30', '-subj', '/CN=a.test', '-addext', 'subjectAltName=DNS:a.test'],
    { stdio: 'ignore', timeout: 10_000 },
  );
  ca = readFileSync(cert);
  backends = await Promise.all([startBackendHere('h1'), startBackendHere('h2')]);
});

afterAll(async () => {
  await stopAll();
  await stopAllHere();
});

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

function session(port: number): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    // a.test is not in DNS: the connection goes to loopback, the name is only SNI and :authority.
    const s = http2.connect(`https://a.test:${port}`, {
      createConnection: () => tlsConnect({ host: '127.0.0.1', port, servername: 'a.test', ca, ALPNProtocols: ['h2'] }),
    });
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error('h2 connect timed out'));
    }, 5_000);
    s.once('connect', () => {
      clearTimeout(t);
      resolve(s);
    });
    s.once('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
  });
}

function request(s: ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: (string | Buffer)[] | 'never'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const endStream = body === undefined;
    const req = s.request(headers, { endStream });
    const t = setTimeout(() => {
      req.close();
      reject(new Error('h2 request timed out'));
    }, 8_000);
    let head: IncomingHttpHeaders = {};
    let text = '';
    req.setEncoding('utf8');
    req.on('response', (h) => (head = h));
    req.on('data', (c: string) => (text += c));
    req.on('end', () => {
      clearTimeout(t);
      resolve({ status: Number(head[':status']), headers: head, body: text });
    });
    req.on('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
    if (Array.isArray(body)) {
      for (const part of body) req.write(part);
      req.end();
    }
  });
}

/** A masked client text frame (RFC 6455 5.2), payload under 126 bytes. */
function textFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] as number)))]);
}

interface H2Socket {
  readonly stream: http2.ClientHttp2Stream;
  readonly status: number;
  /** Text of every server frame so far (unmasked, short frames). */
  readonly messages: string[];
  readonly closed: Promise<void>;
}

/** A WebSocket over h2 (RFC 8441): an extended CONNECT; resolves with the answer's status. */
function openH2Socket(s: ClientHttp2Session, path: string): Promise<H2Socket> {
  return new Promise((resolve, reject) => {
    const stream = s.request({ ':method': 'CONNECT', ':protocol': 'websocket', ':path': path, ':scheme': 'https', ':authority': 'a.test', 'sec-websocket-version': '13' }, { endStream: false });
    const t = setTimeout(() => {
      stream.close();
      reject(new Error('extended CONNECT timed out'));
    }, 8_000);
    const messages: string[] = [];
    let buf = Buffer.alloc(0);
    stream.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + ((buf[1] as number) & 0x7f)) {
        const len = (buf[1] as number) & 0x7f;
        messages.push(buf.subarray(2, 2 + len).toString());
        buf = buf.subarray(2 + len);
      }
    });
    const closed = new Promise<void>((r) => stream.once('close', () => r()));
    stream.once('response', (h) => {
      clearTimeout(t);
      resolve({ stream, status: Number(h[':status']), messages, closed });
    });
    stream.once('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
  });
}

interface Echo {
  id: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  rawHeaders: string[];
  bodyBytes: number;
}

describe('HTTP/2 on the TLS port', () => {
  let gw: GatewayProc;
  let s: ClientHttp2Session;

  beforeAll(async () => {
    gw = await startGateway({
      backends,
      config: {
        tls: { certs: [{ cert, key }], reloadCheckMs: 0, hstsMaxAgeS: 60 },
        http2: { maxConcurrentStreams: 8, maxResets: 50 },
        listen: { headersTimeoutMs: 1_000, requestTimeoutMs: 1_500, maxHeaderBytes: 4_096, maxHeaders: 20, keepAliveTimeoutMs: 60_000 },
      },
    });
    s = await session(gw.port);
  });

  afterAll(() => s?.destroy());

  it('negotiates h2 by ALPN, and http/1.1 for a client that asks for it', async () => {
    const alpn = (protocols: string[]): Promise<string | false> =>
      new Promise((resolve, reject) => {
        const c = tlsConnect({ host: '127.0.0.1', port: gw.port, servername: 'a.test', ca, ALPNProtocols: protocols }, () => {
          resolve(c.alpnProtocol ?? false);
          c.destroy();
        });
        c.setTimeout(5_000, () => c.destroy(new Error('TLS timed out')));
        c.on('error', reject);
      });
    expect(await alpn(['h2', 'http/1.1'])).toBe('h2');
    expect(await alpn(['http/1.1'])).toBe('http/1.1');
    // The test's own session at least.
    expect(await metricValue(gw, 'roomgate_h2_connections_total')).toBeGreaterThanOrEqual(1);
  });

  it('maps an h2 page request to HTTP/1.1 for the backend: Host from :authority, one Cookie, no pseudo-headers', async () => {
    const a = await request(s, { ':path': '/_backend/echo?room=h2-map', cookie: ['a=1', 'b=2'], 'x-test': 'yes' });
    expect(a.status).toBe(200);
    const e = JSON.parse(a.body) as Echo;
    expect(e.method).toBe('GET');
    expect(e.url).toBe('/_backend/echo?room=h2-map');
    expect(e.headers.host).toBe(`a.test:${gw.port}`);
    expect(e.headers.cookie).toBe('a=1; b=2');
    expect(e.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === 'cookie')).toHaveLength(1);
    expect(e.rawHeaders.some((h, i) => i % 2 === 0 && h.startsWith(':'))).toBe(false);
    expect(e.headers['x-test']).toBe('yes');
    expect(e.headers['x-forwarded-proto']).toBe('https');
    expect(e.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(e.headers['x-forwarded-host']).toBe(`a.test:${gw.port}`);
    // The answer: the backend's, without its connection headers, with HSTS and the Secure room cookie.
    expect(a.headers['connection']).toBeUndefined();
    expect(a.headers['strict-transport-security']).toBe('max-age=60');
    const cookie = ([] as string[]).concat(a.headers['set-cookie'] ?? []).find((c) => c.startsWith('roomgate_room='));
    expect(cookie).toMatch(/; Secure/);
  });

  it('routes a room to the same backend on h2 as on HTTP/1.1', async () => {
    for (let i = 0; i < 12; i++) {
      const path = `/_backend/echo?room=same-${i}`;
      const over2 = JSON.parse((await request(s, { ':path': path })).body) as Echo;
      const over1 = await h1Echo(gw.port, path);
      expect(over2.id).toBe(over1.id);
    }
  });

  it('sends a body on: with Content-Length as it is; without it, read whole and sent with its length, or chunked past proxy.bufferBodyBytes', async () => {
    const withLength = JSON.parse((await request(s, { ':method': 'POST', ':path': '/_backend/echo?room=h2-body', 'content-length': '11' }, ['hello world'])).body) as Echo;
    expect(withLength.bodyBytes).toBe(11);
    expect(withLength.headers['content-length']).toBe('11');
    const buffered = JSON.parse((await request(s, { ':method': 'POST', ':path': '/_backend/echo?room=h2-body' }, ['part one, ', Buffer.alloc(20_000, 'x')])).body) as Echo;
    expect(buffered.bodyBytes).toBe(10 + 20_000);
    expect(buffered.headers['content-length']).toBe(String(10 + 20_000));
    const streamed = JSON.parse((await request(s, { ':method': 'POST', ':path': '/_backend/echo?room=h2-body' }, ['part one, ', Buffer.alloc(70_000, 'x')])).body) as Echo;
    expect(streamed.bodyBytes).toBe(10 + 70_000);
    expect(streamed.headers['transfer-encoding']).toBe('chunked');
  });

  it("answers health checks and roomgate's own paths on h2", async () => {
    const h = await request(s, { ':path': '/healthz' });
    expect(h.status).toBe(200);
    expect(h.headers['strict-transport-security']).toBe('max-age=60');
    expect((await request(s, { ':path': '/readyz' })).status).toBe(200);
    expect((await request(s, { ':method': 'OPTIONS', ':path': '*' })).status).toBe(200);
  });

  it('refuses what it would refuse on HTTP/1.1: too many lines or bytes (431), CONNECT (405)', async () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 21; i++) many[`x-h${i}`] = 'v';
    expect((await request(s, { ':path': '/_backend/echo?room=x', ...many })).status).toBe(431);
    expect((await request(s, { ':path': '/_backend/echo?room=x', 'x-big': 'a'.repeat(5_000) })).status).toBe(431);
    // Past twice the limit nghttp2 resets the stream before any of roomgate's code runs.
    await expect(request(s, { ':path': '/_backend/echo?room=x', 'x-big': 'a'.repeat(9_000) })).rejects.toThrow(/ENHANCE_YOUR_CALM/);
    expect((await request(s, { ':method': 'CONNECT', ':authority': 'a.test:443' }, 'never')).status).toBe(405);
    // The session is still usable after each refusal.
    expect((await request(s, { ':path': '/_backend/echo?room=x' })).status).toBe(200);
  });

  it('refuses control bytes, unencoded characters, a Host unlike :authority and a missing authority, before any backend', async () => {
    let forwardedBefore = await metricValue(gw, 'roomgate_http_requests_total');
    const c = await RawH2.open(gw.port);
    try {
      // A control byte in a value: nghttp2 drops the field (or roomgate answers 400); it never
      // reaches the backend. A byte a request line cannot carry unencoded: roomgate's 400.
      const ctl = c.headers(get('/_backend/echo?room=x', [['x-ctl', 'a\x01b']]), true);
      const latin = c.headers(get('/_backend/echo?room=\xe9'), true);
      // nghttp2's stream reset (PROTOCOL_ERROR): malformed by RFC 9113 itself.
      // Host beside :authority, naming another host (RFC 9113 8.3.1): roomgate's 400.
      const twoHosts = c.headers(get('/_backend/echo?room=x', [['host', 'evil.test']]), true);
      const malformed = [
        c.headers(get('/_backend/echo?room=x y'), true),
        c.headers(get('no-slash'), true),
        c.headers([[':method', 'GET'], [':scheme', 'https'], [':path', '/_backend/echo?room=x']], true),
      ];
      await waitFor('every bad stream answered or reset', 5_000, () => [ctl, latin].every((id) => c.status(id) !== undefined && c.body(id).length > 0) && malformed.every((id) => c.resetCode(id) !== undefined));
      expect(c.status(latin)).toBe(400);
      await waitFor('the two-host stream answered', 5_000, () => c.status(twoHosts) !== undefined);
      expect(c.status(twoHosts)).toBe(400);
      if (c.status(ctl) !== 400) {
        expect(c.status(ctl)).toBe(200);
        expect(c.body(ctl)).not.toContain('x-ctl');
        forwardedBefore++;
      }
      expect(malformed.map((id) => c.resetCode(id))).toEqual([ERROR.PROTOCOL_ERROR, ERROR.PROTOCOL_ERROR, ERROR.PROTOCOL_ERROR]);
      // The connection itself stays usable.
      const fine = c.headers(get('/healthz'), true);
      await waitFor('the next stream answered', 5_000, () => c.status(fine) !== undefined);
      expect(c.status(fine)).toBe(200);
    } finally {
      c.close();
    }
    expect(await metricValue(gw, 'roomgate_http_requests_total')).toBe(forwardedBefore);
  });

  it('refuses streams past maxConcurrentStreams with REFUSED_STREAM', async () => {
    const c = await RawH2.open(gw.port);
    try {
      // Bodies never sent: each stream stays open. The limit is 8.
      const ids = Array.from({ length: 12 }, () => c.headers([[':method', 'POST'], [':scheme', 'https'], [':authority', 'a.test'], [':path', '/_backend/echo?room=conc']], false));
      await waitFor('streams past the limit refused', 5_000, () => ids.filter((id) => c.resetCode(id) === ERROR.REFUSED_STREAM).length >= 4);
      expect(ids.slice(0, 8).every((id) => c.resetCode(id) === undefined)).toBe(true);
    } finally {
      c.close();
    }
  });

  it('carries a WebSocket as an h2 stream (RFC 8441) to the room\'s backend, frames both ways', async () => {
    const before = await metricValue(gw, 'roomgate_h2_websockets_total');
    const ws = await openH2Socket(s, '/ws/live/?room=h2-ws');
    expect(ws.status).toBe(200);
    // The backend's welcome names it: the same backend a page of the room reaches.
    await waitFor('the welcome', 5_000, () => ws.messages.length >= 1);
    const welcome = JSON.parse(ws.messages[0] as string) as { type: string; backend: string };
    expect(welcome.type).toBe('connect');
    expect(welcome.backend).toBe((await h1Echo(gw.port, '/_backend/echo?room=h2-ws')).id);
    ws.stream.write(textFrame('not json'));
    await waitFor('the answer frame', 5_000, () => ws.messages.some((m) => m.includes('expected a JSON text frame')));
    expect(await metricValue(gw, 'roomgate_h2_websockets_total')).toBe(before + 1);
    // A live socket as any other: counted, and gone when the client cancels its stream.
    await waitFor('counted live', 5_000, async () => (await metricValue(gw, 'roomgate_live_sockets')) === 1);
    ws.stream.close(http2.constants.NGHTTP2_CANCEL);
    await ws.closed;
    await waitFor('no live socket left', 5_000, async () => (await metricValue(gw, 'roomgate_live_sockets')) === 0);
  });

  it('ends the stream when the backend closes the WebSocket', async () => {
    const ws = await openH2Socket(s, '/ws/live/?room=h2-close');
    expect(ws.status).toBe(200);
    // A close frame: the demo backend answers it and closes its connection.
    const close = Buffer.from([0x88, 0x82, 1, 2, 3, 4, 0x03 ^ 1, 0xe8 ^ 2]);
    const ended = new Promise<void>((r) => ws.stream.once('end', () => r()));
    ws.stream.resume();
    ws.stream.write(close);
    // END_STREAM from roomgate once the backend's connection ended (its FIN, relayed).
    await Promise.race([ended, new Promise((_, reject) => setTimeout(() => reject(new Error('stream not ended')), 5_000))]);
    ws.stream.end();
    await waitFor('no live socket left', 5_000, async () => (await metricValue(gw, 'roomgate_live_sockets')) === 0);
  });

  it('answers an h2 WebSocket like an HTTP/1.1 handshake: dot segments resolved (here to no WebSocket route: 404), a backend refusal (404) relayed as the stream answer, plain CONNECT 405', async () => {
    expect((await openH2Socket(s, '/ws/live/../x?room=x')).status).toBe(404); // resolved to /ws/x: no WebSocket route
    expect((await openH2Socket(s, '/elsewhere/?room=x')).status).toBe(404);
    const other = await new Promise<number>((resolve, reject) => {
      const st = s.request({ ':method': 'CONNECT', ':protocol': 'chat', ':path': '/ws/live/?room=x', ':scheme': 'https', ':authority': 'a.test' }, { endStream: false });
      st.once('response', (h) => resolve(Number(h[':status'])));
      st.once('error', reject);
    });
    expect(other).toBe(405);
  });

  it('answers 408 to a body that does not arrive within requestTimeoutMs', async () => {
    const a = await request(s, { ':method': 'POST', ':path': '/_backend/echo?room=slow', 'content-length': '100' }, 'never');
    expect(a.status).toBe(408);
  });

  it('closes a connection that resets more than maxResets streams before their answer (rapid reset) with ENHANCE_YOUR_CALM', async () => {
    const requestsBefore = await metricValue(gw, 'roomgate_http_requests_total');
    const c = await RawH2.open(gw.port);
    try {
      for (let i = 0; i < 1_000 && !c.closed; i++) c.reset(c.headers(get(`/_backend/echo?room=rr-${i % 7}`), true));
      await waitFor('the connection closed', 5_000, () => c.closed);
      expect(c.goawayCode()).toBe(ERROR.ENHANCE_YOUR_CALM);
    } finally {
      c.close();
    }
    expect(await metricValue(gw, 'roomgate_client_errors_total', { code: 'h2-rapid-reset' })).toBeGreaterThanOrEqual(1);
    // Cancelled streams started little backend work: far fewer than the 1,000 opened.
    const forwarded = (await metricValue(gw, 'roomgate_http_requests_total')) - requestsBefore;
    expect(forwarded).toBeLessThan(200);
    // Other clients are unaffected.
    expect((await request(s, { ':path': '/healthz' })).status).toBe(200);
  });

  it('keeps offering h2 after a certificate reload (SIGHUP)', async () => {
    const reloads = gw.lines.filter((l) => l.includes('TLS certificates reloaded')).length;
    gw.child.kill('SIGHUP');
    await waitFor('the reload logged', 10_000, () => gw.lines.filter((l) => l.includes('TLS certificates reloaded')).length > reloads);
    const fresh = await session(gw.port);
    try {
      expect((await request(fresh, { ':path': '/healthz' })).status).toBe(200);
      expect((fresh.socket as unknown as { alpnProtocol: string }).alpnProtocol).toBe('h2');
    } finally {
      fresh.destroy();
    }
  });
});

describe('HTTP/2 connection lifetime and the switch', () => {
  it('sends GOAWAY to an idle connection after keepAliveTimeoutMs', async () => {
    const gw = await startGatewayHere({ backends, config: { tls: { certs: [{ cert, key }], reloadCheckMs: 0 }, listen: { keepAliveTimeoutMs: 500 } } });
    const c = await RawH2.open(gw.port);
    try {
      await waitFor('GOAWAY on the idle connection', 5_000, () => c.goawayCode() !== undefined);
      expect(c.goawayCode()).toBe(ERROR.NO_ERROR);
    } finally {
      c.close();
    }
  });

  it('a stop does not wait on an open h2 connection: GOAWAY, then exit', async () => {
    const gw = await startGateway({ backends, config: { tls: { certs: [{ cert, key }], reloadCheckMs: 0 }, shutdown: { readinessDelayMs: 0, graceMs: 5_000 } } });
    const c = await RawH2.open(gw.port);
    try {
      // The server's SETTINGS: its session exists (a connection still in its handshake when
      // the stop begins is cut without one, which is tested by the race itself, not here).
      await waitFor("the server's SETTINGS", 5_000, () => c.frames.some((f) => f.type === FRAME.SETTINGS));
      const exited = new Promise<number | null>((resolve) => gw.child.once('exit', (code) => resolve(code)));
      gw.child.kill('SIGTERM');
      const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('still running'), 4_000))]);
      expect(code).toBe(0);
      expect(c.goawayCode()).toBe(ERROR.NO_ERROR);
    } finally {
      c.close();
    }
  });

  it('sends the backend the HTTP/1.1 handshake an h2 WebSocket stands for: Host, Upgrade, a key, X-Forwarded-*, the room and its epoch', async () => {
    // A backend that records the handshake it gets and accepts it (RFC 6455 4.2.2).
    let seen = '';
    const capture = net.createServer((sock) => {
      sock.on('error', () => undefined);
      sock.once('data', (d: Buffer) => {
        seen = d.toString('latin1');
        const key = /sec-websocket-key: *([^\r\n]+)/i.exec(seen)?.[1] ?? '';
        const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: chat\r\n\r\n`);
      });
    });
    await new Promise<void>((r) => capture.listen(0, '127.0.0.1', () => r()));
    const port = (capture.address() as net.AddressInfo).port;
    const g = await startGatewayHere({ backends: [`cap=http://127.0.0.1:${port}`], config: { tls: { certs: [{ cert, key }], reloadCheckMs: 0 } } });
    const c = await session(g.port);
    try {
      const stream = c.request(
        { ':method': 'CONNECT', ':protocol': 'websocket', ':path': '/ws/live/?room=xff', ':scheme': 'https', ':authority': 'a.test', 'sec-websocket-version': '13', 'sec-websocket-protocol': 'chat', 'x-forwarded-for': '6.6.6.6', 'x-roomgate-epoch': '999999' },
        { endStream: false },
      );
      const head = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        stream.once('response', resolve);
        stream.once('error', reject);
        setTimeout(() => reject(new Error('no answer')), 5_000);
      });
      expect(head[':status']).toBe(200);
      expect(head['sec-websocket-protocol']).toBe('chat');
      expect(head['sec-websocket-accept']).toBeUndefined();
      const lines = seen.split('\r\n');
      expect(lines[0]).toBe('GET /ws/live/?room=xff HTTP/1.1');
      const header = (name: string): string[] => lines.filter((l) => l.toLowerCase().startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trim());
      expect(header('host')).toEqual(['a.test']);
      expect(header('upgrade')).toEqual(['websocket']);
      expect(header('connection')).toEqual(['Upgrade']);
      expect(header('sec-websocket-version')).toEqual(['13']);
      expect(header('sec-websocket-key')[0]).toMatch(/^[A-Za-z0-9+/]{22}==$/);
      // The client's own X-Forwarded-For is not believed (no trusted proxy): replaced, as on HTTP/1.1.
      expect(header('x-forwarded-for')).toEqual(['127.0.0.1']);
      expect(header('x-forwarded-proto')).toEqual(['https']);
      // The room's ownership fields, and never the client's (docs/ownership.md).
      expect(header('x-roomgate-room')).toEqual(['xff']);
      expect(header('x-roomgate-epoch')).toHaveLength(1);
      expect(header('x-roomgate-epoch')[0]).not.toBe('999999');
      expect(lines.some((l) => l.startsWith(':'))).toBe(false);
      stream.close(http2.constants.NGHTTP2_CANCEL);
    } finally {
      c.destroy();
      await g.stop();
      await new Promise<void>((r) => capture.close(() => r()));
    }
  });

  it('http2.websockets false does not offer extended CONNECT', async () => {
    const gw = await startGatewayHere({ backends, config: { tls: { certs: [{ cert, key }], reloadCheckMs: 0 }, http2: { websockets: false } } });
    const s = await session(gw.port);
    try {
      const settings = s.remoteSettings.enableConnectProtocol ? s.remoteSettings : await new Promise<http2.Settings>((r) => s.once('remoteSettings', r));
      expect(settings.enableConnectProtocol).toBeFalsy();
      expect((await request(s, { ':path': '/healthz' })).status).toBe(200);
    } finally {
      s.destroy();
    }
  });

  it('http2.enabled false offers only http/1.1', async () => {
    const gw = await startGatewayHere({ backends, config: { tls: { certs: [{ cert, key }], reloadCheckMs: 0 }, http2: { enabled: false } } });
    const proto = await new Promise<string | false>((resolve, reject) => {
      const c = tlsConnect({ host: '127.0.0.1', port: gw.port, servername: 'a.test', ca, ALPNProtocols: ['h2', 'http/1.1'] }, () => {
        resolve(c.alpnProtocol ?? false);
        c.destroy();
      });
      c.setTimeout(5_000, () => c.destroy(new Error('TLS timed out')));
      c.on('error', reject);
    });
    expect(proto).toBe('http/1.1');
  });
});

/** The echo of an HTTP/1.1 https request for `path` (node's https client offers no ALPN h2). */
function h1Echo(port: number, path: string): Promise<Echo> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path, servername: 'a.test', ca, headers: { host: 'a.test' }, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(JSON.parse(body) as Echo));
    });
    req.on('timeout', () => req.destroy(new Error('https request timed out')));
    req.on('error', reject);
  });
}
