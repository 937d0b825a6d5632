// `npm run chaos`: runs every test file that records a chaos row (test/support/chaos.ts), then
// prints the rows as the table docs/reliability.md carries. The figures are measured in this run;
// a test that fails records no row, and the command exits non-zero.
//   npm run chaos                 all chaos tests, then the table
//   npm run chaos -- --table      only print the table of the last run
//   npm run chaos -- FILTER...    only the test files whose path contains a FILTER
//   npm run chaos -- --docs       also write the table into docs/reliability.md (between its markers)
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chaosTestFiles, failureSummary, formatTable, readRows, replaceTable } from './table.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const CHAOS_DIR = join(ROOT, 'test-output', 'chaos');
/** vitest's JSON report of the last run: the failures printed after the table come from it. */
const REPORT = join(ROOT, 'test-output', 'chaos-vitest.json');

const DOC = join(ROOT, 'docs', 'reliability.md');

function writeDocs(table: string): void {
  writeFileSync(DOC, replaceTable(readFileSync(DOC, 'utf8'), table));
  console.log(`table written into ${relative(ROOT, DOC)}`);
}

function main(): number {
  const all = process.argv.slice(2);
  const docs = all.includes('--docs');
  const args = all.filter((a) => a !== '--docs');
  if (args.includes('--table')) {
    const table = formatTable(readRows(CHAOS_DIR));
    console.log(table);
    if (docs) writeDocs(table);
    return 0;
  }
  const files = chaosTestFiles(ROOT).filter((f) => args.length === 0 || args.some((a) => f.includes(a)));
  if (files.length === 0) {
    console.error(`no chaos test file matches ${args.join(' ')}`);
    return 2;
  }
  rmSync(CHAOS_DIR, { recursive: true, force: true });
  rmSync(REPORT, { force: true });
  console.error(`chaos: running ${files.join(', ')}`);
  // ROOMGATE_CHAOS=1: the long scenarios that `npm test` leaves out (vitest.config.ts) run here.
  // Three scenarios at a time, not npm test's four workers: each keeps the cores busy for minutes
  // (storms of thousands of sockets, the soak, the sanitizers), where npm test's files mostly wait.
  const vitest = spawnSync(join(ROOT, 'node_modules', '.bin', 'vitest'), ['run', '--maxWorkers=3', '--reporter=default', '--reporter=json', `--outputFile.json=${REPORT}`, ...files], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, ROOMGATE_CHAOS: '1' } });
  const rows = readRows(CHAOS_DIR);
  const table = formatTable(rows);
  console.log(`\n${table}\n`);
  if (docs && vitest.status === 0) writeDocs(table);
  console.log(`${rows.length} rows from ${files.length} test files; raw rows in ${relative(ROOT, CHAOS_DIR)}/`);
  // Last, so that a log cut to its end still says what failed and why.
  if (vitest.status !== 0) {
    const failed = existsSync(REPORT) ? failureSummary(readFileSync(REPORT, 'utf8'), ROOT) : '';
    console.log(`\n${failed || `chaos: vitest exited ${vitest.status ?? vitest.signal} and its report names no failed test: its own output above says why`}`);
  }
  return vitest.status ?? 1;
}

process.exitCode = main();
