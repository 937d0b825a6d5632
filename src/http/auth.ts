// The one token check of every listener roomgate answers itself: admin writes (admin.token), API
// writes (api.tokens) and the status page on the public port (admin.token). An Authorization
// header passes when it carries one of the accepted tokens, either as `Bearer <token>` or as the
// password of `Basic base64(user:password)` (any user name: what a browser prompts for). The
// scheme is case-insensitive (RFC 9110 section 11.1). Tokens are compared as SHA-256 digests in
// constant time, every accepted token every time, so neither the length of a token nor which
// one matched shows in the timing. The header is parsed without backtracking regular
// expressions: a 16 KiB header of spaces costs one pass, not seconds.
import { timingSafeEqual } from 'node:crypto';
import { sha256 } from './digest.js';

/** Standard base64 with optional padding (RFC 7617 uses it for Basic); linear to test. */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** SP or HTAB: the optional whitespace of RFC 9110. */
function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

/**
 * The credential an Authorization header carries: the Bearer token, or the Basic password. Null
 * for no header, another scheme, an empty credential, or Basic that is not base64 of valid UTF-8
 * with a colon.
 */
export function credential(header: string | undefined): string | null {
  if (!header) return null;
  let start = 0;
  let end = header.length;
  while (start < end && isOws(header.charCodeAt(start))) start++;
  while (end > start && isOws(header.charCodeAt(end - 1))) end--;
  let gap = start;
  while (gap < end && !isOws(header.charCodeAt(gap))) gap++;
  const scheme = header.slice(start, gap).toLowerCase();
  let from = gap;
  while (from < end && isOws(header.charCodeAt(from))) from++;
  // No whitespace after the scheme, or nothing after it: no credential.
  if (from === gap || from === end) return null;
  const value = header.slice(from, end);
  if (scheme === 'bearer') return value;
  if (scheme !== 'basic' || !BASE64.test(value)) return null;
  // Four base64 characters carry three bytes; a lone last character carries none: not base64.
  const unpadded = value.endsWith('==') ? value.length - 2 : value.endsWith('=') ? value.length - 1 : value.length;
  if (unpadded % 4 === 1) return null;
  let decoded: string;
  try {
    decoded = utf8.decode(Buffer.from(value, 'base64'));
  } catch {
    return null;
  }
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  const password = decoded.slice(colon + 1);
  return password === '' ? null : password;
}

/** What a listener makes of an Authorization header. */
export type TokenVerdict = 'ok' | 'missing' | 'wrong';

/** The accepted tokens of one listener. Empty strings are not tokens. */
export class TokenCheck {
  private readonly digests: readonly Buffer[];

  constructor(tokens: readonly string[]) {
    this.digests = tokens.filter((t) => t.length > 0).map(sha256);
  }

  /** False when no token is configured: nobody passes (each listener answers 403, naming its key). */
  get configured(): boolean {
    return this.digests.length > 0;
  }

  /** Whether the Authorization header carries one of the tokens. */
  accepts(authorization: string | undefined): boolean {
    return this.verdict(authorization) === 'ok';
  }

  /** 'missing': no Authorization header (or an empty one); 'wrong': anything else that is not a token. */
  verdict(authorization: string | undefined): TokenVerdict {
    if (authorization === undefined || authorization === '') return 'missing';
    const given = credential(authorization);
    // A digest of something is compared even without a credential: the same work either way.
    const digest = sha256(given ?? '');
    let ok = false;
    for (const d of this.digests) ok = timingSafeEqual(digest, d) || ok;
    return ok && given !== null ? 'ok' : 'wrong';
  }
}
