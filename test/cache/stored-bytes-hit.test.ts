// A hit on the byte-level front is written from the answer's stored bytes (src/cache/wire-answer.ts:
// the head made once when stored, then this request's fields). It must be the very bytes the
// field-by-field writer (start/write/end, which misses and ranges still use) gives the same request:
// each case asks a real gateway (in this process: the cache's clock held, and the stored-bytes
// writer taken away for the second asking) over a raw socket, plain and TLS, and compares the two
// answers byte for byte, only the gateway's own Date value and the room cookie's signature blanked.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { SocketAnswer } from '../../src/proxy/cache-answers.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';

const T0 = 1_800_000_000_000;
const clock = { t: T0 };
const BODY = Buffer.from(`<!doctype html><title>page</title>${'x'.repeat(10 * 1024)}\u00e9\n`, 'latin1');
/** The ETag the backend gives /revalidated: a 304 to a request that has it. */
let version = '"v1"';
let backend: http.Server;
let dir: string;
let plain: Gateway;
let tls: Gateway;
let ca: string;

function page(req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = (req.url ?? '/').split('?')[0];
  // A backend without a Date of its own: the gateway adds one to each hit (/dated has its own).
  res.sendDate = false;
  switch (url) {
    case '/dated': // the backend's own Date and HSTS: the hit adds neither
      res.writeHead(200, { Date: 'Tue, 01 Jan 2030 00:00:00 GMT', 'Strict-Transport-Security': 'max-age=5', 'Cache-Control': 'max-age=60', 'Content-Length': BODY.length });
      return void res.end(BODY);
    case '/missing':
      res.writeHead(404, 'Nowhere To Be Found', { 'Cache-Control': 'max-age=60', 'Content-Type': 'text/plain' });
      return void res.end('no such page\n');
    case '/empty':
      res.writeHead(200, { 'Cache-Control': 'max-age=60', 'Content-Length': 0 });
      return void res.end();
    case '/revalidated':
      if (req.headers['if-none-match'] === version) {
        // The 304's fields replace the stored ones: the stored head must be made again.
        res.writeHead(304, { ETag: version, 'Cache-Control': 'max-age=30', 'X-Refreshed': 'yes' });
        return void res.end();
      }
      res.writeHead(200, { ETag: version, 'Cache-Control': 'max-age=10', 'Content-Type': 'text/html' });
      return void res.end(BODY);
    default:
      // Several lines of one name, a Vary, mixed spelling: all kept as the backend sent them.
      res.writeHead(200, ['Content-Type', 'text/html; charset=utf-8', 'cache-control', 'max-age=60', 'X-Multi', 'a', 'X-Multi', 'b', 'Vary', 'Accept-Language', 'ETag', '"p1"']);
      return void res.end(BODY);
  }
}

beforeAll(async () => {
  backend = http.createServer(page);
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  dir = mkdtempSync(join(tmpdir(), 'roomgate-stored-bytes-'));
  const caFiles = makeCa(dir, 'ca');
  ca = caFiles.cert;
  const cert = makeSigned(dir, 'server', caFiles, ['127.0.0.1']);
  const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  const cache = { paths: ['/'], graceMs: 0 };
  plain = await startInProcessGateway(dir, url, { cache }, { cacheClock: () => clock.t });
  tls = await startInProcessGateway(dir, url, { cache, tls: { certs: [cert], hstsMaxAgeS: 60, reloadCheckMs: 0 } }, { cacheClock: () => clock.t });
}, 30_000);

beforeEach(() => {
  clock.t = T0;
});

afterAll(async () => {
  await Promise.all([plain?.stop(), tls?.stop()]);
  backend.closeAllConnections();
  await new Promise<void>((r) => backend.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

/** One request on a new connection (TLS for the TLS gateway); the answer's bytes once its head and body are in. */
function exchange(g: Gateway, request: string): Promise<Buffer> {
  const overTls = g === tls;
  return new Promise((resolve, reject) => {
    const s: net.Socket = overTls ? tlsConnect({ host: '127.0.0.1', port: g.port, ca: [readCa()], ALPNProtocols: ['http/1.1'] }) : net.connect(g.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no whole answer within 5 s to ${request.split('\r\n')[0]}`));
    }, 5_000);
    const done = (b: Buffer): void => {
      clearTimeout(timer);
      s.destroy();
      resolve(b);
    };
    s.once(overTls ? 'secureConnect' : 'connect', () => s.write(request));
    s.on('data', (c: Buffer) => {
      chunks.push(c);
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = all.subarray(0, end).toString('latin1');
      const length = request.startsWith('HEAD ') ? 0 : Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (all.length >= end + 4 + length) done(all);
    });
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

let caText: string | undefined;
const readCa = (): string => (caText ??= readFileSync(ca, 'utf8'));

const req = (method: string, path: string, more = ''): string => `${method} ${path} HTTP/1.1\r\nHost: example.test\r\nAccept-Language: fr\r\n${more}\r\n`;

/** The gateway's own Date (any value) and the room cookie's signed value are blanked; nothing else. */
function blank(b: Buffer, ownDate: boolean): string {
  let text = b.toString('latin1');
  if (ownDate) text = text.replace(/\r\nDate: [^\r]+\r\n/, '\r\nDate: (now)\r\n');
  return text.replace(/(\r\nSet-Cookie: roomgate_room=)[^;\r]+/, '$1(signed)');
}

/** The hit as the stored bytes give it, and the same request through the field-by-field writer. */
async function bothWays(g: Gateway, request: string): Promise<{ hit: Buffer; previous: Buffer }> {
  const proto = SocketAnswer.prototype as { whole?: SocketAnswer['whole'] };
  const whole = Object.getOwnPropertyDescriptor(SocketAnswer.prototype, 'whole') as PropertyDescriptor;
  const original = whole.value as SocketAnswer['whole'];
  let used = 0;
  try {
    // The first asking goes through the stored bytes (counted: the hit must take that way)...
    proto.whole = function (this: SocketAnswer, ...args: Parameters<SocketAnswer['whole']>) {
      used++;
      return original.apply(this, args);
    };
    const hit = await exchange(g, request);
    expect(used).toBe(1);
    // ...the second, without them, field by field.
    delete proto.whole;
    return { hit, previous: await exchange(g, request) };
  } finally {
    Object.defineProperty(SocketAnswer.prototype, 'whole', whole);
  }
}

const split = (b: Buffer): { head: Buffer; body: Buffer } => {
  const end = b.indexOf('\r\n\r\n') + 4;
  return { head: b.subarray(0, end), body: b.subarray(end) };
};

/** The head of the hit (blanked), once it and the body are found the same both ways. */
async function expectSame(g: Gateway, request: string, ownDate = true): Promise<{ head: string; body: Buffer }> {
  const { hit, previous } = await bothWays(g, request);
  const a = split(hit);
  const b = split(previous);
  const head = blank(a.head, ownDate);
  expect(head).toMatch(/\r\nCache-Status: roomgate; hit; ttl=\d+\r\n/);
  expect(head).toBe(blank(b.head, ownDate));
  expect(a.body.equals(b.body)).toBe(true);
  if (ownDate) expect(Date.parse(/\r\nDate: ([^\r]+)\r\n/.exec(a.head.toString('latin1'))?.[1] ?? '')).not.toBeNaN();
  return { head, body: a.body };
}

describe('a hit written from its stored bytes is the answer the field-by-field writer gives', () => {
  it('GET on a keep-alive connection: status line, every stored field, Age, Cache-Status, Date, framing, Keep-Alive, body', async () => {
    await exchange(plain, req('GET', '/page')); // stored
    clock.t = T0 + 7_500;
    const { head, body } = await expectSame(plain, req('GET', '/page'));
    expect(head).toMatch(
      new RegExp(
        '^HTTP/1\\.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\ncache-control: max-age=60\r\nX-Multi: a\r\nX-Multi: b\r\nVary: Accept-Language\r\nETag: "p1"\r\n' +
          `Age: 7\r\nCache-Status: roomgate; hit; ttl=52\r\nDate: \\(now\\)\r\nContent-Length: ${BODY.length}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=\\d+\r\n\r\n$`,
      ),
    );
    expect(body.equals(BODY)).toBe(true);
  });

  it('HEAD: the same head, Content-Length of the GET, no body; Connection: close; a room cookie due', async () => {
    await exchange(plain, req('GET', '/page?room=7'));
    clock.t = T0 + 1_000;
    const { head, body } = await expectSame(plain, req('HEAD', '/page?room=7', 'Connection: close\r\n'));
    expect(body.length).toBe(0);
    expect(head).toMatch(/\r\nCache-Status: roomgate; hit; ttl=\d+\r\nSet-Cookie: roomgate_room=\(signed\);[^\r]*\r\nDate: \(now\)\r\nContent-Length: \d+\r\nConnection: close\r\n\r\n$/);
  });

  it("a conditional request gets the whole 200 (If-None-Match is not evaluated on a hit); another status keeps its reason phrase", async () => {
    await exchange(plain, req('GET', '/missing'));
    await expectSame(plain, req('GET', '/page', 'If-None-Match: "p1"\r\n'));
    const { head, body } = await expectSame(plain, req('GET', '/missing', 'If-None-Match: "p1"\r\n'));
    expect(head).toMatch(/^HTTP\/1\.1 404 Nowhere To Be Found\r\n/);
    expect(body.toString()).toBe('no such page\n');
  });

  it('an empty body: Content-Length: 0 and nothing after the head', async () => {
    await exchange(plain, req('GET', '/empty'));
    expect((await expectSame(plain, req('GET', '/empty'))).head).toMatch(/\r\nContent-Length: 0\r\nConnection: keep-alive\r\nKeep-Alive: timeout=\d+\r\n\r\n$/);
  });

  it('after a 304 refresh the stored head is made again with the fields the 304 brought', async () => {
    await exchange(plain, req('GET', '/revalidated'));
    clock.t = T0 + 10_000; // past max-age=10, no grace: a conditional fetch, answered 304
    expect((await exchange(plain, req('GET', '/revalidated'))).toString('latin1')).toContain('\r\nCache-Status: roomgate; fwd=stale; fwd-status=304\r\n');
    clock.t = T0 + 12_000;
    const { head } = await expectSame(plain, req('GET', '/revalidated'));
    expect(head).toContain('\r\nCache-Control: max-age=30\r\nX-Refreshed: yes\r\nAge: 2\r\nCache-Status: roomgate; hit; ttl=28\r\n');
  });

  it("TLS: the gateway's HSTS is added after the request's fields; a backend's own Date and HSTS are kept and not added", async () => {
    await exchange(tls, req('GET', '/page'));
    await exchange(tls, req('GET', '/dated'));
    clock.t = T0 + 3_000;
    expect((await expectSame(tls, req('GET', '/page'))).head).toContain('\r\nCache-Status: roomgate; hit; ttl=57\r\nStrict-Transport-Security: max-age=60\r\nDate: (now)\r\n');
    const dated = (await expectSame(tls, req('GET', '/dated'), false)).head;
    expect(dated).toContain('\r\nDate: Tue, 01 Jan 2030 00:00:00 GMT\r\nStrict-Transport-Security: max-age=5\r\n');
    expect(dated.match(/Strict-Transport-Security|\r\nDate: /gi)).toHaveLength(2);
  });

  it('a Range still gets its 206 (the field-by-field writer), not the stored whole', async () => {
    await exchange(plain, req('GET', '/page'));
    const { head, body } = split(await exchange(plain, req('GET', '/page', 'Range: bytes=0-9\r\n')));
    expect(head.toString('latin1')).toMatch(/^HTTP\/1\.1 206 Partial Content\r\n[^]*\r\nContent-Range: bytes 0-9\/\d+\r\n/);
    expect(body.toString('latin1')).toBe('<!doctype ');
  });
});
