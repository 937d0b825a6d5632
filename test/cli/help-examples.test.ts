// Every command's --help tells the truth: its example is run, as printed, against the demo
// (`roomgate start` with no configuration) on a terminal, and must match what the command really
// prints (any number where the example has a number, anything where it has <placeholder>, "..."
// for lines left out); its help lists the environment variables it reads. The commands run in this
// process (runCliHere: the CLI's run(), as the binary calls it, here with stdout a terminal); the
// demo is the binary (test/cli/admin-commands and where run the binary itself on a terminal).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, stop, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { runCliHere } from './in-process.js';
import { freePortRange } from './support.js';

interface HelpJson {
  commands: { name: string; env: string[]; example: { line: string; output: string } }[];
}

const TOKEN = 'help-examples-admin-token-0123';
const SECRET = 'help-examples-cookie-secret-0123456789';
// The demo signs its calls with it, so check-backend's example derives the demo backends' keys.
const CALL_SECRET = 'help-examples-call-secret-0123456789abcdef';

let help: HelpJson;
let demo: GatewayProc;
let env: Record<string, string>;
const demoPids: number[] = [];

beforeAll(async () => {
  help = JSON.parse((await runCliHere(['help', '--json'])).stdout) as HelpJson;
  const basePort = await freePortRange(3);
  demo = await startGateway({
    config: false,
    env: { ROOMGATE_HOST: '', ROOMGATE_COOKIE_SECRETS: SECRET, ROOMGATE_CALL_SECRETS: CALL_SECRET, ROOMGATE_ADMIN_TOKEN: TOKEN, ROOMGATE_DEMO_BASE_PORT: String(basePort) },
  });
  demoPids.push(...demo.logs().filter((l) => l.msg === 'demo backend started').map((l) => Number(l.backendPid)));
  env = { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${demo.adminPort}`, ROOMGATE_ADMIN_TOKEN: TOKEN, ROOMGATE_COOKIE_SECRETS: SECRET };
}, 60_000);

afterAll(async () => {
  if (demo) await stop(demo, 'SIGTERM', 10_000);
  for (const pid of demoPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // stopped with the gateway
    }
  }
  await stopAll();
});

const tidy = (text: string): string =>
  text
    .split('\n')
    .map((l) => l.replace(/\s+/g, ' ').trimEnd())
    .join('\n')
    .replace(/^\n+|\n+$/g, '');

/** The example's output as a pattern over the tidied real output. */
export function examplePattern(output: string): RegExp {
  const chunks = tidy(output)
    .split(/^\.\.\.$/m)
    .map((chunk) =>
      chunk
        .replace(/^\n|\n$/g, '')
        .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        .replace(/<[a-z-]+>/g, '\\S+')
        .replace(/\d+/g, '\\d+'),
    );
  return new RegExp(`^${chunks.join('\\n(?:.*\\n)*?')}$`);
}

/** `VAR=value ... roomgate-less words`: the environment and the arguments of an example line. */
function parseLine(line: string): { env: Record<string, string>; args: string[] } {
  const words = line.split(/\s+/);
  const vars: Record<string, string> = {};
  while (/^[A-Z_]+=/.test(words[0] ?? '')) {
    const [name, ...value] = (words.shift() as string).split('=');
    vars[name as string] = value.join('=');
  }
  return { env: vars, args: words };
}

describe('each command --help', () => {
  it('matches pattern rules that can fail (digits, placeholders, left-out lines)', () => {
    expect(examplePattern('demo-2 is now up').test('demo-1 is now up')).toBe(true);
    expect(examplePattern('demo-2 is now up').test('demo-1 is now draining')).toBe(false);
    expect(examplePattern('a.<x>.b').test('a.9Zz_-.b')).toBe(true);
    expect(examplePattern('first\n...\nlast').test('first\nsome\nmore\nlast')).toBe(true);
    expect(examplePattern('first\n...\nlast').test('first\nlast but one')).toBe(false);
    expect(examplePattern('only').test('only\nand more')).toBe(false);
  });

  // In this order: status before drain changes a state, move while demo-2 takes rooms; start's banner is the demo's own.
  const ORDER = ['start', 'check-config', 'sign', 'backend-key', 'check-backend', 'where', 'status', 'move', 'drain', 'undrain', 'maintenance'];

  it('runs its example as printed, and the command prints what the example shows', async () => {
    expect(help.commands.map((c) => c.name).sort()).toEqual([...ORDER].sort());
    // The help texts change nothing: read first; the examples run in order.
    const texts = await Promise.all(ORDER.map(async (name) => (await runCliHere([name, '--help'])).stdout));
    for (const [i, name] of ORDER.entries()) {
      const c = help.commands.find((x) => x.name === name)!;
      const text = texts[i] as string;
      expect(text, name).toContain(`$ roomgate ${c.example.line}\n`);
      expect(text, name).toContain(c.example.output.split('\n').map((l) => `  ${l}`).join('\n'));
      let real: string;
      if (name === 'start') {
        // The banner, on stderr, once the demo has started (the JSON logs go to stdout).
        real = await waitFor('the demo banner', 10_000, () => (demo.stderr.some((l) => l.startsWith('Kill a backend')) ? demo.stderr.join('\n') : undefined));
      } else {
        const { env: vars, args } = parseLine(c.example.line);
        real = (await runCliHere(args, { ...env, ...vars }, { tty: true })).stdout;
      }
      expect(tidy(real), `roomgate ${c.example.line}: the example in its --help is\n${c.example.output}`).toMatch(examplePattern(c.example.output));
    }
  }, 120_000);

  it('lists the environment variables the command reads', async () => {
    const must: Record<string, string[]> = {
      start: ['ROOMGATE_PORT', 'ROOMGATE_ADMIN_PORT', 'ROOMGATE_DEMO_BASE_PORT', 'ROOMGATE_WORKERS', 'ROOMGATE_BALANCE', 'ROOMGATE_CONFIG'],
      'check-config': ['ROOMGATE_CONFIG', 'ROOMGATE_PORT', 'ROOMGATE_ADMIN_PORT', 'ROOMGATE_TLS_CERTS'],
      sign: ['ROOMGATE_CONFIG', 'ROOMGATE_COOKIE_SECRETS'],
      'backend-key': ['ROOMGATE_CONFIG', 'ROOMGATE_CALL_SECRETS'],
      'check-backend': ['ROOMGATE_BACKEND_ID', 'ROOMGATE_BACKEND_KEYS', 'ROOMGATE_CALL_SECRETS', 'ROOMGATE_ADMIN_URL'],
      where: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_CONFIG', 'ROOMGATE_BACKENDS'],
      status: ['ROOMGATE_ADMIN_URL'],
      drain: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN'],
      undrain: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN'],
      maintenance: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN'],
      move: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN'],
    };
    const texts = await Promise.all(help.commands.map(async (c) => (await runCliHere(['help', c.name])).stdout));
    for (const [i, c] of help.commands.entries()) {
      const text = texts[i] as string;
      const section = text.slice(text.indexOf('\nEnvironment'), text.indexOf('\nExample'));
      for (const v of must[c.name] ?? ['(a list for this command)']) expect(section, `${c.name} --help names ${v}`).toMatch(new RegExp(`^  ${v} +\\S`, 'm'));
      for (const v of c.env) expect(section, `${c.name}: ${v}`).toMatch(new RegExp(`^  ${v} +\\S`, 'm'));
      // A command reading no configuration lists none of its variables.
      if (['status', 'drain', 'undrain', 'maintenance', 'move', 'check-backend'].includes(c.name)) expect(section, c.name).not.toContain('ROOMGATE_PORT');
    }
  });
});
