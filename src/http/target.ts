// The one canonical form of a request target, and the paths no client may reach through roomgate.
//
// Servers disagree on what a target names: one decodes `%2F` into a path separator and another
// does not, one reads `\` as `/`, one resolves `/a/../b` and another passes it on. A rule judged on
// one reading and a backend acting on another is how reserved paths leak. So every front brings a
// target to one form before anything reads it, and that form is what the backend receives:
// - unreserved characters percent-decoded (`%61` -> `a`, RFC 3986 2.3), other escapes upper-cased;
// - repeated slashes merged, dot segments resolved (RFC 3986 5.2.4; never above the root);
// - refused (400): an encoded `/` or `\` (`%2F`, `%5C`), a backslash, an encoded NUL (`%00`), a
//   malformed escape, a `#` (a fragment is never sent; frameworks that parse the target as a URL
//   drop it): targets that different servers read as different paths.
// The query is left as sent (only the path names a resource in routing).
//
// Reserved paths (the backend's push receiver, `push.path`) are then refused with 404, as if
// nothing were there, for any method, with or without a trailing slash, below them, in any letter
// case, and behind a per-tab prefix (`/r/{room}/...`, which roomgate strips before forwarding).

/** What a target comes to: its canonical form, or roomgate's refusal. */
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

/** Decodes the unreserved escapes of a path; a string naming the refusal when it holds a forbidden one. */
function decodePath(path: string): { path: string } | { refusal: 'path-backslash' | 'path-bad-escape' | 'path-encoded-slash' | 'path-encoded-nul' } {
  let out = '';
  let from = 0;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === 0x5c) return { refusal: 'path-backslash' };
    if (c !== 0x25) continue;
    const hi = hexValue(path.charCodeAt(i + 1));
    const lo = hexValue(path.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) return { refusal: 'path-bad-escape' };
    const byte = hi * 16 + lo;
    if (byte === 0x2f || byte === 0x5c) return { refusal: 'path-encoded-slash' };
    if (byte === 0) return { refusal: 'path-encoded-nul' };
    out += path.slice(from, i) + (isUnreserved(byte) ? String.fromCharCode(byte) : `%${path.slice(i + 1, i + 3).toUpperCase()}`);
    from = i + 3;
    i += 2;
  }
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

/**
 * The path as the most forgiving servers read it: each segment without its `;parameters` (Tomcat,
 * Spring) and without trailing dots (IIS), so `/_roomgate/push;x` and `/_roomgate/push.` are the
 * reserved path too. Used only to refuse, never forwarded.
 */
function loose(path: string): string {
  return comparable(
    path
      .split('/')
      .map((seg) => {
        const semi = seg.indexOf(';');
        return (semi === -1 ? seg : seg.slice(0, semi)).replace(/\.+$/, '');
      })
      .join('/'),
  );
}

export function createTargetRule(o: TargetRuleOptions): TargetRule {
  const reserved = o.reserved.map(comparable);
  const prefix = o.pathPrefix?.toLowerCase() ?? null;
  // Every spelling of a reserved path (exact, loose, behind the prefix) holds its first segment as
  // a segment: a path without one is let through with one regular expression test, no copy (the
  // byte-level path asks for every request).
  const firsts = reserved.map((r) => r.split('/')[1] ?? '');
  const mention = firsts.includes('') ? null : new RegExp(`/(?:${firsts.map((f) => f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})(?:[/;.]|$)`, 'i');
  const isReserved = (exact: string): boolean => {
    for (const path of exact.includes(';') || exact.includes('.') ? [exact, loose(exact)] : [exact]) {
      for (const r of reserved) if (path === r || path.startsWith(`${r}/`)) return true;
    }
    return false;
  };
  return (url) => {
    const verdict = canonicalTarget(url);
    if (!verdict.ok || reserved.length === 0) return verdict;
    const q = verdict.url.indexOf('?');
    if (mention !== null && !mention.test(verdict.url)) return verdict;
    const path = comparable(q === -1 ? verdict.url : verdict.url.slice(0, q));
    if (isReserved(path)) return NOT_FOUND;
    // Behind the per-tab prefix: "/r/{anything}/rest" is forwarded as "/rest" when {anything} is a
    // valid room key. Judged for any segment, valid key or not: the cheaper and stricter reading.
    if (prefix !== null && path.startsWith(prefix)) {
      const slash = path.indexOf('/', prefix.length);
      if (slash !== -1 && isReserved(path.slice(slash))) return NOT_FOUND;
    }
    return verdict;
  };
}
