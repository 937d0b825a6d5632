// The response corpus through the HTTP/2 front: the same scripted backend answers (RESPONSE_CASES)
// reach a client on an h2 stream of a gateway process with TLS; the answers to a WebSocket
// handshake reach it on an RFC 8441 extended CONNECT (a 101 is the stream's 200, the tunnel open). Each case's client has its own
// TLS connection from its own loopback address (the backend picks the answer by X-Forwarded-For).
// What holds on h2: the process lives on (a throw out of node's h2 writeHead once stopped it);
// the stream's :status is the case's final status (1xx never surface, a bad answer is a 502); the
// body is the case's; what must not be relayed is in neither the body nor the fields; a cut body
// is a reset stream, never a stream that ends as if complete; the client's h2 connection serves
// on after every case; a second client gets its own answer. Where h2 differs from HTTP/1.1 by
// design, H2_EXPECT says so with its reason; where the gateway is wrong today, KNOWN pins it.
// Two variants: answers relayed as they come, and answers the page cache fetches first.
import { readFileSync } from 'node:fs';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import net from 'node:net';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import tls, { type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCa, makeSigned } from '../support/certs.js';
import { openH2 } from '../support/h2-session.js';
import { startGateway, stop, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { startRawBackend, type Answer, type RawBackend } from './backend.js';
import { concrete, RESPONSE_CASES, type ResponseCase } from './response-cases.js';
import { ClientAddresses, scriptedByClient, unclaimed } from './runner.js';
import { scopeTempDir } from '../support/temp-dir.js';

/** Where h2 legitimately differs from the case's HTTP/1.1 expectation. */
const H2_EXPECT: Readonly<Record<string, { status: number; body?: string; absent?: readonly string[]; reason: string }>> = {
  // Node's h2 refuses a field meant once sent twice (it cannot be relayed as sent): a 502, which
  // carries none of the fields the failed writeHead had set.
  'etag-twice': { status: 502, absent: ['etag'], reason: 'a singleton field twice cannot be written on h2' },
  'upgrade-refusal-etag-twice': { status: 502, absent: ['etag'], reason: 'a singleton field twice cannot be written on h2' },
  // Any 2xx to an extended CONNECT opens the WebSocket (RFC 8441 5): a backend's 200 is no 101.
  'upgrade-200-body': { status: 502, reason: 'a 2xx answers an extended CONNECT with an open WebSocket' },
  // A chunked refusal body is not de-chunked for an h2 stream (src/server/h2-websocket.ts): the head alone.
  'upgrade-chunked-403': { status: 403, body: '', reason: 'a chunked refusal body is not relayed on an h2 WebSocket' },
  'location-twice': { status: 502, absent: ['location'], reason: 'Location is a singleton field on h2: twice cannot be written' },
};

const NO_ERROR = http2.constants.NGHTTP2_NO_ERROR;

/**
 * Known problems, reported with this file and not fixed on its branch: what happens today is
 * pinned (the process lives on and every other check still runs), so a fix, or any other change,
 * fails the pin and its entry goes. Each says what is wrong.
 */
// Empty: the three problems this file found when it was written (a cut body reset with NO_ERROR,
// so clients took it for complete; a 204 relayed with the backend's Content-Length, which h2
// clients reset; a stored answer h2 cannot carry cutting the stream instead of a 502) are fixed.
const KNOWN: readonly { cases: readonly string[]; variants: readonly string[]; problem: string; holds: (o: H2Outcome) => boolean }[] = [];

/** `contains` strings that are HTTP/1.1 wire text with no h2 counterpart. */
const NOT_ON_H2 = /^(?:HTTP\/1\.1 |\r\nConnection: )/; // a status line (h2 has no reason phrase), the connection's own field

const clients = new ClientAddresses(40_000);
const AUTHORITY = 'a.example';

/** What the server's frames said of one stream (node's client reports a reset with NO_ERROR as a clean end). */
interface StreamFrames {
  /** A HEADERS or DATA frame with END_STREAM came: the response is complete by its framing. */
  endStream: boolean;
  /** The RST_STREAM code the server sent, if it sent one. */
  rst: number | null;
}

/**
 * The TLS connection as a plain duplex for node's h2 client, reading the frame headers the server
 * sends as they pass (no HPACK needed: END_STREAM flags and RST_STREAM codes per stream).
 */
function tappedConnection(sock: TLSSocket, streams: Map<number, StreamFrames>): Duplex {
  let buf = Buffer.alloc(0);
  const d = new Duplex({
    write: (chunk: Buffer, _enc, cb) => void sock.write(chunk, cb),
    final: (cb) => {
      sock.end();
      cb();
    },
    read: () => void sock.resume(),
    destroy: (err, cb) => {
      sock.destroy();
      cb(err);
    },
  });
  sock.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
      const len = buf.readUIntBE(0, 3);
      const [type, flags] = [buf[3] as number, buf[4] as number];
      const id = buf.readUInt32BE(5) & 0x7fffffff;
      if (id !== 0) {
        const st = streams.get(id) ?? { endStream: false, rst: null };
        streams.set(id, st);
        if ((type === FRAME_DATA || type === FRAME_HEADERS) && (flags & FLAG_END_STREAM) !== 0) st.endStream = true;
        if (type === FRAME_RST_STREAM && len >= 4) st.rst = buf.readUInt32BE(9);
      }
      buf = buf.subarray(9 + len);
    }
    if (!d.push(c)) sock.pause();
  });
  sock.on('end', () => d.push(null));
  sock.on('error', (err) => d.destroy(err));
  sock.on('close', () => d.destroy());
  return d;
}

const FRAME_DATA = 0;
const FRAME_HEADERS = 1;
const FRAME_RST_STREAM = 3;
const FLAG_END_STREAM = 0x1;

interface H2Outcome {
  /** :status of the final head; null: none came. */
  readonly status: number | null;
  /** Statuses of informational heads the client saw. */
  readonly interim: number[];
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The server ended the stream with END_STREAM (a complete response). */
  readonly ended: boolean;
  /** The RST_STREAM code the server sent; null: none. */
  readonly rst: number | null;
  /** What node's client made of it: an error's message, or null. */
  readonly error: string | null;
  readonly timedOut: boolean;
}

interface Session {
  readonly s: ClientHttp2Session;
  /** The server's frames per stream id. */
  readonly frames: Map<number, StreamFrames>;
}

/** One request on the session; `connect`: an extended CONNECT for a WebSocket, done once its 200 (the open tunnel) comes. */
function h2Request(c: Session, method: string, path: string, timeoutMs = 4_000, connect = false): Promise<H2Outcome> {
  return new Promise((resolve) => {
    const head = connect ? { ':method': 'CONNECT', ':protocol': 'websocket', 'sec-websocket-version': '13' } : { ':method': method };
    const req = c.s.request({ ...head, ':path': path, ':authority': AUTHORITY, ':scheme': 'https' }, { endStream: !connect });
    const chunks: Buffer[] = [];
    const interim: number[] = [];
    let headers: IncomingHttpHeaders = {};
    let status: number | null = null;
    let error: string | null = null;
    let settled = false;
    const finish = (timedOut: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const f = req.id === undefined ? undefined : c.frames.get(req.id);
      if (!req.destroyed) req.close(http2.constants.NGHTTP2_CANCEL);
      resolve({ status, interim, headers, body: Buffer.concat(chunks), ended: f?.endStream ?? false, rst: f?.rst ?? null, error, timedOut });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    req.on('headers', (h) => interim.push(Number(h[':status'])));
    req.on('response', (h) => {
      headers = h;
      status = Number(h[':status']);
      if (connect && status === 200) finish(false);
    });
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('error', (err: Error) => (error = err.message));
    // An extended CONNECT's client side stays open: the stream is done once the server ended its
    // side (its END_STREAM), not at 'close', which waits for the gateway to reset the half-open
    // stream a second later.
    if (connect) req.on('end', () => finish(false));
    req.on('close', () => finish(false));
  });
}

/** RFC 9113 7 error codes by number. */
const RST_NAMES = ['NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT', 'STREAM_CLOSED', 'FRAME_SIZE_ERROR', 'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR', 'CONNECT_ERROR', 'ENHANCE_YOUR_CALM', 'INADEQUATE_SECURITY', 'HTTP_1_1_REQUIRED'];

/** A short account of a stream: status, how it ended, the body. */
function account(o: H2Outcome): string {
  const how = o.ended ? 'END_STREAM' : o.rst !== null ? `RST_STREAM ${RST_NAMES[o.rst] ?? o.rst}` : 'no END_STREAM, no RST_STREAM';
  return `status ${o.status}, ${how}${o.error ? ` (client: ${o.error})` : ''}${o.timedOut ? ', timed out' : ''}, body ${JSON.stringify(o.body.toString('latin1').slice(0, 120))}`;
}

// Two ways an answer reaches an h2 stream: relayed as it comes (node:http2's compatibility
// response), and fetched and stored by the page cache first (every case's answer is fetched by the
// cache: none has freshness, and uncacheableMs 0 keeps later cases from skipping it).
const VARIANTS = [
  { name: 'relayed', extra: {} },
  { name: 'page cache fetches', extra: { cache: { paths: ['/'], uncacheableMs: 0 } } },
] as const;

describe.each(VARIANTS)('response corpus through the HTTP/2 front: $name', ({ name: variant, extra }) => {
  const dir = scopeTempDir('roomgate-h2-corpus-');
  let ca: Buffer;
  let be: RawBackend;
  let gw: GatewayProc;
  const scripts = new Map<string, Answer>();
  const sessions = new Set<ClientHttp2Session>();

  /** A session over a TLS connection from `address` (127.0.0.1 for the test's own probes). */
  const session = async (address: string): Promise<Session> => {
    const frames = new Map<number, StreamFrames>();
    const s = await openH2(`https://${AUTHORITY}:${gw.port}`, () =>
      tappedConnection(tls.connect({ socket: net.connect({ host: '127.0.0.1', port: gw.port, localAddress: address, noDelay: true }), servername: AUTHORITY, ca, ALPNProtocols: ['h2'] }), frames),
      5_000,
      // Node's client takes 128 fields by default; an answer may carry up to 200 of the backend's and roomgate's own.
      { maxHeaderListPairs: 512 },
    );
    sessions.add(s);
    s.on('error', () => undefined);
    s.once('close', () => sessions.delete(s));
    return { s, frames };
  };
  const closeSession = (c: Session): void => {
    c.s.destroy();
    sessions.delete(c.s);
  };

  /** The process runs and a new h2 connection gets /healthz (proxied to the backend's echo: health.path is null). */
  const aliveProblem = async (): Promise<string | null> => {
    if (gw.child.exitCode !== null || gw.child.signalCode !== null) return `gateway exited (${gw.child.exitCode ?? gw.child.signalCode})`;
    let c: Session | undefined;
    try {
      c = await session('127.0.0.1');
      const o = await h2Request(c, 'GET', '/healthz');
      return o.status === 200 && o.ended ? null : `/healthz on h2: ${account(o)}`;
    } catch (err) {
      return `/healthz on h2 failed: ${(err as Error).message}`;
    } finally {
      if (c) closeSession(c);
    }
  };

  beforeAll(async () => {
    const caFiles = makeCa(dir, 'ca');
    const gwCert = makeSigned(dir, 'gw', caFiles, [AUTHORITY]);
    ca = readFileSync(caFiles.cert);
    be = await startRawBackend({ answer: scriptedByClient(scripts), upgrade: scriptedByClient(scripts) });
    gw = await startGateway({
      backends: [`b1=${be.url}`],
      config: {
        ...extra,
        health: { path: null },
        tls: { certs: [gwCert], reloadCheckMs: 0 },
        http2: { enabled: true },
        proxy: { websocketPaths: ['/ws/live/'], maxIdleSocketsPerBackend: 1, responseTimeoutMs: 3_000, rewriteLocation: true },
      },
    });
  });

  afterAll(async () => {
    for (const s of sessions) s.destroy();
    if (gw) await stop(gw);
    if (be) await be.close();
    await stopAll();
  });

  const warnings = (): number => gw.logs().filter((l) => l.level === 'warn').length;

  const problemsOf = (c: ResponseCase, o: H2Outcome): string[] => {
    const e = c.expect;
    const h2 = H2_EXPECT[c.name];
    const p: string[] = [];
    const seen = account(o);
    if (o.timedOut) p.push(`the stream neither ended nor was reset in time: ${seen}`);
    if (o.interim.length > 0) p.push(`informational heads reached the h2 client: ${o.interim.join(', ')}`);
    // A 101 is an extended CONNECT's 200: the stream stays open as the tunnel, and carries none of the 101's fields.
    const tunnel = c.request === 'upgrade' && e.statuses.at(-1) === 101 && !h2;
    const want = h2?.status ?? (tunnel ? 200 : (e.statuses.at(-1) as number));
    for (const n of h2?.absent ?? []) if (o.headers[n] !== undefined) p.push(`field ${n} on the ${want}: ${JSON.stringify(o.headers[n])}`);
    const body = h2 ? h2.body : c.request === 'HEAD' ? '' : e.body;
    const known = KNOWN.find((k) => k.cases.includes(c.name) && k.variants.includes(variant));
    if (known) {
      if (!known.holds(o)) p.push(`known problem changed (${known.problem}): now ${seen}; fixed? then remove its KNOWN entry`);
    } else if (e.cut && !h2) {
      // A cut body: the stream is reset with an error code (node's client takes a reset with
      // NO_ERROR for a clean end), with or without the head first; never ended as if complete.
      if (o.ended) p.push(`a cut body reached the h2 client as a complete response: ${seen}`);
      else if (o.rst === null || o.rst === http2.constants.NGHTTP2_NO_ERROR) p.push(`a cut body was not reset with an error code: ${seen}`);
      if (o.status !== null && o.status !== want) p.push(`a cut body's head: ${seen}, expected ${want} or none`);
    } else if (tunnel) {
      if (o.status !== 200 || o.rst !== null || o.error !== null || o.timedOut) p.push(`${seen}; expected the tunnel's 200`);
    } else {
      if (o.status !== want || !o.ended || o.error !== null) p.push(`${seen}; expected status ${want}, ended with END_STREAM${h2 ? ` (on h2: ${h2.reason})` : ''}`);
      if (body !== undefined && o.body.toString('latin1') !== body) p.push(`body ${JSON.stringify(o.body.toString('latin1').slice(0, 200))}, expected ${JSON.stringify(body)}`);
    }
    // The fields the case's client must see (HTTP/1.1 field lines, read as h2 fields).
    if (!h2 && !tunnel) {
      for (const s of e.contains ?? []) {
        if (NOT_ON_H2.test(s)) continue;
        const m = /^(?:\r\n)?([^:\r\n]+): (.*)\r\n$/s.exec(s);
        if (!m) throw new Error(`${c.name}: contains ${JSON.stringify(s)} has no h2 reading`);
        const got = ([] as string[]).concat(o.headers[(m[1] as string).toLowerCase()] ?? []);
        if (!got.includes(m[2] as string)) p.push(`field ${m[1]}: ${JSON.stringify(m[2])} missing (got ${JSON.stringify(got)})`);
      }
    }
    for (const s of e.lacks ?? []) {
      if (o.body.toString('latin1').includes(s)) p.push(`body contains ${JSON.stringify(s)}`);
      for (const [n, v] of Object.entries(o.headers)) {
        if (n.includes(s.toLowerCase())) p.push(`field name ${n} contains ${JSON.stringify(s)}`);
        if (([] as unknown[]).concat(v).some((x) => String(x).includes(s))) p.push(`field ${n} value contains ${JSON.stringify(s)}`);
      }
    }
    return p;
  };

  for (const corpusCase of RESPONSE_CASES) {
    it(`${corpusCase.cls}: ${corpusCase.name}`, async () => {
      const c = concrete(corpusCase, be.url.slice('http://'.length), `https://${AUTHORITY}`);
      // A gateway an earlier case stopped fails every later case at once, saying so.
      expect(gw.child.exitCode ?? gw.child.signalCode, 'the gateway exited in an earlier case').toBeNull();
      const address = clients.next();
      scripts.set(address, c.answer);
      const warnedBefore = warnings();
      const stderrBefore = gw.stderr.length;
      const p: string[] = [];
      const opened: Session[] = [];
      try {
        const s = await session(address);
        opened.push(s);
        const o = c.request === 'upgrade' ? await h2Request(s, 'GET', '/ws/live/', 4_000, true) : await h2Request(s, c.request === 'HEAD' ? 'HEAD' : 'GET', '/r');
        p.push(...problemsOf(c, o));
        // The client's h2 connection serves on: the backend now echoes this client.
        scripts.delete(address);
        const again = await h2Request(s, 'GET', '/again');
        if (again.status !== 200 || !again.ended || again.headers['x-echo-for'] !== address) {
          p.push(`the same h2 connection then got ${account(again)}, X-Echo-For ${JSON.stringify(again.headers['x-echo-for'])}`);
        }
        // A second client gets its own answer: nothing this answer left behind reaches it.
        const other = clients.next();
        const s2 = await session(other);
        opened.push(s2);
        const f = await h2Request(s2, 'GET', '/follow');
        if (f.status !== 200 || f.headers['x-echo-for'] !== other) p.push(`follow-up got ${account(f)}, X-Echo-For ${JSON.stringify(f.headers['x-echo-for'])}`);
      } catch (err) {
        p.push(`h2 client: ${(err as Error).message}`);
      } finally {
        for (const s of opened) closeSession(s);
      }
      if (c.expect.logged) await waitFor('the warning', 3_000, () => warnings() > warnedBefore).catch(() => p.push('no warning logged'));
      const dead = await aliveProblem();
      if (dead) p.push(dead);
      const errs = gw.stderr.slice(stderrBefore).filter((l) => /error|uncaught|throw/i.test(l));
      if (errs.length > 0) p.push(`gateway stderr: ${errs.slice(0, 5).join(' | ')}`);
      expect(p).toEqual([]);
    });
  }

  it('the backend parsed no request that no client can claim', async () => {
    expect(unclaimed(be, clients.all).map((r) => `${r.method} ${r.target} XFF=${JSON.stringify(r.xff)}`)).toEqual([]);
  });
});
