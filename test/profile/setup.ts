// `npm run test:profile`'s setup file (vitest.profile.config.ts): where the suite's CPU goes, for
// keeping `npm test` within its time on 2 cores. Per test file: its worker's own CPU (utime +
// stime) and that of the children it reaped (cutime + cstime: gateways, backends, Redis, Chromium)
// and its wall time, appended to test-output/profile/files.txt. Per process a test starts
// (child_process.spawn, patched here and in the ESM named exports): the CPU of it and its live
// descendants, last read before it exited (polled every 100 ms), to test-output/profile/spawns.txt.
// Not part of `npm test`: the patch and the polling cost a little CPU of their own.
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import cp, { type ChildProcess } from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { ROOT } from '../support/processes.js';

const OUT = join(ROOT, 'test-output', 'profile');
mkdirSync(OUT, { recursive: true });

/** utime, stime, cutime, cstime of a process, in clock ticks (100 per second here). */
function times(pid: number | 'self'): number[] {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return [Number(f[11]), Number(f[12]), Number(f[13]), Number(f[14])];
}

/** The CPU of a process and its live descendants, ticks (0 once it is gone). */
function treeTicks(pid: number): number {
  try {
    const sum = times(pid).reduce((a, b) => a + b, 0);
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return kids === '' ? sum : kids.split(' ').reduce((n, k) => n + treeTicks(Number(k)), sum);
  } catch {
    return 0;
  }
}

// The file that is running, kept on globalThis: the suite's files share one module registry per
// worker, and this setup file is evaluated again for each of them, but the spawn patch below is
// installed once and must read the current file, not the one of the evaluation that installed it.
const patched = globalThis as { __roomgateSpawnProfile?: boolean; __roomgateProfileFile?: string };
if (patched.__roomgateSpawnProfile !== true) {
  patched.__roomgateSpawnProfile = true;
  const spawn = cp.spawn;
  (cp as { spawn: unknown }).spawn = function profiledSpawn(this: unknown, ...args: Parameters<typeof spawn>): ChildProcess {
    const child = (spawn as (...a: unknown[]) => ChildProcess).apply(this, args);
    const [cmd, argv] = args as unknown as [string, unknown];
    const what = [cmd, ...(Array.isArray(argv) ? argv : [])].map(String).join(' ').replaceAll(`${ROOT}/`, '').slice(0, 160);
    const started = Date.now();
    const owner = patched.__roomgateProfileFile ?? '';
    let last = 0;
    const poll = setInterval(() => {
      if (child.pid !== undefined) last = Math.max(last, treeTicks(child.pid));
    }, 100);
    poll.unref();
    child.once('exit', () => {
      clearInterval(poll);
      appendFileSync(join(OUT, 'spawns.txt'), `${(last / 100).toFixed(2)} cpu-s ${((Date.now() - started) / 1000).toFixed(1)} wall-s ${owner} :: ${what}\n`);
    });
    return child;
  };
  syncBuiltinESMExports();
}

let before: number[] = [];
let t0 = 0;
let file = '';
beforeAll(() => {
  file = relative(ROOT, String(expect.getState().testPath));
  patched.__roomgateProfileFile = file;
  before = times('self');
  t0 = Date.now();
});
afterAll(() => {
  const d = times('self').map((v, i) => (v - (before[i] ?? 0)) / 100);
  const own = (d[0] ?? 0) + (d[1] ?? 0);
  const children = (d[2] ?? 0) + (d[3] ?? 0);
  appendFileSync(join(OUT, 'files.txt'), `${(own + children).toFixed(1)} cpu-s own=${own.toFixed(1)} children=${children.toFixed(1)} wall=${((Date.now() - t0) / 1000).toFixed(1)} ${file}\n`);
});
