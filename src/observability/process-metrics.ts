// prom-client's default process metrics (CPU, memory, descriptors, handles, heap, GC, version),
// without the event-loop monitor its collectDefaultMetrics starts and cannot leave out: the
// nodejs_eventloop_lag_* gauges, under the same names and cluster aggregation as prom-client's,
// come from the process's one monitor (src/observability/event-loop-delay.ts) instead.
// prom-client has no export map: its default metrics are its own files, named here one by one; a
// prom-client that moved them fails at start, never silently.
import { createRequire } from 'node:module';
import { Gauge, type Registry } from 'prom-client';
import { openDelayWindow, type DelayWindow } from './event-loop-delay.js';

const require = createRequire(import.meta.url);

/** prom-client's default metrics except eventLoopLag (lib/defaultMetrics.js, prom-client 15). */
const DEFAULT_METRICS = [
  'processCpuTotal',
  'processStartTime',
  'osMemoryHeap',
  'processOpenFileDescriptors',
  'processMaxFileDescriptors',
  'processResources',
  'processHandles',
  'processRequests',
  'heapSizeAndUsed',
  'heapSpacesSizeAndUsed',
  'version',
  'gc',
] as const;

type DefaultMetric = (registry: Registry, config: { readonly prefix?: string }) => void;

export interface ProcessMetrics {
  /** Stops feeding the event-loop gauges (the gateway stopped). */
  stop(): void;
}

/** Registers the process metrics on `registry`, every name prefixed with `prefix`. */
export function registerProcessMetrics(registry: Registry, prefix = ''): ProcessMetrics {
  for (const name of DEFAULT_METRICS) (require(`prom-client/lib/metrics/${name}.js`) as DefaultMetric)(registry, { prefix });
  // Opened at the first scrape: a gateway nobody scrapes feeds no window.
  let window: DelayWindow | null = null;
  const gauge = (suffix: string, help: string, aggregator: 'min' | 'max' | 'average'): Gauge => new Gauge({ name: `${prefix}nodejs_eventloop_lag${suffix}_seconds`, help, registers: [registry], aggregator });
  const min = gauge('_min', 'The minimum recorded event loop delay.', 'min');
  const max = gauge('_max', 'The maximum recorded event loop delay.', 'max');
  const mean = gauge('_mean', 'The mean of the recorded event loop delays.', 'average');
  const stddev = gauge('_stddev', 'The standard deviation of the recorded event loop delays.', 'average');
  const p50 = gauge('_p50', 'The 50th percentile of the recorded event loop delays.', 'average');
  const p90 = gauge('_p90', 'The 90th percentile of the recorded event loop delays.', 'average');
  const p99 = gauge('_p99', 'The 99th percentile of the recorded event loop delays.', 'average');
  new Gauge({
    name: `${prefix}nodejs_eventloop_lag_seconds`,
    help: 'Lag of event loop in seconds (the latest measurement).',
    registers: [registry],
    aggregator: 'average',
    // One collect sets every gauge, from the delays measured since the previous scrape.
    collect() {
      window ??= openDelayWindow();
      this.set(window.latestNs() / 1e9);
      const h = window.histogram;
      if (h.count === 0) return;
      min.set(h.min / 1e9);
      max.set(h.max / 1e9);
      mean.set(h.mean / 1e9);
      stddev.set(h.stddev / 1e9);
      p50.set(h.percentile(50) / 1e9);
      p90.set(h.percentile(90) / 1e9);
      p99.set(h.percentile(99) / 1e9);
      window.reset();
    },
  });
  return {
    stop: () => {
      window?.close();
      window = null;
    },
  };
}
