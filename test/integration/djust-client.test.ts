// The djust-faithful test client (test/support/djust-client.mjs) does what djust's own client does
// (/work/shared/djust-facts.md): first against a small djust-shaped server speaking djust's own
// frames (every rule of the client, one by one), then through a real gateway in front of the demo
// backend (its own vocabulary), which is how the chaos scenarios use it.
// The client's waits are djust's; the tests inject a random source of 0 (every wait is djust's
// floor, 500 ms) and timers that run 50 times faster, so a reconnect takes about 10 ms.
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { startDemoBackend, type DemoBackend } from '../../examples/demo-backend/server.js';
import type { Gateway } from '../../src/gateway.js';
import { DJUST_MAX_ATTEMPTS, DjustClient, demoFrames, djustReconnectDelay, djustWsPath, type DjustClientOptions, type Timers } from '../support/djust-client.mjs';
import { nodeDjustClient } from '../support/djust-node.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { waitFor } from '../support/processes.js';

const FAST: Timers = {
  setTimeout: (f, ms) => setTimeout(f, ms / 50),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
  setInterval: (f, ms) => setInterval(f, ms / 50),
  clearInterval: (t) => clearInterval(t as NodeJS.Timeout),
};

const clients: DjustClient[] = [];

function client(port: number, o: Partial<DjustClientOptions> & { page?: string; cookie?: string } = {}): DjustClient {
  const c = nodeDjustClient(port, o.page ?? '/page/', { timers: FAST, random: () => 0, view: 'app.views.Counter', ...o });
  clients.push(c);
  return c;
}

afterEach(() => {
  for (const c of clients.splice(0)) c.stop();
});

interface Seen {
  path: string;
  frames: Record<string, unknown>[];
}

/**
 * A djust-shaped server: `connect`, then a `mount` answer (version 1), each event answered with a
 * patch of the next version and its ref; POSTs with X-Djust-Event answered with `httpVersion()`.
 * What each socket sent is kept, so a test sees what the client re-sent (nothing) or pinged.
 */
class DjustShaped {
  readonly sockets: Seen[] = [];
  readonly posts: { event: string; body: string }[] = [];
  httpVersion = (): number => 2;
  /** An upgrade path the server refuses (404), as a server without the prefix does. */
  refusePath: string | null = null;
  /** Close code a socket gets right after its mount arrives (a refused mount), or null. */
  refuseMount: number | null = null;
  hasIds = true;
  /** Leave mounts unanswered (a socket open, its view not mounted yet). */
  holdMount = false;
  readonly live = new Set<WebSocket>();
  private readonly wss = new WebSocketServer({ noServer: true });
  readonly server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      this.posts.push({ event: String(req.headers['x-djust-event'] ?? ''), body });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ patches: [], version: this.httpVersion() }));
    });
  });

  constructor() {
    this.server.on('upgrade', (req, socket, head) => {
      if (req.url === this.refusePath) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, String(req.url)));
    });
  }

  private accept(ws: WebSocket, path: string): void {
    const seen: Seen = { path, frames: [] };
    this.sockets.push(seen);
    this.live.add(ws);
    let version = 0;
    ws.on('close', () => this.live.delete(ws));
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as Record<string, unknown>;
      seen.frames.push(m);
      if (m.type === 'mount') {
        if (this.refuseMount !== null) return ws.close(this.refuseMount, 'refused');
        if (this.holdMount) return;
        version = 1;
        ws.send(JSON.stringify({ type: 'mount', version, html: '<p>0</p>', has_ids: this.hasIds }));
      } else if (m.type === 'event') {
        if (m.event === 'refuse') return ws.send(JSON.stringify({ type: 'error', error: 'room-moving', retry: true }));
        if (m.event === 'jump') version += 5;
        else version++;
        ws.send(JSON.stringify({ type: 'patch', patches: [], version, ref: m.ref }));
      } else if (m.type === 'ping') ws.send(JSON.stringify({ type: 'pong' }));
    });
    ws.send(JSON.stringify({ type: 'connect', session_id: `s${this.sockets.length}` }));
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  closeAll(code: number): void {
    for (const ws of this.live) ws.close(code, 'bye');
  }
}

describe('the djust-faithful client against a djust-shaped server', () => {
  const srv = new DjustShaped();
  beforeAll(() => new Promise<void>((resolve) => srv.server.listen(0, '127.0.0.1', resolve)));
  afterEach(() => {
    // A failed test leaves no refusal behind for the next.
    srv.refusePath = null;
    srv.refuseMount = null;
    srv.hasIds = true;
    srv.holdMount = false;
  });
  afterAll(async () => {
    srv.closeAll(1001);
    await new Promise<void>((resolve) => srv.server.close(() => resolve()));
  });

  it("djust's back-off: max(500, rand * min(1000 * 2^(n-1), 30000)); the #3186 path: option, meta tag, /ws/live/; same host only", () => {
    expect([1, 2, 3, 6, 20].map((n) => djustReconnectDelay(n, () => 0.999))).toEqual([999, 1998, 3996, 29970, 29970]);
    expect(djustReconnectDelay(1, () => 0.1)).toBe(500);
    const meta = { querySelector: () => ({ getAttribute: () => '/r/7/ws/live/' }) };
    expect(djustWsPath('/p/ws/live/', meta)).toBe('/p/ws/live/');
    expect(djustWsPath(undefined, meta)).toBe('/r/7/ws/live/');
    expect(djustWsPath('//evil.example/ws/', null)).toBe('/ws/live/');
    expect(djustWsPath('wss://evil.example/ws/', null)).toBe('/ws/live/');
  });

  it('mounts after the server speaks first, counts answers by ref and version, pings, and asks request_html on a jump with the socket open', async () => {
    const c = client(srv.port, { heartbeatMs: 1_000 }).start();
    await waitFor('mounted', 5_000, () => c.mounted, 5);
    expect(c.path()).toBe('/ws/live/'); // v1.1: fixed, whatever the option says
    const seen = srv.sockets.at(-1);
    expect(seen?.frames[0]).toMatchObject({ type: 'mount', view: 'app.views.Counter', url: '/page/', has_prerendered: true });
    expect(c.version).toBe(1);
    expect(c.mounts[0]?.applied).toBe(true);
    c.sendEvent('inc');
    c.sendEvent('inc');
    await waitFor('2 answers', 5_000, () => c.events.every((e) => e.ackedAt !== null), 5);
    expect(c.version).toBe(3);
    c.sendEvent('jump');
    await waitFor('the jump answered', 5_000, () => c.resyncs === 1, 5);
    // The server reads request_html as the frame after the jump (heartbeat pings may come between
    // and after: on a loaded machine one was the last frame when the client had counted the resync).
    const afterJump = (): Record<string, unknown>[] => (seen?.frames ?? []).slice((seen?.frames ?? []).findIndex((f) => f.type === 'event' && JSON.stringify(f).includes('jump')) + 1).filter((f) => f.type !== 'ping');
    await waitFor('request_html at the server', 5_000, () => afterJump().length > 0, 5);
    expect(afterJump()).toEqual([{ type: 'request_html' }]);
    expect(c.reloads).toEqual([]);
    await waitFor('a heartbeat ping (every 1000 ms / 50)', 5_000, () => seen?.frames.some((f) => f.type === 'ping'), 5);
  });

  it('ignores retry in an error frame and re-sends nothing; clears pending events on close; reconnects after any close with attempts reset on open', async () => {
    const c = client(srv.port).start();
    await waitFor('mounted', 5_000, () => c.mounted, 5);
    const seen = srv.sockets.at(-1) as Seen;
    c.sendEvent('refuse');
    await waitFor('the error frame', 5_000, () => c.errors.length === 1, 5);
    expect(c.errors[0]).toMatchObject({ error: 'room-moving', retry: true });
    expect(c.pending.size).toBe(1);
    const before = srv.sockets.length;
    srv.closeAll(1000); // a clean close too: djust reconnects after any
    await waitFor('mounted again', 5_000, () => c.mounted && srv.sockets.length === before + 1, 5);
    expect(c.pending.size).toBe(0);
    expect(c.closes.map((x) => [x.code, x.mounted])).toEqual([[1000, true]]);
    expect(c.attempts).toBe(0);
    // Nothing re-sent: the old socket got the event once, the new one only its mount.
    expect(seen.frames.filter((f) => f.type === 'event')).toHaveLength(1);
    expect((srv.sockets.at(-1) as Seen).frames.map((f) => f.type)).toEqual(['mount']);
    expect(c.unacknowledged().map((e) => e.name)).toEqual(['refuse']);
  });

  it('sends events as POST with X-Djust-Event while no socket is open; a version that follows is kept, a jump reloads the page (re-mounted as a reload would)', async () => {
    const c = client(srv.port).start();
    await waitFor('mounted', 5_000, () => c.mounted, 5);
    // The server refuses every handshake (404 before open): 10 attempts, then djust gives up.
    srv.refusePath = '/ws/live/';
    srv.closeAll(1012);
    await waitFor('gave up', 5_000, () => c.gaveUp, 5);
    srv.httpVersion = () => 2; // follows the mount's 1
    await c.sendEvent('inc', { n: 1 }).done;
    expect(srv.posts.at(-1)).toEqual({ event: 'inc', body: '{"n":1}' });
    expect(c.version).toBe(2);
    expect(c.reloads).toEqual([]);
    srv.httpVersion = () => 9;
    await c.sendEvent('inc').done;
    // The reload connects again: now the handshake opens and the mount is refused (4400).
    srv.refusePath = null;
    srv.refuseMount = 4400;
    expect(c.reloads).toMatchObject([{ expected: 3, got: 9, via: 'http' }]);
    expect(c.events.map((e) => [e.via, e.ackedVia])).toEqual([
      ['http', 'http'],
      ['http', 'http'],
    ]);
    // Refused mounts are counted; the attempt counter is reset by every open, so it never gives up.
    await waitFor('three refused mounts', 5_000, () => c.mountsRefused >= 3, 5);
    expect(c.gaveUp).toBe(false);
    srv.refuseMount = null;
    await waitFor('mounted after the reload', 5_000, () => c.mounted, 5);
    expect(c.version).toBe(1);
  });

  it("sends an event as POST while its socket is open but the view not mounted yet (djust's sendEvent: 'View not mounted. Event ignored', then the HTTP fallback)", async () => {
    srv.holdMount = true;
    const c = client(srv.port).start();
    await waitFor('the mount sent, unanswered', 5_000, () => srv.sockets.at(-1)?.frames.some((f) => f.type === 'mount') === true && c.sessionId !== null, 5);
    expect(c.mounted).toBe(false);
    const ev = c.sendEvent('inc', { n: 7 });
    expect(ev.via).toBe('http');
    await ev.done;
    expect(srv.posts.at(-1)).toEqual({ event: 'inc', body: '{"n":7}' });
    expect(ev.ackedVia).toBe('http');
    // The socket carried its mount only: an event there would be refused by a server that has no view yet.
    expect((srv.sockets.at(-1) as Seen).frames.map((f) => f.type)).toEqual(['mount']);
  });

  it('gives up after 10 failed attempts in a row; #3186: a prefixed path that fails before opening falls back to /ws/live/ once; 4403 is terminal', async () => {
    const dead = http.createServer();
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
    const deadPort = (dead.address() as AddressInfo).port;
    await new Promise<void>((resolve) => dead.close(() => resolve()));
    const gone = client(deadPort).start();
    await waitFor('gave up', 10_000, () => gone.gaveUp, 5);
    expect(gone.closes).toHaveLength(DJUST_MAX_ATTEMPTS + 1);

    srv.refusePath = '/r/1/ws/live/';
    const c = client(srv.port, { release: '3186', wsPath: '/r/1/ws/live/' }).start();
    await waitFor('mounted on the fallback', 5_000, () => c.mounted, 5);
    expect(c.closes.map((x) => x.path)).toEqual(['/r/1/ws/live/']);
    expect(srv.sockets.at(-1)?.path).toBe('/ws/live/');
    srv.refuseMount = 4403;
    srv.closeAll(1012);
    await waitFor('refused for good', 5_000, () => c.gaveUp, 5);
    expect(c.closes.at(-1)?.code).toBe(4403);
    srv.refuseMount = null;
    srv.refusePath = null;
  });

  it('has_ids: on a pre-rendered page the mount html is applied only with has_ids', async () => {
    srv.hasIds = false;
    const c = client(srv.port).start();
    await waitFor('mounted', 5_000, () => c.mounted, 5);
    expect(c.mounts[0]?.applied).toBe(false);
    const fresh = client(srv.port, { prerendered: false }).start();
    await waitFor('mounted', 5_000, () => fresh.mounted, 5);
    expect(fresh.mounts[0]?.applied).toBe(true);
    srv.hasIds = true;
  });
});

describe('the djust-faithful client through a gateway in front of the demo backend', () => {
  let backend: DemoBackend;
  let gw: Gateway;
  let dir = '';
  beforeAll(async () => {
    // Made here, not when the file is collected: a run that filters these tests out (-t) runs no
    // afterAll, and would leave the folder behind.
    dir = mkdtempSync(join(tmpdir(), 'roomgate-djust-client-'));
    backend = await startDemoBackend({ port: 0, host: '127.0.0.1', id: 'b1' });
    gw = await startInProcessGateway(dir, `http://127.0.0.1:${backend.port}`, { health: { path: null } });
  });
  afterAll(async () => {
    await gw.stop();
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("mounts the room, gets each click acknowledged by the room's move, follows the room-mate's moves with its page's versions; while closed its click goes by POST to the page and the answer's version is checked", async () => {
    const room = 'dj-1';
    const opts = { release: '3186' as const, wsPath: `/ws/live/?room=${room}`, frames: demoFrames, page: `/game/${room}/`, params: { room } };
    // Each page's session cookie, as its page load set it: the browser sends it with the socket and the POST.
    const a = client(gw.port, { ...opts, id: 'a', cookie: 'djust_session=page-a-0123456789abcdef' }).start();
    const b = client(gw.port, { ...opts, id: 'b', cookie: 'djust_session=page-b-0123456789abcdef' }).start();
    await waitFor('both mounted', 5_000, () => a.mounted && b.mounted, 5);
    expect([a.version, b.version]).toEqual([1, 1]);
    a.sendEvent('click', { x: 1 });
    a.sendEvent('click', { x: 2 });
    b.sendEvent('click', { x: 3 });
    // Each page's view: its mount's 1, then one version a patch.
    await waitFor('3 moves seen by both', 5_000, () => a.version === 4 && b.version === 4, 5);
    expect(a.events.map((e) => e.applied)).toEqual([[1], [2]]);
    expect(a.unacknowledged()).toEqual([]);
    expect(a.reloads.length + a.resyncs + b.reloads.length + b.resyncs).toBe(0);
    // While no socket is open the click is a POST to the page (routed by its path to the room's
    // backend), with the page's cookie: the demo answers with the version that follows the last one
    // it sent that page (a's 4), whatever the room did meanwhile: b's click is a move a never saw.
    a.stop();
    // Once the backend saw a's socket close (until then a patch would go to it, a version a never sees).
    await waitFor("a's socket gone at the backend", 5_000, async () => {
      const rooms = (await (await fetch(`http://127.0.0.1:${backend.port}/_backend/rooms`, { signal: AbortSignal.timeout(2_000) })).json()) as { rooms: Record<string, number> };
      return rooms.rooms[room] === 1 ? true : undefined;
    }, 10);
    b.sendEvent('click', { x: 4 });
    await waitFor("b's click seen", 5_000, () => b.version === 5, 5);
    const c = client(gw.port, { ...opts, id: 'c', cookie: 'djust_session=page-a-0123456789abcdef' });
    (c as unknown as { version: number }).version = 4;
    const ev = c.sendEvent('click', { x: 5 });
    await ev.done;
    expect([ev.via, ev.httpStatus, ev.failed, ev.applied]).toEqual(['http', 200, null, [5]]);
    expect([c.version, c.reloads.length]).toEqual([5, 0]);
    await waitFor('b saw the POSTed move', 5_000, () => b.version === 6, 5);
    // A page that missed a version reloads: its POST's answer (6) does not follow its 4.
    const late = client(gw.port, { ...opts, id: 'd', cookie: 'djust_session=page-a-0123456789abcdef' });
    (late as unknown as { version: number }).version = 4;
    await late.sendEvent('click').done;
    expect(late.reloads).toMatchObject([{ expected: 5, got: 6, via: 'http' }]);
    // A page the room has no view of (no cookie) is not refused: its click is applied, answered with a fresh view's 1.
    const stranger = client(gw.port, { ...opts, id: 'e' });
    const its = stranger.sendEvent('click');
    await its.done;
    expect([its.httpStatus, its.failed, its.applied, stranger.version]).toEqual([200, null, [7], 1]);
  });
});
