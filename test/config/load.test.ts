import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';
import { ROOT, stopAll, writeConfig } from '../support/processes.js';
import { afterAll } from 'vitest';

afterAll(stopAll);

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('configuration', () => {
  it('the documented example is exactly the defaults and names every key', () => {
    const example = parse(readFileSync(`${ROOT}/config/roomgate.example.yaml`, 'utf8')) as Record<string, unknown>;
    const defaults = configSchema.parse({});
    expect(configSchema.parse(example)).toEqual(defaults);
    // Every default key is written out in the example (not just filled in by the schema).
    const keys = (o: unknown, at = ''): string[] =>
      o && typeof o === 'object' && !Array.isArray(o)
        ? Object.entries(o).flatMap(([k, v]) => [`${at}${k}`, ...keys(v, `${at}${k}.`)])
        : [];
    expect(keys(example).sort()).toEqual(keys(defaults).sort());
  });

  it('has defaults for everything', () => {
    const c = loadConfig({ env: {} });
    expect(c.listen.port).toBe(8080);
    expect(c.admin.host).toBe('127.0.0.1');
    expect(c.room.sources).toEqual(['pin', 'path-prefix', 'query', 'page-path', 'cookie', 'header']);
    expect(c.backends).toEqual([]);
  });

  it('environment overrides the file and flags override both', () => {
    const file = writeConfig({ listen: { port: 7000 }, backends: [{ url: 'http://127.0.0.1:9001' }] });
    const env = { ROOMGATE_PORT: '7001', ROOMGATE_BACKENDS: 'a=http://127.0.0.1:9002, http://127.0.0.1:9003', ROOMGATE_COOKIE_SECRETS: 'x'.repeat(16) + ',' + 'y'.repeat(16) };
    const c = loadConfig({ file, env });
    expect(c.listen.port).toBe(7001);
    expect(c.backends.map((b) => [b.id, b.url])).toEqual([
      ['a', 'http://127.0.0.1:9002'],
      ['127.0.0.1:9003', 'http://127.0.0.1:9003'],
    ]);
    expect(c.cookie.secrets).toHaveLength(2);
    const f = loadConfig({ file, env, overrides: { port: '7002', backends: ['http://[::1]:9004'] } });
    expect(f.listen.port).toBe(7002);
    expect(f.backends).toEqual([{ id: '[::1]:9004', url: 'http://[::1]:9004', host: '::1', port: 9004, weight: 1 }]);
  });

  it('ROOMGATE_TLS_CERTS: CERT:KEY pairs, split at the last colon; a pair without a key is named', () => {
    const c = loadConfig({ env: { ROOMGATE_TLS_CERTS: '/etc/tls/tls.crt:/etc/tls/tls.key, /x/b.pem:/x/b.key' } });
    expect(c.tls.certs).toEqual([
      { cert: '/etc/tls/tls.crt', key: '/etc/tls/tls.key' },
      { cert: '/x/b.pem', key: '/x/b.key' },
    ]);
    expect(problems(() => loadConfig({ env: { ROOMGATE_TLS_CERTS: '/etc/tls/tls.crt' } }))).toEqual(['tls.certs.0.key: missing; expected non-empty text']);
  });

  it('names the field, the bad value and what is allowed', () => {
    const file = writeConfig({ listen: { port: 70000 }, room: { noRoom: 'random', sources: ['query', 'qeury'] }, proxy: { trustedProxies: ['10.0.0.0/33'] } });
    const p = problems(() => loadConfig({ file, env: {} }));
    expect(p.find((x) => x.startsWith('listen.port:'))).toMatch(/got 70000; expected .*65535/);
    expect(p.find((x) => x.startsWith('room.noRoom:'))).toMatch(/got "random"; expected .*least-loaded.*reject/);
    expect(p.find((x) => x.startsWith('room.sources.1:'))).toMatch(/got "qeury"/);
    const q = problems(() => loadConfig({ env: {}, file: writeConfig({ proxy: { trustedProxies: ['10.0.0.0/33', 'nope'] } }) }));
    expect(q).toEqual([
      'proxy.trustedProxies.0: got "10.0.0.0/33"; expected an IP address or CIDR such as "10.0.0.0/8" or "::1"',
      'proxy.trustedProxies.1: got "nope"; expected an IP address or CIDR such as "10.0.0.0/8" or "::1"',
    ]);
  });

  it('rejects unknown keys, bad URLs, duplicate ids, bad patterns and non-numeric ports', () => {
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({ lisen: {} }) }))).toEqual(['lisen: unknown key; did you mean "listen"?']);
    expect(problems(() => loadConfig({ env: {}, overrides: { backends: ['ftp://x:1'] } }))[0]).toMatch(/^backends\.0\.url: got "ftp:\/\/x:1" \(from --backend\); expected an http:\/\/ or https:\/\/ URL/);
    expect(problems(() => loadConfig({ env: {}, overrides: { backends: ['http://a:1/path'] } }))[0]).toMatch(/no path.*; remove the path/);
    expect(problems(() => loadConfig({ env: {}, overrides: { backends: ['x=http://a:1', 'x=http://a:2'] } }))).toEqual([
      'backends.1.id: got "x", also the id of backends.0; expected an id no other backend has; give one of them another id',
    ]);
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({ room: { pattern: '([' } }) }))).toEqual([
      'room.pattern: got "(["; expected a regular expression (JavaScript syntax) that compiles; this one does not: unterminated character class',
    ]);
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({ room: { pagePaths: ['/game/x{room}/'] } }) }))[0]).toMatch(/whole segment/);
    // api.listRooms takes globs: a regular expression is refused, with the glob to write instead.
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({ api: { listRooms: ['public-*', '^public-.*$'] } }) }))).toEqual([
      'api.listRooms.1: got "^public-.*$"; expected a glob such as "public-*", where only * is special, not a regular expression: "^" is not allowed here (for ^public-.*$ write public-*)',
    ]);
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({ api: { listRooms: [''] } }) }))[0]).toMatch(/^api\.listRooms\.0: .*glob such as "public-\*"/);
    expect(loadConfig({ env: { ROOMGATE_API_LIST_ROOMS: 'public-*,lobby.*' } }).api).toMatchObject({ listRooms: ['public-*', 'lobby.*'], publicReads: true });
    expect(problems(() => loadConfig({ env: { ROOMGATE_PORT: 'eighty' } }))).toEqual(['listen.port: got "eighty" (from ROOMGATE_PORT); expected a whole number from 0 to 65535']);
  });

  it('health: a TCP connect check by default; health.host only with health.path, and a Host value', () => {
    const d = loadConfig({ env: {} });
    expect(d.health).toMatchObject({ path: null, host: null });
    const ok = loadConfig({ env: {}, file: writeConfig({ health: { path: '/healthz', host: 'app.example.com:8000' } }) });
    expect(ok.health).toMatchObject({ path: '/healthz', host: 'app.example.com:8000' });
    expect(loadConfig({ env: {}, file: writeConfig({ health: { path: '/h', host: '[::1]:8000' } }) }).health.host).toBe('[::1]:8000');
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({ health: { host: 'app.example.com' } }) }))).toEqual([
      'health.host: got "app.example.com" while health.path is null; expected null, as a TCP check sends no Host; or set health.path (e.g. "/healthz") for an HTTP check',
    ]);
    for (const bad of ['app example', 'http://app.example', 'app.example/x', '']) {
      expect(problems(() => loadConfig({ env: {}, file: writeConfig({ health: { path: '/healthz', host: bad } }) }))[0], bad).toMatch(/^health\.host: got .*; expected a Host header value/);
    }
    // health.path goes into the check's request line as it is: a space or a line break is refused at load.
    for (const [bad, fix] of [['/a b', 'percent-encode " " as %20'], ['/h\r\nX-Evil: 1', 'remove the control character "\\r"'], ['/h\n', 'remove the control character "\\n"']]) {
      const [problem, ...more] = problems(() => loadConfig({ env: {}, file: writeConfig({ health: { path: bad } }) }));
      expect(problem, bad).toMatch(/^health\.path: got .*; expected a path starting with "\/" of the characters a request target allows/);
      expect(problem, bad).toContain(fix);
      expect(more).toEqual([]);
    }
  });

  it('admin.allowedHosts: none by default; host names only, a port or URL is named as the problem', () => {
    expect(loadConfig({ env: {} }).admin.allowedHosts).toEqual([]);
    expect(loadConfig({ env: {}, file: writeConfig({ admin: { allowedHosts: ['roomgate-admin', 'admin.example.com'] } }) }).admin.allowedHosts).toEqual(['roomgate-admin', 'admin.example.com']);
    for (const bad of ['roomgate-admin:9090', 'http://roomgate-admin', '*.example.com', '']) {
      expect(problems(() => loadConfig({ env: {}, file: writeConfig({ admin: { allowedHosts: [bad] } }) }))[0], bad).toMatch(/^admin\.allowedHosts\.0: got .*; expected a host name without port, e\.g\. "roomgate-admin"/);
    }
  });

  it('never prints a secret back', () => {
    const p = problems(() => loadConfig({ env: { ROOMGATE_COOKIE_SECRETS: 'short-secret' } }));
    expect(p).toEqual(['cookie.secrets.0: got <redacted, 12 characters> (from ROOMGATE_COOKIE_SECRETS); expected a secret of at least 16 characters']);
    expect(p.join()).not.toContain('short-secret');
  });

  it('reports unreadable and malformed files', () => {
    expect(problems(() => loadConfig({ env: {}, file: '/nonexistent/roomgate.yaml' }))[0]).toMatch(/cannot be read \(ENOENT\)/);
    expect(problems(() => loadConfig({ env: {}, file: writeConfig({}).replace(/roomgate\.yaml$/, 'nope.yaml') }))[0]).toMatch(/ENOENT/);
  });
});

describe('cookie signing is never an oracle for the app', () => {
  const env = { ROOMGATE_COOKIE_SECRETS: 'django-secret-key-0123456789' };
  const load = (cookie: Record<string, unknown>) => loadConfig({ file: writeConfig({ cookie }), env });

  it('refuses a Django format that would set cookies under an empty or a Django default salt', () => {
    for (const format of ['django-signer', 'django-cookie']) {
      for (const salt of ['', 'django.core.signing.Signer', 'django.core.signing.TimestampSigner']) {
        const p = problems(() => load({ format, salt }));
        expect(p).toHaveLength(1);
        expect(p[0]).toMatch(/^cookie\.salt: got .* cookie\.setOnPages true; expected a salt only roomgate uses, .*Or set cookie\.setOnPages: false/);
      }
    }
  });

  it('accepts verify-only Django cookies, a salt of roomgate its own, and its own format with any salt', () => {
    expect(load({ format: 'django-signer', salt: '', setOnPages: false }).cookie.salt).toBe('');
    expect(load({ format: 'django-cookie', salt: 'roomgate.room' }).cookie.setOnPages).toBe(true);
    expect(load({ format: 'roomgate', salt: '' }).cookie.format).toBe('roomgate');
    expect(load({ format: 'django-signer', salt: '', signed: false }).cookie.signed).toBe(false);
  });
});

describe('request timeouts', () => {
  it('refuses a whole-request limit shorter than the head limit, and accepts 0 (no limit)', () => {
    const p = problems(() => loadConfig({ file: writeConfig({ listen: { requestTimeoutMs: 1_000, headersTimeoutMs: 5_000 } }) }));
    expect(p).toEqual([
      'listen.requestTimeoutMs: got 1000; expected 0 (no limit) or at least listen.headersTimeoutMs (5000): the whole request cannot take less time than its head',
    ]);
    expect(loadConfig({ file: writeConfig({ listen: { requestTimeoutMs: 0 } }) }).listen.requestTimeoutMs).toBe(0);
  });
});
