// One row of the chaos table (docs/reliability.md, `npm run chaos`): a fault, what roomgate
// promises under it, and the figures a test measured while injecting it. A test records its row
// once its assertions passed, so a row in the table is always a measured and checked one.
// Rows go to test-output/chaos/<id>.json (gitignored); `npm run chaos` clears that folder, runs
// every test file that calls recordChaos, and prints the rows as one table.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from './processes.js';

export interface ChaosFigures {
  /** Time until the promised service was back (ms); null when nothing was interrupted. */
  readonly recoverMs?: number | null;
  /** Rooms whose backend changed because of the fault. */
  readonly roomsMoved?: number;
  /** Client sockets that were closed because of the fault. */
  readonly socketsDropped?: number;
  /** Requests (page GETs, API calls, upgrades) that failed during the fault. */
  readonly requestsFailed?: number;
  /** Rooms seen on two backends at once (must be 0 wherever the table reports it). */
  readonly roomsSplit?: number;
  /** Anything else the row needs, already formatted ("p99 answer 512 ms", "RSS +3 %"). */
  readonly other?: readonly string[];
}

export interface ChaosRow {
  /** Stable id, lower-case with dashes: the file name of the row and the table's sort key. */
  readonly id: string;
  /** The fault, as an operator would name it ("Redis primary killed under load (Sentinel)"). */
  readonly fault: string;
  /** What roomgate promises under it, one sentence. */
  readonly promise: string;
  readonly figures: ChaosFigures;
  /** The test file (import.meta.url or a path) and the test's name. */
  readonly file: string;
  readonly test: string;
}

export const CHAOS_DIR = join(ROOT, 'test-output', 'chaos');

const ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Writes the row (replacing an earlier row of the same id). */
export function recordChaos(row: ChaosRow): void {
  if (!ID.test(row.id)) throw new Error(`chaos row id must be lower-case words joined by dashes: ${JSON.stringify(row.id)}`);
  const file = row.file.startsWith('file:') ? relative(ROOT, new URL(row.file).pathname) : row.file;
  mkdirSync(CHAOS_DIR, { recursive: true });
  writeFileSync(join(CHAOS_DIR, `${row.id}.json`), `${JSON.stringify({ ...row, file }, null, 2)}\n`);
}
