// A test's temp dir, made only if the test's hooks run.
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

/**
 * A temp dir for the calling scope (a file, or the describe it is called in): its path at once, the
 * dir itself made by the scope's first beforeAll and removed by its last afterAll (vitest runs
 * afterAll hooks in reverse, so after the scope's own, which stop what writes there). A dir made at
 * import, with mkdtempSync, stays behind when a filtered run (vitest -t) skips every test of the
 * scope: vitest then runs none of its hooks. Call it before the scope's other hooks, which may use
 * the dir; code that runs at import may hold the path but not write to it.
 */
export function scopeTempDir(prefix: string): string {
  // mkdtemp's guarantees: a name no one can guess, made only if it did not exist, private.
  const dir = join(tmpdir(), `${prefix}${randomBytes(6).toString('base64url')}`);
  beforeAll(() => mkdirSync(dir, { mode: 0o700 }));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
