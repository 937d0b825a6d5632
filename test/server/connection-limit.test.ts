// Connection limits (issue 26 item 5): how the public limit is derived from the descriptor limit,
// and, on real gateways in this process with a small configured limit, that connections over it
// are closed at once and counted while the admin port's /healthz and /readyz still answer, on
// the plain and the TLS port; the per-address cap; the admin port's own limit; an accept error
// does not end the process.
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { FALLBACK_DESCRIPTOR_LIMIT, descriptorLimit, guardListener, limitConnections, publicLimits } from '../../src/server/connection-limit.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { waitFor } from '../support/processes.js';

const PROC_LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                1048576              files
Max locked memory         8388608              8388608              bytes
`;

describe('the public limit derived from the descriptor limit', () => {
  it('reads the soft "Max open files" limit of /proc/self/limits; unlimited, unreadable or garbled fall back', () => {
    expect(descriptorLimit(() => PROC_LIMITS)).toBe(20_000);
    expect(descriptorLimit(() => PROC_LIMITS.replace('20000 ', 'unlimited '))).toBe(1_048_576);
    expect(
      descriptorLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBe(FALLBACK_DESCRIPTOR_LIMIT);
    expect(descriptorLimit(() => 'Max open files  lots  x files')).toBe(FALLBACK_DESCRIPTOR_LIMIT);
    // This machine's (Linux): a positive number.
    expect(descriptorLimit()).toBeGreaterThan(0);
  });

  it('keeps max(256, limit/8) (at most half) in reserve and halves the rest (a backend connection each); configured values win', () => {
    const auto = { maxConnections: 0, descriptorReserve: 0 };
    expect(publicLimits(20_000, auto)).toEqual({ descriptors: 20_000, reserve: 2_500, maxConnections: 8_750 });
    expect(publicLimits(1_024, auto)).toEqual({ descriptors: 1_024, reserve: 256, maxConnections: 384 });
    expect(publicLimits(128, auto)).toEqual({ descriptors: 128, reserve: 64, maxConnections: 32 });
    expect(publicLimits(1_024, { maxConnections: 0, descriptorReserve: 500 })).toEqual({ descriptors: 1_024, reserve: 500, maxConnections: 262 });
    expect(publicLimits(1_024, { maxConnections: 50, descriptorReserve: 0 }).maxConnections).toBe(50);
  });
});

// --- real gateways ---------------------------------------------------------------------------

let dir: string;
let backend: http.Server;
let backendUrl: string;
const gateways: Gateway[] = [];
const sockets: net.Socket[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conn-limit-'));
  backend = http.createServer((_req, res) => res.end('page\n'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendUrl = `http://127.0.0.1:${(backend.address() as net.AddressInfo).port}`;
});

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
});

afterAll(async () => {
  await new Promise((r) => backend.close(r));
  rmSync(dir, { recursive: true, force: true });
});

async function gateway(config: Record<string, unknown>): Promise<Gateway> {
  const g = await startInProcessGateway(dir, backendUrl, { admin: { enabled: true, host: '127.0.0.1', port: 0, ...(config.admin as object) }, ...config }, {});
  gateways.push(g);
  return g;
}

/** An idle TCP connection (sends nothing), once connected. */
function idle(port: number, localAddress?: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress }, () => resolve(s));
    s.on('error', reject);
    sockets.push(s);
  });
}

/** Idle TLS connections, once their handshake is done (so the server holds them). */
function idleTls(port: number): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () => resolve(s));
    s.on('error', reject);
    sockets.push(s);
  });
}

/** Resolves when the server closes the socket (EOF or reset) without having sent a byte. */
function closedAtOnce(s: net.Socket): Promise<{ bytes: number }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const timer = setTimeout(() => reject(new Error('the connection over the limit was not closed within 5 s')), 5_000);
    s.on('data', (d: Buffer) => (bytes += d.length));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ bytes });
    });
  });
}

function get(port: number, path: string, o: { localAddress?: string; https?: boolean } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = (o.https ? https : http).get({ host: '127.0.0.1', port, path, localAddress: o.localAddress, agent: false, rejectUnauthorized: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
  });
}

async function refusedCount(g: Gateway, listener: string, reason: string): Promise<number> {
  const m = (await g.metrics.registry.getSingleMetric('roomgate_connections_refused_total')?.get())?.values ?? [];
  return m.filter((v) => v.labels.listener === listener && v.labels.reason === reason).reduce((a, v) => a + v.value, 0);
}

async function fill(port: number, n: number, open: (port: number) => Promise<net.Socket>): Promise<net.Socket[]> {
  const out: net.Socket[] = [];
  for (let i = 0; i < n; i++) out.push(await open(port));
  return out;
}

describe('listen.maxConnections: the public port at its limit', () => {
  it('closes each connection over the limit at once and counts it; the admin port answers /healthz and /readyz; freed slots are used again', async () => {
    const g = await gateway({ listen: { host: '127.0.0.1', port: 0, maxConnections: 50 } });
    const held = await fill(g.port, 50, idle);
    // The 51st: closed by the server without a byte (Node closes it on accept).
    expect(await closedAtOnce(await idle(g.port))).toEqual({ bytes: 0 });
    // /healthz on the public port is over the limit too...
    await expect(get(g.port, '/healthz')).rejects.toThrow();
    // ...the admin port keeps answering.
    expect(await get(g.adminPort!, '/healthz')).toEqual({ status: 200, body: expect.any(String) });
    expect((await get(g.adminPort!, '/readyz')).status).toBe(200);
    expect(await refusedCount(g, 'public', 'limit')).toBeGreaterThanOrEqual(2);
    const metrics = await get(g.adminPort!, '/metrics');
    expect(metrics.body).toMatch(/roomgate_connections_refused_total\{listener="public",reason="limit"\} [2-9]/);
    // Ten leave: the port takes connections again.
    for (const s of held.slice(0, 10)) s.destroy();
    await waitFor('a public connection accepted again', 5_000, async () => ((await get(g.port, '/healthz').catch(() => null))?.status === 200 ? true : undefined));
  });

  it('on the TLS port the same: idle TLS connections count, the one over is closed at once, the admin port answers', async () => {
    const ca = makeCa(dir, 'limit-ca');
    const cert = makeSigned(dir, 'limit-server', ca, ['localhost', '127.0.0.1']);
    const g = await gateway({ listen: { host: '127.0.0.1', port: 0, maxConnections: 20 }, tls: { certs: [cert], reloadCheckMs: 0 } });
    await fill(g.port, 20, idleTls);
    expect(await closedAtOnce(await idle(g.port))).toEqual({ bytes: 0 });
    await expect(get(g.port, '/healthz', { https: true })).rejects.toThrow();
    expect((await get(g.adminPort!, '/healthz')).status).toBe(200);
    expect(await refusedCount(g, 'public', 'limit')).toBeGreaterThanOrEqual(2);
  });

  it('admin.maxConnections: the admin port has its own limit, counted apart', async () => {
    const g = await gateway({ listen: { host: '127.0.0.1', port: 0 }, admin: { maxConnections: 5 } });
    await fill(g.adminPort!, 5, idle);
    expect(await closedAtOnce(await idle(g.adminPort!))).toEqual({ bytes: 0 });
    expect(await refusedCount(g, 'admin', 'limit')).toBe(1);
    expect(await refusedCount(g, 'public', 'limit')).toBe(0);
    expect((await get(g.port, '/healthz')).status).toBe(200);
  });
});

describe('listen.maxConnectionsPerAddress', () => {
  it('closes one connection too many from one address and counts it; another address is still served', async () => {
    const g = await gateway({ listen: { host: '127.0.0.1', port: 0, maxConnectionsPerAddress: 3 } });
    const held = await fill(g.port, 3, (p) => idle(p, '127.0.0.1'));
    expect(await closedAtOnce(await idle(g.port, '127.0.0.1'))).toEqual({ bytes: 0 });
    expect(await refusedCount(g, 'public', 'per-address')).toBe(1);
    // Another client address (Linux routes all of 127/8 to loopback).
    expect((await get(g.port, '/healthz', { localAddress: '127.0.0.2' })).status).toBe(200);
    // A connection of the first address that closes frees its slot.
    held[0]!.destroy();
    await waitFor('the slot freed', 5_000, async () => ((await get(g.port, '/healthz', { localAddress: '127.0.0.1' }).catch(() => null))?.status === 200 ? true : undefined));
  });
});

describe('accept errors', () => {
  it('an error event on a listening server is logged, and does not throw (without a listener, emit would end the process)', async () => {
    const lines: string[] = [];
    const logger = createLogger('error', { write: (l: string) => void lines.push(l) });
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      guardListener(server, 'public', logger);
      const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE' });
      expect(() => server.emit('error', emfile)).not.toThrow();
      expect(() => server.emit('error', emfile)).not.toThrow(); // within a second: counted, not logged
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ listener: 'public', err: 'EMFILE' });
      expect(server.listening).toBe(true);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('every limited listener is guarded (the gateway limits all of its listeners)', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      limitConnections(server, { listener: 'admin', maxConnections: 0, perAddress: 0, onRefused: () => undefined, logger: createLogger('silent') });
      expect(() => server.emit('error', Object.assign(new Error('accept ENFILE'), { code: 'ENFILE' }))).not.toThrow();
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
