// Which requests the page cache may answer, what of them reaches the backend on a fill, and the
// key they are stored under. Pure: no I/O, no clock; both page paths call it with what they read
// of a head (node:http's rawHeaders, or the byte-level reader's, which has the same shape).
import type { Config } from '../config/schema.js';

export type CacheConfig = Config['cache'];

/** Why a request is not for the cache; the `detail` of its Cache-Status. */
export type BypassReason = 'method' | 'body' | 'path' | 'authorization' | 'session-cookie';

/** What the cache needs of a request head. */
export interface CacheHead {
  readonly method: string;
  /** The target as the client sent it (origin form, in the canonical form of src/http/target.ts). */
  readonly url: string;
  /**
   * The target the backend gets (the per-tab prefix stripped): path rules are judged on it, so
   * `/r/{room}/admin/` is `/admin/` here as it is for the app.
   */
  readonly forwardUrl?: string;
  /** [name, value, ...] as sent. */
  readonly rawHeaders: readonly string[];
  /**
   * The request has a body by its path's reading even where rawHeaders do not say so (an h2
   * request with DATA frames and no content-length is one).
   */
  readonly hasBody?: boolean;
}

/** A name list where "name*" matches every name with that prefix. */
class NameSet {
  private readonly exact = new Set<string>();
  private readonly prefixes: string[] = [];

  constructor(names: readonly string[]) {
    for (const n of names) {
      if (n.endsWith('*')) this.prefixes.push(n.slice(0, -1));
      else this.exact.add(n);
    }
  }

  has(name: string): boolean {
    return this.exact.has(name) || this.prefixes.some((p) => name.startsWith(p));
  }
}

/** Path rules: prefixes, or "~" and a regular expression on the path (without the query). */
class PathSet {
  private readonly prefixes: string[] = [];
  private readonly patterns: RegExp[] = [];

  constructor(paths: readonly string[]) {
    for (const p of paths) {
      if (p.startsWith('~')) this.patterns.push(new RegExp(p.slice(1)));
      else this.prefixes.push(p);
    }
  }

  get empty(): boolean {
    return this.prefixes.length === 0 && this.patterns.length === 0;
  }

  matches(path: string): boolean {
    return this.prefixes.some((p) => path.startsWith(p)) || this.patterns.some((re) => re.test(path));
  }
}

/** One cookie of a Cookie header. */
interface Crumb {
  readonly name: string;
  readonly text: string;
}

function crumbs(rawHeaders: readonly string[]): Crumb[] {
  const out: Crumb[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (!isName(rawHeaders[i] as string, 'cookie')) continue;
    for (const part of (rawHeaders[i + 1] as string).split(';')) {
      const text = part.trim();
      if (text === '') continue;
      const eq = text.indexOf('=');
      out.push({ name: (eq === -1 ? text : text.slice(0, eq)).trim(), text });
    }
  }
  return out;
}

// Request fields never sent on a fill: the fill is one GET for everybody, unconditional and
// whole (the cache adds its own validators when it refreshes), and carries only the cookies kept.
const NOT_ON_FILLS = new Set(['cookie', 'range', 'if-range', 'if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since', 'authorization']);

export class CacheRules {
  private readonly paths: PathSet;
  private readonly bypassPaths: PathSet;
  private readonly bypassCookies: NameSet;
  private readonly cookieNames: NameSet;

  constructor(
    private readonly c: CacheConfig,
    /** The room cookie's name: never forwarded on a fill nor part of a key. */
    private readonly roomCookie: string,
  ) {
    this.paths = new PathSet(c.paths);
    this.bypassPaths = new PathSet(c.bypassPaths);
    this.bypassCookies = new NameSet(c.bypassCookies);
    this.cookieNames = new NameSet(c.cookies);
  }

  get enabled(): boolean {
    return !this.paths.empty;
  }

  /** null: the cache may answer this request; else why not. */
  bypass(h: CacheHead): BypassReason | null {
    const c = this.classify(h);
    return 'bypass' in c ? c.bypass : null;
  }

  /**
   * Why the cache may not answer the request, or the cookies a fetch keeps: one pass over the
   * cookies. `forwardUrl`: the head's own unless given (the page cache gives its request's).
   */
  classify(h: CacheHead, forwardUrl = h.forwardUrl): { readonly bypass: BypassReason } | { readonly kept: string } {
    const why = this.headBypass(h, forwardUrl ?? h.url);
    if (why !== null) return { bypass: why };
    const all = crumbs(h.rawHeaders);
    for (const c of all) if (this.bypassCookies.has(c.name)) return { bypass: 'session-cookie' };
    return { kept: this.keep(all) };
  }

  private headBypass(h: CacheHead, forwardUrl: string): BypassReason | null {
    if (h.method !== 'GET' && h.method !== 'HEAD') return 'method';
    if (h.hasBody === true) return 'body';
    const path = pathOf(forwardUrl);
    if (!this.paths.matches(path) || this.bypassPaths.matches(path)) return 'path';
    for (let i = 0; i < h.rawHeaders.length; i += 2) {
      const raw = h.rawHeaders[i] as string;
      // Only names of these lengths can be one of the three (most fields are not lower-cased at all).
      if (raw.length !== 13 && raw.length !== 14 && raw.length !== 17) continue;
      const name = raw.toLowerCase();
      if (name === 'authorization') return 'authorization';
      // A GET with a body is forwarded with its body as any request is; the cache's fetch has none.
      if (name === 'content-length' || name === 'transfer-encoding') return 'body';
    }
    return null;
  }

  /** The cookies a fill forwards (and the key includes), as one Cookie value; '' when none. */
  keptCookies(rawHeaders: readonly string[]): string {
    return this.keep(crumbs(rawHeaders));
  }

  private keep(all: readonly Crumb[]): string {
    if (all.length === 0) return '';
    const keep = all.filter((c) => c.name !== this.roomCookie && this.cookieNames.has(c.name) === (this.c.cookiesMode === 'allow'));
    return keep
      .map((c) => c.text)
      .sort()
      .join('; ');
  }

  /** The request head of a fill, from the forwarded headers of the request that started it. */
  fillHeaders(forwarded: readonly string[], keptCookies: string): string[] {
    const out: string[] = [];
    for (let i = 0; i + 1 < forwarded.length; i += 2) {
      if (!NOT_ON_FILLS.has((forwarded[i] as string).toLowerCase())) out.push(forwarded[i] as string, forwarded[i + 1] as string);
    }
    if (keptCookies !== '') out.push('Cookie', keptCookies);
    return out;
  }
}

/** A field name as sent is `lower` (compared without case; the length first, so most are not lower-cased). */
function isName(name: string, lower: string): boolean {
  return name.length === lower.length && name.toLowerCase() === lower;
}

export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/**
 * The primary key of a stored answer (`origin`: scheme and Host, e.g. "https://example.com"):
 * what a purge by URL, prefix or room matches on. The URL
 * comes first so that a prefix purge is a string prefix; NUL cannot occur in a URL, a host, a
 * room key or a cookie header that reached here.
 */
export function primaryKey(url: string, origin: string, room: string | null, keptCookies: string): string {
  return `${url}\u0000${origin}\u0000${room ?? ''}\u0000${keptCookies}`;
}

export interface KeyParts {
  readonly url: string;
  readonly origin: string;
  readonly room: string;
}

export function keyParts(key: string): KeyParts {
  const [url = '', origin = '', room = ''] = key.split('\u0000');
  return { url, origin, room };
}

/** The value of one header in a rawHeaders list (several lines joined with ", "), or undefined. */
export function rawHeader(rawHeaders: readonly string[], lower: string): string | undefined {
  let out: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (isName(rawHeaders[i] as string, lower)) out = out === undefined ? (rawHeaders[i + 1] as string) : `${out}, ${rawHeaders[i + 1] as string}`;
  }
  return out;
}

/** rawHeaders as the lower-cased record http-cache-semantics reads. */
export function headerRecord(rawHeaders: readonly string[]): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    const value = rawHeaders[i + 1] as string;
    // Set-Cookie lines are kept apart by "\n" (only their presence matters here).
    out[name] = out[name] === undefined ? value : `${out[name]}${name === 'set-cookie' ? '\n' : ', '}${value}`;
  }
  return out;
}
