// roomgate backend-key ID: the keys one backend verifies roomgate's calls with (pushes, the
// handoff hooks), derived from the call secrets (src/http/call-proof.ts). A backend is given only
// its own keys, never the call secrets: it can then check calls made for it and sign none for
// another backend.
import { backendKeys, keyIdOf } from '../../http/call-proof.js';
import { flag, UsageError } from '../args.js';
import type { Command } from '../command.js';
import { configSource, loadFrom } from '../config.js';
import { CONFIG, JSON_OUT } from '../options.js';
import { print, printJson, say } from '../output.js';

/** What a backend id may hold: a line of the proof, so no control character (a header's rule). */
const ID = /^[\x21-\x7e]{1,200}$/;

export const backendKey: Command = {
  name: 'backend-key',
  args: 'ID',
  minArgs: 1,
  maxArgs: 1,
  summary: "print a backend's own call keys (for its environment)",
  description: `Prints the keys the backend ID (its id in roomgate's backends list, or "pod:port" from DNS
discovery) verifies roomgate's pushes and handoff calls with, one per call secret
(backendCalls.secrets, ROOMGATE_CALL_SECRETS), as environment lines for that backend:
  ROOMGATE_BACKEND_ID=ID
  ROOMGATE_BACKEND_KEYS=rgk1.<key id>.<key>[,...]
Give each backend only its own: a key checks calls made for that backend alone, so a pod cannot
sign a call to another pod nor replay one. Rotation: add the new secret beside the old one in
roomgate (calls are signed with both), hand each backend its new set, then remove the old secret.
--json: {"backend": "ID", "keys": [{"keyId": "...", "key": "..."}]}.`,
  options: [CONFIG, JSON_OUT],
  env: ['ROOMGATE_CONFIG', 'ROOMGATE_CALL_SECRETS', 'ROOMGATE_BACKENDS'],
  example: { line: 'ROOMGATE_CALL_SECRETS=0123456789abcdef0123456789abcdef backend-key demo-1', output: 'ROOMGATE_BACKEND_ID=demo-1\nROOMGATE_BACKEND_KEYS=rgk1.<id>.<key>' },
  async run({ values, positionals }) {
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
  },
};
