// roomgate check-config: validate the configuration and print it (secrets redacted), without starting.
import type { Command } from '../command.js';
import { CONFIG_ENV } from '../help.js';
import { BACKEND, CONFIG, JSON_OUT, PORT } from '../options.js';

export const checkConfig: Command = {
  name: 'check-config',
  args: '',
  minArgs: 0,
  maxArgs: 0,
  summary: 'validate the configuration and print it, without starting',
  description: `Validates the configuration (file, environment, flags) as start would, and prints it with
secrets redacted, then notes on what start will do by itself (the demo, a generated secret) and on
TLS certificates that expire within 21 days, and on backendTls.verify turned off. Certificate files
(tls.certs, backendTls, redis.tlsCa/tlsCert/tlsKey) are read and checked (PEM, the key matching the certificate) as start reads them.
An invalid configuration: one line per problem on stderr, exit 2.
--json: {"valid": true, "config": {...}, "notes": ["..."]}.`,
  options: [CONFIG, BACKEND, PORT, JSON_OUT],
  env: CONFIG_ENV,
  example: {
    line: 'check-config --port 80x',
    output: `roomgate: invalid configuration:
  - listen.port: got "80x" (from --port); expected a whole number from 0 to 65535`,
  },
  // What it runs loads the schema and the certificate readers: imported when check-config runs.
  run: async (p) => (await import('./check-config-run.js')).runCheckConfig(p),
};
