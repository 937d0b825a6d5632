// The byte-logging backend: a node:net server that records every byte each connection brings,
// parses it incrementally with the referee (strict-parser.ts), and answers each parsed request.
// Default answer: a small keep-alive response echoing a backend-wide id, the request's
// X-Forwarded-For values and its method and target. A parse error is recorded and closes the
// connection. Variants: scripted raw bytes per request (the response corpus) and scripted answers
// to upgrades (a 101 opens a tunnel that records and echoes what follows; anything else keeps the
// connection parsing HTTP, so whatever a client slips behind a refused handshake shows up here).
import net, { type AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { fieldValues, parseRequest, type ParsedRequest } from './strict-parser.js';

export interface BackendRequest extends Pick<ParsedRequest, 'method' | 'target' | 'version' | 'headers' | 'framing' | 'body' | 'upgrade'> {
  /** Backend-wide sequence number, echoed in X-Echo-Id. */
  readonly id: number;
  readonly conn: number;
  readonly xff: readonly string[];
  readonly host: readonly string[];
}

export interface BackendConn {
  readonly id: number;
  readonly chunks: Buffer[];
  readonly requests: BackendRequest[];
  /** The referee's verdict when the bytes stopped being HTTP it accepts. */
  error: string | null;
  /** After a 101: the bytes the tunnel carried (echoed back). */
  tunnel: Buffer[];
  closed: boolean;
}

/** What the backend writes for a request; close: end the connection after it; null: stay silent. */
export interface Answer {
  readonly bytes: Buffer | string;
  readonly close?: boolean;
  /** Gap before the bytes (e.g. to see whether a client waits for an interim answer). */
  readonly delayMs?: number;
}

export type Answerer = (req: BackendRequest, conn: BackendConn) => Answer | null;

export interface RawBackend {
  readonly port: number;
  readonly url: string;
  readonly conns: BackendConn[];
  /** Every request parsed so far, over all connections, in arrival order. */
  readonly requests: BackendRequest[];
  /** Replaceable at run time (one backend serves a whole corpus). */
  answer: Answerer;
  upgrade: Answerer;
  /** Connections whose bytes broke the referee's rules. */
  errors(): string[];
  /** Drops what was recorded so far (requests, closed connections, raw bytes): long fuzz runs. */
  forget(): void;
  close(): Promise<void>;
}

const latin1 = (b: Buffer | string): Buffer => (typeof b === 'string' ? Buffer.from(b, 'latin1') : b);

/** The keep-alive echo: `X-Echo-Id`, `X-Echo-For` (the XFF values joined by " | "), body "id METHOD target". */
export function echoAnswer(req: BackendRequest): Answer {
  const body = req.method === 'HEAD' ? '' : `${req.id} ${req.method} ${req.target}\n`;
  const length = req.method === 'HEAD' ? Buffer.byteLength(`${req.id} ${req.method} ${req.target}\n`, 'latin1') : body.length;
  return {
    bytes: `HTTP/1.1 200 OK\r\nX-Echo-Id: ${req.id}\r\nX-Echo-For: ${req.xff.join(' | ')}\r\nContent-Type: text/plain\r\nContent-Length: ${length}\r\n\r\n${body}`,
  };
}

/** A valid 101 for a WebSocket handshake, followed by one unmasked text frame "hi". */
export function accept101(req: BackendRequest): Answer {
  const key = fieldValues(req, 'sec-websocket-key')[0] ?? '';
  const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  return { bytes: `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n\x81\x02hi` };
}

export async function startRawBackend(o: { answer?: Answerer; upgrade?: Answerer; /** Keep each connection's raw bytes (default true). */ keepBytes?: boolean } = {}): Promise<RawBackend> {
  const conns: BackendConn[] = [];
  const requests: BackendRequest[] = [];
  const sockets = new Set<net.Socket>();
  let nextId = 1;
  let nextConn = 1;
  const be = {
    answer: o.answer ?? echoAnswer,
    upgrade: o.upgrade ?? accept101,
  };

  const server = net.createServer((socket) => {
    sockets.add(socket);
    const conn: BackendConn = { id: nextConn++, chunks: [], requests: [], error: null, tunnel: [], closed: false };
    conns.push(conn);
    let buf: Buffer = Buffer.alloc(0);
    let tunnel = false;
    // Answers go out in request order even when one is delayed.
    let queue: Promise<void> = Promise.resolve();
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      conn.closed = true;
      sockets.delete(socket);
    });
    const send = (a: Answer | null, opensTunnel: boolean): void => {
      queue = queue.then(async () => {
        if (a === null || socket.destroyed) return;
        if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
        if (socket.destroyed) return;
        if (a.close) socket.end(latin1(a.bytes));
        else socket.write(latin1(a.bytes));
        if (opensTunnel && tunnel && buf.length > 0) {
          // Bytes that came behind the handshake belong to the tunnel.
          conn.tunnel.push(buf);
          socket.write(buf);
          buf = Buffer.alloc(0);
        }
      });
    };
    socket.on('data', (chunk: Buffer) => {
      if (o.keepBytes !== false) conn.chunks.push(chunk);
      if (tunnel) {
        if (o.keepBytes !== false) conn.tunnel.push(chunk);
        if (!socket.destroyed) socket.write(chunk);
        return;
      }
      if (conn.error !== null) return;
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        const step = parseRequest(buf, 0);
        if (step.kind === 'incomplete') return;
        if (step.kind === 'error') {
          conn.error = `${step.reason} at byte ${step.at}`;
          socket.destroy();
          return;
        }
        const m = step.message;
        buf = buf.subarray(m.end);
        const req: BackendRequest = {
          id: nextId++,
          conn: conn.id,
          method: m.method,
          target: m.target,
          version: m.version,
          headers: m.headers,
          framing: m.framing,
          body: Buffer.from(m.body),
          upgrade: m.upgrade,
          xff: fieldValues(m, 'x-forwarded-for'),
          host: fieldValues(m, 'host'),
        };
        conn.requests.push(req);
        requests.push(req);
        if (m.upgrade) {
          const a = be.upgrade(req, conn);
          // Only a 101 turns the connection into a tunnel; any other answer keeps it HTTP.
          tunnel = a !== null && /(?:^|\r\n\r\n)HTTP\/1\.[01] 101 /.test(latin1(a.bytes).toString('latin1'));
          send(a, true);
          if (tunnel) return;
        } else send(be.answer(req, conn), false);
        if (buf.length === 0) return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    conns,
    requests,
    get answer() {
      return be.answer;
    },
    set answer(f: Answerer) {
      be.answer = f;
    },
    get upgrade() {
      return be.upgrade;
    },
    set upgrade(f: Answerer) {
      be.upgrade = f;
    },
    errors: () => conns.flatMap((c) => (c.error === null ? [] : [c.error])),
    forget: () => {
      requests.length = 0;
      for (let i = conns.length - 1; i >= 0; i--) {
        const c = conns[i] as BackendConn;
        if (c.closed) conns.splice(i, 1);
        else {
          c.requests.length = 0;
          c.chunks.length = 0;
          c.tunnel.length = 0;
        }
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
