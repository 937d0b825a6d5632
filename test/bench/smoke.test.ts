// Smoke run of the benchmark suite (bench/suite/): one tiny round of the game workload through
// every target. It checks the suite works end to end (processes, configs, load generator, report),
// not any figure: the figures of so short a run mean nothing.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const RUN = join(ROOT, 'dist/bench/suite/run.js');
const TARGETS = ['direct', 'nginx', 'haproxy', 'roomgate'];

function installed(cmd: string): boolean {
  return ['/usr/sbin', '/usr/bin', '/sbin', '/bin', ...(process.env.PATH ?? '').split(':')].some((d) => d && existsSync(join(d, cmd)));
}

// `npm test` installs nginx and HAProxy before any test runs (scripts/ensure-test-deps.sh). Run
// alone as root, this file installs them once, before its two runs (at once, each would run
// apt-get, and the second fails on the dpkg lock); not root and missing: skipped.
const canRun = process.getuid?.() === 0 || (installed('nginx') && installed('haproxy'));

function ensureProxies(): void {
  if (installed('nginx') && installed('haproxy')) return;
  const r = spawnSync('bash', [join(ROOT, 'scripts/ensure-test-deps.sh')], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  expect(r.status, `scripts/ensure-test-deps.sh failed:\n${r.stderr}`).toBe(0);
}

/** One tiny round of the game workload; checks a row per target with frames and no split. */
async function smoke(out: string, targets: readonly string[], extra: readonly string[]): Promise<string> {
  const args = [RUN, '--rounds', '1', '--clients', '40', '--duration', '2', '--warmup', '0.5', '--only', 'game', '--out', out, ...extra];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  expect(code, `bench exited ${code}:\n${stderr}`).toBe(0);

  const lines = stdout.split('\n');
  const at = lines.findIndex((l) => l.startsWith('## game, 40 clients'));
  expect(at, stdout).toBeGreaterThan(0);
  const header = lines[at + 2]!.split('|').map((c) => c.trim());
  const splitCol = header.indexOf('rooms split');
  expect(splitCol).toBeGreaterThan(0);
  for (const t of targets) {
    const row = lines.slice(at).find((l) => l.startsWith(`| ${t} |`));
    expect(row, `no row for ${t} in:\n${stdout}`).toBeDefined();
    const cells = row!.split('|').map((c) => c.trim());
    expect(cells[splitCol], `${t}: rooms split`).toBe('0');
    // Frames were delivered (40 clients x 5/s, whatever the noise).
    expect(Number(cells[header.indexOf('frames/s')]!.split(' ')[0]!.replace(/,/g, ''))).toBeGreaterThan(50);
  }
  expect(readFileSync(join(out, 'latest.svg'), 'utf8')).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  expect(JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).runs).toHaveLength(targets.length);
  return stdout;
}

// Concurrent: the two runs share nothing (own processes, ports and output folder) and mostly wait
// on their timed rounds, so they overlap.
describe.concurrent('bench suite smoke run', () => {
  const out = scopeTempDir('roomgate-bench-smoke-');
  // Once, before both runs start.
  beforeAll(() => {
    if (canRun) ensureProxies();
  }, 600_000);

  it.skipIf(!canRun)('reports every target, with no room split', async () => {
    await smoke(out, TARGETS, []);
  }, 240_000);

  it.skipIf(!canRun)('--tls: every proxy on TLS (wss from the load generator), direct left out', async () => {
    const stdout = await smoke(join(out, 'tls'), ['nginx', 'haproxy', 'roomgate'], ['--tls']);
    expect(stdout).toMatch(/note: TLS: every proxy terminates TLS/);
    expect(stdout).not.toMatch(/^\| direct \|/m);
  }, 240_000);
});
