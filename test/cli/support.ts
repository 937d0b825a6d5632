// The built CLI in the two places a user runs it besides a plain pipe (test/support/processes.ts
// runCli): on a terminal (a pseudo-terminal from util-linux `script`, so stdout.isTTY is true with
// no test-only switch in the CLI), and in a pipeline whose reader stops early (`| head -1`).
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { MAIN, type CliResult } from '../support/processes.js';

const TIMEOUT_MS = 20_000;

/** Single-quoted for sh. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function cliCommand(args: readonly string[]): string {
  return [process.execPath, MAIN, ...args].map(shellQuote).join(' ');
}

function exec(file: string, args: readonly string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    // stdin ignored: bash with a socket on stdin believes sshd runs it and reads ~/.bashrc.
    const child = spawn(file, [...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

/**
 * The CLI on a terminal: stdout and stderr are one pseudo-terminal, so both come back in stdout
 * (with "\r\n" turned into "\n"); the exit code is the CLI's (`script -e`).
 */
export async function runCliTty(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  const r = await exec('script', ['-qfec', cliCommand(args), '/dev/null'], { TERM: 'dumb', ...env });
  return { ...r, stdout: r.stdout.replace(/\r\n/g, '\n') };
}

/** `roomgate ARGS | READER` in bash with pipefail: the exit code is the CLI's unless the reader fails. */
export function runCliPiped(args: readonly string[], reader: string, env: Record<string, string> = {}): Promise<CliResult> {
  return exec('bash', ['-o', 'pipefail', '-c', `${cliCommand(args)} | ${reader}`], env);
}

export { freePortRange } from '../support/ports.js';

/** A command line as the demo banner prints it, run by sh, with `npx roomgate` meaning the built CLI. */
export function runPrinted(line: string, env: Record<string, string> = {}): Promise<CliResult> {
  return exec('sh', ['-c', line.replace(/\bnpx roomgate\b/g, cliCommand([]))], env);
}
