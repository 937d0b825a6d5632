// What a command is: its name, arguments, options, help text and what it runs.
import type { OptionSpec, Parsed } from './args.js';

/** run() resolves with the exit code, or KEEP_RUNNING for `start` (it ends with a signal). */
export const KEEP_RUNNING = -1;

/**
 * One command line and what it prints on a terminal (stdout and stderr as one), against the demo
 * (`roomgate start` with no configuration): `line` may start with VAR=value words; a line "..."
 * in `output` stands for lines left out.
 */
export interface Example {
  readonly line: string;
  readonly output: string;
}

export interface Command {
  readonly name: string;
  /** Arguments as shown in help: "ROOM [ROOM...]", "BACKEND", "". */
  readonly args: string;
  readonly minArgs: number;
  readonly maxArgs: number;
  /** One line in `roomgate help`. */
  readonly summary: string;
  /** `roomgate help CMD`: what it does, what it prints, in a few lines. */
  readonly description: string;
  readonly options: readonly OptionSpec[];
  /** The environment variables it reads (each described in help.ts ENV_TEXT). */
  readonly env: readonly string[];
  /** What a user types and sees on a terminal; help prints it and test/cli/help-examples.test.ts runs it. */
  readonly example: Example;
  run(p: Parsed): Promise<number>;
}
