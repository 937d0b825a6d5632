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
  /**
   * Why the request's room pin (the `pin` source) was refused, or null (none, or a good one).
   * Unlike every other source a bad pin is not passed over: the pipeline refuses the request
   * (400 malformed or invalid, 403 forged or expired), since the page that sent it meant that room.
   */
  readonly pinRefused: RejectReason | null;
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
  /** The query parameter of the `pin` source. */
  pinParam: string;
  /** Verifies pins (src/room/signing.ts createPinSigner); null: no secret to check one with, so every pin is refused. */
  pinSigner: RoomSigner | null;
}

export type KeyExtractor = (req: KeyRequest, nowMs: number) => KeyResult;

interface PagePath {
  readonly before: string;
  readonly after: string;
}

/** A source's candidate key, good or refused. */
type Found = { ok: true; room: string } | { ok: false; reason: RejectReason };
/** null: the source has no candidate. */
type Candidate = Found | null;

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
  const usesPin = sources.includes('pin');
  const usesCookie = sources.includes('cookie');
  const pinNeedle = `${opts.pinParam}=`;
  const { check, fromQuery, fromPagePath, fromCookie, fromHeader, fromPin } = keyReaders(opts);

  return function extract(req, nowMs) {
    const url = req.url;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q + 1);

    // The path prefix is looked at first whatever the order: a valid prefix is always stripped,
    // because the app behind us never knows about it, even when another source wins.
    let prefixCandidate: Candidate = null;
    let forwardPath = path;
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
          forwardPath = slash === -1 ? '/' : rest.slice(slash);
        }
      }
    }
    // The pin too: it is roomgate's, never the app's (always removed), and a bad one is refused
    // wherever the pin stands in the order, so it is checked even when an earlier source wins.
    const pin = usesPin && query.includes(pinNeedle) ? splitPin(query, pinNeedle) : null;
    const pinCandidate = pin === null ? null : fromPin(pin.value, nowMs);
    const forwardQuery = pin === null ? (q === -1 ? '' : url.slice(q)) : pin.rest === '' ? '' : `?${pin.rest}`;
    const forwardUrl = forwardPath === path && pin === null ? url : forwardPath + forwardQuery;

    let rejected: RejectedKey[] | null = null;
    let room: string | null = null;
    let source: KeySource | null = null;
    const pinRefused = pinCandidate !== null && !pinCandidate.ok ? pinCandidate.reason : null;
    if (pinRefused !== null) rejected = [{ source: 'pin', reason: pinRefused }];
    for (const s of pinRefused === null ? sources : []) {
      let c: Candidate;
      switch (s) {
        case 'pin':
          c = pinCandidate;
          break;
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
    return { room, source, forwardUrl, strippedPrefix, cookieRoom, rejected: rejected ?? NONE, pinRefused };
  };
}

/** The pin parameters of a query: the first one's raw value, and the query without any of them; null when there is none. */
function splitPin(query: string, needle: string): { readonly value: string; readonly rest: string } | null {
  let value: string | null = null;
  const kept: string[] = [];
  for (const part of query.split('&')) {
    if (part.startsWith(needle)) value ??= part.slice(needle.length);
    else kept.push(part);
  }
  return value === null ? null : { value, rest: kept.join('&') };
}

interface KeyReaders {
  /** A decoded candidate (null: bad percent-encoding) through the validator. */
  readonly check: (raw: string | null) => Found;
  readonly fromQuery: (query: string) => Candidate;
  readonly fromPagePath: (path: string) => Candidate;
  readonly fromCookie: (header: string | undefined, nowMs: number) => Candidate;
  readonly fromHeader: (h: string | string[] | undefined) => Candidate;
  /** A present pin's raw query value: never null (a present pin is a candidate, good or bad). */
  readonly fromPin: (raw: string, nowMs: number) => Found;
}

/** One reader per source (the path prefix is the extractor's own: it also rewrites the URL); null: the source has no candidate. */
function keyReaders(opts: KeyExtractorOptions): KeyReaders {
  const { validate, queryParam, cookieName, signer, pinSigner } = opts;
  const pagePaths: PagePath[] = opts.pagePaths.map((p) => {
    const [before = '', after = ''] = p.split('{room}');
    return { before, after };
  });
  const queryNeedle = `${encodeURIComponent(queryParam)}=`;

  function check(raw: string | null): Found {
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

  function fromPin(raw: string, nowMs: number): Found {
    const value = decode(raw);
    if (value === null || value === '') return { ok: false, reason: 'malformed' };
    if (pinSigner === null) return { ok: false, reason: 'bad-signature' };
    const v = pinSigner.verify(value, nowMs);
    // A signed room the pattern refuses is refused like any bad pin (400, as a malformed one).
    return v.ok ? check(v.room) : { ok: false, reason: v.reason };
  }

  return { check, fromQuery, fromPagePath, fromCookie, fromHeader, fromPin };
}
