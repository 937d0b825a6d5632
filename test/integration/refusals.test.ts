// roomgate's own answers (src/http/refusals.ts) on every front: the method rule (TRACE 405, a
// method roomgate does not know 501, others only through proxy.extraMethods), and public errors
// that say what a client needs (status, Retry-After, a request id) and nothing internal, with the
// detail in the log under the same request id; a page for browsers, the operator's own when
// configured. In-process gateways in front of an in-process backend that records what it parses.
import http from 'node:http';
import type http2 from 'node:http2';
import type { ClientHttp2Session } from 'node:http2';
import net from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { memoryLogger } from '../support/control.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { h2Session } from '../support/h2-session.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-refusals-');
const seen: string[] = [];
let backend: http.Server;
let plain: Gateway;
let secure: Gateway;
let dead: Gateway;
let ca: Buffer;
const logs = memoryLogger('info');

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    req.on('end', () => res.end('from the backend\n'));
  });
  const url = await listenOnLoopback(backend);
  const caFiles = makeCa(dir, 'ca');
  const cert = makeSigned(dir, 'srv', caFiles, ['a.test']);
  ca = readFileSync(caFiles.cert);
  const page = join(dir, '503.html');
  writeFileSync(page, '<html><body><h1>We are back soon</h1><p>{{message}} ({{status}}, ref {{requestId}})</p></body></html>\n');
  const base = { health: { path: null }, proxy: { extraMethods: ['PROPFIND'], errorPages: [{ status: 503, file: page }] } };
  plain = await startInProcessGateway(dir, url, base);
  secure = await startInProcessGateway(dir, url, { ...base, tls: { certs: [{ cert: cert.cert, key: cert.key }] } });
  // A backend nobody listens on: every request is refused by roomgate itself.
  const closed = http.createServer();
  const deadUrl = await listenOnLoopback(closed);
  await closeServer(closed);
  dead = await startInProcessGateway(dir, deadUrl, { ...base, backends: [{ id: 'secret-backend-id', url: deadUrl }] }, { logger: logs.logger });
});

afterAll(async () => {
  await Promise.all([plain?.stop(), secure?.stop(), dead?.stop()]);
  await closeServer(backend);
});

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** One raw HTTP/1.1 exchange (Connection: close), parsed just enough. */
function raw(connect: () => net.Socket, bytes: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const s = connect();
    let text = '';
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`no answer to ${JSON.stringify(bytes.slice(0, 40))}`));
    }, 5_000);
    s.setEncoding('latin1');
    s.on('data', (c: string) => (text += c));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(t);
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const lines = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
      resolve({ status: Number(lines[0]?.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
    s.write(bytes);
  });
}

const overPlain = (g: Gateway) => () => net.connect(g.port, '127.0.0.1');
const overTls = (g: Gateway) => () => tls.connect({ host: '127.0.0.1', port: g.port, servername: 'a.test', ca, ALPNProtocols: ['http/1.1'] });
const req = (method: string, target = '/page', extra = ''): string => `${method} ${target} HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n${extra}\r\n`;

function h2(s: ClientHttp2Session, headers: http2.OutgoingHttpHeaders): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const st = s.request(headers, { endStream: true });
    const t = setTimeout(() => reject(new Error('h2: no answer')), 5_000);
    let body = '';
    let head: http2.IncomingHttpHeaders = {};
    st.setEncoding('utf8');
    st.on('response', (h) => (head = h));
    st.on('data', (c: string) => (body += c));
    st.on('end', () => {
      clearTimeout(t);
      resolve({ status: Number(head[':status']), headers: head as Record<string, string>, body });
    });
    st.on('error', reject);
  });
}

describe('the method rule, on every front', () => {
  const fronts = [
    ['HTTP/1.1 (byte-level, then node:http)', () => overPlain(plain)],
    ['HTTP/1.1 over TLS', () => overTls(secure)],
  ] as const;
  for (const [name, connect] of fronts) {
    it(`${name}: TRACE 405 with Allow, an unknown method 501, a registered one 405, a listed extra one forwarded`, async () => {
      seen.length = 0;
      const trace = await raw(connect(), req('TRACE'));
      expect(trace.status).toBe(405);
      expect(trace.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, PROPFIND');
      expect((await raw(connect(), req('FOO'))).status).toBe(501);
      expect((await raw(connect(), req('get'))).status).toBe(501);
      expect((await raw(connect(), req('MKCOL'))).status).toBe(405);
      expect((await raw(connect(), req('PURGE'))).status).toBe(501);
      // Bytes that are no method at all stay a bad request.
      expect((await raw(connect(), `G\u0001T /page HTTP/1.1\r\nHost: a.test\r\n\r\n`)).status).toBe(400);
      expect(seen).toEqual([]);
      for (const m of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND']) {
        expect((await raw(connect(), req(m, '/page', m === 'GET' || m === 'HEAD' ? '' : 'Content-Length: 0\r\n'))).status, m).toBe(200);
      }
      expect(seen.map((l) => l.split(' ')[0])).toEqual(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND']);
    });
  }

  it('HTTP/2: the same answers', async () => {
    const s = await h2Session(secure.port, ca);
    try {
      seen.length = 0;
      const trace = await h2(s, { ':method': 'TRACE', ':path': '/page' });
      expect(trace.status).toBe(405);
      expect(trace.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, PROPFIND');
      expect((await h2(s, { ':method': 'FOO', ':path': '/page' })).status).toBe(501);
      expect((await h2(s, { ':method': 'MKCOL', ':path': '/page' })).status).toBe(405);
      expect(seen).toEqual([]);
      expect((await h2(s, { ':method': 'PROPFIND', ':path': '/page' })).status).toBe(200);
      expect(seen).toEqual(['PROPFIND /page']);
    } finally {
      s.close();
    }
  });

  it("roomgate's own paths keep their own rules: the control plane answers them, not the proxy's method rule", async () => {
    seen.length = 0;
    const a = await raw(overPlain(plain), req('TRACE', '/_roomgate/api/online'));
    expect(a.headers['content-type']).toMatch(/^application\/json/);
    // The control plane's own answer (its route takes GET and HEAD), not the proxy's Allow.
    expect(a.headers.allow).toBe('GET, HEAD');
    expect(seen).toEqual([]);
  });
});

describe('public errors say nothing internal', () => {
  it('a dead backend: the status, Retry-After and a request id; the detail only in the log, under that id', async () => {
    const a = await raw(overPlain(dead), req('GET', '/game/x/'));
    expect([502, 503]).toContain(a.status);
    expect(a.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    const id = a.headers['x-request-id'];
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(a.body).toBe(`the service is unavailable, retry shortly\nrequest id: ${id}\n`);
    expect(a.body).not.toMatch(/secret-backend-id|ECONNREFUSED|refused|down/);
    const line = logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === id);
    expect(line).toMatchObject({ msg: 'request refused', backend: expect.any(String) });
    expect(JSON.stringify(line)).toMatch(/secret-backend-id|refused/);
  });

  it('every path and front tells the same: node:http (a POST), upgrades, HTTP/2', async () => {
    for (const bytes of [req('POST', '/game/x/', 'Content-Length: 0\r\n'), `GET /ws/live/?room=x HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`]) {
      const a = await raw(overPlain(dead), bytes);
      expect([502, 503]).toContain(a.status);
      expect(a.body).toMatch(/^the service is unavailable, retry shortly\nrequest id: [0-9a-f]{16}\n$/);
      expect(a.body).not.toMatch(/secret-backend-id/);
    }
  });

  it("a browser gets a page: the operator's own for 503 with the request id, the built-in one otherwise", async () => {
    const accept = 'Accept: text/html,application/xhtml+xml;q=0.9\r\n';
    let a = await raw(overPlain(dead), req('GET', '/game/y/', accept));
    // The first refusal marks the backend down (502); the next finds no backend (503).
    if (a.status === 502) {
      expect(a.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(a.body).toContain('<h1>502</h1>');
      expect(a.body).toContain(a.headers['x-request-id']);
      a = await raw(overPlain(dead), req('GET', '/game/y/', accept));
    }
    expect(a.status).toBe(503);
    expect(a.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(a.body).toBe(`<html><body><h1>We are back soon</h1><p>the service is unavailable, retry shortly (503, ref ${a.headers['x-request-id']})</p></body></html>\n`);
    expect(a.body).not.toMatch(/secret-backend-id/);
  });
});
