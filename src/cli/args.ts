// The command line: which command, its options and arguments. Options may stand before or after
// the command and its arguments; `--` ends them. Every mistake is a UsageError that names the
// problem (with a suggestion for a misspelt option or command) and one hint line.

export interface OptionSpec {
  /** Long name without the dashes. */
  readonly name: string;
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
  /** The value's placeholder in help ("URL", "N"). */
  readonly value?: string;
  readonly help: string;
}

export type Values = Readonly<Record<string, string | readonly string[] | boolean | undefined>>;

export interface Parsed {
  readonly values: Values;
  readonly positionals: readonly string[];
}

export class UsageError extends Error {
  constructor(
    message: string,
    /** One line after the error, e.g. "see: roomgate start --help". */
    readonly hint: string,
  ) {
    super(message);
  }
}

/** Edit distance counting a swap of two neighbours as one edit (optimal string alignment), for "did you mean". */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = v;
    }
  }
  return at(a.length, b.length);
}

/** The closest of `candidates` to `word`, if it is close enough to be a typo. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = distance(word, c);
    if (d < bestD) [best, bestD] = [c, d];
  }
  const limit = Math.max(1, Math.floor(word.length / 3));
  return bestD <= limit || (best !== undefined && (best.startsWith(word) || word.startsWith(best))) ? best : undefined;
}

function findOption(options: readonly OptionSpec[], token: string): OptionSpec | undefined {
  return token.startsWith('--') ? options.find((o) => o.name === token.slice(2)) : options.find((o) => o.short !== undefined && `-${o.short}` === token);
}

/**
 * The first argument that is not an option (nor an option's value): the command. `known` are
 * every option of every command, so `--config FILE start` finds "start".
 */
export function findCommand(argv: readonly string[], known: readonly OptionSpec[]): { command: string | undefined; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') return { command: argv[i + 1], rest: [...argv.slice(0, i), ...argv.slice(i + 2)] };
    if (a.startsWith('-') && a !== '-') {
      const o = findOption(known, a.split('=')[0] as string);
      if (o?.type === 'string' && !a.includes('=')) i++;
      continue;
    }
    return { command: a, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] };
  }
  return { command: undefined, rest: [...argv] };
}

export interface ParseContext {
  /** The command being parsed, for messages ("see: roomgate where --help"). */
  readonly command: string;
  readonly options: readonly OptionSpec[];
  /** Which other commands take an option this one does not: "--workers is for start only". */
  readonly elsewhere: (name: string) => readonly string[];
}

export function parseCommandLine(argv: readonly string[], ctx: ParseContext): Parsed {
  const hint = `see: roomgate ${ctx.command} --help`;
  const values: Record<string, string | string[] | boolean> = {};
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (token === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!token.startsWith('-') || token === '-') {
      positionals.push(token);
      continue;
    }
    const eq = token.startsWith('--') ? token.indexOf('=') : -1;
    const flag = eq > 0 ? token.slice(0, eq) : token;
    const spec = findOption(ctx.options, flag);
    if (!spec) throw unknownOption(flag, ctx, hint);
    let value: string | boolean;
    if (spec.type === 'boolean') {
      if (eq > 0) throw new UsageError(`${flag} takes no value (got ${token})`, hint);
      value = true;
    } else if (eq > 0) value = token.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`${flag} needs a value (${flag} ${spec.value ?? 'VALUE'})`, hint);
      value = next;
      i++;
    }
    if (spec.multiple) values[spec.name] = [...((values[spec.name] as string[] | undefined) ?? []), value as string];
    else values[spec.name] = value;
  }
  return { values, positionals };
}

function unknownOption(flag: string, ctx: ParseContext, hint: string): UsageError {
  const name = flag.replace(/^-+/, '');
  const others = flag.startsWith('--') ? ctx.elsewhere(name) : [];
  if (others.length > 0) {
    return new UsageError(`${flag} is for ${others.join(', ')} only (not ${ctx.command})`, hint);
  }
  const longs = ctx.options.map((o) => `--${o.name}`);
  const guess = flag.startsWith('--') ? closest(flag, longs) : undefined;
  return new UsageError(`unknown option ${flag}${guess ? `; did you mean ${guess}?` : ''}`, hint);
}

export function str(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

export function list(values: Values, name: string): readonly string[] | undefined {
  const v = values[name];
  return Array.isArray(v) ? (v as readonly string[]) : undefined;
}

export function flag(values: Values, name: string): boolean {
  return values[name] === true;
}
