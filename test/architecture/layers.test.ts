// The layer rule of .dependency-cruiser.cjs (docs: architecture), checked on every run of the
// suite: nothing imports upward, the data plane and the control plane never import each other,
// demo code is reached only from the CLI, no import cycles.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** Runs dependency-cruiser on `src` of `cwd` with the project's rules; its violations. */
function cruise(cwd: string): Promise<Violation[]> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLI, 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
      { cwd, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        // A non-zero exit is how violations are reported; only output that is no report is an error.
        try {
          const report = JSON.parse(stdout) as { summary: { violations: Violation[] } };
          resolve(report.summary.violations);
        } catch {
          reject(new Error(`dependency-cruiser gave no report (${err?.message ?? 'no error'}): ${stderr.slice(0, 2000)}`));
        }
      },
    );
  });
}

const temps: string[] = [];
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

describe('the layer rule', () => {
  it('holds for src/', async () => {
    const violations = await cruise(ROOT);
    expect(violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`)).toEqual([]);
  }, 60_000);

  it('catches an upward import, a data plane reaching into the control plane, demo code in production, a cycle, a front imported by a rule, a front past the pipeline, a path importing the pipeline, the forwarding core reaching up, the cache past it, the edge reaching into the composition, and the backend kit importing more than the proof format or imported by the gateway', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'roomgate-layers-'));
    temps.push(dir);
    cpSync(path.join(ROOT, '.dependency-cruiser.cjs'), path.join(dir, '.dependency-cruiser.cjs'));
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true } }));
    const files: Record<string, string> = {
      'src/control/page.ts': 'export const page = 1;\n',
      'src/runtime/pool.ts': "import { page } from '../control/page.js';\nexport const pool = page;\n",
      'src/proxy/proxy.ts': "import { page } from '../control/page.js';\nexport const proxy = page;\n",
      'src/demo/backends.ts': 'export const demo = 1;\n',
      'src/server/listen.ts': "import { demo } from '../demo/backends.js';\nexport const listen = demo;\n",
      'src/server/h2-front.ts': 'export const front = 1;\n',
      'src/proxy/relay.ts': "import { front } from '../server/h2-front.js';\nexport const relay = front;\n",
      'src/server/lean-connection.ts': "import { proxy } from '../proxy/proxy.js';\nexport const lean = proxy;\n",
      'src/pipeline/pipeline.ts': 'export const pipeline = 1;\n',
      'src/static/serve.ts': "import { pipeline } from '../pipeline/pipeline.js';\nexport const serve = pipeline;\n",
      'src/forward/core.ts': "import { proxy } from '../proxy/proxy.js';\nexport const core = proxy;\n",
      'src/cache/fill.ts': "import { proxy } from '../proxy/proxy.js';\nexport const fill = proxy;\n",
      'src/room/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'src/room/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
      'src/compose/parts.ts': 'export const parts = 1;\n',
      'src/proxy/wired.ts': "import { parts } from '../compose/parts.js';\nexport const wired = parts;\n",
      'src/http/call-proof.ts': 'export const proof = 1;\n',
      'src/http/ownership.ts': 'export const owner = 1;\n',
      'src/backend-kit/proofs.ts': "import { proof } from '../http/call-proof.js';\nimport { owner } from '../http/ownership.js';\nexport const kit = proof + owner;\n",
      'src/runtime/uses-kit.ts': "import { kit } from '../backend-kit/proofs.js';\nexport const uses = kit;\n",
    };
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), text);
    }
    const found = new Set((await cruise(dir)).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`));
    expect([...found].sort()).toEqual(
      expect.arrayContaining([
        'runtime-not-upward: src/runtime/pool.ts -> src/control/page.ts',
        'data-plane-not-control-plane: src/proxy/proxy.ts -> src/control/page.ts',
        'demo-only-from-the-cli: src/server/listen.ts -> src/demo/backends.ts',
        'no-cycles: src/room/a.ts -> src/room/b.ts',
        'nothing-imports-a-front: src/proxy/relay.ts -> src/server/h2-front.ts',
        'forward-below-the-paths: src/forward/core.ts -> src/proxy/proxy.ts',
        'fronts-reach-the-app-through-the-pipeline: src/server/lean-connection.ts -> src/proxy/proxy.ts',
        'paths-below-the-pipeline: src/static/serve.ts -> src/pipeline/pipeline.ts',
        'cache-uses-the-forwarding-core-only: src/cache/fill.ts -> src/proxy/proxy.ts',
        'edge-not-composition: src/proxy/wired.ts -> src/compose/parts.ts',
        'backend-kit-stands-alone: src/backend-kit/proofs.ts -> src/http/ownership.ts',
        'nothing-of-the-gateway-imports-the-backend-kit: src/runtime/uses-kit.ts -> src/backend-kit/proofs.ts',
      ]),
    );
  }, 60_000);
});
