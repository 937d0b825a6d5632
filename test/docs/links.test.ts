// The documentation holds together: every relative link in README.md and docs/*.md names a file
// or directory of this repository (and, with #anchor, a heading of that file); nothing points
// outside the repository or at issue numbers; the README's test command is the one CI runs.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

// Written elsewhere, not by the docs: docs/configuration.md is generated from the config schema
// and docs/cli.md is written with the CLI. Links to them count as resolved while they are not
// here yet; once a file exists, its anchors are checked like any other.
const KNOWN_ELSEWHERE = new Set(['docs/configuration.md', 'docs/cli.md']);

function docFiles(): string[] {
  const docs = existsSync(path.join(ROOT, 'docs'))
    ? readdirSync(path.join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`)
    : [];
  return ['README.md', ...docs.sort()];
}

/** The text with fenced code blocks blanked (line numbers kept) and inline code spans removed. */
function prose(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const m = /^\s*(```+|~~~+)/.exec(line);
    if (fence !== null) {
      if (m && m[1]![0] === fence[0] && m[1]!.length >= fence.length) fence = null;
      return '';
    }
    if (m) {
      fence = m[1]!;
      return '';
    }
    return line.replace(/(`+)[\s\S]*?\1/g, '');
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorCache = new Map<string, Set<string>>();
function anchors(file: string): Set<string> {
  let set = anchorCache.get(file);
  if (set) return set;
  set = new Set();
  const seen = new Map<string, number>();
  let fence: string | null = null;
  for (const line of readFileSync(path.join(ROOT, file), 'utf8').split('\n')) {
    const f = /^\s*(```+|~~~+)/.exec(line);
    if (fence !== null) {
      if (f && f[1]![0] === fence[0]) fence = null;
      continue;
    }
    if (f) {
      fence = f[1]!;
      continue;
    }
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    set.add(n === 0 ? base : `${base}-${n}`);
  }
  anchorCache.set(file, set);
  return set;
}

interface Link {
  readonly file: string;
  readonly line: number;
  readonly target: string;
}

function links(file: string): Link[] {
  const out: Link[] = [];
  prose(readFileSync(path.join(ROOT, file), 'utf8')).forEach((text, i) => {
    // [text](target) and ![alt](target); a title after the target is allowed.
    for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ file, line: i + 1, target: m[1]! });
    }
    // Reference definitions: [name]: target
    const def = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)/.exec(text);
    if (def) out.push({ file, line: i + 1, target: def[1]! });
  });
  return out;
}

/** Why a link does not resolve, or null. */
function problem(link: Link): string | null {
  const { target } = link;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // https:, mailto:: not checked here
  const hash = target.indexOf('#');
  const rawPath = hash === -1 ? target : target.slice(0, hash);
  const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
  const from = path.dirname(path.join(ROOT, link.file));
  const abs = rawPath === '' ? path.join(ROOT, link.file) : path.resolve(rawPath.startsWith('/') ? ROOT : from, decodeURIComponent(rawPath.replace(/^\//, '')));
  const rel = path.relative(ROOT, abs).split(path.sep).join('/');
  if (rel.startsWith('..') || path.isAbsolute(rel)) return 'points outside the repository';
  if (!existsSync(abs)) {
    if (!KNOWN_ELSEWHERE.has(rel)) return `no such file: ${rel}`;
    return anchor === null ? null : `${rel} is not in this checkout yet: link to the file, without an anchor`;
  }
  if (anchor === null) return null;
  if (!statSync(abs).isFile() || !rel.endsWith('.md')) return `an anchor into ${rel}, which is not a Markdown file`;
  return anchors(rel).has(anchor) ? null : `no heading with anchor #${anchor} in ${rel}`;
}

describe('documentation', () => {
  const files = docFiles();

  it('has a README and the docs folder', () => {
    expect(files).toContain('README.md');
    expect(files.length).toBeGreaterThan(5);
  });

  it('every relative link resolves to a file of the repository, and every anchor to a heading', () => {
    const bad = files
      .flatMap(links)
      .map((l) => ({ l, why: problem(l) }))
      .filter((x) => x.why !== null)
      .map(({ l, why }) => `${l.file}:${l.line}: ${l.target}: ${why}`);
    expect(bad).toEqual([]);
  });

  it('refers to nothing outside the repository and to no issue numbers', () => {
    const bad: string[] = [];
    for (const file of files) {
      readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((text, i) => {
          const at = `${file}:${i + 1}`;
          if (text.includes('../shared')) bad.push(`${at}: ../shared`);
          if (/DESIGN\.md/.test(text) && !existsSync(path.join(ROOT, 'DESIGN.md'))) bad.push(`${at}: DESIGN.md (not in the repository)`);
          if (/\bissues?\s+#?\d+/i.test(text)) bad.push(`${at}: an issue number`);
          if (/(?<![\w&/#])#\d+\b/.test(text)) bad.push(`${at}: a #number reference`);
        });
    }
    expect(bad).toEqual([]);
  });

  it('the README runs the tests with exactly the command CI runs', () => {
    const ci = readFileSync(path.join(ROOT, '.ci/run'), 'utf8')
      .split('\n')
      .filter((l) => /^\s*npm\b/.test(l));
    // The README's test command first; what CI runs after it are other npm scripts (the chaos scenarios).
    expect(ci[0]).toBe('npm ci && npm test');
    for (const l of ci.slice(1)) expect(l).toMatch(/^npm run [a-z:]+\b/);
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme).toMatch(/^## The two commands$/m);
    expect(readme).toMatch(/^npm ci && npm test\b/m);
  });

  it('the checker finds what it must (a broken link, a missing anchor, a link outside, an issue number)', () => {
    expect(problem({ file: 'README.md', line: 1, target: 'docs/no-such-file.md' })).toMatch(/no such file/);
    expect(problem({ file: 'README.md', line: 1, target: '#no-such-heading-anywhere' })).toMatch(/no heading/);
    expect(problem({ file: 'README.md', line: 1, target: '../shared/DESIGN.md' })).toMatch(/outside/);
    expect(problem({ file: 'README.md', line: 1, target: 'docs/cli.md' })).toBeNull();
    expect(problem({ file: 'README.md', line: 1, target: 'https://example.com/x#y' })).toBeNull();
    expect(slug('Multi-core: `--workers`')).toBe('multi-core---workers');
    expect(slug('Placement: where a room lives, and why it stays')).toBe('placement-where-a-room-lives-and-why-it-stays');
    expect(links('README.md').length).toBeGreaterThan(0);
  });
});
