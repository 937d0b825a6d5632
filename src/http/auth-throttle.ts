// Failed token attempts per client address (admin writes, API writes, pushes, the token-protected
// status page): after `maxFailures` wrong tokens from one address within `windowMs`, every request
// of that address needing a token gets 429 with Retry-After until the window ends, without its
// token being looked at (so guessing stops paying, and a right guess is not confirmed). Only a
// wrong token counts, never a missing one. One fixed window per address, opened by its first
// failure; the table holds at most `maxAddresses` addresses (oldest window dropped first), so
// many addresses cannot grow it.
import type { IncomingMessage } from 'node:http';
import type { TokenCheck, TokenVerdict } from './auth.js';
import { peerAddress } from './peer.js';
import { Errors, type HttpError } from './errors.js';

export interface AuthThrottleOptions {
  /** Wrong tokens one address may send per window; 0: no limit. */
  readonly maxFailures: number;
  readonly windowMs: number;
  /** Addresses remembered at once. */
  readonly maxAddresses: number;
  /** A request was answered 429 (metrics), by surface: admin, api, push, status. */
  readonly onThrottled?: (surface: string) => void;
  readonly now?: () => number;
}

interface Window {
  failures: number;
  endsAt: number;
}

export class AuthThrottle {
  private readonly windows = new Map<string, Window>();
  private readonly now: () => number;

  constructor(private readonly o: AuthThrottleOptions) {
    this.now = o.now ?? Date.now;
  }

  /** The 429 for an address that used up its failures, else null. */
  refusal(address: string, surface: string): HttpError | null {
    if (this.o.maxFailures === 0) return null;
    const w = this.windows.get(address);
    if (w === undefined) return null;
    const now = this.now();
    if (now >= w.endsAt) {
      this.windows.delete(address);
      return null;
    }
    if (w.failures < this.o.maxFailures) return null;
    this.o.onThrottled?.(surface);
    return Errors.tooManyAttempts(undefined, { headers: { 'Retry-After': String(Math.max(1, Math.ceil((w.endsAt - now) / 1000))) } });
  }

  /** A wrong token from `address`. */
  failed(address: string): void {
    if (this.o.maxFailures === 0) return;
    const now = this.now();
    const w = this.windows.get(address);
    if (w !== undefined && now < w.endsAt) {
      w.failures++;
      return;
    }
    this.windows.delete(address);
    if (this.windows.size >= this.o.maxAddresses) {
      const oldest = this.windows.keys().next();
      if (oldest.done !== true) this.windows.delete(oldest.value);
    }
    this.windows.set(address, { failures: 1, endsAt: now + this.o.windowMs });
  }

  /** Addresses remembered now (tests). */
  get size(): number {
    return this.windows.size;
  }
}

/**
 * One surface's token check with the throttle around it: an address over its failures gets the
 * 429 (its token unread); otherwise the verdict, a wrong token counted against the address.
 */
export function throttledVerdict(tokens: TokenCheck, throttle: AuthThrottle | null, surface: string, authorization: string | undefined, address: string): TokenVerdict | HttpError {
  const refused = throttle?.refusal(address, surface) ?? null;
  if (refused) return refused;
  const verdict = tokens.verdict(authorization);
  if (verdict === 'wrong') throttle?.failed(address);
  return verdict;
}

/**
 * The client address a request's failures count against: its connection's peer (behind a proxy,
 * the proxy's). An h2 request's socket throws once its session is gone: 'unknown' then.
 */
export function requestAddress(req: IncomingMessage): string {
  try {
    return peerAddress(req.socket) ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
