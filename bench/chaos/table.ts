// The chaos table: rows recorded by the tests (test/support/chaos.ts writes one JSON file per row
// into test-output/chaos) formatted as the Markdown table docs/reliability.md carries.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** What a test measured under its fault; a figure it did not measure is left out. */
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

/** One row as a test records it (test/support/chaos.ts) and the table reads it. */
export interface ChaosRowFile {
  /** Stable id, lower-case with dashes: the file name of the row and the table's sort key. */
  readonly id: string;
  /** The fault, as an operator would name it ("Redis primary killed under load (Sentinel)"). */
  readonly fault: string;
  /** What roomgate promises under it, one sentence. */
  readonly promise: string;
  readonly figures: ChaosFigures;
  /** The test file, relative to the repository. */
  readonly file: string;
  /** The test's name. */
  readonly test: string;
}

/** Test files under `root`/test that import the row recorder (test/support/chaos.ts). */
export function chaosTestFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.test.ts') && /from '\.\.\/(\.\.\/)?support\/chaos\.js'/.test(readFileSync(p, 'utf8'))) out.push(relative(root, p));
    }
  };
  walk(join(root, 'test'));
  return out.sort();
}

/** Every row in `dir`, sorted by id; a file that is not a row is an error that names it. */
export function readRows(dir: string): ChaosRowFile[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  return names
    .map((n) => {
      const row = JSON.parse(readFileSync(join(dir, n), 'utf8')) as ChaosRowFile;
      if (typeof row.id !== 'string' || typeof row.fault !== 'string' || typeof row.figures !== 'object') {
        throw new Error(`${join(dir, n)} is not a chaos row (id, fault, promise, figures, file, test)`);
      }
      return row;
    })
    .sort((a, b) => a.id.localeCompare(b.id));
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const num = (v: number | null | undefined, unit = ''): string => (v === undefined ? '' : v === null ? 'none' : `${v}${unit}`);

function recover(ms: number | null | undefined): string {
  if (ms === undefined) return '';
  if (ms === null) return 'none needed';
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** The Markdown table of `rows`. */
export function formatTable(rows: readonly ChaosRowFile[]): string {
  const head = [
    '| fault | what roomgate promises | time to recover | rooms moved | sockets dropped | requests failed | rooms split | other figures | test |',
    '|---|---|---:|---:|---:|---:|---:|---|---|',
  ];
  const lines = rows.map((r) => {
    const f = r.figures;
    return `| ${[
      cell(r.fault),
      cell(r.promise),
      recover(f.recoverMs),
      num(f.roomsMoved),
      num(f.socketsDropped),
      num(f.requestsFailed),
      num(f.roomsSplit),
      cell((f.other ?? []).join('; ')),
      cell(`${r.file}: ${r.test}`),
    ].join(' | ')} |`;
  });
  return [...head, ...lines].join('\n');
}

export const TABLE_START = '<!-- chaos table: written by `npm run chaos -- --docs` -->';
export const TABLE_END = '<!-- end of chaos table -->';

/** `doc` with the text between its table markers replaced by `table`. */
export function replaceTable(doc: string, table: string): string {
  const i = doc.indexOf(TABLE_START);
  const j = doc.indexOf(TABLE_END);
  if (i === -1 || j < i) throw new Error(`the document has no chaos table markers (${TABLE_START} ... ${TABLE_END})`);
  return `${doc.slice(0, i + TABLE_START.length)}\n\n${table}\n\n${doc.slice(j)}`;
}

/** The part of vitest's JSON report (`--reporter=json`) the failure summary reads. */
interface VitestReport {
  readonly testResults?: readonly {
    readonly name?: string;
    readonly message?: string;
    readonly assertionResults?: readonly { readonly fullName?: string; readonly status?: string; readonly failureMessages?: readonly string[] }[];
  }[];
}

/**
 * The failed tests of a vitest JSON report, each with the start of its message, as the last lines
 * `npm run chaos` prints: a CI log often keeps only its end, and the table above a failure would
 * otherwise push the failure's words out of it (a failed test records no row).
 */
export function failureSummary(report: string, root: string, maxChars = 4_000): string {
  let parsed: VitestReport;
  try {
    parsed = JSON.parse(report) as VitestReport;
  } catch {
    return 'chaos: vitest wrote no readable report: its own output above says what failed';
  }
  const out: string[] = [];
  for (const file of parsed.testResults ?? []) {
    const name = file.name ? relative(root, file.name) : 'a test file';
    const failed = (file.assertionResults ?? []).filter((a) => a.status === 'failed');
    for (const a of failed) out.push(`FAILED ${name}: ${a.fullName ?? '?'}\n${clip((a.failureMessages ?? []).join('\n'), maxChars)}`);
    // A file that failed outside its tests (a hook, an import) has a message and no failed test.
    if (failed.length === 0 && file.message) out.push(`FAILED ${name} (outside its tests)\n${clip(file.message, maxChars)}`);
  }
  return out.length === 0 ? '' : `${out.length} failed:\n${out.join('\n\n')}`;
}

const clip = (s: string, n: number): string => (s.length <= n ? s : `${s.slice(0, n)} [... ${s.length - n} more characters]`);
