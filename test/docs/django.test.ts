// docs/django.md as a new user reads it: every command of its shell blocks exists (each `roomgate`
// command and option, the npm scripts, the files, the Python package with every subpackage it
// ships, the environment variables roomgate or roomgate_kit read, the Debian packages the tests
// install), and the figure it gives for the example's roomgate-specific lines is the count by the
// rule it states. Running the commands is the integration tests' job (test/integration/django-*).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCliHere } from '../cli/in-process.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const APP = 'examples/django-channels';
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');
const doc = read('docs/django.md');

/** Every file under a directory (relative to the repository), skipping what a run writes there. */
function walk(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((name) => {
    if (name === '__pycache__' || name === 'staticfiles') return [];
    const rel = `${dir}/${name}`;
    return statSync(path.join(ROOT, rel)).isDirectory() ? walk(rel) : [rel];
  });
}

/** The commands of the page's sh blocks: continuation lines joined, comments and blank lines dropped. */
function commands(): string[] {
  const blocks = [...doc.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  return blocks
    .flatMap((b) => b.replace(/\\\n\s*/g, ' ').split('\n'))
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

const isComment = (s: string): boolean => s.startsWith('#') || s.startsWith('//') || (s.startsWith('{#') && s.endsWith('#}'));

/**
 * The page's rule: a code line counts when it ends in a ROOMGATE comment, or lies in the block a
 * ROOMGATE comment line opens (the lines under it, at its indentation or deeper, up to the next
 * blank line), or its file says "ROOMGATE: this file"; blank lines, comments and docstrings never.
 */
function roomgateLines(text: string, python: boolean): number {
  const whole = text.includes('ROOMGATE: this file');
  let count = 0;
  let block: number | null = null;
  let docstring = false;
  for (const line of text.split('\n')) {
    const s = line.trim();
    const indent = line.length - line.trimStart().length;
    if (docstring) {
      if (s.includes('"""')) docstring = false;
      continue;
    }
    if (python && s.startsWith('"""')) {
      docstring = !(s.length >= 6 && s.endsWith('"""'));
      continue;
    }
    if (s === '') {
      block = null;
      continue;
    }
    if (block !== null && indent < block) block = null;
    if (isComment(s)) {
      if (s.includes('ROOMGATE') && block === null) block = indent;
      continue;
    }
    if (whole || block !== null || line.includes('ROOMGATE')) count++;
  }
  return count;
}

describe('docs/django.md', () => {
  let help: { commands: { name: string; options: { name: string }[] }[] };
  beforeAll(async () => {
    help = JSON.parse((await runCliHere(['help', '--json'])).stdout) as typeof help;
  });

  it('every roomgate command and option it runs exists', () => {
    const used = commands().flatMap((c) => [...c.matchAll(/npx roomgate ([a-z-]+)((?: +(?:--?[a-z-]+|\$\w+|[^\s$();|&]+))*)/g)]);
    expect(used.length).toBeGreaterThanOrEqual(8);
    for (const [line, name, rest] of used) {
      const command = help.commands.find((c) => c.name === name);
      expect(command, line).toBeDefined();
      for (const opt of (rest ?? '').match(/--[a-z-]+/g) ?? []) expect(command?.options.map((o) => o.name), `${line}: ${opt}`).toContain(opt);
    }
  });

  it('the npm scripts, files and directories it names exist, and the ones it writes are ignored by git', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    for (const c of commands()) {
      for (const m of c.matchAll(/npm run ([a-z:-]+)/g)) expect(Object.keys(scripts), c).toContain(m[1]);
      // Paths from the repository's root, or under the example for what runs there.
      for (const m of c.matchAll(/(?:^|[\s=(])((?:\.\/)?(?:scripts|examples|python)\/[\w./-]*|manage\.py)/g)) {
        const p = m[1] as string;
        const there = [p, `${APP}/${p}`].some((f) => existsSync(path.join(ROOT, f)));
        expect(there || p.endsWith('staticfiles'), `${c}: ${p}`).toBe(true);
      }
      for (const m of c.matchAll(/([\w.]+):application/g)) expect(read(`${APP}/${(m[1] as string).replace(/\./g, '/')}.py`), c).toMatch(/^application = /m);
    }
    const ignored = read('.gitignore');
    for (const written of [`${APP}/staticfiles/`, '.venv/', 'python/build/', 'python/*.egg-info/']) expect(ignored, written).toContain(written);
  });

  it('pip install ./python ships every package of roomgate_kit (the template tags too)', () => {
    expect(commands().some((c) => /pip install --no-build-isolation \.\/python$/.test(c))).toBe(true);
    const listed = /^packages = \[([^\]]*)\]/m.exec(read('python/pyproject.toml'))?.[1] ?? '';
    const packages = walk('python/roomgate_kit')
      .filter((f) => f.endsWith('/__init__.py'))
      .map((f) => path.dirname(f).slice('python/'.length).replace(/\//g, '.'));
    expect(packages).toContain('roomgate_kit.templatetags');
    for (const p of packages) expect(listed, p).toContain(`"${p}"`);
  });

  it('the environment variables it sets are ones roomgate or roomgate_kit reads, and the Debian packages are the tests\' own', () => {
    const sources = [...walk('src'), ...walk('python/roomgate_kit')].filter((f) => /\.(ts|py)$/.test(f)).map(read).join('\n');
    const vars = new Set(commands().flatMap((c) => [...c.matchAll(/\b(ROOMGATE_[A-Z_]+)\b/g)].map((m) => m[1] as string)));
    expect(vars.size).toBeGreaterThanOrEqual(4);
    for (const v of vars) expect(sources.includes(`'${v}'`) || sources.includes(`"${v}"`) || sources.includes(`${v}:`), v).toBe(true);
    const deps = read('scripts/ensure-test-deps.sh');
    const apt = commands().find((c) => c.includes('apt-get install')) ?? '';
    for (const pkg of ['python3-django', 'python3-django-channels', 'daphne']) {
      expect(apt, pkg).toContain(pkg);
      expect(deps, pkg).toContain(`(${pkg})`);
    }
  });

  it("states the count of the example's roomgate-specific lines by its rule, under 100, and of roomgate.yaml", () => {
    const files = walk(APP).filter((f) => /\.(py|html|js)$/.test(f));
    const total = files.reduce((n, f) => n + roomgateLines(read(f), f.endsWith('.py')), 0);
    expect(/\*\*(\d+) lines\*\* of Python, HTML and JavaScript/.exec(doc)?.[1]).toBe(String(total));
    expect(total).toBeLessThan(100);
    const yaml = read(`${APP}/roomgate.yaml`)
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.trim().startsWith('#')).length;
    expect(doc).toContain(`the ${yaml} lines of \`roomgate.yaml\``);
  });

  it('counts by the rule as stated: a marked line, a marked block to its blank line or dedent, never a comment or docstring', () => {
    const sample = [
      '"""A docstring',
      'ROOMGATE in a docstring is no code."""',
      'a = 1',
      'b = 2  # ROOMGATE',
      '# ROOMGATE: the block under this comment',
      'def f():',
      '    return 1',
      '',
      'c = 3',
      'def g():',
      '    # ROOMGATE: from here, at this indentation',
      '    x = 1',
      '    y = 2',
      'z = 4',
    ].join('\n');
    expect(roomgateLines(sample, true)).toBe(5); // b, def f, return, x, y
    expect(roomgateLines('# ROOMGATE: this file\nimport json\n\nx = 1\n', true)).toBe(2);
  });
});
