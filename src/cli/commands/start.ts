// roomgate start: run the gateway (one process, or a primary and N workers); with no backends and
// no discovery configured, the demo: demo backends of its own, and a banner saying what to open.
import { ENV_VARS } from '../../config/env-vars.js';
import type { Command } from '../command.js';
import { BACKEND, BALANCE, CONFIG, HOST, JSON_OUT, PORT, WORKERS } from '../options.js';

export const start: Command = {
  name: 'start',
  args: '',
  minArgs: 0,
  maxArgs: 0,
  summary: 'run the gateway (no backends configured: a demo with 3 backends of its own)',
  description: `Runs the gateway until SIGTERM or SIGINT (graceful; a second signal exits at once). SIGHUP re-reads
the configuration. Logs are JSON lines on stdout.
With no backends and no discovery configured, it runs the demo: 3 demo backends of its own, on
127.0.0.1 unless a host is given (--host, ROOMGATE_HOST or listen.host), and prints a banner on
stderr: the pages to open, the tokens and how to use them. With no configuration file, a cookie
secret, an admin token, an API token and a push token are generated for the run (those not in
the environment) and printed in the banner, once. --json: the banner as one JSON line on stdout.`,
  options: [CONFIG, BACKEND, PORT, HOST, WORKERS, BALANCE, JSON_OUT],
  env: Object.keys(ENV_VARS),
  example: {
    line: 'start',
    output: `roomgate demo: http://localhost:8080 in front of 3 demo backends (this machine only)
  start here:       http://localhost:8080/
  a game room:      http://localhost:8080/game/chess/
...
Kill a backend (kill PID) to watch its rooms reconnect to another. Ctrl-C stops everything.`,
  },
  // What it runs loads the gateway: imported when start runs, not for another command or --help.
  run: async (p) => (await import('./start-run.js')).runStart(p),
};
