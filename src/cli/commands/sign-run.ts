// What `roomgate sign ROOM` does (src/cli/commands/sign.ts says what it is): the room cookie value,
// signed as the configuration says, or with --pin the room's per-tab pin (docs/per-tab-rooms.md).
import { createRoomValidator } from '../../room/validate.js';
import { createPinSigner, signerFor } from '../../room/signing.js';
import { flag, UsageError, type Parsed } from '../args.js';
import { configSource, loadFrom } from '../config.js';
import { print, printJson } from '../output.js';
import { invalidRoomMessage } from '../rooms.js';

export async function runSign({ values, positionals }: Parsed): Promise<number> {
  const room = positionals[0] as string;
  const config = loadFrom(configSource(values));
  const hint = 'see: roomgate sign --help';
  if (!createRoomValidator(config.room.pattern)(room)) throw new UsageError(invalidRoomMessage(config.room.pattern), hint);
  const pin = flag(values, 'pin');
  // A pin is keyed with the cookie's secrets whatever cookie.signed and cookie.format say.
  if (!pin && !config.cookie.signed) throw new UsageError('cookie.signed is false: the cookie value is the room key itself', hint);
  if (config.cookie.secrets.length === 0) {
    throw new UsageError('no cookie secret configured: set ROOMGATE_COOKIE_SECRETS (or cookie.secrets) to the secret the gateway uses', hint);
  }
  const now = Date.now();
  const value = pin ? createPinSigner(config.cookie.secrets, config.room.pinMaxAgeS).sign(room, now) : signerFor(config, config.cookie.secrets)!.sign(room, now);
  if (flag(values, 'json')) printJson(pin ? { room, param: config.room.pinParam, value } : { room, cookie: config.cookie.name, value });
  else print(value);
  return 0;
}
