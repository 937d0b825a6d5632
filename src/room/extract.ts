// Finds the room key of a request. Pure: no I/O and no clock reads (now is passed in), so every
// source, order and rejection is tested without sockets.
import type { KeySource } from '../config/schema.js';
import { getCookie } from './cookie.js';
import type { RoomSigner } from './signing.js';
import type { RoomValidator } from './validate.js';

export type RejectReason = 'invalid' | 'malformed' | 'bad-signature' | 'expired';
export interface RejectedKey {
  readonly source: KeySource;
  readonly reason: RejectReason;
}

export interface KeyRequest {
  /** Request target as received: path and query. */
  readonly url: string;
  readonly cookieHeader: string | undefined;
  /** Value of the configured room header, if any. */
  readonly roomHeader: string | string[] | undefined;
}

export interface KeyResult {
  /** The valid room key, or null when no source gave one. */
  readonly room: string | null;
  readonly source: KeySource | null;
  /** What the backend should see: the URL with a valid path prefix stripped, else the URL unchanged. */
  readonly forwardUrl: string;
  /** The stripped prefix (e.g. "/r/42"), sent on as X-Forwarded-Prefix; null when nothing was stripped. */
  readonly strippedPrefix: string | null;
  /** The room the request's cookie verified to (to avoid setting the same cookie again). */
  readonly cookieRoom: string | null;
  /** Candidates that were present but refused: counted and logged by the caller, never routed. */
  readonly rejected: readonly RejectedKey[];
}

export interface KeyExtractorOptions {
  sources: readonly KeySource[];
  validate: RoomValidator;
  queryParam: string;
  pathPrefix: string;
  pagePaths: readonly string[];
  cookieName: string;
  /** null: the cookie is a plain, unsigned room key (trusted networks only). */
  signer: RoomSigner | null;
}

export type KeyExtractor = (req: KeyRequest, nowMs: number) => KeyResult;

interface PagePath {
  readonly before: string;
  readonly after: string;
}

type Candidate = { ok: true; room: string } | { ok: false; reason: RejectReason } | null;

const NONE: readonly RejectedKey[] = Object.freeze([]);

function decode(s: string): string | null {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

export function createKeyExtractor(opts: KeyExtractorOptions): KeyExtractor {
  const { pathPrefix } = opts;
  const sources = [...opts.sources];
  const usesPrefix = sources.includes('path-prefix');
  const usesCookie = sources.includes('cookie');
  const { check, fromQuery, fromPagePath, fromCookie, fromHeader } = keyReaders(opts);

  return function extract(req, nowMs) {
    const url = req.url;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q + 1);

    // The path prefix is looked at first whatever the order: a valid prefix is always stripped,
    // because the app behind us never knows about it, even when another source wins.
    let prefixCandidate: Candidate = null;
    let forwardUrl = url;
    let strippedPrefix: string | null = null;
    if (usesPrefix && path.startsWith(pathPrefix)) {
      const rest = path.slice(pathPrefix.length);
      const slash = rest.indexOf('/');
      const segment = slash === -1 ? rest : rest.slice(0, slash);
      if (segment !== '') {
        const c = check(decode(segment));
        prefixCandidate = c;
        if (c !== null && c.ok) {
          strippedPrefix = path.slice(0, pathPrefix.length + segment.length);
          forwardUrl = (slash === -1 ? '/' : rest.slice(slash)) + (q === -1 ? '' : url.slice(q));
        }
      }
    }

    let rejected: RejectedKey[] | null = null;
    let room: string | null = null;
    let source: KeySource | null = null;
    for (const s of sources) {
      let c: Candidate;
      switch (s) {
        case 'path-prefix':
          c = prefixCandidate;
          break;
        case 'query':
          c = query === '' ? null : fromQuery(query);
          break;
        case 'page-path':
          c = fromPagePath(path);
          break;
        case 'cookie':
          c = fromCookie(req.cookieHeader, nowMs);
          break;
        case 'header':
          c = fromHeader(req.roomHeader);
          break;
      }
      if (c === null) continue;
      if (c.ok) {
        room = c.room;
        source = s;
        break;
      }
      (rejected ??= []).push({ source: s, reason: c.reason });
    }
    // The cookie's own room, to know whether a page response must set it again. Looked up
    // quietly: a bad cookie behind a winning source is not routed, so it is not a rejection.
    let cookieRoom: string | null = null;
    if (source === 'cookie') cookieRoom = room;
    else if (room !== null && usesCookie && req.cookieHeader !== undefined) {
      const c = fromCookie(req.cookieHeader, nowMs);
      if (c?.ok) cookieRoom = c.room;
    }
    return { room, source, forwardUrl, strippedPrefix, cookieRoom, rejected: rejected ?? NONE };
  };
}

interface KeyReaders {
  /** A decoded candidate (null: bad percent-encoding) through the validator. */
  readonly check: (raw: string | null) => Candidate;
  readonly fromQuery: (query: string) => Candidate;
  readonly fromPagePath: (path: string) => Candidate;
  readonly fromCookie: (header: string | undefined, nowMs: number) => Candidate;
  readonly fromHeader: (h: string | string[] | undefined) => Candidate;
}

/** One reader per source (the path prefix is the extractor's own: it also rewrites the URL); null: the source has no candidate. */
function keyReaders(opts: KeyExtractorOptions): KeyReaders {
  const { validate, queryParam, cookieName, signer } = opts;
  const pagePaths: PagePath[] = opts.pagePaths.map((p) => {
    const [before = '', after = ''] = p.split('{room}');
    return { before, after };
  });
  const queryNeedle = `${encodeURIComponent(queryParam)}=`;

  function check(raw: string | null): Candidate {
    if (raw === null) return { ok: false, reason: 'malformed' };
    return validate(raw) ? { ok: true, room: raw } : { ok: false, reason: 'invalid' };
  }

  function fromQuery(query: string): Candidate {
    if (!query.includes(queryNeedle)) return null;
    for (const part of query.split('&')) {
      if (part.startsWith(queryNeedle)) return check(decode(part.slice(queryNeedle.length).replace(/\+/g, ' ')));
    }
    return null;
  }

  function fromPagePath(path: string): Candidate {
    for (const p of pagePaths) {
      if (!path.startsWith(p.before)) continue;
      // {room} is always one whole path segment (the schema enforces it).
      const rest = path.slice(p.before.length);
      const slash = rest.indexOf('/');
      const end = slash === -1 ? rest.length : slash;
      if (end === 0 || !rest.startsWith(p.after, end)) continue;
      return check(decode(rest.slice(0, end)));
    }
    return null;
  }

  function fromCookie(header: string | undefined, nowMs: number): Candidate {
    const value = getCookie(header, cookieName);
    if (value === undefined || value === '') return null;
    if (signer === null) return check(decode(value));
    const v = signer.verify(value, nowMs);
    return v.ok ? check(v.room) : { ok: false, reason: v.reason };
  }

  function fromHeader(h: string | string[] | undefined): Candidate {
    const v = Array.isArray(h) ? h[0] : h;
    if (v === undefined || v === '') return null;
    return check(v.trim());
  }

  return { check, fromQuery, fromPagePath, fromCookie, fromHeader };
}
