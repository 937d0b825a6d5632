// The native relay under AddressSanitizer and UBSan, in CI (npm run chaos): scripts/sanitize-relay.sh
// builds the sanitized addon and runs the tunnel contract suite on both relays
// (test/proxy/tunnel-contract.test.ts), the hand-back between two messages
// (test/proxy/native-release.test.ts), the add() race and the differential fuzz
// (test/proxy/relay-differential.test.ts, 80 seeded scenarios), and the addon's health-check
// connection (test/backends/native-probe.test.ts, and the HTTP check's hostile answers through it:
// test/backends/health-http-probe.test.ts) with it and the sanitizer runtimes
// preloaded; a test that fails, a sanitizer report or a build without the sanitizers make it exit
// non-zero. A child process: the runtimes must be preloaded into the Node that loads the addon.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { ROOT } from '../support/processes.js';

const LIMIT_MS = 170_000;

describe('the native relay under AddressSanitizer + UBSan', () => {
  it('the contract suite, the hand-back, the add() race, the differential fuzz and the health probe pass with no sanitizer report', async () => {
    // Its own process group: a timeout ends the script and the vitest it started.
    const files = ['test/proxy/tunnel-contract.test.ts', 'test/proxy/native-release.test.ts', 'test/proxy/relay-add-race.test.ts', 'test/proxy/relay-differential.test.ts', 'test/backends/native-probe.test.ts', 'test/backends/health-http-probe.test.ts'];
    const child = spawn('bash', [join(ROOT, 'scripts/sanitize-relay.sh'), ...files], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, ROOMGATE_DIFF_SCENARIOS: '80' },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, LIMIT_MS);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c))).finally(() => clearTimeout(timer));
    expect(code, `sanitize-relay.sh exited ${code} (null: killed after ${LIMIT_MS} ms):\n${out.slice(-8_000)}`).toBe(0);
    // vitest colours its summary: read it without the escapes.
    expect(out.replace(/\x1b\[[0-9;]*m/g, '')).toMatch(new RegExp(`Test Files\\s+${files.length} passed`));
    expect(out).not.toMatch(/AddressSanitizer|runtime error:/);
    const tests = /Tests\s+(\d+) passed/.exec(out.replace(/\x1b\[[0-9;]*m/g, ''))?.[1] ?? '?';
    recordChaos({
      id: 'native-relay-sanitized',
      fault: 'the native relay built under AddressSanitizer and UBSan: the tunnel contract, the hand-back between two messages, the add() race, the differential fuzz (random segmentation, back-pressure, half-closes, resets from either side) and the native probe of the health checks (hostile answers, closes at every moment, collected handles)',
      promise: 'no memory error and no undefined behaviour in the addon (a report fails the run), and the same bytes and ends as the JavaScript relay',
      figures: { recoverMs: null, other: [`${tests} tests passed under the sanitizers, no report`] },
      file: import.meta.url,
      test: 'the native relay under AddressSanitizer + UBSan',
    });
  }, LIMIT_MS + 5_000);
});
