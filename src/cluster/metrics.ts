// /metrics of a `--workers N` gateway: every worker's registry (asked over IPC) summed by
// prom-client's AggregatorRegistry (counters and socket gauges add up; event-loop lag is averaged,
// roomgate_placement_degraded is the max), plus the primary's own figures: running workers,
// restarts, and its process metrics prefixed roomgate_primary_ (it accepts every connection).
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client';
import { registerProcessMetrics, type ProcessMetrics } from '../observability/process-metrics.js';

export class ClusterMetrics {
  readonly registry = new Registry();
  readonly restarts: Counter;
  /** The primary's placement store (no Redis) evicts too; summed with the workers' caches under the same name. */
  readonly idleRoomsEvicted: Counter<'where'>;
  /** The primary's admin port refuses connections over admin.maxConnections. */
  readonly connectionsRefused: Counter<'listener' | 'reason'>;
  private readonly processMetrics: ProcessMetrics;

  constructor(runningWorkers: () => number) {
    this.processMetrics = registerProcessMetrics(this.registry, 'roomgate_primary_');
    new Gauge({
      name: 'roomgate_workers',
      help: 'Worker processes running and listening (roomgate start --workers N)',
      registers: [this.registry],
      aggregator: 'max',
      collect() {
        this.set(runningWorkers());
      },
    });
    this.restarts = new Counter({
      name: 'roomgate_worker_restarts_total',
      help: 'Workers that exited unexpectedly and were started again',
      registers: [this.registry],
    });
    this.idleRoomsEvicted = new Counter({
      name: 'roomgate_idle_rooms_evicted_total',
      help: 'Placements of rooms without a live socket dropped by placement.maxIdleRooms before their idleTtlMs: cache (this process), store (memory or Redis)',
      labelNames: ['where'],
      registers: [this.registry],
    });
    this.connectionsRefused = new Counter({
      name: 'roomgate_connections_refused_total',
      help: 'Connections closed at once on accept by a connection limit (listen.maxConnections, listen.maxConnectionsPerAddress), by listener and reason',
      labelNames: ['listener', 'reason'],
      registers: [this.registry],
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Stops feeding the primary's event-loop gauges. */
  stop(): void {
    this.processMetrics.stop();
  }

  /** The Prometheus text: the workers' metrics (as getMetricsAsJSON() gave them) summed, and the primary's. */
  async render(workers: readonly object[][]): Promise<string> {
    const own = await this.registry.getMetricsAsJSON();
    return AggregatorRegistry.aggregate([...workers, own]).metrics();
  }
}
