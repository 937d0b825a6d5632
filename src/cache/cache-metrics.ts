// The page cache's Prometheus metrics, on the gateway's registry: answers by outcome (the
// varnishstat view), their latency by outcome (the varnishhist view), what is stored, evictions
// and the backend fetches the cache made.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** How the cache answered: hit, stale (while one refresh runs), stale-if-error, miss, coalesced (waited on another's fetch), bypass. */
export type CacheOutcome = 'hit' | 'stale' | 'stale-if-error' | 'miss' | 'coalesced' | 'bypass';

export interface CacheMetrics {
  readonly requests: Counter<'outcome'>;
  readonly seconds: Histogram<'outcome'>;
  readonly evictions: Counter;
  readonly fills: Counter<'result'>;
}

/**
 * `counts`: the answers by outcome as the cache counts them (for its status page too): the
 * requests counter reads them when scraped, so an answer costs one increment, not two.
 */
export function createCacheMetrics(registry: Registry, stats: () => { objects: number; bytes: number }, counts: () => Readonly<Record<CacheOutcome, number>>): CacheMetrics {
  new Gauge({
    name: 'roomgate_cache_objects',
    help: 'Answers stored in the page cache (one per variant)',
    registers: [registry],
    collect() {
      this.set(stats().objects);
    },
  });
  new Gauge({
    name: 'roomgate_cache_bytes',
    help: 'Bytes of answers stored in the page cache (heads and bodies), bounded by cache.maxBytes',
    registers: [registry],
    collect() {
      this.set(stats().bytes);
    },
  });
  return {
    requests: new Counter({
      name: 'roomgate_cache_requests_total',
      help: 'Requests on cached paths by outcome: hit, stale (served while one refresh runs), stale-if-error, miss, coalesced (waited on another fetch), bypass',
      labelNames: ['outcome'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [outcome, n] of Object.entries(counts())) if (n > 0) this.inc({ outcome }, n);
      },
    }),
    seconds: new Histogram({
      name: 'roomgate_cache_response_seconds',
      help: 'Time from a request reaching the cache to the end of its answer, by outcome',
      labelNames: ['outcome'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    evictions: new Counter({
      name: 'roomgate_cache_evictions_total',
      help: 'Stored answers pushed out to keep the cache within cache.maxBytes',
      registers: [registry],
    }),
    fills: new Counter({
      name: 'roomgate_cache_fills_total',
      help: 'Backend fetches made by the cache, by result: stored, not-stored, revalidated (304), failed, stale-if-error',
      labelNames: ['result'],
      registers: [registry],
    }),
  };
}
