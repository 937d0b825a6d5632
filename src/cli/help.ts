// `roomgate help`, `roomgate help CMD`, `roomgate CMD --help`: rendered from the commands themselves.
import { ENV_VARS } from '../config/env-vars.js';
import type { OptionSpec } from './args.js';
import type { Command } from './command.js';
import { HELP } from './options.js';

export const OUTPUT_RULE = 'Output: a table on a terminal, tab-separated lines without a header in a pipe, --json for scripts.';
export const EXIT_CODES = 'Exit codes: 0 ok (also when a pipe closes early), 1 failure while running, 2 bad usage or configuration.';

/** What each environment variable is, for the commands' help: the configuration's own, and the CLI's. */
const ENV_TEXT: Readonly<Record<string, string>> = {
  ...Object.fromEntries(Object.entries(ENV_VARS).map(([name, v]) => [name, v.key ? `${v.text} (${v.key})` : v.text])),
  ROOMGATE_ADMIN_URL: `the running gateway's admin API, when --admin is not given`,
  // What a backend holds (roomgate backend-key ID prints both), read by check-backend.
  ROOMGATE_BACKEND_ID: "the backend's id in roomgate, when --id is not given",
  ROOMGATE_BACKEND_KEYS: "the backend's own keys, comma-separated, as roomgate backend-key prints them",
};

/** The variables a command that loads the configuration reads (start reads ROOMGATE_WORKERS and ROOMGATE_BALANCE too). */
export const CONFIG_ENV: readonly string[] = Object.keys(ENV_VARS).filter((n) => n !== 'ROOMGATE_WORKERS' && n !== 'ROOMGATE_BALANCE');

function envLines(names: readonly string[]): string[] {
  const width = Math.max(...names.map((n) => n.length));
  return names.map((n) => {
    const text = ENV_TEXT[n];
    if (text === undefined) throw new Error(`help: no text for the environment variable ${n}`);
    return `  ${n.padEnd(width)}  ${text}`;
  });
}

function optionLines(options: readonly OptionSpec[]): string[] {
  const left = options.map((o) => `${o.short ? `-${o.short}, ` : ''}--${o.name}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}`);
  const width = Math.max(...left.map((l) => l.length));
  return options.map((o, i) => `  ${(left[i] as string).padEnd(width)}  ${o.help}`);
}

export function usage(commands: readonly Command[]): string {
  const names = commands.map((c) => `${c.name}${c.args ? ` ${c.args}` : ''}`);
  names.push('help [COMMAND]');
  const width = Math.max(...names.map((n) => n.length));
  const summaries = [...commands.map((c) => c.summary), "this text, or a command's options and output"];
  return [
    'Usage: roomgate <command> [options]',
    '',
    'Commands:',
    ...names.map((n, i) => `  ${n.padEnd(width)}  ${summaries[i]}`),
    '',
    "Run 'roomgate help COMMAND' (or 'roomgate COMMAND --help') for its options and output.",
    'roomgate --version prints the version.',
    OUTPUT_RULE,
    "Environment: each command's help lists the variables it reads.",
    EXIT_CODES,
  ].join('\n');
}

export function commandHelp(c: Command): string {
  return [
    `Usage: roomgate ${c.name}${c.args ? ` ${c.args}` : ''} [options]`,
    '',
    c.description,
    '',
    'Options:',
    ...optionLines([...c.options, HELP]),
    '',
    'Environment (a flag wins over its variable):',
    ...envLines(c.env),
    '',
    'Example, on a terminal:',
    `  $ roomgate ${c.example.line}`,
    ...c.example.output.split('\n').map((l) => `  ${l}`),
    '',
    EXIT_CODES,
  ].join('\n');
}

/** `roomgate help --json`: the commands and their options, for completion scripts. */
export function helpJson(commands: readonly Command[]): unknown {
  return {
    commands: commands.map((c) => ({
      name: c.name,
      args: c.args,
      summary: c.summary,
      options: c.options.map((o) => ({ name: `--${o.name}`, value: o.type === 'string' ? (o.value ?? 'VALUE') : null, repeatable: o.multiple === true, help: o.help })),
      env: c.env,
      example: c.example,
    })),
  };
}
