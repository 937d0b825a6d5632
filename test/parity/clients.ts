// The clients of the front-parity suite: one per way a request can enter roomgate. Each sends one
// request of a row on a connection of its own, from the loopback source address it is given (the
// backend tells the fronts' requests apart by it: X-Forwarded-For), and reduces what came back to
// an Answer: the final status, whether the backend's tag came with it, whether a WebSocket tunnel
// carried the backend's first frame. Every wait is bounded.
//  - h1: exact bytes on a TCP connection, plain or TLS (ALPN http/1.1);
//  - h2: node:http2's client on TLS with ALPN h2 (headers as the row gives them, body as DATA);
//  - h2 extended CONNECT (RFC 8441) for the rows that open a WebSocket.
import { openH2 } from '../support/h2-session.js';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import http2 from 'node:http2';
import net from 'node:net';
import { parseResponse } from '../conformance/strict-parser.js';

/** What a client made of the gateway's answer. */
export interface Answer {
  /** The final status (101 on HTTP/1.1, 200 on an h2 extended CONNECT), or null: none came. */
  readonly status: number | null;
  /** The answer carries the backend's X-Parity-Backend tag: the backend wrote it. */
  readonly tag: string | null;
  /** After a 101 (or an extended CONNECT's 200): the backend's first frame came through. */
  readonly tunnel: boolean;
  /** The final answer's field names, lower case (h2: without pseudo-headers). */
  readonly fields: readonly string[];
  /** A short account for failure messages. */
  readonly note: string;
  /** The final answer's Location and Refresh values, in order. */
  readonly location?: readonly string[];
  readonly refresh?: readonly string[];
  /** The final answer's Retry-After values, in order. */
  readonly retryAfter?: readonly string[];
  /** The final answer's body (latin1). */
  readonly body?: string;
}

/** The backend's first WebSocket frame after its 101: an unmasked text frame "hi". */
export const FIRST_FRAME = Buffer.from('\x81\x02hi', 'latin1');

const TIMEOUT_MS = 4_000;

/** TLS from a chosen loopback source address (tls.connect takes none itself: a TCP socket made with one). */
function tlsOver(port: number, address: string, alpn: string): TLSSocket {
  const tcp = net.connect({ host: '127.0.0.1', port, localAddress: address });
  return tlsConnect({ socket: tcp, servername: 'a.example', ALPNProtocols: [alpn], rejectUnauthorized: false });
}

export interface H1Target {
  readonly port: number;
  readonly tls: boolean;
}

/** Sends the bytes, reads until a final answer is complete (and a tunnel's first frame), a close, or the timeout. */
export function h1Exchange(to: H1Target, bytes: Buffer, method: string, address: string): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = to.tls
      ? tlsOver(to.port, address, 'http/1.1')
      : net.connect({ host: '127.0.0.1', port: to.port, localAddress: address });
    let buf = Buffer.alloc(0);
    let finished = false;
    const finish = (eof: boolean): void => {
      if (finished) return;
      const a = readAnswer(buf, method, eof);
      if (a === null && !eof) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(a ?? { status: null, tag: null, tunnel: false, fields: [], note: `no complete answer (${eof ? 'closed' : 'timeout'}): ${JSON.stringify(buf.toString('latin1').slice(0, 300))}` });
    };
    const timer = setTimeout(() => finish(true), TIMEOUT_MS);
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      finish(false);
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.once(to.tls ? 'secureConnect' : 'connect', () => socket.write(bytes));
  });
}

/** The final answer in buf (interim 1xx skipped), or null while it is incomplete. */
function readAnswer(buf: Buffer, method: string, eof: boolean): Answer | null {
  let at = 0;
  for (;;) {
    if (at >= buf.length) return null;
    const step = parseResponse(buf, method, at, eof);
    if (step.kind === 'incomplete') return null;
    if (step.kind === 'error') return { status: null, tag: null, tunnel: false, fields: [], note: `unparseable answer (${step.reason}): ${JSON.stringify(buf.toString('latin1').slice(0, 300))}` };
    const m = step.message;
    const tag = m.headers.find(([n]) => n.toLowerCase() === 'x-parity-backend')?.[1] ?? null;
    const fields = m.headers.map(([n]) => n.toLowerCase());
    if (m.status === 101) {
      const tunnel = buf.subarray(m.end).includes(FIRST_FRAME);
      if (!tunnel && !eof) return null;
      return { status: 101, tag, tunnel, fields, note: '101' };
    }
    const all = (name: string): string[] => m.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
    if (m.status >= 200) return { status: m.status, tag, tunnel: false, fields, note: `${m.status} ${JSON.stringify(m.body.toString('latin1').slice(0, 120))}`, location: all('location'), refresh: all('refresh'), retryAfter: all('retry-after'), body: m.body.toString('latin1') };
    at = m.end;
  }
}

export interface H2Request {
  /** Pseudo-headers and fields, in the order given; a field given twice is sent twice. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Buffer | null;
  /** An extended CONNECT: the answer is a tunnel. */
  readonly connect: boolean;
}

/** Opens an h2 connection from `address`; waits for the server's SETTINGS (extended CONNECT needs them). */
function h2Session(port: number, address: string): Promise<http2.ClientHttp2Session> {
  return openH2(`https://a.example:${port}`, () => tlsOver(port, address, 'h2'), TIMEOUT_MS);
}

/** One request on a new h2 connection (closed afterwards). */
export async function h2Exchange(port: number, r: H2Request, address: string): Promise<Answer> {
  const s = await h2Session(port, address);
  try {
    return await new Promise<Answer>((resolve) => {
      const headers: Record<string, string | string[]> = {};
      for (const [n, v] of r.headers) {
        const prev = headers[n];
        headers[n] = prev === undefined ? v : ([] as string[]).concat(prev, v);
      }
      let stream: http2.ClientHttp2Stream;
      try {
        stream = s.request(headers, { endStream: r.body === null && !r.connect });
      } catch (err) {
        // node's client refused to send it: a row that says it can be sent on h2 is wrong.
        resolve({ status: null, tag: null, tunnel: false, fields: [], note: `node:http2 refused to send the request: ${(err as Error).message}` });
        return;
      }
      let status: number | null = null;
      let tag: string | null = null;
      let fields: string[] = [];
      let location: string[] = [];
      let refresh: string[] = [];
      let retryAfter: string[] = [];
      let data = Buffer.alloc(0);
      let done = false;
      const finish = (note: string): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        const tunnel = r.connect && status === 200 && data.includes(FIRST_FRAME);
        resolve({ status, tag, tunnel, fields, note, location, refresh, retryAfter, body: data.toString('latin1') });
        stream.close();
      };
      const timer = setTimeout(() => finish('timeout'), TIMEOUT_MS);
      stream.on('response', (h) => {
        status = Number(h[':status']);
        const t = h['x-parity-backend'];
        tag = typeof t === 'string' ? t : null;
        fields = Object.keys(h).filter((n) => !n.startsWith(':'));
        location = ([] as string[]).concat(h.location ?? []);
        refresh = ([] as string[]).concat(h.refresh ?? []);
        retryAfter = ([] as string[]).concat(h['retry-after'] ?? []);
      });
      stream.on('data', (c: Buffer) => {
        data = Buffer.concat([data, c]);
        if (r.connect && data.includes(FIRST_FRAME)) finish('tunnel');
      });
      stream.on('end', () => finish(`${status ?? 'no status'} ${JSON.stringify(data.toString('latin1').slice(0, 120))}`));
      stream.on('error', (err) => finish(`stream error: ${err.message}`));
      stream.on('close', () => finish(`stream closed (rst ${stream.rstCode ?? 'none'})`));
      if (r.body !== null) stream.end(r.body);
    });
  } finally {
    s.destroy();
  }
}
