// The configuration reference and the example file are written from the schema; these tests fail
// when either is out of date (and say how to bring it up to date) or when a key lacks its words.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { listKeys, sections } from '../../src/config/describe.js';
import { ENV_VARS } from '../../src/config/load.js';
import { EXAMPLE_FILE, REFERENCE_FILE, REGENERATE, renderExample, renderReference, yamlValue } from '../../src/config/reference.js';
import { ROOT } from '../support/processes.js';

const read = (file: string) => readFileSync(`${ROOT}/${file}`, 'utf8');

describe('configuration reference', () => {
  it(`${REFERENCE_FILE} is what the generator writes now`, () => {
    expect(read(REFERENCE_FILE), `${REFERENCE_FILE} is out of date: run \`${REGENERATE}\` and commit the result`).toBe(renderReference());
  });

  it(`${EXAMPLE_FILE} is what the generator writes now`, () => {
    expect(read(EXAMPLE_FILE), `${EXAMPLE_FILE} is out of date: run \`${REGENERATE}\` and commit the result`).toBe(renderExample());
  });

  it('every key and every section has words, and the reference lists each key and environment variable', () => {
    const reference = renderReference();
    const keys = listKeys();
    for (const k of keys) {
      expect(k.doc.text, `${k.path}: no text; give it doc(..., { text })`).toBeTruthy();
      expect(reference).toContain(`| \`${k.path}\` |`);
    }
    for (const s of sections()) expect(s.info.doc.text, `${s.key}: no text`).toBeTruthy();
    for (const [name, e] of Object.entries(ENV_VARS)) {
      expect(reference).toContain(`| \`${name}\` |`);
      // An environment variable sets a key that exists.
      if (e.key) expect(keys.map((k) => k.path)).toContain(e.key);
    }
    expect(reference).toContain('Also set by environment variable `ROOMGATE_PORT` or flag `--port`.');
  });

  it('refers only to files in the repository, and to no issue or ticket', () => {
    for (const text of [renderReference(), renderExample()]) {
      // Every path it names (src/..., config/..., docs/...) is a file of this repository.
      const paths = [...text.matchAll(/(?<![\w/.-])((?:src|config|docs|test|scripts|deploy|examples)\/[\w./-]*\w)/g)].map((m) => m[1] as string);
      expect(paths.length).toBeGreaterThan(0);
      for (const p of new Set(paths)) expect(existsSync(`${ROOT}/${p}`), `${p} is not a file of the repository`).toBe(true);
      // No absolute paths of some machine, no links to elsewhere's files, no issue numbers.
      expect(text).not.toMatch(/(?:^|[\s(`'"])(?:\/(?:work|home|Users|tmp|root)\/|~\/|file:\/\/)/m);
      expect(text).not.toMatch(/github\.com|gitlab|jira|\b(?:issue|ticket|PR|pull request)s?\b|(?:^|\s)#\d+\b|\bGH-\d+/i);
    }
  });

  it('the README points to the reference, and its sample messages are real ones', () => {
    const readme = read('README.md');
    const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## ', readme.indexOf('\n## Configuration\n') + 5));
    expect(section).toContain(`(${REFERENCE_FILE})`);
    expect(section).toContain(EXAMPLE_FILE);
    expect(section).toContain(REGENERATE);
    const sample = section.split('\n').filter((l) => l.startsWith('  - ')).map((l) => l.slice(4));
    expect(sample.length).toBeGreaterThan(2);
    // The reference shows what check-config prints for its sample configuration; the README quotes some of it.
    const reference = renderReference();
    for (const line of sample) expect(reference, line).toContain(`\n${line}\n`);
  });

  it('writes values so that YAML reads them back the same', () => {
    for (const v of ['off', 'yes', 'roomgate:', '8080', "it's", '/game/{room}/', '', 'a: b', '#x', '0.0.0.0', 'http://10.0.0.5:8000', '^[a-z]+$', null, 0, 1.25, true, ['/', 'x y']]) {
      expect(parse(`k: ${yamlValue(v)}`), yamlValue(v)).toEqual({ k: v });
    }
    expect(yamlValue('0.0.0.0')).toBe('0.0.0.0');
    expect(yamlValue('off')).toBe("'off'");
    expect(yamlValue(['path-prefix', 'query'])).toBe('[path-prefix, query]');
  });
});
