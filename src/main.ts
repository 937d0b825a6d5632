#!/usr/bin/env node
// The roomgate command (the npm bin). Everything it does is in src/cli/: run.ts dispatches to one
// file per command under src/cli/commands/. The Node.js version is checked first, before the rest
// is imported (a static import would load it all before any line here runs).
import { fileURLToPath } from 'node:url';
import { nodeRefusal } from './node-version.js';

const refusal = nodeRefusal(process.version, fileURLToPath(new URL('../../scripts/node24.sh', import.meta.url)), process.cwd());
if (refusal !== null) {
  process.stderr.write(`${refusal}\n`);
  process.exitCode = 2;
} else {
  const { run } = await import('./cli/run.js');
  await run(process.argv.slice(2));
}
