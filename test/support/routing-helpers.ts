// Helpers for test/integration/routing.test.ts: plain HTTP GETs (no fetch: we need exact control
// over Cookie / X-Forwarded-* request headers and every Set-Cookie of the answer), bounded
// concurrency, async polling with a deadline, and the `roomgate where` / `roomgate sign` CLI.
import http from 'node:http';
import { runCli, TEST_SECRET, type CliResult } from './processes.js';

/** A backend as the gateway and `roomgate where` are given it (a process or one in the test's process). */
type Member = { readonly id: string; readonly url: string };
/** How a command is run: runCli (the binary) or test/cli/in-process.ts's runCliHere. */
type RunCli = (args: readonly string[], env?: Record<string, string>) => Promise<CliResult>;

export { withTimeout } from './processes.js';

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Every Set-Cookie header line of the answer. */
  setCookies: string[];
  body: string;
}

/** One agent for the whole file so keep-alive sockets can be closed in afterAll. */
export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** GET (or another bodiless method) with exact headers; rejects after timeoutMs. */
export function httpGet(url: string, headers: Record<string, string> = {}, timeoutMs = 5_000, method = 'GET'): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const sc = res.headers['set-cookie'];
        resolve({ status: res.statusCode ?? 0, headers: res.headers, setCookies: sc ?? [], body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** Runs fn over items with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Polls an async check until it returns a truthy value; rejects with the last value seen after timeoutMs. */
export async function pollUntil<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined | null | false>, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== null && v !== false) return v;
    last = v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export interface BackendState {
  rooms: Record<string, number>;
  /** All sockets the backend holds, mounted or not. */
  sockets: number;
}

/** /_backend/rooms of every backend, rooms and socket totals. */
export async function backendState(backends: readonly Member[]): Promise<Map<string, BackendState>> {
  const out = new Map<string, BackendState>();
  await Promise.all(
    backends.map(async (b) => {
      const res = await httpGet(`${b.url}/_backend/rooms`);
      if (res.status !== 200) throw new Error(`${b.id} /_backend/rooms answered ${res.status}`);
      out.set(b.id, JSON.parse(res.body) as BackendState);
    }),
  );
  return out;
}

export function backendFlags(backends: readonly Member[]): string[] {
  return backends.flatMap((b) => ['--backend', `${b.id}=${b.url}`]);
}

export interface WhereRow {
  room: string;
  backend?: string;
  url?: string;
  error?: string;
}

/** One `roomgate where R1 R2 ... --json` call with the same backend flags as the gateway. */
export async function where(rooms: readonly string[], backends: readonly Member[], run: RunCli = runCli): Promise<Map<string, string>> {
  const r = await run(['where', ...rooms, '--json', ...backendFlags(backends)]);
  if (r.code !== 0) throw new Error(`roomgate where exited ${r.code}: ${r.stderr}`);
  const rows = JSON.parse(r.stdout) as WhereRow[];
  if (rows.length !== rooms.length) throw new Error(`where returned ${rows.length} rows for ${rooms.length} rooms`);
  const out = new Map<string, string>();
  rows.forEach((row, i) => {
    if (row.room !== rooms[i] || !row.backend) throw new Error(`bad where row ${JSON.stringify(row)} for ${rooms[i]}`);
    const b = backends.find((x) => x.id === row.backend);
    if (!b || row.url !== b.url) throw new Error(`where names ${JSON.stringify(row)}, not one of the given backends`);
    out.set(row.room, row.backend);
  });
  return out;
}

/** `roomgate sign R` with the gateway's secret. */
export async function signCli(room: string, run: RunCli = runCli): Promise<string> {
  const r = await run(['sign', room], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
  if (r.code !== 0) throw new Error(`roomgate sign exited ${r.code}: ${r.stderr}`);
  return r.stdout.trim();
}

export interface ParsedSetCookie {
  name: string;
  value: string;
  /** Attribute names lower-cased -> value ('' for flags). */
  attrs: Map<string, string>;
}

export function parseSetCookie(line: string): ParsedSetCookie {
  const [pair = '', ...rest] = line.split(';');
  const eq = pair.indexOf('=');
  const attrs = new Map<string, string>();
  for (const a of rest) {
    const t = a.trim();
    const i = t.indexOf('=');
    attrs.set((i < 0 ? t : t.slice(0, i)).toLowerCase(), i < 0 ? '' : t.slice(i + 1));
  }
  return { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim(), attrs };
}

/** The roomgate_room Set-Cookie lines of an answer. */
export function roomCookies(res: HttpAnswer, name = 'roomgate_room'): ParsedSetCookie[] {
  return res.setCookies.map(parseSetCookie).filter((c) => c.name === name);
}

/** Content of <meta name="djust-ws-path" content="..."> in a demo page (HTML-unescaped for &#NN;). */
export function wsPathMeta(html: string): string | null {
  const m = /<meta name="djust-ws-path" content="([^"]*)">/.exec(html);
  return m ? m[1]!.replace(/&#(\d+);/g, (_s, n: string) => String.fromCharCode(Number(n))) : null;
}
