// Child processes of `npm run demo:cluster`: spawn one, wait (with a timeout) for the stdout line
// that says it is ready, copy its output afterwards, stop it with a signal and a deadline.
// Every child gets its own process group, so a terminal's Ctrl-C reaches only the parent, which
// then stops the children in order (gateways first); a last-resort exit hook kills any child
// still alive when the parent exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  /** Resolves once the process has exited (code or signal name). */
  readonly exited: Promise<number | string>;
  /** Output lines (stdout and stderr) seen before it was ready, for error messages. */
  readonly early: string[];
}

export interface SpawnOptions<T> {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** Called with every stdout or stderr line until it returns something other than undefined. */
  readonly ready: (line: string) => T | undefined;
  /** A line that means the child cannot start: the rejection then quotes it. */
  readonly fatal?: (line: string) => boolean;
  readonly timeoutMs: number;
  /** After ready: every output line goes here (the caller filters and prefixes). */
  readonly output?: (child: Child, line: string) => void;
}

const running = new Set<Child>();

export function runningChildren(): readonly Child[] {
  return [...running];
}

export class ChildStartError extends Error {}

/** Spawns a child and resolves once `ready` matched a line; rejects (child killed) otherwise. */
export function spawnReady<T>(o: SpawnOptions<T>): Promise<{ child: Child; value: T }> {
  const proc = spawn(o.command, [...o.args], { stdio: ['ignore', 'pipe', 'pipe'], env: o.env ?? process.env, detached: true });
  const exited = new Promise<number | string>((resolve) => {
    proc.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
    // A spawn failure (ENOENT) emits 'error' and never 'exit'.
    proc.once('error', () => resolve('spawn-error'));
  });
  const child: Child = { name: o.name, process: proc, exited, early: [] };
  running.add(child);
  void exited.then(() => running.delete(child));

  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | undefined, value?: T): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        void stopChild(child, 'SIGKILL', 1_000).then(() => reject(err));
      } else resolve({ child, value: value as T });
    };
    const onLine = (line: string): void => {
      if (settled) {
        o.output?.(child, line);
        return;
      }
      child.early.push(line);
      if (o.fatal?.(line)) return settle(new ChildStartError(`${o.name} cannot start: ${line.trim()}`));
      let value: T | undefined;
      try {
        value = o.ready(line);
      } catch {
        value = undefined; // a line that looked right but did not parse: keep waiting
      }
      if (value !== undefined) settle(undefined, value);
    };
    // What a child says on stderr before it is ready: its error, when it has one. Its log lines
    // (stdout) go on while it shuts down and would push the error out of the few lines shown.
    const earlyErrors: string[] = [];
    if (proc.stdout) createInterface({ input: proc.stdout }).on('line', onLine);
    if (proc.stderr) {
      createInterface({ input: proc.stderr }).on('line', (line) => {
        if (!settled) earlyErrors.push(line);
        onLine(line);
      });
    }
    proc.once('error', (err: NodeJS.ErrnoException) => settle(new ChildStartError(`${o.name}: cannot run ${o.command} (${err.code ?? err.message})`)));
    // 'close', not 'exit': only then has everything it wrote been read.
    proc.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      if (!settled) settle(new ChildStartError(`${o.name} exited before it was ready (${code ?? signal ?? 'unknown'}):\n${tail(earlyErrors.length > 0 ? earlyErrors : child.early)}`));
    });
    const timer = setTimeout(
      () => settle(new ChildStartError(`${o.name} was not ready within ${o.timeoutMs} ms:\n${tail(child.early)}`)),
      o.timeoutMs,
    );
  });
}

/** The last lines a child wrote (its error is nearly always there), indented. */
function tail(lines: readonly string[], n = 5): string {
  return lines
    .slice(-n)
    .map((l) => `  ${l}`)
    .join('\n');
}

/** Sends `signal`, waits for the exit; SIGKILL after timeoutMs. Resolves once the child is gone. */
export async function stopChild(child: Child, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 5_000): Promise<void> {
  const p = child.process;
  if (p.exitCode !== null || p.signalCode !== null || p.pid === undefined) return;
  p.kill(signal);
  const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
  try {
    await child.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Synchronous last resort: no child outlives this process, whatever ends it (short of SIGKILL). */
process.once('exit', () => {
  for (const c of running) c.process.kill('SIGKILL');
});
