// The runtime parts a gateway wires, as the in-process runtime tests build them: a Placer with
// the options a test rarely changes set to test defaults, so each test names only what it is about.
import { Placer, type PlacerOptions } from '../../src/runtime/placer.js';

/** Placer options a test leaves to these defaults unless it sets them. */
const PLACER_DEFAULTS = {
  noRoom: 'least-loaded',
  boundFactor: 0,
  loadMetric: 'rooms',
  retryAfterS: 2,
  onDown: 'keep',
  cacheTtlMs: 1_000,
  idleTtlMs: 30_000,
  maxIdleRooms: 10_000,
  recoveryRingMs: 5_000,
} as const satisfies Partial<PlacerOptions>;

/** A Placer over `store`, `pool` and `tunnels`; any other option overrides the default above. */
export function testPlacer(o: Pick<PlacerOptions, 'store' | 'pool' | 'tunnels' | 'logger'> & Partial<PlacerOptions>): Placer {
  return new Placer({ ...PLACER_DEFAULTS, ...o });
}
