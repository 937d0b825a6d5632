/**
 * Demo backend for roomgate: a single-process room app shaped like a djust
 * (Django LiveView) game server, on roomgate's backend kit (src/backend-kit, docs/node-kit.md):
 * the game is game.ts, its state room-moves.ts, its pages page.ts; this file is the HTTP routes,
 * the options and the CLI.
 *
 * Room state lives only in this process's memory, exactly like a djust app
 * without a channel layer: the sockets of each room, and its moves (every `event` is one, counted
 * and kept among the last few), which the room handoff's hooks carry to another process
 * (docs/handoff.md). That is the whole point: if a proxy ever splits one
 * room across two of these processes, the members of that room stop seeing each
 * other, and `/_backend/rooms` on each backend makes the split visible. The
 * roomgate tests use these backends as that witness.
 *
 * CLI:  node dist/examples/demo-backend/server.js --port N --id ID [--host H] [--tick-ms N]
 *         [--healthz-status N] [--allowed-hosts NAME,NAME] [--handoff-path PATH] [--handoff-version 1|2]
 *         [--handoff-resume on|off]
 *       (env PORT, BACKEND_ID, HOST, TICK_MS as fallbacks; port 0 = ephemeral)
 *       --healthz-status: what GET /healthz answers (default 200; 404 = an app without the route).
 *       --allowed-hosts: like Django's ALLOWED_HOSTS: a request or upgrade whose Host (without
 *         port) is not listed gets 400. Default: any Host.
 *       --handoff-path: where the room handoff's hooks are served (roomgate's handoff.path,
 *         default /_roomgate/handoff; docs/handoff.md). They verify roomgate's proof like pushes.
 *       --handoff-version: the protocol its hello says (default 2: it takes a held socket's
 *         messages and resumes sockets; 1: the hooks without them, as an app that has not moved to
 *         version 2).
 *       --handoff-resume: on: its hello offers the socket resume too (the demo roomgate starts
 *         turns it on); off, the default: version 2 without it (held messages only).
 *       env ROOMGATE_BACKEND_KEYS: this backend's own keys, comma-separated, as
 *         `roomgate backend-key ID` prints them (ROOMGATE_BACKEND_KEYS_FILE: a file holding them,
 *         read again on SIGHUP, so keys rotate without a restart); without one every push and
 *         handoff call is refused (403). ROOMGATE_BACKEND_ID: this backend's id in roomgate's
 *         configuration, the destination every call's proof must name (default: --id).
 *       SIGUSR2 toggles GET /healthz between its status and 503 (health checks fail while the
 *       process keeps serving everything else).
 *       These make it behave like the apps roomgate's health checks must cope with; each is
 *       off by default, and none can be switched over HTTP.
 * djust's HTTP fallback: a POST to /game/{room}/ with X-Djust-Event is the room's next move, answered
 * with its number (`move`) and the `version` that follows the last one the room sent to that page
 * (the page: its `djust_session` cookie, game.ts; test/support/djust-client.mjs sends the POST
 * while its socket is closed). A page the room has no view of gets a fresh one, never an error.
 * When listening it prints exactly one JSON line to stdout:
 *       {"event":"listening","id":"ID","port":<actual port>}
 * Everything else goes to stderr so a parent process can parse stdout safely.
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { WebSocketServer, WebSocket } from 'ws';
import { CLOSE_SERVICE_RESTART, createBackendKit, DEFAULT_HANDOFF_PATH, keysFromEnv, type BackendKit } from '../../src/backend-kit/index.js';
import { Game, pageKey, ROOM_MOVING, validRoom } from './game.js';
import { PAGE_SCRIPT_CSP, PAGE_STYLE_CSP, renderGamePage, renderIndexPage } from './page.js';
import { createMoveStore } from './room-moves.js';

export { GAME_PAGE_TONES, INDEX_ROOMS, toneOf } from './page.js';

export interface DemoBackendOptions {
  port?: number;
  host?: string;
  id: string;
  /** Broadcast a ~140-byte tick frame to every room every N ms (0 = off). */
  tickMs?: number;
  /** Status of GET /healthz (default 200; 404: an app without the route). */
  healthzStatus?: number;
  /** Like Django's ALLOWED_HOSTS: other Host names (port ignored) get 400. Default: any. */
  allowedHosts?: readonly string[];
  /** This backend's own keys (`roomgate backend-key ID`); none: every push and handoff call refused. */
  callKeys?: readonly string[];
  /** This backend's id in roomgate's configuration, which every call's proof names; default `id`. */
  callerId?: string;
  /** Where the room handoff's hooks are served (roomgate's handoff.path); default /_roomgate/handoff. */
  handoffPath?: string;
  /** The handoff protocol version its hello answers: 2 (default; it takes held messages) or 1. */
  handoffVersion?: 1 | 2;
  /** Version 2's socket resume offered in the hello (default false: the demo roomgate starts turns it on). */
  handoffResume?: boolean;
  /** Rooms whose moves are kept without a socket here; past it the oldest such room is forgotten. */
  maxRoomStates?: number;
}

export interface DemoBackend {
  port: number;
  id: string;
  /** Makes GET /healthz answer 503 (true) or its configured status again (false); SIGUSR2 in the CLI. */
  failHealth(fail: boolean): void;
  readonly healthFailing: boolean;
  /** Replaces the keys calls are verified with (a rotation: the new set overlaps the old). */
  setCallKeys(keys: readonly string[]): void;
  close(): Promise<void>;
}


const SLOW_MAX_MS = 60_000;
const BIG_MAX_KB = 10_240;
const TICK_FRAME_BYTES = 140;
/** Same rule roomgate uses; anything else in the header is ignored, never reflected. */
const FORWARDED_PREFIX_RE = /^\/[A-Za-z0-9_.:/-]{0,200}$/;
const MAX_ROOM_STATES = 10_000;
/** The HTTP fallback's event body, at most (djust's events are small). */
const HTTP_EVENT_MAX_BYTES = 4096;


/** Split req.url without `new URL()`: a path like `//host/x` must not become a host. */
function splitUrl(raw: string | undefined): { pathname: string; query: URLSearchParams } {
  const url = raw ?? '/';
  const q = url.indexOf('?');
  return q < 0
    ? { pathname: url, query: new URLSearchParams() }
    : { pathname: url.slice(0, q), query: new URLSearchParams(url.slice(q + 1)) };
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

function intParam(value: string | null, max: number): number {
  const n = Number.parseInt(value ?? '', 10);
  return Number.isFinite(n) && n > 0 ? Math.min(n, max) : 0;
}

export function startDemoBackend(opts: DemoBackendOptions): Promise<DemoBackend> {
  const id = opts.id;
  const host = opts.host ?? '127.0.0.1';
  const tickMs = opts.tickMs ?? 0;
  const healthzStatus = opts.healthzStatus ?? 200;
  const allowedHosts = opts.allowedHosts === undefined ? null : new Set(opts.allowedHosts.map((h) => h.toLowerCase()));
  let callKeys = opts.callKeys ?? [];
  let healthFailing = false;

  /** Django's rule: the Host without its port must be listed (when a list is given). */
  function hostAllowed(req: IncomingMessage): boolean {
    if (allowedHosts === null) return true;
    const host = (req.headers.host ?? '').toLowerCase();
    const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
    return allowedHosts.has(name);
  }

  // The room state the handoff carries; a room with sockets here or frozen by a handoff is never evicted.
  const moves = createMoveStore(opts.maxRoomStates ?? MAX_ROOM_STATES, (room) => game.live(room) || kit.rooms.frozen(room));
  const game = new Game(id, moves, () => kit);
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  // Let the proxy (and tests) see which backend answered the upgrade too.
  wss.on('headers', (headers) => headers.push(`X-Backend-Id: ${id}`));
  // roomgate's receiving half: proofs, the fence, pushes, the handoff hooks and the resume.
  const kit: BackendKit = createBackendKit({
    backendId: opts.callerId ?? id,
    keys: () => callKeys,
    wss,
    onSocket: game.onSocket,
    resumeSocket: game.resumeSocket,
    exportSocket: game.exportSocket,
    applyMessages: game.applyMessages,
    deliver: game.deliver,
    exportRoom: (room) => (game.live(room) || moves.get(room) !== undefined ? moves.serialize(room) : null),
    importRoom: (room, blob) => moves.restore(room, blob),
    onDrop: (room) => {
      moves.drop(room);
      game.dropped(room);
    },
    handoffPath: opts.handoffPath ?? DEFAULT_HANDOFF_PATH,
    handoffVersion: opts.handoffVersion ?? 2,
    resume: opts.handoffResume ?? false,
    // As before the kit: a socket routed under an older epoch is taken (only its pushes are refused).
    refuseOlderSockets: false,
    maxBodyBytes: 1 << 20, // pushes and blobs up to 1 MiB, as before the kit
    log: (line) => process.stderr.write(`demo-backend ${id}: ${line}\n`),
  });

  // --- HTTP ---------------------------------------------------------------------

  function text(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  function json(res: ServerResponse, status: number, value: unknown): void {
    const body = JSON.stringify(value);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  function echo(req: IncomingMessage, res: ServerResponse): void {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () =>
      json(res, 200, {
        id,
        method: req.method,
        url: req.url,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bodyBytes: bytes,
        bodySha256: hash.digest('hex'),
        remoteAddress: req.socket.remoteAddress ?? null,
      }),
    );
    req.on('error', () => res.destroy());
  }

  function big(res: ServerResponse, kb: number): void {
    const chunk = Buffer.alloc(64 * 1024, 'roomgate-demo-big-body\n');
    let left = kb * 1024;
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': left });
    // Respect backpressure so a slow proxy really sees a streamed body.
    const pump = (): void => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  }

  /** djust's HTTP fallback, minimal: a POST to the game page with `X-Djust-Event`, its JSON body the event's data. */
  function httpEvent(req: IncomingMessage, res: ServerResponse, pathname: string): void {
    const page = /^\/game\/([^/]+)\/$/.exec(pathname);
    const room = page?.[1] ? validRoom(safeDecode(page[1])) : null;
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= HTTP_EVENT_MAX_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      if (room === null) return text(res, 404, 'not found\n');
      if (size > HTTP_EVENT_MAX_BYTES) return text(res, 413, 'event too large\n');
      let data: unknown = null;
      try {
        data = JSON.parse(Buffer.concat(chunks).toString() || 'null');
      } catch {
        return text(res, 400, 'expected a JSON body\n');
      }
      // The page is its session cookie, which the browser sends with this POST as with its socket.
      const done = game.httpEvent(room, data, pageKey(req.headers.cookie));
      if (done === null) return json(res, 503, ROOM_MOVING);
      json(res, 200, { type: 'patch', room, from: 'http', data, move: done.move, version: done.version });
    });
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader('X-Backend-Id', id);
    const { pathname, query } = splitUrl(req.url);
    const isGet = req.method === 'GET' || req.method === 'HEAD';

    if (!hostAllowed(req)) {
      req.resume();
      return text(res, 400, 'Bad Request (400): Host not in allowed hosts\n');
    }
    if (pathname.startsWith('/_backend/echo')) return echo(req, res);
    // roomgate's calls: the push receiver and the handoff hooks (the kit checks every proof).
    if (kit.handleRequest(req, res)) return;
    if (req.method === 'POST' && req.headers['x-djust-event'] !== undefined) return httpEvent(req, res, pathname);

    // Other routes ignore the body; drain it so keep-alive connections stay usable.
    req.resume();

    const gamePage = /^\/game\/([^/]+)\/$/.exec(pathname);
    const room = gamePage?.[1] ? validRoom(safeDecode(gamePage[1])) : null;
    if (isGet && room) {
      const prefixHeader = req.headers['x-forwarded-prefix'];
      const prefix =
        typeof prefixHeader === 'string' && FORWARDED_PREFIX_RE.test(prefixHeader)
          ? prefixHeader.replace(/\/+$/, '') // "/r/42/" and "/r/42" mean the same mount point
          : '';
      const body = renderGamePage(id, room, `${prefix}/ws/live/`);
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'Cache-Control': 'no-store',
        'Content-Security-Policy': `default-src 'none'; script-src ${PAGE_SCRIPT_CSP}; style-src ${PAGE_STYLE_CSP}; connect-src 'self' ws: wss:`,
      });
      res.end(body);
      return;
    }
    if (isGet && pathname === '/') {
      const body = renderIndexPage(id);
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'Cache-Control': 'no-store',
        'Content-Security-Policy': `default-src 'none'; style-src ${PAGE_STYLE_CSP}`,
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    if (isGet && pathname === '/healthz') {
      if (healthFailing) return text(res, 503, 'failing on purpose (SIGUSR2)\n');
      return text(res, healthzStatus, healthzStatus === 200 ? 'ok' : healthzStatus === 404 ? 'not found\n' : `status ${healthzStatus}\n`);
    }
    if (isGet && pathname === '/_backend/rooms') {
      // fromEntries defines own properties, so a room called "__proto__" is listed like any other.
      const counts = Object.fromEntries([...game.members].map(([name, members]) => [name, members.size]));
      return json(res, 200, { id, rooms: counts, sockets: game.clients.size });
    }
    const movesOf = /^\/_backend\/moves\/([^/]+)$/.exec(pathname);
    const movesRoom = movesOf?.[1] ? validRoom(safeDecode(movesOf[1])) : null;
    if (isGet && movesRoom !== null) {
      // A room's state as this process holds it (tests and the chaos runs count the moves kept).
      const state = moves.get(movesRoom);
      return json(res, 200, { id, room: movesRoom, epoch: kit.rooms.get(movesRoom)?.epoch ?? null, moves: state?.moves ?? 0, last: state?.last ?? [], frozen: kit.rooms.frozen(movesRoom) });
    }
    if (isGet && pathname === '/_backend/slow') {
      const ms = intParam(query.get('ms'), SLOW_MAX_MS);
      const timer = setTimeout(() => json(res, 200, { id, sleptMs: ms }), ms);
      res.on('close', () => clearTimeout(timer)); // client or proxy gave up
      return;
    }
    if (isGet && pathname === '/_backend/big') return big(res, intParam(query.get('kb'), BIG_MAX_KB));
    text(res, 404, 'not found\n');
  }

  const server = http.createServer(onRequest);

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if (!hostAllowed(req)) {
      socket.end(`HTTP/1.1 400 Bad Request\r\nX-Backend-Id: ${id}\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nbad request\n`);
      return;
    }
    if (!splitUrl(req.url).pathname.endsWith('/ws/live/')) {
      socket.end(
        `HTTP/1.1 404 Not Found\r\nX-Backend-Id: ${id}\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n`,
      );
      return;
    }
    // The fence, the resume handshake, then the game (game.ts) for every socket accepted.
    kit.handleUpgrade(req, socket, head);
  });

  // --- ticks (benchmarks) --------------------------------------------------------

  let tick: NodeJS.Timeout | undefined;
  if (tickMs > 0) {
    tick = setInterval(() => {
      const t = Date.now();
      // Pad so the whole frame is ~TICK_FRAME_BYTES: a fixed, realistic frame size for throughput numbers.
      const bare = JSON.stringify({ type: 'tick', t, pad: '' }).length;
      const frame = { type: 'tick', t, pad: '.'.repeat(Math.max(0, TICK_FRAME_BYTES - bare)) };
      for (const room of game.members.keys()) game.broadcast(room, frame);
    }, tickMs);
  }

  // --- lifecycle ----------------------------------------------------------------

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= (async () => {
      if (tick) clearInterval(tick);
      kit.close();
      const sockets = [...game.clients.keys()];
      const closed = sockets.map(
        (ws) => new Promise<void>((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve() : ws.once('close', () => resolve()))),
      );
      for (const ws of sockets) ws.close(CLOSE_SERVICE_RESTART, 'service restart');
      // Give clients a moment to answer the close handshake, then stop waiting:
      // ws's own close timeout (30 s) is far beyond our 2 s shutdown budget.
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(closed), new Promise<void>((r) => (grace = setTimeout(r, 1000)))]);
      clearTimeout(grace);
      for (const ws of game.clients.keys()) ws.terminate();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // keep-alive and in-flight (e.g. /slow) requests
      });
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    })();
    return closing;
  }

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      const addr = server.address();
      const port = typeof addr === 'object' && addr ? addr.port : (opts.port ?? 0);
      resolve({
        port,
        id,
        close,
        failHealth: (fail) => {
          healthFailing = fail;
        },
        get healthFailing() {
          return healthFailing;
        },
        setCallKeys: (keys) => {
          callKeys = keys;
        },
      });
    });
  });
}

// --- CLI ---------------------------------------------------------------------------

function parseArgs(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${arg}`);
    const eq = arg.indexOf('=');
    if (eq > 0) out[arg.slice(2, eq)] = arg.slice(eq + 1);
    else {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value`);
      out[arg.slice(2)] = value;
    }
  }
  return out;
}

function intArg(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max) throw new Error(`--${name} must be an integer 0..${max}, got ${value}`);
  return n;
}

function healthzStatusArg(value: string | undefined): number {
  const n = intArg('healthz-status', value, 200, 599);
  if (n < 200) throw new Error(`--healthz-status must be an HTTP status 200..599, got ${value}`);
  return n;
}

function onOff(name: string, value: string): boolean {
  if (value === 'on' || value === 'off') return value === 'on';
  throw new Error(`--${name} must be on or off, got ${value}`);
}

function badVersion(value: string): never {
  throw new Error(`--handoff-version must be 1 or 2, got ${value}`);
}

/** roomgate's handoff.path: an absolute path the hooks are served under. */
function handoffPathArg(value: string): string {
  if (!/^\/[A-Za-z0-9_.\/-]{1,200}$/.test(value)) throw new Error(`--handoff-path must be an absolute path, got ${value}`);
  return value;
}

async function main(): Promise<void> {
  let backend: DemoBackend;
  try {
    const args = parseArgs(process.argv.slice(2));
    backend = await startDemoBackend({
      port: intArg('port', args.port ?? process.env.PORT, 0, 65_535),
      // Empty env values count as unset.
      host: args.host ?? (process.env.HOST || '127.0.0.1'),
      id: args.id ?? (process.env.BACKEND_ID || `backend-${process.pid}`),
      tickMs: intArg('tick-ms', args['tick-ms'] ?? process.env.TICK_MS, 0, 3_600_000),
      healthzStatus: healthzStatusArg(args['healthz-status']),
      ...(args['allowed-hosts'] === undefined ? {} : { allowedHosts: args['allowed-hosts'].split(',').map((h) => h.trim()).filter(Boolean) }),
      ...(args['handoff-path'] === undefined ? {} : { handoffPath: handoffPathArg(args['handoff-path']) }),
      ...(args['handoff-version'] === undefined ? {} : { handoffVersion: args['handoff-version'] === '1' ? 1 : args['handoff-version'] === '2' ? 2 : badVersion(args['handoff-version']) }),
      ...(args['handoff-resume'] === undefined ? {} : { handoffResume: onOff('handoff-resume', args['handoff-resume']) }),
      // This backend's keys (ROOMGATE_BACKEND_KEYS or the file ROOMGATE_BACKEND_KEYS_FILE names): a
      // text that is not a key stops the start with the reason.
      callKeys: keysFromEnv(process.env),
      ...(process.env.ROOMGATE_BACKEND_ID ? { callerId: process.env.ROOMGATE_BACKEND_ID } : {}),
    });
  } catch (err) {
    process.stderr.write(`demo-backend: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  // The one line a parent process waits for; nothing else is written to stdout.
  process.stdout.write(`${JSON.stringify({ event: 'listening', id: backend.id, port: backend.port })}\n`);

  const shutdown = (signal: string): void => {
    process.stderr.write(`demo-backend ${backend.id}: ${signal}, closing\n`);
    // Hard stop well inside the 2 s budget even if something hangs.
    setTimeout(() => process.exit(0), 1800).unref();
    backend.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  // A rotation: the keys file is read again, and the new set replaces the old.
  process.on('SIGHUP', () => {
    try {
      backend.setCallKeys(keysFromEnv(process.env));
      process.stderr.write(`demo-backend ${backend.id}: SIGHUP, call keys read again\n`);
    } catch (err) {
      process.stderr.write(`demo-backend ${backend.id}: SIGHUP, the call keys stay as they were: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  });
  process.on('SIGUSR2', () => {
    backend.failHealth(!backend.healthFailing);
    process.stderr.write(`demo-backend ${backend.id}: SIGUSR2, /healthz ${backend.healthFailing ? 'fails (503)' : 'answers again'}\n`);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

function isMainModule(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return import.meta.url === pathToFileURL(entry).href;
  }
}

if (isMainModule()) void main();
