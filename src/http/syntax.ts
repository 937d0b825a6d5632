// RFC 9110/9112 character rules shared by every head roomgate reads or writes: one table per
// rule, indexed by byte, so a check is one array load per byte and no regular expression.

function table(pred: (c: number) => boolean): Uint8Array {
  const t = new Uint8Array(256);
  for (let c = 0; c < 256; c++) t[c] = pred(c) ? 1 : 0;
  return t;
}

const TCHAR_SPECIALS = "!#$%&'*+-.^_`|~";

/** tchar (RFC 9110 5.6.2): what a method and a header name are made of. */
export const TCHAR = table(
  (c) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || TCHAR_SPECIALS.includes(String.fromCharCode(c)),
);

/** field-vchar / SP / HTAB (RFC 9110 5.5): a header value; obs-text (0x80-0xFF) is allowed, CTL and DEL are not. */
export const FIELD_CHAR = table((c) => c === 0x09 || (c >= 0x20 && c !== 0x7f));

/** reason-phrase (RFC 9112 4): HTAB / SP / VCHAR / obs-text. */
export const REASON_CHAR = FIELD_CHAR;

/**
 * The characters of an origin-form request target ("/path?query") that roomgate takes or writes as
 * they are: RFC 3986's unreserved, sub-delims, ':', '@', '/', '?' and '%'. A fragment ('#'),
 * quotes, '<', '>', '\', '^', '`', '{', '|', '}', space, controls and non-ASCII are not among them.
 */
export const TARGET_CHAR = table((c) => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%".includes(String.fromCharCode(c)));

/**
 * Where s stops being a target roomgate may write in a request line as it is: the index of the
 * first character outside TARGET_CHAR or of a '%' that starts no escape of two hex digits; -1 when
 * there is none. The leading '/' is the caller's to check.
 */
export function targetFlaw(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || TARGET_CHAR[c] !== 1) return i;
    if (c === 0x25 && !(isHexDigit(s.charCodeAt(i + 1)) && isHexDigit(s.charCodeAt(i + 2)))) return i;
  }
  return -1;
}

function isHexDigit(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

export function isToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || TCHAR[c] !== 1) return false;
  }
  return true;
}

/** A header value or reason phrase as Node hands it over (latin1 decoded: one char per byte). */
export function isFieldText(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || FIELD_CHAR[c] !== 1) return false;
  }
  return true;
}

/**
 * uri-host [ ":" port ] (RFC 9110 7.2): a reg-name, IPv4 or bracketed IPv6 literal, optional port.
 * Stricter than the RFC's reg-name (no percent-encoding, no sub-delims): a Host that a DNS name
 * or an address cannot be is refused before it reaches an app's virtual-host logic.
 */
export function isHostValue(s: string): boolean {
  return /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::[0-9]{1,5})?$/.test(s);
}
