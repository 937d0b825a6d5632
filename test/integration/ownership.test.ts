// The ownership fields every proxied request and upgrade of a room carries to its backend
// (X-Roomgate-Room, X-Roomgate-Epoch: the placement's epoch, a fencing token that never repeats),
// and that no client can send one of its own: a real gateway process, two real backends that
// record the heads they get, on both page paths, a WebSocket handshake, a request with a body,
// the page cache's fetch, and a move of the room after its backend died.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { startGateway, stop, stopAll, type GatewayProc } from '../support/processes.js';

interface Seen {
  readonly backend: string;
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly raw: readonly string[];
}

const seen: Seen[] = [];

class Recorder {
  readonly server: http.Server;
  constructor(readonly id: string) {
    this.server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        // roomgate's hello: this backend takes held messages, so its WebSockets are followed (X-Roomgate-Socket).
        if (req.method === 'POST' && req.url === '/_roomgate/handoff/hello') return void res.end('{"version":2,"messages":true}');
        seen.push({ backend: id, method: req.method ?? '', url: req.url ?? '', headers: req.headers, raw: req.rawHeaders });
        res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': req.url?.startsWith('/cached') ? 'max-age=60' : 'no-store' });
        res.end(`${id} ${req.url ?? ''}`);
      });
    });
    // A handshake is recorded and refused: what matters is the head the backend got.
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
      seen.push({ backend: id, method: 'UPGRADE', url: req.url ?? '', headers: req.headers, raw: req.rawHeaders });
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    });
  }
  start(): Promise<string> {
    return listenOnLoopback(this.server);
  }
  close(): Promise<void> {
    return closeServer(this.server);
  }
}

function send(gw: GatewayProc, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: gw.port, method, path, headers, agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** A WebSocket handshake through the gateway (the recording backend refuses it with 403). */
function handshake(gw: GatewayProc, path: string, extra = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(gw.port, '127.0.0.1', () => {
      s.write(`GET ${path} HTTP/1.1\r\nHost: a.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`);
    });
    let text = '';
    s.setEncoding('latin1');
    s.on('data', (c: string) => (text += c));
    s.on('close', () => resolve(text));
    s.on('error', reject);
    s.setTimeout(5_000, () => s.destroy(new Error('no answer to the handshake')));
  });
}

const last = (): Seen => {
  const s = seen.at(-1);
  if (!s) throw new Error('the backend saw nothing');
  return s;
};
/** Every X-Roomgate-* field (any spelling) the backend got, as "Name: value". */
function roomgateFields(s: Seen): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < s.raw.length; i += 2) if (/^x[-_]roomgate[-_]/i.test(s.raw[i] as string)) out.push(`${s.raw[i] as string}: ${s.raw[i + 1] as string}`);
  return out;
}

const b1 = new Recorder('b1');
const b2 = new Recorder('b2');
let gw: GatewayProc;
let gwNode: GatewayProc;

beforeAll(async () => {
  const [u1, u2] = await Promise.all([b1.start(), b2.start()]);
  const config = { health: { path: null }, proxy: { websocketPaths: ['/ws/'] }, cache: { paths: ['/cached/'] } };
  gw = await startGateway({ backends: [`b1=${u1}`, `b2=${u2}`], config });
  gwNode = await startGateway({ backends: [`b1=${u1}`, `b2=${u2}`], config: { ...config, proxy: { ...config.proxy, leanPages: false } } });
});

afterAll(async () => {
  await stopAll();
  await Promise.all([b1.close(), b2.close()]);
});

describe.each([
  ['byte-level page path', () => gw],
  ['node:http page path', () => gwNode],
])('ownership fields (%s)', (_name, gateway) => {
  it("a room's page, its form POST, its WebSocket and its cached page all carry the room and one epoch", async () => {
    const g = gateway();
    const room = `own-${g.port}`;
    expect(await send(g, 'GET', `/game/?room=${room}`)).toBe(200);
    const page = last();
    expect(page.headers['x-roomgate-room']).toBe(room);
    const epoch = Number(page.headers['x-roomgate-epoch']);
    expect(epoch).toBeGreaterThan(0);

    expect(await send(g, 'POST', `/game/move?room=${room}`, { 'Content-Type': 'text/plain' }, 'e2e4')).toBe(200);
    expect(last()).toMatchObject({ method: 'POST', backend: page.backend });
    expect(last().headers['x-roomgate-room']).toBe(room);
    expect(last().headers['x-roomgate-epoch']).toBe(String(epoch));

    expect(await handshake(g, `/ws/live/?room=${room}`)).toMatch(/^HTTP\/1\.1 403 /);
    expect(last()).toMatchObject({ method: 'UPGRADE', backend: page.backend });
    expect(last().headers['x-roomgate-room']).toBe(room);
    expect(last().headers['x-roomgate-epoch']).toBe(String(epoch));

    expect(await send(g, 'GET', `/cached/page?room=${room}`)).toBe(200);
    expect(last()).toMatchObject({ url: `/cached/page?room=${room}`, backend: page.backend });
    expect(last().headers['x-roomgate-room']).toBe(room);
    expect(last().headers['x-roomgate-epoch']).toBe(String(epoch));
  });

  it('a client can send none of its own, under any spelling; a request without a room carries none', async () => {
    const g = gateway();
    const room = `forged-${g.port}`;
    const forged = { 'X-Roomgate-Room': 'someone-else', 'x-roomgate-epoch': '999999', 'X-Roomgate-Anything': '1', X_Roomgate_Room: 'underscore' };
    await send(g, 'GET', `/game/?room=${room}`, forged);
    expect(roomgateFields(last()).sort()).toEqual([`X-Roomgate-Epoch: ${String(last().headers['x-roomgate-epoch'])}`, `X-Roomgate-Room: ${room}`]);
    await send(g, 'POST', `/game/?room=${room}`, forged, 'x');
    expect(roomgateFields(last())).toHaveLength(2);
    await handshake(g, `/ws/live/?room=${room}`, 'X-Roomgate-Room: someone-else\r\nx_roomgate_epoch: 1\r\nX-Roomgate-Socket: forged-socket-id-000000\r\n');
    // A WebSocket also carries roomgate's own socket id (version-2 handoffs), never the client's.
    expect(roomgateFields(last())).toHaveLength(3);
    expect(last().headers['x-roomgate-room']).toBe(room);
    expect(last().headers['x-roomgate-socket']).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(last().headers['x-roomgate-socket']).not.toBe('forged-socket-id-000000');

    await send(g, 'GET', '/no-room-here', forged);
    expect(roomgateFields(last())).toEqual([]);
  });
});

describe('a move', () => {
  it("after the room's backend dies and the room is placed again, the new backend gets a newer epoch", async () => {
    const spare = new Recorder('b3');
    const u3 = await spare.start();
    const dying = new Recorder('b4');
    const u4 = await dying.start();
    const g = await startGateway({ backends: [`b3=${u3}`, `b4=${u4}`], config: { health: { path: null } } });
    try {
      // A room that lands on b4 (the one that will die).
      let room = '';
      for (let i = 0; i < 50 && room === ''; i++) {
        await send(g, 'GET', `/p?room=move-${i}`);
        if (last().backend === 'b4') room = `move-${i}`;
      }
      expect(room).not.toBe('');
      const before = Number(last().headers['x-roomgate-epoch']);
      await dying.close();
      expect(await send(g, 'GET', `/p?room=${room}`)).toBe(200);
      expect(last().backend).toBe('b3');
      expect(last().headers['x-roomgate-room']).toBe(room);
      expect(Number(last().headers['x-roomgate-epoch'])).toBeGreaterThan(before);
    } finally {
      await stop(g);
      await spare.close();
      await dying.close().catch(() => undefined);
    }
  });
});
