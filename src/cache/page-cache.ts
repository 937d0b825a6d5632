// The page cache: where both page paths (node:http's and the byte-level one) hand a request once
// its room key is known. It answers from a stored copy when it may (fresh; stale within grace
// while one background refresh runs), else joins or starts a backend fetch (src/cache/fill.ts),
// or gives the request back to the path (`pass`) when the cache must not answer it (a logged-in
// user, another method, a path not cached, a key whose answers cannot be stored). Per process.
import type { PinTagsFor } from '../http/pin-inject.js';
import type { BackendTls } from '../backends/backend-tls.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { BackendAgents } from '../forward/backend-agents.js';
import type { Forwarding } from '../forward/forwarded.js';
import type { Forwarder } from '../forward/forwarder.js';
import type { BackendPool } from '../runtime/pool.js';
import type { CacheSnapshot } from '../runtime/views.js';
import type CachePolicy from 'http-cache-semantics';
import type { AnswerWriter, CacheRequest, PageCacheFront } from './contract.js';
import type { FetchedHead, FetchOptions } from './backend-fetch.js';
import { CacheClient } from './cache-client.js';
import { createCacheMetrics, type CacheMetrics, type CacheOutcome } from './cache-metrics.js';
import { Fill } from './fill.js';
import type { FillContext, FillHandle, FillSpec } from './fill-context.js';
import { CacheRules, headerRecord, keyParts, primaryKey, rawHeader, type CacheConfig } from './request-rules.js';
import { lifetimes, policyClass, policyRequest, StoredAnswers, unstorable, type PolicyClass, type StoredAnswer } from './stored-answers.js';
import { wireAnswer } from './wire-answer.js';

export interface PageCacheOptions {
  readonly config: CacheConfig;
  /** The room cookie's name: never forwarded on a fill nor part of a key. */
  readonly roomCookieName: string;
  /** The forwarding core a fill's backend request goes through. */
  readonly forwarder: Forwarder;
  readonly pool: BackendPool;
  readonly forwarding: Forwarding;
  readonly backendTls: BackendTls;
  readonly connectTimeoutMs: number;
  readonly responseTimeoutMs: number;
  readonly maxIdleSocketsPerBackend: number;
  readonly backendIdleTimeoutMs: number;
  /** proxy.rewriteLocation: a fetched answer's Location or Refresh naming its backend points at the public origin. */
  readonly rewriteLocation: boolean;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** The clock of freshness and grace (ms); tests move it. */
  readonly now?: () => number;
  /** room.pinInject: each room's pages are stored with the room's pin in them (src/http/pin-inject.ts). */
  readonly pinTags?: PinTagsFor | null;
}

/** What to purge: every stored answer of a URL (exact), of URLs with a prefix, and/or of a room. */
export interface PurgeSpec {
  readonly url?: string;
  readonly prefix?: string;
  readonly room?: string;
}

/** The request's Cache-Control or Pragma asks for a fresh answer from the backend. */
function forcedByClient(rawHeaders: readonly string[]): boolean {
  const cc = rawHeader(rawHeaders, 'cache-control') ?? '';
  return /(?:^|,)\s*(?:no-cache|max-age\s*=\s*0)\s*(?:,|$)/i.test(cc) || (cc === '' && /no-cache/i.test(rawHeader(rawHeaders, 'pragma') ?? ''));
}

/** The request's fields lower-cased, with only the kept cookies and no Authorization. */
function requestFields(rawHeaders: readonly string[], kept: string): Record<string, string> {
  const fields = headerRecord(rawHeaders);
  delete fields.cookie;
  delete fields.authorization;
  if (kept !== '') fields.cookie = kept;
  return fields;
}

/** Keys remembered as uncacheable at most (each holds its URL: a few MB at most). */
const MAX_UNCACHEABLE = 10_000;

function hasValidators(a: StoredAnswer): boolean {
  for (let i = 0; i < a.headers.length; i += 2) {
    const name = (a.headers[i] as string).toLowerCase();
    if (name === 'etag' || name === 'last-modified') return true;
  }
  return false;
}

export class PageCache implements FillContext, PageCacheFront {
  readonly rules: CacheRules;
  readonly cm: CacheMetrics;
  readonly fetch: FetchOptions;
  readonly Policy: PolicyClass;
  readonly config: CacheConfig;
  readonly forwarder: Forwarder;
  readonly pool: BackendPool;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly pinTags: PinTagsFor | null;
  private readonly agents: BackendAgents;
  private readonly answers: StoredAnswers;
  /** Fetches clients may still join, by primary key. */
  private readonly fills = new Map<string, Fill>();
  /** Every fetch in flight (joinable or not). */
  private readonly running = new Set<Fill>();
  /** Keys whose last answer could not be stored: until when requests skip the cache. */
  private readonly uncacheable = new Map<string, number>();
  private readonly counts: Record<CacheOutcome, number> = { hit: 0, stale: 0, 'stale-if-error': 0, miss: 0, coalesced: 0, bypass: 0 };
  private readonly clock: () => number;

  constructor(private readonly o: PageCacheOptions) {
    this.config = o.config;
    this.forwarder = o.forwarder;
    this.pool = o.pool;
    this.metrics = o.metrics;
    this.logger = o.logger;
    this.pinTags = o.pinTags ?? null;
    this.clock = o.now ?? Date.now;
    this.rules = new CacheRules(o.config, o.roomCookieName);
    this.Policy = policyClass(this.clock);
    this.agents = new BackendAgents(o.maxIdleSocketsPerBackend, o.backendIdleTimeoutMs);
    this.fetch = { agents: this.agents, backendTls: o.backendTls, connectTimeoutMs: o.connectTimeoutMs, responseTimeoutMs: o.responseTimeoutMs };
    this.answers = new StoredAnswers(o.config.maxBytes, () => this.cm.evictions.inc());
    this.cm = createCacheMetrics(o.metrics.registry, () => this.answers.stats(o.config.maxBytes), () => this.counts);
  }

  /** One answer on a cached path, counted by outcome (also kept here for the status page's ratio). */
  readonly record = (outcome: CacheOutcome, seconds: number): void => {
    this.counts[outcome]++; // roomgate_cache_requests_total reads these
    this.cm.seconds.observe({ outcome }, seconds);
  };

  now(): number {
    return this.clock();
  }

  /**
   * Answers the request, or gives it back through `pass` (with the Cache-Status its answer
   * carries) for the page path to forward as it forwards any request.
   */
  handle(req: CacheRequest, w: AnswerWriter, pass: (cacheStatus: string) => void): void {
    const t0 = performance.now();
    const verdict = this.rules.classify(req, req.key.forwardUrl);
    if ('bypass' in verdict) {
      this.record('bypass', (performance.now() - t0) / 1000);
      return pass(verdict.bypass === 'method' ? 'roomgate; fwd=method' : `roomgate; fwd=bypass; detail=${verdict.bypass}`);
    }
    const kept = verdict.kept;
    const host = rawHeader(req.rawHeaders, 'host') ?? rawHeader(req.rawHeaders, ':authority') ?? '';
    // The scheme as the backend will be told it (X-Forwarded-Proto): an app may answer http and
    // https differently (a redirect to https), and one copy must not be served for the other.
    const key = primaryKey(req.url, `${this.o.forwarding.proto(req.rawHeaders, req.ctx)}://${host}`, req.key.room, kept);
    // The request's fields as the cache compares them, made only when needed (a Vary, a fetch):
    // a hit of a page without Vary reads none of them.
    let record: Record<string, string> | undefined;
    const fields = (): Record<string, string> => (record ??= requestFields(req.rawHeaders, kept));
    const client = new CacheClient(req, w, fields, t0, this.metrics, this.record, pass);
    const now = this.clock();
    const until = this.uncacheable.get(key);
    if (until !== undefined) {
      if (now < until) return client.pass('roomgate; fwd=bypass; detail=uncacheable');
      this.uncacheable.delete(key);
    }
    // A client's no-cache is honoured only when configured: otherwise anyone could replace the copy
    // everyone is served (with whatever the app reflects of the request) and reach the backend at will.
    const forced = this.config.honorClientNoCache && forcedByClient(req.rawHeaders);
    let stale: StoredAnswer | undefined;
    // Cache-Status fwd=: what the cache had for this request.
    let fwd = forced ? 'request' : 'uri-miss';
    if (!forced) {
      const found = this.answers.find(key, fields);
      const a = found.answer;
      if (a === undefined && found.known) fwd = 'vary-miss';
      if (a !== undefined) {
        fwd = 'stale';
        if (now < a.freshUntil) return client.stored(a, this.ageOf(a), `roomgate; hit; ttl=${Math.floor((a.freshUntil - now) / 1000)}`, 'hit');
        const past = Math.max(1, Math.ceil((now - a.freshUntil) / 1000));
        if (now < a.swrUntil) {
          this.refresh(key, req, fields(), a);
          // The last refresh failed (the backend is down or answers 5xx): this copy stands in for an error.
          if (a.failedStatus !== null && now < a.sieUntil) {
            return client.stored(a, this.ageOf(a), `roomgate; fwd=stale; fwd-status=${a.failedStatus}; ttl=-${past}; detail=stale-if-error`, 'stale-if-error');
          }
          return client.stored(a, this.ageOf(a), `roomgate; hit; ttl=-${past}; detail=stale-while-revalidate`, 'stale');
        }
        // Past stale-while-revalidate: fetched now, with the copy's validators (a 304 keeps it),
        // and the copy is the answer if the backend fails within its stale-if-error window. A copy
        // past both with nothing to validate it by is of no more use.
        if (now < a.sieUntil || hasValidators(a)) stale = a;
        else this.answers.delete(key, fields);
      }
    }
    const inflight = this.fills.get(key);
    if (inflight !== undefined && inflight.joinable && !forced) {
      if (inflight.size >= this.config.maxWaiters) return client.pass('roomgate; fwd=bypass; detail=busy');
      return inflight.add(client, fwd, true);
    }
    const fill = this.newFill(key, req, fields(), stale);
    fill.add(client, fwd, false);
    fill.start();
  }

  private newFill(key: string, req: CacheRequest, fields: Record<string, string>, stale: StoredAnswer | undefined): Fill {
    const host = fields.host ?? fields[':authority'] ?? '';
    const spec: FillSpec = {
      key,
      room: req.key.room,
      path: req.key.forwardUrl,
      fields,
      headers: this.rules.fillHeaders(this.o.forwarding.headers(req.rawHeaders, req.ctx, false), fields.cookie ?? ''),
      policyRequest: policyRequest(req.url, host, fields),
      stale,
      // The origin of the key (its scheme and Host): what a stored Location is pointed at serves
      // only requests of that origin, so a hit and a miss carry the same Location.
      origin: this.o.rewriteLocation ? { scheme: this.o.forwarding.proto(req.rawHeaders, req.ctx), host } : null,
    };
    const fill = new Fill(this, spec);
    // A forced fetch does not replace one others are waiting on.
    if (!this.fills.has(key)) this.fills.set(key, fill);
    this.running.add(fill);
    return fill;
  }

  /** One background refresh per stale answer. */
  private refresh(key: string, req: CacheRequest, fields: Record<string, string>, a: StoredAnswer): void {
    if (a.refreshing || this.fills.has(key)) return;
    a.refreshing = true;
    this.newFill(key, req, fields, a).start();
  }

  ageOf(a: StoredAnswer): number {
    return a.initialAge + Math.max(0, Math.floor((this.clock() - a.receivedAt) / 1000));
  }

  store(spec: FillSpec, head: FetchedHead, record: Record<string, string>, policy: CachePolicy, body: Buffer): void {
    const now = this.clock();
    const headers: string[] = [];
    for (let i = 0; i + 1 < head.headers.length; i += 2) {
      const lower = (head.headers[i] as string).toLowerCase();
      if (lower !== 'content-length' && lower !== 'age') headers.push(head.headers[i] as string, head.headers[i + 1] as string);
    }
    const age = Number.parseInt(record.age ?? '0', 10);
    const wire = wireAnswer(head.status, head.reason, headers, body);
    const answer: StoredAnswer = {
      status: head.status,
      reason: head.reason,
      headers,
      body: wire.body,
      wire,
      policy,
      ...lifetimes(policy, record, this.config, now),
      receivedAt: now,
      initialAge: Number.isFinite(age) && age > 0 ? age : 0,
      size: StoredAnswers.sizeOf(headers, wire),
      refreshing: false,
      failedStatus: null,
    };
    this.answers.put(spec.key, spec.fields, record, answer);
  }

  refreshed(spec: FillSpec, stale: StoredAnswer, policy: CachePolicy, fields304: readonly string[], now: number): StoredAnswer {
    // RFC 9111 4.3.4: the 304's fields replace the stored ones of the same name (not the framing).
    // Never a Set-Cookie: it is one client's, and the copy is everybody's.
    const replaced = new Set<string>();
    for (let i = 0; i + 1 < fields304.length; i += 2) {
      const lower = (fields304[i] as string).toLowerCase();
      if (lower !== 'content-length' && lower !== 'age' && lower !== 'content-encoding' && lower !== 'set-cookie') replaced.add(lower);
    }
    const headers: string[] = [];
    for (let i = 0; i + 1 < stale.headers.length; i += 2) {
      if (!replaced.has((stale.headers[i] as string).toLowerCase())) headers.push(stale.headers[i] as string, stale.headers[i + 1] as string);
    }
    for (let i = 0; i + 1 < fields304.length; i += 2) {
      if (replaced.has((fields304[i] as string).toLowerCase())) headers.push(fields304[i] as string, fields304[i + 1] as string);
    }
    const record = headerRecord(headers);
    // The head's bytes follow the fields (the body is copied along: one Buffer per entry).
    const wire = wireAnswer(stale.status, stale.reason, headers, stale.body);
    const updated: StoredAnswer = {
      ...stale,
      headers,
      body: wire.body,
      wire,
      policy,
      ...lifetimes(policy, record, this.config, now),
      receivedAt: now,
      initialAge: 0,
      size: StoredAnswers.sizeOf(headers, wire),
      refreshing: false,
      failedStatus: null,
    };
    // The 304 may make the copy one user's (private, no-store...): then it is no longer kept.
    if (unstorable(policy, stale.status, headers, record, this.config, null) === null) this.answers.put(spec.key, spec.fields, record, updated);
    else this.answers.delete(spec.key, spec.fields);
    return updated;
  }

  forget(spec: FillSpec): void {
    this.answers.delete(spec.key, spec.fields);
  }

  rememberUncacheable(key: string, now: number): void {
    if (this.config.uncacheableMs <= 0) return;
    this.uncacheable.delete(key); // re-inserted last: the Map's order is the order of expiry
    this.uncacheable.set(key, now + this.config.uncacheableMs);
    // Bounded: many distinct uncacheable URLs must not grow this without end. The oldest go first
    // (at worst their requests wait on each other's fetch again, which is only slower).
    for (const [k, until] of this.uncacheable) {
      if (this.uncacheable.size <= MAX_UNCACHEABLE && until > now) break;
      this.uncacheable.delete(k);
    }
  }

  leave(fill: FillHandle): void {
    if (this.fills.get(fill.spec.key) === fill) this.fills.delete(fill.spec.key);
  }

  finished(fill: FillHandle): void {
    this.running.delete(fill as Fill);
    if (fill.spec.stale !== undefined) fill.spec.stale.refreshing = false;
  }

  /** Removes stored answers; returns how many. */
  purge(p: PurgeSpec): number {
    const match = (url: string, room: string): boolean =>
      (p.url === undefined || url === p.url) && (p.prefix === undefined || url.startsWith(p.prefix)) && (p.room === undefined || room === p.room);
    for (const key of [...this.uncacheable.keys()]) {
      const { url, room } = keyParts(key);
      if (match(url, room)) this.uncacheable.delete(key);
    }
    // A fetch under way would store what was just purged: it still answers its clients, stores nothing.
    for (const fill of this.running) {
      const { url, room } = keyParts(fill.spec.key);
      if (match(url, room)) {
        fill.doNotStore();
        this.leave(fill);
      }
    }
    return this.answers.purge(match);
  }

  snapshot(): CacheSnapshot {
    const s = this.answers.stats(this.config.maxBytes);
    const c = this.counts;
    const served = c.hit + c.stale + c['stale-if-error'] + c.miss + c.coalesced;
    return {
      enabled: this.rules.enabled,
      objects: s.objects,
      bytes: s.bytes,
      maxBytes: s.maxBytes,
      // A request that waited on another's fetch cost the backend nothing either.
      hitRatio: served === 0 ? null : (c.hit + c.stale + c['stale-if-error'] + c.coalesced) / served,
      counts: { ...c },
      fetching: this.running.size,
    };
  }

  close(): void {
    this.agents.close();
    this.answers.clear();
  }
}
