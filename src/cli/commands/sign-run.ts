// What `roomgate sign ROOM` does (src/cli/commands/sign.ts says what it is): the room cookie value,
// signed as the configuration says.
import { createRoomValidator } from '../../room/validate.js';
import { signerFor } from '../../room/signing.js';
import { flag, UsageError, type Parsed } from '../args.js';
import { configSource, loadFrom } from '../config.js';
import { print, printJson } from '../output.js';
import { invalidRoomMessage } from '../rooms.js';

export async function runSign({ values, positionals }: Parsed): Promise<number> {
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
}
