// roomgate sign ROOM: a signed room cookie value in the configured format, or a room pin, for tests and curl.
import type { Command } from '../command.js';
import type { OptionSpec } from '../args.js';
import { CONFIG, JSON_OUT } from '../options.js';

const PIN: OptionSpec = { name: 'pin', type: 'boolean', help: "print the room's per-tab pin (room.pinParam's value) instead of its cookie value" };

export const sign: Command = {
  name: 'sign',
  args: 'ROOM',
  minArgs: 1,
  maxArgs: 1,
  summary: 'print a signed room cookie value or room pin (for tests and curl)',
  description: `Prints the value of the room cookie for ROOM, signed in the configured format (cookie.format)
with the first cookie secret; the gateway must have the same secret:
  curl -b "roomgate_room=$(roomgate sign red-fox)" http://localhost:8080/
--json: {"room": "...", "cookie": "roomgate_room", "value": "..."}.
--pin: the room's per-tab pin instead (room.ts.sig, keyed with the same secret whatever
cookie.format), as a page's {% roomgate_pin %} renders it: ws://host/ws/live/?roomgate_pin=VALUE.
--pin --json: {"room": "...", "param": "roomgate_pin", "value": "..."}.`,
  options: [CONFIG, PIN, JSON_OUT],
  // What it uses: the file and the secret (the cookie's format, name and salt have no variable).
  env: ['ROOMGATE_CONFIG', 'ROOMGATE_COOKIE_SECRETS'],
  example: { line: 'sign chess', output: 'chess.<time>.<signature>' },
  // What it runs loads the configuration's schema: imported when sign runs.
  run: async (p) => (await import('./sign-run.js')).runSign(p),
};
