// roomgate sign ROOM: a signed room cookie value in the configured format, for tests and curl.
import { signerFor } from '../../gateway.js';
import { createRoomValidator } from '../../room/validate.js';
import { flag, UsageError } from '../args.js';
import type { Command } from '../command.js';
import { configSource, loadFrom } from '../config.js';
import { CONFIG, JSON_OUT } from '../options.js';
import { print, printJson } from '../output.js';
import { CONFIG_ENV } from '../help.js';
import { invalidRoomMessage } from '../rooms.js';

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
  env: CONFIG_ENV,
  example: { line: 'sign chess', output: 'chess.<time>.<signature>' },
  async run({ values, positionals }) {
    const room = positionals[0] as string;
    const config = loadFrom(configSource(values));
    const hint = 'see: roomgate sign --help';
    if (!createRoomValidator(config.room.pattern)(room)) throw new UsageError(invalidRoomMessage(config.room.pattern), hint);
    if (!config.cookie.signed) throw new UsageError('cookie.signed is false: the cookie value is the room key itself', hint);
    if (config.cookie.secrets.length === 0) {
      throw new UsageError('no cookie secret configured: set ROOMGATE_COOKIE_SECRETS (or cookie.secrets) to the secret the gateway uses', hint);
    }
    const value = signerFor(config, config.cookie.secrets)!.sign(room, Date.now());
    if (flag(values, 'json')) printJson({ room, cookie: config.cookie.name, value });
    else print(value);
    return 0;
  },
};
