// Talking to a running gateway's admin API (status, drain, undrain, maintenance, where): the base
// URL, requests with a timeout, its errors in either shape ({"error": "..."} or
// {"error": {"code", "message"}}), and the CLI's own stable view of a backend.
import { str, type Values } from './args.js';
import { DEFAULT_ADMIN_URL } from './options.js';
import { sayError } from './output.js';

const TIMEOUT_MS = 10_000;

export interface AdminTarget {
  readonly base: string;
  /** --admin or $ROOMGATE_ADMIN_URL was given (not the default). */
  readonly explicit: boolean;
}

export function adminTarget(values: Values): AdminTarget {
  const given = str(values, 'admin') ?? (process.env.ROOMGATE_ADMIN_URL || undefined);
  return { base: (given ?? DEFAULT_ADMIN_URL).replace(/\/+$/, ''), explicit: given !== undefined };
}

/** Nothing answered at the admin URL (refused, unknown host, timeout). */
export class AdminUnreachable extends Error {
  constructor(
    readonly base: string,
    readonly reason: string,
  ) {
    super(`cannot reach the admin API at ${base} (${reason})`);
  }
}

/** The admin API answered with an error status. */
export class AdminRefused extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`${status} ${detail}`);
  }
}

/** The message of an error body in the old ({"error": "..."}) or the new ({"error": {"message"}}) shape. */
export function adminErrorMessage(body: string): string {
  try {
    const e = (JSON.parse(body) as { error?: unknown }).error;
    if (typeof e === 'string') return e;
    if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') return (e as { message: string }).message;
  } catch {
    // not JSON: the text itself
  }
  const text = body.trim().replace(/\s+/g, ' ');
  return text.length > 300 ? `${text.slice(0, 300)}...` : text || '(no body)';
}

interface Answer {
  readonly status: number;
  readonly text: string;
}

/**
 * One request with node:http (node:https for an https:// URL), the whole exchange within
 * TIMEOUT_MS. Not fetch: loading undici costs a CLI call more CPU than everything else it does
 * (bench/cli-startup.ts). Fails with the reason nothing answered (ECONNREFUSED, ENOTFOUND...).
 */
async function send(url: URL, method: string, headers: Record<string, string>, body: string | undefined): Promise<Answer> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw Object.assign(new Error(`unsupported protocol ${url.protocol}`), { code: undefined });
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise<Answer>((resolve, reject) => {
    const req = request(url, { method, headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    const timer = setTimeout(() => req.destroy(Object.assign(new Error(`no answer within ${TIMEOUT_MS / 1000} s`), { code: undefined })), TIMEOUT_MS);
    req.on('close', () => clearTimeout(timer));
    req.on('error', reject);
    req.end(body);
  });
}

export async function adminRequest<T>(target: AdminTarget, path: string, init: { method?: 'GET' | 'POST'; token?: string; body?: unknown } = {}): Promise<T> {
  const headers: Record<string, string> = {};
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  let res: Answer;
  try {
    res = await send(new URL(`${target.base}${path}`), init.method ?? 'GET', headers, init.body === undefined ? undefined : JSON.stringify(init.body));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new AdminUnreachable(target.base, e.code ?? e.message);
  }
  if (res.status < 200 || res.status > 299) throw new AdminRefused(res.status, adminErrorMessage(res.text));
  try {
    return JSON.parse(res.text) as T;
  } catch {
    throw new AdminRefused(res.status, `not JSON: ${adminErrorMessage(res.text)}`);
  }
}

/** Prints an admin failure (one line and a hint) and returns the exit code: 2 for what the user must fix, else 1. */
export function reportAdminError(err: unknown, what: string, command: string): number {
  if (err instanceof AdminUnreachable) {
    sayError(`${what}: ${err.message}; is the gateway running?`, `hint: --admin URL or $ROOMGATE_ADMIN_URL (default ${DEFAULT_ADMIN_URL})`);
    return 1;
  }
  if (!(err instanceof AdminRefused)) throw err;
  const hints: Record<number, string> = {
    401: "hint: give the gateway's admin.token with --token or $ROOMGATE_ADMIN_TOKEN (drain and undrain: or a drain token, $ROOMGATE_DRAIN_TOKENS)",
    403: 'hint: the message says what is missing: admin.token (or ROOMGATE_ADMIN_TOKEN) set where the gateway runs, or a token allowed this write (a drain token drains and undrains only its own backend)',
    404: 'hint: roomgate status lists the backend ids',
  };
  sayError(`${what}: ${err.message}`, hints[err.status] ?? `see: roomgate ${command} --help`);
  return [400, 401, 403, 404].includes(err.status) ? 2 : 1;
}

/** A backend as the CLI prints it (--json): stable fields, whatever else the admin API adds. */
export interface BackendView {
  readonly id: string;
  readonly url: string | null;
  readonly weight: number | null;
  /** up | down | draining | maintenance. */
  readonly state: string;
  /** The health checks' verdict: up | down. */
  readonly health: string | null;
  /** Rooms placed on it (all gateways). */
  readonly rooms: number | null;
  /** Live sockets of this gateway on it. */
  readonly sockets: number | null;
  /** Drain deadline (ISO time), or null. */
  readonly deadline: string | null;
  /** Set by drain or maintenance: {state, deadline, since}; null when active. */
  readonly admin: { readonly state: string; readonly deadline: string | null; readonly since: string | null } | null;
  /** Gone from the configuration; listed until its rooms have left. */
  readonly removed: boolean;
}

const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export function backendView(raw: Record<string, unknown>): BackendView {
  const a = raw.admin as Record<string, unknown> | null | undefined;
  const admin = a && typeof a === 'object' ? { state: String(a.state), deadline: text(a.deadline), since: text(a.since) } : null;
  return {
    id: String(raw.id),
    url: text(raw.url),
    weight: num(raw.weight),
    state: String(raw.state),
    health: text(raw.health),
    rooms: num(raw.rooms),
    sockets: num(raw.sockets),
    deadline: admin?.deadline ?? null,
    admin,
    removed: raw.removed === true,
  };
}
