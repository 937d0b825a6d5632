// The one way roomgate's processes take SIGTERM and SIGINT: the first asks for a graceful stop,
// a second one means "now": the caller's last act (kill its children) runs and the process exits 1.
// A signal that arrives while the process is still starting is held and acted on once start-up
// has finished (every start-up step has a timeout), so a half-started process never orphans the
// children it already has.

export interface StopSignalHandlers {
  /** First signal: stop gracefully (called once). */
  readonly graceful: (signal: string) => void;
  /** Second signal: what must happen before exiting at once (e.g. SIGKILL the children). */
  readonly immediate: (signal: string) => void;
  /** Told about each signal, e.g. to log it. */
  readonly onSignal?: (signal: string, count: number) => void;
  /** How the process exits on a second signal (tests replace it). */
  readonly exit?: (code: number) => void;
  /**
   * Signals within this many ms of the first are the same event delivered twice (a terminal's
   * Ctrl-C reaches the whole process group, and a wrapper forwards it again), not a second request.
   */
  readonly duplicateWindowMs?: number;
  /** Signals that mean "stop" (default SIGTERM and SIGINT). */
  readonly signals?: readonly NodeJS.Signals[];
}

export interface StopSignals {
  /** Start-up has finished: a signal held meanwhile is acted on now. */
  ready(): void;
  /** Removes the listeners. */
  dispose(): void;
}

const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

/** Installs the listeners; until ready() is called, the first signal is held. */
export function onStopSignals(h: StopSignalHandlers, now: () => number = Date.now): StopSignals {
  let count = 0;
  let firstAt = 0;
  let started = false;
  let held: string | null = null;
  const exit = h.exit ?? ((code: number) => process.exit(code));
  const listener = (signal: string): void => {
    if (count > 0 && h.duplicateWindowMs !== undefined && now() - firstAt < h.duplicateWindowMs) return;
    count++;
    h.onSignal?.(signal, count);
    if (count === 1) {
      firstAt = now();
      if (started) h.graceful(signal);
      else held = signal;
      return;
    }
    h.immediate(signal);
    exit(1);
  };
  const signals = h.signals ?? STOP_SIGNALS;
  for (const s of signals) process.on(s, listener);
  return {
    ready() {
      started = true;
      if (held !== null) h.graceful(held);
      held = null;
    },
    dispose() {
      for (const s of signals) process.off(s, listener);
    },
  };
}
