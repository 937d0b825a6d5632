/**
 * `npm run fuzz -- [--cases N] [--seed S] [--case N] [--concurrency C] [--target NAME] [--cache]`: the
 * differential fuzzer's long run (test/conformance/fuzz.ts) against a fresh roomgate (or nginx,
 * haproxy, http-proxy-3) in front of the byte-logging backend. Prints throughput, every failure
 * with the command that replays it, and the referee's refusals the proxy forwarded anyway.
 * `--case N` replays one case and prints what its client read and what the backend parsed.
 * `--cache`: roomgate with its page cache on every path (every GET goes through the cache's fetch).
 * `--pin-inject`: roomgate with room.pinInject on and a room in every path (HTML answers scanned and injected).
 */
import { parseArgs } from 'node:util';
import { startRawBackend } from '../../test/conformance/backend.js';
import { describeCase, FUZZ_GATEWAY_CONFIG, FUZZ_PIN_INJECT, generateCase, runFuzz } from '../../test/conformance/fuzz.js';
import { cleanupAll } from '../suite/procs.js';
import { installed, PROXIES, startConformanceTarget, type ProxyName } from './targets.js';

const { values } = parseArgs({
  options: {
    cases: { type: 'string', default: '20000' },
    seed: { type: 'string', default: '1' },
    case: { type: 'string' },
    concurrency: { type: 'string', default: '24' },
    target: { type: 'string', default: 'roomgate' },
    cache: { type: 'boolean', default: false },
    'pin-inject': { type: 'boolean', default: false },
  },
});
const say = (s: string): void => void process.stdout.write(`${s}\n`);
const seed = Number(values.seed);
const name = values.target as ProxyName;
if (!PROXIES.includes(name) || !installed(name)) throw new Error(`--target must be one of ${PROXIES.join(', ')} (and installed)`);

const backend = await startRawBackend({ keepBytes: false });
const config = {
  ...FUZZ_GATEWAY_CONFIG,
  ...(values.cache ? { cache: { paths: ['/'], uncacheableMs: 0 } } : {}),
  ...(values['pin-inject'] ? FUZZ_PIN_INJECT : {}),
};
const target = await startConformanceTarget(name, backend.port, config);
let exitCode = 0;
try {
  if (values.case !== undefined) {
    const index = Number(values.case);
    say(describeCase(seed, generateCase(seed, index)));
    const seen: string[] = [];
    const report = await runFuzz(target, backend, {
      seed,
      cases: 1,
      from: index,
      concurrency: 1,
      onCase: (_c, received) => seen.push(received),
    });
    say(`client read: ${JSON.stringify(seen[0] ?? '')}`);
    say(`backend parsed ${report.backendRequests} request(s)`);
    for (const f of report.failures) say(`FAIL (${f.invariant}, ${f.kind}) ${f.detail}`);
    exitCode = report.failures.length > 0 ? 1 : 0;
  } else {
    const cases = Number(values.cases);
    let checkpoints = 0;
    say(`fuzzing ${name}: ${cases} cases, seed ${seed}, ${values.concurrency} clients at once`);
    const report = await runFuzz(target, backend, {
      seed,
      cases,
      concurrency: Number(values.concurrency),
      batch: 1_000,
      onBatch: (done, failed) => {
        if (++checkpoints % 10 === 0) say(`  ${done} cases, ${failed} failures`);
      },
    });
    say(`${report.cases} cases in ${(report.ms / 1000).toFixed(1)} s: ${Math.round(report.cases / (report.ms / 1000))} cases/s; the backend parsed ${report.backendRequests} requests`);
    const c = report.counts;
    say(report.failures.length === 0 ? 'no invariant broken' : `failures: ${c.smuggled} smuggled, ${c.xff} X-Forwarded-For, ${c.crossed} crossed, ${c.died} died; the first ${report.failures.length}:`);
    for (const f of report.failures) say(`FAIL (${f.invariant}, ${f.kind}) ${f.detail}\n${f.replay}`);
    if (report.leniencies.size > 0) {
      say('forwarded although the referee refused (reason: cases, example):');
      for (const [reason, l] of [...report.leniencies].sort((a, b) => b[1].count - a[1].count)) say(`  ${reason}: ${l.count} (case ${l.example})`);
    }
    exitCode = report.failures.length > 0 ? 1 : 0;
  }
} finally {
  await target.stop();
  await backend.close();
  await cleanupAll();
}
process.exit(exitCode);
