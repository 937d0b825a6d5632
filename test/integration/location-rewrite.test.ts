// proxy.rewriteLocation on every page front: a backend's Location and Refresh naming its own
// address reach the client pointed at the public scheme and Host (the byte-level HTTP/1.1 front,
// node:http, HTTP/1.1 over TLS, HTTP/2), and unchanged with the option off (the default). An
// answer the page cache stores gets the same rewrite when it is fetched, so a hit carries the
// Location the miss did (the key holds the scheme and Host the rewrite points at).
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { signedServer } from '../support/certs.js';
import { h2Session } from '../support/h2-session.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-location-');
let backend: http.Server;
let own: string;
let ca: Buffer;
const gw: Record<'lean' | 'node' | 'off' | 'cached' | 'cachedOff', Gateway> = {} as Record<'lean' | 'node' | 'off' | 'cached' | 'cachedOff', Gateway>;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    req.resume();
    // Under /cached/: a storable 200 (the cache keeps it a minute).
    if (req.url?.startsWith('/cached/') === true) {
      res.writeHead(200, { Location: `${own}/stored`, 'Cache-Control': 'public, max-age=60', 'Content-Length': '2' });
      return void res.end('ok');
    }
    res.writeHead(302, { Location: `${own}/internal?x=1`, Refresh: `0; url=${own}/next`, 'Content-Location': `${own}/self`, 'Content-Length': '0' });
    res.end();
  });
  const url = await listenOnLoopback(backend);
  own = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  const cert = signedServer(dir);
  ca = cert.ca;
  const tls = { certs: [{ cert: cert.cert, key: cert.key }] };
  const base = { health: { path: null }, tls };
  const cache = { paths: ['/cached/'] };
  [gw.lean, gw.node, gw.off, gw.cached, gw.cachedOff] = await Promise.all([
    startInProcessGateway(dir, url, { ...base, proxy: { rewriteLocation: true, leanPages: true } }),
    startInProcessGateway(dir, url, { health: { path: null }, proxy: { rewriteLocation: true, leanPages: false } }),
    startInProcessGateway(dir, url, base),
    startInProcessGateway(dir, url, { ...base, cache, proxy: { rewriteLocation: true } }),
    startInProcessGateway(dir, url, { ...base, cache }),
  ]);
});

afterAll(async () => {
  await Promise.all(Object.values(gw).map((g) => g.stop()));
  await closeServer(backend);
});

type Fields = Record<string, string | string[] | undefined>;

function h1(port: number, secure: boolean, path = '/page?room=loc'): Promise<Fields> {
  return new Promise((resolve, reject) => {
    const o = { host: '127.0.0.1', port, path, headers: { host: 'a.test' }, agent: false as const };
    const req = secure ? https.get({ ...o, servername: 'a.test', ca }, (res) => (res.resume(), resolve(res.headers))) : http.get(o, (res) => (res.resume(), resolve(res.headers)));
    req.on('error', reject);
    req.setTimeout(5_000, () => req.destroy(new Error('timed out')));
  });
}

async function h2(port: number, path = '/page?room=loc'): Promise<Fields> {
  const s = await h2Session(port, ca);
  try {
    return await new Promise((resolve, reject) => {
      const st = s.request({ ':path': path });
      st.once('response', (h) => (st.resume(), resolve(h)));
      st.once('error', reject);
    });
  } finally {
    s.destroy();
  }
}

describe('proxy.rewriteLocation', () => {
  it.each([
    ['h1-lean (byte-level)', () => h1(gw.lean.port, true), () => 'https://a.test'],
    ['h1-node (node:http)', () => h1(gw.node.port, false), () => 'http://a.test'],
    // node:http2 sends the port in :authority.
    ['h2', () => h2(gw.lean.port), () => `https://a.test:${gw.lean.port}`],
  ])('on, %s: Location and Refresh point at the public scheme and Host, the path kept; Content-Location unchanged', async (_front, ask, origin) => {
    const h = await ask();
    expect(h.location).toBe(`${origin()}/internal?x=1`);
    expect(h.refresh).toBe(`0; url=${origin()}/next`);
    expect(h['content-location']).toBe(`${own}/self`);
  });

  it.each([
    ['h1-lean', () => h1(gw.off.port, true)],
    ['h2', () => h2(gw.off.port)],
  ])('off (the default), %s: the backend own address reaches the client unchanged', async (_front, ask) => {
    const h = await ask();
    expect(h.location).toBe(`${own}/internal?x=1`);
    expect(h.refresh).toBe(`0; url=${own}/next`);
  });
});

describe('proxy.rewriteLocation and the page cache', () => {
  // Each front asks its own path twice: the first fetches and stores, the second is a hit.
  it.each([
    ['h1 byte-level (hit from the stored wire head)', (p: string) => h1(gw.cached.port, true, p), () => 'https://a.test', '/cached/lean'],
    ['h2', (p: string) => h2(gw.cached.port, p), () => `https://a.test:${gw.cached.port}`, '/cached/h2'],
  ])('on, %s: the miss and the hit carry the same rewritten Location', async (_front, ask, origin, path) => {
    const miss = await ask(path);
    const hit = await ask(path);
    expect(String(miss['cache-status'])).toMatch(/fwd=uri-miss.*stored/);
    expect(String(hit['cache-status'])).toMatch(/; hit/);
    expect(miss.location).toBe(`${origin()}/stored`);
    expect(hit.location).toBe(`${origin()}/stored`);
  });

  it('off: the stored answer keeps the backend own address, miss and hit alike', async () => {
    const miss = await h1(gw.cachedOff.port, true, '/cached/off');
    const hit = await h1(gw.cachedOff.port, true, '/cached/off');
    expect(String(hit['cache-status'])).toMatch(/; hit/);
    expect([miss.location, hit.location]).toEqual([`${own}/stored`, `${own}/stored`]);
  });
});
