// The counters the status page's plots are made of, read from the gateway's own Prometheus
// metrics (kept anyway): one read per history sample, nothing added per request.
import type { Metrics } from './metrics.js';

export interface CounterTotals {
  /** Upgrades answered 101. */
  readonly upgrades: number;
  /** Proxied page requests answered (any status, the page cache's answers included). */
  readonly pages: number;
  /** Answers with a 5xx status: pages and upgrades (roomgate's own 502/503/504 and the backends'). */
  readonly errors: number;
}

export async function counterTotals(m: Pick<Metrics, 'upgrades' | 'httpRequests'>): Promise<CounterTotals> {
  const [up, http] = await Promise.all([m.upgrades.get(), m.httpRequests.get()]);
  let upgrades = 0;
  let pages = 0;
  let errors = 0;
  for (const v of up.values) {
    const result = String(v.labels.result ?? '');
    if (result === '101') upgrades += v.value;
    else if (result.startsWith('5')) errors += v.value;
  }
  for (const v of http.values) {
    pages += v.value;
    if (String(v.labels.status ?? '').startsWith('5')) errors += v.value;
  }
  return { upgrades, pages, errors };
}
