// proxy.rewriteLocation on every page front: a backend's Location and Refresh naming its own
// address reach the client pointed at the public scheme and Host (the byte-level HTTP/1.1 front,
// node:http, HTTP/1.1 over TLS, HTTP/2), and unchanged with the option off (the default).
import http from 'node:http';
import https from 'node:https';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { signedServer } from '../support/certs.js';
import { h2Session } from '../support/h2-session.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';

const dir = mkdtempSync(join(tmpdir(), 'roomgate-location-'));
let backend: http.Server;
let own: string;
let ca: Buffer;
const gw: Record<'lean' | 'node' | 'off', Gateway> = {} as Record<'lean' | 'node' | 'off', Gateway>;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    req.resume();
    res.writeHead(302, { Location: `${own}/internal?x=1`, Refresh: `0; url=${own}/next`, 'Content-Location': `${own}/self`, 'Content-Length': '0' });
    res.end();
  });
  const url = await listenOnLoopback(backend);
  own = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  const cert = signedServer(dir);
  ca = cert.ca;
  const tls = { certs: [{ cert: cert.cert, key: cert.key }] };
  const base = { health: { path: null }, tls };
  [gw.lean, gw.node, gw.off] = await Promise.all([
    startInProcessGateway(dir, url, { ...base, proxy: { rewriteLocation: true, leanPages: true } }),
    startInProcessGateway(dir, url, { health: { path: null }, proxy: { rewriteLocation: true, leanPages: false } }),
    startInProcessGateway(dir, url, base),
  ]);
});

afterAll(async () => {
  await Promise.all(Object.values(gw).map((g) => g.stop()));
  await closeServer(backend);
  rmSync(dir, { recursive: true, force: true });
});

type Fields = Record<string, string | string[] | undefined>;

function h1(port: number, secure: boolean): Promise<Fields> {
  return new Promise((resolve, reject) => {
    const o = { host: '127.0.0.1', port, path: '/page?room=loc', headers: { host: 'a.test' }, agent: false as const };
    const req = secure ? https.get({ ...o, servername: 'a.test', ca }, (res) => (res.resume(), resolve(res.headers))) : http.get(o, (res) => (res.resume(), resolve(res.headers)));
    req.on('error', reject);
    req.setTimeout(5_000, () => req.destroy(new Error('timed out')));
  });
}

async function h2(port: number): Promise<Fields> {
  const s = await h2Session(port, ca);
  try {
    return await new Promise((resolve, reject) => {
      const st = s.request({ ':path': '/page?room=loc' });
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
