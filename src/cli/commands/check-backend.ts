// roomgate check-backend BACKEND: sends a live app the calls its receiving half must refuse or take
// (docs/push.md "What a receiver checks", docs/handoff.md "Every call is signed") and prints each
// as passed or failed with what was seen (src/receiver-check/).
import type { Command } from '../command.js';
import type { OptionSpec } from '../args.js';
import { ADMIN, JSON_OUT } from '../options.js';

const ID: OptionSpec = { name: 'id', type: 'string', value: 'ID', help: "the backend's id in roomgate, when BACKEND is a URL (default $ROOMGATE_BACKEND_ID)" };
const PUSH_PATH: OptionSpec = { name: 'push-path', type: 'string', value: 'PATH', help: 'push.path as the app serves it (default /_roomgate/push)' };
const HANDOFF_PATH: OptionSpec = { name: 'handoff-path', type: 'string', value: 'PATH', help: 'handoff.path as the app serves it (default /_roomgate/handoff)' };
const SKIP: OptionSpec = { name: 'skip', type: 'string', multiple: true, value: 'PART', help: 'push or handoff: a part the app does not serve, not checked (repeatable)' };

export const checkBackend: Command = {
  name: 'check-backend',
  args: 'BACKEND',
  minArgs: 1,
  maxArgs: 1,
  summary: "check an app's receiving half: forged, stale, replayed calls refused",
  description: `Sends the app at BACKEND (a backend id, its URL asked of the running gateway's admin API; or the
backend's own http(s)://host:port, with --id) the calls roomgate makes to it, forged and genuine,
straight to the backend (not through roomgate), and prints each as pass or FAIL with the status it
got. Pushes: unsigned, another key, made for another backend, stale, from the future, a proof made
for another room, epoch, body, purpose or sender, a signature that is not ASCII: each 403; one
genuine push to a room made up for the check (a 2xx), then replayed three ways: 403. Handoff
hooks: the hello (200 {"version": N}) and forged hellos (403); export, import, release and resume
are sent only forged (403): nothing of a real room is touched, so it can run against an app in use.
When the hello offers resume (protocol version 2), the resume handshake on /ws/live/: unsigned, with
the resume hook's proof, made for another backend, stale (403 each), and a genuine one for a socket
no export carried (a 4xx, never a 101).
The genuine calls are signed with the backend's own keys, $ROOMGATE_BACKEND_KEYS as the backend
holds them, else derived from $ROOMGATE_CALL_SECRETS (roomgate backend-key). Exit code 0 when every
check passed, 1 when one failed, 2 for bad usage. --json: {"backend", "url", "passed", "failed",
"checks": [{"name", "ok", "want", "saw"}]}.`,
  options: [ID, PUSH_PATH, HANDOFF_PATH, SKIP, ADMIN, JSON_OUT],
  env: ['ROOMGATE_BACKEND_ID', 'ROOMGATE_BACKEND_KEYS', 'ROOMGATE_CALL_SECRETS', 'ROOMGATE_ADMIN_URL'],
  example: {
    line: 'ROOMGATE_CALL_SECRETS=help-examples-call-secret-0123456789abcdef check-backend demo-1',
    output: 'demo-1 at http://127.0.0.1:<port>, signed with 1 key\npass push: unsigned: 403\n...\npass resume handshake: genuine, for a socket no export carried: 409\n38 of 38 checks passed',
  },
  run: async (p) => (await import('./check-backend-run.js')).runCheckBackend(p),
};
