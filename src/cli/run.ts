// The roomgate command: finds the command, parses its options, runs it, and turns every failure
// into one error line, one hint line and the exit code (0 ok, 1 failure while running, 2 bad
// usage or configuration).
import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/config-error.js';
import { closest, findCommand, flag, parseCommandLine, UsageError, type OptionSpec } from './args.js';
import { KEEP_RUNNING, type Command } from './command.js';
import { backendKey } from './commands/backend-key.js';
import { checkBackend } from './commands/check-backend.js';
import { drain, maintenance, undrain } from './commands/backend-state.js';
import { checkConfig } from './commands/check-config.js';
import { move } from './commands/move.js';
import { sign } from './commands/sign.js';
import { start } from './commands/start.js';
import { status } from './commands/status.js';
import { where } from './commands/where.js';
import { commandHelp, helpJson, usage } from './help.js';
import { HELP, JSON_OUT, VERSION } from './options.js';
import { exitQuietlyOnEpipe, print, printJson, sayError } from './output.js';

export const COMMANDS: readonly Command[] = [start, checkConfig, where, sign, backendKey, checkBackend, status, drain, undrain, maintenance, move];

const GENERAL: readonly OptionSpec[] = [HELP, VERSION];

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function commandNamed(name: string): Command {
  const c = COMMANDS.find((x) => x.name === name);
  if (c) return c;
  const guess = closest(name, [...COMMANDS.map((x) => x.name), 'help']);
  throw new UsageError(`unknown command "${name}"${guess ? `; did you mean ${guess}?` : ''}`, 'see: roomgate help');
}

function elsewhere(except: string) {
  return (name: string): string[] => COMMANDS.filter((c) => c.name !== except && c.options.some((o) => o.name === name)).map((c) => c.name);
}

function checkArgCount(c: Command, args: readonly string[]): void {
  const hint = `see: roomgate ${c.name} --help`;
  if (args.length > c.maxArgs) {
    throw new UsageError(c.maxArgs === 0 ? `${c.name} takes no arguments (got ${args.join(' ')})` : `${c.name} takes one ${c.args} (got ${args.length}: ${args.join(' ')})`, hint);
  }
  if (args.length < c.minArgs) throw new UsageError(`${c.name} needs ${c.maxArgs === 1 ? 'exactly one' : 'at least one'} ${c.args.split(' ')[0]}`, hint);
}

async function dispatch(argv: readonly string[]): Promise<number> {
  const known = [...GENERAL, ...COMMANDS.flatMap((c) => c.options)];
  const { command, rest } = findCommand(argv, known);
  if (command === undefined) {
    if (rest.some((a) => a === '--help' || a === '-h')) print(usage(COMMANDS));
    else if (rest.some((a) => a === '--version' || a === '-v')) print(version());
    else throw new UsageError('no command given', 'see: roomgate help');
    return 0;
  }
  if (command === 'help') {
    const p = parseCommandLine(rest, { command: 'help', options: [...GENERAL, JSON_OUT], elsewhere: elsewhere('help') });
    if (p.positionals.length > 1) throw new UsageError(`help takes one COMMAND (got ${p.positionals.join(' ')})`, 'see: roomgate help');
    if (p.positionals[0] !== undefined) print(commandHelp(commandNamed(p.positionals[0])));
    else if (flag(p.values, 'json')) printJson(helpJson(COMMANDS));
    else print(usage(COMMANDS));
    return 0;
  }
  const c = commandNamed(command);
  const parsed = parseCommandLine(rest, { command: c.name, options: [...c.options, ...GENERAL], elsewhere: elsewhere(c.name) });
  if (flag(parsed.values, 'help')) {
    print(commandHelp(c));
    return 0;
  }
  if (flag(parsed.values, 'version')) {
    print(version());
    return 0;
  }
  checkArgCount(c, parsed.positionals);
  return c.run(parsed);
}

function report(err: unknown): number {
  if (err instanceof UsageError) {
    sayError(err.message, err.hint);
    return 2;
  }
  if (err instanceof ConfigError) {
    // Each problem carries its own suggestion (did you mean, what to set): no hint line after them.
    sayError(err.message);
    return 2;
  }
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e.code === 'EADDRINUSE' || e.code === 'EACCES') {
    sayError(`cannot listen on ${e.address}:${e.port} (${e.code})`, 'hint: choose another port with --port, or listen.port / admin.port in the configuration');
    return 1;
  }
  sayError(e.stack ?? String(err));
  return 1;
}

/** Runs the command line; sets the exit code unless the command keeps running (start). */
export async function run(argv: readonly string[]): Promise<void> {
  exitQuietlyOnEpipe();
  let code: number;
  try {
    code = await dispatch(argv);
  } catch (err) {
    code = report(err);
  }
  if (code !== KEEP_RUNNING) process.exitCode = code;
}
