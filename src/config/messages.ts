// Problems in plain words. House style, one line per problem:
//   <field>: got <value>[ (from <env var or flag>)]; expected <what is allowed>[; <how to fix>]
//   <field>: missing; expected <what is allowed>
//   <field>: unknown key; did you mean "<key>"?
// The field is the dotted path (backends.0.url), the value is shown as JSON (secrets redacted),
// and "expected" says what is allowed in the words of the schema (describe.ts) or of the rule.
import type { z } from 'zod';
import { allowed, docsAlong, keysOf, listKeys, oneOf, schemaAt, showValue, unwrap } from './describe.js';
import { didYouMean } from './suggest.js';

/**
 * The message every zod check without words of its own gets (the parse passes it as the error
 * map): an issue carrying it is described from the schema instead, so no library text is shown.
 */
export const BUILTIN = '\u0000roomgate: described from the schema';

/** Where a value came from when it was not the file: "ROOMGATE_PORT", "--backend". */
export type Origin = (path: readonly PropertyKey[]) => string | undefined;

export function fieldName(path: readonly PropertyKey[]): string {
  return path.map(String).join('.');
}

export function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = raw;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = Object.hasOwn(v, k) ? (v as Record<PropertyKey, unknown>)[k] : undefined;
  }
  return v;
}

/** The problems one zod issue stands for (an unknown-keys issue names each key). */
export function issueProblems(issue: z.core.$ZodIssue, raw: unknown, origin: Origin): string[] {
  const schema = schemaAt(issue.path);
  if (issue.code === 'unrecognized_keys') {
    const known = schema ? keysOf(schema) : [];
    return issue.keys.map((k) => {
      const fix = didYouMean(k, known) || `the keys ${issue.path.length ? `of ${fieldName(issue.path)}` : 'at the top level'} are ${oneOf(known, 'and')}`;
      return `${fieldName([...issue.path, k])}: unknown key; ${fix}`;
    });
  }
  const field = issue.path.length ? fieldName(issue.path) : '(top level)';
  const value = valueAt(raw, issue.path);
  const ours = issue.message !== BUILTIN;
  const expected = ours ? issue.message : schema ? allowed(schema) : 'a value as docs/configuration.md describes';
  const from = origin(issue.path);
  const got = value === undefined ? 'missing' : `got ${showValue(value, docsAlong(issue.path))}${from ? ` (from ${from})` : ''}`;
  // The quoting hints are about YAML: a value from the environment or a flag is text by nature.
  const fix = ours || !schema ? undefined : hint(schema, value, issue.path, from === undefined);
  return [`${field}: ${got}; expected ${expected}${fix ? `; ${fix}` : ''}`];
}

/**
 * How to fix the usual slips: a typo in a choice, a number or boolean in quotes, an empty section.
 * `inFile`: the value came from the YAML file (not the environment or a flag), so quotes are its.
 */
function hint(schema: z.core.$ZodType, value: unknown, path: readonly PropertyKey[], inFile: boolean): string | undefined {
  const u = unwrap(schema);
  if (u.type === 'enum' && typeof value === 'string') {
    return didYouMean(value, Object.values((u.node._zod.def as unknown as { entries: Record<string, string> }).entries)) || undefined;
  }
  if (!inFile) return undefined;
  if (u.type === 'number' || (u.type === 'union' && typeof value === 'string')) {
    // Only when the number, unquoted, would do: "-1" for a port is wrong either way.
    const unquoted = typeof value === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(value) && (schema as z.ZodType).safeParse(Number(value)).success;
    return unquoted ? 'write the number without quotes' : undefined;
  }
  if (u.type === 'boolean' && typeof value === 'string' && /^(true|false|yes|no|on|off)$/i.test(value)) return 'write true or false without quotes';
  if (u.type === 'string' && (typeof value === 'number' || typeof value === 'boolean') && (schema as z.ZodType).safeParse(String(value)).success) {
    return `YAML reads ${String(value)} as a ${typeof value}: write it in quotes, "${String(value)}"`;
  }
  if (u.type === 'object' && value === null && !u.nullable) {
    return `a key with nothing under it is null: write "${String(path.at(-1))}: {}" for all defaults, or remove the line`;
  }
  return undefined;
}

/** Plain words for the YAML mistakes people make; others keep the parser's own sentence. */
const YAML_WORDS: Record<string, string> = {
  BLOCK_AS_IMPLICIT_KEY: 'a key and a nested key on one line; put the nested key on its own, indented line (e.g. "listen:" then "  port: 8080")',
  DUPLICATE_KEY: 'this key appears twice in the same mapping; keep one',
  TAB_AS_INDENT: 'a tab used for indentation; YAML indents with spaces',
  MULTIPLE_DOCS: 'a second YAML document (after "---"); the file holds one',
  MULTILINE_IMPLICIT_KEY: 'a key that runs over several lines (often a ":" missing or a quote left open)',
};

export interface YamlError {
  readonly code: string;
  readonly message: string;
  readonly linePos?: readonly { line: number; col: number }[] | undefined;
}

/** A YAML syntax error with line, column and the offending line marked by a caret. */
export function yamlProblem(file: string, text: string, err: YamlError): string {
  const own = err.message.replace(/ at line \d+, column \d+:[\s\S]*$/, '');
  const words = YAML_WORDS[err.code] ?? own.charAt(0).toLowerCase() + own.slice(1);
  const pos = err.linePos?.[0];
  if (!pos) return `config file ${file}: not valid YAML: ${words}`;
  const lines = text.split(/\r?\n/);
  // At the end of the file the parser points past the last line: show the line that is open.
  let line = pos.line;
  let col = pos.col;
  while (line > 1 && (lines[line - 1] ?? '').trim() === '') {
    line--;
    col = (lines[line - 1] ?? '').length + 1;
  }
  const shown = maskSecrets(lines, line - 1).replace(/\t/g, ' ');
  const num = String(line);
  return [
    `config file ${file}: not valid YAML at line ${line}, column ${col}${line !== pos.line ? ' (the end of the file)' : ''}: ${words}`,
    `  ${num} | ${shown}`,
    `  ${' '.repeat(num.length)} | ${' '.repeat(Math.max(0, col - 1))}^`,
  ].join('\n');
}

// The names of keys whose whole value is secret (admin.token, api.tokens, cookie.secrets).
let secretNames: ReadonlySet<string> | undefined;
const hide = (s: string) => s.replace(/[^\s[\]{},'"]/g, '*');

/**
 * A line of the file as a YAML error may show it, with secrets starred out character for
 * character (so the caret still points at the same column): the value of a secret key (also as an
 * item of a block list under one) and the password in a URL.
 */
export function maskSecrets(lines: readonly string[], index: number): string {
  secretNames ??= new Set(listKeys().filter((k) => k.doc.secret === 'value').map((k) => k.path.split('.').at(-1) as string));
  const line = (lines[index] ?? '').replace(/(\b[A-Za-z][A-Za-z0-9+.-]*:\/\/[^:@/\s]*:)([^@/\s]+)@/g, (_, head: string, pw: string) => `${head}${hide(pw)}@`);
  const keyed = /^(\s*(?:-\s+)?["']?([A-Za-z_]+)["']?\s*:)(.*)$/.exec(line);
  if (keyed && secretNames.has(keyed[2] as string)) return `${keyed[1]}${hide(keyed[3] as string)}`;
  const item = /^(\s*-\s*)(.*)$/.exec(line);
  if (!item) return line;
  // An item of a block list: secret when the nearest key above it, less indented, is a secret one.
  const indent = (item[1] as string).search(/-/);
  for (let i = index - 1; i >= 0; i--) {
    const above = /^(\s*)(?:-\s+)?["']?([A-Za-z_]+)["']?\s*:/.exec(lines[i] ?? '');
    if (!above || (above[1] as string).length > indent) continue;
    return secretNames.has(above[2] as string) ? `${item[1]}${hide(item[2] as string)}` : line;
  }
  return line;
}
