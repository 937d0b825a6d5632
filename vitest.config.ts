import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// The long fault scenarios (sticky placements through kills, cuts and a Redis restart, a process
// killed under load, a reconnect storm of 3,000 sockets, djust-faithful pages through a rolling restart, per-tab rooms in Chromium through a kill, a move and a drain, Redis failover, network faults, hostile clients, the one-minute soak, the native relay under ASan/UBSan and through 100,000 tunnels) are `npm run chaos`'s: it sets ROOMGATE_CHAOS=1 and runs them, and
// .ci/run runs them after `npm test`, which keeps the unit and integration suite within its time.
export const CHAOS_ONLY = ['test/chaos/placement.test.ts', 'test/chaos/soak.test.ts', 'test/chaos/redis-ha.test.ts', 'test/chaos/hostile-clients.test.ts', 'test/chaos/network-faults.test.ts', 'test/chaos/gateway-death.test.ts', 'test/chaos/handoff-rolling-restart.test.ts', 'test/chaos/handoff-failures.test.ts', 'test/chaos/reconnect-storm.test.ts', 'test/chaos/handoff-races.test.ts', 'test/chaos/djust-handoff.test.ts', 'test/chaos/per-tab-rooms.test.ts', 'test/chaos/relay-sanitized.test.ts', 'test/chaos/relay-leak.test.ts',
  // Runs under the sanitizers in the chaos run (relay-sanitized): it keeps both cores busy on purpose.
  'test/proxy/relay-add-race.test.ts'];

// The files that take longest (about 15 s and more each on this 2-core machine), longest first.
// Started first, they overlap the many short files; started last (vitest's order from a clean
// clone, with no timings cached, is by file size), one of them runs on alone at the end.
// The CLI tests (integration/cli, cli/admin-commands, where, check-config, help-examples) read what
// a command prints in the test's own process (test/cli/in-process.ts) and spawn the binary only to
// test the process itself: cli is no longer among the longest and the other four are short.
export const LONG_FILES = [
  'test/typecheck.test.ts',
  'test/cli/demo.test.ts',
  'test/integration/failure.test.ts',
  'test/conformance/fuzz.test.ts',
  'test/browser/phone.test.ts',
  'test/integration/page-path.test.ts',
  'test/integration/workers.test.ts',
  'test/bench/smoke.test.ts',
  'test/integration/ticket-keys.test.ts',
  'test/integration/shared-data.test.ts',
  'test/parity/parity.test.ts',
  'test/browser/plots.test.ts',
  'test/pages/failover.test.ts',
  'test/integration/shutdown.test.ts',
  'test/integration/hardening.test.ts',
  'test/browser/pages.test.ts',
  'test/integration/cli.test.ts',
  'test/integration/backend-tls.test.ts',
  'test/integration/tls.test.ts',
  'test/placement/store-contract.test.ts',
  'test/demo/reconnect.test.ts',
  'test/integration/page-cache.test.ts',
  'test/conformance/responses.test.ts',
  'test/proxy/tunnel-ends.test.ts',
  'test/proxy/tunnel-contract.test.ts',
  'test/proxy/relay-differential.test.ts',
  'test/deploy/prestop-drain.test.ts',
];

/** LONG_FILES first, in that order; then every other file in vitest's own order. */
class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const i = LONG_FILES.findIndex((l) => f.moduleId.endsWith(`/${l}`));
      return i === -1 ? LONG_FILES.length : i;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}

// Every file shares one module registry per worker (vitest's isolate: false): a fresh registry per
// file costs a process start and a reload of src/ and the test support for each of about 200 files.
// Measured on the whole suite: 361 s of CPU isolated, 258 s shared (and the shared run's 3,380
// tests passed). A file that mocks a module, installs fake timers it may leave behind, or changes
// process-wide state stays isolated (ISOLATED): each was seen to fail when it shared a registry, or
// replaces a module for the whole worker. A file that fails only in the full run belongs here.
// The fault scenarios of test/chaos stay isolated: each runs for minutes, so a registry costs
// nothing there, and a scenario's leftovers must not reach the next one. So does a file that
// counts the whole process's descriptors (the native relay prototype's: a descriptor another
// file's leftover closes or opens meanwhile, or the worker's connection to the run's Chromium,
// moved its count in a CI run).
export const ISOLATED = ['test/cache/page-cache-clock.test.ts', 'test/runtime/rebalance.test.ts', 'test/control/drain-token.test.ts', 'test/chaos/*.test.ts'];

const excluded = process.env.ROOMGATE_CHAOS === '1' ? configDefaults.exclude : [...configDefaults.exclude, ...CHAOS_ONLY];

export default defineConfig({
  test: {
    // Which files run is the projects' own (below): a root include would be merged into both.
    include: [],
    exclude: excluded,
    // Integration tests start real processes and bind real ports; keep them bounded.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // 2 cores, 4 workers: most files spend their time waiting on sockets, processes and timers, so
    // more files than cores overlap that waiting (measured: 335 s with 2, 228 s with 3 on a quiet
    // machine; later, with the suite grown, 255 s with 3 and 225-227 s with 4 in two runs each,
    // 2026-12-07, the suite's CPU about half of the two cores' time with 3). More would thrash the
    // machine and make timing-sensitive tests flaky.
    maxWorkers: 4,
    sequence: { sequencer: LongFilesFirst },
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'isolated', include: ISOLATED, exclude: excluded } },
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: [...excluded, ...ISOLATED], isolate: false, globalSetup: ['test/support/browser-server.ts'] } },
    ],
  },
});
