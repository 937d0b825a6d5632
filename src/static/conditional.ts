// Validators and conditional requests (RFC 9110 section 13): the ETag and Last-Modified of a file,
// and what If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since make of a GET/HEAD.
// Pure functions of header values and file facts.

/**
 * A strong ETag from size and modification time (no content hashing: every gateway serving the
 * same files with the same mtimes agrees), with the content coding appended so the brotli, gzip
 * and identity bodies of one file never share a validator (a range of one is not a range of another).
 */
export function etagOf(size: number, mtimeMs: number, encoding: string | null): string {
  const base = `${size.toString(16)}-${Math.floor(mtimeMs).toString(16)}`;
  return encoding ? `"${base}-${encoding}"` : `"${base}"`;
}

/** HTTP dates have whole seconds; comparisons use the file's mtime truncated the same way. */
export function mtimeSeconds(mtimeMs: number): number {
  return Math.floor(mtimeMs / 1000);
}

export function httpDate(mtimeMs: number): string {
  return new Date(mtimeSeconds(mtimeMs) * 1000).toUTCString();
}

/** Seconds since the epoch of an HTTP date, or null when it is not one (then it is ignored). */
export function parseHttpDate(value: string | undefined): number | null {
  if (value === undefined || value.length > 64) return null;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : null;
}

/** The entity tags of an If-Match / If-None-Match list; "*" is returned as the single entry "*". */
export function parseEtagList(value: string): string[] {
  const trimmed = value.trim();
  if (trimmed === '*') return ['*'];
  const tags: string[] = [];
  const re = /\s*(W\/)?("[^"]*")\s*(?:,|$)/gy;
  let m: RegExpExecArray | null;
  while (re.lastIndex < value.length && (m = re.exec(value)) !== null) tags.push(`${m[1] ?? ''}${m[2]}`);
  return tags;
}

function opaque(tag: string): string {
  return tag.startsWith('W/') ? tag.slice(2) : tag;
}

/** Weak comparison: the opaque tags are equal, W/ or not (If-None-Match). */
export function weakMatch(a: string, b: string): boolean {
  return opaque(a) === opaque(b);
}

/** Strong comparison: both strong and equal (If-Match, If-Range). */
export function strongMatch(a: string, b: string): boolean {
  return !a.startsWith('W/') && !b.startsWith('W/') && a === b;
}

export interface ConditionalHeaders {
  readonly ifMatch?: string | undefined;
  readonly ifUnmodifiedSince?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  readonly ifModifiedSince?: string | undefined;
}

/**
 * The precondition outcome for a GET or HEAD of a representation with this ETag and mtime:
 * 412 (If-Match / If-Unmodified-Since failed), 304 (not modified), or null: send it.
 * Evaluation order and precedence as in RFC 9110 section 13.2.2.
 */
export function evaluatePreconditions(h: ConditionalHeaders, etag: string, mtimeMs: number): 304 | 412 | null {
  const modified = mtimeSeconds(mtimeMs);
  if (h.ifMatch !== undefined) {
    const tags = parseEtagList(h.ifMatch);
    if (!(tags[0] === '*' || tags.some((t) => strongMatch(t, etag)))) return 412;
  } else {
    const since = parseHttpDate(h.ifUnmodifiedSince);
    if (since !== null && modified > since) return 412;
  }
  if (h.ifNoneMatch !== undefined) {
    const tags = parseEtagList(h.ifNoneMatch);
    if (tags[0] === '*' || tags.some((t) => weakMatch(t, etag))) return 304;
    return null; // If-Modified-Since is ignored when If-None-Match is present
  }
  const since = parseHttpDate(h.ifModifiedSince);
  if (since !== null && modified <= since) return 304;
  return null;
}

/**
 * If-Range: a Range applies only if the validator still matches (a strong ETag, or exactly the
 * Last-Modified date); otherwise the whole current representation is sent. Absent: it applies.
 */
export function ifRangeHolds(ifRange: string | undefined, etag: string, mtimeMs: number): boolean {
  if (ifRange === undefined) return true;
  const v = ifRange.trim();
  if (v.startsWith('"') || v.startsWith('W/')) return strongMatch(v, etag);
  const date = parseHttpDate(v);
  return date !== null && date === mtimeSeconds(mtimeMs);
}

/**
 * Cache-Control for a file: a content-hashed name never changes meaning, so it is cached for a
 * year and marked immutable; any other name for maxAgeS seconds (0: revalidate every time).
 */
export function cacheControl(hashed: boolean, maxAgeS: number): string {
  if (hashed) return 'public, max-age=31536000, immutable';
  return maxAgeS > 0 ? `public, max-age=${maxAgeS}` : 'no-cache';
}
