// What a reload (SIGHUP) applies to a running gateway and what only a restart applies. Live: the
// static backend list (not one from DNS discovery, which owns the list), the certificates (read
// again on every reload: a renewed file keeps its name), `handoff.rebalance` (so an operator can
// stop rebalancing at once) and `backendCalls` (its secrets rotate without a restart: old and new
// overlap, docs/push.md). Every other section, the rest of `handoff` included, and turning TLS
// on or off (it changes what the port speaks), waits for a restart.
import type { LoadedConfig } from './load.js';

export interface ReloadPlan {
  /** The new static backend list applies now. */
  readonly backends: boolean;
  /** The certificates are read again now (TLS on before and after). */
  readonly certificates: boolean;
  /** The new handoff.rebalance applies now. */
  readonly rebalance: boolean;
  /** The new backendCalls.secrets sign every call from now on. */
  readonly backendCalls: boolean;
  /** Changed sections only a restart applies, in the configuration's order, `tls` last. */
  readonly needsRestart: readonly string[];
}

export interface ReloadContext {
  /** DNS discovery owns the backend list: a changed static list needs a restart. */
  readonly backendsFromDiscovery: boolean;
  /** The running gateway has TLS on its public port. */
  readonly tlsRunning: boolean;
  /** The new configuration has TLS on its public port. */
  readonly tlsNext: boolean;
}

/**
 * Compared with the running configuration each time, so a section set back to its running value
 * needs no restart. The `tls` section is never compared: certificates are read again regardless.
 */
export function planReload(running: LoadedConfig, next: LoadedConfig, ctx: ReloadContext): ReloadPlan {
  let backends = false;
  const rebalance = JSON.stringify(next.handoff.rebalance) !== JSON.stringify(running.handoff.rebalance);
  const backendCalls = JSON.stringify(next.backendCalls) !== JSON.stringify(running.backendCalls);
  const needsRestart: string[] = [];
  for (const key of Object.keys(next) as (keyof LoadedConfig)[]) {
    if (key === 'tls') continue;
    if (key === 'handoff' && JSON.stringify({ ...next.handoff, rebalance: null }) === JSON.stringify({ ...running.handoff, rebalance: null })) continue;
    if (key === 'backendCalls' || JSON.stringify(next[key]) === JSON.stringify(running[key])) continue;
    if (key === 'backends' && !ctx.backendsFromDiscovery) backends = true;
    else needsRestart.push(key);
  }
  if (ctx.tlsRunning !== ctx.tlsNext) needsRestart.push('tls');
  return { backends, certificates: ctx.tlsRunning && ctx.tlsNext, rebalance, backendCalls, needsRestart };
}

/** The log's line on what waits for a restart; undefined when nothing does. */
export function restartNote(needsRestart: readonly string[]): string | undefined {
  return needsRestart.length > 0 ? `a restart is needed to apply ${needsRestart.join(', ')}; until then the running settings stay` : undefined;
}
