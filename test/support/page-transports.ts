// In-process parts for the page transports' unit tests (test/proxy/http-proxy.test.ts,
// test/proxy/lean-pages.test.ts): the runtime a page path is given (a real BackendPool, Placer,
// memory store, Router and Forwarder), scripted backends that keep every byte they receive and
// answer what the test says, and raw clients whose answers are read by the conformance referee
// (test/conformance/strict-parser.ts, which shares no code with roomgate). Nothing here sleeps:
// every wait is on a condition re-checked when bytes or closes arrive, with a timeout.
import { EventEmitter } from 'node:events';
import net, { type AddressInfo, type Socket } from 'node:net';
import { expect } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { Forwarder } from '../../src/forward/forwarder.js';
import { Forwarding } from '../../src/forward/forwarded.js';
import { REFUSALS, type RefusalCode } from '../../src/http/refusals.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { MemoryPlacementStore } from '../../src/placement/memory-store.js';
import { PageCookies } from '../../src/proxy/page-cookie.js';
import { Refuser } from '../../src/proxy/refuser.js';
import type { PagePathOptions } from '../../src/proxy/request-count.js';
import { Router } from '../../src/proxy/router.js';
import { createKeyExtractor } from '../../src/room/extract.js';
import { createRoomValidator } from '../../src/room/validate.js';
import type { Placer } from '../../src/runtime/placer.js';
import { BackendPool } from '../../src/runtime/pool.js';
import { TunnelRegistry } from '../../src/runtime/tunnels.js';
import { parseRequest, parseResponses, type ParsedRequest, type ParsedResponse } from '../conformance/strict-parser.js';
import { testPlacer } from './runtime-parts.js';

/** How long any one wait of these tests may take before it fails. */
export const WAIT_MS = 2_000;

/** Things to close after each test, closed last-added first. */
export class Cleanup {
  private readonly list: (() => Promise<void> | void)[] = [];

  add(fn: () => Promise<void> | void): void {
    this.list.push(fn);
  }

  async run(): Promise<void> {
    for (const fn of this.list.splice(0).reverse()) await fn();
  }
}

/** Something a test waits on: `until` re-checks its condition each time `changed()` is called. */
export class Watched {
  private readonly events = new EventEmitter();

  protected changed(): void {
    this.events.emit('changed');
  }

  until(holds: () => boolean, what: string, ms = WAIT_MS): Promise<void> {
    if (holds()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!holds()) return;
        clearTimeout(timer);
        this.events.off('changed', check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.events.off('changed', check);
        reject(new Error(`not within ${ms} ms: ${what}`));
      }, ms);
      this.events.on('changed', check);
    });
  }
}

/** One connection a scripted backend accepted. */
export interface BackendConn {
  readonly socket: Socket;
  /** Every byte received on it, in order. */
  bytes: Buffer;
  /** The complete requests read from those bytes. */
  readonly requests: ParsedRequest[];
  closed: boolean;
}

/** What a scripted backend does with each complete request (write an answer, close, nothing). */
export type Script = (req: ParsedRequest, conn: BackendConn, index: number) => void;

/** A backend on a raw socket: it keeps what it receives and answers as the test scripts it. */
export class ScriptedBackend extends Watched {
  readonly conns: BackendConn[] = [];
  private readonly server: net.Server;
  private seen = 0;

  private constructor(private readonly script: Script) {
    super();
    this.server = net.createServer((socket) => this.accept(socket));
  }

  static async start(script: Script, cleanup: Cleanup): Promise<ScriptedBackend> {
    const b = new ScriptedBackend(script);
    await new Promise<void>((resolve) => b.server.listen(0, '127.0.0.1', resolve));
    cleanup.add(() => b.close());
    return b;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Every complete request received, in order of arrival. */
  get requests(): ParsedRequest[] {
    return this.conns.flatMap((c) => c.requests);
  }

  private accept(socket: Socket): void {
    const conn: BackendConn = { socket, bytes: Buffer.alloc(0), requests: [], closed: false };
    this.conns.push(conn);
    let at = 0;
    socket.on('data', (chunk: Buffer) => {
      conn.bytes = Buffer.concat([conn.bytes, chunk]);
      for (;;) {
        const step = parseRequest(conn.bytes, at);
        if (step.kind !== 'message') break;
        at = step.message.end;
        conn.requests.push(step.message);
        this.script(step.message, conn, this.seen++);
      }
      this.changed();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      conn.closed = true;
      this.changed();
    });
    this.changed();
  }

  private async close(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A scripted answer with a Content-Length body. */
export function answer(status: number, body: string, fields: readonly string[] = []): string {
  return [`HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'Other'}`, ...fields, `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n');
}

/** A client on a raw socket: it keeps every byte of the answers, read by the referee. */
export class RawClient extends Watched {
  bytes = Buffer.alloc(0);
  closed = false;

  private constructor(readonly socket: Socket) {
    super();
    socket.on('data', (chunk: Buffer) => {
      this.bytes = Buffer.concat([this.bytes, chunk]);
      this.changed();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.changed();
    });
  }

  static async connect(port: number, cleanup: Cleanup): Promise<RawClient> {
    const socket = net.connect(port, '127.0.0.1');
    cleanup.add(() => void socket.destroy());
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new RawClient(socket);
  }

  /** Sends a request head (Host gw.test, then `fields`, each CRLF-terminated) and `body`. */
  send(method: string, target: string, fields = '', body = ''): void {
    this.socket.write(`${method} ${target} HTTP/1.1\r\nHost: gw.test\r\n${fields}\r\n${body}`);
  }

  /** The answers to requests of `methods`, once all of them arrived whole (a parse error fails). */
  async answers(methods: readonly string[]): Promise<ParsedResponse[]> {
    const read = (): ReturnType<typeof parseResponses> => parseResponses(this.bytes, methods, this.closed);
    await this.until(() => read().error !== null || read().messages.length >= methods.length, `${methods.length} answer(s)`);
    const parsed = read();
    if (parsed.error !== null) throw new Error(`the client got bytes that are not HTTP: ${parsed.error.reason} in ${JSON.stringify(this.bytes.toString('latin1'))}`);
    return parsed.messages;
  }
}

/** Checks that `m` is roomgate's `code` refusal (status and the catalogue's text); returns it. */
export function expectRefusal(m: ParsedResponse | undefined, code: RefusalCode): ParsedResponse {
  expect(m?.status).toBe(REFUSALS[code].status);
  expect(m?.body.toString('latin1')).toContain(REFUSALS[code].text);
  expect(field(m as ParsedResponse, 'X-Request-Id')).toMatch(/^[0-9a-f]{16}$/);
  return m as ParsedResponse;
}

/** A port nothing listens on: a connection to it is refused. */
export async function refusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export function backendAt(id: string, port: number, tls = false): ResolvedBackend {
  return { id, url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`, host: '127.0.0.1', port, weight: 1, ...(tls ? { tls } : {}) };
}

/** The runtime both page paths are given, over `backends` (all healthy by their checks). */
export interface PageRuntime {
  readonly pool: BackendPool;
  readonly placer: Placer;
  readonly router: Router;
  readonly forwarder: Forwarder;
  readonly metrics: Metrics;
  /** What composition gives both page paths (src/compose/data-plane.ts), with test timeouts. */
  readonly paths: PagePathOptions;
}

/**
 * Room keys come from the path prefix /r/<room>/ (stripped on the way to the backend) or the query
 * parameter `room`; page answers set the plain room cookie `rg`.
 */
export function pageRuntime(backends: readonly ResolvedBackend[], cleanup: Cleanup, over: Partial<PagePathOptions> = {}): PageRuntime {
  const logger = createLogger('silent', { write: () => undefined });
  const metrics = createMetrics(() => []);
  const pool = new BackendPool([...backends], 600_000);
  for (const b of backends) pool.setHealth(b.id, 'up', 'test');
  const store = new MemoryPlacementStore('gw-test', { idleTtlMs: 30_000, gatewayTtlMs: 5_000 });
  const placer = testPlacer({ store, pool, tunnels: new TunnelRegistry(pool), logger });
  cleanup.add(async () => {
    placer.close();
    await store.close();
  });
  const extractKey = createKeyExtractor({ sources: ['path-prefix', 'query'], validate: createRoomValidator('^[a-z0-9-]{1,64}$'), queryParam: 'room', pathPrefix: '/r/', pagePaths: [], cookieName: 'rg', signer: null, pinParam: 'roomgate_pin', pinSigner: null });
  const router = new Router({ extractKey, placer, pool, metrics, logger });
  const forwarder = new Forwarder({ placement: router, pool, metrics, logger });
  const forwarding = new Forwarding([]);
  const paths: PagePathOptions = {
    forwarder,
    pool,
    forwarding,
    connectTimeoutMs: 1_000,
    responseTimeoutMs: 1_500,
    maxIdleSocketsPerBackend: 4,
    backendIdleTimeoutMs: 30_000,
    clientWriteTimeoutMs: 0,
    cookies: new PageCookies({ name: 'rg', maxAgeS: 60, encode: (room) => room }, forwarding, logger),
    refuser: new Refuser({ pages: new Map(), logger, metrics }),
    metrics,
    logger,
    rewriteLocation: false,
    ...over,
  };
  return { pool, placer, router, forwarder, metrics, paths };
}

/** A room whose first placement is on backend `id` (the ring decides; names are tried in turn). */
export async function roomOn(router: Router, id: string): Promise<string> {
  for (let i = 0; i < 500; i++) {
    const d = await router.decide(`room-${i}`, Date.now());
    if ('route' in d && d.route === id) return `room-${i}`;
  }
  throw new Error(`no room is placed on ${id}`);
}

/** The value of a counter of `metrics` with exactly these labels (0 when never counted). */
export async function counted(metric: Metrics['proxyErrors'] | Metrics['httpRequests'], labels: Record<string, string>): Promise<number> {
  const values = (await metric.get()).values;
  const same = values.find((v) => Object.keys(labels).length === Object.keys(v.labels).length && Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l));
  return same?.value ?? 0;
}

/** A field's one value in a parsed message (names without case); undefined when absent. */
export function field(m: { readonly headers: readonly (readonly [string, string])[] }, name: string): string | undefined {
  const lower = name.toLowerCase();
  const found = m.headers.filter(([n]) => n.toLowerCase() === lower);
  if (found.length > 1) throw new Error(`${name} appears ${found.length} times`);
  return found[0]?.[1];
}
