import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, readlinkSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaticRoot, checkStaticPath, type OpenedFile } from '../../src/static/resolve.js';

describe('checkStaticPath: the URL path under a mount', () => {
  const ok = (rest: string): string => {
    const r = checkStaticPath(rest);
    if (!r.ok) throw new Error(`refused ${rest}: ${r.reason}`);
    return r.relative;
  };
  const refused = (rest: string): number => {
    const r = checkStaticPath(rest);
    return r.ok ? 200 : r.status;
  };

  it('accepts plain and nested names, decoding them once', () => {
    expect(ok('app.js')).toBe('app.js');
    expect(ok('css/base.5af66c1b1797.css')).toBe(join('css', 'base.5af66c1b1797.css'));
    expect(ok('img/a%20b.png')).toBe(join('img', 'a b.png'));
    expect(ok('caf%C3%A9.txt')).toBe('café.txt');
    // Double encoding stays literal: a file called "%2e%2e", never "..".
    expect(ok('%252e%252e/%252e%252e/etc/passwd')).toBe(join('%2e%2e', '%2e%2e', 'etc', 'passwd'));
  });

  it('refuses dot segments, raw or encoded, with 400', () => {
    for (const p of ['../etc/passwd', 'css/../../etc/passwd', '..', '.', './app.js', 'a/./b', '%2e%2e/etc/passwd', '%2E%2E/x', '.%2e/x', '%2e./x', 'a/%2e%2e/%2e%2e/x', '%2e']) {
      expect([p, refused(p)]).toEqual([p, 400]);
    }
  });

  it('refuses encoded slashes and backslashes, raw backslashes, NUL and controls, and bad encoding with 400', () => {
    for (const p of ['..%2fetc/passwd', 'a%2Fb', '..%5c..%5cwindows', 'a%5Cb', '..\\..\\x', 'a\\b', '%00', 'app.js%00.png', 'a%0ab', 'a%7f', '%', '%ZZ', 'a%2', '%E0%A4%A', '%C0%AE%C0%AE/x', '%FF']) {
      expect([p, refused(p)]).toEqual([p, 400]);
    }
  });

  it('refuses dotfiles, dot-directories, directories and empty segments with 404', () => {
    for (const p of ['.env', '.git/config', 'a/.htaccess', '%2egit/config', '%2Eenv', '', 'css/', 'a//b', '/etc/passwd']) {
      expect([p, refused(p)]).toEqual([p, 404]);
    }
  });
});

describe('StaticRoot: the file system side', () => {
  let base: string;
  let root: string;
  let outside: string;
  let staticRoot: StaticRoot;
  const opened: OpenedFile[] = [];

  const open = async (rest: string, suffix = ''): Promise<OpenedFile | null> => {
    const p = checkStaticPath(rest);
    if (!p.ok) throw new Error(`path refused: ${rest}`);
    const f = await staticRoot.open(p.relative, suffix);
    if (f) opened.push(f);
    return f;
  };

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'roomgate-static-resolve-'));
    root = join(base, 'root');
    outside = join(base, 'outside');
    mkdirSync(join(root, 'css'), { recursive: true });
    mkdirSync(outside);
    mkdirSync(join(root, '%2e%2e'));
    writeFileSync(join(root, 'app.js'), 'console.log(1);\n');
    writeFileSync(join(root, 'app.js.br'), 'br-bytes');
    writeFileSync(join(root, 'css', 'site.css'), 'body{}\n');
    writeFileSync(join(root, '.env'), 'SECRET=1\n');
    writeFileSync(join(outside, 'secret.txt'), 'top secret\n');
    symlinkSync(join(outside, 'secret.txt'), join(root, 'escape.txt'));
    symlinkSync(outside, join(root, 'outdir'));
    symlinkSync(join(root, 'css', 'site.css'), join(root, 'alias.css'));
    symlinkSync(join(root, '.env'), join(root, 'env.txt'));
    symlinkSync('../../outside/secret.txt', join(root, 'css', 'relative-escape.txt'));
    symlinkSync(root, join(base, 'root-link'));
    execFileSync('mkfifo', [join(root, 'pipe')]);
    staticRoot = new StaticRoot(root);
  });

  afterAll(() => {
    for (const f of opened) closeSync(f.fd);
    rmSync(base, { recursive: true, force: true });
  });

  it('opens a regular file and reports its size and mtime', async () => {
    const f = await open('app.js');
    expect(f).not.toBeNull();
    expect(f!.size).toBe(16);
    expect(f!.mtimeMs).toBeGreaterThan(0);
    expect(await open('css/site.css')).not.toBeNull();
    expect((await open('app.js', '.br'))?.size).toBe(8);
  });

  it('gives null for missing files, directories and a missing variant', async () => {
    expect(await open('missing.js')).toBeNull();
    expect(await open('css')).toBeNull();
    expect(await open('app.js/x')).toBeNull();
    expect(await open('css/site.css', '.gz')).toBeNull();
    expect(await open('%252e%252e')).toBeNull(); // the literal "%2e%2e" directory, not a parent
  });

  it('refuses symlinks that lead out of the root, file or directory, absolute or relative', async () => {
    expect(await open('escape.txt')).toBeNull();
    expect(await open('outdir/secret.txt')).toBeNull();
    expect(await open('css/relative-escape.txt')).toBeNull();
  });

  it('follows symlinks inside the root, except to a dotfile', async () => {
    expect((await open('alias.css'))?.size).toBe(7);
    expect(await open('env.txt')).toBeNull();
  });

  it('refuses a FIFO without blocking', async () => {
    // Opening a FIFO with no writer blocks for good: if it did, this never returns (the test's
    // timeout says so); a bound on how long it took would only measure the machine.
    expect(await open('pipe')).toBeNull();
  });

  it('resolves a root given through a symlink', async () => {
    const viaLink = new StaticRoot(join(base, 'root-link'));
    expect(viaLink.root).toBe(staticRoot.root);
    const f = await viaLink.open('app.js');
    expect(f).not.toBeNull();
    if (f) opened.push(f);
  });

  it('keeps no descriptor open on refused files', async () => {
    for (const p of ['escape.txt', 'css', 'pipe', 'env.txt', 'missing.js']) expect(await open(p)).toBeNull();
    const held = readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).startsWith(base);
      } catch {
        return false;
      }
    });
    expect(held.length).toBe(opened.length);
  });
});
