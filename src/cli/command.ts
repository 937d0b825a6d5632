// What a command is: its name, arguments, options, help text and what it runs.
import type { OptionSpec, Parsed } from './args.js';

/** run() resolves with the exit code, or KEEP_RUNNING for `start` (it ends with a signal). */
export const KEEP_RUNNING = -1;

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
  run(p: Parsed): Promise<number>;
}
