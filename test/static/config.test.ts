import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { stopAll, writeConfig } from '../support/processes.js';

function problems(config: Record<string, unknown>): string[] {
  try {
    loadConfig({ env: {}, file: writeConfig(config) });
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('static configuration', () => {
  let dir: string;
  let file: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'roomgate-static-config-'));
    file = join(dir, 'not-a-dir.txt');
    writeFileSync(file, 'x');
  });
  afterAll(async () => {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  });

  const mount = (prefix: string, d = dir) => ({ static: { mounts: [{ prefix, dir: d }] } });

  it('has no mounts by default', () => {
    const c = loadConfig({ env: {} });
    expect(c.static).toEqual({ mounts: [], maxAgeS: 60, hashedNames: '[.-][0-9a-f]{8,64}\\.[A-Za-z0-9]+$' });
    const hashed = new RegExp(c.static.hashedNames!);
    for (const name of ['app.3f2a9c1b.js', 'css/base.5af66c1b1797.css', 'chunk-0123456789abcdef0123.js']) expect([name, hashed.test(name)]).toEqual([name, true]);
    for (const name of ['app.js', 'jquery-3.7.1.min.js', 'app.3f2a9c1b.js.map', 'dist.0123456789/app.js', 'logo.DEADBEEF.png', 'a.abc.js']) {
      expect([name, hashed.test(name)]).toEqual([name, false]);
    }
  });

  it('accepts a mount and resolves a relative directory against the working directory', () => {
    expect(problems(mount('/static/'))).toEqual([]);
    const c = loadConfig({ env: {}, file: writeConfig(mount('/assets/v1/', relative(process.cwd(), dir))) });
    expect(c.static.mounts).toEqual([{ prefix: '/assets/v1/', dir }]);
  });

  it('wants a prefix that starts and ends with "/", outside /_roomgate/, without dot segments', () => {
    for (const prefix of ['static/', '/static', '/', '//', '/a//b/', '/st atic/', '/static%2f/', '/a?/']) {
      expect([prefix, problems(mount(prefix))[0]]).toEqual([prefix, expect.stringMatching(/^static\.mounts\.0\.prefix: got .*; expected a URL path that starts and ends with "\/"/)]);
    }
    expect(problems(mount('/_roomgate/files/'))[0]).toMatch(/^static\.mounts\.0\.prefix: got "\/_roomgate\/files\/"; expected a URL path outside \/_roomgate\//);
    expect(problems(mount('/_roomgate/'))[0]).toMatch(/outside \/_roomgate\//);
    expect(problems(mount('/a/../b/'))[0]).toMatch(/without "\." or "\.\." segments/);
  });

  it('wants an existing, readable directory, and says how to fix it', () => {
    const missing = join(dir, 'staticfiles');
    expect(problems(mount('/static/', missing))).toEqual([
      `static.mounts.0.dir: got ${JSON.stringify(missing)}, which does not exist; expected a readable directory: create it (e.g. python manage.py collectstatic) or fix the path`,
    ]);
    expect(problems(mount('/static/', file))).toEqual([
      `static.mounts.0.dir: got ${JSON.stringify(file)}, which is not a directory; expected the directory to serve (e.g. Django's STATIC_ROOT)`,
    ]);
  });

  it('refuses duplicate prefixes and prefixes overlapping the per-tab room prefix', () => {
    const twice = { static: { mounts: [{ prefix: '/static/', dir }, { prefix: '/static/', dir }] } };
    expect(problems(twice)).toEqual(['static.mounts.1.prefix: got "/static/", also the prefix of static.mounts.0; expected each prefix at most once']);
    expect(problems(mount('/r/static/'))[0]).toMatch(/^static\.mounts\.0\.prefix: got "\/r\/static\/", which overlaps room\.pathPrefix "\/r\/"/);
    // Without the path-prefix source there is nothing to shadow.
    expect(problems({ ...mount('/r/static/'), room: { sources: ['query', 'cookie'] } })).toEqual([]);
  });

  it('checks maxAgeS and hashedNames', () => {
    expect(problems({ static: { maxAgeS: -1 } })).toEqual(['static.maxAgeS: got -1; expected a whole number of seconds from 0 (no-cache) to 31536000']);
    expect(problems({ static: { hashedNames: '([' } })[0]).toMatch(/^static\.hashedNames: got "\(\["; expected a regular expression \(JavaScript syntax\) that compiles; this one does not: /);
    expect(problems({ static: { hashedNames: null } })).toEqual([]);
    expect(problems({ static: { mount: [] } })).toEqual(['static.mount: unknown key; did you mean "mounts"?']);
  });
});
