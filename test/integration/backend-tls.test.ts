// https:// backends: real Node https servers (with certificates from a test CA made here with
// openssl) behind real gateways (in the test's process: test/support/here.ts). Pages and WebSockets (the ws client through roomgate)
// reach them over TLS; verification is on by default (Node's trust store refuses the test CA),
// `backendTls.ca` makes it pass, a certificate from another CA, an expired one or one naming
// another host is refused (the backend marked down with the TLS reason, in logs, metrics and the
// admin API), `servername` names the host to check, and the client certificate reaches a backend
// that requires one. Configuration errors name their field (check-config and start, exit 2).
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { runCliHere } from '../cli/in-process.js';
import { makeCa, makeSigned, type CertFiles } from '../support/certs.js';
import { startGatewayHere, stopAllHere, type GatewayHere } from '../support/here.js';
import { httpRequest, metricValue, stopAll, waitFor, withTimeout, writeConfig } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-backend-tls-');

/** What a test backend saw of a connection: its id, the SNI, the client certificate's CN. */
interface Seen {
  backend: string;
  path?: string;
  sni: string | null;
  clientCn: string | null;
  proto: string | null;
}

interface TlsBackend {
  readonly id: string;
  readonly port: number;
  /** Requests and sockets that reached the backend. */
  readonly seen: Seen[];
  close(): Promise<void>;
}

const backends: TlsBackend[] = [];
const clients = new Set<WebSocket>();

/**
 * A Node https server: every path answers JSON naming what it saw, /ws/ accepts WebSockets that
 * greet with the same and echo every message. `clientCa`: a client certificate signed by it is
 * required (mutual TLS).
 */
async function startTlsBackend(id: string, files: CertFiles, clientCa?: string): Promise<TlsBackend> {
  const server = https.createServer({
    cert: readFileSync(files.cert),
    key: readFileSync(files.key),
    ...(clientCa ? { ca: readFileSync(clientCa), requestCert: true, rejectUnauthorized: true } : {}),
  });
  const seen: Seen[] = [];
  const what = (socket: TLSSocket, proto: string | string[] | undefined, path?: string): Seen => {
    const peer = socket.getPeerCertificate();
    const cn = peer?.subject?.CN;
    return { backend: id, ...(path ? { path } : {}), sni: socket.servername || null, clientCn: typeof cn === 'string' ? cn : null, proto: typeof proto === 'string' ? proto : null };
  };
  server.on('request', (req, res) => {
    const s = what(req.socket as TLSSocket, req.headers['x-forwarded-proto'], req.url);
    seen.push(s);
    res.writeHead(200, { 'content-type': 'application/json', 'x-backend-id': id });
    res.end(JSON.stringify(s));
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws, req) => {
    const s = what(req.socket as TLSSocket, req.headers['x-forwarded-proto'], req.url);
    seen.push(s);
    ws.send(JSON.stringify({ hello: s }));
    ws.on('message', (data, binary) => ws.send(data, { binary }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const b: TlsBackend = {
    id,
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  backends.push(b);
  return b;
}

/** A WebSocket through the gateway: resolves with the socket and the backend's greeting once open. */
function openSocket(gw: GatewayHere, room: string): Promise<{ ws: WebSocket; hello: Seen }> {
  const ws = new WebSocket(`${gw.wsUrl}/ws/live/?room=${room}`, { handshakeTimeout: 5_000 });
  clients.add(ws);
  return withTimeout(
    new Promise((resolve, reject) => {
      ws.once('message', (data) => resolve({ ws, hello: (JSON.parse(String(data)) as { hello: Seen }).hello }));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`unexpected response ${res.statusCode}`)));
      ws.once('error', reject);
    }),
    10_000,
    `a WebSocket of room ${room}`,
  );
}

/** The status a WebSocket handshake through the gateway was refused with. */
function refusedSocket(gw: GatewayHere, room: string): Promise<number> {
  const ws = new WebSocket(`${gw.wsUrl}/ws/live/?room=${room}`, { handshakeTimeout: 5_000 });
  clients.add(ws);
  return withTimeout(
    new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      ws.once('open', () => reject(new Error('the socket opened')));
      ws.once('error', reject);
    }),
    10_000,
    `the refusal of room ${room}`,
  );
}

/** Sends `data` and resolves with the echo (the next message). */
function echo(ws: WebSocket, data: string): Promise<string> {
  return withTimeout(
    new Promise((resolve) => {
      ws.once('message', (d) => resolve(String(d)));
      ws.send(data);
    }),
    10_000,
    'the echo',
  );
}

interface BackendJson {
  id: string;
  url: string;
  state: string;
  healthHistory: { ok: boolean; error?: string }[];
}

async function adminJson<T>(gw: GatewayHere, path: string): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { signal: AbortSignal.timeout(5_000) });
  return (await res.json()) as T;
}

const backendOf = async (gw: GatewayHere, id: string): Promise<BackendJson | undefined> => (await adminJson<{ backends: BackendJson[] }>(gw, '/backends')).backends.find((b) => b.id === id);

// Checks often enough that verdicts come within a test's time; the connect check is the TLS
// handshake. A failing backend is marked down by them only after 3 failures (the first check, the
// first request's and the next check): the first request sees the TLS failure itself. A 2.5 s
// limit, as the tests read every check's result: on a loaded 2-core machine a 1 s handshake
// limit timed out (a check failing with "timeout", not the TLS reason).
const HEALTH = { intervalMs: 2_500, timeoutMs: 2_500, rise: 1, fall: 3 };

let ca: CertFiles;
let good: CertFiles;
let client: CertFiles;
let rogue: CertFiles;
let expired: CertFiles;
let otherName: CertFiles;
/** Requires a client certificate of the test CA; its own names localhost and 127.0.0.1. */
let mtls: TlsBackend;

beforeAll(async () => {
  ca = makeCa(dir, 'ca');
  const otherCa = makeCa(dir, 'other-ca');
  good = makeSigned(dir, 'good', ca, ['localhost', '127.0.0.1']);
  client = makeSigned(dir, 'client', ca, ['roomgate-gateway']);
  rogue = makeSigned(dir, 'rogue', otherCa, ['localhost', '127.0.0.1']);
  expired = makeSigned(dir, 'expired', ca, ['localhost', '127.0.0.1'], -1);
  otherName = makeSigned(dir, 'other-name', ca, ['app.internal']);
  mtls = await startTlsBackend('mtls', good, ca.cert);
}, 60_000);

afterAll(async () => {
  for (const ws of clients) ws.terminate();
  await stopAllHere();
  await stopAll();
  await Promise.all(backends.map((b) => b.close()));
});

describe('https backends', () => {
  let gw: GatewayHere;

  beforeAll(async () => {
    gw = await startGatewayHere({
      backends: [`mtls=https://localhost:${mtls.port}`],
      config: { backendTls: { ca: ca.cert, cert: client.cert, key: client.key }, health: HEALTH },
    });
  });

  it('proxies pages over TLS: SNI is the URL host, the client certificate reaches the backend, X-Forwarded-Proto stays the client scheme', async () => {
    const res = await httpRequest(gw.port, '/game/tls-1/?room=tls-1');
    expect(res.status).toBe(200);
    const seen = JSON.parse(res.body) as Seen;
    expect(seen).toEqual({ backend: 'mtls', path: '/game/tls-1/?room=tls-1', sni: 'localhost', clientCn: 'roomgate-gateway', proto: 'http' });
    // Keep-alive: a second page on the pooled TLS connection.
    expect((await httpRequest(gw.port, '/game/tls-1/')).status).toBe(200);
  });

  it('carries WebSockets over TLS to the backend: small and large messages both ways', async () => {
    const { ws, hello } = await openSocket(gw, 'tls-ws');
    expect(hello).toMatchObject({ backend: 'mtls', sni: 'localhost', clientCn: 'roomgate-gateway', proto: 'http' });
    expect(await echo(ws, 'hello over tls')).toBe('hello over tls');
    // Many TLS records and reads, with the client side's back-pressure in between.
    const big = 'x'.repeat(700_000);
    expect(await echo(ws, big)).toBe(big);
    const many = await Promise.all(Array.from({ length: 5 }, (_, i) => openSocket(gw, `tls-ws-${i}`)));
    for (const [i, s] of many.entries()) expect(await echo(s.ws, `m${i}`)).toBe(`m${i}`);
    for (const s of [ws, ...many.map((m) => m.ws)]) s.close();
  });

  it('health checks pass by a verified TLS handshake with the client certificate', async () => {
    const b = await waitFor('health checks recorded', 20_000, async () => {
      const j = await backendOf(gw, 'mtls');
      return j && j.healthHistory.length >= 2 ? j : undefined;
    });
    expect(b.url).toBe(`https://localhost:${mtls.port}`);
    expect(b.state).toBe('up');
    expect(b.healthHistory.every((h) => h.ok)).toBe(true);
  });
});

describe('verification', () => {
  /** A gateway in front of one backend; its page answer, socket answer and admin view. */
  async function refused(backendUrl: string, backendTls: Record<string, unknown>, reason: RegExp, socketFirst = false): Promise<void> {
    const gw = await startGatewayHere({ backends: [`b=${backendUrl}`], config: { backendTls, health: HEALTH } });
    // The first attempt meets the TLS failure itself (a page, or a WebSocket handshake); the
    // backend is then down, and the second is refused without trying it.
    if (socketFirst) expect([502, 503]).toContain(await refusedSocket(gw, 'v-2'));
    const page = await httpRequest(gw.port, '/game/v-1/');
    expect([502, 503]).toContain(page.status);
    // The client is told only to retry; the TLS failure is named in the log under its request id.
    expect(page.body).not.toMatch(reason);
    if (page.status === 503) {
      const id = String(page.headers['x-request-id']);
      await waitFor('the refusal line naming the TLS failure', 5_000, () => gw.lines.find((l) => l.includes(id) && l.includes('request refused') && reason.test(l)));
    }
    if (!socketFirst) expect([502, 503]).toContain(await refusedSocket(gw, 'v-2'));
    // Metrics, logs and the admin API say why.
    expect(await metricValue(gw, 'roomgate_proxy_errors_total', { backend: 'b', kind: 'tls' })).toBeGreaterThan(0);
    await waitFor('the marked-down log line', 5_000, () => gw.lines.find((l) => l.includes('backend passively marked down') && reason.test(l)));
    const events = await adminJson<{ events: { kind: string; backend: string; detail: string }[] }>(gw, '/events');
    expect(events.events.find((e) => e.kind === 'down' && e.backend === 'b')?.detail).toMatch(reason);
    const b = await waitFor('the checks marking it down', 20_000, async () => {
      const j = await backendOf(gw, 'b');
      return j?.state === 'down' && j.healthHistory.some((h) => !h.ok && !h.error?.startsWith('proxy:')) ? j : undefined;
    });
    expect(b.healthHistory.filter((h) => !h.ok).every((h) => reason.test(h.error ?? ''))).toBe(true);
    // Its checks (a TLS handshake a second) end with the test.
    await gw.stop();
  }

  /**
   * The requests of a test's own rooms that reached the shared backend, counted apart from the
   * health checks the other tests' gateways still send it until they stop.
   */
  const requestsFor = (seen: readonly Seen[], ...rooms: string[]): number => seen.filter((s) => rooms.some((r) => s.path?.includes(`/${r}/`) || s.path?.includes(`room=${r}`))).length;

  it("is on by default: Node's trust store does not know the test CA", async () => {
    const before = requestsFor(mtls.seen, 'v-1', 'v-2');
    // The backend sends the test CA behind its certificate (it is also its client CA): a self-signed root Node does not trust.
    await refused(`https://localhost:${mtls.port}`, {}, /tls: SELF_SIGNED_CERT_IN_CHAIN/);
    // Nothing reached the backend: the handshake failed before a request was written.
    expect(requestsFor(mtls.seen, 'v-1', 'v-2')).toBe(before);
  });

  it('refuses a certificate another CA signed', async () => {
    const b = await startTlsBackend('rogue', rogue);
    await refused(`https://127.0.0.1:${b.port}`, { ca: ca.cert }, /tls: UNABLE_TO_VERIFY_LEAF_SIGNATURE/);
    expect(b.seen).toEqual([]);
  });

  it('refuses an expired certificate (met first by a WebSocket handshake)', async () => {
    const b = await startTlsBackend('expired', expired);
    await refused(`https://127.0.0.1:${b.port}`, { ca: ca.cert }, /tls: CERT_HAS_EXPIRED \(certificate has expired\)/, true);
    expect(b.seen).toEqual([]);
  });

  it('refuses a certificate for another host name; servername names the one to check', async () => {
    const b = await startTlsBackend('other-name', otherName);
    await refused(`https://127.0.0.1:${b.port}`, { ca: ca.cert }, /tls: ERR_TLS_CERT_ALTNAME_INVALID/);
    expect(b.seen).toEqual([]);
    const gw = await startGatewayHere({ backends: [`b=https://127.0.0.1:${b.port}`], config: { backendTls: { ca: ca.cert, servername: 'app.internal' } } });
    const page = await httpRequest(gw.port, '/game/n-1/');
    expect(page.status).toBe(200);
    expect(JSON.parse(page.body)).toMatchObject({ sni: 'app.internal', clientCn: null });
    const { ws, hello } = await openSocket(gw, 'n-2');
    expect(hello.sni).toBe('app.internal');
    ws.close();
    await gw.stop();
  });

  it('a backend listed by address gets no SNI and its certificate must list that address', async () => {
    const b = await startTlsBackend('by-address', good);
    const gw = await startGatewayHere({ backends: [`b=https://127.0.0.1:${b.port}`], config: { backendTls: { ca: ca.cert } } });
    const page = await httpRequest(gw.port, '/game/ip-1/');
    expect(page.status).toBe(200);
    expect(JSON.parse(page.body)).toMatchObject({ sni: null });
    await gw.stop();
  });

  it('verify: false accepts any certificate, with a warning at start', async () => {
    const b = await startTlsBackend('unverified', rogue);
    const gw = await startGatewayHere({ backends: [`b=https://127.0.0.1:${b.port}`], config: { backendTls: { verify: false } } });
    expect(gw.lines.some((l) => l.includes('"level":"warn"') && l.includes('backendTls.verify is false'))).toBe(true);
    expect((await httpRequest(gw.port, '/game/u-1/')).status).toBe(200);
    await gw.stop();
  });

  it('a backend that requires a client certificate refuses a gateway without one', async () => {
    const before = requestsFor(mtls.seen, 'c-1');
    const gw = await startGatewayHere({ backends: [`b=https://localhost:${mtls.port}`], config: { backendTls: { ca: ca.cert } } });
    const page = await httpRequest(gw.port, '/game/c-1/');
    expect([502, 503]).toContain(page.status);
    expect(await metricValue(gw, 'roomgate_proxy_errors_total', { backend: 'b', kind: 'tls' })).toBeGreaterThan(0);
    expect(requestsFor(mtls.seen, 'c-1')).toBe(before);
    await gw.stop();
  });
});

describe('configuration', () => {
  const checkConfig = (config: Record<string, unknown>) => runCliHere(['check-config', '--json', '--config', writeConfig(config)]);

  it('accepts https:// URLs (port 443 by default) and discovery.dns.scheme', async () => {
    const r = await checkConfig({ backends: [{ id: 'a', url: 'https://app-1.internal' }, { id: 'b', url: 'https://10.0.0.5:8443' }], backendTls: { ca: ca.cert } });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const printed = JSON.parse(r.stdout) as { config: { backends: { url: string; port: number; tls?: boolean }[] } };
    expect(printed.config.backends).toMatchObject([
      { url: 'https://app-1.internal', port: 443, tls: true },
      { url: 'https://10.0.0.5:8443', port: 8443, tls: true },
    ]);
    const d = await checkConfig({ discovery: { dns: { name: 'app.internal', type: 'A', scheme: 'https' } } });
    expect(d.code).toBe(0);
    expect((JSON.parse(d.stdout) as { config: { discovery: { dns: { scheme: string } } } }).config.discovery.dns.scheme).toBe('https');
  });

  it('names the field of each bad file or missing half, with the fix; verify: false is a note', async () => {
    const missing = await checkConfig({ backendTls: { ca: join(dir, 'nope.pem') } });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`backendTls.ca: cannot read ${join(dir, 'nope.pem')} (ENOENT); expected a readable PEM file of CA certificates`);
    const notPem = join(dir, 'not.pem');
    writeFileSync(notPem, 'hello\n');
    expect((await checkConfig({ backendTls: { ca: notPem } })).stderr).toContain(`backendTls.ca: ${notPem} holds no PEM certificate`);
    const half = await checkConfig({ backendTls: { cert: client.cert } });
    expect(half.code).toBe(2);
    expect(half.stderr).toContain('backendTls.key: got null while backendTls.cert is set; expected the PEM private key file of that certificate');
    const mismatch = await checkConfig({ backendTls: { cert: client.cert, key: good.key } });
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toContain(`backendTls.key: the key in ${good.key} does not belong to the certificate in ${client.cert}`);
    const url = await checkConfig({ backends: [{ url: 'ftp://10.0.0.5:21' }] });
    expect(url.stderr).toContain('backends.0.url: got "ftp://10.0.0.5:21"; expected an http:// or https:// URL');
    const off = await checkConfig({ backends: [{ url: 'https://10.0.0.5:8443' }], backendTls: { verify: false } });
    expect(off.code).toBe(0);
    expect((JSON.parse(off.stdout) as { notes: string[] }).notes.some((n) => n.startsWith('backendTls.verify is false'))).toBe(true);
  });

  it('start refuses a bad file before listening (exit 2, naming the field)', async () => {
    const r = await runCliHere(['start', '--port', '0', '--config', writeConfig({ backends: [{ url: 'https://127.0.0.1:1' }], backendTls: { ca: join(dir, 'nope.pem') } })], { ROOMGATE_ADMIN_PORT: '0' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('backendTls.ca: cannot read');
  });
});
