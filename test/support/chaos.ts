// One row of the chaos table (docs/reliability.md, `npm run chaos`): a fault, what roomgate
// promises under it, and the figures a test measured while injecting it. A test records its row
// once its assertions passed, so a row in the table is always a measured and checked one.
// Rows go to test-output/chaos/<id>.json (gitignored); `npm run chaos` clears that folder, runs
// every test file that imports this recorder, and prints the rows as one table.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { ChaosFigures, ChaosRowFile } from '../../bench/chaos/table.js';
import { ROOT } from './processes.js';

/** A row as a test records it: `file` may be the test's import.meta.url. */
export type ChaosRow = ChaosRowFile;
export type { ChaosFigures };

export const CHAOS_DIR = join(ROOT, 'test-output', 'chaos');

const ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Writes the row (replacing an earlier row of the same id). */
export function recordChaos(row: ChaosRow): void {
  if (!ID.test(row.id)) throw new Error(`chaos row id must be lower-case words joined by dashes: ${JSON.stringify(row.id)}`);
  const file = row.file.startsWith('file:') ? relative(ROOT, new URL(row.file).pathname) : row.file;
  mkdirSync(CHAOS_DIR, { recursive: true });
  writeFileSync(join(CHAOS_DIR, `${row.id}.json`), `${JSON.stringify({ ...row, file }, null, 2)}\n`);
}
