// TLS on the public port: certificates made here with openssl, a real gateway and demo backend,
// real https requests and wss sockets. SNI picks the certificate; the backend sees
// X-Forwarded-Proto: https and the room cookie is Secure; a certificate replaced on disk is put
// in use on SIGHUP and by the periodic check, with 200 live wss sockets kept open; a reload that
// fails keeps the old certificate; bad files stop start and check-config with exit 2 naming the
// field; plain HTTP on the TLS port is refused without harm. The gateways that get a signal
// (SIGHUP, --workers) are processes; the others, the backend and the CLI runs that read a
// configuration are in the test's process (test/support/here.ts, test/cli/in-process.ts).
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, renameSync } from 'node:fs';
import https from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import type { LookupFunction } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { runCliHere } from '../cli/in-process.js';
import { execForm, parseDockerfile, readText } from '../support/deploy-files.js';
import { startBackendHere, startGatewayHere, stopAllHere, type BackendHere, type GatewayHere } from '../support/here.js';
import { httpRequest, metricValue, startGateway, stop, stopAll, waitFor, writeConfig, type GatewayProc } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-tls-test-');

/** A self-signed certificate for `names` (the first is the CN) and its key, as PEM files. */
function makeCert(base: string, names: readonly string[], days = 365): { cert: string; key: string } {
  const cert = join(dir, `${base}.crt`);
  const key = join(dir, `${base}.key`);
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', String(days), '-subj', `/CN=${names[0]}`, '-addext', `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`],
    { stdio: 'ignore', timeout: 10_000 },
  );
  return { cert, key };
}

function fingerprintOf(file: string): string {
  return new X509Certificate(readFileSync(file)).fingerprint256;
}

/** The certificate the gateway presents for a server name (none: no SNI sent). */
function servedFingerprint(port: number, servername?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false }, () => {
      const fp = s.getPeerX509Certificate()?.fingerprint256 ?? '';
      s.end();
      resolve(fp);
    });
    s.setTimeout(5_000, () => s.destroy(new Error('TLS handshake timed out')));
    s.on('error', reject);
  });
}

/** An https GET trusting `ca`, sent for `servername`. */
function httpsGet(port: number, path: string, servername: string, ca: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path, servername, ca: readFileSync(ca), headers: { host: servername }, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error('https request timed out')));
    req.on('error', reject);
  });
}

/** A DNS lookup that answers 127.0.0.1 for every name (the certificates' names are not in DNS). */
const toLoopback: LookupFunction = (_host, o, cb) => {
  const answer = cb as unknown as (err: null, address: unknown, family?: number) => void;
  if ((o as { all?: boolean }).all) answer(null, [{ address: '127.0.0.1', family: 4 }]);
  else answer(null, '127.0.0.1', 4);
};

/** A wss socket to a room, trusting `ca`; resolves when open, with the backend that answered. */
/** A CA file's PEM, read once per file (200 sockets opened at once must not each spawn a reader). */
const caPems = new Map<string, Buffer>();
function caPem(file: string): Buffer {
  let pem = caPems.get(file);
  if (pem === undefined) caPems.set(file, (pem = readFileSync(file)));
  return pem;
}

function openWss(port: number, room: string, servername: string, ca: string): Promise<{ ws: WebSocket; backend: string | undefined }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://${servername}:${port}/ws/live/?room=${room}`, { ca: caPem(ca), lookup: toLoopback, handshakeTimeout: 15_000 });
    ws.once('upgrade', (res) => {
      const backend = res.headers['x-backend-id'] as string | undefined;
      ws.once('open', () => resolve({ ws, backend }));
    });
    ws.once('error', reject);
  });
}

/**
 * One round trip on a socket: a frame the demo backend answers with an error message, told apart
 * from anything else the backend may send. (Every backend answer relayed through TLS: a write
 * that stayed queued once stopped a tunnel's reads for good.)
 */
function roundTrip(ws: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      ws.off('message', onMessage);
      reject(new Error('no answer on the wss socket'));
    }, 5_000);
    const onMessage = (data: Buffer): void => {
      if (!data.toString().includes('expected a JSON text frame')) return;
      clearTimeout(t);
      ws.off('message', onMessage);
      resolve();
    };
    ws.on('message', onMessage);
    ws.send('not json');
  });
}

let a: { cert: string; key: string };
let b: { cert: string; key: string };
let backend: BackendHere;

beforeAll(async () => {
  a = makeCert('a', ['a.test', '*.a.test']);
  b = makeCert('b', ['b.test']);
  backend = await startBackendHere('t1');
});

afterAll(async () => {
  await stopAll();
  await stopAllHere();
});

describe('TLS on the public port', () => {
  let gw: GatewayProc;
  // Files the gateway reads, replaced by the rotation tests.
  const live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };

  beforeAll(async () => {
    copyFileSync(a.cert, live.cert);
    copyFileSync(a.key, live.key);
    gw = await startGateway({ backends: [backend], config: { tls: { certs: [live, b], reloadCheckMs: 0 } } });
  });

  it('chooses the certificate by SNI: exact names, wildcards, and the first one otherwise', async () => {
    const fa = fingerprintOf(a.cert);
    expect(await servedFingerprint(gw.port, 'a.test')).toBe(fa);
    expect(await servedFingerprint(gw.port, 'B.TEST')).toBe(fingerprintOf(b.cert));
    expect(await servedFingerprint(gw.port, 'x.a.test')).toBe(fa);
    expect(await servedFingerprint(gw.port, 'y.x.a.test')).toBe(fa); // no cover: the default, which is a
    expect(await servedFingerprint(gw.port, 'other.test')).toBe(fa);
    expect(await servedFingerprint(gw.port)).toBe(fa);
  });

  it('proxies pages over https: the backend sees X-Forwarded-Proto https, the room cookie is Secure', async () => {
    const echo = await httpsGet(gw.port, '/_backend/echo?room=tls-1', 'b.test', b.cert);
    expect(echo.status).toBe(200);
    const seen = JSON.parse(echo.body) as { headers: Record<string, string> };
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(seen.headers['x-forwarded-host']).toBe('b.test');
    const page = await httpsGet(gw.port, '/game/tls-1/', 'a.test', a.cert);
    expect(page.status).toBe(200);
    const cookie = ([] as string[]).concat(page.headers['set-cookie'] ?? []).find((c) => c.startsWith('roomgate_room='));
    expect(cookie, 'room cookie').toBeDefined();
    expect(cookie).toMatch(/; Secure/);
    // roomgate's own answers are on TLS too.
    expect((await httpsGet(gw.port, '/healthz', 'a.test', a.cert)).status).toBe(200);
    // The pages took the byte-level path over TLS too: only the health check went to node:http.
    const metrics = await (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`)).text();
    expect([...metrics.matchAll(/^roomgate_page_handovers_total\{reason="([^"]+)"\}/gm)].map((m) => m[1])).toEqual(['own-path']);
  });

  it('carries WebSockets over TLS (wss) to the room\'s backend', async () => {
    const { ws, backend: id } = await openWss(gw.port, 'tls-ws', 'a.test', a.cert);
    expect(id).toBe('t1');
    await roundTrip(ws);
    ws.close();
  });

  it('refuses plain HTTP on the TLS port without an answer in clear, and counts it', async () => {
    const before = await metricValue(gw, 'roomgate_client_errors_total', { code: 'tls' });
    // The request is no ClientHello: the connection closes with nothing in clear.
    await expect(httpRequest(gw.port, '/healthz')).rejects.toThrow();
    await waitFor('the failed handshake counted', 5_000, async () => (await metricValue(gw, 'roomgate_client_errors_total', { code: 'tls' })) > before);
    expect(await servedFingerprint(gw.port, 'a.test')).toBe(fingerprintOf(a.cert));
  });

  it('SIGHUP puts a renewed certificate in use for new handshakes; 200 live wss sockets stay open', async () => {
    // Opened 50 at a time: 200 TLS handshakes at once on a loaded 2-core machine outlast a handshake timeout.
    const sockets: WebSocket[] = [];
    for (let batch = 0; batch < 4; batch++) {
      sockets.push(...(await Promise.all(Array.from({ length: 50 }, (_, i) => openWss(gw.port, `rot-${i}`, 'a.test', a.cert).then((s) => s.ws)))));
    }
    let closed = 0;
    for (const ws of sockets) ws.on('close', () => closed++);
    const renewed = makeCert('a2', ['a.test', '*.a.test']);
    copyFileSync(renewed.cert, live.cert);
    copyFileSync(renewed.key, live.key);
    const reloads = gw.lines.filter((l) => l.includes('TLS certificates reloaded')).length;
    gw.child.kill('SIGHUP');
    await waitFor('the reload logged', 10_000, () => gw.lines.filter((l) => l.includes('TLS certificates reloaded')).length > reloads);
    expect(await servedFingerprint(gw.port, 'a.test')).toBe(fingerprintOf(renewed.cert));
    expect(await servedFingerprint(gw.port)).toBe(fingerprintOf(renewed.cert));
    // The sockets opened on the old certificate are untouched and still carry frames both ways.
    expect(closed).toBe(0);
    await Promise.all(sockets.map((ws) => roundTrip(ws)));
    expect(closed).toBe(0);
    const { ws } = await openWss(gw.port, 'rot-1', 'a.test', renewed.cert);
    await roundTrip(ws);
    ws.close();
    for (const s of sockets) s.close();
  });

  it('a reload that fails (a key that does not match) keeps the certificate in use and says why', async () => {
    const inUse = await servedFingerprint(gw.port, 'a.test');
    copyFileSync(b.key, live.key); // a.test's certificate with b's key
    gw.child.kill('SIGHUP');
    await waitFor('the failed reload logged', 10_000, () => gw.lines.some((l) => l.includes('TLS certificates not reloaded') && l.includes('does not belong to the certificate')));
    expect(await servedFingerprint(gw.port, 'a.test')).toBe(inUse);
    expect((await httpsGet(gw.port, '/healthz', 'b.test', b.cert)).status).toBe(200);
  });

  it('a certificate file changed on disk is picked up by the periodic check, without a signal', async () => {
    const c = makeCert('c1', ['c.test']);
    const files = { cert: join(dir, 'watched.crt'), key: join(dir, 'watched.key') };
    copyFileSync(c.cert, files.cert);
    copyFileSync(c.key, files.key);
    const watched = await startGatewayHere({ backends: [backend], config: { tls: { certs: [files], reloadCheckMs: 100 } } });
    expect(await servedFingerprint(watched.port, 'c.test')).toBe(fingerprintOf(c.cert));
    // Each file replaced whole (a rename), as deploy tools and cert-manager do: a check never
    // reads half a file, which would be a failure of its own with its own message.
    const put = (from: string, to: string): void => {
      copyFileSync(from, `${to}.tmp`);
      renameSync(`${to}.tmp`, to);
    };
    const c2 = makeCert('c2', ['c.test']);
    put(c2.key, files.key);
    put(c2.cert, files.cert);
    await waitFor('the new certificate served', 10_000, async () => (await servedFingerprint(watched.port, 'c.test')) === fingerprintOf(c2.cert));
    // A broken pair on disk: retried at every check, said at error level once, the old one served.
    // Counted from here: a check that ran between the two copies above saw c2's key with c1's
    // certificate, a failure of its own (said at error level too) that ended when c2 was served.
    const from = watched.logs().length;
    put(b.key, files.key);
    const failures = (): Record<string, unknown>[] => watched.logs().slice(from).filter((l) => l.msg === 'TLS certificates not reloaded: the ones in use stay');
    await waitFor('several failed checks', 10_000, () => failures().length >= 4);
    expect(failures().filter((l) => l.level === 'error')).toHaveLength(1);
    expect(failures().filter((l) => l.level === 'debug').length).toBeGreaterThanOrEqual(3);
    expect(await servedFingerprint(watched.port, 'c.test')).toBe(fingerprintOf(c2.cert));
    put(c2.key, files.key);
    await waitFor('reloaded once the pair is whole again', 10_000, () => watched.logs().filter((l) => l.msg === 'TLS certificates reloaded').length >= 2);
    await watched.stop();
  });
});

describe('bad certificate files', () => {
  it('start and check-config exit 2 naming the field: unreadable file, not PEM, key of another certificate', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ cert: join(dir, 'missing.crt'), key: a.key }, /tls\.certs\.0\.cert: cannot read .*missing\.crt \(ENOENT\)/],
      [{ cert: a.key, key: a.key }, /tls\.certs\.0\.cert: .* is not a PEM certificate/],
      [{ cert: a.cert, key: b.key }, /tls\.certs\.0: the key in .*b\.key does not belong to the certificate in .*a\.crt/],
    ];
    for (const [files, problem] of cases) {
      const config = writeConfig({ backends: [{ id: 't1', url: backend.url }], tls: { certs: [files] } });
      for (const cmd of [['start', '--port', '0'], ['check-config']]) {
        const r = await runCliHere([...cmd, '--config', config]);
        expect(r.code, `${cmd[0]} ${JSON.stringify(files)}`).toBe(2);
        expect(r.stderr).toMatch(problem);
      }
    }
  });

  it('check-config notes a certificate that expires soon', async () => {
    const soon = makeCert('soon', ['soon.test'], 5);
    const config = writeConfig({ backends: [{ id: 't1', url: backend.url }], tls: { certs: [soon] } });
    const r = await runCliHere(['check-config', '--config', config]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/note: tls\.certs\.0: the certificate in .*soon\.crt \(soon\.test\) expires in [45] days/);
  });
});

describe('tls.redirectPort and HSTS', () => {
  let gw: GatewayHere;
  let redirectPort: number;

  beforeAll(async () => {
    gw = await startGatewayHere({ backends: [backend], config: { tls: { certs: [a], redirectPort: 0, hstsMaxAgeS: 600 } } });
    const line = gw.logs().find((l) => l.msg === 'listening') as { redirectPort: number; tls: boolean };
    expect(line.tls).toBe(true);
    redirectPort = line.redirectPort;
    expect(redirectPort).toBeGreaterThan(0);
  });

  it('answers plain HTTP with a 308 to the same path on https, and the health paths itself', async () => {
    const r = await httpRequest(redirectPort, '/game/r-1/?x=1', { headers: { host: `a.test:${redirectPort}` } });
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe(`https://a.test:${gw.port}/game/r-1/?x=1`);
    const v6 = await httpRequest(redirectPort, '/', { headers: { host: `[::1]:${redirectPort}` } });
    expect(v6.headers.location).toBe(`https://[::1]:${gw.port}/`);
    expect((await httpRequest(redirectPort, '/healthz', { headers: { host: 'a.test' } })).status).toBe(200);
    expect((await httpRequest(redirectPort, '/readyz', { headers: { host: 'a.test' } })).status).toBe(200);
    // A Host that cannot be a server name is not echoed into a Location.
    expect((await httpRequest(redirectPort, '/', { headers: { host: 'evil.test/../x' } })).status).toBe(400);
    // No tunnel on the plain port.
    const up = await httpRequest(redirectPort, '/ws/live/', { headers: { host: 'a.test', connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' } });
    expect(up.status).toBe(400);
  });

  it('sends Strict-Transport-Security on answers over TLS: proxied pages and roomgate\'s own', async () => {
    const page = await httpsGet(gw.port, '/game/hsts/', 'a.test', a.cert);
    expect(page.status).toBe(200);
    expect(page.headers['strict-transport-security']).toBe('max-age=600');
    // Several Set-Cookie lines of the backend's and roomgate's room cookie all survive.
    expect(([] as string[]).concat(page.headers['set-cookie'] ?? []).some((c) => c.startsWith('roomgate_room='))).toBe(true);
    for (const path of ['/healthz', '/_roomgate/api/online', '/no-such-page-xyz']) {
      expect((await httpsGet(gw.port, path, 'a.test', a.cert)).headers['strict-transport-security'], path).toBe('max-age=600');
    }
    // Not on the plain redirect port (RFC 6797: only over TLS).
    expect((await httpRequest(redirectPort, '/', { headers: { host: 'a.test' } })).headers['strict-transport-security']).toBeUndefined();
  });

  it('refuses redirectPort and HSTS without certificates, naming the key', async () => {
    for (const [tls, problem] of [
      [{ redirectPort: 8081 }, /tls\.redirectPort: got 8081 while tls\.certs is empty/],
      [{ hstsMaxAgeS: 60 }, /tls\.hstsMaxAgeS: got a max-age while tls\.certs is empty/],
      [{ certs: [a], redirectPort: 8443 }, /tls\.redirectPort: got 8443, which is listen\.port/],
    ] as const) {
      const config = writeConfig({ listen: { port: 8443 }, backends: [{ id: 't1', url: backend.url }], tls });
      const r = await runCliHere(['check-config', '--config', config]);
      expect(r.code, JSON.stringify(tls)).toBe(2);
      expect(r.stderr).toMatch(problem);
    }
  });
});

/** A TLS connection that offers `session`; resolves with whether it was resumed and the ticket it got. */
function handshake(port: number, ca: string, session?: Buffer): Promise<{ reused: boolean; ticket: Buffer | undefined }> {
  return new Promise((resolve, reject) => {
    let ticket: Buffer | undefined;
    const s = tlsConnect({ host: '127.0.0.1', port, servername: 'a.test', ca: readFileSync(ca), session });
    const timer = setTimeout(() => s.destroy(new Error('TLS handshake timed out')), 5_000);
    s.on('session', (t: Buffer) => (ticket = t));
    s.on('secureConnect', () => {
      clearTimeout(timer);
      const reused = s.isSessionReused();
      // TLS 1.3 sends its tickets right after the handshake: a moment to receive them.
      setTimeout(() => {
        s.end();
        resolve({ reused, ticket });
      }, 100);
    });
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

describe('TLS with --workers 2', () => {
  it('resumes sessions whichever worker a connection reaches (ticket keys shared by the cluster)', async () => {
    const gw = await startGateway({
      backends: [backend],
      config: { tls: { certs: [a, b] } },
      args: ['--workers', '2'],
      readyLine: (l) => l.includes('"msg":"listening"') && l.includes('"role":"primary"'),
    });
    let { ticket } = await handshake(gw.port, a.cert);
    const reused: boolean[] = [];
    // Each a new TCP connection from a new port: the kernel spreads them over both workers.
    for (let i = 0; i < 24; i++) {
      const r = await handshake(gw.port, a.cert, ticket);
      reused.push(r.reused);
      ticket = r.ticket ?? ticket;
    }
    expect(reused.filter((x) => !x).length, `not resumed: ${reused.filter((x) => !x).length} of 24`).toBe(0);
    expect(await stop(gw)).toBe(0);
  });
});

describe("the image's HEALTHCHECK", () => {
  it('passes against a plain and a TLS gateway, and fails when nothing answers', async () => {
    const check = parseDockerfile(readText('Dockerfile')).filter((i) => i.cmd === 'HEALTHCHECK').at(-1);
    const argv = execForm(check!.args.replace(/^(--\S+\s+)*CMD\s+/, ''))!;
    expect(argv.slice(0, 2)).toEqual(['node', '-e']);
    // Not spawnSync: the gateways answer from this process's event loop.
    const run = (port: number): Promise<number | null> =>
      new Promise((resolve) => {
        const child = execFile(process.execPath, ['-e', argv[2]!], { env: { PATH: process.env.PATH ?? '', ROOMGATE_PORT: String(port) }, timeout: 10_000 });
        child.once('exit', (code) => resolve(code));
      });
    const plain = await startGatewayHere({ backends: [backend] });
    const tls = await startGatewayHere({ backends: [backend], config: { tls: { certs: [a] } } });
    expect(await run(plain.port)).toBe(0);
    expect(await run(tls.port)).toBe(0);
    await plain.stop();
    expect(await run(plain.port)).toBe(1);
    await tls.stop();
  });
});
