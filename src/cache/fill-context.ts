// What a Fill (src/cache/fill.ts) uses of the page cache that owns it: the forwarding core and the
// backend pool, the fetch settings, the clock, and the cache's bookkeeping (storing an answer, forgetting
// a finished fill, remembering a key whose answers cannot be stored).
import type CachePolicy from 'http-cache-semantics';
import type { PublicOrigin } from '../http/location.js';
import type { PinTagsFor } from '../http/pin-inject.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Forwarder } from '../forward/forwarder.js';
import type { BackendPool } from '../runtime/pool.js';
import type { FetchedHead, FetchOptions } from './backend-fetch.js';
import type { CacheMetrics } from './cache-metrics.js';
import type { CacheConfig } from './request-rules.js';
import type { PolicyClass, StoredAnswer } from './stored-answers.js';

export interface FillSpec {
  /** The primary key. */
  readonly key: string;
  readonly room: string | null;
  /** The target sent to the backend. */
  readonly path: string;
  /** The request's fields as compared for Vary (kept cookies only). */
  readonly fields: Record<string, string>;
  /** The request head sent to the backend (forwarded fields, kept cookies, no conditionals). */
  readonly headers: string[];
  readonly policyRequest: CachePolicy.Request;
  /** The stale answer being refreshed (validators, stale-if-error), if any. */
  readonly stale: StoredAnswer | undefined;
  /** proxy.rewriteLocation's public origin (src/http/location.ts), or null when it is off. */
  readonly origin: PublicOrigin | null;
}

/** A fill as the cache tracks it. */
export interface FillHandle {
  readonly spec: FillSpec;
}

export interface FillContext {
  readonly config: CacheConfig;
  /** Placement, passive health and retries of the fill's backend request (src/forward/forwarder.ts). */
  readonly forwarder: Forwarder;
  readonly pool: BackendPool;
  readonly metrics: Metrics;
  readonly cm: CacheMetrics;
  readonly logger: Logger;
  readonly fetch: FetchOptions;
  readonly Policy: PolicyClass;
  /** room.pinInject: the pin's tags for a page of a room (src/http/pin-inject.ts), or null when off. */
  readonly pinTags: PinTagsFor | null;
  now(): number;
  /** Age (s) of a stored answer now. */
  ageOf(a: StoredAnswer): number;
  /** Stores a complete answer. */
  store(spec: FillSpec, head: FetchedHead, record: Record<string, string>, policy: CachePolicy, body: Buffer): void;
  /** A 304 confirmed a stored answer: its fields and lifetimes brought up to date; returns it. */
  refreshed(spec: FillSpec, stale: StoredAnswer, policy: CachePolicy, fields304: readonly string[], now: number): StoredAnswer;
  /** Removes the stored answer the fill was refreshing. */
  forget(spec: FillSpec): void;
  /** Requests for this key go to the backend directly for cache.uncacheableMs. */
  rememberUncacheable(key: string, now: number): void;
  /** No new client may join this fill. */
  leave(fill: FillHandle): void;
  /** The fill is over. */
  finished(fill: FillHandle): void;
}
