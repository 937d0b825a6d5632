// check-config (and start) name every problem of a configuration in one run: the schema's, the
// rules across keys, and those of the files it names (certificates and keys), all in one path
// notation (tls.certs.0, static.mounts.0.dir), so fixing one never uncovers the next. check-config
// runs in this process (runCliHere: the CLI's run(), as the binary calls it); start is the binary.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TlsCertificates } from '../../src/server/tls.js';
import { makeCa, makeSigned } from '../support/certs.js';
import { runCli, stopAll, writeConfig } from '../support/processes.js';
import { runCliHere } from './in-process.js';

let dir: string;
let file: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'roomgate-check-config-'));
  const ca = makeCa(dir, 'ca');
  const a = makeSigned(dir, 'a', ca, ['a.test']);
  const b = makeSigned(dir, 'b', ca, ['b.test']);
  file = writeConfig({
    backends: [
      { id: 'web-1', url: 'http://127.0.0.1:8001' },
      { id: 'web-1', url: 'http://127.0.0.1:8002/app' },
    ],
    static: { mounts: [{ prefix: '/static/', dir: join(dir, 'no-such-dir') }] },
    tls: { certs: [{ cert: a.cert, key: a.key }, { cert: a.cert, key: b.key }] },
    backendTls: { ca: join(dir, 'no-such-ca.pem') },
    redis: { url: 'rediss://redis.internal:6380', tlsCa: join(dir, 'no-such-redis-ca.pem') },
  });
});

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await stopAll();
});

/** The problem lines of an invalid-configuration answer. */
const problems = (stderr: string): string[] => stderr.split('\n').filter((l) => l.startsWith('  - ')).map((l) => l.slice(4));

describe('check-config names every problem at once', () => {
  it('schema, rules across keys and files together, in one notation', async () => {
    const r = await runCliHere(['check-config', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const p = problems(r.stderr);
    const fields = p.map((l) => l.slice(0, l.indexOf(':')));
    expect(fields).toEqual(['backends.1.url', 'backends.1.id', 'static.mounts.0.dir', 'tls.certs.1', 'backendTls.ca', 'redis.tlsCa']);
    expect(p[1]).toContain('also the id of backends.0');
    expect(p[3]).toMatch(/the key in .*b\.key does not belong to the certificate in .*a\.crt/);
    // One notation: a list item is .N, never [N].
    for (const l of p) expect(l, l).not.toMatch(/\[\d+\]/);
    // All from the file: none says it came from elsewhere.
    for (const l of p) expect(l, l).not.toContain('(from ');
  });

  it('a file named by an environment variable says so', async () => {
    const r = await runCliHere(['check-config'], { ROOMGATE_TLS_CERTS: `${join(dir, 'a.crt')}:${join(dir, 'b.key')}` });
    expect(r.code).toBe(2);
    expect(problems(r.stderr)).toEqual([expect.stringMatching(/^tls\.certs\.0: the key in .*b\.key does not belong to the certificate in .*a\.crt.* \(from ROOMGATE_TLS_CERTS\)$/)]);
  });

  it('start refuses with the same list before starting anything', async () => {
    const check = await runCliHere(['check-config', '--config', file]);
    const start = await runCli(['start', '--config', file, '--port', '0']);
    expect(start.code).toBe(2);
    expect(problems(start.stderr)).toEqual(problems(check.stderr));
  });

  it('a reload of the certificates (SIGHUP, a changed file) names them in the same notation', () => {
    expect(() => new TlsCertificates({ certs: [{ cert: join(dir, 'a.crt'), key: join(dir, 'a.key') }, { cert: join(dir, 'gone.crt'), key: join(dir, 'a.key') }], minVersion: 'TLSv1.2' })).toThrow(
      /^tls\.certs\.1\.cert: cannot read .*gone\.crt \(ENOENT\)/,
    );
  });

  it('an environment variable out of range gets no hint about quotes', async () => {
    const r = await runCliHere(['check-config'], { ROOMGATE_PORT: '-1' });
    expect(r.code).toBe(2);
    expect(problems(r.stderr)).toEqual(['listen.port: got "-1" (from ROOMGATE_PORT); expected a whole number from 0 to 65535']);
  });
});

describe('check-config prints a valid configuration', () => {
  it('with every secret the schema marks redacted: tokens, drain tokens, push tokens, call and cookie secrets, the Redis password', async () => {
    const secrets = {
      ROOMGATE_ADMIN_TOKEN: 'admin-secret-0123456789',
      ROOMGATE_DRAIN_TOKENS: 'drain-secret-0123456789,drain-secret-old-012345',
      ROOMGATE_API_TOKENS: 'api-secret-0123456789',
      ROOMGATE_PUSH_TOKENS: 'push-secret-0123456789',
      ROOMGATE_CALL_SECRETS: 'call-secret-0123456789-0123456789-0123',
      ROOMGATE_COOKIE_SECRETS: 'cookie-secret-0123456789',
      REDIS_URL: 'redis://:redis-secret-0123@127.0.0.1:6379',
    };
    const r = await runCliHere(['check-config', '--json', '--backend', 'http://127.0.0.1:8001'], secrets);
    expect(r.code).toBe(0);
    for (const s of [...Object.values(secrets).flatMap((v) => v.split(',')), 'redis-secret-0123']) expect(r.stdout).not.toContain(s);
    const c = JSON.parse(r.stdout).config;
    expect([c.admin.token, c.admin.drainTokens, c.api.tokens, c.push.tokens, c.backendCalls.secrets, c.cookie.secrets, c.redis.url]).toEqual([
      '<redacted>',
      ['<redacted>', '<redacted>'],
      ['<redacted>'],
      ['<redacted>'],
      ['<redacted>'],
      ['<redacted>'],
      'redis://:<redacted>@127.0.0.1:6379',
    ]);
  });
});
