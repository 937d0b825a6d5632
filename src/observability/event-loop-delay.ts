// The process's one event-loop delay monitor. Node's monitorEventLoopDelay wakes the process every
// `resolution` ms in native code, and prom-client's default metrics start another that cannot be
// turned off: two of them (10 and 20 ms) were three quarters of an idle gateway's CPU (12 ms of CPU
// per second idle; 3 ms without them). This one is a single timer per process, however many
// gateways the process runs (tests run several), every RESOLUTION_MS: how late it fires is the
// delay. Each reader (the status page's history, the Prometheus gauges) has its own window, a
// histogram it reads and empties on its own schedule, so readers never reset each other's figures.
//
// A stall shows whatever the resolution: the timer due during it fires when it ends, as late as the
// stall was long. A coarser resolution only takes fewer samples: a stall shorter than it is caught
// in proportion to its length, so the figures stay those a request arriving at a random moment
// would wait, from fewer samples. 500 ms: each wake-up of an idle gateway costs ~0.15 ms of CPU
// (the timer's JavaScript entry, not the tick's own work), and at 100 ms this one timer was 1.7 of
// the 3 ms/s an idle gateway spent with no socket and no health check (0.3 at 500 ms).
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** How often the timer is due. */
export const RESOLUTION_MS = 500;

/** One reader's figures since it last emptied its window; delays in nanoseconds, as perf_hooks gives them. */
export interface DelayWindow {
  readonly histogram: RecordableHistogram;
  /** The delay measured by the latest tick, ns (0 before the first). */
  latestNs(): number;
  /** Empties this window only. */
  reset(): void;
  /** Stops feeding this window; the timer stops with the last one. */
  close(): void;
}

const windows = new Set<RecordableHistogram>();
let timer: NodeJS.Timeout | null = null;
let due = 0n;
let latest = 0;

function tick(): void {
  const now = process.hrtime.bigint();
  const late = now - due;
  // Recorded as at least 1 ns (a histogram takes no 0); a tick that came early is not late.
  const ns = late > 0n ? Number(late) : 1;
  latest = ns;
  for (const h of windows) h.record(ns);
  due = now + BigInt(RESOLUTION_MS) * 1_000_000n;
}

/** A window of the process's event-loop delay, fed until closed. */
export function openDelayWindow(): DelayWindow {
  const histogram = createHistogram();
  windows.add(histogram);
  if (timer === null) {
    due = process.hrtime.bigint() + BigInt(RESOLUTION_MS) * 1_000_000n;
    timer = setInterval(tick, RESOLUTION_MS);
    // Measuring never keeps a process alive.
    timer.unref();
  }
  return {
    histogram,
    latestNs: () => latest,
    reset: () => histogram.reset(),
    close: () => {
      windows.delete(histogram);
      if (windows.size === 0 && timer !== null) {
        clearInterval(timer);
        timer = null;
      }
    },
  };
}
