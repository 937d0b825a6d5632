// A CLI call loads what its command uses and nothing more (src/cli/run.ts: the commands' help and
// options are light; what each runs is imported when it runs). The figure (time, CPU) is
// bench/cli-startup.ts's; this checks which modules the process loaded, which cannot flake.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { MAIN } from '../support/processes.js';

// Prints every module URL the process loads, one per line, on stderr.
const LIST_MODULES = 'data:text/javascript,import {registerHooks} from "node:module";registerHooks({load(u,c,next){process.stderr.write("loaded "+u+"\\n");return next(u,c)}})';

function loadedBy(args: readonly string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', LIST_MODULES, MAIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    child.once('close', () => {
      clearTimeout(timer);
      resolve([...stderr.matchAll(/^loaded (.*)$/gm)].map((m) => m[1] as string));
    });
  });
}

// The configuration's schema (zod), the gateway and the demo: most of what a call used to load.
const HEAVY = [/\/node_modules\/zod\//, /\/dist\/src\/config\/schema\.js$/, /\/dist\/src\/gateway\.js$/, /\/dist\/src\/demo\//];

describe('a CLI call loads only what its command uses', () => {
  // Port 9: nothing answers there, so the commands fail at once, after loading what they use.
  it.each([['--version'], ['help'], ['move', 'lobby', '--to', 'b1', '--admin', 'http://127.0.0.1:9'], ['status', '--admin', 'http://127.0.0.1:9'], ['where', 'chess', '--help']])(
    'roomgate %s ...: no schema, gateway or demo',
    async (...args) => {
      const loaded = await loadedBy(args);
      expect(loaded.some((u) => u.endsWith('/dist/src/cli/run.js'))).toBe(true);
      expect(loaded.filter((u) => HEAVY.some((h) => h.test(u)))).toEqual([]);
    },
  );

  it('where with no gateway answering loads the configuration (the ring answers), not the gateway', async () => {
    const loaded = await loadedBy(['where', 'chess', '--admin', 'http://127.0.0.1:9']);
    expect(loaded.some((u) => u.endsWith('/dist/src/config/schema.js'))).toBe(true);
    expect(loaded.some((u) => u.endsWith('/dist/src/gateway.js'))).toBe(false);
  });
});
