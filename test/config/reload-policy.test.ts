// The reload policy (SIGHUP): a static backend list and the certificates apply live; any other
// changed section, a backend list owned by DNS discovery, and TLS switched on or off wait for a
// restart. Pure: two loaded configurations in, the plan out (the whole-gateway reload is covered
// by test/integration/reload*.test.ts and test/cache/reload-restart-note.test.ts).
import { describe, expect, it } from 'vitest';
import { loadConfig, type LoadedConfig } from '../../src/config/load.js';
import { planReload, restartNote, type ReloadContext } from '../../src/config/reload-policy.js';

const base = loadConfig({ env: {}, overrides: { backends: ['http://127.0.0.1:9001'] } });
const withBackends = (...urls: string[]): LoadedConfig => loadConfig({ env: {}, overrides: { backends: urls } });
const plain: ReloadContext = { backendsFromDiscovery: false, tlsRunning: false, tlsNext: false };

describe('planReload', () => {
  it('changes nothing for the same configuration', () => {
    expect(planReload(base, withBackends('http://127.0.0.1:9001'), plain)).toEqual({ backends: false, certificates: false, rebalance: false, backendCalls: false, needsRestart: [] });
  });

  it('applies a changed static backend list live', () => {
    expect(planReload(base, withBackends('http://127.0.0.1:9001', 'http://127.0.0.1:9002'), plain)).toEqual({ backends: true, certificates: false, rebalance: false, backendCalls: false, needsRestart: [] });
  });

  it('leaves a changed backend list to a restart when DNS discovery owns the list', () => {
    const plan = planReload(base, withBackends('http://127.0.0.1:9002'), { ...plain, backendsFromDiscovery: true });
    expect(plan).toEqual({ backends: false, certificates: false, rebalance: false, backendCalls: false, needsRestart: ['backends'] });
  });

  it('lists every other changed section for a restart, in the configuration order', () => {
    const next: LoadedConfig = {
      ...base,
      proxy: { ...base.proxy, connectTimeoutMs: base.proxy.connectTimeoutMs + 1 },
      cache: { ...base.cache, paths: ['/pages/'] },
      admission: { ...base.admission, retryAfterS: base.admission.retryAfterS + 1 },
    };
    const order = (Object.keys(next) as string[]).filter((k) => ['proxy', 'cache', 'admission'].includes(k));
    expect(planReload(base, next, plain).needsRestart).toEqual(order);
  });

  it('compares with the running configuration: a section set back needs no restart', () => {
    const changed: LoadedConfig = { ...base, proxy: { ...base.proxy, connectTimeoutMs: base.proxy.connectTimeoutMs + 1 } };
    expect(planReload(base, changed, plain).needsRestart).toEqual(['proxy']);
    expect(planReload(base, { ...changed, proxy: base.proxy }, plain).needsRestart).toEqual([]);
  });

  it('applies backendCalls live: its secrets rotate without a restart', () => {
    const rotated: LoadedConfig = { ...base, backendCalls: { ...base.backendCalls, secrets: ['n'.repeat(32), 'o'.repeat(32)] } };
    expect(planReload(base, rotated, plain)).toEqual({ backends: false, certificates: false, rebalance: false, backendCalls: true, needsRestart: [] });
    expect(planReload(rotated, rotated, plain).backendCalls).toBe(false);
  });

  it('applies handoff.rebalance live; the rest of the handoff section waits for a restart', () => {
    const on: LoadedConfig = { ...base, handoff: { ...base.handoff, rebalance: { ...base.handoff.rebalance, enabled: true } } };
    expect(planReload(base, on, plain)).toEqual({ backends: false, certificates: false, rebalance: true, backendCalls: false, needsRestart: [] });
    expect(planReload(on, base, plain)).toEqual({ backends: false, certificates: false, rebalance: true, backendCalls: false, needsRestart: [] });
    const both: LoadedConfig = { ...on, handoff: { ...on.handoff, drainBatch: on.handoff.drainBatch + 1 } };
    expect(planReload(base, both, plain)).toEqual({ backends: false, certificates: false, rebalance: true, backendCalls: false, needsRestart: ['handoff'] });
  });

  it('never compares the tls section: certificates are read again whenever TLS stays on', () => {
    const next: LoadedConfig = { ...base, tls: { ...base.tls, reloadCheckMs: base.tls.reloadCheckMs + 1 } };
    expect(planReload(base, next, plain)).toEqual({ backends: false, certificates: false, rebalance: false, backendCalls: false, needsRestart: [] });
    expect(planReload(base, base, { ...plain, tlsRunning: true, tlsNext: true })).toEqual({ backends: false, certificates: true, rebalance: false, backendCalls: false, needsRestart: [] });
  });

  it('leaves TLS switched on or off to a restart, listed last', () => {
    const next: LoadedConfig = { ...base, proxy: { ...base.proxy, connectTimeoutMs: base.proxy.connectTimeoutMs + 1 } };
    expect(planReload(base, next, { ...plain, tlsNext: true })).toEqual({ backends: false, certificates: false, rebalance: false, backendCalls: false, needsRestart: ['proxy', 'tls'] });
    expect(planReload(base, base, { ...plain, tlsRunning: true })).toEqual({ backends: false, certificates: false, rebalance: false, backendCalls: false, needsRestart: ['tls'] });
  });
});

describe('restartNote', () => {
  it('names what waits for a restart, and is absent when nothing does', () => {
    expect(restartNote(['cache', 'tls'])).toBe('a restart is needed to apply cache, tls; until then the running settings stay');
    expect(restartNote([])).toBeUndefined();
  });
});
