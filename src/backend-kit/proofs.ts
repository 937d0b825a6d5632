// roomgate's proof on a call to this backend (docs/push.md, "Verifying a call"): checked with the
// gateway's own verifier (src/http/call-proof.ts, one place for the format), under this backend's
// keys (read at every call, so they rotate without a restart), for this backend's id and the
// purpose of the endpoint called (neither read from the request), and taken once: a replay is
// refused by the signature that matched, remembered for twice the window.
import type { IncomingHttpHeaders } from 'node:http';
import { DEFAULT_WINDOW_S, verifyCall, type CallPurpose } from '../http/call-proof.js';

/** Why a call is refused; null when its proof holds (it is then remembered). */
export type Refusal = 'unsigned' | 'wrong-destination' | 'stale' | 'bad-signature' | 'replayed';

/** Proofs remembered at most; only roomgate's genuine calls get in, so the bound is never near. */
export const REPLAY_CACHE_MAX = 100_000;

/** The proofs taken within `ttlMs`, bounded: the oldest go first. */
export class ReplayCache {
  private readonly until = new Map<string, number>();
  constructor(
    private readonly ttlMs: number = 2 * DEFAULT_WINDOW_S * 1000,
    private readonly max: number = REPLAY_CACHE_MAX,
  ) {}

  /** True the first time `proof` is offered within the ttl; false for a replay. */
  take(proof: string, nowMs: number): boolean {
    for (const [p, until] of this.until) {
      if (until >= nowMs) break; // insertion order is expiry order: the rest are younger
      this.until.delete(p);
    }
    if (this.until.has(proof)) return false;
    this.until.set(proof, nowMs + this.ttlMs);
    while (this.until.size > this.max) this.until.delete(this.until.keys().next().value as string);
    return true;
  }

  get size(): number {
    return this.until.size;
  }
}

export interface VerifierOptions {
  /** This backend's id in roomgate's configuration: the destination every call must name. */
  readonly backendId: string;
  /** This backend's keys, asked at every call (a rotation replaces what it returns). */
  readonly keys: () => readonly string[];
  readonly windowS?: number;
  /** The clock (tests); default Date.now. */
  readonly now?: () => number;
}

/** The claims a call carries that are not the receiver's own: its header fields as sent. */
export interface CallFields {
  /** X-Roomgate-Message-Id (the resume handshake: its handoff id). */
  readonly id?: string;
}

export type Verifier = (headers: IncomingHttpHeaders, body: Buffer, purpose: CallPurpose, fields?: CallFields) => Refusal | null;

/** The one value of a header field, or undefined (absent, or repeated: never a guess between two). */
export function field(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return typeof v === 'string' ? v : undefined;
}

/**
 * Why a call is refused before its body is read: unsigned, made for another backend, or stale (the
 * checks of verifyCall that come before the signature, run by verifyCall itself on an empty body);
 * null when only the body can tell. A stranger cannot make the receiver read a large body.
 */
export function earlyRefusal(o: VerifierOptions, headers: IncomingHttpHeaders): Refusal | null {
  const claims = { purpose: 'push' as const, destination: o.backendId, id: '', room: '', epoch: '', sender: '', body: Buffer.alloc(0) };
  const proof = { timestamp: field(headers, 'x-roomgate-timestamp'), signature: field(headers, 'x-roomgate-signature'), destination: field(headers, 'x-roomgate-destination') };
  const v = verifyCall(o.keys(), claims, proof, (o.now ?? Date.now)(), o.windowS ?? DEFAULT_WINDOW_S);
  return v.ok || v.reason === 'bad-signature' ? null : v.reason;
}

export function createVerifier(o: VerifierOptions): Verifier {
  const windowS = o.windowS ?? DEFAULT_WINDOW_S;
  const cache = new ReplayCache(2 * windowS * 1000);
  const now = o.now ?? Date.now;
  return (headers, body, purpose, fields = {}) => {
    const claims = {
      purpose,
      destination: o.backendId,
      id: fields.id ?? field(headers, 'x-roomgate-message-id') ?? '',
      room: field(headers, 'x-roomgate-room') ?? '',
      epoch: field(headers, 'x-roomgate-epoch') ?? '',
      sender: field(headers, 'x-roomgate-sender') ?? '',
      body,
    };
    const proof = { timestamp: field(headers, 'x-roomgate-timestamp'), signature: field(headers, 'x-roomgate-signature'), destination: field(headers, 'x-roomgate-destination') };
    const t = now();
    const verdict = verifyCall(o.keys(), claims, proof, t, windowS);
    if (!verdict.ok) return verdict.reason;
    // Keyed on the signature that matched, never the header's text (a replay can vary it).
    return cache.take(verdict.proof, t) ? null : 'replayed';
  };
}
