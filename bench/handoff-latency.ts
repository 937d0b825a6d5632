/**
 * The added latency of a client message sent while its room moves with resume (issue 37's target:
 * p99 <= 150 ms), measured as a benchmark: the djust chaos row in resume mode
 * (test/chaos/djust-handoff.test.ts: 300 rooms, 2 gateways on Redis, a rolling restart of 3 backends
 * with handoff, djust-faithful pages clicking every 0.75-1.5 s) run --rounds times, one at a time and
 * alone on the machine, its raw samples pooled: one run has only 10 to 30 clicks inside a move, so a
 * p99 of one run is its maximum. Also pooled: one handoff (hello to end). Records the CPU model and
 * each round's load average; writes handoff-latency.json and .md to --out.
 *
 *   npm run bench:handoff -- [--rounds 5] [--out bench/results]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '../..');

interface Round {
  readonly added: number[];
  readonly afterEnd: number[];
  readonly handoffMs: number[];
  readonly lost: number;
  readonly doubled: number;
  readonly reloads: number;
  readonly closed: number;
  readonly load: number;
  readonly loadBefore: number;
}

function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

function main(): void {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, out: { type: 'string', default: join(ROOT, 'bench/results') } } });
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a whole number >= 1, got ${values.rounds}`);
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-handoff-bench-'));
  const results: Round[] = [];
  try {
    for (let i = 1; i <= rounds; i++) {
      const file = join(dir, `round-${i}.jsonl`);
      const loadBefore = loadavg()[0]!;
      const run = spawnSync(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', 'test/chaos/djust-handoff.test.ts'], {
        cwd: ROOT,
        env: { ...process.env, ROOMGATE_CHAOS: '1', ROOMGATE_DJUST_MODE: 'resume', ROOMGATE_DJUST_GUARANTEES: 'record', ROOMGATE_DJUST_SAMPLES: file },
        encoding: 'utf8',
        timeout: 600_000,
      });
      let line: string;
      try {
        line = readFileSync(file, 'utf8').trim();
      } catch {
        throw new Error(`round ${i}: the row wrote no samples (exit ${run.status}):\n${(run.stdout ?? '').slice(-3000)}${(run.stderr ?? '').slice(-2000)}`);
      }
      const r = { ...(JSON.parse(line) as Omit<Round, 'loadBefore'>), loadBefore };
      results.push(r);
      process.stderr.write(`[round ${i}/${rounds}] ${r.added.length} clicks in a move: p50 ${Math.round(percentile(r.added, 50))} ms, max ${Math.round(Math.max(...r.added))} ms; handoff p99 ${Math.round(percentile(r.handoffMs, 99))} ms; load ${loadBefore.toFixed(1)} -> ${r.load.toFixed(1)}; lost ${r.lost}, closed ${r.closed}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const added = results.flatMap((r) => r.added);
  const handoffs = results.flatMap((r) => r.handoffMs);
  const afterEnd = results.flatMap((r) => r.afterEnd);
  const f = (xs: readonly number[]): string => `p50 ${Math.round(percentile(xs, 50))}, p90 ${Math.round(percentile(xs, 90))}, p99 ${Math.round(percentile(xs, 99))}, max ${Math.round(Math.max(...xs))} (n = ${xs.length})`;
  const cpu = cpus()[0]?.model ?? 'unknown';
  const md = [
    `# Added latency of a message sent during a move with resume (${new Date().toISOString().slice(0, 10)})`,
    '',
    `${rounds} rounds of the djust resume row, one at a time; ${cpu}, ${cpus().length} cores, node ${process.version}; load average at each round's start: ${results.map((r) => r.loadBefore.toFixed(1)).join(', ')}, at its end: ${results.map((r) => r.load.toFixed(1)).join(', ')}.`,
    '',
    '| ms | pooled |',
    '|---|---|',
    `| added latency of a click sent during its room's move | ${f(added)} |`,
    `| the same, seen after its handoff's end | ${f(afterEnd)} |`,
    `| one handoff (hello to end) | ${f(handoffs)} |`,
    '',
    `Clicks lost ${results.reduce((n, r) => n + r.lost, 0)}, doubled ${results.reduce((n, r) => n + r.doubled, 0)}, pages reloaded ${results.reduce((n, r) => n + r.reloads, 0)}, client sockets closed ${results.reduce((n, r) => n + r.closed, 0)}.`,
  ].join('\n');
  mkdirSync(values.out, { recursive: true });
  writeFileSync(join(values.out, 'handoff-latency.json'), `${JSON.stringify({ cpu, cores: cpus().length, node: process.version, rounds: results }, null, 1)}\n`);
  writeFileSync(join(values.out, 'handoff-latency.md'), `${md}\n`);
  process.stdout.write(`${md}\n`);
}

main();
