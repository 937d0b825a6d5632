// Active health checks: each backend is probed on its own jittered timer (an HTTP GET, or a bare
// TCP connect), and its state flips only after `rise` passes or `fall` failures in a row, so one
// lost packet does not move rooms. The proxy can add passive evidence (a refused connection)
// to reach `fall` sooner. Owns its timers and probes' connections; knows nothing of the pool or
// ring. The HTTP check is one GET on a bare connection, its answer read with the strict
// response-head reader (src/backends/health-http-probe.ts; no node:http, whose client was an idle
// gateway's largest JavaScript cost); the connection is a Node socket, or the addon's native
// probe for a plain check of an address (src/backends/probe-link.ts). An https:// backend is
// checked over TLS as the proxy speaks to it: the HTTP check is that GET over TLS, and the connect
// check completes a verified TLS handshake (a listening port whose certificate roomgate refuses
// is not healthy; the failure reads e.g. "tls: CERT_HAS_EXPIRED ..."). Each check is on a fresh
// connection: it must prove that *new* connections work, which is what the proxy needs; a pooled
// one could stay healthy after the listener died.
import { defaultBackendTls, tlsOptions, type BackendTls } from './backend-tls.js';
import { isHostValue, targetFlaw } from '../http/syntax.js';
import { httpAnswer, probeRequest } from './health-http-probe.js';
import { socketProbe, type OpenProbe, type ProbeEvents, type ProbeLink } from './probe-link.js';

export interface HealthTarget {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  /** An https:// backend: checked over TLS. */
  readonly tls?: boolean;
}

export interface HealthOptions {
  /** HTTP path to GET (2xx/3xx and then the whole body = pass; request-target characters only), or null for a plain TCP connect check. */
  path: string | null;
  /** Time between checks of one backend (jittered ±10% so checks of many backends spread out). */
  intervalMs: number;
  /** A check that takes longer fails. */
  timeoutMs: number;
  /** Consecutive passes to go down -> up. */
  rise: number;
  /** Consecutive failures to go up -> down. */
  fall: number;
  /** Host header to send (default: host:port of the target). */
  hostHeader?: string;
  /** TLS for targets with `tls` (backendTls); default: Node's trust store, verified. */
  tls?: BackendTls;
  /** How a check's connection is opened (src/backends/probe-link.ts); default: a Node socket. */
  open?: OpenProbe;
}

export type HealthState = 'up' | 'down';

export interface HealthEvent {
  id: string;
  state: HealthState;
  at: number;
  /** e.g. "3 failed checks: ECONNREFUSED", "2 passed checks" */
  reason: string;
}

export interface HealthResult {
  at: number;
  ok: boolean;
  ms: number;
  error?: string;
}

/** TLS of checks when HealthOptions.tls is not given: made on first use. */
let fallbackTls: BackendTls | undefined;

/** Results kept per backend for the admin API. */
const HISTORY = 20;
/** ±10%: enough to spread checks started together (a reload) without blurring the interval. */
const JITTER = 0.1;

interface Entry {
  target: HealthTarget;
  state: HealthState;
  passes: number;
  fails: number;
  history: HealthResult[];
  /** Set while waiting for the next check. */
  timer: NodeJS.Timeout | undefined;
  /** Set while a check is running; aborting it destroys the probe's socket. */
  running: AbortController | undefined;
  /** False once the target is removed or the checker stopped: a late result is then ignored. */
  active: boolean;
}

export class HealthChecker {
  private readonly entries = new Map<string, Entry>();
  private stopped = false;

  constructor(
    private readonly opts: HealthOptions,
    private readonly onChange: (ev: HealthEvent) => void,
    private readonly now: () => number = Date.now,
  ) {
    for (const k of ['intervalMs', 'timeoutMs'] as const) {
      if (!(opts[k] > 0)) throw new RangeError(`health ${k} must be > 0, got ${opts[k]}`);
    }
    for (const k of ['rise', 'fall'] as const) {
      if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new RangeError(`health ${k} must be an integer >= 1, got ${opts[k]}`);
    }
    // Both are written into the request as they are: a space, CR or LF would split or add lines.
    if (opts.path !== null && (!opts.path.startsWith('/') || targetFlaw(opts.path) !== -1)) {
      throw new RangeError(`health path must be "/" and request-target characters, got ${JSON.stringify(opts.path)}`);
    }
    if (opts.hostHeader !== undefined && !isHostValue(opts.hostHeader)) throw new RangeError(`health hostHeader must be a Host value, got ${JSON.stringify(opts.hostHeader)}`);
  }

  /**
   * Replace the set of targets (discovery/reload). New ones start 'up' (optimistic: a fresh
   * gateway routes at once) and are checked immediately; removed ones stop; kept ones keep
   * their state, counters and schedule, and use the new host/port from their next check on.
   * Does nothing after stop().
   */
  setTargets(targets: readonly HealthTarget[]): void {
    if (this.stopped) return;
    const wanted = new Map(targets.map((t) => [t.id, t]));
    for (const [id, entry] of this.entries) {
      if (!wanted.has(id)) {
        this.deactivate(entry);
        this.entries.delete(id);
      }
    }
    for (const [id, target] of wanted) {
      const entry = this.entries.get(id);
      if (entry) {
        entry.target = target;
        continue;
      }
      const fresh: Entry = { target, state: 'up', passes: 0, fails: 0, history: [], timer: undefined, running: undefined, active: true };
      this.entries.set(id, fresh);
      this.run(fresh);
    }
  }

  state(id: string): HealthState | undefined {
    return this.entries.get(id)?.state;
  }

  /** Last results (at most 20, oldest first) for the admin API; a copy. */
  history(id: string): readonly HealthResult[] {
    return [...(this.entries.get(id)?.history ?? [])];
  }

  /**
   * Passive evidence from the proxy: a refused connection counts as a failed check (recorded
   * with error "proxy: <error>"), so `fall` is reached sooner. Schedules nothing.
   */
  reportFailure(id: string, error: string): void {
    const entry = this.entries.get(id);
    if (entry) this.record(entry, 0, `proxy: ${error}`);
  }

  /** Clears every timer and aborts in-flight checks; no further onChange calls. Final. */
  stop(): void {
    this.stopped = true;
    for (const entry of this.entries.values()) this.deactivate(entry);
    this.entries.clear();
  }

  private deactivate(entry: Entry): void {
    entry.active = false;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.running?.abort();
    entry.running = undefined;
  }

  private run(entry: Entry): void {
    entry.timer = undefined;
    const controller = new AbortController();
    entry.running = controller;
    const started = performance.now();
    void probe(entry.target, this.opts, controller.signal).then((error) => {
      if (!entry.active) return; // removed or stopped meanwhile: the result means nothing now
      entry.running = undefined;
      const ms = Math.round(performance.now() - started);
      // The next check is due one interval after this one *started*, so slow checks do not
      // stretch the cadence; it is scheduled only now, so a check is never doubled. Scheduled
      // before record() so a throwing onChange cannot stop the checks.
      const interval = this.opts.intervalMs * (1 - JITTER + Math.random() * 2 * JITTER);
      entry.timer = setTimeout(() => this.run(entry), Math.max(0, interval - ms));
      entry.timer.unref(); // health checks alone must never keep the process alive
      this.record(entry, ms, error);
    });
  }

  private record(entry: Entry, ms: number, error: string | undefined): void {
    const at = this.now();
    entry.history.push(error === undefined ? { at, ok: true, ms } : { at, ok: false, ms, error });
    if (entry.history.length > HISTORY) entry.history.shift();

    const id = entry.target.id;
    if (error === undefined) {
      entry.passes++;
      entry.fails = 0;
      if (entry.state === 'down' && entry.passes >= this.opts.rise) {
        entry.state = 'up';
        this.onChange({ id, state: 'up', at, reason: `${entry.passes} passed checks` });
      }
    } else {
      entry.fails++;
      entry.passes = 0;
      if (entry.state === 'up' && entry.fails >= this.opts.fall) {
        entry.state = 'down';
        this.onChange({ id, state: 'down', at, reason: `${entry.fails} failed checks: ${error}` });
      }
    }
  }
}

/**
 * One check. Resolves with undefined on a pass or a short error text on a failure; never
 * rejects. The whole check (connect, response head, body) is bounded by timeoutMs, and the
 * connection is closed when the check ends, whatever the outcome.
 */
function probe(target: HealthTarget, opts: HealthOptions, signal: AbortSignal): Promise<string | undefined> {
  return new Promise((resolve) => {
    const request = opts.path === null ? null : probeRequest(target, opts.path, opts.hostHeader);
    if (opts.path !== null && request === null) return resolve(`no valid Host header for ${JSON.stringify(target.host)}`);
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let link: ProbeLink | undefined;
    const finish = (error?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      link?.close();
      resolve(error);
    };
    const onAbort = (): void => finish('aborted');
    // Events come after open() returns (a connection's are asynchronous), so `link` is set by then.
    try {
      const secure = target.tls ? tlsOptions(opts.tls ?? (fallbackTls ??= defaultBackendTls()), target.host) : null;
      link = (opts.open ?? socketProbe)(target, secure, request, request === null ? connectCheck(finish) : httpAnswer(finish));
    } catch (err) {
      // Never out of here: a rejected check would be an unhandled rejection (run() does not catch).
      return finish(`cannot connect: ${(err as Error).message}`);
    }
    timer = setTimeout(() => finish(`timeout after ${opts.timeoutMs} ms`), opts.timeoutMs);
    timer.unref(); // the probe's connection is what keeps the process alive, and only until stop()
    signal.addEventListener('abort', onAbort);
  });
}

/**
 * The connect check: a listening port is all it proves; for an https backend also that its TLS
 * handshake completes and its certificate verifies. Closed at once.
 */
function connectCheck(finish: (error?: string) => void): ProbeEvents {
  return { connected: () => finish(), data: () => undefined, end: () => finish('connection closed'), error: (reason) => finish(reason) };
}
