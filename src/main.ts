#!/usr/bin/env node
// The roomgate command (the npm bin). Everything it does is in src/cli/: run.ts dispatches to one
// file per command under src/cli/commands/. The Node.js version is checked first, before the rest
// is imported (a static import would load it all before any line here runs).
// The default export: a named import of enableCompileCache would not link on a Node without it
// (before 22.1), and this file must run there to say which Node to use.
import nodeModule from 'node:module';
import { fileURLToPath } from 'node:url';
import { nodeRefusal } from './node-version.js';

/**
 * V8's compile cache: the modules' compiled code is kept on disk and reused by the next start (a
 * gateway starts with about 15 % less CPU: 0.8 s instead of 0.92 s here; a command answers sooner).
 * Kept beside the installation (node_modules/.cache/roomgate-compile), or where
 * ROOMGATE_COMPILE_CACHE says (Node's own NODE_COMPILE_CACHE, when set, wins: Node enables it
 * itself before this runs; NODE_DISABLE_COMPILE_CACHE=1 turns both off). Where it cannot be
 * written (the image's app files are read-only to its user) nothing is cached and nothing fails.
 */
function keepCompiledCode(): void {
  try {
    nodeModule.enableCompileCache?.(process.env.ROOMGATE_COMPILE_CACHE ?? fileURLToPath(new URL('../../node_modules/.cache/roomgate-compile', import.meta.url)));
  } catch {
    // Not cached: the start is only slower.
  }
}

const refusal = nodeRefusal(process.version, fileURLToPath(new URL('../../scripts/node24.sh', import.meta.url)), process.cwd());
if (refusal !== null) {
  process.stderr.write(`${refusal}\n`);
  process.exitCode = 2;
} else {
  keepCompiledCode();
  const { run } = await import('./cli/run.js');
  await run(process.argv.slice(2));
}
