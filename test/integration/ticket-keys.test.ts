// TLS session ticket keys rotated on a schedule and shared by workers (issue 26 item 8). A ticket
// resumes a session while its key is in use, on every certificate's context (SNI), and no longer
// once the key was replaced; with --workers 2 the primary replaces the key of every worker at once,
// so a new ticket resumes on whichever worker a connection reaches.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { newTicketKeys } from '../../src/server/ticket-keys.js';
import { makeCa, makeSigned, type CertFiles } from '../support/certs.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { startGateway, stop, stopAll, waitFor } from '../support/processes.js';

let dir: string;
let ca: CertFiles;
let a: CertFiles;
let b: CertFiles;
let backend: http.Server;
let backendUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ticket-keys-'));
  ca = makeCa(dir, 'ca');
  a = makeSigned(dir, 'a', ca, ['a.test']);
  b = makeSigned(dir, 'b', ca, ['b.test']);
  backend = http.createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await stopAll();
  await new Promise((r) => backend.close(r));
  rmSync(dir, { recursive: true, force: true });
});

/** A TLS connection for `servername` offering `session`: whether it was resumed, and the ticket it got. */
function handshake(port: number, servername: string, session?: Buffer): Promise<{ reused: boolean; ticket: Buffer | undefined }> {
  return new Promise((resolve, reject) => {
    let ticket: Buffer | undefined;
    const s = tlsConnect({ host: '127.0.0.1', port, servername, ca: readFileSync(ca.cert), session });
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

describe('ticket keys in one process', () => {
  let g: Gateway;
  afterAll(async () => {
    await g?.stop();
  });

  it('a ticket resumes on its certificate (default and SNI) until the keys are replaced; then a full handshake, and the new ticket resumes', async () => {
    g = await startInProcessGateway(dir, backendUrl, { tls: { certs: [a, b], reloadCheckMs: 0, ticketKeyRotationS: 3600 } });
    const first: Record<string, Buffer> = {};
    for (const name of ['a.test', 'b.test']) {
      const { ticket } = await handshake(g.port, name);
      expect(ticket, name).toBeDefined();
      first[name] = ticket!;
      expect((await handshake(g.port, name, ticket)).reused, `${name} resumed`).toBe(true);
    }
    g.rotateTicketKeys(newTicketKeys());
    for (const name of ['a.test', 'b.test']) {
      const old = await handshake(g.port, name, first[name]);
      expect(old.reused, `${name}: a ticket of the replaced key`).toBe(false);
      expect((await handshake(g.port, name, old.ticket)).reused, `${name}: a ticket of the new key`).toBe(true);
    }
  });

  it('tls.ticketKeyRotationS replaces them on its own', async () => {
    const r = await startInProcessGateway(dir, backendUrl, { tls: { certs: [a], reloadCheckMs: 0, ticketKeyRotationS: 1 } });
    try {
      const { ticket } = await handshake(r.port, 'a.test');
      await new Promise((res) => setTimeout(res, 2_300)); // two rotations at least
      expect((await handshake(r.port, 'a.test', ticket)).reused).toBe(false);
    } finally {
      await r.stop();
    }
  });
});

describe('ticket keys with --workers 2', () => {
  it('the primary rotates them for every worker at once: after a rotation the old ticket is refused, the new one resumes on every worker', async () => {
    const gw = await startGateway({
      backends: [`b1=${backendUrl}`],
      config: { tls: { certs: [a], ticketKeyRotationS: 4 } },
      args: ['--workers', '2'],
      readyLine: (l) => l.includes('"msg":"listening"') && l.includes('"role":"primary"'),
    });
    const rotations = (): number => gw.logs().filter((l) => l.msg === 'TLS session ticket keys rotated').length;
    // Start right after a rotation: the next one is 4 s away, more than the handshakes below take.
    const seen = rotations();
    await waitFor('a rotation', 10_000, () => (rotations() > seen ? true : undefined));
    let { ticket } = await handshake(gw.port, 'a.test');
    const old = ticket;
    const reused: boolean[] = [];
    // Each a new TCP connection from a new port: the kernel spreads them over both workers.
    for (let i = 0; i < 10; i++) {
      const r = await handshake(gw.port, 'a.test', ticket);
      reused.push(r.reused);
      ticket = r.ticket ?? ticket;
    }
    expect(reused, 'resumed on every worker within one key period').toEqual(Array(10).fill(true));
    const now = rotations();
    await waitFor('the next rotation', 10_000, () => (rotations() > now ? true : undefined));
    await new Promise((r) => setTimeout(r, 200)); // the primary's message reaches both workers
    const after: boolean[] = [];
    for (let i = 0; i < 6; i++) after.push((await handshake(gw.port, 'a.test', old)).reused);
    expect(after, 'a ticket of the replaced key resumes on no worker').toEqual(Array(6).fill(false));
    expect(await stop(gw)).toBe(0);
  });
});
