// The one canonical form of a request target, and the paths no client may reach through roomgate.
//
// Servers disagree on what a target names: one decodes `%2F` into a path separator and another
// does not, one reads `\` as `/`, one resolves `/a/../b` and another passes it on, one trims white
// space or matches `$` before a trailing newline, one folds `ſ` (U+017F) to `s`. A rule judged on
// one reading and a backend acting on another is how reserved paths leak. So every front brings a
// target to one form before anything reads it, and that form is what the backend receives:
// - unreserved characters percent-decoded (`%61` -> `a`, RFC 3986 2.3), other escapes upper-cased
//   (`%3b` -> `%3B`: a `;` or `%` stays encoded, as sent);
// - repeated slashes merged, dot segments resolved (RFC 3986 5.2.4; never above the root);
// - refused (400): an encoded `/` or `\` (`%2F`, `%5C`), a backslash, an encoded control byte,
//   space or DEL (`%00`-`%20`, `%7F`), escapes that are not UTF-8 (overlong `%C0%AF`, a lone
//   `%FF`, a surrogate, a truncated sequence), a malformed escape, a `#` (a fragment is never
//   sent; frameworks that parse the target as a URL drop it): targets that different servers read
//   as different paths.
// The query is left as sent (only the path names a resource in routing).
//
// Reserved paths (the backend's push receiver `push.path`, the handoff hooks `handoff.path`) are
// then refused with 404, as if nothing were there, for any method, with or without a trailing
// slash, below them, and in every reading a forgiving server may make of the canonical path
// (forgiving() below: escapes decoded again, Unicode case folded, `;parameters`, trailing dots and
// white space dropped). Behind a per-tab prefix (`/r/{room}/...`, which roomgate strips before
// forwarding) roomgate's own paths are refused the same way: the reserved ones, `/_roomgate` and
// everything below it, `/healthz` and `/readyz`; they are roomgate's, never the app's.

/** What a target comes to: its canonical form, or roomgate's refusal. */
import { HEALTH_PATHS } from './health-answer.js';
import { clientRefusal, type ClientRefusalCode } from './refusals.js';

export type TargetVerdict = { readonly ok: true; readonly url: string } | { readonly ok: false; readonly status: 400 | 404; readonly body: string };

export interface TargetRuleOptions {
  /** Paths that only roomgate calls on a backend (push.path): never reachable from a client. */
  readonly reserved: readonly string[];
  /** The per-tab prefix stripped before forwarding (e.g. "/r/"), or null when that source is off. */
  readonly pathPrefix: string | null;
}

/** A target rule: canonical form, then the reserved-path check. */
export type TargetRule = (url: string) => TargetVerdict;

const NOT_FOUND: TargetVerdict = { ok: false, ...clientRefusal('reserved-path') };

function bad(code: Exclude<ClientRefusalCode, 'reserved-path'>): TargetVerdict {
  return { ok: false, status: 400, body: clientRefusal(code).body };
}

// RFC 3986 2.3: ALPHA / DIGIT / "-" / "." / "_" / "~".
function isUnreserved(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/**
 * True when the path needs no work: no escape, backslash, empty segment or dot segment. The
 * common case, answered by one scan without allocating.
 */
function isPlain(path: string): boolean {
  let prev = 0;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === 0x25 /* % */ || c === 0x5c /* \ */) return false;
    // "//" (empty segment) and "/." (a segment that may be "." or "..") need the full pass.
    if (prev === 0x2f && (c === 0x2f || c === 0x2e)) return false;
    prev = c;
  }
  return true;
}

/**
 * What an escaped byte may follow in UTF-8 (RFC 3629 4): after a lead byte, how many continuation
 * bytes it needs and the range of the first (which rules out overlong forms, surrogates and code
 * points above U+10FFFF); null for a byte that cannot start one (`%80`-`%C1`, `%F5`-`%FF`).
 */
function utf8Lead(byte: number): { readonly more: number; readonly lo: number; readonly hi: number } | null {
  if (byte >= 0xc2 && byte <= 0xdf) return { more: 1, lo: 0x80, hi: 0xbf };
  if (byte === 0xe0) return { more: 2, lo: 0xa0, hi: 0xbf };
  if (byte === 0xed) return { more: 2, lo: 0x80, hi: 0x9f };
  if (byte >= 0xe1 && byte <= 0xef) return { more: 2, lo: 0x80, hi: 0xbf };
  if (byte === 0xf0) return { more: 3, lo: 0x90, hi: 0xbf };
  if (byte === 0xf4) return { more: 3, lo: 0x80, hi: 0x8f };
  if (byte >= 0xf1 && byte <= 0xf3) return { more: 3, lo: 0x80, hi: 0xbf };
  return null;
}

type PathRefusal = 'path-backslash' | 'path-bad-escape' | 'path-encoded-slash' | 'path-encoded-control' | 'path-bad-utf8';

/** A byte no path may carry even escaped: a control byte, a space or DEL (a router may trim it, or match `$` before it). */
function isControlOrSpace(byte: number): boolean {
  return byte <= 0x20 || byte === 0x7f;
}

/** Decodes the unreserved escapes of a path; a string naming the refusal when it holds a forbidden one. */
function decodePath(path: string): { path: string } | { refusal: PathRefusal } {
  let out = '';
  let from = 0;
  // UTF-8 continuation bytes still owed by the last lead escape, and the range of the next one.
  let more = 0;
  let lo = 0x80;
  let hi = 0xbf;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === 0x5c) return { refusal: 'path-backslash' };
    if (c !== 0x25) {
      if (more > 0) return { refusal: 'path-bad-utf8' };
      continue;
    }
    const h = hexValue(path.charCodeAt(i + 1));
    const l = hexValue(path.charCodeAt(i + 2));
    if (h < 0 || l < 0) return { refusal: 'path-bad-escape' };
    const byte = h * 16 + l;
    if (more > 0) {
      if (byte < lo || byte > hi) return { refusal: 'path-bad-utf8' };
      more--;
      lo = 0x80;
      hi = 0xbf;
    } else if (byte >= 0x80) {
      const lead = utf8Lead(byte);
      if (lead === null) return { refusal: 'path-bad-utf8' };
      ({ more, lo, hi } = lead);
    }
    if (byte === 0x2f || byte === 0x5c) return { refusal: 'path-encoded-slash' };
    if (isControlOrSpace(byte)) return { refusal: 'path-encoded-control' };
    out += path.slice(from, i) + (isUnreserved(byte) ? String.fromCharCode(byte) : `%${path.slice(i + 1, i + 3).toUpperCase()}`);
    from = i + 3;
    i += 2;
  }
  if (more > 0) return { refusal: 'path-bad-utf8' };
  return { path: from === 0 ? path : out + path.slice(from) };
}

/** Merges repeated slashes and resolves "." and ".." segments; the path starts with "/". */
function resolveSegments(path: string): string {
  const parts = path.split('/');
  const out: string[] = [];
  // A path ending in "/", "/." or "/.." names a directory: it keeps its trailing slash.
  const last = parts[parts.length - 1];
  const trailing = last === '' || last === '.' || last === '..';
  for (let i = 1; i < parts.length; i++) {
    const s = parts[i] as string;
    if (s === '' || s === '.') continue;
    if (s === '..') out.pop();
    else out.push(s);
  }
  if (out.length === 0) return '/';
  return `/${out.join('/')}${trailing ? '/' : ''}`;
}

/** The canonical form of an origin-form target ("/path?query"), or a 400 refusal. */
export function canonicalTarget(url: string): TargetVerdict {
  if (url.includes('#')) return bad('target-fragment');
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  if (path.charCodeAt(0) !== 0x2f) return bad('target-not-path');
  if (isPlain(path)) return { ok: true, url };
  const decoded = decodePath(path);
  if ('refusal' in decoded) return bad(decoded.refusal);
  const canonical = resolveSegments(decoded.path);
  return { ok: true, url: q === -1 ? canonical : canonical + url.slice(q) };
}

/** Lower-cased, without one trailing slash: how a path is compared with a reserved one. */
function comparable(path: string): string {
  const lower = path.toLowerCase();
  return lower.length > 1 && lower.endsWith('/') ? lower.slice(0, -1) : lower;
}

/** How many rounds of percent-decoding the forgiving reading sees through (`%25252F` is three). */
const DECODE_ROUNDS = 4;

/** `%XX` escapes decoded once, at the byte level; a malformed one is left as it is. */
function percentDecoded(bytes: Buffer): Buffer {
  const out = Buffer.allocUnsafe(bytes.length);
  let n = 0;
  for (let i = 0; i < bytes.length; i++) {
    const h = bytes[i] === 0x25 ? hexValue(bytes[i + 1] ?? 0) : -1;
    const l = h < 0 ? -1 : hexValue(bytes[i + 2] ?? 0);
    if (l < 0) out[n++] = bytes[i] as number;
    else {
      out[n++] = h * 16 + l;
      i += 2;
    }
  }
  return out.subarray(0, n);
}

/** One segment as the forgiving servers read it: before its `;parameters` (Tomcat, Spring) and a NUL, without surrounding white space and control or format characters, and without trailing dots (IIS) unless it is a dot segment. */
function forgivingSegment(seg: string): string {
  const semi = seg.search(/[;\0]/);
  const trimmed = (semi === -1 ? seg : seg.slice(0, semi)).replace(/^[\s\p{Cc}\p{Cf}]+|[\s\p{Cc}\p{Cf}]+$/gu, '');
  return trimmed === '.' || trimmed === '..' ? trimmed : trimmed.replace(/\.+$/, '');
}

/**
 * The canonical path as the most forgiving servers read it: escapes decoded again (double
 * encoding: `%252F` is `/` to a server that decodes twice, `%3B` is `;`), as UTF-8, NFKC-normalised
 * and case-folded (`ſ` U+017F and `ｐ` U+FF50 are `s` and `p`, `／` U+FF0F is `/`), a backslash as
 * `/`, each segment as forgivingSegment() reads it, dot segments resolved again. Used only to
 * refuse, never forwarded: `/_roomgate/push;x`, `/_roomgate/push%3B`, `/_roomgate/pu%C5%BFh` and
 * `/_roomgate%252Fpush` are the reserved path too.
 */
function forgiving(path: string): string {
  let bytes: Buffer = Buffer.from(path, 'utf8');
  for (let round = 0; round < DECODE_ROUNDS && bytes.includes(0x25); round++) {
    const next = percentDecoded(bytes);
    if (next.length === bytes.length) break;
    bytes = next;
  }
  const text = bytes.toString('utf8').normalize('NFKC').toUpperCase().toLowerCase().replaceAll('\\', '/');
  return comparable(resolveSegments(`/${text.split('/').map(forgivingSegment).join('/')}`));
}

/** roomgate's own paths: never the app's from behind the per-tab prefix (its API and pages, the health checks). */
export const ROOMGATE_PATHS: readonly string[] = ['/_roomgate', ...HEALTH_PATHS];

/** True when `path` (compared form) is one of `paths` or below one. */
function under(path: string, paths: readonly string[]): boolean {
  for (const r of paths) if (path === r || path.startsWith(`${r}/`)) return true;
  return false;
}

/** A test that a path names the first segment of one of `paths` as a segment: none of them can be reached without one. */
function mentionOf(paths: readonly string[]): RegExp | null {
  const firsts = paths.map((r) => r.split('/')[1] ?? '');
  if (firsts.includes('')) return null;
  return new RegExp(`/(?:${firsts.map((f) => f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})(?:[/;.]|$)`, 'i');
}

export function createTargetRule(o: TargetRuleOptions): TargetRule {
  const reserved = o.reserved.map(comparable);
  const prefix = o.pathPrefix?.toLowerCase() ?? null;
  // Behind the per-tab prefix ("/r/{anything}/rest" is forwarded as "/rest" when {anything} is a
  // valid room key) the reserved paths and roomgate's own. Judged for any segment, valid key or
  // not: the cheaper and stricter reading.
  const behind = prefix === null ? [] : [...reserved, ...ROOMGATE_PATHS];
  // Every plain spelling of these paths holds its first segment as a segment: a path without one,
  // and without an escape or a non-ASCII character that a forgiving reading could turn into one,
  // is let through with two regular expression tests, no copy (the byte-level path asks for every
  // request).
  const mention = mentionOf([...reserved, ...behind]);
  const refused = (reading: string): boolean => {
    if (under(reading, reserved)) return true;
    if (prefix === null || !reading.startsWith(prefix)) return false;
    const slash = reading.indexOf('/', prefix.length);
    return slash !== -1 && under(reading.slice(slash), behind);
  };
  return (url) => {
    const verdict = canonicalTarget(url);
    if (!verdict.ok || behind.length + reserved.length === 0) return verdict;
    const q = verdict.url.indexOf('?');
    const path = q === -1 ? verdict.url : verdict.url.slice(0, q);
    if (mention !== null && !mention.test(path) && !/[%\u0080-\uffff]/.test(path)) return verdict;
    return refused(comparable(path)) || refused(forgiving(path)) ? NOT_FOUND : verdict;
  };
}
