// The chaos table: rows recorded by the tests become one Markdown table (bench/chaos/table.ts),
// and docs/reliability.md carries a table in which every test file that records a row appears.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chaosTestFiles, formatTable, readRows, type ChaosRowFile } from '../../bench/chaos/table.js';
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
});
