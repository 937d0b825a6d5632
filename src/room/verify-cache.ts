// Remembers room cookies that verified, so a page or socket of a known room does not pay an HMAC
// per request (it was ~4 % of the page path's CPU in a profile). Only successes are cached: a
// forged or expired cookie is checked every time and cannot fill the cache. An entry is trusted
// for ttlMs after it verified, so a cookie may outlive its maxAge by at most ttlMs.
import type { RoomSigner, VerifyResult } from './signing.js';

export interface VerifyCacheOptions {
  /** Entries kept; when full the cache starts over (a bounded, allocation-free reset). */
  readonly maxEntries: number;
  /** How long a successful verification is reused. */
  readonly ttlMs: number;
}

interface Entry {
  readonly result: VerifyResult;
  readonly at: number;
}

export function withVerifyCache(signer: RoomSigner, o: VerifyCacheOptions): RoomSigner {
  let cache = new Map<string, Entry>();
  return {
    sign: (room, nowMs) => signer.sign(room, nowMs),
    verify(value, nowMs) {
      const hit = cache.get(value);
      // A clock that went backwards re-verifies too.
      if (hit !== undefined && nowMs >= hit.at && nowMs - hit.at < o.ttlMs) return hit.result;
      const result = signer.verify(value, nowMs);
      if (result.ok) {
        if (cache.size >= o.maxEntries) cache = new Map();
        cache.set(value, { result, at: nowMs });
      } else if (hit !== undefined) cache.delete(value);
      return result;
    },
  };
}
