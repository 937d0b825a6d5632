// The type-check of every file (src/, examples/, bench/, test/, the vitest configs), as
// `npm run typecheck` runs it: `npm test`'s pretest only transpiles dist/ (scripts/transpile-dist.mjs),
// so the check runs here, beside the other files, rather than before them all. It takes about 20 s
// of one core; it is among the files started first (vitest.config.ts LONG_FILES).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ROOT } from './support/processes.js';

it('every file type-checks (tsc -p tsconfig.test.json)', async () => {
  const child = spawn(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.test.json', '--pretty', 'false'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(out.trim().split('\n').slice(0, 40).join('\n')).toBe('');
  expect(code).toBe(0);
}, 180_000);
