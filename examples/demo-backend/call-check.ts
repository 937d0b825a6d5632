// The check of roomgate's proof on a call to this backend's own endpoints (the push receiver and
// the room handoff's hooks): made with one of this backend's own keys (ROOMGATE_BACKEND_KEYS, as
// `roomgate backend-key ID` prints them), for this backend (its id in roomgate's configuration,
// ROOMGATE_BACKEND_ID) and for the purpose of the endpoint that was called (neither read from the
// request), within the replay window, and not seen before: the same proof twice is a replay.
import type { IncomingMessage } from 'node:http';
import { DEFAULT_WINDOW_S, verifyCall, type CallPurpose } from '../../src/http/call-proof.js';

/** Why a call is refused, or null when its proof holds; the proof is then remembered. */
export type CallCheck = (req: IncomingMessage, body: Buffer, purpose: CallPurpose) => string | null;

/**
 * `backendId`: this backend's id as roomgate names it (the destination every proof must name).
 * `keys`: read at each call, so keys can rotate while the process runs (old and new overlap).
 */
export function createCallCheck(backendId: string, keys: () => readonly string[]): CallCheck {
  /** Proofs taken, until they are past any replay window (a stale timestamp is refused anyway). */
  const seen = new Map<string, number>();
  return (req, body, purpose) => {
    const one = (name: string): string | undefined => {
      const v = req.headers[name];
      return typeof v === 'string' ? v : undefined;
    };
    const claims = { purpose, destination: backendId, id: one('x-roomgate-message-id') ?? '', room: one('x-roomgate-room') ?? '', epoch: one('x-roomgate-epoch') ?? '', sender: one('x-roomgate-sender') ?? '', body };
    const now = Date.now();
    const fields = { timestamp: one('x-roomgate-timestamp'), signature: one('x-roomgate-signature'), destination: one('x-roomgate-destination') };
    const verdict = verifyCall(keys(), claims, fields, now);
    if (!verdict.ok) return verdict.reason;
    for (const [proof, until] of seen) {
      if (until > now) break;
      seen.delete(proof);
    }
    // Keyed on the signature that matched, never the header's text (a replay can vary it).
    if (seen.has(verdict.proof)) return 'replayed';
    seen.set(verdict.proof, now + 2 * DEFAULT_WINDOW_S * 1000);
    return null;
  };
}
