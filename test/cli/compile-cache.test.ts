// The roomgate command keeps V8's compiled code on disk (src/main.ts, keepCompiledCode): a start
// fills the cache where ROOMGATE_COMPILE_CACHE says (Node's own NODE_COMPILE_CACHE is unset here:
// it would enable the cache without roomgate), and a cache that cannot be written changes
// nothing but the speed. `roomgate help` is a cheap command that goes through the CLI.
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAIN } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const temp = scopeTempDir('roomgate-compile-cache-');

function help(cacheDir: string): { status: number | null; out: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, ROOMGATE_COMPILE_CACHE: cacheDir };
  delete env.NODE_COMPILE_CACHE;
  delete env.NODE_DISABLE_COMPILE_CACHE;
  const r = spawnSync(process.execPath, [MAIN, 'help'], { encoding: 'utf8', timeout: 20_000, env });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Every file under dir, recursively. */
function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe('the compile cache', () => {
  it('a start fills the cache where ROOMGATE_COMPILE_CACHE says, and the next start answers the same', () => {
    const dir = join(temp, 'cache');
    const first = help(dir);
    expect(first.status, first.out).toBe(0);
    expect(files(dir).length).toBeGreaterThan(0);
    const second = help(dir);
    expect(second).toEqual(first);
  });

  it('a cache that cannot be written changes nothing: the command answers as without one', () => {
    const blocker = join(temp, 'a-file');
    writeFileSync(blocker, '');
    const unwritable = help(join(blocker, 'cache'));
    const cached = help(join(temp, 'cache-2'));
    expect(unwritable.status, unwritable.out).toBe(0);
    expect(unwritable).toEqual(cached);
  });
});
