// The proof on every call roomgate makes to a backend's own endpoints (pushes, the room handoff's
// hooks), so a receiver can tell roomgate's call from a client's, or from another backend's, even
// when the app serves the path on a public route by mistake (docs/push.md, "Verifying a call").
//
// Keys. roomgate holds the call secrets (`backendCalls.secrets`, ROOMGATE_CALL_SECRETS); a backend
// never does. Each backend is given only its own key, derived from each secret and its id:
//
//   key id        = hex(HMAC-SHA256(secret, "roomgate-key-id-v1"))[0..8]
//   backend key   = "rgk1." + key id + "." + base64url(HMAC-SHA256(secret, "roomgate-backend-key-v1\n" + backend id))
//
// (`roomgate backend-key ID` prints a backend's keys). The key's whole text, as printed, is the
// HMAC key: a receiver in any language uses the string it was given, nothing to decode. One pod
// holding its own key can sign only calls to itself, so it can neither act as roomgate towards
// another backend nor replay another backend's calls to a third.
//
// The proof is an HMAC-SHA256, under the destination backend's key, of one line per claim:
//
//   roomgate-call-v2 \n purpose \n destination \n message id \n room \n epoch \n sender \n timestamp \n sha256(body) hex
//
// - purpose: what the call is for ("push", "push-fanout", "handoff-hello", "-export", "-import",
//   "-release", "-resume"), chosen by the receiver from the endpoint it serves, never read from the
//   request: a proof made for one purpose never passes as another;
// - destination: the backend id the call was made for (X-Roomgate-Destination); a receiver uses its
//   own id, never the field, and refuses a call whose field names another backend (403);
// - message id, room, epoch, sender: the X-Roomgate-Message-Id, X-Roomgate-Room, X-Roomgate-Epoch
//   and X-Roomgate-Sender fields as sent ("" when absent, as for a fan-out's room and epoch);
// - timestamp: X-Roomgate-Timestamp, Unix seconds: the receiver refuses one outside its window
//   (60 s by default), which bounds a replay;
// - the body's SHA-256, so nothing of the message can be changed.
// Every field travels in a header, where CR and LF cannot occur, so the lines cannot be confused.
// X-Roomgate-Signature carries one `v2=<key id>:<hex>` per secret, comma-separated: while a secret
// is rotated, roomgate signs with both and a receiver holding either key accepts the call.
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
  | 'handoff-resume'
  // Version 2: a held socket's messages delivered to the new owner.
  | 'handoff-messages'
  // Version 2: a client socket resumed on the new owner (the resume handshake; the body is the socket id).
  | 'handoff-resume-socket';

export const SIGNATURE_FIELD = 'X-Roomgate-Signature';
export const TIMESTAMP_FIELD = 'X-Roomgate-Timestamp';
export const DESTINATION_FIELD = 'X-Roomgate-Destination';

/** A receiver's default replay window: a timestamp further than this from its clock is refused. */
export const DEFAULT_WINDOW_S = 60;

/** A backend key's text: version, key id (8 hex digits), 43 base64url characters. */
const KEY_FORM = /^rgk1\.([0-9a-f]{8})\.[A-Za-z0-9_-]{43}$/;

/** The key id of a call secret: names it in every key derived from it and in every signature. */
export function keyIdOf(secret: string): string {
  return createHmac('sha256', secret).update('roomgate-key-id-v1').digest('hex').slice(0, 8);
}

/** The key the backend `backendId` holds for `secret` (the only one of its calls it can check). */
export function backendKey(secret: string, backendId: string): string {
  const mac = createHmac('sha256', secret).update(`roomgate-backend-key-v1\n${backendId}`).digest('base64url');
  return `rgk1.${keyIdOf(secret)}.${mac}`;
}

/** The backend's keys, one per call secret, in the secrets' order (its rotation set). */
export function backendKeys(secrets: readonly string[], backendId: string): string[] {
  return secrets.map((s) => backendKey(s, backendId));
}

/** Why a backend key's text is not one (for a receiver's start-up check), or null when it is. */
export function keyProblem(key: string): string | null {
  return KEY_FORM.test(key) ? null : 'a backend key is "rgk1.<8 hex digits>.<43 base64url characters>", as `roomgate backend-key ID` prints it';
}

export interface CallClaims {
  readonly purpose: CallPurpose;
  /** The backend id the call is for: the sender's destination, the receiver's own id. */
  readonly destination: string;
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
  return `roomgate-call-v2\n${c.purpose}\n${c.destination}\n${c.id}\n${c.room}\n${c.epoch}\n${c.sender}\n${timestamp}\n${digest}`;
}

function mac(key: string, text: string): string {
  return createHmac('sha256', key).update(text).digest('hex');
}

/**
 * The proof fields of a call made now to `claims.destination`, [name, value, ...]: the destination,
 * the timestamp and one signature per call secret, each under that backend's key for the secret.
 */
export function signCall(secrets: readonly string[], claims: CallClaims, nowMs: number): string[] {
  return signWithKeys(backendKeys(secrets, claims.destination), claims, nowMs);
}

/**
 * The same proof fields made with backend keys themselves (one signature per key): what a holder
 * of a backend's keys, and not of the secrets, can sign; `roomgate check-backend` signs so.
 */
export function signWithKeys(keys: readonly string[], claims: CallClaims, nowMs: number): string[] {
  const timestamp = String(Math.floor(nowMs / 1000));
  const text = payload(claims, timestamp);
  const signatures = keys.map((k) => `v2=${k.slice(5, 13)}:${mac(k, text)}`);
  return [DESTINATION_FIELD, claims.destination, TIMESTAMP_FIELD, timestamp, SIGNATURE_FIELD, signatures.join(',')];
}

/**
 * `proof`: the signature that matched (hex), what a receiver remembers to refuse a replay: the
 * header's text is not (spaces, other entries or the same entry twice make it differ). `keyId`:
 * the id of the key that matched, for the receiver's log while keys rotate.
 */
export type ProofVerdict =
  | { readonly ok: true; readonly proof: string; readonly keyId: string }
  | { readonly ok: false; readonly reason: 'unsigned' | 'stale' | 'wrong-destination' | 'bad-signature' };

export interface ProofFields {
  readonly timestamp: string | undefined;
  readonly signature: string | undefined;
  /** X-Roomgate-Destination as sent (undefined when absent). */
  readonly destination: string | undefined;
}

/**
 * A receiver's check of a call. `keys`: the receiver's own backend keys; `claims.destination`: its
 * own backend id. A call whose X-Roomgate-Destination names another backend is refused as such
 * (its proof could not pass under this receiver's keys anyway); any signature made with any of the
 * keys passes, compared in constant time.
 */
export function verifyCall(keys: readonly string[], claims: CallClaims, fields: ProofFields, nowMs: number, windowS: number = DEFAULT_WINDOW_S): ProofVerdict {
  const { timestamp, signature } = fields;
  if (timestamp === undefined || signature === undefined || keys.length === 0) return { ok: false, reason: 'unsigned' };
  if (fields.destination !== claims.destination) return { ok: false, reason: 'wrong-destination' };
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowMs / 1000 - Number(timestamp)) > windowS) return { ok: false, reason: 'stale' };
  const text = payload(claims, timestamp);
  const offered = signature
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('v2='))
    .map((s) => Buffer.from(s.slice(s.indexOf(':') + 1), 'utf8'));
  for (const key of keys) {
    const want = Buffer.from(mac(key, text), 'utf8');
    for (const got of offered) if (got.length === want.length && timingSafeEqual(got, want)) return { ok: true, proof: want.toString('utf8'), keyId: key.slice(5, 13) };
  }
  return { ok: false, reason: 'bad-signature' };
}
