/**
 * Cookie helpers for the hot path: every proxied request looks up exactly one cookie, so we scan
 * the header in place instead of parsing it into a map.
 */

const TAB = 9;
const SPACE = 32;
const QUOTE = 34;

const isWs = (c: number): boolean => c === SPACE || c === TAB;

/**
 * Value of the first cookie called `name` in a Cookie header, or undefined. No full parse, no
 * allocation of a map; tolerates spaces, missing values, quoted values ("..." stripped), garbage.
 *
 * Names are matched exactly (case-sensitive, per RFC 6265). A pair without '=' has no name and
 * is skipped. Values are returned as-is: no percent-decoding, since none of our formats need it.
 */
export function getCookie(header: string | undefined, name: string): string | undefined {
  if (typeof header !== 'string' || name.length === 0) return undefined;
  const len = header.length;
  let pos = 0;
  let eq = -1;
  while (pos < len) {
    // Reuse the last '=' while it is still ahead of us, so a long run of '='-less pairs
    // (garbage like "a;a;a;...") stays linear instead of rescanning the tail for every pair.
    if (eq < pos) {
      eq = header.indexOf('=', pos);
      if (eq < 0) return undefined; // no '=' left means no more named cookies
    }
    let end = header.indexOf(';', pos);
    if (end < 0) end = len;
    if (eq < end) {
      // Trim the name in place and compare without slicing.
      let ks = pos;
      let ke = eq;
      while (ks < ke && isWs(header.charCodeAt(ks))) ks++;
      while (ke > ks && isWs(header.charCodeAt(ke - 1))) ke--;
      if (ke - ks === name.length && header.startsWith(name, ks)) {
        let vs = eq + 1;
        let ve = end;
        while (vs < ve && isWs(header.charCodeAt(vs))) vs++;
        while (ve > vs && isWs(header.charCodeAt(ve - 1))) ve--;
        if (ve - vs >= 2 && header.charCodeAt(vs) === QUOTE && header.charCodeAt(ve - 1) === QUOTE) {
          vs++;
          ve--;
        }
        return header.slice(vs, ve);
      }
    }
    pos = end + 1;
  }
  return undefined;
}

export interface RoomCookieOptions {
  maxAgeS: number;
  secure: boolean;
}

// RFC 6265 §4.1.1: cookie-name is an RFC 7230 token; cookie-value is cookie-octets (no space,
// DQUOTE, comma, semicolon, backslash, controls or non-ASCII).
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const COOKIE_VALUE = /^[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*$/;

/**
 * `name=value; Path=/; Max-Age=N; HttpOnly; SameSite=Lax[; Secure]` (Max-Age omitted when 0 =
 * session cookie).
 *
 * Throws a TypeError on a name or value that is not legal in a cookie (same policy as the `cookie`
 * npm package): writing it anyway would let a room key such as `a; Domain=evil` inject attributes.
 * Room keys therefore have to be cookie-safe; validate them where they enter the system.
 * SameSite=Lax (not Strict) so following a link to a room page from elsewhere keeps affinity.
 */
export function serializeRoomCookie(name: string, value: string, opts: RoomCookieOptions): string {
  if (!COOKIE_NAME.test(name)) throw new TypeError(`invalid cookie name ${JSON.stringify(name)}`);
  if (!COOKIE_VALUE.test(value)) throw new TypeError(`invalid cookie value ${JSON.stringify(value)}`);
  if (!Number.isInteger(opts.maxAgeS) || opts.maxAgeS < 0) {
    throw new TypeError(`invalid cookie Max-Age ${opts.maxAgeS}`);
  }
  let out = `${name}=${value}; Path=/`;
  if (opts.maxAgeS > 0) out += `; Max-Age=${opts.maxAgeS}`;
  out += '; HttpOnly; SameSite=Lax';
  if (opts.secure) out += '; Secure';
  return out;
}
