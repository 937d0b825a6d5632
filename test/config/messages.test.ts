// Every rule of the configuration speaks plain words: each key of the schema (found by walking it)
// gets a wrong value of each kind its rules refuse, and every problem must name the key, show what
// was given, say what is allowed, and carry no library text.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CROSS_CHECKS } from '../../src/config/checks.js';
import { allowed, child, keysOf, listKeys, ruleMessages, schemaAt, sections, unwrap, type KeyInfo } from '../../src/config/describe.js';
import { ConfigError, loadConfig, validate } from '../../src/config/load.js';
import { maskSecrets } from '../../src/config/messages.js';
import { closest, editDistance } from '../../src/config/suggest.js';
import { stopAll, writeConfig } from '../support/processes.js';

afterAll(stopAll);

const KEYS = listKeys();

// What zod (or any library) says when nobody gave it words, and grammar slips such as "a array".
const LIBRARY_TEXT =
  /Invalid input|Invalid option|Invalid string|Invalid element|Invalid key|Invalid union|Invalid type|received|Too small|Too big|Unrecognized key|must match pattern|must start with|must (?:be|have|contain) |Expected (?:number|string|boolean|array|object)|\ba (?:array|object|int|integer|enum|union|literal|undefined)\b|\bundefined\b|\bNaN\b|\[object Object\]|\u0000/;
// The house style: field, then "got <value>" (or "missing"), then "expected ..."; or an unknown key.
const FIELD = String.raw`[A-Za-z][A-Za-z0-9]*(?:\.(?:[A-Za-z][A-Za-z0-9_-]*|\d+))*`;
const HOUSE_STYLE = new RegExp(String.raw`^${FIELD}: (?:(?:got \S.*|missing); expected \S.*|unknown key; (?:did you mean .+\?|the keys (?:of ${FIELD}|at the top level) are .+))$`);

function expectHouseStyle(problem: string, field: string): void {
  expect(problem, problem).toMatch(HOUSE_STYLE);
  expect(problem.startsWith(`${field}:`) || problem.startsWith(`${field}.`), `${problem}\n  should name ${field}`).toBe(true);
  expect(problem, problem).not.toMatch(LIBRARY_TEXT);
  expect(problem, problem).not.toMatch(/ {2}|; ;|expected expected/);
}

/** The problems of a raw configuration (file, environment and flags merged). */
const problemsOf = (raw: Record<string, unknown>) => validate(raw).problems;

/** A raw configuration with `value` at a key path ("backends[].url"); list items and groups are filled from the schema's examples. */
function place(path: string, value: unknown): { raw: Record<string, unknown>; field: string } {
  const raw: Record<string, unknown> = {};
  const parts = path.split('.');
  const field: string[] = [];
  let at = raw;
  parts.forEach((part, i) => {
    const name = part.replace(/\[\]$/, '');
    if (i === parts.length - 1) {
      if (value === undefined) delete at[name];
      else at[name] = value;
      field.push(name);
      return;
    }
    const key = KEYS.find((k) => k.path === [...parts.slice(0, i), name].join('.'));
    const example = key?.doc.example;
    if (part.endsWith('[]')) {
      at[name] = [structuredClone((example as unknown[])[0])];
      at = (at[name] as Record<string, unknown>[])[0] as Record<string, unknown>;
      field.push(name, '0');
    } else {
      at[name] = example === undefined ? {} : structuredClone(example);
      at = at[name] as Record<string, unknown>;
      field.push(name);
    }
  });
  return { raw, field: field.join('.') };
}

// Text values of many shapes: every rule on a text key must refuse at least one of them.
const TEXTS = [
  '', ' ', 'x', 'has space', '/', '//', 'static', '/static', '/a//b/', '/a/../b/', '/_roomgate/x/', '/st atic/', '([', '*.example.com',
  'http://', 'https://a:1', 'http://a:1/path', 'ftp://x', 'http://x', 'redis://', 'a:99999', 'a:0', 'host', '10.0.0.0/33', '999.1.1.1',
  '/game/x{room}/', '/{room}/{room}/', 'x'.repeat(65), 'a_b!', 'short', '-', 'ü', 'a\nb', 'app example', 'roomgate-admin:9090',
  'TRACE', 'x'.repeat(257),
];

interface Case {
  readonly value: unknown;
  /** The field the problem is about, when deeper than the key (a list item). */
  readonly at?: string;
}

/** Wrong values for a key: of the wrong type, out of range, not matching, not a choice, empty. */
function wrongValues(key: KeyInfo): Case[] {
  const u = unwrap(key.schema);
  const node = u.node;
  const def = node._zod.def as unknown as { checks?: unknown[] };
  switch (u.type) {
    case 'number': {
      const n = node as unknown as { minValue: number | null; maxValue: number | null; isInt: boolean };
      const out: Case[] = [{ value: 'abc' }, { value: true }, { value: '80' }, { value: [1] }];
      if (n.minValue !== null && Number.isFinite(n.minValue)) out.push({ value: n.minValue - 1 });
      if (n.maxValue !== null && Number.isFinite(n.maxValue)) out.push({ value: n.maxValue + 1 });
      if (n.isInt) out.push({ value: (n.minValue ?? 0) + 1.5 });
      return out;
    }
    case 'boolean':
      return [{ value: 'yes' }, { value: 1 }, { value: 'true' }];
    case 'enum': {
      const first = (node as unknown as { options: string[] }).options[0] as string;
      return [{ value: 'bogus' }, { value: 5 }, { value: `${first}x` }];
    }
    case 'union':
      return [{ value: 'high' }, { value: -1 }, { value: 11 }, { value: 0.5 }];
    case 'string':
      return [{ value: 12345 }, { value: false }, { value: ['x'] }, ...TEXTS.map((value) => ({ value }))];
    case 'object':
      return [{ value: 'x' }, { value: 7 }, { value: [] }];
    case 'array': {
      const el = unwrap(child(node, '[]') as never);
      const out: Case[] = [{ value: 'not-a-list' }, { value: { a: 1 } }];
      const kinds = (def.checks ?? []).map((c) => (c as { _zod: { def: { check: string } } })._zod.def.check);
      if (kinds.includes('min_length')) out.push({ value: [] });
      if (kinds.includes('custom')) {
        const first = (u.default as unknown[] | undefined)?.[0];
        out.push({ value: [first, first] });
      }
      const at = '0';
      if (el.type === 'string') out.push({ value: [12345], at }, ...TEXTS.map((t) => ({ value: [t], at })));
      if (el.type === 'enum') out.push({ value: ['bogus'], at }, { value: [3], at });
      if (el.type === 'object') out.push({ value: ['x'], at }, { value: [null], at });
      return out;
    }
    default:
      throw new Error(`${key.path}: no wrong values for a ${u.type}; teach this test the kind`);
  }
}

describe('every rule of the schema speaks plain words', () => {
  it('walks the whole schema', () => {
    // A key nobody can find here is a key this test does not cover.
    expect(KEYS.length).toBeGreaterThan(80);
    for (const p of ['listen.port', 'backends', 'backends[].url', 'discovery.dns', 'discovery.dns.servers', 'static.mounts[].prefix', 'log.level']) {
      expect(KEYS.map((k) => k.path)).toContain(p);
    }
  });

  for (const key of KEYS) {
    it(`${key.path}: each kind of wrong value is refused in the house style`, () => {
      const u = unwrap(key.schema);
      const seen: string[] = [];
      for (const c of wrongValues(key)) {
        const { raw, field } = place(key.path, c.value);
        const at = c.at ? `${field}.${c.at}` : field;
        const mine = problemsOf(raw).filter((p) => p.startsWith(`${at}:`) || p.startsWith(`${at}.`));
        // Text that a rule accepts is no failure; everything else must be refused.
        const isText = typeof c.value === 'string' || (Array.isArray(c.value) && typeof c.value[0] === 'string' && c.at);
        if (!isText) expect(mine, `${at} = ${JSON.stringify(c.value)}`).not.toEqual([]);
        for (const p of mine) {
          expectHouseStyle(p, at);
          if (u.doc.secret === 'value' && typeof c.value === 'string' && c.value.length > 2) expect(p).not.toContain(c.value);
          if (!u.doc.secret && p.includes(' got ')) {
            const v = c.at ? (c.value as unknown[])[0] : c.value;
            const json = JSON.stringify(v);
            if (json.length <= 80) expect(p, `${p}\n  should show ${json}`).toContain(`got ${json}`);
          }
        }
        seen.push(...mine);
      }
      // Each rule with words of its own was reached by some value, and said those words; a rule
      // without words (a bare regex) would be described as "any text", so it is not allowed.
      const textNode = u.type === 'array' ? unwrap(child(u.node, '[]') as never).node : u.node;
      for (const node of [u.node, textNode]) {
        const silent = ((node._zod.def as unknown as { checks?: { _zod: { def: { check: string; error?: unknown } } }[] }).checks ?? []).filter(
          (c) => ['string_format', 'custom'].includes(c._zod.def.check) && typeof c._zod.def.error !== 'function',
        );
        if (silent.length > 0) expect(unwrap(node).doc.allowed ?? u.doc.allowed, `${key.path}: a rule without words; give it a message or doc({ allowed })`).toBeTruthy();
      }
      for (const words of [...ruleMessages(u.node), ...ruleMessages(textNode)]) {
        expect(seen.some((p) => p.includes(`expected ${words}`)), `no wrong value reached the rule "${words}" of ${key.path}; add one to TEXTS`).toBe(true);
      }
    });
  }

  it('names a missing required key and what it must be', () => {
    for (const key of KEYS.filter((k) => !k.hasDefault && !k.optional)) {
      const { raw, field } = place(key.path, undefined);
      const mine = problemsOf(raw).filter((p) => p.startsWith(`${field}:`));
      expect(mine, key.path).toEqual([`${field}: missing; expected ${allowed(key.schema)}`]);
    }
  });

  it('refuses an unknown key in every group, and suggests the key meant', () => {
    // Every mapping: the sections, nullable groups (discovery.dns) and items of lists of mappings (backends[]).
    const groups = [
      ...sections().filter((s) => s.info.type === 'object').map((s) => s.key),
      ...KEYS.filter((k) => k.type === 'object').map((k) => k.path),
      ...KEYS.filter((k) => k.type === 'array' && unwrap(child(k.node, '[]') as never).type === 'object').map((k) => `${k.path}[]`),
    ];
    expect(groups).toEqual(expect.arrayContaining(['listen', 'discovery.dns', 'backends[]', 'static.mounts[]']));
    for (const group of groups) {
      const known = keysOf(schemaAt(group.replace(/\[\]/g, '.0').split('.')) as never);
      const real = known[0] as string;
      // A typo: the second letter left out (or one too many for short keys).
      const typo = real.length > 3 ? `${real[0]}${real.slice(2)}` : `${real}s`;
      for (const [name, fix] of [
        [typo, `did you mean "${real}"?`],
        ['zzzqqq', `the keys of `],
      ] as const) {
        const { raw, field } = place(`${group}.${name}`, 1);
        const mine = problemsOf(raw).filter((p) => p.startsWith(`${field}:`));
        expect(mine, field).toHaveLength(1);
        expectHouseStyle(mine[0] as string, field);
        expect(mine[0]).toContain(`: unknown key; ${fix}`);
      }
    }
    expect(problemsOf({ lisen: {} })).toEqual(['lisen: unknown key; did you mean "listen"?']);
    expect(problemsOf({ zzzqqq: 1 })[0]).toMatch(/^zzzqqq: unknown key; the keys at the top level are listen, tls, http2, admin, backends, .* and log$/);
  });

  it('checks each rule across keys, in the same words', () => {
    const dir = mkdtempSync(join(tmpdir(), 'roomgate-config-'));
    try {
      const b = (id: string, url: string, weight = 1) => ({ id, url, weight });
      const cases: Record<string, { raw: Record<string, unknown>; problem: string }> = {
        [CROSS_CHECKS[0]!.rule]: {
          raw: { backends: [{ url: 'http://10.0.0.5:8000' }, { url: 'http://10.0.0.5:8000/' }] },
          problem: 'backends.1.id: got "10.0.0.5:8000" (host:port of its URL, as no id is given), also the id of backends.0; expected an id no other backend has; give one of them another id',
        },
        [CROSS_CHECKS[1]!.rule]: {
          raw: { backends: [b('a', 'http://a:1', 0), b('b', 'http://b:1', 0)] },
          problem: 'backends: got 2 backends, all with weight 0; expected at least one backend with weight above 0 (weight 0 takes no new rooms)',
        },
        [CROSS_CHECKS[2]!.rule]: {
          raw: { placement: { heartbeatMs: 3000 } },
          problem: 'placement.gatewayTtlMs: got 5000; expected at least 2 x placement.heartbeatMs (6000); raise it or lower placement.heartbeatMs',
        },
        [CROSS_CHECKS[3]!.rule]: {
          raw: { presence: { ttlMs: 1000 } },
          problem: 'presence.ttlMs: got 1000; expected at least 2 x placement.heartbeatMs (2000); raise it or lower placement.heartbeatMs',
        },
        [CROSS_CHECKS[4]!.rule]: {
          raw: { status: { public: 'token' } },
          problem: 'status.public: got "token" while admin.token is empty; expected "off" or "open", or set admin.token (or ROOMGATE_ADMIN_TOKEN) to a token of at least 16 characters',
        },
        [CROSS_CHECKS[5]!.rule]: {
          raw: { listen: { requestTimeoutMs: 10 } },
          problem: 'listen.requestTimeoutMs: got 10; expected 0 (no limit) or at least listen.headersTimeoutMs (20000): the whole request cannot take less time than its head',
        },
        [CROSS_CHECKS[6]!.rule]: {
          raw: { health: { host: 'app' } },
          problem: 'health.host: got "app" while health.path is null; expected null, as a TCP check sends no Host; or set health.path (e.g. "/healthz") for an HTTP check',
        },
        [CROSS_CHECKS[7]!.rule]: { raw: { health: { timeoutMs: 3000 } }, problem: 'health.timeoutMs: got 3000; expected at most health.intervalMs (2000)' },
        [CROSS_CHECKS[8]!.rule]: {
          raw: { redis: { sentinels: ['s:26379'], clusterNodes: ['c:6379'] } },
          problem:
            'redis.clusterNodes: got ["c:6379"] while redis.sentinels is set too; expected one form only, Sentinel or Cluster: remove redis.sentinels (env REDIS_SENTINELS) or redis.clusterNodes (env REDIS_CLUSTER_NODES)',
        },
        [CROSS_CHECKS[9]!.rule]: {
          raw: { redis: { url: 'redis://:hunter2@cache:6379/3', clusterNodes: ['c:6379'] } },
          problem: 'redis.url: got "redis://:<redacted>@cache:6379/3" with redis.clusterNodes set; expected no db: Redis Cluster has only db 0, remove "/3" from the URL',
        },
        [CROSS_CHECKS[10]!.rule]: {
          raw: { cookie: { format: 'django-signer', secrets: ['s'.repeat(20)] } },
          problem: `cookie.salt: got "" with cookie.format "django-signer" and cookie.setOnPages true; expected a salt only roomgate uses, e.g. "roomgate.room" (never one your app passes to Signer or set_signed_cookie): with this one roomgate would sign any room key a client sends with your app's SECRET_KEY under a salt your app trusts. Or set cookie.setOnPages: false and let the app set the cookie (roomgate then only verifies it)`,
        },
        [CROSS_CHECKS[11]!.rule]: {
          raw: { static: { mounts: [{ prefix: '/r/s/', dir }] } },
          problem: 'static.mounts.0.prefix: got "/r/s/", which overlaps room.pathPrefix "/r/" (per-tab room URLs); expected a prefix outside it, e.g. "/static/"',
        },
        [CROSS_CHECKS[12]!.rule]: {
          raw: { static: { mounts: [{ prefix: '/s/', dir: join(dir, 'nope') }] } },
          problem: `static.mounts.0.dir: got ${JSON.stringify(join(dir, 'nope'))}, which does not exist; expected a readable directory: create it (e.g. python manage.py collectstatic) or fix the path`,
        },
        [CROSS_CHECKS[13]!.rule]: {
          raw: { tls: { redirectPort: 8081 } },
          problem: 'tls.redirectPort: got 8081 while tls.certs is empty; expected null, or list certificates in tls.certs (the redirect leads to https)',
        },
        [CROSS_CHECKS[14]!.rule]: {
          raw: { backendTls: { cert: '/etc/roomgate/client.pem' } },
          problem: 'backendTls.key: got null while backendTls.cert is set; expected the PEM private key file of that certificate, or remove backendTls.cert (no client certificate)',
        },
        [CROSS_CHECKS[15]!.rule]: {
          raw: { redis: { url: 'rediss://cache:6380', tlsKey: '/etc/roomgate/redis-client.key' } },
          problem: 'redis.tlsCert: got null while redis.tlsKey is set; expected the PEM certificate file of that key, or remove redis.tlsKey (no client certificate)',
        },
        [CROSS_CHECKS[16]!.rule]: {
          raw: { redis: { url: 'redis://cache:6379', tlsCa: '/etc/roomgate/redis-ca.pem' } },
          problem:
            'redis.tlsCa: got "/etc/roomgate/redis-ca.pem" while redis.url is not a rediss:// URL; expected a rediss:// redis.url (env REDIS_URL) with it, e.g. "rediss://redis.internal:6380" (with Sentinel or Cluster only its scheme and password are used: "rediss://:PASSWORD@redis"), or remove redis.tlsCa',
        },
        [CROSS_CHECKS[17]!.rule]: {
          raw: { proxy: { errorPages: [{ status: 503, file: join(dir, 'nope.html') }] } },
          problem: `proxy.errorPages.0.file: got ${JSON.stringify(join(dir, 'nope.html'))}, which cannot be read; expected a readable HTML file`,
        },
        [CROSS_CHECKS[18]!.rule]: {
          raw: { backends: [{ url: 'http://app:8000' }], push: { tokens: ['p'.repeat(16)] } },
          problem:
            "backendCalls.secrets: got none while push.tokens turns pushes on; expected a secret of at least 32 characters that signs every push, so an app can tell roomgate's push from a client's: set ROOMGATE_CALL_SECRETS=$(openssl rand -base64 32) and give the same value to your push receiver (docs/push.md)",
        },
        [CROSS_CHECKS[19]!.rule]: {
          raw: { backends: [{ url: 'http://app:8000' }], handoff: { rebalance: { enabled: true } } },
          problem:
            "handoff.rebalance.enabled: got true while backendCalls.secrets is empty; expected false, or set ROOMGATE_CALL_SECRETS=$(openssl rand -base64 32) and give the same value to the apps' hooks (every handoff call is signed)",
        },
        [CROSS_CHECKS[20]!.rule]: {
          raw: { admin: { token: 'a'.repeat(20), drainTokens: ['d'.repeat(20), 'a'.repeat(20)] } },
          problem: 'admin.drainTokens.1: got <redacted>, the same token as admin.token, which allows every admin write; expected a token of its own, e.g. from `openssl rand -hex 24`',
        },
        [CROSS_CHECKS[21]!.rule]: {
          raw: { room: { pinInject: true, sources: ['path-prefix', 'cookie'] } },
          problem: 'room.pinInject: got true while room.sources (["path-prefix","cookie"]) has no "pin"; expected false, or add "pin" to room.sources (pages would carry a pin nothing reads)',
        },
      };
      // Every rule in checks.ts has a case here.
      expect(Object.keys(cases).sort()).toEqual(CROSS_CHECKS.map((c) => c.rule).sort());
      for (const [rule, c] of Object.entries(cases)) {
        const p = problemsOf(c.raw);
        expect(p, rule).toEqual([c.problem]);
        expectHouseStyle(c.problem, c.problem.slice(0, c.problem.indexOf(':')));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('messages', () => {
  const problems = (fn: () => unknown): string[] => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ConfigError) return [...err.problems];
      throw err;
    }
    throw new Error('expected a ConfigError');
  };

  it('say what is allowed in words, never the library\'s', () => {
    expect(problemsOf({ placement: { boundedLoadFactor: 'high' } })).toEqual([
      'placement.boundedLoadFactor: got "high"; expected 0 (bounded loads off: pure consistent hashing) or a number from 1 to 10',
    ]);
    expect(problemsOf({ placement: { boundedLoadFactor: 0.5 } })).toEqual([
      'placement.boundedLoadFactor: got 0.5; expected 0 (bounded loads off: pure consistent hashing) or a number from 1 to 10',
    ]);
    expect(problemsOf({ room: { sources: 'query' } })).toEqual([
      'room.sources: got "query"; expected a list of at least 1 item, each one of "pin", "path-prefix", "query", "page-path", "cookie" or "header"; each source at most once',
    ]);
    expect(problemsOf({ room: { sources: ['query', 'qeury'] } })).toEqual([
      'room.sources.1: got "qeury"; expected one of "pin", "path-prefix", "query", "page-path", "cookie" or "header"; did you mean "query"?',
    ]);
    expect(problemsOf({ backends: 'http://a:1' })).toEqual(['backends: got "http://a:1"; expected a list, each a mapping with the keys id, url and weight']);
    expect(problemsOf({ listen: { port: '8080', keepAliveTimeoutMs: 0 } })).toEqual([
      'listen.port: got "8080"; expected a whole number from 0 to 65535; write the number without quotes',
      'listen.keepAliveTimeoutMs: got 0; expected a whole number of milliseconds from 1 to 86400000',
    ]);
    expect(problemsOf({ proxy: { websocketIdleTimeoutMs: -1 } })).toEqual(['proxy.websocketIdleTimeoutMs: got -1; expected a whole number of milliseconds from 0 (never) to 86400000']);
    expect(problemsOf({ proxy: { clientWriteTimeoutMs: '60s', websocketClientSilenceMs: 1.5 } })).toEqual([
      'proxy.websocketClientSilenceMs: got 1.5; expected a whole number of milliseconds from 0 (never) to 86400000',
      'proxy.clientWriteTimeoutMs: got "60s"; expected a whole number of milliseconds from 0 (never) to 86400000',
    ]);
    expect(problemsOf({ admin: { enabled: 'yes' } })).toEqual(['admin.enabled: got "yes"; expected true or false; write true or false without quotes']);
    expect(problemsOf({ health: { path: 'healthz' } })).toEqual(['health.path: got "healthz"; expected a path starting with "/", e.g. "/healthz"']);
    const healthPath = `a path starting with "/" of the characters a request target allows (letters, digits and -._~!$&'()*+,;=:@/?%, each "%" starting an escape such as %20), e.g. "/healthz"`;
    expect(problemsOf({ health: { path: 5 } })).toEqual([`health.path: got 5; expected ${healthPath}, or null (a TCP connect check)`]);
    // The path goes into the check's request line as it is: a space or a line break would split it or add header lines.
    expect(problemsOf({ health: { path: '/a b' } })).toEqual([`health.path: got "/a b"; expected ${healthPath}; percent-encode " " as %20`]);
    expect(problemsOf({ health: { path: '/h\r\nX-Evil: 1' } })).toEqual([
      `health.path: got "/h\\r\\nX-Evil: 1"; expected ${healthPath}; remove the control character "\\r" at offset 2 (a line break or tab in the value?)`,
    ]);
    expect(problemsOf({ health: { path: '/ready#x' } })).toEqual([`health.path: got "/ready#x"; expected ${healthPath}; percent-encode "#" as %23`]);
    expect(problemsOf({ health: { path: '/caf\u00e9' } })).toEqual([`health.path: got "/caf\u00e9"; expected ${healthPath}; percent-encode "\u00e9" as %C3%A9`]);
    expect(problemsOf({ health: { path: '/100%' } })).toEqual([
      `health.path: got "/100%"; expected ${healthPath}; the "%" at offset 4 starts no escape of two hex digits: write a "%" itself as %25`,
    ]);
    expect(problemsOf({ health: { path: "/health?deep=1&name=a%20b;v=(1)~'x'" } })).toEqual([]);
    expect(problemsOf({ discovery: { dns: { type: 'A' } } })).toEqual(['discovery.dns.name: missing; expected a DNS name, e.g. "_http._tcp.app-headless.default.svc.cluster.local"']);
    expect(problemsOf({ listen: null })).toEqual([
      'listen: got null; expected a mapping with the keys host, port, maxHeaderBytes, maxHeaders, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections, descriptorReserve and maxConnectionsPerAddress; a key with nothing under it is null: write "listen: {}" for all defaults, or remove the line',
    ]);
    expect(problemsOf({ listen: { prot: 80 } })).toEqual(['listen.prot: unknown key; did you mean "port"?']);
    expect(problemsOf({ listen: { max_header_bytes: 80 } })).toEqual(['listen.max_header_bytes: unknown key; did you mean "maxHeaderBytes"?']);
    expect(problemsOf({ health: { timeout: 80 } })).toEqual(['health.timeout: unknown key; did you mean "timeoutMs"?']);
    expect(problemsOf({ discovery: { dns: { name: 'x', servers: ['dns.local'] } } })).toEqual([
      'discovery.dns.servers.0: got "dns.local"; expected a DNS server "ip" or "ip:port" ("[ipv6]:port"), e.g. "10.96.0.10" or "10.96.0.10:53"',
    ]);
  });

  it('redact secrets only: tokens, cookie secrets and the password in a URL', () => {
    const p = problemsOf({ admin: { token: 'hunter2' }, api: { tokens: ['tok-short'] }, cookie: { secrets: 'one-secret' }, redis: { url: 'http://:hunter3@cache:6379' } });
    expect(p).toEqual([
      'admin.token: got <redacted, 7 characters>; expected empty (admin writes off) or a token of at least 16 characters',
      'redis.url: got "http://:<redacted>@cache:6379"; expected a redis:// or rediss:// URL, e.g. "redis://:password@10.0.0.7:6379/0"',
      'api.tokens.0: got <redacted, 9 characters>; expected a token of at least 16 characters',
      'cookie.secrets: got <redacted, 10 characters>; expected a list, each a secret of at least 16 characters',
    ]);
    for (const secret of ['hunter2', 'hunter3', 'tok-short', 'one-secret']) expect(p.join('\n')).not.toContain(secret);
    expect(problemsOf({ admin: { drainTokens: ['drain-short'] } })).toEqual(['admin.drainTokens.0: got <redacted, 11 characters>; expected a token of at least 16 characters, e.g. from `openssl rand -hex 24`']);
    expect(problemsOf({ admin: { drainTokens: 'x'.repeat(20) } })).toEqual(['admin.drainTokens: got <redacted, 20 characters>; expected a list, each a token of at least 16 characters, e.g. from `openssl rand -hex 24`']);
    expect(problemsOf({ admin: { drainFrom: 'pods' } })).toEqual(['admin.drainFrom: got "pods"; expected "backend" or "anywhere"']);
    // A URL without a password is shown whole, so the mistake can be seen.
    expect(problemsOf({ redis: { url: 'http://cache:6379' } })).toEqual(['redis.url: got "http://cache:6379"; expected a redis:// or rediss:// URL, e.g. "redis://:password@10.0.0.7:6379/0"']);
    expect(problemsOf({ redis: { url: 'rediss://user:pw@cache:6379/1', clusterNodes: ['c:1'] } })[0]).toContain('got "rediss://user:<redacted>@cache:6379/1"');
    expect(problemsOf({ admin: { token: 1234567890 } })).toEqual(['admin.token: got <redacted number>; expected empty (admin writes off) or a token of at least 16 characters']);
  });

  it('report every problem in one run: the rules across keys run on the parts that are valid', () => {
    const dir = mkdtempSync(join(tmpdir(), 'roomgate-config-'));
    try {
      const raw = {
        listen: { port: 'eighty', prot: 1 },
        backends: [
          { id: 'x', url: 'http://a:1' },
          { id: 'x', url: 'http://a:2' },
          { id: 'y', url: 'ftp://a:3' },
        ],
        static: { maxAgeS: 'long', mounts: [{ prefix: '/s/', dir: join(dir, 'missing') }, { prefix: 's' }] },
        placement: { heartbeatMs: 'often', gatewayTtlMs: 10 },
      };
      expect(problemsOf(raw)).toEqual([
        'listen.port: got "eighty"; expected a whole number from 0 to 65535',
        'listen.prot: unknown key; did you mean "port"?',
        'backends.2.url: got "ftp://a:3"; expected an http:// or https:// URL with host and port and no path, e.g. "http://10.0.0.5:8000" or "https://app-1.internal:8443"',
        'placement.heartbeatMs: got "often"; expected a whole number of milliseconds from 1 to 86400000',
        'static.mounts.1.prefix: got "s"; expected a URL path that starts and ends with "/", e.g. "/static/"',
        'static.mounts.1.dir: missing; expected non-empty text',
        'static.maxAgeS: got "long"; expected a whole number of seconds from 0 (no-cache) to 31536000',
        'backends.1.id: got "x", also the id of backends.0; expected an id no other backend has; give one of them another id',
        // gatewayTtlMs is compared with a heartbeat only when the heartbeat is valid: no guess here.
        `static.mounts.0.dir: got ${JSON.stringify(join(dir, 'missing'))}, which does not exist; expected a readable directory: create it (e.g. python manage.py collectstatic) or fix the path`,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a push token too short (issue 31: ROOMGATE_PUSH_TOKENS=pushtok123): the 16-character minimum stays, and the refusal says how to make one', () => {
    expect(problems(() => loadConfig({ env: { ROOMGATE_PUSH_TOKENS: 'pushtok123' } }))).toEqual([
      'push.tokens.0: got <redacted, 10 characters> (from ROOMGATE_PUSH_TOKENS); expected a token of at least 16 characters, e.g. from `openssl rand -hex 24`',
    ]);
    expect(loadConfig({ env: { ROOMGATE_PUSH_TOKENS: 'pushtok123456789' } }).push.tokens).toEqual(['pushtok123456789']);
  });

  it('say where a value came from when it was not the file', () => {
    expect(problems(() => loadConfig({ env: { ROOMGATE_PORT: 'eighty', ROOMGATE_LOG_LEVEL: 'verbose' } }))).toEqual([
      'listen.port: got "eighty" (from ROOMGATE_PORT); expected a whole number from 0 to 65535',
      'log.level: got "verbose" (from ROOMGATE_LOG_LEVEL); expected one of "fatal", "error", "warn", "info", "debug", "trace" or "silent"',
    ]);
    expect(problems(() => loadConfig({ env: {}, overrides: { port: 'x', backends: ['b=http://a:1/x'] } }))).toEqual([
      'listen.port: got "x" (from --port); expected a whole number from 0 to 65535',
      'backends.0.url: got "http://a:1/x" (from --backend); expected an http:// or https:// URL with host and port and no path, e.g. "http://10.0.0.5:8000" or "https://app-1.internal:8443"; remove the path (roomgate forwards each request path as it comes)',
    ]);
  });

  it('give hints that fit where the value came from: quotes are the file\'s, and only when unquoted it would do', () => {
    // A number in quotes in the file: the hint, when the number itself is allowed.
    expect(problemsOf({ listen: { port: '80' } })).toEqual(['listen.port: got "80"; expected a whole number from 0 to 65535; write the number without quotes']);
    expect(problemsOf({ listen: { port: '-1' } })).toEqual(['listen.port: got "-1"; expected a whole number from 0 to 65535']);
    expect(problemsOf({ listen: { port: '70000' } })).toEqual(['listen.port: got "70000"; expected a whole number from 0 to 65535']);
    // From the environment or a flag a value is text by nature: no word about quotes.
    expect(problems(() => loadConfig({ env: { ROOMGATE_PORT: '-1' } }))).toEqual(['listen.port: got "-1" (from ROOMGATE_PORT); expected a whole number from 0 to 65535']);
    expect(problems(() => loadConfig({ env: {}, overrides: { port: '-1' } }))).toEqual(['listen.port: got "-1" (from --port); expected a whole number from 0 to 65535']);
    // "8080.0" is a number YAML would take; given as text by a flag or a variable, quotes are not the slip.
    expect(problems(() => loadConfig({ env: {}, overrides: { port: '8080.0' } }))).toEqual(['listen.port: got "8080.0" (from --port); expected a whole number from 0 to 65535']);
    expect(problems(() => loadConfig({ env: { ROOMGATE_PORT: '8080.0' } }))).toEqual(['listen.port: got "8080.0" (from ROOMGATE_PORT); expected a whole number from 0 to 65535']);
    expect(problemsOf({ listen: { port: '8080.0' } })).toEqual(['listen.port: got "8080.0"; expected a whole number from 0 to 65535; write the number without quotes']);
    expect(problems(() => loadConfig({ env: { ROOMGATE_ADMIN_PORT: '99999' } }))).toEqual(['admin.port: got 99999 (from ROOMGATE_ADMIN_PORT); expected a whole number from 0 to 65535']);
    // A did-you-mean fits wherever the value came from.
    expect(problems(() => loadConfig({ env: { ROOMGATE_LOG_LEVEL: 'inf' } }))[0]).toMatch(/\(from ROOMGATE_LOG_LEVEL\); expected one of .*; did you mean "info"\?$/);
  });

  it('name a duplicate backend id even when that backend\'s URL is bad too', () => {
    expect(problemsOf({ backends: [{ id: 'a', url: 'http://127.0.0.1:8001' }, { id: 'a', url: 'notaurl' }] })).toEqual([
      'backends.1.url: got "notaurl"; expected an http:// or https:// URL with host and port and no path, e.g. "http://10.0.0.5:8000" or "https://app-1.internal:8443"',
      'backends.1.id: got "a", also the id of backends.0; expected an id no other backend has; give one of them another id',
    ]);
    expect(problemsOf({ backends: [{ id: 'a', url: 'notaurl' }, { url: 'http://127.0.0.1:8001', id: 'a' }] })).toContain(
      'backends.1.id: got "a", also the id of backends.0; expected an id no other backend has; give one of them another id',
    );
  });

  it('show a YAML mistake with its line, column and a caret', () => {
    const file = writeConfig({});
    const yaml = (text: string) => {
      const f = file.replace(/roomgate\.yaml$/, `t${Math.random().toString(36).slice(2)}.yaml`);
      writeFileSync(f, text);
      return { f, p: problems(() => loadConfig({ env: {}, file: f })) };
    };
    const a = yaml('listen:\n  port: 80: 1\n');
    expect(a.p).toEqual([
      `config file ${a.f}: not valid YAML at line 2, column 9: a key and a nested key on one line; put the nested key on its own, indented line (e.g. "listen:" then "  port: 8080")\n  2 |   port: 80: 1\n    |         ^`,
    ]);
    const b = yaml('room:\n  sources: [query, cookie\n');
    expect(b.p).toEqual([
      `config file ${b.f}: not valid YAML at line 2, column 26 (the end of the file): flow sequence in block collection must be sufficiently indented and end with a ]\n  2 |   sources: [query, cookie\n    |                          ^`,
    ]);
    const c = yaml('listen:\n  port: 1\n  port: 2\n');
    expect(c.p[0]).toMatch(/at line 3, column 3: this key appears twice in the same mapping; keep one\n {2}3 \| {3}port: 2\n {4}\| {3}\^$/);
    // The whole problem reaches the user: ConfigError's message keeps the lines together.
    expect(new ConfigError(a.p).message).toContain('\n      2 |   port: 80: 1\n        |         ^');
    // The line shown never carries a secret: starred out character for character, so the caret stays put.
    const d = yaml('admin:\n  token: hunter2hunter2: x\n');
    expect(d.p[0]).toMatch(/at line 2, column 10: .*\n {2}2 \| {3}token: \*{15} \*\n {4}\| {10}\^$/);
    const e = yaml('cookie:\n  secrets:\n    - s3cret-one-long-enough\n    - s3cret-two: [\n');
    expect(e.p.join('\n')).not.toContain('s3cret');
    const f = yaml('redis:\n  url: redis://me:pa55word@cache:6379: x\n');
    expect(f.p[0]).toContain('2 |   url: redis://me:********@cache:6379: x');
  });

  it('star out only secrets in a line shown from the file', () => {
    const lines = ['api:', '  tokens:', '    - abcdef', '  enabled: yes', 'listen:', '  - host: x', '  port: 80'];
    expect(lines.map((_, i) => maskSecrets(lines, i))).toEqual(['api:', '  tokens:', '    - ******', '  enabled: yes', 'listen:', '  - host: x', '  port: 80']);
    expect(maskSecrets(['  tokens: [aaa, "bbb"]'], 0)).toBe('  tokens: [***, "***"]');
    expect(maskSecrets(['backends: [{url: "http://b:1"}]'], 0)).toBe('backends: [{url: "http://b:1"}]');
  });
});

describe('suggestions', () => {
  it('counts a swap of two letters as one edit', () => {
    expect(editDistance('prot', 'port')).toBe(1);
    expect(editDistance('lisen', 'listen')).toBe(1);
    expect(editDistance('abc', 'xyz')).toBe(3);
  });

  it('suggests only what is close, and every equally close word', () => {
    expect(closest('prot', ['host', 'port'])).toEqual(['port']);
    expect(closest('MaxHeaders', ['maxHeaderBytes', 'maxHeaders'])).toEqual(['maxHeaders']);
    expect(closest('django', ['roomgate', 'django-signer', 'django-cookie'])).toEqual(['django-signer', 'django-cookie']);
    expect(closest('x', ['A', 'AAAA'])).toEqual([]);
    expect(closest('banana', ['listen', 'admin'])).toEqual([]);
  });
});
