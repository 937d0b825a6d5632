// The proof on every call roomgate makes to a backend's own endpoints (the push receiver now; the
// room handoff calls later), so a receiver can tell roomgate's call from a client's even when the
// app serves that path on a public route by mistake (docs/push.md, "Verifying a push").
//
// The proof is an HMAC-SHA256, under a secret shared by roomgate and the app
// (`backendCalls.secrets`, ROOMGATE_CALL_SECRETS), of one line per claim:
//
//   roomgate-call-v1 \n purpose \n message id \n room \n epoch \n sender \n timestamp \n sha256(body) hex
//
// - purpose: what the call is for ("push", "push-fanout", and "handoff-hello", "-export", "-import", "-release", "-resume"), chosen
//   by the receiver from the endpoint it serves, never read from the request: a proof made for one
//   purpose never passes as another;
// - message id, room, epoch, sender: the X-Roomgate-Message-Id, X-Roomgate-Room,
//   X-Roomgate-Epoch and X-Roomgate-Sender fields as sent ("" when absent, as for a fan-out's room
//   and epoch): the receiver hands the sender on, so it is as much roomgate's word as the room;
// - timestamp: X-Roomgate-Timestamp, Unix seconds: the receiver refuses one outside its window
//   (60 s by default), which bounds a replay;
// - the body's SHA-256, so nothing of the message can be changed.
// Every field travels in a header, where CR and LF cannot occur, so the lines cannot be confused.
// X-Roomgate-Signature carries one `v1=<hex>` per configured secret, comma-separated: while a
// secret is rotated, roomgate signs with both and a receiver holding either accepts the call.
// roomgate strips every X-Roomgate-* field a client sends (src/http/ownership.ts).
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** What a call is for; a receiver verifies with the purpose of the endpoint it serves. */
export type CallPurpose =
  | 'push'
  | 'push-fanout'
  // Room handoff (docs/handoff.md): each step its own purpose, so no call passes as another.
  | 'handoff-hello'
  | 'handoff-export'
  | 'handoff-import'
  | 'handoff-release'
  | 'handoff-resume';

export const SIGNATURE_FIELD = 'X-Roomgate-Signature';
export const TIMESTAMP_FIELD = 'X-Roomgate-Timestamp';

/** A receiver's default replay window: a timestamp further than this from its clock is refused. */
export const DEFAULT_WINDOW_S = 60;

export interface CallClaims {
  readonly purpose: CallPurpose;
  /** X-Roomgate-Message-Id as sent. */
  readonly id: string;
  /** X-Roomgate-Room as sent, "" when absent. */
  readonly room: string;
  /** X-Roomgate-Epoch as sent, "" when absent. */
  readonly epoch: string;
  /** X-Roomgate-Sender as sent, "" when absent. */
  readonly sender: string;
  readonly body: Buffer;
}

function payload(c: CallClaims, timestamp: string): string {
  const digest = createHash('sha256').update(c.body).digest('hex');
  return `roomgate-call-v1\n${c.purpose}\n${c.id}\n${c.room}\n${c.epoch}\n${c.sender}\n${timestamp}\n${digest}`;
}

function mac(secret: string, text: string): string {
  return createHmac('sha256', secret).update(text).digest('hex');
}

/** The proof fields of a call made now, [name, value, ...]: one signature per secret. */
export function signCall(secrets: readonly string[], claims: CallClaims, nowMs: number): string[] {
  const timestamp = String(Math.floor(nowMs / 1000));
  const text = payload(claims, timestamp);
  return [TIMESTAMP_FIELD, timestamp, SIGNATURE_FIELD, secrets.map((s) => `v1=${mac(s, text)}`).join(',')];
}

/**
 * `proof`: the signature that matched (hex), what a receiver remembers to refuse a replay: the
 * header's text is not (spaces, other entries or the same entry twice make it differ).
 */
export type ProofVerdict = { readonly ok: true; readonly proof: string } | { readonly ok: false; readonly reason: 'unsigned' | 'stale' | 'bad-signature' };

/**
 * A receiver's check of a call: `timestamp` and `signature` are the X-Roomgate-Timestamp and
 * X-Roomgate-Signature fields (undefined when absent). Any signature made with any of `secrets`
 * passes; compared in constant time.
 */
export function verifyCall(
  secrets: readonly string[],
  claims: CallClaims,
  fields: { readonly timestamp: string | undefined; readonly signature: string | undefined },
  nowMs: number,
  windowS: number = DEFAULT_WINDOW_S,
): ProofVerdict {
  const { timestamp, signature } = fields;
  if (timestamp === undefined || signature === undefined || secrets.length === 0) return { ok: false, reason: 'unsigned' };
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowMs / 1000 - Number(timestamp)) > windowS) return { ok: false, reason: 'stale' };
  const text = payload(claims, timestamp);
  const offered = signature
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('v1='))
    .map((s) => Buffer.from(s.slice(3), 'utf8'));
  for (const secret of secrets) {
    const want = Buffer.from(mac(secret, text), 'utf8');
    for (const got of offered) if (got.length === want.length && timingSafeEqual(got, want)) return { ok: true, proof: want.toString('utf8') };
  }
  return { ok: false, reason: 'bad-signature' };
}
