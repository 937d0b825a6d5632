// roomgate backend-key ID: the keys one backend verifies roomgate's calls with (pushes, the
// handoff hooks), derived from the call secrets (src/http/call-proof.ts). A backend is given only
// its own keys, never the call secrets: it can then check calls made for it and sign none for
// another backend.
import type { Command } from '../command.js';
import { CONFIG, JSON_OUT } from '../options.js';

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
  // What it runs loads the configuration's schema: imported when backend-key runs.
  run: async (p) => (await import('./backend-key-run.js')).runBackendKey(p),
};
