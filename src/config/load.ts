// Loads the configuration: schema defaults < YAML file < environment < command-line flags.
// Every problem is reported at once, each naming the field, the bad value and what is allowed.
import { accessSync, constants as fsConstants, readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve as pathResolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { configSchema, type Config } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Flags given on the command line; they win over file and environment. */
export interface ConfigOverrides {
  port?: number | string;
  host?: string | undefined;
  backends?: readonly string[];
}

export interface LoadOptions {
  file?: string | undefined;
  env?: NodeJS.ProcessEnv;
  overrides?: ConfigOverrides;
}

/** Backends after loading: every one has an id (defaults to host:port of its URL). */
export interface ResolvedBackend {
  readonly id: string;
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly weight: number;
}
export type LoadedConfig = Omit<Config, 'backends'> & { backends: ResolvedBackend[] };

/** Environment variables read, for the README and check-config. */
export const ENV_VARS = {
  ROOMGATE_CONFIG: 'path of the YAML config file (when --config is not given)',
  ROOMGATE_HOST: 'listen.host',
  ROOMGATE_PORT: 'listen.port',
  ROOMGATE_ADMIN_HOST: 'admin.host',
  ROOMGATE_ADMIN_PORT: 'admin.port',
  ROOMGATE_BACKENDS: 'backends: comma-separated URLs, each optionally id=URL',
  ROOMGATE_COOKIE_SECRETS: 'cookie.secrets: comma-separated, first signs',
  ROOMGATE_LOG_LEVEL: 'log.level',
  ROOMGATE_ADMIN_TOKEN: 'admin.token',
  ROOMGATE_API_TOKENS: 'api.tokens: comma-separated bearer tokens for API writes',
  ROOMGATE_WORKERS: 'start --workers: worker processes on the one port (1-64 or auto)',
  ROOMGATE_DEMO_BASE_PORT: 'demo.basePort: the first demo backend port (the demo only)',
  REDIS_URL: 'redis.url',
  REDIS_SENTINELS: 'redis.sentinels: comma-separated host:port of the Redis Sentinels',
  REDIS_SENTINEL_NAME: 'redis.sentinelName',
  REDIS_CLUSTER_NODES: 'redis.clusterNodes: comma-separated host:port of Redis Cluster nodes',
} as const;

export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const file = opts.file ?? env.ROOMGATE_CONFIG;
  const raw: Record<string, unknown> = file ? readConfigFile(file) : {};
  applyEnv(raw, env);
  applyOverrides(raw, opts.overrides ?? {});
  const result = configSchema.safeParse(raw);
  if (!result.success) throw new ConfigError(result.error.issues.map((i) => describeIssue(i, raw)));
  return resolve(result.data);
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`config file ${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError([`config file ${file}: not valid YAML: ${(err as Error).message.split('\n')[0]}`]);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigError([`config file ${file}: the top level must be a mapping of keys (listen:, backends:, ...)`]);
  }
  return doc as Record<string, unknown>;
}

function section(raw: Record<string, unknown>, key: string): Record<string, unknown> {
  const v = raw[key];
  if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  const fresh: Record<string, unknown> = {};
  raw[key] = fresh;
  return fresh;
}

// Numbers from text stay text when they are not numbers, so the error shows what was given.
function num(s: string): number | string {
  return /^\s*\d+\s*$/.test(s) ? Number(s) : s;
}

function list(s: string): string[] {
  return s
    .split(/[,\s]+/)
    .map((x) => x.trim())
    .filter(Boolean);
}

function backendSpec(spec: string): Record<string, unknown> {
  const eq = spec.indexOf('=');
  // "id=http://..." names the backend; a bare URL gets host:port as its id.
  if (eq > 0 && !spec.slice(0, eq).includes(':')) return { id: spec.slice(0, eq), url: spec.slice(eq + 1) };
  return { url: spec };
}

function applyEnv(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): void {
  if (env.ROOMGATE_HOST) section(raw, 'listen').host = env.ROOMGATE_HOST;
  if (env.ROOMGATE_PORT) section(raw, 'listen').port = num(env.ROOMGATE_PORT);
  if (env.ROOMGATE_ADMIN_HOST) section(raw, 'admin').host = env.ROOMGATE_ADMIN_HOST;
  if (env.ROOMGATE_ADMIN_PORT) section(raw, 'admin').port = num(env.ROOMGATE_ADMIN_PORT);
  if (env.ROOMGATE_BACKENDS) raw.backends = list(env.ROOMGATE_BACKENDS).map(backendSpec);
  if (env.ROOMGATE_COOKIE_SECRETS) section(raw, 'cookie').secrets = list(env.ROOMGATE_COOKIE_SECRETS);
  if (env.ROOMGATE_LOG_LEVEL) section(raw, 'log').level = env.ROOMGATE_LOG_LEVEL;
  if (env.ROOMGATE_ADMIN_TOKEN) section(raw, 'admin').token = env.ROOMGATE_ADMIN_TOKEN;
  if (env.REDIS_URL) section(raw, 'redis').url = env.REDIS_URL;
  if (env.REDIS_SENTINELS) section(raw, 'redis').sentinels = list(env.REDIS_SENTINELS);
  if (env.REDIS_SENTINEL_NAME) section(raw, 'redis').sentinelName = env.REDIS_SENTINEL_NAME;
  if (env.REDIS_CLUSTER_NODES) section(raw, 'redis').clusterNodes = list(env.REDIS_CLUSTER_NODES);
  if (env.ROOMGATE_API_TOKENS) section(raw, 'api').tokens = list(env.ROOMGATE_API_TOKENS);
  if (env.ROOMGATE_DEMO_BASE_PORT) section(raw, 'demo').basePort = num(env.ROOMGATE_DEMO_BASE_PORT);
}

function applyOverrides(raw: Record<string, unknown>, o: ConfigOverrides): void {
  if (o.port !== undefined) section(raw, 'listen').port = typeof o.port === 'string' ? num(o.port) : o.port;
  if (o.host) section(raw, 'listen').host = o.host;
  if (o.backends && o.backends.length > 0) raw.backends = o.backends.flatMap(list).map(backendSpec);
}

function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = raw;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

function describeIssue(issue: z.core.$ZodIssue, raw: unknown): string {
  const field = issue.path.length ? issue.path.map(String).join('.') : '(top level)';
  const value = valueAt(raw, issue.path);
  // Never echo a secret back into logs.
  const secret =
    issue.path.includes('secrets') || issue.path.includes('token') || issue.path.includes('tokens') || (issue.path[0] === 'redis' && issue.path[1] === 'url');
  const shown = secret ? '<redacted>' : JSON.stringify(value);
  if (issue.code === 'unrecognized_keys') {
    return `${field}: unknown key(s) ${issue.keys.map((k) => `"${k}"`).join(', ')} (check the spelling against config/roomgate.example.yaml)`;
  }
  return `${field}: got ${shown ?? 'nothing'}; expected ${allowed(issue)}`;
}

/** What is allowed, in words, from a zod issue. */
function allowed(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected === 'int' ? 'a whole number' : `a ${issue.expected}`;
    case 'too_big':
      return issue.origin === 'number' ? `a number of at most ${issue.maximum}` : `at most ${issue.maximum} ${issue.origin === 'array' ? 'items' : 'characters'}`;
    case 'too_small':
      return issue.origin === 'number' ? `a number of at least ${issue.minimum}` : `at least ${issue.minimum} ${issue.origin === 'array' ? 'items' : 'characters'}`;
    case 'invalid_value':
      return `one of ${issue.values.map((v) => JSON.stringify(v)).join(' | ')}`;
    default:
      return issue.message;
  }
}

function resolve(c: Config): LoadedConfig {
  const problems: string[] = [];
  const backends: ResolvedBackend[] = c.backends.map((b, i) => {
    const u = new URL(b.url);
    const port = u.port ? Number(u.port) : 80;
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    const id = b.id ?? `${u.hostname}:${port}`;
    if (!/^[A-Za-z0-9_.:[\]-]{1,64}$/.test(id)) problems.push(`backends.${i}.id: got ${JSON.stringify(id)}; expected 1-64 characters from A-Z a-z 0-9 _ . : -`);
    return { id, url: `http://${u.host}`, host, port, weight: b.weight };
  });
  const seen = new Map<string, number>();
  backends.forEach((b, i) => {
    const prev = seen.get(b.id);
    if (prev !== undefined) problems.push(`backends.${i}.id: ${JSON.stringify(b.id)} is also backends.${prev}; ids (and URLs without ids) must be unique`);
    seen.set(b.id, i);
  });
  if (backends.length > 0 && backends.every((b) => b.weight === 0)) {
    problems.push('backends: every weight is 0; expected at least one backend with weight > 0');
  }
  c.proxy.trustedProxies.forEach((p, i) => {
    if (!isIpOrCidr(p)) problems.push(`proxy.trustedProxies.${i}: got ${JSON.stringify(p)}; expected an IP address or CIDR such as "10.0.0.0/8" or "::1"`);
  });
  if (c.placement.gatewayTtlMs < 2 * c.placement.heartbeatMs) {
    problems.push(`placement.gatewayTtlMs: got ${c.placement.gatewayTtlMs}; expected at least 2 x placement.heartbeatMs (${2 * c.placement.heartbeatMs})`);
  }
  if (c.status.public === 'token' && c.admin.token === '') {
    problems.push('status.public: got "token" but admin.token is empty; set admin.token (or ROOMGATE_ADMIN_TOKEN), or use "off" or "open"');
  }
  if (c.presence.ttlMs < 2 * c.placement.heartbeatMs) {
    problems.push(`presence.ttlMs: got ${c.presence.ttlMs}; expected at least 2 x placement.heartbeatMs (${2 * c.placement.heartbeatMs})`);
  }
  if (c.listen.requestTimeoutMs !== 0 && c.listen.requestTimeoutMs < c.listen.headersTimeoutMs) {
    problems.push(`listen.requestTimeoutMs: got ${c.listen.requestTimeoutMs}; expected 0 (no limit) or at least listen.headersTimeoutMs (${c.listen.headersTimeoutMs}): the whole request cannot take less time than its head`);
  }
  if (c.health.host !== null && c.health.path === null) {
    problems.push(`health.host: got ${JSON.stringify(c.health.host)} but health.path is null (a TCP check sends no Host); set health.path (e.g. "/healthz") or remove health.host`);
  }
  if (c.health.timeoutMs > c.health.intervalMs) {
    problems.push(`health.timeoutMs: got ${c.health.timeoutMs}; expected at most health.intervalMs (${c.health.intervalMs})`);
  }
  problems.push(...redisProblems(c.redis));
  problems.push(...cookieSigningProblems(c.cookie));
  const mounts = c.static.mounts.map((m) => ({ ...m, dir: pathResolve(m.dir) }));
  problems.push(...staticProblems(mounts, c.room));
  if (problems.length) throw new ConfigError(problems);
  return { ...c, backends, static: { ...c.static, mounts } };
}

/** Static mounts: distinct prefixes, not shadowing the per-tab room prefix, readable directories. */
function staticProblems(mounts: Config['static']['mounts'], room: Config['room']): string[] {
  const problems: string[] = [];
  mounts.forEach((m, i) => {
    const field = `static.mounts.${i}`;
    const prev = mounts.findIndex((o) => o.prefix === m.prefix);
    if (prev < i) problems.push(`${field}.prefix: ${JSON.stringify(m.prefix)} is also static.mounts.${prev}.prefix; each prefix at most once`);
    if (room.sources.includes('path-prefix') && (m.prefix.startsWith(room.pathPrefix) || room.pathPrefix.startsWith(m.prefix))) {
      problems.push(`${field}.prefix: ${JSON.stringify(m.prefix)} overlaps room.pathPrefix ${JSON.stringify(room.pathPrefix)} (per-tab room URLs); choose a prefix outside it, e.g. "/static/"`);
    }
    try {
      if (!statSync(m.dir).isDirectory()) {
        problems.push(`${field}.dir: ${JSON.stringify(m.dir)} is not a directory; expected the directory to serve (e.g. Django's STATIC_ROOT)`);
        return;
      }
      accessSync(m.dir, fsConstants.R_OK | fsConstants.X_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      const fix = code === 'ENOENT' ? 'create it (e.g. python manage.py collectstatic) or fix the path' : 'make it readable by the roomgate user or fix the path';
      problems.push(`${field}.dir: ${JSON.stringify(m.dir)} cannot be used (${code}); ${fix}`);
    }
  });
  return problems;
}

// The salts Django itself signs under when none is given (django.core.signing): a value roomgate
// signs under one of them, the app accepts as if it had signed it.
const DJANGO_DEFAULT_SALTS = new Set(['django.core.signing.Signer', 'django.core.signing.TimestampSigner', 'django.core.signing', 'django.http.cookies']);

/**
 * With a Django format roomgate holds the app's SECRET_KEY. If it also sets the room cookie on
 * pages, it signs room keys that clients choose (query, path, header): under Django's default salt
 * that makes roomgate a signing oracle for anything the app verifies with Signer(). It may only
 * sign under a salt of its own; otherwise the app sets the cookie and roomgate only verifies.
 */
function cookieSigningProblems(c: Config['cookie']): string[] {
  if (c.format === 'roomgate' || !c.signed || !c.setOnPages) return [];
  // django-cookie signs under cookie name + salt: the salt alone must still be roomgate's own.
  if (c.salt === '' || DJANGO_DEFAULT_SALTS.has(c.salt)) {
    return [
      `cookie.salt: got ${JSON.stringify(c.salt)} with cookie.format "${c.format}" and cookie.setOnPages true; roomgate would sign any room key a client sends with your app's SECRET_KEY under a salt your app trusts. Set cookie.salt to a salt only roomgate uses (e.g. "roomgate.room", never one your app passes to Signer or set_signed_cookie), or set cookie.setOnPages: false and let the app set the cookie (roomgate then only verifies it)`,
    ];
  }
  return [];
}

const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/;

/** The Redis form: url alone, sentinels (+ url for credentials), or clusterNodes (+ url for credentials). */
function redisProblems(r: Config['redis']): string[] {
  const problems: string[] = [];
  const lists = [
    ['sentinels', r.sentinels],
    ['clusterNodes', r.clusterNodes],
  ] as const;
  for (const [key, nodes] of lists) {
    nodes.forEach((n, i) => {
      const m = HOST_PORT.exec(n);
      const port = m ? Number(m[2]) : 0;
      if (!m || port < 1 || port > 65535) problems.push(`redis.${key}.${i}: got ${JSON.stringify(n)}; expected "host:port", e.g. "10.0.0.5:${key === 'sentinels' ? 26379 : 6379}"`);
    });
  }
  if (r.sentinels.length > 0 && r.clusterNodes.length > 0) {
    problems.push('redis.sentinels and redis.clusterNodes: both set; use one form only (Sentinel or Cluster), remove the other (env REDIS_SENTINELS / REDIS_CLUSTER_NODES)');
  }
  if (r.url && (r.sentinels.length > 0 || r.clusterNodes.length > 0)) {
    let u: URL | undefined;
    try {
      u = new URL(r.url);
    } catch {
      problems.push('redis.url: not a valid URL (value not shown)');
    }
    if (u && r.clusterNodes.length > 0 && u.pathname !== '' && u.pathname !== '/' && u.pathname !== '/0') {
      problems.push('redis.url: selects a db although redis.clusterNodes is set; Redis Cluster has only db 0: remove the "/N" from the url');
    }
  }
  return problems;
}

export function isIpOrCidr(s: string): boolean {
  const [addr, bits, extra] = s.split('/');
  if (extra !== undefined || !addr) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}
