// Request bodies are read before the backend request opens (proxy.bufferBodyBytes): a client that
// trickles its body holds a gateway buffer, never a backend. A body read whole goes on with its
// Content-Length (chunked and h2 bodies included); a larger one streams and must keep moving
// (proxy.bodyIdleTimeoutMs: 408); one over proxy.maxBodyBytes gets 413. In-process gateway, an
// in-process backend that records when each request arrives.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-body-');
interface Seen {
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  body: string;
}
const seen: Seen[] = [];
let backend: http.Server;
let backendUrl: string;
let gw: Gateway;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    const s: Seen = { url: req.url ?? '', headers: req.headers, body: '' };
    seen.push(s);
    req.setEncoding('latin1');
    req.on('data', (c: string) => (s.body += c));
    req.on('end', () => res.end(`got ${s.body.length}\n`));
  });
  backendUrl = await listenOnLoopback(backend);
  gw = await startInProcessGateway(dir, backendUrl, { health: { path: null }, proxy: { bufferBodyBytes: 1_000, maxBodyBytes: 5_000, bodyIdleTimeoutMs: 300 } });
});

afterAll(async () => {
  await gw?.stop();
  await closeServer(backend);
});

/** A client connection whose bytes the test writes when it likes; `answer` resolves with the first status and the text. */
function client(): { socket: net.Socket; answer: Promise<{ status: number; text: string }> } {
  const socket = net.connect(gw.port, '127.0.0.1');
  let text = '';
  socket.setEncoding('latin1');
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer: ${JSON.stringify(text)}`)), 5_000);
    socket.on('data', (c: string) => {
      text += c;
      const m = /^HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n/.exec(text);
      if (m && (text.includes('got ') || text.includes('request id'))) {
        clearTimeout(t);
        resolve({ status: Number(m[1]), text });
      }
    });
    socket.on('error', () => undefined);
  });
  return { socket, answer };
}

function get(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: gw.port, path, agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

describe('request bodies', () => {
  it('a body that trickles in opens no backend request until it is whole; it goes on with its length', async () => {
    seen.length = 0;
    const c = client();
    c.socket.write('POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\nfirst ten ');
    // Another request through the same gateway, answered meanwhile: the slow one has not reached the backend.
    expect(await get('/meanwhile')).toBe(200);
    expect(seen.map((s) => s.url)).toEqual(['/meanwhile']);
    c.socket.write('bytes now');
    expect(seen.map((s) => s.url)).toEqual(['/meanwhile']);
    c.socket.write('!');
    const a = await c.answer;
    expect(a.status).toBe(200);
    const slow = seen.find((s) => s.url === '/slow');
    expect(slow?.body).toBe('first ten bytes now!');
    expect(slow?.headers['content-length']).toBe('20');
    c.socket.destroy();
  });

  it('a chunked body that fits the buffer goes on with a Content-Length', async () => {
    seen.length = 0;
    const c = client();
    c.socket.write('POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n');
    expect((await c.answer).status).toBe(200);
    expect(seen[0]).toMatchObject({ url: '/chunked', body: 'hello world', headers: { 'content-length': '11' } });
    expect(seen[0]?.headers['transfer-encoding']).toBeUndefined();
    c.socket.destroy();
  });

  it('a body larger than the buffer streams after what was read, chunked when it came chunked', async () => {
    seen.length = 0;
    const c = client();
    const big = 'x'.repeat(3_000);
    c.socket.write(`POST /big HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n${(1_500).toString(16)}\r\n${big.slice(0, 1_500)}\r\n`);
    c.socket.write(`${(1_500).toString(16)}\r\n${big.slice(1_500)}\r\n0\r\n\r\n`);
    expect((await c.answer).status).toBe(200);
    expect(seen[0]?.body).toBe(big);
    expect(seen[0]?.headers['transfer-encoding']).toBe('chunked');
    c.socket.destroy();
  });

  it('a declared body over maxBodyBytes: 413 at once and the connection ends (the unread body is never parsed), nothing reaches the backend', async () => {
    seen.length = 0;
    const c = client();
    c.socket.write('POST /huge HTTP/1.1\r\nHost: a\r\nContent-Length: 6000\r\n\r\nabc');
    const a = await c.answer;
    expect(a.status).toBe(413);
    expect(a.text).toContain('the request body is too large');
    expect(a.text).toMatch(/\r\nConnection: close\r\n/i);
    const closed = await new Promise<string>((resolve) => {
      let more = '';
      c.socket.on('data', (d: string) => (more += d));
      c.socket.once('close', () => resolve(more));
    });
    // One answer only: no second status line (a 408 for the body that never came) after it.
    expect(closed).not.toMatch(/HTTP\/1\.1 \d{3}/);
    expect(seen).toEqual([]);
  });

  it('a chunked body over maxBodyBytes is refused while it is read, even when the buffer is larger', async () => {
    const small = await startInProcessGateway(dir, backendUrl, { health: { path: null }, proxy: { bufferBodyBytes: 65_536, maxBodyBytes: 100 } });
    try {
      seen.length = 0;
      const s = net.connect(small.port, '127.0.0.1');
      const text = await new Promise<string>((resolve, reject) => {
        let t = '';
        const timer = setTimeout(() => reject(new Error(`no answer: ${t}`)), 5_000);
        s.setEncoding('latin1');
        s.on('data', (d: string) => {
          t += d;
          if (t.includes('request id')) {
            clearTimeout(timer);
            resolve(t);
          }
        });
        s.write(`POST /chunky HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n${(500).toString(16)}\r\n${'c'.repeat(500)}\r\n0\r\n\r\n`);
      });
      expect(text).toMatch(/^HTTP\/1\.1 413/);
      expect(seen).toEqual([]);
      s.destroy();
    } finally {
      await small.stop();
    }
  });

  it('a body read whole is sent again to the next backend when the first refuses the connection', async () => {
    const closed = http.createServer();
    const deadUrl = await listenOnLoopback(closed);
    await closeServer(closed);
    const two = await startInProcessGateway(dir, backendUrl, {
      // No health checks meanwhile: the dead backend is found by a request.
      health: { path: null, intervalMs: 600_000 },
      backends: [
        { id: 'dead', url: deadUrl },
        { id: 'live', url: backendUrl },
      ],
    });
    try {
      const refused = async (): Promise<number> => ((await two.metrics.proxyErrors.get()).values.find((v) => v.labels.backend === 'dead' && v.labels.kind === 'refused')?.value ?? 0);
      // Rooms until one was placed on the dead backend: its POST must still be answered by the live one.
      for (let i = 0; i < 40 && (await refused()) === 0; i++) {
        seen.length = 0;
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.request({ host: '127.0.0.1', port: two.port, method: 'POST', path: `/game/retry-${i}/`, agent: false, headers: { 'Transfer-Encoding': 'chunked' }, timeout: 5_000 }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', reject);
          req.end('sent twice if need be');
        });
        expect(status, `room retry-${i}`).toBe(200);
        expect(seen.at(-1)?.body).toBe('sent twice if need be');
      }
      expect(await refused()).toBeGreaterThan(0);
    } finally {
      await two.stop();
    }
  });

  it('a chunked body that passes maxBodyBytes while streaming: 413, the backend request given up', async () => {
    seen.length = 0;
    const c = client();
    c.socket.write(`POST /growing HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n`);
    for (let i = 0; i < 6; i++) c.socket.write(`3e8\r\n${'y'.repeat(1_000)}\r\n`);
    const a = await c.answer;
    expect(a.status).toBe(413);
    c.socket.destroy();
  });

  it('a streamed body that stops moving: 408 after bodyIdleTimeoutMs, the backend request given up', async () => {
    seen.length = 0;
    const c = client();
    c.socket.write(`POST /stalled HTTP/1.1\r\nHost: a\r\nContent-Length: 4000\r\n\r\n${'z'.repeat(1_500)}`);
    const a = await c.answer;
    expect(a.status).toBe(408);
    expect(a.text).toContain('the request body stopped arriving');
    c.socket.destroy();
  });
});
