// Real processes for integration tests: demo backends and gateways as child processes, CLI runs,
// WebSocket clients. Everything started here is tracked and torn down by stopAll(); every wait
// has a timeout.
import { backendKeys } from '../../src/http/call-proof.js';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { stringify } from 'yaml';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const MAIN = join(ROOT, 'dist/src/main.js');
export const BACKEND = join(ROOT, 'dist/examples/demo-backend/server.js');

export interface Proc {
  readonly child: ChildProcess;
  readonly lines: string[];
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
}

export interface BackendProc extends Proc {
  readonly id: string;
  readonly port: number;
  readonly url: string;
}

export interface GatewayProc extends Proc {
  readonly port: number;
  readonly adminPort: number;
  readonly url: string;
  readonly wsUrl: string;
  /** Log lines (parsed JSON) so far. */
  logs(): Record<string, unknown>[];
  /** stderr lines so far (the demo banner, errors). */
  readonly stderr: string[];
}

const live = new Set<Proc>();
const tempDirs = new Set<string>();
const sockets = new Set<WebSocket>();

function track(child: ChildProcess): Proc {
  const lines: string[] = [];
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  const proc: Proc = { child, lines, exited };
  live.add(proc);
  void exited.then(() => live.delete(proc));
  if (child.stdout) createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
  return proc;
}

/** Polls check (sync or async) until it returns something truthy; rejects after timeoutMs. */
export function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => T | undefined | false | null | Promise<T | undefined | false | null>,
  everyMs = 20,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const tick = async (): Promise<void> => {
      let v: T | undefined | false | null;
      try {
        v = await check();
      } catch (err) {
        reject(err as Error);
        return;
      }
      if (v !== undefined && v !== false && v !== null) return resolve(v);
      if (Date.now() > deadline) return reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      setTimeout(() => void tick(), everyMs);
    };
    void tick();
  });
}

/** p, or a rejection naming `what` after ms. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_r, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

function failOnExit(proc: Proc, what: string): Promise<never> {
  return proc.exited.then((code) => {
    throw new Error(`${what} exited early (${code}); stderr/stdout:\n${proc.lines.join('\n')}`);
  });
}

/**
 * The secret every test gateway signs its calls with (backendCalls.secrets); every test backend
 * verifies them with its own key derived from it (`backendEnv`), so pushes and handoffs work as in
 * a configured deployment.
 */
export const CALL_SECRET = 'test-call-secret-0123456789abcdef0123';

/** The environment that gives backend `id` its own call key (as `roomgate backend-key` prints it). */
export function backendEnv(id: string, secrets: readonly string[] = [CALL_SECRET]): Record<string, string> {
  return { ROOMGATE_BACKEND_ID: id, ROOMGATE_BACKEND_KEYS: backendKeys(secrets, id).join(','), ROOMGATE_CALL_SECRETS: '' };
}

export async function startBackend(id: string, extraArgs: string[] = []): Promise<BackendProc> {
  const child = spawn(process.execPath, [BACKEND, '--port', '0', '--id', id, ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...backendEnv(id) } });
  const proc = track(child);
  child.stderr?.resume();
  const line = await Promise.race([
    waitFor(`backend ${id} listening`, 10_000, () => proc.lines.find((l) => l.includes('"listening"'))),
    failOnExit(proc, `backend ${id}`),
  ]);
  const port = (JSON.parse(line) as { port: number }).port;
  return { ...proc, id, port, url: `http://127.0.0.1:${port}` };
}

export function startBackends(ids: readonly string[], extraArgs: string[] = []): Promise<BackendProc[]> {
  return Promise.all(ids.map((id) => startBackend(id, extraArgs)));
}

/** A temp YAML config file, removed by stopAll(). */
export function writeConfig(config: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-test-'));
  tempDirs.add(dir);
  const file = join(dir, 'roomgate.yaml');
  writeFileSync(file, stringify(config));
  return file;
}

export interface GatewayOptions {
  backends?: readonly { readonly id: string; readonly url: string }[] | readonly string[];
  /** YAML config content (written to a temp file); false: no config file at all (the environment only). */
  config?: Record<string, unknown> | false;
  env?: Record<string, string>;
  args?: string[];
  /** The log line that says the gateway listens (default: the first "listening" line). */
  readyLine?: (line: string) => boolean;
  /** How long to wait for readyLine (default 30 s; a cluster starts several processes first). */
  readyTimeoutMs?: number;
}

export const TEST_SECRET = 'test-secret-0123456789abcdef';

/**
 * Tests of routing rules compare with `roomgate where` (the ring owner of a new room), so bounded
 * loads are off unless a test turns them on (placement tests do, with the real default).
 */
const TEST_DEFAULTS = { placement: { boundedLoadFactor: 0 }, backendCalls: { secrets: [CALL_SECRET] } };

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      prev && typeof prev === 'object' && !Array.isArray(prev) && v && typeof v === 'object' && !Array.isArray(v)
        ? merge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** The config file startGateway gives the gateway (test defaults under `o.config`); undefined: none. */
export function gatewayConfigFile(o: GatewayOptions): string | undefined {
  return o.config === false ? undefined : writeConfig(merge(TEST_DEFAULTS, o.config ?? {}));
}

/** The environment startGateway gives the gateway: `env` over the test defaults. */
export function gatewayEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ROOMGATE_ADMIN_PORT: '0',
    ROOMGATE_HOST: '127.0.0.1',
    ROOMGATE_COOKIE_SECRETS: TEST_SECRET,
    ROOMGATE_LOG_LEVEL: 'debug',
    // Node's compile cache (scripts/with-node24.sh): the run's gateways compile roomgate once.
    ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
    ...env,
  };
}

export async function startGateway(o: GatewayOptions = {}): Promise<GatewayProc> {
  const args = [MAIN, 'start', '--port', '0'];
  for (const b of o.backends ?? []) args.push('--backend', typeof b === 'string' ? b : `${b.id}=${b.url}`);
  const file = gatewayConfigFile(o);
  if (file !== undefined) args.push('--config', file);
  args.push(...(o.args ?? []));
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: gatewayEnv(o.env) });
  const proc = track(child);
  const stderr: string[] = [];
  if (child.stderr) createInterface({ input: child.stderr }).on('line', (l) => stderr.push(l));
  // About half a second on an idle machine; 30 s because a shared CI machine with several suites
  // running once took over 15 s. A gateway that fails to start exits, which is caught at once.
  const line = await Promise.race([
    waitFor('gateway listening', o.readyTimeoutMs ?? 30_000, () => proc.lines.find(o.readyLine ?? ((l) => l.includes('"msg":"listening"')))),
    proc.exited.then((code) => {
      throw new Error(`gateway exited early (${code}):\n${stderr.join('\n')}\n${proc.lines.join('\n')}`);
    }),
  ]);
  const { port, adminPort } = JSON.parse(line) as { port: number; adminPort: number };
  return {
    ...proc,
    port,
    adminPort,
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    stderr,
    logs: () =>
      proc.lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      }),
  };
}

/** Sends a signal and waits for the exit; SIGKILL after timeoutMs. */
export async function stop(proc: Proc, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<number | string> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return proc.exited;
  proc.child.kill(signal);
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs);
  try {
    return await proc.exited;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Closes every socket, process and temp dir this module started. Call from afterAll.
 * `graceful`: SIGTERM first (SIGKILL after 20 s), for gateways that have children of their own
 * (demo backends, workers) and are still in the list because their start timed out: SIGKILL
 * would leave those children behind.
 */
/** Kills every process this file started (SIGKILL), closes its sockets, removes its temp dirs. */
export function stopAll(): Promise<void> {
  return stopAllWith({});
}

/**
 * stopAll, with `graceful`: SIGTERM, so a demo gateway or cluster primary stops its demo backends
 * (a SIGKILL would orphan them). Its own name: vitest reads the first parameter of a hook passed
 * as `afterAll(stopAll)` as a fixture, and an options parameter there fails the file.
 */
export async function stopAllWith(o: { graceful?: boolean }): Promise<void> {
  for (const ws of sockets) ws.terminate();
  sockets.clear();
  await Promise.all([...live].map((p) => (o.graceful ? stop(p, 'SIGTERM', 20_000) : stop(p, 'SIGKILL', 5_000))));
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  tempDirs.clear();
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { timeout: 20_000, env: { PATH: process.env.PATH ?? '', ...env } },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A WebSocket client that records every JSON message it gets. */
export class Client {
  readonly messages: Record<string, unknown>[] = [];
  readonly ws: WebSocket;
  closeCode: number | null = null;
  /** The HTTP answer that refused the handshake, if one did. */
  refusal: { status: number; retryAfter: string | null } | null = null;
  readonly opened: Promise<void>;
  readonly closed: Promise<number>;

  constructor(url: string, options: WebSocket.ClientOptions = {}) {
    this.ws = new WebSocket(url, { handshakeTimeout: 10_000, ...options });
    sockets.add(this.ws);
    this.ws.on('message', (data) => {
      try {
        this.messages.push(JSON.parse(String(data)) as Record<string, unknown>);
      } catch {
        this.messages.push({ raw: String(data) });
      }
    });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
      this.ws.once('unexpected-response', (_req, res) => {
        const retryAfter = res.headers['retry-after'];
        this.refusal = { status: res.statusCode ?? 0, retryAfter: typeof retryAfter === 'string' ? retryAfter : null };
        res.resume();
        reject(new Error(`unexpected response ${res.statusCode}`));
      });
    });
    this.closed = new Promise((resolve) => {
      this.ws.once('close', (code) => {
        this.closeCode = code;
        sockets.delete(this.ws);
        resolve(code);
      });
    });
    this.opened.catch(() => undefined);
  }

  next(type: string, timeoutMs = 10_000): Promise<Record<string, unknown>> {
    return waitFor(`message ${type}`, timeoutMs, () => this.messages.find((m) => m.type === type));
  }

  send(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  /** Opens, waits for the backend's connect frame, mounts the room, waits for "mounted". */
  async join(room: string): Promise<string> {
    await this.opened;
    const hello = await this.next('connect');
    this.send({ type: 'mount', url: `/game/${room}/`, room });
    const mounted = await this.next('mounted');
    if (mounted.backend !== hello.backend) throw new Error('connect and mount came from different backends');
    return String(mounted.backend);
  }

  close(): Promise<number> {
    this.ws.close();
    return this.closed;
  }
}

/** Rooms held by each backend, from the backends themselves (the witness). */
export async function backendRooms(backends: readonly { readonly id: string; readonly url: string }[]): Promise<Map<string, Record<string, number>>> {
  const out = new Map<string, Record<string, number>>();
  await Promise.all(
    backends.map(async (b) => {
      const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(5_000) });
      out.set(b.id, ((await res.json()) as { rooms: Record<string, number> }).rooms);
    }),
  );
  return out;
}

export async function metricValue(gw: { readonly adminPort: number }, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gw.adminPort}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.split(' ').pop());
  }
  return sum;
}

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * One HTTP request over node:http to 127.0.0.1:port, with any headers (fetch will not send its own
 * Host); the whole exchange is bounded by timeoutMs.
 */
export function httpRequest(port: number, path: string, o: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {}): Promise<RawAnswer> {
  const timeoutMs = o.timeoutMs ?? 5_000;
  return withTimeout(
    new Promise<RawAnswer>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path, method: o.method ?? 'GET', headers: o.headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`${o.method ?? 'GET'} ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(o.body);
    }),
    timeoutMs,
    `${o.method ?? 'GET'} ${path}`,
  );
}

/** Sends a ping and waits for one more pong than the client had: the socket carries frames both ways. */
export async function pingPong(c: Client, timeoutMs = 5_000): Promise<void> {
  const pongs = (): number => c.messages.filter((m) => m.type === 'pong').length;
  const before = pongs();
  c.send({ type: 'ping' });
  await waitFor('pong', timeoutMs, () => pongs() > before);
}

/**
 * Measured figures of a test file (the docs quote them): written to
 * test-output/figures/NAME.txt (gitignored) instead of the console, which stays for failures.
 * Returns the file's path.
 */
export function writeFigures(name: string, lines: readonly string[]): string {
  const dir = join(ROOT, 'test-output', 'figures');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.txt`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}
