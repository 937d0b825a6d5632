// WebSocket handshakes on the byte-level front (UpgradeProxy.handleLean, through
// RequestPipeline.leanUpgrade): the same handshake sent to a gateway whose byte-level front takes
// it and to one where node:http parses every request (proxy.leanPages off) gives the same bytes
// to the client, the same handshake to the backend, the same metrics and the same log line; and
// the byte-level front really took it (no hand-over to node:http). In process: two gateways in
// front of one raw backend that answers 101 and then echoes the tunnel.
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-lean-upgrade-');
const ANSWER_101 = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';
const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const handshake = (target: string, extra = ''): string =>
  `GET ${target} HTTP/1.1\r\nHost: game.example\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`;

/** Every head the backend read, as bytes (latin1). */
const heads: string[] = [];
const backend = net.createServer((socket) => {
  let buf = '';
  const onData = (chunk: Buffer): void => {
    buf += chunk.toString('latin1');
    const end = buf.indexOf('\r\n\r\n');
    if (end === -1) return;
    socket.off('data', onData);
    const head = buf.slice(0, end + 4);
    heads.push(head);
    if (!/^upgrade: websocket$/im.test(head)) return void socket.end('HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\npage');
    socket.write(ANSWER_101);
    // The tunnel: everything after the head comes back.
    const rest = buf.slice(end + 4);
    if (rest !== '') socket.write(rest, 'latin1');
    socket.pipe(socket);
  };
  socket.on('data', onData);
  socket.on('error', () => socket.destroy());
});

interface Run {
  readonly gw: Gateway;
  readonly logs: Record<string, unknown>[];
}
let lean: Run;
let node: Run;

async function start(leanPages: boolean): Promise<Run> {
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  const gw = await startInProcessGateway(dir, url, { health: { path: null }, proxy: { leanPages, websocketPaths: ['/ws/'] } }, { logger });
  return { gw, logs };
}

beforeAll(async () => {
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  [lean, node] = await Promise.all([start(true), start(false)]);
});

afterAll(async () => {
  await Promise.all([lean?.gw.stop(), node?.gw.stop()]);
  await new Promise<void>((resolve) => backend.close(() => resolve()));
});

/** Sends `writes` on one connection and reads until `done(text so far)` or the gateway closes. */
function exchange(port: number, writes: string[], done: (read: string) => boolean): Promise<{ read: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let read = '';
    let closed = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`timeout; read so far: ${JSON.stringify(read)}`));
    }, 5_000);
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ read, closed });
    };
    socket.on('connect', () => {
      for (const w of writes) socket.write(w, 'latin1');
    });
    socket.on('data', (chunk: Buffer) => {
      read += chunk.toString('latin1');
      if (done(read)) finish();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      finish();
    });
  });
}

/** The backend head of the last handshake, without what differs per gateway or per request. */
function lastHead(): string {
  return (heads.at(-1) ?? '').replace(/^(x-request-id|x-roomgate-epoch): .*\r\n/gim, '');
}

async function upgrades(run: Run): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await run.gw.metrics.upgrades.get()).values) out[`${v.labels.backend}/${v.labels.result}`] = v.value;
  return out;
}

async function handOvers(run: Run): Promise<number> {
  return (await run.gw.metrics.leanHandOvers.get()).values.reduce((n, v) => n + v.value, 0);
}

/** The 'upgrade' log lines and the refusal lines, without what differs per gateway or per run. */
function logLines(run: Run): unknown[] {
  return run.logs
    .filter((l) => l.msg === 'upgrade' || (typeof l.msg === 'string' && l.msg.includes('refus')))
    .map(({ time: _t, pid: _p, ms: _ms, requestId: _r, ...rest }) => rest);
}

describe('a WebSocket handshake on the byte-level front', () => {
  it('opens the same tunnel as node:http: client bytes, backend handshake, frames behind the head both ways', async () => {
    const frame = '\x81\x85\x00\x00\x00\x00hello';
    const seen: { read: string; head: string }[] = [];
    for (const run of [lean, node]) {
      const r = await exchange(run.gw.port, [handshake('/ws/live/?room=42', 'Cookie: a=1\r\nX-Extra:  kept  \r\n') + frame], (t) => t.endsWith(frame));
      seen.push({ read: r.read, head: lastHead() });
    }
    expect(seen[0]?.read).toBe(ANSWER_101 + frame);
    expect(seen[0]).toEqual(seen[1]);
    expect(seen[0]?.head).toMatch(/^GET \/ws\/live\/\?room=42 HTTP\/1\.1\r\n/);
    expect(seen[0]?.head).toMatch(/\r\nX-Extra: kept\r\n/);
  });

  it('strips a per-tab prefix and sends frames that come after the 101 (the socket is the tunnel now)', async () => {
    const seen: { read: string; head: string }[] = [];
    for (const run of [lean, node]) {
      const socket = net.connect(run.gw.port, '127.0.0.1');
      const read = await new Promise<string>((resolve, reject) => {
        let text = '';
        const timer = setTimeout(() => reject(new Error(`timeout: ${JSON.stringify(text)}`)), 5_000);
        socket.on('error', reject);
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1');
          if (text === ANSWER_101) socket.write('after');
          if (text.endsWith('after')) {
            clearTimeout(timer);
            resolve(text);
          }
        });
        socket.write(handshake('/r/7/ws/live/'));
      });
      socket.destroy();
      seen.push({ read, head: lastHead() });
    }
    expect(seen[0]?.read).toBe(`${ANSWER_101}after`);
    expect(seen[0]?.head).toMatch(/^GET \/ws\/live\/ HTTP\/1\.1\r\n/);
    expect(seen[0]).toEqual(seen[1]);
  });

  it('takes a handshake that follows a page on the same keep-alive connection', async () => {
    const page = 'GET /page HTTP/1.1\r\nHost: game.example\r\n\r\n';
    for (const run of [lean, node]) {
      const both = await exchange(run.gw.port, [page + handshake('/ws/x')], (t) => t.endsWith(ANSWER_101));
      expect(both.read).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\n\r\npageHTTP\/1\.1 101 /);
    }
  });

  const closed = (): boolean => false;
  const opened = (t: string): boolean => t.endsWith(ANSWER_101);
  it.each([
    ['outside proxy.websocketPaths', handshake('/admin/'), closed],
    ['a bad room cookie (no room: placed anyway)', handshake('/ws/live/', 'Cookie: roomgate_room=x.forged\r\n'), opened],
    ['dot segments out of the WebSocket paths', handshake('/ws/../admin/'), closed],
  ])('gives the same answer as node:http for %s', async (_why, text, done) => {
    const answers: string[] = [];
    for (const run of [lean, node]) {
      const r = await exchange(run.gw.port, [text], done);
      answers.push(r.read.replace(/(request id|X-Request-Id:) ?[\w-]+/gi, '$1 ID'));
    }
    expect(answers[0]).toEqual(answers[1]);
  });

  it('counts and logs as node:http does, and never handed a handshake of the subset to node:http', async () => {
    expect(await upgrades(lean)).toEqual(await upgrades(node));
    expect((await upgrades(lean))['b1/101']).toBe(4);
    expect(logLines(lean)).toEqual(logLines(node));
    expect(logLines(lean).filter((l) => (l as { msg: string }).msg === 'upgrade').length).toBe(4);
    // The dot-segment target is not canonical: node:http's head check rewrites it (one hand-over).
    expect(await handOvers(lean)).toBe(1);
  });
});
