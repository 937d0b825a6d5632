// Guarantee 6's fallback (issue 37, docs/handoff.md "What following costs"): a tunnel is followed
// message by message (and carries X-Roomgate-Socket) only to a backend whose hello said it takes
// held messages (version 2, `messages`); a version-1 backend's tunnels are relayed as bytes. The
// gateway asks every backend's hello at start (bounded); a tunnel opened before its backend's
// answer is not followed. A real gateway in this process and two real HTTP backends that record
// each handshake's head and refuse it (what matters is the head).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { HELLOS_AT_START_MS } from '../../src/runtime/handoff.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, waitFor } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

class HelloBackend {
  readonly heads: http.IncomingHttpHeaders[] = [];
  hellos = 0;
  /** Answers held back until release() (a backend slow to answer its hello). */
  private held: (() => void)[] = [];
  hold = false;
  readonly server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/_roomgate/handoff/hello') return void res.end('page');
      this.hellos++;
      const answer = (): void => void res.end(this.hello);
      if (this.hold) this.held.push(answer);
      else answer();
    });
  });

  constructor(private readonly hello: string) {
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
      this.heads.push(req.headers);
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    });
  }

  release(): void {
    for (const a of this.held.splice(0)) a();
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function handshake(gw: Gateway, room: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect(gw.port, '127.0.0.1', () => {
      s.write(`GET /ws/live/?room=${room} HTTP/1.1\r\nHost: a.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    });
    s.resume();
    s.on('close', () => resolve());
    s.on('error', reject);
    s.setTimeout(5_000, () => s.destroy(new Error('no answer to the handshake')));
  });
}

const v2 = new HelloBackend('{"version":2,"messages":true}');
const v1 = new HelloBackend('{"version":1}');
const dir = scopeTempDir('roomgate-follow-');
const gateways: Gateway[] = [];

async function gateway(backends: { id: string; url: string }[]): Promise<Gateway> {
  const g = await startInProcessGateway(dir, backends[0]?.url as string, { backends, health: { path: null }, backendCalls: { secrets: [CALL_SECRET] } });
  gateways.push(g);
  return g;
}

/** A room placed on `backend` (the ring decides; the test tries names until one lands there). */
async function roomOn(gw: Gateway, backend: HelloBackend, tag: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const before = backend.heads.length;
    const room = `${tag}-${i}`;
    await handshake(gw, room);
    if (backend.heads.length > before) return room;
  }
  throw new Error('no room placed on the backend in 200 tries');
}

describe('tunnels followed only to backends that take held messages', () => {
  let urls: { v2: string; v1: string };
  beforeAll(async () => {
    urls = { v2: await v2.start(), v1: await v1.start() };
  });
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await Promise.all([v2.close(), v1.close()]);
  });

  it("a version-2 backend's tunnels carry a socket id (followed), a version-1 backend's none; each hello asked at start", async () => {
    const gw = await gateway([
      { id: 'v2', url: urls.v2 },
      { id: 'v1', url: urls.v1 },
    ]);
    // Asked at start (the start waits for the answers, at most HELLOS_AT_START_MS: on a loaded
    // machine they may land after it, so the check waits for the first followed tunnel).
    await waitFor('both hellos asked', 5_000, () => v2.hellos === 1 && v1.hellos === 1, 10);
    await waitFor('a followed tunnel to v2', 5_000, async () => {
      await roomOn(gw, v2, 'a');
      return v2.heads.at(-1)?.['x-roomgate-socket'] !== undefined;
    }, 10);
    await roomOn(gw, v1, 'b');
    expect([v2.hellos, v1.hellos]).toEqual([1, 1]);
    expect(v2.heads.at(-1)?.['x-roomgate-socket']).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(v1.heads.at(-1)?.['x-roomgate-socket']).toBeUndefined();
    // Both carry the room's ownership fields all the same.
    expect(v1.heads.at(-1)?.['x-roomgate-room']).toMatch(/^b-/);
  });

  it('a tunnel opened before its backend answered the hello is not followed; the next one after the answer is', async () => {
    v2.hold = true;
    const started = gateway([{ id: 'v2', url: urls.v2 }]);
    // The start waits for the hellos, at most HELLOS_AT_START_MS: this one never answers in time.
    const gw = await started;
    expect(HELLOS_AT_START_MS).toBeGreaterThan(0);
    await handshake(gw, 'early');
    expect(v2.heads.at(-1)?.['x-roomgate-socket']).toBeUndefined();
    v2.hold = false;
    v2.release();
    // The answer lands in the gateway's cache on its own time: tunnels are followed from then on.
    await waitFor('a followed tunnel after the hello answered', 5_000, async () => {
      await handshake(gw, 'late');
      return v2.heads.at(-1)?.['x-roomgate-socket'] !== undefined;
    }, 10);
    expect(v2.heads.at(-1)?.['x-roomgate-socket']).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });
});
