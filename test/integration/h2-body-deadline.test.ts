// An h2 request whose body stops arriving gets 408 at listen.requestTimeoutMs (the h2 front's body
// deadline) while its backend request is open: once its stream is closed, that request is counted
// once and the backend's in-flight count (what bounded loads read) comes back to 0 (it used to stay
// up for good). In-process gateway on TLS.
import http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { signedServer } from '../support/certs.js';
import { h2Session } from '../support/h2-session.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { waitFor } from '../support/processes.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-h2-deadline-');
let backend: http.Server;
let gw: Gateway;
let ca: Buffer;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok\n'));
  });
  const url = await listenOnLoopback(backend);
  const cert = signedServer(dir);
  ca = cert.ca;
  // Every body streams (no buffer), so the backend request is open while the body stalls.
  gw = await startInProcessGateway(dir, url, {
    health: { path: null },
    listen: { host: '127.0.0.1', port: 0, headersTimeoutMs: 500, requestTimeoutMs: 800 },
    proxy: { bufferBodyBytes: 0, bodyIdleTimeoutMs: 0 },
    tls: { certs: [{ cert: cert.cert, key: cert.key }] },
  });
});

afterAll(async () => {
  await gw?.stop();
  await closeServer(backend);
});

it('a stalled h2 body: 408, and the backend request it held open is released', async () => {
  const inflight = (): number => (gw as unknown as { pool: { backends: { inflight: number }[] } }).pool.backends[0]?.inflight ?? -1;
  const s = await h2Session(gw.port, ca);
  try {
    const st = s.request({ ':method': 'POST', ':path': '/x', 'content-type': 'text/plain' }, { endStream: false });
    st.on('error', () => undefined);
    const status = new Promise<number>((resolve) => st.once('response', (h) => resolve(Number(h[':status']))));
    st.write('abc');
    await waitFor('the backend request open', 5_000, () => inflight() === 1 || undefined);
    expect(await status).toBe(408);
  } finally {
    s.destroy();
  }
  await waitFor('the in-flight count back to 0', 5_000, () => inflight() === 0 || undefined);
});
