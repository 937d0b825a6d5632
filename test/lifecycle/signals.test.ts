// The one signal helper, in a real child process receiving real signals: held during start-up,
// graceful on the first, immediate (then exit 1) on the second, duplicates within the window
// ignored.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, stopAll, waitFor } from '../support/processes.js';

afterAll(stopAll);

const HELPER = join(ROOT, 'dist/src/lifecycle/signals.js');

/** A child that installs the helper, reports each call on stdout, and exits when told. */
function child(opts: { readyAfterMs: number; duplicateWindowMs?: number }) {
  const script = `
    const { onStopSignals } = await import(${JSON.stringify(HELPER)});
    const say = (s) => process.stdout.write(s + '\\n');
    const s = onStopSignals({
      duplicateWindowMs: ${opts.duplicateWindowMs ?? 'undefined'},
      onSignal: (sig, n) => say('signal ' + sig + ' ' + n),
      graceful: (sig) => say('graceful ' + sig),
      immediate: (sig) => say('immediate ' + sig),
    });
    say('installed');
    setTimeout(() => { s.ready(); say('ready'); }, ${opts.readyAfterMs});
    setTimeout(() => process.exit(0), 10000);
  `;
  const p = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let buf = '';
  p.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop() ?? '';
    lines.push(...parts);
  });
  const exited = new Promise<number | null>((resolve) => p.once('exit', (code) => resolve(code)));
  return { p, lines, exited };
}

describe('onStopSignals', () => {
  it('holds a signal during start-up and acts on it once ready; a second signal exits 1 after the immediate step', async () => {
    const c = child({ readyAfterMs: 600 });
    await waitFor('installed', 5_000, () => c.lines.includes('installed'));
    c.p.kill('SIGTERM');
    await waitFor('the held signal seen', 5_000, () => c.lines.includes('signal SIGTERM 1'));
    expect(c.lines).not.toContain('graceful SIGTERM');
    await waitFor('graceful after ready', 5_000, () => c.lines.includes('graceful SIGTERM'));
    c.p.kill('SIGINT');
    expect(await c.exited).toBe(1);
    expect(c.lines.slice(-2)).toEqual(['signal SIGINT 2', 'immediate SIGINT']);
  });

  it('ignores a repeat within the duplicate window', async () => {
    const c = child({ readyAfterMs: 0, duplicateWindowMs: 5_000 });
    await waitFor('ready', 5_000, () => c.lines.includes('ready'));
    c.p.kill('SIGINT');
    await waitFor('graceful', 5_000, () => c.lines.includes('graceful SIGINT'));
    c.p.kill('SIGINT');
    c.p.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    expect(c.lines.filter((l) => l.startsWith('immediate'))).toEqual([]);
    c.p.kill('SIGKILL');
    await c.exited;
  });
});
