// Raw-socket helpers shared by the conformance corpora, the fuzzer and test/integration/hardening:
// a client that writes exact bytes (optionally split, from a chosen loopback source address) and
// reads until the peer closes or a timeout; a node:http logging backend; the liveness check.
import http, { type IncomingMessage } from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface Exchange {
  /** Everything received. */
  readonly bytes: Buffer;
  /** The same, latin1 text. */
  readonly text: string;
  /** The peer closed the connection (not our timeout). */
  readonly closed: boolean;
}

export interface ExchangeOptions {
  /** Pause between parts. */
  gapMs?: number;
  /** Give up (and destroy the socket) after this long. */
  timeoutMs?: number;
  /** Source address (any of 127.0.0.0/8 on Linux): tells a client's requests apart at a backend. */
  localAddress?: string;
  /** Half-close after the last part: a well-behaved server answers what it has, then closes. */
  end?: boolean;
  /** Stop waiting this long after the last byte received, once something came back. */
  idleMs?: number;
  /** Stop waiting graceMs after what was received satisfies this (extra bytes still count). */
  until?: (received: Buffer) => boolean;
  graceMs?: number;
}

/** Writes bytes (latin1 text or buffers, with pauses between), reads until close or the timeout. */
export function exchange(port: number, parts: readonly (string | Buffer)[], opts: ExchangeOptions = {}): Promise<Exchange> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1', ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) });
    const got: Buffer[] = [];
    let closed = false;
    let finished = false;
    let idle: NodeJS.Timeout | undefined;
    const done = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      clearTimeout(idle);
      sock.destroy();
      const bytes = Buffer.concat(got);
      resolve({ bytes, text: bytes.toString('latin1'), closed });
    };
    const timer = setTimeout(done, opts.timeoutMs ?? 1_500);
    let satisfied = false;
    sock.on('data', (d: Buffer) => {
      got.push(d);
      if (opts.until && !satisfied && opts.until(Buffer.concat(got))) {
        satisfied = true;
        setTimeout(done, opts.graceMs ?? 100);
      }
      if (opts.idleMs !== undefined) {
        clearTimeout(idle);
        idle = setTimeout(done, opts.idleMs);
      }
    });
    sock.on('error', () => undefined);
    sock.on('close', () => {
      if (!finished) closed = true;
      done();
    });
    sock.on('connect', () => {
      let i = 0;
      const next = (): void => {
        if (sock.destroyed) return;
        if (i >= parts.length) {
          if (opts.end) sock.end();
          return;
        }
        const p = parts[i++] as string | Buffer;
        sock.write(typeof p === 'string' ? Buffer.from(p, 'latin1') : p);
        if (opts.gapMs) setTimeout(next, opts.gapMs);
        else next();
      };
      next();
    });
  });
}

/** The status codes of every response head in a client's received text (interim ones included). */
export const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

/** A WebSocket handshake for path, with extra header lines (each ending in CRLF). */
export const HANDSHAKE = (path: string, extra = ''): string =>
  `GET ${path} HTTP/1.1\r\nHost: game.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`;

/** The gateway child is running and answers /healthz; a reason otherwise. */
export async function aliveProblem(gw: { readonly url: string; readonly child?: { readonly exitCode: number | null; readonly signalCode: string | null } }): Promise<string | null> {
  // A gateway in the test's process has no exit to read: a crash there fails the test run itself.
  if (gw.child && (gw.child.exitCode !== null || gw.child.signalCode !== null)) return `gateway exited (${gw.child.exitCode ?? gw.child.signalCode})`;
  try {
    const res = await fetch(`${gw.url}/healthz`, { signal: AbortSignal.timeout(5_000) });
    await res.arrayBuffer();
    return res.status === 200 ? null : `/healthz answered ${res.status}`;
  } catch (err) {
    return `/healthz failed: ${(err as Error).message}`;
  }
}

export interface Seen {
  method: string;
  url: string;
  host: string | undefined;
  rawHeaders: string[];
  body: Buffer;
  /** The n-th request on its backend connection (1-based). */
  onConnection: number;
}

const servers = new Set<net.Server>();

/** A node:http backend (no upgrade listener unless given) that logs every request it parsed. */
export async function loggingBackend(
  answer: (req: IncomingMessage, res: http.ServerResponse, seen: Seen) => void = (_q, res) => res.end('ok'),
): Promise<{ url: string; seen: Seen[]; server: http.Server }> {
  const seen: Seen[] = [];
  const perSocket = new WeakMap<net.Socket, number>();
  const server = http.createServer((req, res) => {
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = { method: req.method ?? '', url: req.url ?? '', host: req.headers.host, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks), onConnection: n };
      seen.push(s);
      answer(req, res, s);
    });
  });
  servers.add(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

/** Closes every server loggingBackend started (call from afterAll). */
export async function closeLoggingBackends(): Promise<void> {
  await Promise.all(
    [...servers].map(
      (s) =>
        new Promise<void>((r) => {
          (s as http.Server).closeAllConnections?.();
          s.close(() => r());
        }),
    ),
  );
  servers.clear();
}
