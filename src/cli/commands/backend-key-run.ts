// What `roomgate backend-key ID` does (src/cli/commands/backend-key.ts says what it is): the
// backend's keys, derived from the configured call secrets.
import { backendKeys, keyIdOf } from '../../http/call-proof.js';
import { flag, UsageError, type Parsed } from '../args.js';
import { configSource, loadFrom } from '../config.js';
import { print, printJson, say } from '../output.js';

/** What a backend id may hold: a line of the proof, so no control character (a header's rule). */
const ID = /^[\x21-\x7e]{1,200}$/;

export async function runBackendKey({ values, positionals }: Parsed): Promise<number> {
  const id = positionals[0] as string;
  const hint = 'see: roomgate backend-key --help';
  if (!ID.test(id)) throw new UsageError(`backend id ${JSON.stringify(id)}: expected the id roomgate gives the backend (printable characters, no spaces)`, hint);
  const config = loadFrom(configSource(values));
  const secrets = config.backendCalls.secrets;
  if (secrets.length === 0) throw new UsageError('no call secret configured: set ROOMGATE_CALL_SECRETS (or backendCalls.secrets) to the secrets the gateways sign with', hint);
  const configured = config.backends.map((b) => b.id);
  if (configured.length > 0 && !configured.includes(id)) {
    say(`note: ${id} is not among the configured backends (${configured.join(', ')}): the keys verify only calls made for a backend named ${id}`);
  }
  const keys = backendKeys(secrets, id);
  if (flag(values, 'json')) printJson({ backend: id, keys: keys.map((key, i) => ({ keyId: keyIdOf(secrets[i] as string), key })) });
  else print(`ROOMGATE_BACKEND_ID=${id}\nROOMGATE_BACKEND_KEYS=${keys.join(',')}`);
  return 0;
}
