// The chaos table: rows recorded by the tests become one Markdown table (bench/chaos/table.ts),
// and docs/reliability.md carries a table in which every test file that records a row appears.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chaosTestFiles, failureSummary, formatTable, readRows, type ChaosRowFile } from '../../bench/chaos/table.js';
import { ROOT } from '../support/processes.js';

const row = (id: string, over: Partial<ChaosRowFile> = {}): ChaosRowFile => ({
  id,
  fault: 'a fault | with a pipe',
  promise: 'a promise',
  figures: { recoverMs: 12_345, roomsMoved: 0, socketsDropped: 3, requestsFailed: 0, roomsSplit: 0, other: ['one', 'two'] },
  file: 'test/chaos/x.test.ts',
  test: 'the test',
  ...over,
});

describe('chaos table', () => {
  it('formats rows sorted by id: pipes escaped, times in ms or s, empty cells for figures not measured', () => {
    const dir = mkdtempSync(join(tmpdir(), 'roomgate-chaos-'));
    try {
      writeFileSync(join(dir, 'b-row.json'), JSON.stringify(row('b-row')));
      writeFileSync(join(dir, 'a-row.json'), JSON.stringify(row('a-row', { figures: { recoverMs: null } })));
      const table = formatTable(readRows(dir)).split('\n');
      expect(table).toHaveLength(4);
      expect(table[2]).toBe('| a fault \\| with a pipe | a promise | none needed |  |  |  |  |  | test/chaos/x.test.ts: the test |');
      expect(table[3]).toBe('| a fault \\| with a pipe | a promise | 12.3 s | 0 | 3 | 0 | 0 | one; two | test/chaos/x.test.ts: the test |');
      writeFileSync(join(dir, 'bad.json'), '{"nope": 1}');
      expect(() => readRows(dir)).toThrow(/bad\.json is not a chaos row/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(readRows(join(tmpdir(), 'roomgate-no-such-dir'))).toEqual([]);
  });

  it('docs/reliability.md has the table, with a row from every test file that records one', () => {
    const doc = readFileSync(join(ROOT, 'docs/reliability.md'), 'utf8');
    expect(doc).not.toContain('CHAOS_TABLE');
    const tableLines = doc.split('\n').filter((l) => l.startsWith('| ') && l.includes('.test.ts: '));
    const files = chaosTestFiles(ROOT);
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const f of files) expect(tableLines.some((l) => l.includes(`| ${f}: `)), `a row of ${f} in docs/reliability.md`).toBe(true);
  });

  it('after the table, a failed run names each failed test with the start of its message (from vitest\'s JSON report)', () => {
    // The shape vitest 5's json reporter writes (trimmed from a real report of a failing file).
    const report = {
      success: false,
      testResults: [
        {
          name: join(ROOT, 'test/chaos/x.test.ts'),
          status: 'failed',
          message: '',
          assertionResults: [
            { fullName: 'outer fails', status: 'failed', failureMessages: [`AssertionError: room djust-3 lost ref 7: ${'x'.repeat(100)}`] },
            { fullName: 'outer passes', status: 'passed', failureMessages: [] },
          ],
        },
        { name: join(ROOT, 'test/chaos/y.test.ts'), status: 'failed', message: 'Hook timed out in 60000ms', assertionResults: [{ fullName: 'y skipped', status: 'skipped', failureMessages: [] }] },
        { name: join(ROOT, 'test/chaos/z.test.ts'), status: 'passed', message: '', assertionResults: [{ fullName: 'z', status: 'passed', failureMessages: [] }] },
      ],
    };
    const text = failureSummary(JSON.stringify(report), ROOT, 60);
    expect(text.split('\n')).toEqual([
      '2 failed:',
      'FAILED test/chaos/x.test.ts: outer fails',
      `AssertionError: room djust-3 lost ref 7: ${'x'.repeat(19)} [... 81 more characters]`,
      '',
      'FAILED test/chaos/y.test.ts (outside its tests)',
      'Hook timed out in 60000ms',
    ]);
    expect(failureSummary(JSON.stringify({ success: true, testResults: [report.testResults[2]] }), ROOT)).toBe('');
    expect(failureSummary('{"cut', ROOT)).toMatch(/no readable report/);
  });
});
