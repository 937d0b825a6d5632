// The native relay through 200,000 tunnels (npm run chaos, in CI): bench/relay-leak.ts opens and
// closes them in batches through an in-process gateway (client FIN, backend FIN, client reset in
// turn) and fails (exit 1) when a descriptor, a tunnel on the relay, a live socket or memory
// (RSS after a full GC, against the baseline taken halfway) stays behind. 200,000 rather than the
// 100,000 the target names: the process's RSS after GC climbs early on either relay (malloc's
// arenas filling: on the native relay +15, +13, +6, +3 MB per 50,000 here, on the JavaScript one
// +42 MB by 50,000, flat after), so the second half of a shorter run still shows the climb. A child process: its
// descriptor and RSS counts are its own.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { ROOT } from '../support/processes.js';

const BENCH = join(ROOT, 'dist/bench/relay-leak.js');
const LIMIT_MS = 240_000;

describe('bench/relay-leak.ts, 200,000 tunnels', () => {
  it('leave no descriptor, no tunnel, no live socket and no memory behind', async () => {
    const child = spawn(process.execPath, ['--expose-gc', BENCH, '--tunnels', '200000'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), LIMIT_MS);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c))).finally(() => clearTimeout(timer));
    expect(code, `relay-leak exited ${code} (null: killed after ${LIMIT_MS} ms):\n${out}`).toBe(0);
    expect(out).toMatch(/200000 tunnels on the native relay/);
    for (const check of ['descriptors', 'tunnels on the native relay', 'live sockets', 'tunnels counted on the native relay', 'RSS after GC']) {
      expect(out, out).toMatch(new RegExp(`\\| ${check}[^\\n]*\\| ok \\|`));
    }
    const line = (re: RegExp): string => re.exec(out)?.[0] ?? '';
    recordChaos({
      id: 'native-relay-tunnel-churn',
      fault: '200,000 WebSocket tunnels opened and closed through the native relay (client FIN, backend FIN, client reset in turn, 500 at a time)',
      promise: 'the native relay leaves nothing behind: no descriptor, no tunnel on the relay or in the registry, no live socket, no memory (RSS after a full GC flat in the second half)',
      figures: {
        recoverMs: null,
        socketsDropped: 0,
        other: [line(/in [\d.]+ s on [^,\n]+/), line(/RSS after GC by tunnels done \(MB\):[^;\n]+/), line(/\| descriptors \(\/proc\/self\/fd\) \| \d+ \| \d+/).replace(/\|/g, ' ').replace(/\s+/g, ' ').trim()].filter((x) => x !== ''),
      },
      file: import.meta.url,
      test: 'bench/relay-leak.ts, 200,000 tunnels: leave no descriptor, no tunnel, no live socket and no memory behind',
    });
  }, LIMIT_MS + 5_000);
});
