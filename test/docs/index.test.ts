// docs/README.md is an index by task that reaches every document, and the docs name the demo's
// rooms as the demo prints them (a room called "lobby" looked like the lobby page).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEMO_ROOMS } from '../../src/demo/demo-mode.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');

/** Every file under a directory, relative to the repository. */
function walk(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((name) => {
    const rel = `${dir}/${name}`;
    return statSync(path.join(ROOT, rel)).isDirectory() ? walk(rel) : [rel];
  });
}

describe('docs/README.md, the index by task', () => {
  const index = read('docs/README.md');

  it('has a section per task', () => {
    const sections = [...index.matchAll(/^## (.*)$/gm)].map((m) => m[1]);
    expect(sections).toEqual(['Try it', 'Put it in front of Django or djust', 'Deploy', 'Operate', 'Secure', 'Extend']);
  });

  it('links every document in docs/ (and django.md), and the README links the index', () => {
    const linked = new Set([...index.matchAll(/\]\(([a-z0-9-]+\.md)(?:#[^)]*)?\)/g)].map((m) => m[1]));
    const docs = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md') && f !== 'README.md');
    for (const doc of [...docs, 'django.md']) expect(linked.has(doc), `docs/README.md links ${doc}`).toBe(true);
    expect(read('README.md')).toContain('](docs/README.md)');
  });
});

describe('the demo rooms in the docs', () => {
  it('every demo page URL names a room the demo prints', () => {
    const files = ['README.md', ...walk('docs'), ...walk('deploy')].filter((f) => /\.(md|ya?ml)$/.test(f));
    const bad: string[] = [];
    let seen = 0;
    for (const file of files) {
      for (const m of read(file).matchAll(/https?:\/\/localhost:\d+\/game\/([^/\s`'"]+)\//g)) {
        seen++;
        if (!(DEMO_ROOMS as readonly string[]).includes(m[1] as string)) bad.push(`${file}: ${m[0]}`);
      }
    }
    expect(seen).toBeGreaterThan(5);
    expect(bad).toEqual([]);
  });
});
