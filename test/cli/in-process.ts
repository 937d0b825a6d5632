// The roomgate command run in this process: src/cli/run.ts's run(), which dist/src/main.js calls
// with process.argv.slice(2), given the environment runCli (test/support/processes.ts) gives the
// binary (PATH and `env` only), its stdout and stderr captured and the exit code it sets read back.
// A node process costs about 0.4 s of CPU, nearly all of it loading modules, so the tests of what a
// command prints run it here; the tests of the process itself (the binary's exit code and streams,
// a terminal, a reader that goes away, the printed command lines, start) still spawn it.
import { run } from '../../src/cli/run.js';
import { withTimeout, type CliResult } from '../support/processes.js';

/** runCli's limit for one run. */
const TIMEOUT_MS = 20_000;

type Write = typeof process.stdout.write;

let queue: Promise<unknown> = Promise.resolve();

/**
 * `roomgate ARGS` with the environment `env` (and PATH): in a pipe, or on a terminal (`tty`:
 * stdout.isTTY, and stderr comes back in stdout as it does from runCliTty's pseudo-terminal).
 * Runs are one at a time, whoever calls: a run swaps process.env, process.exitCode and the two
 * streams' write until it ends, so what reads process.env meanwhile (startBackend hands it to the
 * backend) must not run alongside it.
 */
export function runCliHere(args: readonly string[], env: Record<string, string> = {}, o: { tty?: boolean } = {}): Promise<CliResult> {
  const result = queue.then(() => runOne(args, env, o.tty === true));
  queue = result.catch(() => undefined);
  return result;
}

async function runOne(args: readonly string[], env: Record<string, string>, tty: boolean): Promise<CliResult> {
  const saved = {
    env: process.env,
    exitCode: process.exitCode,
    outWrite: process.stdout.write,
    errWrite: process.stderr.write,
    outTTY: process.stdout.isTTY,
    errTTY: process.stderr.isTTY,
  };
  let stdout = '';
  let stderr = '';
  const capture =
    (into: 'stdout' | 'stderr'): Write =>
    ((chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      if (into === 'stdout' || tty) stdout += text;
      else stderr += text;
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      if (done) queueMicrotask(done);
      return true;
    }) as Write;
  process.env = { PATH: saved.env.PATH ?? '', ...env };
  process.exitCode = undefined;
  process.stdout.write = capture('stdout');
  process.stderr.write = capture('stderr');
  process.stdout.isTTY = tty;
  process.stderr.isTTY = tty;
  try {
    await withTimeout(run(args), TIMEOUT_MS, `roomgate ${args.join(' ')} (in this process)`);
    return { code: Number(process.exitCode ?? 0), stdout, stderr };
  } finally {
    process.env = saved.env;
    process.exitCode = saved.exitCode;
    process.stdout.write = saved.outWrite;
    process.stderr.write = saved.errWrite;
    process.stdout.isTTY = saved.outTTY;
    process.stderr.isTTY = saved.errTTY;
  }
}
