// bench/relay-leak.ts, small: 3,000 tunnels through the native relay (client FIN, backend FIN,
// client reset in turn) leave no descriptor, no tunnel on the relay and no live socket behind; the
// bench itself says so (exit 0; 1 on a leak, 2 when it could not run). Run from dist/ as
// `npm run bench:relay-leak` runs it (the suite's pretest transpiles dist/), in a child process:
// its descriptor and RSS counts are its own. The RSS bound is loose here: 1,500 tunnels after
// the baseline are in the RSS's early climb (bench/relay-leak.ts); the 100,000 of the bench are the RSS check.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const BENCH = join(ROOT, 'dist/bench/relay-leak.js');
const LIMIT_MS = 60_000;

describe('bench/relay-leak.ts', () => {
  it('3,000 native tunnels opened and closed leave nothing behind (exit 0, every check ok)', async () => {
    const child = spawn(process.execPath, ['--expose-gc', BENCH, '--tunnels', '3000', '--rss-bound-mb', '64'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), LIMIT_MS);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c))).finally(() => clearTimeout(timer));
    expect(code, `relay-leak exited ${code} (null: killed after ${LIMIT_MS} ms):\n${out}`).toBe(0);
    // The table names every check, each ok.
    expect(out).toMatch(/3000 tunnels on the native relay/);
    for (const check of ['descriptors', 'tunnels on the native relay', 'live sockets', 'tunnels counted on the native relay', 'RSS after GC']) {
      expect(out, out).toMatch(new RegExp(`\\| ${check}[^\\n]*\\| ok \\|`));
    }
  }, LIMIT_MS + 5_000);
});
