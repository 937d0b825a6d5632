// The backend's push receiver (push.path) and handoff hooks (handoff.path) are out of every client's reach, on every front: the
// byte-level HTTP/1.1 path, node:http (the byte-level path off, and every request with a body),
// HTTP/1.1 over TLS, HTTP/2 and HTTP/2 extended CONNECT, in any spelling the canonical target
// folds (src/http/target.ts). A push (pushes disabled or not) from a client never reaches a
// backend; targets that servers read differently get 400. In-process gateways in front of an
// in-process backend that records every request it parses.
import http from 'node:http';
import type http2 from 'node:http2';
import type { ClientHttp2Session } from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { h2Session } from '../support/h2-session.js';
import { readFileSync } from 'node:fs';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-reserved-');
const seen: string[] = [];
let backend: http.Server;
let lean: Gateway;
let nodeHttp: Gateway;
let tlsGw: Gateway;
let ca: Buffer;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    req.on('end', () => res.end(`backend ${req.url}\n`));
  });
  // Upgrades are recorded too, and answered with a 101 so a handshake that got through would show.
  backend.on('upgrade', (req, socket) => {
    seen.push(`UPGRADE ${req.url}`);
    socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n');
  });
  const url = await listenOnLoopback(backend);
  const caFiles = makeCa(dir, 'ca');
  const server = makeSigned(dir, 'srv', caFiles, ['a.test', '127.0.0.1']);
  ca = readFileSync(caFiles.cert);
  const base = { health: { path: null } };
  lean = await startInProcessGateway(dir, url, base);
  nodeHttp = await startInProcessGateway(dir, url, { ...base, proxy: { leanPages: false } });
  tlsGw = await startInProcessGateway(dir, url, { ...base, tls: { certs: [{ cert: server.cert, key: server.key }] } });
});

afterAll(async () => {
  await Promise.all([lean?.stop(), nodeHttp?.stop(), tlsGw?.stop()]);
  await closeServer(backend);
});

/** Raw bytes in, the status line's code out: no client library rewrites the target on the way. */
function rawStatus(connect: () => net.Socket, bytes: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect();
    let text = '';
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`no answer to ${JSON.stringify(bytes.slice(0, 60))}`));
    }, 5_000);
    s.setEncoding('latin1');
    s.on('data', (c: string) => {
      text += c;
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (m) {
        clearTimeout(t);
        s.destroy();
        resolve(Number(m[1]));
      }
    });
    s.on('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
    s.write(bytes);
  });
}

const plain = (g: Gateway) => () => net.connect(g.port, '127.0.0.1');
const overTls = (g: Gateway) => () => tls.connect({ host: '127.0.0.1', port: g.port, servername: 'a.test', ca, ALPNProtocols: ['http/1.1'] });

const ATTACKS = [
  '/_roomgate/push?room=victim',
  '/_roomgate/push/',
  '/r/victim/_roomgate/push',
  '/_roomgate/%70ush',
  '/_roomgate/%70USH?room=victim',
  '//_roomgate//push',
  '/x/../_roomgate/push',
  '/game/%2e%2e/_roomgate/push',
  '/_ROOMGATE/push',
  '/_roomgate/push;x',
  '/_roomgate/push.',
  // handoff.path (default /_roomgate/handoff) and every hook under it, reserved the same way.
  '/_roomgate/handoff/export',
  '/_roomgate/%68andoff/import?room=victim',
  '/r/victim/_roomgate/handoff/release',
  '/_ROOMGATE/Handoff/resume;x',
  '//_roomgate/handoff',
];
const REFUSED = ['/a%2Fb', '/a%5cb', '/a\\b', '/a%00b', '/_roomgate/push#x', '/r/victim/_roomgate/push#'];

function h1Post(target: string): string {
  return `POST ${target} HTTP/1.1\r\nHost: a.test\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
}
function h1Get(target: string): string {
  return `GET ${target} HTTP/1.1\r\nHost: a.test\r\n\r\n`;
}
function h1Upgrade(target: string): string {
  return `GET ${target} HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;
}

function h2Status(s: ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const st = s.request(headers, { endStream: body === undefined });
    const t = setTimeout(() => reject(new Error(`h2 ${String(headers[':path'])}: no answer`)), 5_000);
    st.once('response', (h) => {
      clearTimeout(t);
      resolve(Number(h[':status']));
      st.close();
    });
    st.once('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
    if (body !== undefined) st.end(body);
  });
}

describe('the push receiver path, from a client', () => {
  const fronts = [
    ['byte-level HTTP/1.1', () => plain(lean)],
    ['node:http HTTP/1.1', () => plain(nodeHttp)],
    ['HTTP/1.1 over TLS', () => overTls(tlsGw)],
  ] as const;

  for (const [name, connect] of fronts) {
    it(`${name}: 404 for every method and spelling, nothing reaches the backend`, async () => {
      seen.length = 0;
      for (const target of ATTACKS) {
        expect(await rawStatus(connect(), h1Post(target)), `POST ${target}`).toBe(404);
        expect(await rawStatus(connect(), h1Get(target)), `GET ${target}`).toBe(404);
        expect(await rawStatus(connect(), h1Upgrade(target)), `upgrade ${target}`).toBe(404);
      }
      expect(await rawStatus(connect(), `DELETE /_roomgate/push HTTP/1.1\r\nHost: a.test\r\n\r\n`)).toBe(404);
      expect(seen).toEqual([]);
      // The control: an ordinary page and a path beside the push path still reach the backend.
      expect(await rawStatus(connect(), h1Get('/_roomgate/pushed'))).toBe(200);
      expect(await rawStatus(connect(), h1Get('/x/../game/%63hess/'))).toBe(200);
      expect(seen).toEqual(['GET /_roomgate/pushed', 'GET /game/chess/']);
    });

    it(`${name}: 400 for targets servers read differently`, async () => {
      seen.length = 0;
      for (const target of REFUSED) {
        expect(await rawStatus(connect(), h1Get(target)), target).toBe(400);
        expect(await rawStatus(connect(), h1Post(target)), target).toBe(400);
      }
      expect(seen).toEqual([]);
    });
  }

  it('HTTP/2 and HTTP/2 extended CONNECT: the same answers', async () => {
    const s = await h2Session(tlsGw.port, ca);
    try {
      seen.length = 0;
      for (const target of ATTACKS) {
        expect(await h2Status(s, { ':method': 'POST', ':path': target, 'content-type': 'application/json' }, '{}'), `POST ${target}`).toBe(404);
        expect(await h2Status(s, { ':path': target }), `GET ${target}`).toBe(404);
        const connect = { ':method': 'CONNECT', ':protocol': 'websocket', ':path': target, ':scheme': 'https', ':authority': 'a.test', 'sec-websocket-version': '13' };
        expect(await h2Status(s, connect, ''), `CONNECT ${target}`).toBe(404);
      }
      for (const target of REFUSED.filter((t) => !t.includes('\\'))) expect(await h2Status(s, { ':path': target }), target).toBe(400);
      expect(seen).toEqual([]);
      expect(await h2Status(s, { ':path': '/x/../game/%63hess/' })).toBe(200);
      expect(seen).toEqual(['GET /game/chess/']);
    } finally {
      s.close();
    }
  });
});
