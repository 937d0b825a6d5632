// Every byte the roomgate command prints goes through here: data to stdout (a table on a terminal,
// tab-separated lines in a pipe, JSON with --json), notes and errors to stderr. A reader that goes
// away (`roomgate where a b c | head -1`) ends the command quietly with exit 0 (EPIPE).

export type Format = 'table' | 'plain' | 'json';

/** A cell of a table: text, a number, or nothing (printed as "-"). */
export type Cell = string | number | null | undefined;

let guarded = false;

/** Exit 0, quietly, when stdout or stderr is a pipe whose reader has gone. Idempotent. */
export function exitQuietlyOnEpipe(): void {
  if (guarded) return;
  guarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0);
      throw err;
    });
  }
}

/** The format of a command's data: --json wins; else a table on a terminal, plain lines elsewhere. */
export function formatFor(json: boolean, isTTY: boolean = process.stdout.isTTY === true): Format {
  if (json) return 'json';
  return isTTY ? 'table' : 'plain';
}

/** Writes to stdout ('' writes nothing). */
export function print(text: string): void {
  if (text === '') return;
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

/** Writes to stderr (notes, banners, errors): never mixed into the data a script reads. */
export function say(text: string): void {
  process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
}

/** An error as the user sees it: one line naming it, then at most one hint line. */
export function sayError(message: string, hint?: string): void {
  say(`roomgate: ${message}${hint ? `\n${hint}` : ''}`);
}

export function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

const cellText = (c: Cell): string => (c === null || c === undefined || c === '' ? '-' : String(c));

/**
 * Rows as a table (header, columns padded with two spaces) or as plain lines (no header, one row a
 * line, cells separated by a tab: for cut, awk, while read).
 */
export function renderRows(format: 'table' | 'plain', header: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const texts = rows.map((r) => r.map(cellText));
  if (format === 'plain') return texts.map((r) => `${r.join('\t')}\n`).join('');
  const all = [header.map(String), ...texts];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) => `${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')}\n`).join('');
}

/** "in 9m 58s", "3s ago": a deadline or a time relative to now, for people. */
export function relative(atMs: number, nowMs: number = Date.now()): string {
  const d = Math.round((atMs - nowMs) / 1000);
  const abs = Math.abs(d);
  const h = Math.floor(abs / 3600);
  const m = Math.floor((abs % 3600) / 60);
  const s = abs % 60;
  const span = h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s}s` : `${s}s`;
  return d >= 0 ? `in ${span}` : `${span} ago`;
}

/** An ISO time as "2026-12-03 07:50:04Z (in 9m 58s)" for a table; the ISO text itself in plain lines. */
export function deadlineText(format: 'table' | 'plain', iso: string | null): string | null {
  if (iso === null) return null;
  if (format === 'plain') return iso;
  const at = Date.parse(iso);
  return Number.isNaN(at) ? iso : `${new Date(at).toISOString().slice(0, 19).replace('T', ' ')}Z (${relative(at)})`;
}
