// roomgate sign ROOM: a signed room cookie value in the configured format, for tests and curl.
import type { Command } from '../command.js';
import { CONFIG, JSON_OUT } from '../options.js';

export const sign: Command = {
  name: 'sign',
  args: 'ROOM',
  minArgs: 1,
  maxArgs: 1,
  summary: 'print a signed room cookie value (for tests and curl)',
  description: `Prints the value of the room cookie for ROOM, signed in the configured format (cookie.format)
with the first cookie secret; the gateway must have the same secret:
  curl -b "roomgate_room=$(roomgate sign red-fox)" http://localhost:8080/
--json: {"room": "...", "cookie": "roomgate_room", "value": "..."}.`,
  options: [CONFIG, JSON_OUT],
  // What it uses: the file and the secret (the cookie's format, name and salt have no variable).
  env: ['ROOMGATE_CONFIG', 'ROOMGATE_COOKIE_SECRETS'],
  example: { line: 'sign chess', output: 'chess.<time>.<signature>' },
  // What it runs loads the configuration's schema: imported when sign runs.
  run: async (p) => (await import('./sign-run.js')).runSign(p),
};
