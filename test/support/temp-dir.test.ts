// scopeTempDir: nothing is made when the scope is collected (a run filtered with -t collects every
// scope and runs the hooks only of those with a test to run); the dir exists while the scope's
// tests run, and is gone after them.
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scopeTempDir } from './temp-dir.js';

const outer = scopeTempDir('roomgate-temp-dir-test-');
let inner = '';
let madeAtCollection: boolean | undefined;

describe('a scope with its own dir', () => {
  inner = scopeTempDir('roomgate-temp-dir-inner-');
  madeAtCollection = existsSync(inner);
  it('has it while its tests run: private to this user, writable', () => {
    expect(statSync(inner).isDirectory()).toBe(true);
    expect(statSync(inner).mode & 0o777).toBe(0o700);
    writeFileSync(join(inner, 'f'), 'x');
  });
});

it('made nothing when collected; removed its dir, with what was written in it, after its tests', () => {
  expect(madeAtCollection).toBe(false);
  expect(existsSync(inner)).toBe(false);
  expect(existsSync(outer)).toBe(true);
});

afterAll(() => {
  // Registered after the helper's afterAll, so it runs first: the file's dir is still there.
  expect(existsSync(outer)).toBe(true);
});
