#!/usr/bin/env node
// The roomgate command (the npm bin). Everything it does is in src/cli/: run.ts dispatches to one
// file per command under src/cli/commands/.
import { run } from './cli/run.js';

void run(process.argv.slice(2));
