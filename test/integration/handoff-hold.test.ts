// Protocol version 2's hold, end to end: a real gateway (in process) in front of two demo backend
// processes whose hello says {"version": 2, "messages": true}. A client sends events without a
// pause, as a djust client clicking, while its room is moved: nothing it sent is refused
// (`room-moving`) and nothing is lost: the new owner holds every event the client wrote, the ones
// the old owner applied before the hold (carried in the export) and the ones roomgate held
// (delivered with the `messages` hook). Against backends that say version 1 nothing is held: the
// frozen owner refuses what arrives during the export, as before. The parts in process:
// test/proxy/message-hold.test.ts.
import { readFileSync } from 'node:fs';
import type { ClientHttp2Stream } from 'node:http2';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { h2Session } from '../support/h2-session.js';
import { HandoffTestBackend, handoffPairConfig, hellosAnswered, moveRoom, openMountedRoom, type MountedSocket } from '../support/handoff-test-backend.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, startBackend, stop, waitFor, withTimeout, type BackendProc } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'handoff-hold-admin-token-0123456789';
const dir = scopeTempDir('roomgate-hold-');
const running: { gw: Gateway; backends: BackendProc[]; test?: HandoffTestBackend[] }[] = [];
const sockets = new Set<WebSocket>();

afterEach(async () => {
  for (const s of sockets) s.terminate();
  sockets.clear();
  for (const r of running.splice(0)) {
    await r.gw.stop();
    await Promise.all(r.backends.map((b) => stop(b)));
    await Promise.all((r.test ?? []).map((b) => b.close()));
  }
});

/**
 * Two demo backends speaking `version` and a gateway in front; resolves once it knows their hellos.
 * Without `resume` the backends offer no socket resume: their held messages go the `messages` way.
 */
async function pair(version: 1 | 2, resume = false): Promise<{ gw: Gateway; backends: BackendProc[]; admin: (path: string, body?: unknown) => Promise<{ status: number; json: any }> }> {
  const backends = await Promise.all(['h1', 'h2'].map((id) => startBackend(id, ['--handoff-version', String(version), '--handoff-resume', resume ? 'on' : 'off'])));
  const gw = await startInProcessGateway(dir, backends[0]!.url, {
    backends: backends.map((b) => ({ id: b.id, url: b.url })),
    health: { path: null },
    admin: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
    backendCalls: { secrets: [CALL_SECRET] },
    handoff: { timeoutMs: 2_000 },
    log: { level: 'silent' },
  });
  running.push({ gw, backends });
  const admin = async (path: string, body?: unknown): Promise<{ status: number; json: any }> => {
    const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, json: await res.json() };
  };
  // The status of each backend asks its hello; a socket opened after the answer is followed.
  await waitFor('both hellos answered', 10_000, async () => {
    const list = (await admin('/backends')).json.backends as { id: string; handoffHooks?: string }[];
    return list.every((b) => b.handoffHooks === 'yes') ? true : undefined;
  }, 100);
  return { gw, backends, admin };
}

/** A client clicking without a pause: counts the events it wrote and the refusals it got. */
async function clicker(gw: Gateway, room: string): Promise<{ backend: string; sent: () => number; refused: () => number; closed: Promise<number>; stopClicking: () => void }> {
  const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/ws/live/?room=${room}`, { handshakeTimeout: 5_000, perMessageDeflate: false });
  sockets.add(ws);
  const messages: Record<string, unknown>[] = [];
  ws.on('message', (d) => messages.push(JSON.parse(String(d)) as Record<string, unknown>));
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  await withTimeout(new Promise((r, j) => (ws.once('open', r), ws.once('error', j))), 5_000, 'socket open');
  await waitFor('connect', 5_000, () => messages.find((m) => m.type === 'connect'));
  ws.send(JSON.stringify({ type: 'mount', room }));
  const mounted = await waitFor('mounted', 5_000, () => messages.find((m) => m.type === 'mounted'));
  let sent = 0;
  let clicking = true;
  const click = (): void => {
    if (!clicking || ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify({ type: 'event', data: { n: sent + 1 } }), (err) => {
      if (err) return;
      sent++;
      setImmediate(click);
    });
  };
  click();
  return {
    backend: String(mounted.backend),
    sent: () => sent,
    refused: () => messages.filter((m) => m.type === 'error' && m.error === 'room-moving').length,
    closed,
    stopClicking: () => (clicking = false),
  };
}

async function movesOn(b: BackendProc, room: string): Promise<number> {
  return ((await (await fetch(`${b.url}/_backend/moves/${room}`, { signal: AbortSignal.timeout(5_000) })).json()) as { moves: number }).moves;
}

describe('version 2: a room moved while its client clicks', () => {
  it('loses no event and refuses none: the new owner holds every event the client wrote', async () => {
    const { gw, backends, admin } = await pair(2);
    const c = await clicker(gw, 'hold-1');
    await waitFor('some events applied first', 5_000, () => (c.sent() > 50 ? true : undefined));
    const from = backends.find((b) => b.id === c.backend)!;
    const to = backends.find((b) => b.id !== c.backend)!;
    const moved = await admin('/rooms/hold-1/move', { to: to.id });
    expect(moved.status, JSON.stringify(moved.json)).toBe(200);
    expect(moved.json.handoff.result).toBe('moved');
    // The socket was held: its client messages went to the new owner, none to the frozen one.
    expect(moved.json.handoff.held).toMatchObject({ sockets: 1, lostSockets: 0 });
    expect(moved.json.handoff.held.messages).toBeGreaterThan(0);
    // The old owner's release closed it as in version 1: its close handshake passes the hold.
    expect(await withTimeout(c.closed, 5_000, 'the client socket closed')).toBe(1012);
    expect(c.refused()).toBe(0);
    // Every event the client wrote is on the new owner; the old one holds nothing of the room.
    expect(await movesOn(to, 'hold-1')).toBe(c.sent());
    expect(await movesOn(from, 'hold-1')).toBe(0);
    const metrics = await (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(metrics).toMatch(/roomgate_handoff_held_total\{result="delivered"\} 1/);
  });

  it('with resume (the demo backend on the Node kit): the socket stays open, and every event lands once on the new owner', async () => {
    const { gw, backends, admin } = await pair(2, true);
    const c = await clicker(gw, 'hold-resume');
    await waitFor('some events applied first', 5_000, () => (c.sent() > 50 ? true : undefined));
    const from = backends.find((b) => b.id === c.backend)!;
    const to = backends.find((b) => b.id !== c.backend)!;
    const moved = await admin('/rooms/hold-resume/move', { to: to.id });
    expect(moved.status, JSON.stringify(moved.json)).toBe(200);
    expect(moved.json.handoff.result).toBe('moved');
    expect(moved.json.handoff.held).toMatchObject({ sockets: 1, resumed: 1, lostSockets: 0 });
    // The client goes on clicking on the same socket, now spliced to the new owner.
    const after = c.sent();
    await waitFor('events sent after the move', 5_000, () => (c.sent() > after + 50 ? true : undefined));
    c.stopClicking();
    const open = await Promise.race([c.closed.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 200))]);
    expect(open).toBe(true);
    expect(c.refused()).toBe(0);
    await waitFor('every event the client wrote applied on the new owner', 5_000, async () => ((await movesOn(to, 'hold-resume')) === c.sent() ? true : undefined));
    expect(await movesOn(from, 'hold-resume')).toBe(0);
  });

  it('version 1 backends: nothing held; the frozen owner refuses what arrives during the export', async () => {
    const { gw, backends, admin } = await pair(1);
    const c = await clicker(gw, 'hold-2');
    await waitFor('some events applied first', 5_000, () => (c.sent() > 50 ? true : undefined));
    const to = backends.find((b) => b.id !== c.backend)!;
    const moved = await admin('/rooms/hold-2/move', { to: to.id });
    expect(moved.json.handoff.result).toBe('moved');
    expect(moved.json.handoff.held).toBeUndefined();
    await withTimeout(c.closed, 5_000, 'the client socket closed');
    c.stopClicking();
    // What reached the old owner while frozen was refused or dropped at its close: the new owner
    // has fewer events than the client wrote.
    expect(await movesOn(to, 'hold-2')).toBeLessThan(c.sent());
  });
});

/** Two in-process hook backends saying version 2, that log what arrives; a gateway in front. */
async function testPair(extra: Record<string, unknown> = {}): Promise<{ gw: Gateway; b1: HandoffTestBackend; b2: HandoffTestBackend }> {
  const [b1, b2] = await Promise.all(['b1', 'b2'].map((id) => new HandoffTestBackend(id, [CALL_SECRET]).start()));
  for (const b of [b1!, b2!]) b.version2 = true;
  const gw = await startInProcessGateway(dir, b1!.url, { ...handoffPairConfig(b1!, b2!, TOKEN, CALL_SECRET), handoff: { timeoutMs: 500 }, ...extra });
  running.push({ gw, backends: [], test: [b1!, b2!] });
  await hellosAnswered(gw.adminPort, TOKEN);
  return { gw, b1: b1!, b2: b2! };
}

const move = (gw: Gateway, room: string, to: string): Promise<Record<string, any>> => moveRoom(gw.adminPort, TOKEN, room, to);

describe('version 2 on the wire', () => {
  it('the messages call: the socket id of the handshake, the held messages in order, text and binary', async () => {
    const { gw, b1, b2 } = await testPair();
    const c = await openMountedRoom(gw.port, 'wire-1');
    sockets.add(c.ws);
    const [from, to] = c.backend === 'b1' ? [b1, b2] : [b2, b1];
    expect(from.socketIds.get('wire-1')).toHaveLength(1);
    const socketId = from.socketIds.get('wire-1')![0] as string;
    expect(socketId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // The export waits until the client has sent three messages into the hold.
    from.behave.set('export', 'hang');
    const exporting = from.arrival('export');
    const moved = move(gw, 'wire-1', to.id);
    await exporting;
    c.ws.send('one');
    c.ws.send(Buffer.from([0, 1, 2]));
    c.ws.send('three');
    // None of them reaches the frozen owner; the export then times out and rolls back (below).
    await waitFor('the export deadline', 5_000, async () => ((await moved).result === 'rolled-back' ? true : undefined));
    const out = await moved;
    expect(out.reason).toMatch(/export did not answer in time/);
    // Rolled back: after the resume, the old owner gets them, in order; none came before it.
    await waitFor('the held messages written on', 5_000, () => (from.log.filter((l) => l.startsWith('message wire-1')).length === 3 ? true : undefined));
    const log = from.log.filter((l) => l.startsWith('message') || l === 'arrive resume');
    expect(log).toEqual(['arrive resume', 'message wire-1 one', `message wire-1 ${String(Buffer.from([0, 1, 2]))}`, 'message wire-1 three']);
    // The same socket moved for real: its held messages reach the new owner in one call.
    let letGo = (): void => undefined;
    from.behave.set('export', { until: new Promise<void>((r) => (letGo = r)) });
    const exporting2 = from.arrival('export');
    const second = move(gw, 'wire-1', to.id);
    await exporting2;
    await new Promise<void>((r) => c.ws.send('four', () => r()));
    await new Promise<void>((r) => c.ws.send(Buffer.from([9]), () => r()));
    letGo();
    const done = await second;
    expect(done.result).toBe('moved');
    expect(done.held).toEqual({ sockets: 1, resumed: 0, messages: 2, lostSockets: 0 });
    expect(to.messagesCalls).toEqual([{ socket: socketId, body: { socket: socketId, messages: [{ text: 'four' }, { binary: Buffer.from([9]).toString('base64') }] } }]);
    expect(from.log.filter((l) => l.includes('four'))).toEqual([]);
  });
});

/** A mounted socket of `room`, and its room being moved: resolves once the old owner's export has arrived and waits for `letGo`. */
async function moveHeldAtExport(p: { gw: Gateway; b1: HandoffTestBackend; b2: HandoffTestBackend }, room: string): Promise<{ c: MountedSocket; from: HandoffTestBackend; to: HandoffTestBackend; letGo: () => void; moved: Promise<Record<string, any>> }> {
  const c = await openMountedRoom(p.gw.port, room);
  sockets.add(c.ws);
  const [from, to] = c.backend === 'b1' ? [p.b1, p.b2] : [p.b2, p.b1];
  let letGo = (): void => undefined;
  from.behave.set('export', { until: new Promise<void>((r) => (letGo = r)) });
  const exporting = from.arrival('export');
  const moved = move(p.gw, room, to.id);
  await exporting;
  return { c, from, to, letGo, moved };
}

describe('the hold\'s bound', () => {
  it('a socket past handoff.heldBytesPerSocket is closed with 1012 over the wire, counted and logged, and what it sent is still delivered', async () => {
    const pair = await testPair({ handoff: { timeoutMs: 2_000, heldBytesPerSocket: 1_024 } });
    const { gw } = pair;
    const { c, from, letGo, moved } = await moveHeldAtExport(pair, 'bound-1');
    // Two messages of 600 bytes: the second passes the 1 KiB bound.
    c.ws.send('a'.repeat(600));
    c.ws.send('b'.repeat(600));
    // A client that reconnects after a close (djust: any close) is told the service restarts.
    expect(await withTimeout(c.closed, 5_000, 'the client socket closed')).toBe(1012);
    const metricsText = async (): Promise<string> => (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    // Held now: both messages, frames as sent (600 bytes each and their headers).
    const heldBytes = (text: string): number => Number(/^roomgate_handoff_held_bytes (\d+)$/m.exec(text)?.[1]);
    expect(heldBytes(await metricsText())).toBeGreaterThanOrEqual(1_200);
    letGo();
    const done = await moved;
    expect(done.result).toBe('moved');
    // Nothing it sent before the close is dropped: both messages reach the new owner.
    expect(done.held).toEqual({ sockets: 1, resumed: 0, messages: 2, lostSockets: 0 });
    expect(from.log.filter((l) => l.includes('aaaa') || l.includes('bbbb'))).toEqual([]);
    const metrics = await (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(metrics).toMatch(/roomgate_handoff_held_total\{result="over-limit"\} 1/);
    expect(metrics).toMatch(/roomgate_handoff_held_messages_total\{result="delivered"\} 2/);
    // The hold is over: nothing counts as held now.
    expect(heldBytes(metrics)).toBe(0);
  });
});

describe('a new WebSocket of a room in handoff (step 8a)', () => {
  it('waits for the handoff\'s end, then opens on the room\'s new owner: the frozen one never sees it', async () => {
    const pair = await testPair({ handoff: { timeoutMs: 2_000 } });
    const { gw } = pair;
    const { from, to, letGo, moved } = await moveHeldAtExport(pair, 'wait-ws');
    const late = openMountedRoom(gw.port, 'wait-ws', (ws) => sockets.add(ws));
    const events = async (): Promise<{ waiting: number }> => ((await (await fetch(`http://127.0.0.1:${gw.adminPort}/events`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5_000) })).json()) as { handoffs: { waiting: number } }).handoffs;
    await waitFor('the handshake waiting for the handoff', 5_000, async () => ((await events()).waiting === 1 ? true : undefined), 20);
    letGo();
    expect((await moved).result).toBe('moved');
    const second = await late;
    expect(second.backend).toBe(to.id);
    expect(from.socketIds.get('wait-ws')).toHaveLength(1);
    expect((await events()).waiting).toBe(0);
  });
});

/** A client frame (masked, as clients send them). */
function clientFrame(opcode: number, payload: Buffer): Buffer {
  const head = Buffer.from([0x80 | opcode, 0x80 | payload.length, 1, 2, 3, 4]);
  return Buffer.concat([head, Buffer.from(payload.map((b, i) => b ^ ((i & 3) + 1)))]);
}

/** A room's RFC 8441 WebSocket through a TLS gateway in front of two version-2 backends, mounted; the session is the caller's to destroy. */
async function h2Room(room: string, handoff: Record<string, unknown> = {}): Promise<{ gw: Gateway; session: Awaited<ReturnType<typeof h2Session>>; stream: ClientHttp2Stream; data: Buffer[]; from: HandoffTestBackend; to: HandoffTestBackend }> {
  const ca = makeCa(dir, `${room}-ca`);
  const leaf = makeSigned(dir, `${room}-leaf`, ca, ['a.test']);
  const { gw, b1, b2 } = await testPair({ tls: { certs: [{ cert: leaf.cert, key: leaf.key }], reloadCheckMs: 0 }, handoff: { timeoutMs: 500, ...handoff } });
  const session = await h2Session(gw.port, readFileSync(ca.cert));
  const stream: ClientHttp2Stream = session.request({ ':method': 'CONNECT', ':protocol': 'websocket', ':path': `/ws/?room=${room}`, ':scheme': 'https', ':authority': 'a.test', 'sec-websocket-version': '13' }, { endStream: false });
  const data: Buffer[] = [];
  stream.on('data', (d: Buffer) => data.push(d));
  const status = await withTimeout(new Promise<number>((r) => stream.once('response', (h) => r(Number(h[':status'])))), 5_000, 'the h2 answer');
  expect(status).toBe(200);
  // The backend's first frame (unmasked, short): {"type":"mounted","backend":...}.
  const mounted = await waitFor('mounted', 5_000, () => {
    const all = Buffer.concat(data);
    return all.length > 2 && all.length >= 2 + (all[1] as number) ? (JSON.parse(all.subarray(2, 2 + (all[1] as number)).toString()) as { backend: string }) : undefined;
  });
  const [from, to] = mounted.backend === 'b1' ? [b1, b2] : [b2, b1];
  return { gw, session, stream, data, from, to };
}

describe('version 2 over HTTP/2 (an RFC 8441 WebSocket)', () => {
  it('an h2 stream is held and delivered like an HTTP/1.1 socket', async () => {
    const { gw, session, stream, from, to } = await h2Room('h2-1');
    try {
      const socketId = from.socketIds.get('h2-1')?.[0];
      expect(socketId).toMatch(/^[A-Za-z0-9_-]{22}$/);
      let letGo = (): void => undefined;
      from.behave.set('export', { until: new Promise<void>((r) => (letGo = r)) });
      const exporting = from.arrival('export');
      const moved = move(gw, 'h2-1', to.id);
      await exporting;
      await new Promise<void>((r) => stream.write(clientFrame(1, Buffer.from('over h2')), () => r()));
      await new Promise<void>((r) => stream.write(clientFrame(2, Buffer.from([7, 7])), () => r()));
      letGo();
      const done = await moved;
      expect(done.result).toBe('moved');
      expect(done.held).toEqual({ sockets: 1, resumed: 0, messages: 2, lostSockets: 0 });
      expect(to.messagesCalls).toEqual([{ socket: socketId, body: { socket: socketId, messages: [{ text: 'over h2' }, { binary: Buffer.from([7, 7]).toString('base64') }] } }]);
      expect(from.log.filter((l) => l.includes('over h2'))).toEqual([]);
    } finally {
      session.destroy();
    }
  });

  it('past the hold\'s bound an h2 stream gets the same 1012 close, and its messages are delivered', async () => {
    const { gw, session, stream, data, from, to } = await h2Room('h2-bound', { timeoutMs: 2_000, heldBytesPerSocket: 1_024 });
    try {
      let letGo = (): void => undefined;
      from.behave.set('export', { until: new Promise<void>((r) => (letGo = r)) });
      const exporting = from.arrival('export');
      const moved = move(gw, 'h2-bound', to.id);
      await exporting;
      for (let i = 0; i < 12; i++) stream.write(clientFrame(1, Buffer.from(String(i).padEnd(100, '.'))));
      // roomgate's own close frame, code 1012, after the backend's mounted frame.
      const close = Buffer.from([0x88, 12, 0x03, 0xf4]);
      await waitFor('the 1012 close on the stream', 5_000, () => (Buffer.concat(data).includes(close) ? true : undefined));
      letGo();
      const done = await moved;
      expect(done.result).toBe('moved');
      expect(done.held).toMatchObject({ sockets: 1, lostSockets: 0 });
      expect(done.held.messages).toBeGreaterThan(10);
    } finally {
      session.destroy();
    }
  });
});
