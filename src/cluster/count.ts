// `--workers N` / ROOMGATE_WORKERS: how many worker processes `roomgate start` runs, and
// `--balance` / ROOMGATE_BALANCE: how they share the public port.
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

/**
 * How the workers share the public port:
 * - 'kernel': every worker binds the port itself (SO_REUSEPORT) and accepts its own connections;
 *   the kernel spreads new connections over them. No process in between: measured, the primary's
 *   hand-off below more than doubled the CPU per upgrade (docs/performance.md#multi-core).
 * - 'primary': the primary accepts every connection and passes it to the next worker in turn over
 *   IPC (Node's cluster round-robin): evenly spread, and nothing queued at a worker that dies, at
 *   the cost of that hand-off per connection.
 */
export type Balance = 'kernel' | 'primary';

/** Where the kernel spreads connections over SO_REUSEPORT sockets (Node's `reusePort`). */
const REUSEPORT_PLATFORMS: readonly string[] = ['linux', 'freebsd'];

/**
 * "kernel" or "primary"; undefined or empty: kernel where the platform balances SO_REUSEPORT
 * sockets (Linux, FreeBSD), primary elsewhere. Anything else, or kernel on another platform,
 * throws an Error saying what is allowed.
 */
export function parseBalance(value: string | undefined, source = '--balance', platform: string = process.platform): Balance {
  const kernelHere = REUSEPORT_PLATFORMS.includes(platform);
  if (value === undefined || value.trim() === '') return kernelHere ? 'kernel' : 'primary';
  const v = value.trim();
  if (v !== 'kernel' && v !== 'primary') {
    throw new Error(`${source}: got ${JSON.stringify(value)}; expected "kernel" (each worker accepts its own connections, SO_REUSEPORT) or "primary" (the primary hands each connection to the next worker)`);
  }
  if (v === 'kernel' && !kernelHere) {
    throw new Error(`${source}: "kernel" needs SO_REUSEPORT load balancing (${REUSEPORT_PLATFORMS.join(', ')}); this is ${platform}: use "primary"`);
  }
  return v;
}
