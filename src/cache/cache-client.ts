// One client's answer from the page cache: what it asked, how it is answered (the writer of its
// page path), and the accounting every answer gets once, at its end (outcome counter, latency
// histogram, roomgate_http_requests_total under backend="cache").
import { REFUSALS, type Refusal } from '../http/refusals.js';
import type { Metrics } from '../observability/metrics.js';
import type { AnswerWriter } from './contract.js';
import type { CacheOutcome } from './cache-metrics.js';
import type { StoredAnswer } from './stored-answers.js';

export interface CacheClientRequest {
  readonly method: string;
  readonly rawHeaders: readonly string[];
  /** The room cookie this answer sets, or null. */
  setCookie(): string | null;
}

export class CacheClient {
  private settled = false;
  /**
   * The backend's own answer to this client's fetch was relayed: the fetch is counted under its
   * backend in roomgate_http_requests_total, so the answer is not counted again under "cache".
   */
  relayedOwnFetch = false;

  constructor(
    readonly req: CacheClientRequest,
    readonly w: AnswerWriter,
    /** The request's fields as the cache compares them (lower case; the kept cookies only), made when first asked. */
    readonly fields: () => Record<string, string>,
    private readonly t0: number,
    private readonly metrics: Metrics,
    /** Counts an answer by outcome with its time. */
    private readonly record: (outcome: CacheOutcome, seconds: number) => void,
    /** Sends the request to the backend through its page path, with this Cache-Status on the answer. */
    private readonly passOn: (cacheStatus: string) => void,
  ) {}

  /** Not answered by the cache after all: the page path forwards it (and counts it). */
  pass(cacheStatus: string): void {
    this.settle('bypass', null);
    this.passOn(cacheStatus);
  }

  /** The fields roomgate adds to every answer of this client's: Cache-Status and the room cookie. */
  extra(cacheStatus: string): string[] {
    const out = ['Cache-Status', cacheStatus];
    const cookie = this.req.setCookie();
    if (cookie !== null) out.push('Set-Cookie', cookie);
    return out;
  }

  /** Writes a stored answer whole (a Range of one part of a 200 gets a 206), and settles. */
  stored(a: StoredAnswer, ageS: number, cacheStatus: string, outcome: CacheOutcome): void {
    if (this.w.gone) return this.settle(outcome, null);
    const range = a.status === 200 ? byteRange(this.req.rawHeaders, a.body.length) : null;
    // The byte-level path writes the whole answer from its stored bytes.
    if (range === null && this.w.whole !== undefined) {
      this.w.whole(a.wire, ageS, cacheStatus, this.req.setCookie());
      return this.settle(outcome, a.status);
    }
    const headers = [...a.headers, 'Age', String(ageS), ...this.extra(cacheStatus)];
    if (range !== null) {
      this.w.start(206, 'Partial Content', [...headers, 'Content-Range', `bytes ${range.from}-${range.to}/${a.body.length}`], range.to - range.from + 1);
      this.w.write(a.body.subarray(range.from, range.to + 1));
      this.w.end();
      return this.settle(outcome, 206);
    }
    this.w.start(a.status, a.reason, headers, a.body.length);
    this.w.write(a.body);
    this.w.end();
    this.settle(outcome, a.status);
  }

  /** roomgate's own short answer (no backend, timeout, bad answer). */
  own(refusal: Refusal, cacheStatus: string, outcome: CacheOutcome): void {
    if (!this.w.gone) this.w.own(refusal, { 'Cache-Status': cacheStatus });
    this.settle(outcome, REFUSALS[refusal.code].status);
  }

  /** Counts the answer once (status null: the client got none, e.g. it left or was cut). */
  settle(outcome: CacheOutcome, status: number | null): void {
    if (this.settled) return;
    this.settled = true;
    this.record(outcome, (performance.now() - this.t0) / 1000);
    if (status !== null && !this.relayedOwnFetch) this.metrics.httpRequests.inc({ backend: 'cache', status: String(status) });
  }
}

/**
 * One byte range of `Range: bytes=a-b` (or a-, or -n) within a body of `size` bytes, or null: no
 * Range, several ranges, If-Range (not evaluated here), or one that cannot be satisfied. null
 * answers the whole body, which RFC 9110 14.2 allows a server to do for any Range.
 */
export function byteRange(rawHeaders: readonly string[], size: number): { from: number; to: number } | null {
  let value: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (name === 'if-range') return null;
    if (name === 'range') {
      if (value !== undefined) return null;
      value = rawHeaders[i + 1] as string;
    }
  }
  if (value === undefined || size === 0) return null;
  const m = /^bytes=(\d{0,15})-(\d{0,15})$/.exec(value.trim());
  if (m === null) return null;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return null;
  if (a === '') {
    const n = Number(b);
    return n === 0 ? null : { from: Math.max(0, size - n), to: size - 1 };
  }
  const from = Number(a);
  const to = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  return from > to ? null : { from, to };
}
