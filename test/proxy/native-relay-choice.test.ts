// proxy.relay as it can run: which relay a gateway picks, what it says, and the build that never
// fails an install. The tunnel contract itself is test/proxy/tunnel-contract.test.ts.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chooseRelay, NativeRelay } from '../../src/proxy/native-relay.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { ROOT } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-relay-choice-');

describe('proxy.relay', () => {
  const saved = process.env.ROOMGATE_RELAY_ADDON;
  afterEach(() => {
    if (saved === undefined) delete process.env.ROOMGATE_RELAY_ADDON;
    else process.env.ROOMGATE_RELAY_ADDON = saved;
  });

  it('auto runs the native relay when it is built; javascript never loads it', () => {
    expect(chooseRelay('auto')).toMatchObject({ relay: 'native', configured: 'auto' });
    expect(chooseRelay('javascript')).toMatchObject({ relay: 'javascript', addon: null, why: 'proxy.relay is javascript' });
  });

  it('without the addon: auto runs JavaScript and says why; native refuses to start, naming the key and the fix', () => {
    process.env.ROOMGATE_RELAY_ADDON = join(dir, 'missing', 'roomgate_relay.node');
    const auto = chooseRelay('auto');
    expect(auto).toMatchObject({ relay: 'javascript', configured: 'auto', addon: null });
    expect(auto.why).toMatch(/not built.*build-native\.mjs --strict/);
    expect(() => chooseRelay('native')).toThrow(/proxy\.relay: native, but the native relay is not built.*set proxy\.relay: auto/);
  });

  it('a gateway says which relay runs: roomgate_relay_info and the tunnels per relay', async () => {
    const gw = await startInProcessGateway(dir, 'http://127.0.0.1:9', { health: { path: null }, proxy: { relay: 'native' } });
    try {
      const info = (await gw.metrics.relayInfo.get()).values;
      expect(info).toEqual([expect.objectContaining({ value: 1, labels: { relay: 'native', configured: 'native' } })]);
    } finally {
      await gw.stop();
    }
  });

  it('the sweep looks at the limits a quarter of the shortest apart, within 10 ms .. 1 s', () => {
    expect(NativeRelay.tickFor(0, 0, 0)).toBe(1_000);
    expect(NativeRelay.tickFor(0, 90_000, 60_000)).toBe(1_000);
    expect(NativeRelay.tickFor(400, 0, 60_000)).toBe(100);
    expect(NativeRelay.tickFor(8, 0, 0)).toBe(10);
  });
});

describe('scripts/build-native.mjs', () => {
  /** A copy of the script and the sources, so a failed build writes nothing into the checkout. */
  function copy(): string {
    const root = mkdtempSync(join(dir, 'pkg-'));
    mkdirSync(join(root, 'scripts'));
    mkdirSync(join(root, 'native'));
    cpSync(join(ROOT, 'scripts/build-native.mjs'), join(root, 'scripts/build-native.mjs'));
    for (const f of ['relay.cc', 'probe.cc', 'probe.h', 'binding.gyp']) cpSync(join(ROOT, 'native', f), join(root, 'native', f));
    return root;
  }
  const run = (root: string, args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, [join(root, 'scripts/build-native.mjs'), ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 120_000 });

  it('without a compiler: exits 0 (an install never fails), says why once, and leaves the reason for the gateway', () => {
    const root = copy();
    const r = run(root, [], { CXX: 'no-such-compiler-here' });
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/native relay not built, the JavaScript relay will run: no-such-compiler-here is not installed/);
    expect(readFileSync(join(root, 'native/build/NOT-BUILT'), 'utf8')).toMatch(/no-such-compiler-here is not installed/);
    expect(existsSync(join(root, 'native/build/Release/roomgate_relay.node'))).toBe(false);
    // --strict (tests, the image's build stage): the same failure is an error.
    expect(run(root, ['--strict'], { CXX: 'no-such-compiler-here' }).status).toBe(1);
  });

  it('with one: builds the addon from source against this Node, and a later run with nothing changed does nothing', () => {
    const root = copy();
    const r = run(root, []);
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(join(root, 'native/build/Release/roomgate_relay.node'))).toBe(true);
    expect(existsSync(join(root, 'native/build/NOT-BUILT'))).toBe(false);
    const again = run(root, []);
    expect(again.status).toBe(0);
    expect(again.stderr).toMatch(/native relay ready/);
  });
});
