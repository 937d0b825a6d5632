// The stored answers of the page cache: what may be stored (RFC 9111 for a shared cache, by
// http-cache-semantics, plus roomgate's own stricter rules), for how long it is fresh and how long
// it may still be served stale, and the byte-bounded LRU (lru-cache with maxSize) that holds them,
// one slot per variant (the request fields the answer's Vary names). The clock is injected, so
// freshness and grace boundaries are tested without waiting.
import CachePolicy from 'http-cache-semantics';
import { LRUCache } from 'lru-cache';
import { rawNames, repeatedSingleField } from '../http/response-rules.js';
import { keyParts, type CacheConfig } from './request-rules.js';
import type { WireAnswer } from './wire-answer.js';

/** Statuses stored: those a page cache is useful for (RFC 9110 15.1's heuristically cacheable ones a page returns). */
const STORED_STATUSES = new Set([200, 203, 301, 404, 410]);

/** A policy whose clock is the cache's (http-cache-semantics reads `this.now()` for ages). */
export type Policy = CachePolicy;
export type PolicyClass = new (req: CachePolicy.Request, res: CachePolicy.Response, options?: CachePolicy.Options) => CachePolicy;

export function policyClass(now: () => number): PolicyClass {
  return class ClockedPolicy extends CachePolicy {
    now(): number {
      return now();
    }
  };
}

/** A request as the policy sees it: always a GET (a HEAD is answered from the GET's answer). */
export function policyRequest(url: string, host: string, headers: Record<string, string>): CachePolicy.Request {
  return { url, method: 'GET', headers: { ...headers, host } };
}

export interface StoredAnswer {
  readonly status: number;
  readonly reason: string;
  /** End-to-end fields as the backend sent them, without framing (Content-Length, Transfer-Encoding) and Age. */
  headers: string[];
  /** The body (a view into `wire`'s memory: stored once). */
  readonly body: Buffer;
  /** The HTTP/1.1 head of what does not vary per request, made when stored, and the body (src/cache/wire-answer.ts). */
  readonly wire: WireAnswer;
  policy: Policy;
  /** Clock times (ms): fresh before freshUntil; may be served stale while revalidating before swrUntil, on a backend error before sieUntil. */
  freshUntil: number;
  swrUntil: number;
  sieUntil: number;
  /** When the answer was received (for Age). */
  receivedAt: number;
  /** Age the answer already had when it arrived (its Age field), in seconds. */
  readonly initialAge: number;
  readonly size: number;
  /** A refresh of this answer is in flight (at most one). */
  refreshing: boolean;
  /** The last refresh failed with this status (the backend's 5xx, or roomgate's 502/503/504); null: it did not. */
  failedStatus: number | null;
}

/**
 * Why an answer is not stored; null when it is. The `detail` of its Cache-Status. `fields`: the
 * answer's end-to-end fields as received ([name, value, ...]), `resHeaders` the same by name.
 */
export function unstorable(policy: Policy, status: number, fields: readonly string[], resHeaders: Record<string, string>, c: CacheConfig, bodyBytes: number | null): string | null {
  if (!STORED_STATUSES.has(status)) return 'status';
  // A field meant once, twice (two ETags): relayed to an HTTP/1.1 client as sent, but no copy for
  // everybody: which value would it validate with, and an h2 client could not be given it at all
  // (src/http/response-rules.ts).
  if (repeatedSingleField(rawNames(fields)) !== null) return 'field-twice';
  if (resHeaders['set-cookie'] !== undefined) return 'set-cookie';
  if (!policy.storable()) return 'not-storable';
  const cc = directives(resHeaders['cache-control']);
  if (cc.has('no-cache')) return 'no-cache';
  if ((resHeaders.vary ?? '').split(',').some((v) => v.trim() === '*')) return 'vary-star';
  if (!explicitFreshness(cc, resHeaders) && c.defaultTtlMs === 0) return 'no-freshness';
  if (bodyBytes !== null && bodyBytes > c.maxObjectBytes) return 'too-large';
  return null;
}

/** The directives of a Cache-Control value: name -> argument ('' when none). */
export function directives(value: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (value === undefined) return out;
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    out.set(name, eq === -1 ? '' : part.slice(eq + 1).trim().replace(/^"|"$/g, ''));
  }
  return out;
}

function explicitFreshness(cc: Map<string, string>, h: Record<string, string>): boolean {
  return cc.has('s-maxage') || cc.has('max-age') || h.expires !== undefined;
}

const seconds = (v: string | undefined): number => {
  const n = v === undefined ? NaN : Number.parseInt(v, 10);
  return Number.isFinite(n) && n > 0 ? n : 0;
};

/** The freshness and stale windows of an answer just received (clock time `now`). */
export function lifetimes(policy: Policy, resHeaders: Record<string, string>, c: CacheConfig, now: number): Pick<StoredAnswer, 'freshUntil' | 'swrUntil' | 'sieUntil'> {
  const cc = directives(resHeaders['cache-control']);
  const freshMs = explicitFreshness(cc, resHeaders) ? Math.max(0, (policy.maxAge() - policy.age()) * 1000) : c.defaultTtlMs;
  const freshUntil = now + freshMs;
  // RFC 9111 5.2.2.2/5.2.2.8: such an answer is never used stale.
  if (cc.has('must-revalidate') || cc.has('proxy-revalidate') || cc.has('no-cache')) return { freshUntil, swrUntil: freshUntil, sieUntil: freshUntil };
  return {
    freshUntil,
    swrUntil: freshUntil + Math.max(c.graceMs, seconds(cc.get('stale-while-revalidate')) * 1000),
    sieUntil: freshUntil + Math.max(c.graceMs, seconds(cc.get('stale-if-error')) * 1000),
  };
}

/** The request fields an answer's Vary names (lower case, sorted), or [] for none. */
export function varyNames(resHeaders: Record<string, string>): string[] {
  const v = resHeaders.vary;
  if (v === undefined) return [];
  return [...new Set(v.split(',').map((s) => s.trim().toLowerCase()).filter((s) => s !== ''))].sort();
}

/** A request's fields (lower-case names), or a function that makes them when first needed. */
export type RequestFields = Record<string, string> | (() => Record<string, string>);

/** The variant of a request: the values of the Vary'd fields (RFC 9111 4.1, whitespace-normalised). */
export function variantOf(names: readonly string[], fields: RequestFields): string {
  if (names.length === 0) return '';
  const reqHeaders = typeof fields === 'function' ? fields() : fields;
  return names.map((n) => `${n}=${(reqHeaders[n] ?? '').replace(/[ \t]+/g, ' ').trim()}`).join('\u0001');
}

export interface StoreStats {
  readonly objects: number;
  readonly bytes: number;
  readonly maxBytes: number;
}

/** Heads are small but not free: each stored answer counts its header bytes and this much more. */
const ENTRY_OVERHEAD = 256;

export class StoredAnswers {
  private readonly lru: LRUCache<string, StoredAnswer>;
  /** Per primary key: the Vary'd names of its newest answer, and how many variants are stored. */
  private readonly vary = new Map<string, { names: string[]; count: number }>();

  constructor(
    maxBytes: number,
    private readonly onEvict: () => void,
  ) {
    this.lru = new LRUCache<string, StoredAnswer>({
      maxSize: maxBytes,
      // The slot's key is held twice (the LRU's slot, and the primary key of the Vary map).
      sizeCalculation: (a, slot) => Math.max(1, a.size + 2 * slot.length),
      // A replaced answer is not a removal: dispose() then means the slot is gone.
      noDisposeOnSet: true,
      dispose: (_a, slot, reason) => {
        this.forget(slot);
        if (reason === 'evict') this.onEvict();
      },
    });
  }

  /** What an answer holds: its fields as strings, and its wire head and body (one Buffer). */
  static sizeOf(headers: readonly string[], wire: WireAnswer): number {
    let n = ENTRY_OVERHEAD + wire.head.length + wire.body.length;
    for (const h of headers) n += h.length;
    return n;
  }

  /**
   * The variant slot a request maps to under `primary`, and whether the key has any answer at all.
   * `reqHeaders` may be given as a function: it is called only when the key has a Vary.
   */
  find(primary: string, reqHeaders: RequestFields): { answer: StoredAnswer | undefined; known: boolean } {
    const v = this.vary.get(primary);
    if (v === undefined) return { answer: undefined, known: false };
    return { answer: this.lru.get(slotOf(primary, variantOf(v.names, reqHeaders))), known: true };
  }

  /** Stores (or replaces) the answer for the request's variant; false when it does not fit at all. */
  put(primary: string, reqHeaders: Record<string, string>, resHeaders: Record<string, string>, answer: StoredAnswer): boolean {
    const names = varyNames(resHeaders);
    const slot = slotOf(primary, variantOf(names, reqHeaders));
    const v = this.vary.get(primary);
    // The answer's Vary is the key's Vary from now on: variants stored under other names are dropped.
    if (v !== undefined && v.names.join(',') !== names.join(',')) this.drop(primary);
    const had = this.lru.has(slot);
    this.lru.set(slot, answer);
    if (!this.lru.has(slot)) return false; // larger than the whole budget
    const cur = this.vary.get(primary);
    if (cur === undefined) this.vary.set(primary, { names, count: 1 });
    else if (!had) cur.count++;
    return true;
  }

  /** Removes one stored answer (e.g. found past its last useful moment). */
  delete(primary: string, reqHeaders: RequestFields): void {
    const v = this.vary.get(primary);
    if (v !== undefined) this.lru.delete(slotOf(primary, variantOf(v.names, reqHeaders)));
  }

  /** Removes every answer whose key matches; returns how many. */
  purge(match: (url: string, room: string) => boolean): number {
    const doomed = new Set<string>();
    for (const primary of this.vary.keys()) {
      const { url, room } = keyParts(primary);
      if (match(url, room)) doomed.add(primary);
    }
    let n = 0;
    for (const slot of [...this.lru.keys()]) {
      if (doomed.has(primaryOf(slot)) && this.lru.delete(slot)) n++;
    }
    return n;
  }

  clear(): void {
    this.lru.clear();
    this.vary.clear();
  }

  stats(maxBytes: number): StoreStats {
    return { objects: this.lru.size, bytes: this.lru.calculatedSize, maxBytes };
  }

  private drop(primary: string): void {
    for (const slot of [...this.lru.keys()]) if (primaryOf(slot) === primary) this.lru.delete(slot);
    this.vary.delete(primary);
  }

  /** A slot left the LRU (evicted, deleted, replaced): its key's variant count follows. */
  private forget(slot: string): void {
    const primary = primaryOf(slot);
    const v = this.vary.get(primary);
    if (v === undefined) return;
    v.count--;
    if (v.count <= 0) this.vary.delete(primary);
  }
}

// "\u0002" separates the primary key from the variant: neither contains it.
const slotOf = (primary: string, variant: string): string => `${primary}\u0002${variant}`;
const primaryOf = (slot: string): string => slot.slice(0, slot.lastIndexOf('\u0002'));
