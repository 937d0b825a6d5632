// Protocol version 2's resume, end to end (docs/handoff.md, "Deliver", item 1): a real gateway (in
// process) in front of two in-process hook backends whose hello says `resume`. A client sends
// events without a pause while its room moves: its socket never closes, every event reaches an
// owner exactly once and in order (the old one before the hold, the new one after), and the
// per-socket sequence the backend acknowledges with continues on the new owner (it came in the
// export). With permessage-deflate the offer is rewritten to keep no context and every compressed
// message still decodes. A resume the new owner refuses or never answers falls back to the
// `messages` hook and the client reconnects (1012). The handshake's hostile answers:
// test/proxy/resume-handshake.test.ts.
import { readFileSync } from 'node:fs';
import type { ClientHttp2Stream } from 'node:http2';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { h2Session } from '../support/h2-session.js';
import { HandoffTestBackend, handoffPairConfig, hellosAnswered, interleaved, moveRoom } from '../support/handoff-test-backend.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { CALL_SECRET, waitFor, withTimeout } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'handoff-resume-admin-token-0123456789';
const dir = scopeTempDir('roomgate-resume-');
const running: { gw: Gateway; test: HandoffTestBackend[] }[] = [];
const sockets = new Set<WebSocket>();

afterEach(async () => {
  for (const s of sockets) s.terminate();
  sockets.clear();
  // The gateway first (it holds connections to the backends), then its backends.
  const all = running.splice(0);
  await Promise.all(all.map((r) => r.gw.stop()));
  await Promise.all(all.flatMap((r) => r.test.map((b) => b.close())));
});

/** Two in-process backends that resume, and a gateway in front that knows their hellos. */
async function resumingPair(deflate = false): Promise<{ gw: Gateway; b1: HandoffTestBackend; b2: HandoffTestBackend }> {
  const [b1, b2] = await Promise.all(['b1', 'b2'].map((id) => new HandoffTestBackend(id, [CALL_SECRET]).start()));
  for (const b of [b1!, b2!]) {
    b.resumes = true;
    b.deflate = deflate;
  }
  const gw = await startInProcessGateway(dir, b1!.url, { ...handoffPairConfig(b1!, b2!, TOKEN, CALL_SECRET), handoff: { timeoutMs: 1_500 }, log: { level: 'silent' } });
  running.push({ gw, test: [b1!, b2!] });
  await hellosAnswered(gw.adminPort, TOKEN);
  return { gw, b1: b1!, b2: b2! };
}

const move = (gw: Gateway, room: string, to: string): Promise<Record<string, any>> => moveRoom(gw.adminPort, TOKEN, room, to);

interface Ack {
  readonly type: string;
  readonly seq: number;
  readonly backend: string;
  readonly text: string;
}

/** A client sending `e1`, `e2`, ... without a pause; it records every frame it decodes and its close. */
async function sender(gw: Gateway, room: string, deflate: boolean) {
  const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/ws/?room=${room}`, { handshakeTimeout: 5_000, perMessageDeflate: deflate ? { threshold: 0 } : false });
  sockets.add(ws);
  const frames: Record<string, unknown>[] = [];
  let extensions = '';
  ws.once('upgrade', (res) => (extensions = String(res.headers['sec-websocket-extensions'] ?? '')));
  let closeCode: number | null = null;
  const closed = new Promise<number>((r) => ws.once('close', (code) => r((closeCode = code))));
  ws.on('message', (d) => frames.push(JSON.parse(String(d)) as Record<string, unknown>));
  await withTimeout(new Promise((r, j) => (ws.once('open', r), ws.once('error', j))), 5_000, 'socket open');
  const mounted = await waitFor('mounted', 5_000, () => frames.find((m) => m.type === 'mounted'));
  let sent = 0;
  let sending = true;
  const next = (): void => {
    if (!sending || ws.readyState !== WebSocket.OPEN) return;
    ws.send(`e${sent + 1}`, (err) => {
      if (err) return;
      sent++;
      setImmediate(next);
    });
  };
  next();
  return {
    ws,
    backend: String(mounted.backend),
    sent: () => sent,
    acks: () => frames.filter((f) => f.type === 'ack') as unknown as Ack[],
    frames,
    /** Sec-WebSocket-Extensions of the 101 the client got. */
    extensions: () => extensions,
    closeCode: () => closeCode,
    closed,
    stop: () => (sending = false),
  };
}

function messagesOf(b: HandoffTestBackend, room: string): string[] {
  return b.log.filter((l) => l.startsWith(`message ${room} `)).map((l) => l.slice(`message ${room} `.length));
}

async function metrics(gw: Gateway): Promise<string> {
  return (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5_000) })).text();
}

/** Moves the room while the client sends, lets it send on the new owner, then checks every event and ack. */
async function moveWhileSending(deflate: boolean): Promise<void> {
  const { gw, b1, b2 } = await resumingPair(deflate);
  const c = await sender(gw, 'res-1', deflate);
  const [from, to] = c.backend === 'b1' ? [b1, b2] : [b2, b1];
  await waitFor('events acknowledged by the first owner', 5_000, () => (c.acks().length > 50 ? true : undefined));
  const order = interleaved(from, to);
  const moved = await move(gw, 'res-1', to.id);
  expect(moved.result, JSON.stringify(moved)).toBe('moved');
  // The resume reaches the new owner only after the old one released the room: never on both.
  expect(order.indexOf(`${from.id} arrive release`)).toBeGreaterThanOrEqual(0);
  expect(order.indexOf(`${from.id} arrive release`)).toBeLessThan(order.indexOf(`${to.id} arrive resume-socket`));
  expect(moved.held).toMatchObject({ sockets: 1, resumed: 1, lostSockets: 0 });
  expect(to.resumed).toEqual(from.socketIds.get('res-1'));
  // Its record says where the time went, step by step (durations, not asserted: only that each step is there).
  expect(Object.keys(moved.steps as object).sort()).toEqual(['export', 'hello', 'hold', 'import', 'move', 'release', 'resume']);
  for (const ms of Object.values(moved.steps as Record<string, number>)) expect(ms).toBeGreaterThanOrEqual(0);
  // The client goes on sending on the same socket; the new owner acknowledges.
  await waitFor('events acknowledged by the new owner', 5_000, () => (c.acks().filter((a) => a.backend === to.id).length > 50 ? true : undefined));
  c.stop();
  await waitFor('every event acknowledged', 5_000, () => (c.acks().length === c.sent() ? true : undefined));
  expect(c.closeCode()).toBeNull();
  // Every event reached an owner exactly once, in the order sent: the old one before the hold, the new one after.
  const all = Array.from({ length: c.sent() }, (_, i) => `e${i + 1}`);
  const before = messagesOf(from, 'res-1');
  expect([...before, ...messagesOf(to, 'res-1')]).toEqual(all);
  expect(before.length).toBeGreaterThan(0);
  // The per-socket sequence went on where the old owner left it: 1..N, each ack for its event.
  expect(c.acks().map((a) => a.seq)).toEqual(all.map((_, i) => i + 1));
  expect(c.acks().map((a) => a.text)).toEqual(all);
  expect(c.acks().find((a) => a.backend === to.id)?.seq).toBe(before.length + 1);
  // No greeting on the resumed socket: one `mounted` in the whole session.
  expect(c.frames.filter((f) => f.type === 'mounted')).toHaveLength(1);
  expect(await metrics(gw)).toMatch(/roomgate_handoff_sockets_total\{result="resumed"\} 1/);
  if (deflate) {
    // The offer was rewritten: every message compressed alone, both ways.
    expect(c.ws.extensions).toBe('permessage-deflate');
    expect(c.extensions()).toMatch(/server_no_context_takeover/);
    expect(c.extensions()).toMatch(/client_no_context_takeover/);
    // The resumed socket negotiated deflate too: the new owner compressed every ack (threshold 0).
    expect(to.resumedExtensions).toEqual(['permessage-deflate']);
  }
}

describe('version 2 resume: the client socket stays open through a move', () => {
  it('a client sending without a pause: no close, every event once and in order, the sequence continued', async () => {
    await moveWhileSending(false);
  });

  it('with permessage-deflate: the offer keeps no context and every compressed message decodes', async () => {
    await moveWhileSending(true);
  });
});

describe('version 2 resume that fails: the messages way, then a reconnect', () => {
  for (const [name, answer] of [
    ['refused (403)', 403],
    ['not answered within handoff.timeoutMs', 'hang'],
  ] as const) {
    it(`a resume ${name}: the held messages go through the hook and the client gets 1012`, async () => {
      const { gw, b1, b2 } = await resumingPair();
      const c = await sender(gw, 'res-2', false);
      const [from, to] = c.backend === 'b1' ? [b1, b2] : [b2, b1];
      to.resumeAnswer = answer;
      await waitFor('events acknowledged', 5_000, () => (c.acks().length > 20 ? true : undefined));
      // The client stops once the export is asked for: sending for the whole of a hung resume
      // (handoff.timeoutMs) would pass the per-socket hold limit, which cuts the socket (1006).
      const exporting = from.arrival('export');
      const moving = move(gw, 'res-2', to.id);
      await exporting;
      c.stop();
      const moved = await moving;
      expect(moved.result, JSON.stringify(moved)).toBe('moved');
      expect(moved.held).toMatchObject({ sockets: 1, resumed: 0, lostSockets: 0 });
      expect(await withTimeout(c.closed, 5_000, 'the client socket closed')).toBe(1012);
      expect(to.resumed).toEqual([]);
      expect(to.log).toContain('arrive resume-socket');
      // Nothing lost: what the old owner took, then what the hook delivered, is every event sent.
      const hooked = to.messagesCalls.flatMap((m) => (m.body as { messages: { text: string }[] }).messages.map((x) => x.text));
      expect([...messagesOf(from, 'res-2'), ...hooked]).toEqual(Array.from({ length: c.sent() }, (_, i) => `e${i + 1}`));
      expect(await metrics(gw)).toMatch(/roomgate_handoff_sockets_total\{result="resume-failed"\} 1/);
    });
  }
});

/** A client frame (masked, as clients send them). */
function clientFrame(opcode: number, payload: Buffer): Buffer {
  const head = Buffer.from([0x80 | opcode, 0x80 | payload.length, 1, 2, 3, 4]);
  return Buffer.concat([head, Buffer.from(payload.map((b, i) => b ^ ((i & 3) + 1)))]);
}

/** The server frames in `bytes` (unmasked, lengths under 64 KiB): opcode and payload. */
function serverFrames(bytes: Buffer): { op: number; data: Buffer }[] {
  const out: { op: number; data: Buffer }[] = [];
  for (let i = 0; i + 2 <= bytes.length; ) {
    let len = (bytes[i + 1] as number) & 0x7f;
    let at = i + 2;
    if (len === 126) {
      if (at + 2 > bytes.length) break;
      len = bytes.readUInt16BE(at);
      at += 2;
    }
    if (at + len > bytes.length) break;
    out.push({ op: (bytes[i] as number) & 0x0f, data: bytes.subarray(at, at + len) });
    i = at + len;
  }
  return out;
}

describe('version 2 resume over HTTP/2 (an RFC 8441 WebSocket)', () => {
  it('an h2 stream is resumed like an HTTP/1.1 socket: the stream stays open, the sequence goes on', async () => {
    const ca = makeCa(dir, 'resume-ca');
    const leaf = makeSigned(dir, 'resume-leaf', ca, ['a.test']);
    const [b1, b2] = await Promise.all(['b1', 'b2'].map((id) => new HandoffTestBackend(id, [CALL_SECRET]).start()));
    for (const b of [b1!, b2!]) b.resumes = true;
    const gw = await startInProcessGateway(dir, b1!.url, {
      ...handoffPairConfig(b1!, b2!, TOKEN, CALL_SECRET),
      handoff: { timeoutMs: 1_500 },
      log: { level: 'silent' },
      tls: { certs: [{ cert: leaf.cert, key: leaf.key }], reloadCheckMs: 0 },
    });
    running.push({ gw, test: [b1!, b2!] });
    await hellosAnswered(gw.adminPort, TOKEN);
    const session = await h2Session(gw.port, readFileSync(ca.cert));
    try {
      const stream: ClientHttp2Stream = session.request({ ':method': 'CONNECT', ':protocol': 'websocket', ':path': '/ws/?room=h2-res', ':scheme': 'https', ':authority': 'a.test', 'sec-websocket-version': '13' }, { endStream: false });
      const data: Buffer[] = [];
      stream.on('data', (d: Buffer) => data.push(d));
      let ended = false;
      stream.once('close', () => (ended = true));
      expect(await withTimeout(new Promise<number>((r) => stream.once('response', (h) => r(Number(h[':status'])))), 5_000, 'the h2 answer')).toBe(200);
      const json = (): Record<string, unknown>[] => serverFrames(Buffer.concat(data)).filter((f) => f.op === 1).map((f) => JSON.parse(f.data.toString()) as Record<string, unknown>);
      const mounted = await waitFor('mounted', 5_000, () => json().find((m) => m.type === 'mounted'));
      const [from, to] = mounted.backend === 'b1' ? [b1!, b2!] : [b2!, b1!];
      const send = (text: string): Promise<void> => new Promise<void>((r) => stream.write(clientFrame(1, Buffer.from(text)), () => r()));
      await send('x1');
      await waitFor('x1 acknowledged', 5_000, () => json().find((m) => m.type === 'ack' && m.seq === 1));
      let letGo = (): void => undefined;
      from.behave.set('export', { until: new Promise<void>((r) => (letGo = r)) });
      const exporting = from.arrival('export');
      const moved = move(gw, 'h2-res', to.id);
      await exporting;
      await send('x2');
      letGo();
      const done = await moved;
      expect(done.held).toEqual({ sockets: 1, resumed: 1, messages: 1, lostSockets: 0 });
      await send('x3');
      await waitFor('x3 acknowledged by the new owner', 5_000, () => json().find((m) => m.type === 'ack' && m.seq === 3));
      expect(json().filter((m) => m.type === 'ack')).toEqual([
        { type: 'ack', seq: 1, backend: from.id, text: 'x1' },
        { type: 'ack', seq: 2, backend: to.id, text: 'x2' },
        { type: 'ack', seq: 3, backend: to.id, text: 'x3' },
      ]);
      // Moved back: a resumed socket is resumed again, its sequence still going on.
      const back = await move(gw, 'h2-res', from.id);
      expect(back.held).toEqual({ sockets: 1, resumed: 1, messages: 0, lostSockets: 0 });
      await send('x4');
      await waitFor('x4 acknowledged by the first owner again', 5_000, () => json().find((m) => m.type === 'ack' && m.seq === 4));
      expect(json().filter((m) => m.type === 'ack').at(-1)).toEqual({ type: 'ack', seq: 4, backend: from.id, text: 'x4' });
      // No close frame reached the client, and its stream is open.
      expect(serverFrames(Buffer.concat(data)).some((f) => f.op === 8)).toBe(false);
      expect(ended).toBe(false);
    } finally {
      session.destroy();
    }
  });
});
