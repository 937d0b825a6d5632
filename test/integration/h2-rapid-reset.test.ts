// HTTP/2 rapid reset (CVE-2023-44487) against an in-process gateway on TLS: a node:http2 client
// that opens streams and resets them (HEADERS then RST_STREAM) in a loop overdraws the
// connection's reset budget (http2.maxResets) and gets GOAWAY ENHANCE_YOUR_CALM, having started a
// bounded number of backend requests (counted by the backend, which holds every request, so each
// forwarded stream is reset before its answer). A client that cancels a few streams before their
// answer, as a browser leaving a page does, and any number after their answer began (cancelled
// downloads), keeps its connection.
import http from 'node:http';
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/gateway.js';
import { signedServer } from '../support/certs.js';
import { ERROR, get as rawGet, RawH2 } from '../support/h2-raw.js';
import { h2Session } from '../support/h2-session.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { waitFor } from '../support/processes.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { scopeTempDir } from '../support/temp-dir.js';

const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;
const MAX_RESETS = 20;
const MAX_STREAMS = 10;

const dir = scopeTempDir('roomgate-h2-rapid-reset-');
let backend: http.Server;
/** Backend requests not answered in full yet (the gateway closes their connections when the client left). */
const open = new Set<http.ServerResponse>();
/** Requests the backend got on /hold/ (never answered) since the last reset of the count. */
let held = 0;
let gw: Gateway;
let ca: Buffer;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    req.resume();
    open.add(res);
    res.once('close', () => open.delete(res));
    if (req.url?.startsWith('/hold/') === true) return void held++;
    // A head and part of a body, the rest never: a download the client cancels mid-body.
    if (req.url?.startsWith('/download/') === true) return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).write('x'.repeat(1_000));
    res.end('ok\n');
  });
  const url = await listenOnLoopback(backend);
  const cert = signedServer(dir);
  ca = cert.ca;
  gw = await startInProcessGateway(dir, url, {
    health: { path: null },
    tls: { certs: [{ cert: cert.cert, key: cert.key }] },
    http2: { maxResets: MAX_RESETS, resetWindowS: 60, maxConcurrentStreams: MAX_STREAMS },
  });
});

afterAll(async () => {
  await gw?.stop();
  await closeServer(backend);
});

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function get(s: ClientHttp2Session, path: string): ClientHttp2Stream {
  const st = s.request({ ':path': path });
  st.on('error', () => undefined);
  return st;
}

/** The status of a GET on `s`, its body read to the end. */
function status(s: ClientHttp2Session, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const st = get(s, path);
    st.once('error', reject);
    st.once('response', (h) => {
      st.resume();
      st.once('end', () => resolve(Number(h[':status'])));
    });
  });
}

/** The GOAWAY code the session got, once it got one (or closed without: null). */
function goawayOf(s: ClientHttp2Session): () => number | null | undefined {
  let code: number | undefined;
  let closed = false;
  s.on('goaway', (c: number) => (code ??= c));
  s.on('close', () => (closed = true));
  s.on('error', () => undefined);
  return () => code ?? (closed ? null : undefined);
}

/** Every request the gateway forwarded has ended, at the gateway and at the backend (so every one that was sent is counted). */
async function backendSettled(): Promise<void> {
  const inflight = (): number => (gw as unknown as { pool: { backends: { inflight: number }[] } }).pool.backends[0]?.inflight ?? -1;
  await waitFor('the backend requests ended', 10_000, () => (inflight() === 0 && open.size === 0) || undefined);
}

describe('HTTP/2 rapid reset', () => {
  it('cuts a connection that resets streams before their answer in a loop with GOAWAY ENHANCE_YOUR_CALM, after a bounded number of backend requests', async () => {
    const s = await h2Session(gw.port, ca);
    const goaway = goawayOf(s);
    expect(await status(s, '/ok?room=rr')).toBe(200);
    held = 0;
    let opened = 0;
    try {
      // HEADERS, then (a turn later, so they have left) RST_STREAM, in a loop: far more than the budget.
      while (goaway() === undefined && opened < 2_000 && !s.destroyed) {
        const st = get(s, `/hold/${opened++}?room=rr`);
        await turn();
        st.close(NGHTTP2_CANCEL);
      }
      expect(await waitFor('GOAWAY', 5_000, () => goaway() ?? undefined)).toBe(NGHTTP2_ENHANCE_YOUR_CALM);
    } finally {
      s.destroy();
    }
    await backendSettled();
    // Every forwarded stream was reset before its answer and drew from the budget: past it the
    // connection was cut; at most the streams open at that moment had been forwarded besides.
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(MAX_RESETS + MAX_STREAMS + 1);
    expect(opened).toBeGreaterThan(MAX_RESETS);
    expect(await metricCount()).toBeGreaterThanOrEqual(1);
    // Other connections are unaffected.
    const other = await h2Session(gw.port, ca);
    try {
      expect(await status(other, '/ok?room=rr')).toBe(200);
    } finally {
      other.destroy();
    }
  });

  it('cuts a raw client writing each HEADERS and its RST_STREAM back to back, after a bounded number of backend requests', async () => {
    held = 0;
    const c = await RawH2.open(gw.port);
    try {
      // Bursts in one turn: some of a burst arrive already reset, some after the budget ran out.
      for (let i = 0; i < 2_000 && !c.closed && c.goawayCode() === undefined; i++) {
        c.reset(c.headers(rawGet(`/hold/raw-${i}?room=rr`), true), ERROR.CANCEL);
        if (i % 50 === 49) await turn();
      }
      expect(await waitFor('GOAWAY', 5_000, () => c.goawayCode())).toBe(ERROR.ENHANCE_YOUR_CALM);
    } finally {
      c.close();
    }
    await backendSettled();
    expect(held).toBeLessThanOrEqual(MAX_RESETS + MAX_STREAMS + 1);
  });

  it('keeps a connection that cancels a few streams before their answer (a page left) and many after it began (downloads)', async () => {
    const s = await h2Session(gw.port, ca);
    const goaway = goawayOf(s);
    try {
      for (let round = 0; round < 3; round++) {
        // A page left: a handful of requests in flight cancelled, then the next page loads.
        const left = Array.from({ length: 5 }, (_, i) => get(s, `/hold/left-${round}-${i}?room=nav`));
        await turn();
        for (const st of left) st.close(NGHTTP2_CANCEL);
        expect(await status(s, '/ok?room=nav')).toBe(200);
      }
      // Downloads cancelled once their answer began: twice the budget, none counted.
      for (let i = 0; i < MAX_RESETS * 2; i++) {
        const st = get(s, `/download/${i}?room=nav`);
        await new Promise<void>((resolve) => st.once('response', () => resolve()));
        st.close(NGHTTP2_CANCEL);
      }
      expect(await status(s, '/ok?room=nav')).toBe(200);
      expect(goaway()).toBeUndefined();
    } finally {
      s.destroy();
    }
    await backendSettled();
  });
});

/** roomgate_client_errors_total{code="h2-rapid-reset"}: connections cut for rapid reset. */
async function metricCount(): Promise<number> {
  const m = (await gw.metrics.registry.getSingleMetric('roomgate_client_errors_total')?.get())?.values ?? [];
  return m.find((v) => v.labels.code === 'h2-rapid-reset')?.value ?? 0;
}
