// Rules that span keys (or look at the disk), in the house style of messages.ts. They run on
// whatever parts of the configuration are valid, beside the schema's own problems, so one run
// names every problem: a rule is skipped when a key it reads is itself invalid (that key's own
// problem is reported instead).
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { resolve as pathResolve } from 'node:path';
import type { z } from 'zod';
import { child, schemaAt, showValue, docsAlong } from './describe.js';
import { valueAt } from './messages.js';
import type { BackendConfig, Config } from './schema.js';

/** The type at a dotted path of the configuration: At<Config, 'listen.port'> is number. */
type At<T, P extends string> = P extends `${infer K}.${infer R}` ? (K extends keyof T ? At<NonNullable<T[K]>, R> : never) : P extends keyof T ? T[P] : never;
type Item<T> = T extends readonly (infer E)[] ? E : never;

/** The valid parts of a configuration that may have invalid parts. */
export interface View {
  /** The value at a path (its default when absent), or undefined when it or a parent is invalid. */
  get<P extends string>(path: P): At<Config, P> | undefined;
  /** The valid items of a list, each with its index in the list as given. */
  items<P extends string>(path: P): { index: number; value: Item<At<Config, P>> }[];
  /** The indices of a list as given, its items valid or not ([] when it is no list). */
  indices(path: string): number[];
}

export function viewOf(raw: Record<string, unknown>): View {
  // The raw value at a path; ok false when a parent on the way is there but not a mapping.
  const read = (path: readonly string[]): { ok: boolean; value?: unknown } => {
    let v: unknown = raw;
    for (const k of path) {
      if (v === undefined) return { ok: true };
      if (v === null || typeof v !== 'object' || Array.isArray(v) !== /^\d+$/.test(k)) return { ok: false };
      v = valueAt(v, [k]);
    }
    return { ok: true, value: v };
  };
  const parse = (schema: z.core.$ZodType | undefined, value: unknown): { ok: boolean; data?: unknown } => {
    const r = schema ? (schema as z.ZodType).safeParse(value) : undefined;
    return r?.success ? { ok: true, data: r.data } : { ok: false };
  };
  return {
    get(path) {
      const steps = path.split('.');
      const r = read(steps);
      const p = r.ok ? parse(schemaAt(steps), r.value) : { ok: false };
      return (p.ok ? p.data : undefined) as never;
    },
    items(path) {
      const steps = path.split('.');
      const r = read(steps);
      const list = schemaAt(steps);
      if (!r.ok || !Array.isArray(r.value) || !list) return [];
      const el = child(list, '[]');
      return r.value.flatMap((item, index) => {
        const p = parse(el, item);
        return p.ok ? [{ index, value: p.data as never }] : [];
      });
    },
    indices(path) {
      const r = read(path.split('.'));
      return r.ok && Array.isArray(r.value) ? r.value.map((_, i) => i) : [];
    },
  };
}

export interface CrossCheck {
  /** The rule, for the reference and the test that triggers each one. */
  readonly rule: string;
  readonly check: (v: View) => string[];
}

const BACKEND_ID = /^[A-Za-z0-9_.:[\]-]{1,64}$/;

/** A backend's id (given, or host:port of its URL), where it listens and whether it speaks TLS (https://). */
export function backendAddress(b: BackendConfig): { id: string; host: string; port: number; url: string; tls?: true } {
  const u = new URL(b.url);
  const tls = u.protocol === 'https:';
  const port = u.port ? Number(u.port) : tls ? 443 : 80;
  return { id: b.id ?? `${u.hostname}:${port}`, host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port, url: `${u.protocol}//${u.host}`, ...(tls ? { tls } : {}) };
}

// The salts Django itself signs under when none is given (django.core.signing): a value roomgate
// signs under one of them, the app accepts as if it had signed it.
const DJANGO_DEFAULT_SALTS = new Set(['django.core.signing.Signer', 'django.core.signing.TimestampSigner', 'django.core.signing', 'django.http.cookies']);

const twice = (a: string, b: string, factor: number, va: number | undefined, vb: number | undefined): string[] =>
  va !== undefined && vb !== undefined && va < factor * vb ? [`${a}: got ${va}; expected at least ${factor} x ${b} (${factor * vb}); raise it or lower ${b}`] : [];

export const CROSS_CHECKS: readonly CrossCheck[] = [
  {
    rule: 'Backend ids, given or host:port of the URL, are valid ids and unique.',
    check(v) {
      const problems: string[] = [];
      const seen = new Map<string, number>();
      const valid = new Map(v.items('backends').map(({ index, value }) => [index, value]));
      for (const index of v.indices('backends')) {
        const value = valid.get(index);
        // A backend with a bad URL still has the id it was given: a duplicate is named too.
        const given: unknown = value === undefined ? v.get(`backends.${index}.id`) : undefined;
        if (value === undefined && typeof given !== 'string') continue;
        const id = value === undefined ? String(given) : backendAddress(value).id;
        const derived = value !== undefined && value.id === undefined ? ' (host:port of its URL, as no id is given)' : '';
        if (!BACKEND_ID.test(id)) {
          problems.push(`backends.${index}.id: got ${JSON.stringify(id)}${derived}; expected an id of 1-64 characters from A-Z a-z 0-9 _ . : - [ ]; give the backend an id`);
        }
        const prev = seen.get(id);
        if (prev !== undefined) {
          problems.push(`backends.${index}.id: got ${JSON.stringify(id)}${derived}, also the id of backends.${prev}; expected an id no other backend has; give one of them another id`);
        } else seen.set(id, index);
      }
      return problems;
    },
  },
  {
    rule: 'At least one backend has a weight above 0.',
    check(v) {
      const backends = v.get('backends');
      return backends && backends.length > 0 && backends.every((b) => b.weight === 0)
        ? [`backends: got ${backends.length === 1 ? 'one backend, with weight 0' : `${backends.length} backends, all with weight 0`}; expected at least one backend with weight above 0 (weight 0 takes no new rooms)`]
        : [];
    },
  },
  {
    rule: '`placement.gatewayTtlMs` is at least 2 x `placement.heartbeatMs`.',
    check: (v) => twice('placement.gatewayTtlMs', 'placement.heartbeatMs', 2, v.get('placement.gatewayTtlMs'), v.get('placement.heartbeatMs')),
  },
  {
    rule: '`presence.ttlMs` is at least 2 x `placement.heartbeatMs`.',
    check: (v) => twice('presence.ttlMs', 'placement.heartbeatMs', 2, v.get('presence.ttlMs'), v.get('placement.heartbeatMs')),
  },
  {
    rule: '`status.public: token` needs an `admin.token`.',
    check: (v) =>
      v.get('status.public') === 'token' && v.get('admin.token') === ''
        ? ['status.public: got "token" while admin.token is empty; expected "off" or "open", or set admin.token (or ROOMGATE_ADMIN_TOKEN) to a token of at least 16 characters']
        : [],
  },
  {
    rule: '`listen.requestTimeoutMs` is 0 or at least `listen.headersTimeoutMs`.',
    check(v) {
      const request = v.get('listen.requestTimeoutMs');
      const head = v.get('listen.headersTimeoutMs');
      if (request === undefined || head === undefined || request === 0 || request >= head) return [];
      return [`listen.requestTimeoutMs: got ${request}; expected 0 (no limit) or at least listen.headersTimeoutMs (${head}): the whole request cannot take less time than its head`];
    },
  },
  {
    rule: '`health.host` only with `health.path` (a TCP check sends no Host).',
    check(v) {
      const host = v.get('health.host');
      return host && v.get('health.path') === null
        ? [`health.host: got ${JSON.stringify(host)} while health.path is null; expected null, as a TCP check sends no Host; or set health.path (e.g. "/healthz") for an HTTP check`]
        : [];
    },
  },
  {
    rule: '`health.timeoutMs` is at most `health.intervalMs`.',
    check(v) {
      const timeout = v.get('health.timeoutMs');
      const interval = v.get('health.intervalMs');
      return timeout !== undefined && interval !== undefined && timeout > interval ? [`health.timeoutMs: got ${timeout}; expected at most health.intervalMs (${interval})`] : [];
    },
  },
  {
    rule: '`redis.sentinels` and `redis.clusterNodes` are not both set.',
    check(v) {
      const sentinels = v.get('redis.sentinels');
      const nodes = v.get('redis.clusterNodes');
      return sentinels?.length && nodes?.length
        ? [`redis.clusterNodes: got ${JSON.stringify(nodes)} while redis.sentinels is set too; expected one form only, Sentinel or Cluster: remove redis.sentinels (env REDIS_SENTINELS) or redis.clusterNodes (env REDIS_CLUSTER_NODES)`]
        : [];
    },
  },
  {
    rule: 'With `redis.clusterNodes`, `redis.url` selects no db (Cluster has db 0 only).',
    check(v) {
      const url = v.get('redis.url');
      if (!url || !v.get('redis.clusterNodes')?.length) return [];
      const db = new URL(url).pathname;
      return db === '' || db === '/' || db === '/0'
        ? []
        : [`redis.url: got ${showValue(url, docsAlong(['redis', 'url']))} with redis.clusterNodes set; expected no db: Redis Cluster has only db 0, remove "${db}" from the URL`];
    },
  },
  {
    // With a Django format roomgate holds the app's SECRET_KEY. If it also sets the room cookie on
    // pages, it signs room keys that clients choose (query, path, header): under Django's default
    // salt that makes roomgate a signing oracle for anything the app verifies with Signer(). It may
    // only sign under a salt of its own; otherwise the app sets the cookie and roomgate only verifies.
    rule: "With a Django `cookie.format` and `cookie.signed` and `cookie.setOnPages` true, `cookie.salt` is a salt only roomgate uses (not empty, not one of Django's own): otherwise roomgate would sign room keys clients choose under a salt the app trusts.",
    check(v) {
      const format = v.get('cookie.format');
      const salt = v.get('cookie.salt');
      if (format === undefined || format === 'roomgate' || salt === undefined || v.get('cookie.signed') !== true || v.get('cookie.setOnPages') !== true) return [];
      // django-cookie signs under cookie name + salt: the salt alone must still be roomgate's own.
      if (salt !== '' && !DJANGO_DEFAULT_SALTS.has(salt)) return [];
      return [
        `cookie.salt: got ${JSON.stringify(salt)} with cookie.format "${format}" and cookie.setOnPages true; expected a salt only roomgate uses, e.g. "roomgate.room" (never one your app passes to Signer or set_signed_cookie): with this one roomgate would sign any room key a client sends with your app's SECRET_KEY under a salt your app trusts. Or set cookie.setOnPages: false and let the app set the cookie (roomgate then only verifies it)`,
      ];
    },
  },
  {
    rule: 'Each `static.mounts[].prefix` appears once and does not overlap `room.pathPrefix` (when `room.sources` has path-prefix).',
    check(v) {
      const problems: string[] = [];
      const sources = v.get('room.sources');
      const roomPrefix = v.get('room.pathPrefix');
      const seen = new Map<string, number>();
      for (const { index, value: m } of v.items('static.mounts')) {
        const field = `static.mounts.${index}.prefix`;
        const prev = seen.get(m.prefix);
        if (prev !== undefined) problems.push(`${field}: got ${JSON.stringify(m.prefix)}, also the prefix of static.mounts.${prev}; expected each prefix at most once`);
        else seen.set(m.prefix, index);
        if (sources?.includes('path-prefix') && roomPrefix !== undefined && (m.prefix.startsWith(roomPrefix) || roomPrefix.startsWith(m.prefix))) {
          problems.push(`${field}: got ${JSON.stringify(m.prefix)}, which overlaps room.pathPrefix ${JSON.stringify(roomPrefix)} (per-tab room URLs); expected a prefix outside it, e.g. "/static/"`);
        }
      }
      return problems;
    },
  },
  {
    rule: 'Each `static.mounts[].dir` is a readable directory (a relative path: from the working directory).',
    check(v) {
      return v.items('static.mounts').flatMap(({ index, value: m }) => {
        const dir = pathResolve(m.dir);
        const got = `static.mounts.${index}.dir: got ${JSON.stringify(m.dir)}${dir !== m.dir ? ` (from the working directory: ${JSON.stringify(dir)})` : ''}`;
        try {
          if (!statSync(dir).isDirectory()) return [`${got}, which is not a directory; expected the directory to serve (e.g. Django's STATIC_ROOT)`];
          accessSync(dir, fsConstants.R_OK | fsConstants.X_OK);
          return [];
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code ?? String(err);
          return code === 'ENOENT'
            ? [`${got}, which does not exist; expected a readable directory: create it (e.g. python manage.py collectstatic) or fix the path`]
            : [`${got}, which cannot be read (${code}); expected a readable directory: make it readable by the roomgate user or fix the path`];
        }
      });
    },
  },
  {
    rule: '`tls.redirectPort` and `tls.hstsMaxAgeS` only with `tls.certs`; `tls.redirectPort` is not `listen.port`.',
    check(v) {
      const certs = v.get('tls.certs') ?? [];
      const redirect = v.get('tls.redirectPort');
      const problems: string[] = [];
      if (certs.length === 0) {
        if (redirect !== undefined && redirect !== null) problems.push(`tls.redirectPort: got ${redirect} while tls.certs is empty; expected null, or list certificates in tls.certs (the redirect leads to https)`);
        if ((v.get('tls.hstsMaxAgeS') ?? 0) > 0) problems.push('tls.hstsMaxAgeS: got a max-age while tls.certs is empty; expected 0, or list certificates in tls.certs (the header is sent over TLS only)');
      } else if (redirect !== undefined && redirect !== null && redirect !== 0 && redirect === v.get('listen.port')) {
        problems.push(`tls.redirectPort: got ${redirect}, which is listen.port; expected another port (the plain-HTTP listener beside the TLS one, e.g. 80 beside 443)`);
      }
      return problems;
    },
  },
  {
    rule: '`backendTls.cert` and `backendTls.key` are given together (a client certificate needs its key).',
    check: (v) => certWithKey(v.get('backendTls.cert'), v.get('backendTls.key'), 'backendTls.cert', 'backendTls.key'),
  },
  {
    rule: '`redis.tlsCert` and `redis.tlsKey` are given together (a client certificate needs its key).',
    check: (v) => certWithKey(v.get('redis.tlsCert'), v.get('redis.tlsKey'), 'redis.tlsCert', 'redis.tlsKey'),
  },
  {
    rule: '`redis.tlsCa`, `redis.tlsCert` and `redis.tlsKey` only with a rediss:// `redis.url` (TLS is turned on by the URL, in every form).',
    check(v) {
      const url = v.get('redis.url');
      if (url?.startsWith('rediss://')) return [];
      return (['redis.tlsCa', 'redis.tlsCert', 'redis.tlsKey'] as const).flatMap((k) => {
        const file = v.get(k);
        return file
          ? [
              `${k}: got ${JSON.stringify(file)} while redis.url is ${url ? 'not a rediss:// URL' : 'null'}; expected a rediss:// redis.url (env REDIS_URL) with it, e.g. "rediss://redis.internal:6380" (with Sentinel or Cluster only its scheme and password are used: "rediss://:PASSWORD@redis"), or remove ${k}`,
            ]
          : [];
      });
    },
  },
  {
    rule: 'Each `proxy.errorPages[].status` appears once and its `file` can be read.',
    check(v) {
      const problems: string[] = [];
      const seen = new Set<number>();
      for (const { index, value } of v.items('proxy.errorPages')) {
        if (seen.has(value.status)) problems.push(`proxy.errorPages.${index}.status: got ${value.status}, listed before; expected each status once`);
        seen.add(value.status);
        try {
          accessSync(pathResolve(value.file), fsConstants.R_OK);
        } catch {
          problems.push(`proxy.errorPages.${index}.file: got ${JSON.stringify(value.file)}, which cannot be read; expected a readable HTML file`);
        }
      }
      return problems;
    },
  },
  {
    rule: 'With pushes on (`push.tokens`) and backends configured, `backendCalls.secrets` holds a secret that signs them.',
    check(v) {
      const tokens = v.get('push.tokens');
      const secrets = v.get('backendCalls.secrets');
      const demo = (v.get('backends')?.length ?? 0) === 0 && v.get('discovery.dns') === null;
      return tokens && tokens.length > 0 && secrets && secrets.length === 0 && !demo
        ? [
            "backendCalls.secrets: got none while push.tokens turns pushes on; expected a secret of at least 32 characters that signs every push, so an app can tell roomgate's push from a client's: set ROOMGATE_CALL_SECRETS=$(openssl rand -base64 32) and give the same value to your push receiver (docs/push.md)",
          ]
        : [];
    },
  },
  {
    rule: '`handoff.rebalance.enabled` with backends configured needs `backendCalls.secrets` (every handoff call is signed).',
    check(v) {
      const demo = (v.get('backends')?.length ?? 0) === 0 && v.get('discovery.dns') === null;
      return v.get('handoff.rebalance.enabled') === true && v.get('backendCalls.secrets')?.length === 0 && !demo
        ? [
            "handoff.rebalance.enabled: got true while backendCalls.secrets is empty; expected false, or set ROOMGATE_CALL_SECRETS=$(openssl rand -base64 32) and give the same value to the apps' hooks (every handoff call is signed)",
          ]
        : [];
    },
  },
  {
    rule: 'No `admin.drainTokens` entry is the `admin.token`.',
    check(v) {
      const admin = v.get('admin.token');
      if (admin === undefined || admin === '') return [];
      return v
        .items('admin.drainTokens')
        .filter(({ value }) => value === admin)
        .map(({ index }) => `admin.drainTokens.${index}: got <redacted>, the same token as admin.token, which allows every admin write; expected a token of its own, e.g. from \`openssl rand -hex 24\``);
    },
  },
  {
    rule: '`room.pinInject` needs `pin` in `room.sources` (the script and the pin are read there) and a secret to sign pins with (`cookie.secrets`, or `cookie.signed`).',
    check(v) {
      if (v.get('room.pinInject') !== true) return [];
      const problems: string[] = [];
      const sources = v.get('room.sources');
      if (sources !== undefined && !sources.includes('pin')) problems.push(`room.pinInject: got true while room.sources (${JSON.stringify(sources)}) has no "pin"; expected false, or add "pin" to room.sources (pages would carry a pin nothing reads)`);
      if (v.get('cookie.signed') === false && v.get('cookie.secrets')?.length === 0) problems.push('room.pinInject: got true while cookie.signed is false and cookie.secrets is empty; expected false, or set cookie.secrets (pins are signed with them)');
      return problems;
    },
  },
];

/** A client certificate and its key are given together (both null, or both set). */
function certWithKey(cert: string | null | undefined, key: string | null | undefined, certField: string, keyField: string): string[] {
  if (cert === undefined || key === undefined || (cert === null) === (key === null)) return [];
  return cert === null
    ? [`${certField}: got null while ${keyField} is set; expected the PEM certificate file of that key, or remove ${keyField} (no client certificate)`]
    : [`${keyField}: got null while ${certField} is set; expected the PEM private key file of that certificate, or remove ${certField} (no client certificate)`];
}
