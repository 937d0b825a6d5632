// The native relay under AddressSanitizer and UBSan: scripts/sanitize-relay.sh builds the
// sanitized addon and runs the differential fuzz (test/proxy/relay-differential.test.ts, 20 of
// its scenarios) with it and the sanitizer runtimes preloaded; a test that fails, a sanitizer
// report or a build without the sanitizers make it exit non-zero. A child process: the runtimes must be preloaded into the
// Node that loads the addon.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const LIMIT_MS = 38_000;

describe('the native relay under AddressSanitizer + UBSan', () => {
  it('the differential fuzz passes with no sanitizer report', async () => {
    // Its own process group: a timeout ends the script and the vitest it started.
    const child = spawn('bash', [join(ROOT, 'scripts/sanitize-relay.sh'), 'test/proxy/relay-differential.test.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      // Half the scenarios: Node runs about twice as slow with the sanitizer runtimes, and the first
      // run builds the sanitized addon (about 20 s on 2 cores).
      env: { ...process.env, ROOMGATE_DIFF_SCENARIOS: '20' },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, LIMIT_MS);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c))).finally(() => clearTimeout(timer));
    expect(code, `sanitize-relay.sh exited ${code} (null: killed after ${LIMIT_MS} ms):\n${out.slice(-8_000)}`).toBe(0);
    expect(out).toMatch(/1 passed/);
    expect(out).not.toMatch(/AddressSanitizer|runtime error:/);
  }, LIMIT_MS + 5_000);
});
