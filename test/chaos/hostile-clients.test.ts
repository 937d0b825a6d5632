// Slow and hostile clients against a real gateway and real demo backends, on raw sockets: clients
// that never read (a WebSocket fed by a flooding room, a 10 MB page), thousands of connections
// that send nothing, a WebSocket client whose network vanished, and slowloris on the head and
// on the body of both page paths. Each limit closes what it must within its configured time,
// the gateway's memory stays bounded, and normal requests and sockets keep working meanwhile.
// The limits are short here so the file stays quick; docs/security.md lists their defaults.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import {
  Client,
  httpRequest,
  metricValue,
  pingPong,
  startBackend,
  startGateway,
  stopAll,
  waitFor,
  withTimeout,
  type BackendProc,
  type GatewayProc,
} from '../support/processes.js';
import { percentile, sleep } from '../support/room-clients.js';

const HEADERS_TIMEOUT = 3_000;
const REQUEST_TIMEOUT = 4_000;
const WRITE_TIMEOUT = 1_500;
const SILENCE = 1_500;
/** What a loaded 2-core machine may add to a limit (timer sweeps, scheduling). */
const SLACK = 2_500;

let flat: BackendProc; // no ticks: the flood and page backend
let ticking: BackendProc; // sends every room a frame every 100 ms (a backend that keeps talking)
let gw: GatewayProc; // write timeouts, slowloris, idle connections
let quiet: GatewayProc; // the client-silence limit
const pythons = new Set<ChildProcess>();

beforeAll(async () => {
  [flat, ticking] = await Promise.all([startBackend('flat'), startBackend('ticking', ['--tick-ms', '100'])]);
  [gw, quiet] = await Promise.all([
    startGateway({
      backends: [flat],
      config: {
        listen: { headersTimeoutMs: HEADERS_TIMEOUT, requestTimeoutMs: REQUEST_TIMEOUT },
        proxy: { clientWriteTimeoutMs: WRITE_TIMEOUT, websocketClientSilenceMs: 0 },
      },
      env: { ROOMGATE_LOG_LEVEL: 'info' },
    }),
    startGateway({ backends: [ticking], config: { proxy: { websocketClientSilenceMs: SILENCE } }, env: { ROOMGATE_LOG_LEVEL: 'info' } }),
  ]);
}, 60_000);

afterAll(async () => {
  for (const p of pythons) p.kill('SIGKILL');
  await stopAll();
});

// --- helpers ----------------------------------------------------------------------------------

/** The gateway process's resident memory (bytes). */
function rss(g: GatewayProc): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${g.child.pid}/status`, 'utf8'));
  if (!m) throw new Error('no VmRSS');
  return Number(m[1]) * 1024;
}

const MB = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MB`;

async function membersOf(b: BackendProc, room: string): Promise<number> {
  const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(5_000) });
  return ((await res.json()) as { rooms: Record<string, number> }).rooms[room] ?? 0;
}

function handshake(room: string): string {
  return `GET /ws/live/?room=${room} HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
}

/** A masked text frame (as a client sends it), payload under 126 bytes. */
function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ (mask[i % 4] as number))]);
}

/** A raw socket that did the WebSocket handshake (101 read) and mounted `room`; it is left flowing. */
async function rawWebSocket(port: number, room: string): Promise<net.Socket> {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => undefined);
  await withTimeout(new Promise((r) => s.once('connect', r)), 5_000, 'connect');
  s.write(handshake(room));
  let got = '';
  await withTimeout(
    new Promise<void>((resolve, reject) => {
      const on = (c: Buffer): void => {
        got += c.toString('latin1');
        if (!got.includes('\r\n\r\n')) return;
        s.off('data', on);
        if (got.startsWith('HTTP/1.1 101')) resolve();
        else reject(new Error(`no 101: ${got.slice(0, 80)}`));
      };
      s.on('data', on);
    }),
    5_000,
    '101',
  );
  s.write(clientFrame(JSON.stringify({ type: 'mount', room })));
  return s;
}

/** Resolves when the socket is closed (it is read on, so a FIN or reset shows), with the time. */
function closedAt(s: net.Socket): Promise<number> {
  return new Promise((resolve) => {
    if (s.destroyed) return resolve(Date.now());
    s.once('close', () => resolve(Date.now()));
    s.resume();
  });
}

/**
 * Clients that never read, in a Python process: N sockets with a 4 KB receive buffer (Node cannot
 * set SO_RCVBUF), each does the WebSocket handshake and mounts `room`, then reads nothing. With
 * Node's default buffers the kernel takes about 4 MB per socket before the gateway's write waits;
 * the small buffer makes the stall come after a few kilobytes. 'check' on stdin reads each socket
 * to its end and prints how many were closed by the gateway (EOF or reset within 3 s).
 */
const STUCK_PY = String.raw`
import base64, json, os, socket, struct, sys
port, room, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
socks = []
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(('127.0.0.1', port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(('GET /ws/live/?room=%s HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n' % (room, key)).encode())
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(1)
    assert head.startswith(b'HTTP/1.1 101'), head
    payload = json.dumps({'type': 'mount', 'room': room}).encode()
    mask = os.urandom(4)
    s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
    socks.append(s)
print('ready', flush=True)
for line in sys.stdin:
    if line.strip() == 'check':
        closed = 0
        for s in socks:
            s.settimeout(3)
            try:
                while s.recv(65536):
                    pass
                closed += 1
            except ConnectionResetError:
                closed += 1
            except socket.timeout:
                pass
        print('closed %d' % closed, flush=True)
`;

interface StuckClients {
  readonly child: ChildProcess;
  line(prefix: string, ms: number): Promise<string>;
  send(text: string): void;
}

async function stuckClients(port: number, room: string, n: number): Promise<StuckClients> {
  const child = spawn('/usr/bin/python3', ['-c', STUCK_PY, String(port), room, String(n)], { stdio: ['pipe', 'pipe', 'pipe'] });
  pythons.add(child);
  child.on('exit', () => pythons.delete(child));
  const lines: string[] = [];
  let err = '';
  child.stdout?.on('data', (c: Buffer) => lines.push(...c.toString('utf8').split('\n').filter((l) => l !== '')));
  child.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const line = (prefix: string, ms: number): Promise<string> =>
    waitFor(`python: ${prefix}`, ms, () => {
      if (child.exitCode !== null) throw new Error(`python exited ${child.exitCode}: ${err}`);
      return lines.find((l) => l.startsWith(prefix));
    });
  await line('ready', 20_000);
  return { child, line, send: (text) => child.stdin?.write(`${text}\n`) };
}

/** One raw exchange: connect, write parts with gaps, collect until the gateway closes. */
interface Trickle {
  readonly openedAt: number;
  closedAt: number | null;
  text: string;
}

function trickle(port: number, first: string, next: () => string | null, gapMs: number): Trickle {
  const t: Trickle = { openedAt: Date.now(), closedAt: null, text: '' };
  const s = net.connect(port, '127.0.0.1');
  let timer: NodeJS.Timeout | null = null;
  s.on('error', () => undefined);
  s.on('data', (c: Buffer) => (t.text += c.toString('latin1')));
  s.on('close', () => {
    t.closedAt = Date.now();
    if (timer) clearTimeout(timer);
  });
  s.once('connect', () => {
    s.write(first);
    const step = (): void => {
      const part = next();
      if (part === null || s.destroyed) return;
      s.write(part);
      timer = setTimeout(step, gapMs);
    };
    timer = setTimeout(step, gapMs);
  });
  trickles.add(s);
  return t;
}
const trickles = new Set<net.Socket>();
afterAll(() => {
  for (const s of trickles) s.destroy();
});

/** Normal page GETs one after the other until `until` resolves; their latencies (ms) and failures. */
async function normalTraffic(g: GatewayProc, until: Promise<unknown>): Promise<{ ms: number[]; failed: number }> {
  let done = false;
  void until.finally(() => (done = true));
  const ms: number[] = [];
  let failed = 0;
  while (!done) {
    const t0 = Date.now();
    try {
      const r = await httpRequest(g.port, '/game/normal/', { timeoutMs: 5_000 });
      if (r.status === 200) ms.push(Date.now() - t0);
      else failed++;
    } catch {
      failed++;
    }
    await sleep(50);
  }
  return { ms, failed };
}

// --- 1. clients that never read -------------------------------------------------------------

describe('a client that never reads', () => {
  it("WebSockets: back-pressure bounds the gateway's memory per stuck socket, each is closed (both sides) after clientWriteTimeoutMs, and other rooms on the same backend are not slowed", async () => {
    const N = 50;
    const calm = new Client(`${gw.wsUrl}/ws/live/?room=calm`);
    const flooder = new Client(`${gw.wsUrl}/ws/live/?room=flood`);
    await Promise.all([calm.join('calm'), flooder.join('flood')]);
    const rssBefore = rss(gw);
    const stuck = await stuckClients(gw.port, 'flood', N);
    await waitFor(`${N + 1} members of the flood room`, 10_000, async () => (await membersOf(flat, 'flood')) === N + 1);
    const timeoutsBefore = await metricValue(gw, 'roomgate_client_errors_total', { code: 'write-timeout' });

    // The flood: 16 KB frames to the room, 64 KB per 50 ms, until every stuck socket is cut.
    const floodStart = Date.now();
    let flooded = 0;
    let rssPeak = rssBefore;
    const pings: number[] = [];
    let pingFailures = 0;
    const allCut = waitFor('every stuck socket cut', 20_000, async () => {
      for (let i = 0; i < 4; i++) flooder.send({ type: 'event', data: 'x'.repeat(16_000) });
      flooded += 64_000;
      rssPeak = Math.max(rssPeak, rss(gw));
      return (await membersOf(flat, 'flood')) === 1;
    }, 50);
    // The calm room (same backend, same gateway) round-trips meanwhile.
    let cut = false;
    void allCut.finally(() => (cut = true)).catch(() => undefined);
    const calmLoop = (async () => {
      while (!cut) {
        const t0 = Date.now();
        try {
          await pingPong(calm, 5_000);
          pings.push(Date.now() - t0);
        } catch {
          pingFailures++;
        }
        await sleep(20);
      }
    })();
    await allCut;
    const cutMs = Date.now() - floodStart;
    await calmLoop;

    // Both sides: the backend lost the 50 (above), and each client socket was ended or reset.
    stuck.send('check');
    expect(await stuck.line('closed', 30_000)).toBe(`closed ${N}`);
    expect(await metricValue(gw, 'roomgate_client_errors_total', { code: 'write-timeout' })).toBe(timeoutsBefore + N);
    // The flooder and the calm client are untouched.
    await pingPong(flooder);
    await pingPong(calm);
    expect(pingFailures).toBe(0);
    // Without back-pressure the gateway would take in what the room sent each socket past the
    // stall (megabytes each, all in memory); with it, a relay buffer and the socket objects (the
    // growth measured also holds the flood's own garbage, not yet collected).
    const perSocket = Math.max(0, rssPeak - rssBefore) / N;
    expect(perSocket).toBeLessThan(flooded / 4);
    // The cut comes after the stall plus the limit: never before the limit.
    expect(cutMs).toBeGreaterThanOrEqual(WRITE_TIMEOUT);
    await Promise.all([calm.close(), flooder.close()]);

    recordChaos({
      id: 'client-never-reads',
      fault: `${N} WebSocket clients (4 KB receive buffer) that never read, in a room the backend floods`,
      promise: 'back-pressure pauses the backend per stuck socket; a write not taken within proxy.clientWriteTimeoutMs closes the tunnel, both sides; other rooms are not slowed',
      figures: {
        recoverMs: null,
        socketsDropped: N,
        requestsFailed: pingFailures,
        other: [
          `all ${N} cut ${cutMs} ms after the flood began (limit ${WRITE_TIMEOUT} ms)`,
          `gateway RSS +${(perSocket / 1024).toFixed(1)} KB per stuck socket (peak ${MB(rssPeak)})`,
          `flood ${MB(flooded)} per socket sent by the room`,
          `calm room ping p50 ${percentile(pings, 50)} ms, p99 ${percentile(pings, 99)} ms over ${pings.length}`,
        ],
      },
      file: import.meta.url,
      test: 'a client that never reads',
    });
  }, 60_000);

  it('pages: a 10 MB answer the client never reads is cut after clientWriteTimeoutMs, on the byte-level path and on node:http', async () => {
    const before = await metricValue(gw, 'roomgate_client_errors_total', { code: 'write-timeout' });
    const rssBefore = rss(gw);
    const get = async (request: string, cutsBefore: number): Promise<{ cutMs: number; received: number }> => {
      const s = net.connect(gw.port, '127.0.0.1');
      s.on('error', () => undefined);
      await withTimeout(new Promise((r) => s.once('connect', r)), 5_000, 'connect');
      s.pause();
      const t0 = Date.now();
      s.write(request);
      // The gateway counts the cut; then the client reads what the buffers held, and the end.
      await waitFor('a write-timeout', 15_000, async () => (await metricValue(gw, 'roomgate_client_errors_total', { code: 'write-timeout' })) > cutsBefore, 100);
      const cutMs = Date.now() - t0;
      let received = 0;
      s.on('data', (c: Buffer) => (received += c.length));
      await withTimeout(closedAt(s), 10_000, 'the page connection to close');
      return { cutMs, received };
    };
    const lean = await get('GET /_backend/big?kb=10240 HTTP/1.1\r\nHost: a\r\n\r\n', before);
    // A GET with a body goes to node:http (the byte-level path takes none).
    const node = await get('GET /_backend/big?kb=10240 HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx', before + 1);
    const rssAfter = rss(gw);
    for (const r of [lean, node]) {
      expect(r.received).toBeLessThan(10 * 1024 * 1024);
      expect(r.cutMs).toBeGreaterThanOrEqual(WRITE_TIMEOUT);
    }
    // The gateway serves on.
    expect((await httpRequest(gw.port, '/game/after/')).status).toBe(200);
    recordChaos({
      id: 'client-never-reads-page',
      fault: 'a page client that never reads a 10 MB answer (byte-level path and node:http)',
      promise: 'the relay waits on the client without buffering the answer; after proxy.clientWriteTimeoutMs the client and backend connections are closed',
      figures: {
        recoverMs: null,
        socketsDropped: 2,
        other: [
          `byte-level: cut ${lean.cutMs} ms after the request, ${MB(lean.received)} had reached the client`,
          `node:http: cut ${node.cutMs} ms after the request, ${MB(node.received)} had reached the client`,
          `gateway RSS ${MB(rssBefore)} before, ${MB(rssAfter)} after`,
        ],
      },
      file: import.meta.url,
      test: 'pages: a 10 MB answer the client never reads',
    });
  }, 60_000);
});

// --- 2. idle and half-open connections -------------------------------------------------------

describe('idle and half-open connections', () => {
  it('3,000 connections that send nothing are each closed at listen.headersTimeoutMs (408); pages and upgrades are served meanwhile', async () => {
    const N = 3_000;
    const rssBefore = rss(gw);
    const conns: Trickle[] = [];
    // In batches, so the accept queue (511) is not the limit being measured.
    for (let i = 0; i < N; i += 250) {
      const batch = Array.from({ length: Math.min(250, N - i) }, () => trickle(gw.port, '', () => null, 60_000));
      conns.push(...batch);
      await sleep(20);
    }
    const openedAll = Date.now();
    const allClosed = waitFor(`${N} idle connections closed`, HEADERS_TIMEOUT + 20_000, () => conns.every((c) => c.closedAt !== null), 50);
    const traffic = normalTraffic(gw, allClosed.catch(() => undefined));
    // An upgrade, and frames on it, while they are open.
    const ws = new Client(`${gw.wsUrl}/ws/live/?room=during-idle`);
    const upgradeAt = Date.now();
    await ws.join('during-idle');
    const upgradeMs = Date.now() - upgradeAt;
    await pingPong(ws);
    await sleep(300);
    const rssWithIdle = rss(gw);
    await allClosed;
    const { ms, failed } = await traffic;
    await ws.close();

    const held = conns.map((c) => (c.closedAt as number) - c.openedAt);
    expect(Math.min(...held)).toBeGreaterThanOrEqual(HEADERS_TIMEOUT - 100);
    expect(Math.max(...held)).toBeLessThan(HEADERS_TIMEOUT + SLACK);
    expect(conns.filter((c) => c.text.startsWith('HTTP/1.1 408 ')).length).toBe(N);
    expect(failed).toBe(0);
    expect(ms.length).toBeGreaterThan(0);
    const perConn = Math.max(0, rssWithIdle - rssBefore) / N;
    expect(perConn).toBeLessThan(32 * 1024);

    recordChaos({
      id: 'idle-connections',
      fault: `${N} TCP connections that connect and send nothing`,
      promise: 'each is closed with 408 at listen.headersTimeoutMs; pages and upgrades are served meanwhile',
      figures: {
        recoverMs: null,
        socketsDropped: 0,
        requestsFailed: failed,
        other: [
          `held ${Math.min(...held)}-${Math.max(...held)} ms (limit ${HEADERS_TIMEOUT} ms); all closed ${Date.now() - openedAll} ms after the last opened`,
          `gateway RSS +${(perConn / 1024).toFixed(1)} KB per idle connection`,
          `page GET during: p50 ${percentile(ms, 50)} ms, p99 ${percentile(ms, 99)} ms over ${ms.length}; an upgrade took ${upgradeMs} ms`,
        ],
      },
      file: import.meta.url,
      test: '3,000 connections that send nothing',
    });
  }, 60_000);

  it('a WebSocket client that stops sending and reading (its network vanished) is closed after proxy.websocketClientSilenceMs, though the backend keeps sending; a pinging one stays', async () => {
    const before = await metricValue(quiet, 'roomgate_client_errors_total', { code: 'websocket-silent' });
    const healthy = new Client(`${quiet.wsUrl}/ws/live/?room=alive`);
    await healthy.join('alive');
    const vanished = await rawWebSocket(quiet.port, 'gone');
    await waitFor('the vanished client mounted', 5_000, async () => (await membersOf(ticking, 'gone')) === 1);
    const lastByteAt = Date.now();
    // From here it reads and answers nothing (a peer that vanished never does), while the backend
    // ticks every 100 ms: traffic the other way keeps an "either way" idle limit from firing.
    vanished.pause();
    let healthyLoop = true;
    const pinging = (async () => {
      while (healthyLoop) {
        await pingPong(healthy, 5_000);
        await sleep(300);
      }
    })();
    await waitFor('the vanished client closed at the backend', SILENCE + 10_000, async () => (await membersOf(ticking, 'gone')) === 0, 50);
    const detectedMs = Date.now() - lastByteAt;
    // The healthy one outlives twice the limit.
    await sleep(Math.max(0, 2 * SILENCE - detectedMs));
    healthyLoop = false;
    await pinging;
    expect(await membersOf(ticking, 'alive')).toBe(1);
    await pingPong(healthy);
    expect(detectedMs).toBeGreaterThanOrEqual(SILENCE);
    expect(detectedMs).toBeLessThan(SILENCE + SLACK);
    expect(await metricValue(quiet, 'roomgate_client_errors_total', { code: 'websocket-silent' })).toBe(before + 1);
    // The client's side was closed too (it sees the end once it reads again).
    await withTimeout(closedAt(vanished), 5_000, 'the vanished client socket to close');
    await healthy.close();

    recordChaos({
      id: 'half-open-websocket',
      fault: 'a WebSocket client whose network vanished (no FIN, reads and answers nothing) while its backend keeps sending',
      promise: 'closed (both sides) after proxy.websocketClientSilenceMs without a byte from the client; clients that ping are kept',
      figures: {
        recoverMs: null,
        socketsDropped: 1,
        other: [`detected ${detectedMs} ms after its last byte (limit ${SILENCE} ms)`, 'the pinging socket in the same gateway kept'],
      },
      file: import.meta.url,
      test: 'a WebSocket client that stops sending and reading',
    });
  }, 30_000);
});

// --- 3. slowloris -----------------------------------------------------------------------------

describe('slowloris', () => {
  it('heads trickled 1 byte per second are cut at listen.headersTimeoutMs on both page paths, even one handed from one path to the other mid-head; normal requests keep succeeding', async () => {
    const N = 100;
    const oneByte = (): string => 'a';
    // The byte-level path (GET), node:http (POST: handed over at its first bytes), and a head
    // that starts on the byte-level path and is handed over after 2 s (a non-ASCII byte).
    const lean = Array.from({ length: N }, () => trickle(gw.port, 'GET /game/x/ HTTP/1.1\r\nHost: a\r\nX-Slow: ', oneByte, 1_000));
    const node = Array.from({ length: N }, () => trickle(gw.port, 'POST /game/x/ HTTP/1.1\r\nHost: a\r\nX-Slow: ', oneByte, 1_000));
    const handedOver = Array.from({ length: 10 }, () => {
      let n = 0;
      return trickle(gw.port, 'GET /game/x/ HTTP/1.1\r\nHost: a\r\nX-Slow: ', () => (++n === 2 ? '\u00e9' : 'a'), 1_000);
    });
    const all = [...lean, ...node, ...handedOver];
    const allClosed = waitFor('every slowloris connection closed', HEADERS_TIMEOUT + 20_000, () => all.every((c) => c.closedAt !== null), 50);
    const { ms, failed } = await normalTraffic(gw, allClosed.catch(() => undefined));
    await allClosed;
    const held = (cs: Trickle[]): number[] => cs.map((c) => (c.closedAt as number) - c.openedAt);
    for (const [name, cs] of [['lean', lean], ['node', node], ['handed over', handedOver]] as const) {
      expect(Math.max(...held(cs)), name).toBeLessThan(HEADERS_TIMEOUT + SLACK);
      expect(Math.min(...held(cs)), name).toBeGreaterThanOrEqual(HEADERS_TIMEOUT - 100);
      expect(cs.filter((c) => /^HTTP\/1\.1 (408|400) /.test(c.text)).length, name).toBe(cs.length);
    }
    expect(failed).toBe(0);
    recordChaos({
      id: 'slowloris-head',
      fault: `${2 * N + 10} connections trickling a request head 1 byte per second (byte-level path, node:http, and handed from one to the other mid-head)`,
      promise: 'each is cut with 408 at listen.headersTimeoutMs from its first byte, never later; normal requests are served meanwhile',
      figures: {
        recoverMs: null,
        requestsFailed: failed,
        other: [
          `held: byte-level ≤ ${Math.max(...held(lean))} ms, node:http ≤ ${Math.max(...held(node))} ms, handed over ≤ ${Math.max(...held(handedOver))} ms (limit ${HEADERS_TIMEOUT} ms)`,
          `normal GET p50 ${percentile(ms, 50)} ms, p99 ${percentile(ms, 99)} ms over ${ms.length}`,
        ],
      },
      file: import.meta.url,
      test: 'heads trickled 1 byte per second',
    });
  }, 40_000);

  it('bodies trickled 1 byte per second are cut with 408 at listen.requestTimeoutMs; normal requests keep succeeding', async () => {
    const N = 100;
    const bodies = Array.from({ length: N }, () => trickle(gw.port, 'POST /_backend/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n', () => 'x', 1_000));
    const allClosed = waitFor('every trickled body cut', REQUEST_TIMEOUT + 20_000, () => bodies.every((c) => c.closedAt !== null), 50);
    const { ms, failed } = await normalTraffic(gw, allClosed.catch(() => undefined));
    await allClosed;
    const held = bodies.map((c) => (c.closedAt as number) - c.openedAt);
    expect(Math.max(...held)).toBeLessThan(REQUEST_TIMEOUT + SLACK);
    expect(Math.min(...held)).toBeGreaterThanOrEqual(REQUEST_TIMEOUT - 100);
    expect(bodies.filter((c) => c.text.startsWith('HTTP/1.1 408 ')).length).toBe(N);
    expect(failed).toBe(0);
    recordChaos({
      id: 'slowloris-body',
      fault: `${N} POSTs trickling their body 1 byte per second (node:http)`,
      promise: 'each is cut with 408 at listen.requestTimeoutMs; normal requests are served meanwhile',
      figures: {
        recoverMs: null,
        requestsFailed: failed,
        other: [`held ${Math.min(...held)}-${Math.max(...held)} ms (limit ${REQUEST_TIMEOUT} ms)`, `normal GET p50 ${percentile(ms, 50)} ms, p99 ${percentile(ms, 99)} ms over ${ms.length}`],
      },
      file: import.meta.url,
      test: 'bodies trickled 1 byte per second',
    });
  }, 40_000);
});
