/**
 * Benchmark: roomgate's ring (src/placement/ring.ts) vs hashring 3.2.
 *
 *   npm run bench:ring        (= tsc, then node dist/bench/ring.js)
 *   node --expose-gc dist/bench/ring.js   (collects garbage between runs: steadier)
 *
 * Both rings get 160 points per equally weighted member (hashring: 40 vnodes x
 * 4 replicas, its ketama default), so lookups walk rings of the same size.
 * The two implementations run interleaved, alternating which goes first, over
 * ROUNDS rounds, each on a freshly built ring (hashring's LRU starts empty);
 * the table shows the median and the min-max spread. A benchmark, not a test:
 * it asserts nothing and its numbers depend on the machine.
 *
 * '__proto__' is never passed to hashring: its cache is a plain object, so
 * that key would pollute Object.prototype for the rest of the process.
 */
import { performance } from 'node:perf_hooks';
import HashRing from 'hashring';
import { buildRing } from '../src/placement/ring.js';

// Report lines go to stdout, problems to stderr: this is a command-line report, not the gateway's log.
const say = (line = ''): boolean => process.stdout.write(`${line}\n`);

const ROUNDS = 3;
const DISTINCT = 1_000_000;
const HOT_KEYS = 1000;
const HOT_LOOKUPS = 1_000_000;

type Lookup = (key: string) => string | undefined;
interface Impl {
  readonly name: string;
  build(ids: readonly string[]): Lookup;
}

const ours: Impl = {
  name: 'roomgate ring',
  build(ids) {
    const ring = buildRing(ids.map((id) => ({ id, weight: 1 })));
    return (key) => ring.first(key);
  },
};

const theirs: Impl = {
  name: 'hashring 3.2',
  build(ids) {
    const ring = new HashRing([...ids]);
    return (key) => ring.get(key);
  },
};

// hashring parses members as 'host:port', so use ids of that shape for both.
const serverIds = (n: number): string[] => Array.from({ length: n }, (_, i) => `10.0.${i >> 8}.${i & 255}:7001`);
const ids3 = serverIds(3);
const ids4 = serverIds(4);
const ids50 = serverIds(50);

const keys = Array.from({ length: DISTINCT }, (_, i) => `room:${i.toString(36)}:lobby`);
const hot = keys.slice(0, HOT_KEYS);

// Everything a timed loop returns is folded in here and printed, so the JIT
// cannot drop a loop as dead code.
let sink = 0;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

function time(fn: () => void): number {
  gc();
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

function lookupAll(lookup: Lookup, list: readonly string[], count: number): void {
  const n = list.length;
  for (let i = 0; i < count; i++) sink += lookup(list[i % n]!)?.length ?? 0;
}

/** Per-build time in microseconds, averaged over `reps` builds. */
function buildTime(impl: Impl, ids: readonly string[], reps: number): number {
  return (
    (time(() => {
      for (let i = 0; i < reps; i++) sink += impl.build(ids)('warm') ? 1 : 0;
    }) *
      1000) /
    reps
  );
}

interface Metric {
  readonly label: string;
  readonly unit: string;
  run(impl: Impl): number;
}

const metrics: Metric[] = [
  {
    label: `lookup ${DISTINCT.toLocaleString('en')} distinct keys, 3 members`,
    unit: 'ms',
    run: (impl) => {
      const lookup = impl.build(ids3);
      return time(() => lookupAll(lookup, keys, DISTINCT));
    },
  },
  {
    label: `${HOT_LOOKUPS.toLocaleString('en')} lookups over ${HOT_KEYS} hot keys, 3 members`,
    unit: 'ms',
    run: (impl) => {
      const lookup = impl.build(ids3);
      return time(() => lookupAll(lookup, hot, HOT_LOOKUPS));
    },
  },
  { label: 'build, 3 members', unit: 'µs', run: (impl) => buildTime(impl, ids3, 2000) },
  { label: 'build, 50 members', unit: 'µs', run: (impl) => buildTime(impl, ids50, 100) },
];

/** Shares of the 3 members over all distinct keys. */
function shares(impl: Impl): number[] {
  const lookup = impl.build(ids3);
  const counts = new Map<string, number>();
  for (const k of keys) {
    const o = lookup(k)!;
    counts.set(o, (counts.get(o) ?? 0) + 1);
  }
  return ids3.map((id) => (counts.get(id) ?? 0) / keys.length);
}

/** Going from 3 to 4 members: % of keys that moved, and how many moved elsewhere than to the new member. */
function moved(impl: Impl): { pct: number; strays: number } {
  const before = impl.build(ids3);
  const after = impl.build(ids4);
  const added = ids4[3];
  let n = 0;
  let strays = 0;
  for (const k of keys) {
    const a = before(k);
    const b = after(k);
    if (a !== b) {
      n++;
      if (b !== added) strays++;
    }
  }
  return { pct: (100 * n) / keys.length, strays };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function fmt(x: number): string {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

function cell(xs: number[], unit: string): string {
  return `${fmt(median(xs))} ${unit} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`;
}

function main(): void {
  const impls = [ours, theirs];
  // Untimed warm-up so round 1 does not mostly measure the JIT.
  for (const impl of impls) lookupAll(impl.build(ids3), keys, 50_000);

  const results = new Map<Metric, Map<Impl, number[]>>(metrics.map((m) => [m, new Map(impls.map((i) => [i, []]))]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? impls : [...impls].reverse();
    for (const metric of metrics) {
      for (const impl of order) results.get(metric)!.get(impl)!.push(metric.run(impl));
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
  }

  const lines = [
    `Node ${process.version}, ${ROUNDS} interleaved rounds; median (min–max). Ratio = hashring / ours (> 1: ours is faster).`,
    '',
    `| metric | ${ours.name} | ${theirs.name} | ratio |`,
    '| --- | ---: | ---: | ---: |',
  ];
  for (const metric of metrics) {
    const a = results.get(metric)!.get(ours)!;
    const b = results.get(metric)!.get(theirs)!;
    lines.push(`| ${metric.label} | ${cell(a, metric.unit)} | ${cell(b, metric.unit)} | ${(median(b) / median(a)).toFixed(1)}x |`);
  }
  // Placement quality is deterministic, so it is measured once, outside the timed rounds.
  const pctList = (xs: number[]): string => xs.map((x) => (100 * x).toFixed(2)).join(' / ') + ' %';
  const [sa, sb] = [shares(ours), shares(theirs)];
  lines.push(`| share of ${DISTINCT.toLocaleString('en')} keys, 3 equal members (ideal 33.33 % each) | ${pctList(sa)} | ${pctList(sb)} | — |`);
  const [ma, mb] = [moved(ours), moved(theirs)];
  const movedCell = (m: { pct: number; strays: number }): string => `${m.pct.toFixed(2)} % (${m.strays} not to the new one)`;
  lines.push(`| keys moved when a 4th member joins (ideal 25 %, all to it) | ${movedCell(ma)} | ${movedCell(mb)} | — |`);

  say(lines.join('\n'));
  say(`\n(checksum ${sink})`);
}

main();
