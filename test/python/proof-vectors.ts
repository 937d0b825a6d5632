// Proofs made by roomgate's own signer (src/http/call-proof.ts), written once to
// python/tests/fixtures/call-proofs.json for roomgate_kit's tests (python/tests/test_proofs.py): the
// Python receiver must take every one of them, so both languages agree on the proof byte for byte.
// test/python/kit.test.ts checks that the file is still what this computes.
import { backendKeys, signCall, type CallPurpose } from '../../src/http/call-proof.js';

interface Vector {
  readonly name: string;
  readonly backendId: string;
  /** The backend's keys, as `roomgate backend-key ID` prints them. */
  readonly keys: string[];
  readonly purpose: string;
  /** The call's fields as sent, the proof's among them. */
  readonly headers: Record<string, string>;
  /** The body as UTF-8 text. */
  readonly body: string;
  /** When the call was signed: the receiver's clock in the test. */
  readonly nowS: number;
}

const NOW_MS = 1_796_400_000_500;
const SECRETS = ['vector-secret-one-0123456789abcdef012', 'vector-secret-two-0123456789abcdef012'];

function vector(name: string, secrets: string[], backendId: string, purpose: string, fields: { id: string; room: string; epoch: string; sender: string }, body: string, extra: Record<string, string> = {}): Vector {
  const proof = signCall(secrets, { purpose: purpose as CallPurpose, destination: backendId, ...fields, body: Buffer.from(body, 'utf8') }, NOW_MS);
  const headers: Record<string, string> = { 'X-Roomgate-Message-Id': fields.id, 'X-Roomgate-Sender': fields.sender };
  if (fields.room !== '') headers['X-Roomgate-Room'] = fields.room;
  if (fields.epoch !== '') headers['X-Roomgate-Epoch'] = fields.epoch;
  for (const i of [0, 2, 4]) headers[proof[i] as string] = proof[i + 1] as string;
  Object.assign(headers, extra);
  return { name, backendId, keys: backendKeys(secrets, backendId), purpose, headers, body, nowS: Math.floor(NOW_MS / 1000) };
}

export function proofVectors(): Vector[] {
  const one = [SECRETS[0] as string];
  return [
    vector('a push', one, 'b1', 'push', { id: 'm-1', room: 'chess-42', epoch: '7', sender: 'api' }, '{"text":"hello"}'),
    vector('a fan-out (no room, no epoch)', one, 'b1', 'push-fanout', { id: 'm-2', room: '', epoch: '', sender: 'job:nightly' }, '{"rooms":[{"room":"a","epoch":1}],"message":{}}'),
    vector('a handoff export under a Redis epoch', one, 'pod-3:8000', 'handoff-export', { id: 'h-9', room: 'r.1', epoch: '1796400000000000', sender: 'gw-a' }, '{"leaseMs":30000}'),
    vector('two secrets while one rotates', SECRETS, 'b2', 'handoff-import', { id: 'h-10', room: 'r', epoch: '8', sender: 'gw-b' }, '{"v":1}'),
    vector('a body that is not ASCII', one, 'b1', 'push', { id: 'm-3', room: 'cafe', epoch: '2', sender: 'api' }, '{"text":"é ü 日本"}'),
    vector('the messages hook (protocol version 2)', one, 'b1', 'handoff-messages', { id: 'h-11', room: 'r', epoch: '9', sender: 'gw-a' }, '{"socket":"AAAAAAAAAAAAAAAAAAAAAA","messages":[]}'),
    // The resume handshake's proof: its message id is the handoff id (X-Roomgate-Resume), its body the socket id.
    vector('the resume handshake (protocol version 2)', one, 'b2', 'handoff-resume-socket', { id: 'h-12', room: 'r', epoch: '1796400000000001', sender: 'gw-a' }, 'AAAAAAAAAAAAAAAAAAAAAA', { 'X-Roomgate-Socket': 'AAAAAAAAAAAAAAAAAAAAAA', 'X-Roomgate-Resume': 'h-12' }),
  ];
}
