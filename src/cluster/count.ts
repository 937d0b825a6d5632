// `--workers N` / ROOMGATE_WORKERS: how many worker processes `roomgate start` runs.
import { availableParallelism } from 'node:os';

export const MAX_WORKERS = 64;

/**
 * 1..64, or "auto" (one per CPU this process may use, at most 64). Undefined or empty: 1 (one
 * process, no cluster). Anything else throws an Error saying what is allowed; `source` names where
 * the value came from ("--workers", "ROOMGATE_WORKERS").
 */
export function parseWorkers(value: string | undefined, source = '--workers', cpus: number = availableParallelism()): number {
  if (value === undefined || value.trim() === '') return 1;
  const v = value.trim();
  if (v === 'auto') return Math.min(MAX_WORKERS, Math.max(1, cpus));
  const n = /^\d{1,3}$/.test(v) ? Number(v) : NaN;
  if (!(n >= 1 && n <= MAX_WORKERS)) {
    throw new Error(`${source}: got ${JSON.stringify(value)}; expected a whole number from 1 to ${MAX_WORKERS}, or "auto" (one per CPU: ${cpus} here)`);
  }
  return n;
}
