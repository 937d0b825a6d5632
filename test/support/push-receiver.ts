// What every push receiver of the examples must refuse (docs/push.md, "Verifying a push"), sent
// straight to the receiver as an attacker on the backend's network or a client of a mis-routed
// public path would: unsigned, signed with another secret or for another backend, stale, replayed, or its proof moved to
// another room, epoch, body or purpose. Each must be refused with 403 and leave the room untouched;
// the one correctly signed push (sent last) is taken.
import { signCall, type CallPurpose } from '../../src/http/call-proof.js';
import { CALL_SECRET } from './processes.js';

export interface ReceiverAttempt {
  readonly name: string;
  readonly status: number;
}

function post(url: string, headers: Record<string, string>, body: string): Promise<number> {
  return fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body, signal: AbortSignal.timeout(5_000) }).then(async (r) => {
    await r.arrayBuffer();
    return r.status;
  });
}

function proof(to: string, purpose: CallPurpose, id: string, room: string, epoch: string, body: string, nowMs = Date.now(), secret = CALL_SECRET, sender = 'attacker'): Record<string, string> {
  const list = signCall([secret], { purpose, destination: to, id, room, epoch, sender, body: Buffer.from(body) }, nowMs);
  return Object.fromEntries([0, 2, 4].map((i) => [list[i] as string, list[i + 1] as string]));
}

/**
 * Sends each forged push to `url` (the receiver path on the backend `to` itself) for `room` at
 * `epoch`, then one genuine push; answers each attempt's status, in order (the genuine one last).
 */
export async function forgedPushes(url: string, to: string, room: string, epoch: number): Promise<ReceiverAttempt[]> {
  const body = '{"forged":true}';
  const fields = (id: string, r = room, e = String(epoch)): Record<string, string> => ({ 'X-Roomgate-Room': r, 'X-Roomgate-Epoch': e, 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': 'attacker' });
  const out: ReceiverAttempt[] = [];
  const attempt = async (name: string, headers: Record<string, string>, b = body): Promise<void> => {
    out.push({ name, status: await post(url, headers, b) });
  };
  await attempt('unsigned', fields('f-1'));
  await attempt('another secret', { ...fields('f-2'), ...proof(to, 'push', 'f-2', room, String(epoch), body, Date.now(), 'another-secret-0123456789abcdef0123') });
  // Another backend's call, captured and replayed here: its proof names that backend (and its key).
  await attempt('a push made for another backend', { ...fields('f-10'), ...proof(`${to}-other`, 'push', 'f-10', room, String(epoch), body) });
  // Signed with another backend's key but naming this one: what a compromised pod could forge.
  const forged = proof(`${to}-other`, 'push', 'f-11', room, String(epoch), body);
  await attempt("another backend's key naming this backend", { ...fields('f-11'), ...forged, 'X-Roomgate-Destination': to });
  await attempt('stale (2 minutes old)', { ...fields('f-3'), ...proof(to, 'push', 'f-3', room, String(epoch), body, Date.now() - 120_000) });
  await attempt('proof for another room', { ...fields('f-4'), ...proof(to, 'push', 'f-4', `${room}-other`, String(epoch), body) });
  await attempt('proof for another epoch', { ...fields('f-5'), ...proof(to, 'push', 'f-5', room, String(epoch + 1), body) });
  await attempt('proof for another body', { ...fields('f-6'), ...proof(to, 'push', 'f-6', room, String(epoch), '{}') });
  await attempt('proof for another purpose', { ...fields('f-7'), ...proof(to, 'push-fanout', 'f-7', room, String(epoch), body) });
  await attempt('proof for another sender', { ...fields('f-9'), ...proof(to, 'push', 'f-9', room, String(epoch), body, Date.now(), CALL_SECRET, 'job:trusted') });
  const genuine = { ...fields('g-1'), ...proof(to, 'push', 'g-1', room, String(epoch), '{"genuine":true}') };
  await attempt('genuine', genuine, '{"genuine":true}');
  await attempt('the genuine one replayed', genuine, '{"genuine":true}');
  // The same proof in another spelling of the header: still the one already taken.
  await attempt('replayed with another entry beside it', { ...genuine, 'X-Roomgate-Signature': `${genuine['X-Roomgate-Signature'] as string},x` }, '{"genuine":true}');
  await attempt('replayed with spaces', { ...genuine, 'X-Roomgate-Signature': ` ${genuine['X-Roomgate-Signature'] as string}` }, '{"genuine":true}');
  await attempt('a signature that is not ASCII', { ...fields('f-8'), 'X-Roomgate-Timestamp': String(Math.floor(Date.now() / 1000)), 'X-Roomgate-Destination': to, 'X-Roomgate-Signature': 'v2=00000000:é' }, body);
  return out;
}

/** The answers `forgedPushes` must get from a receiver that verifies pushes. */
export const EXPECTED_RECEIVER_ANSWERS: readonly ReceiverAttempt[] = [
  { name: 'unsigned', status: 403 },
  { name: 'another secret', status: 403 },
  { name: 'a push made for another backend', status: 403 },
  { name: "another backend's key naming this backend", status: 403 },
  { name: 'stale (2 minutes old)', status: 403 },
  { name: 'proof for another room', status: 403 },
  { name: 'proof for another epoch', status: 403 },
  { name: 'proof for another body', status: 403 },
  { name: 'proof for another purpose', status: 403 },
  { name: 'proof for another sender', status: 403 },
  { name: 'genuine', status: 204 },
  { name: 'the genuine one replayed', status: 403 },
  { name: 'replayed with another entry beside it', status: 403 },
  { name: 'replayed with spaces', status: 403 },
  { name: 'a signature that is not ASCII', status: 403 },
];

/** Headers of a correctly signed push, for tests that need one straight to a receiver. */
export function signedPushHeaders(to: string, room: string, epoch: number, id: string, body: string, sender = 'api'): Record<string, string> {
  return { 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': String(epoch), 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': sender, ...proof(to, 'push', id, room, String(epoch), body, Date.now(), CALL_SECRET, sender) };
}

/** A correctly signed push that names no room (nor epoch): a receiver refuses it for that alone. */
export function signedRoomlessPushHeaders(to: string, id: string, body: string): Record<string, string> {
  return { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': 'api', ...proof(to, 'push', id, '', '', body, Date.now(), CALL_SECRET, 'api') };
}

/** Headers of a correctly signed fan-out (X-Roomgate-Fanout: 1, no room nor epoch). */
export function signedFanoutHeaders(to: string, id: string, body: string): Record<string, string> {
  return { 'X-Roomgate-Fanout': '1', 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': 'api', ...proof(to, 'push-fanout', id, '', '', body, Date.now(), CALL_SECRET, 'api') };
}
