// DNS discovery against a real (tiny) DNS server on 127.0.0.1: real UDP queries through
// node:dns/promises, short poll intervals, every wait bounded.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedBackend } from '../../src/config/load.js';
import { backendsFromA, backendsFromSrv, DnsDiscovery, DnsDiscoveryError, type DnsDiscoveryOptions } from '../../src/backends/discovery.js';
import { TestDnsServer, type NameRecords } from '../support/dns-server.js';

const NAME = 'app-headless.default.svc.cluster.local';
const SRV_NAME = `_http._tcp.${NAME}`;
const INTERVAL = 50;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function waitFor<T>(what: string, check: () => T | undefined | false | null, timeoutMs = 5000): Promise<T> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const tick = (): void => {
      const v = check();
      if (v !== undefined && v !== false && v !== null) return resolve(v);
      if (Date.now() > deadline) return reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      setTimeout(tick, 5);
    };
    tick();
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let dns: TestDnsServer;
const running = new Set<DnsDiscovery>();

beforeAll(async () => {
  dns = await TestDnsServer.start();
});
afterEach(() => {
  for (const d of running) d.stop();
  running.clear();
  dns.setMode('answer');
  dns.setRecords({});
});
afterAll(async () => {
  await dns.close();
});

interface Harness {
  discovery: DnsDiscovery;
  changes: ResolvedBackend[][];
  errors: Error[];
}

function discover(opts: Partial<DnsDiscoveryOptions> & Pick<DnsDiscoveryOptions, 'type'>): Harness {
  const changes: ResolvedBackend[][] = [];
  const errors: Error[] = [];
  const discovery = new DnsDiscovery(
    { name: opts.type === 'SRV' ? SRV_NAME : NAME, port: 8000, intervalMs: INTERVAL, servers: [dns.address], queryTimeoutMs: 100, ...opts },
    (b) => changes.push(b),
    (e) => errors.push(e),
  );
  running.add(discovery);
  return { discovery, changes, errors };
}

const ids = (l: readonly ResolvedBackend[]): string[] => l.map((b) => b.id);

/** Resolves once the server has seen `n` more queries than now. */
function afterQueries(n: number, timeoutMs = 5000): Promise<number> {
  const target = dns.queries.length + n;
  return waitFor(`${n} more DNS queries`, () => dns.queries.length >= target && dns.queries.length, timeoutMs);
}

describe('backendsFromA / backendsFromSrv (pure)', () => {
  it('A/AAAA: the address is the id; IPv6 in brackets in id and url, not in host; sorted, deduplicated', () => {
    expect(backendsFromA(['10.0.0.6', '10.0.0.5', '10.0.0.6', 'FD00::5', 'not-an-ip'], 8000, 2)).toEqual([
      { id: '10.0.0.5:8000', url: 'http://10.0.0.5:8000', host: '10.0.0.5', port: 8000, weight: 2 },
      { id: '10.0.0.6:8000', url: 'http://10.0.0.6:8000', host: '10.0.0.6', port: 8000, weight: 2 },
      { id: '[fd00::5]:8000', url: 'http://[fd00::5]:8000', host: 'fd00::5', port: 8000, weight: 2 },
    ]);
    expect(backendsFromA([], 8000, 1)).toEqual([]);
  });

  it('SRV: first label + port as id, the target name as host, record weight and priority ignored', () => {
    const rec = (name: string, port = 8000, weight = 33, priority = 0) => ({ name, port, weight, priority });
    expect(
      backendsFromSrv(
        [rec('app-1.app-headless.default.svc.cluster.local.'), rec('APP-0.app-headless.default.svc.cluster.local', 8000, 50, 10), rec('app-1.app-headless.default.svc.cluster.local', 8000, 1)],
        1,
      ),
    ).toEqual([
      { id: 'app-0:8000', url: 'http://app-0.app-headless.default.svc.cluster.local:8000', host: 'app-0.app-headless.default.svc.cluster.local', port: 8000, weight: 1 },
      { id: 'app-1:8000', url: 'http://app-1.app-headless.default.svc.cluster.local:8000', host: 'app-1.app-headless.default.svc.cluster.local', port: 8000, weight: 1 },
    ]);
    // Same pod, two ports: two backends.
    expect(ids(backendsFromSrv([rec('app-0.x.svc', 8001), rec('app-0.x.svc', 8000)], 1))).toEqual(['app-0:8000', 'app-0:8001']);
    // Same first label in two domains: the whole name keeps them apart.
    expect(ids(backendsFromSrv([rec('app-0.a.svc'), rec('app-0.b.svc'), rec('app-1.a.svc')], 1))).toEqual(['app-0.a.svc:8000', 'app-0.b.svc:8000', 'app-1:8000']);
    // "." (service not available) and port 0 are not backends.
    expect(backendsFromSrv([rec('.'), rec(''), rec('app-0.x.svc', 0)], 1)).toEqual([]);
  });
});

describe('DnsDiscovery against a DNS server on 127.0.0.1', () => {
  it('A: one backend per address', async () => {
    dns.setRecords({ [NAME]: { A: ['10.0.0.6', '10.0.0.5'] } });
    const h = discover({ type: 'A' });
    const list = await h.discovery.start();
    expect(list).toEqual(backendsFromA(['10.0.0.5', '10.0.0.6'], 8000, 1));
    expect(ids(list)).toEqual(['10.0.0.5:8000', '10.0.0.6:8000']);
    expect(h.discovery.current?.backends).toEqual(list);
    expect(h.changes).toEqual([]); // the first list is start()'s result, not a change
  });

  it('AAAA: bracketed ids and urls, bare host', async () => {
    dns.setRecords({ [NAME]: { AAAA: ['fd00::5', 'fd00::6'] } });
    const list = await discover({ type: 'AAAA', weight: 3 }).discovery.start();
    expect(list).toEqual([
      { id: '[fd00::5]:8000', url: 'http://[fd00::5]:8000', host: 'fd00::5', port: 8000, weight: 3 },
      { id: '[fd00::6]:8000', url: 'http://[fd00::6]:8000', host: 'fd00::6', port: 8000, weight: 3 },
    ]);
  });

  it('A+AAAA: both families; one family without records is fine', async () => {
    dns.setRecords({ [NAME]: { A: ['10.0.0.5'], AAAA: ['fd00::5'] } });
    expect(ids(await discover({ type: 'A+AAAA' }).discovery.start())).toEqual(['10.0.0.5:8000', '[fd00::5]:8000']);
    expect(dns.queries.slice(-2).sort()).toEqual([`A ${NAME}`, `AAAA ${NAME}`]);
    dns.setRecords({ [NAME]: { A: ['10.0.0.5'] } });
    expect(ids(await discover({ type: 'A+AAAA' }).discovery.start())).toEqual(['10.0.0.5:8000']);
  });

  it('SRV: stable ids from the pod names, urls to the target names', async () => {
    dns.setRecords({
      [SRV_NAME]: {
        SRV: [
          { target: 'app-1.app-headless.default.svc.cluster.local', port: 8000, weight: 50 },
          { target: 'app-0.app-headless.default.svc.cluster.local', port: 8000, weight: 50 },
        ],
      },
    });
    const list = await discover({ type: 'SRV', port: 0 }).discovery.start();
    expect(list).toEqual([
      { id: 'app-0:8000', url: 'http://app-0.app-headless.default.svc.cluster.local:8000', host: 'app-0.app-headless.default.svc.cluster.local', port: 8000, weight: 1 },
      { id: 'app-1:8000', url: 'http://app-1.app-headless.default.svc.cluster.local:8000', host: 'app-1.app-headless.default.svc.cluster.local', port: 8000, weight: 1 },
    ]);
  });

  it('unchanged records: no onChange; changed records: exactly one onChange', async () => {
    dns.setRecords({ [NAME]: { A: ['10.0.0.5', '10.0.0.6'] } });
    const h = discover({ type: 'A' });
    await h.discovery.start();
    await afterQueries(5); // five polls with the same answer
    expect(h.changes).toEqual([]);
    expect(h.errors).toEqual([]);

    // Same set in another order: still no change.
    dns.setRecords({ [NAME]: { A: ['10.0.0.6', '10.0.0.5'] } });
    await afterQueries(3);
    expect(h.changes).toEqual([]);

    dns.setRecords({ [NAME]: { A: ['10.0.0.5', '10.0.0.7', '10.0.0.6'] } });
    await waitFor('onChange', () => h.changes.length > 0);
    await afterQueries(5); // and nothing more while the answer stays
    expect(h.changes.map(ids)).toEqual([['10.0.0.5:8000', '10.0.0.6:8000', '10.0.0.7:8000']]);
    expect(h.discovery.current?.backends).toEqual(h.changes[0]);
    expect(h.errors).toEqual([]);
  });

  it('a server that stops answering: onError (ETIMEOUT), the list is kept', async () => {
    dns.setRecords({ [NAME]: { A: ['10.0.0.5', '10.0.0.6'] } });
    const h = discover({ type: 'A' });
    const list = await h.discovery.start();
    dns.setMode('drop');
    await waitFor('2 errors', () => h.errors.length >= 2);
    const err = h.errors[0];
    expect(err).toBeInstanceOf(DnsDiscoveryError);
    expect((err as DnsDiscoveryError).code).toBe('ETIMEOUT');
    expect(err?.message).toContain(NAME);
    expect(err?.message).toContain('keeping the last 2 backends');
    expect(h.changes).toEqual([]);
    expect(h.discovery.current?.backends).toEqual(list);

    // SERVFAIL is a failure too, not "no backends".
    dns.setMode('servfail');
    await waitFor('a SERVFAIL error', () => h.errors.some((e) => (e as DnsDiscoveryError).code === 'ESERVFAIL'));
    expect(h.changes).toEqual([]);

    // Back again with the same records: nothing changed.
    dns.setMode('answer');
    const n = h.errors.length;
    await afterQueries(3);
    await sleep(INTERVAL);
    expect(h.errors.length).toBeLessThanOrEqual(n + 1); // at most the poll in flight at the switch
    expect(h.changes).toEqual([]);
    expect(h.discovery.current?.backends).toEqual(list);
  });

  it('one empty answer keeps the list; two in a row empty it', async () => {
    const good: Record<string, NameRecords> = { [NAME]: { A: ['10.0.0.5'] } };
    dns.setRecords(good);
    const h = discover({ type: 'A' });
    const list = await h.discovery.start();

    // One NXDOMAIN, then the records again.
    dns.setRecordsOnce({});
    await waitFor('the empty answer reported', () => h.errors.length === 1);
    expect((h.errors[0] as DnsDiscoveryError).code).toBe('ENOTFOUND');
    expect(h.errors[0]?.message).toContain('unless the next poll confirms');
    await afterQueries(3);
    expect(h.changes).toEqual([]);
    expect(h.discovery.current?.backends).toEqual(list);

    // NOERROR without records (ENODATA) twice in a row: now there are no backends.
    dns.setRecords({ [NAME]: { AAAA: ['fd00::5'] } });
    await waitFor('onChange to []', () => h.changes.length > 0);
    expect(h.changes).toEqual([[]]);
    expect(h.errors.length).toBe(2);
    expect((h.errors[1] as DnsDiscoveryError).code).toBe('ENODATA');
    await afterQueries(3); // still empty: no more changes or errors
    expect(h.changes).toEqual([[]]);
    expect(h.errors.length).toBe(2);

    // Records again: one change back.
    dns.setRecords(good);
    await waitFor('onChange back', () => h.changes.length > 1);
    expect(h.changes).toEqual([[], list]);
  });

  it('start() rejects clearly when the name does not exist, has no records or nobody answers', async () => {
    dns.setRecords({ [NAME]: { AAAA: ['fd00::5'] } });
    const missing = discover({ type: 'SRV', name: '_http._tcp.nope.default.svc.cluster.local' });
    await expect(missing.discovery.start()).rejects.toThrow(
      'DNS discovery of SRV _http._tcp.nope.default.svc.cluster.local failed: ENOTFOUND (the name does not exist); no backends found',
    );
    await expect(discover({ type: 'A' }).discovery.start()).rejects.toThrow(`DNS discovery of A ${NAME} failed: ENODATA`);
    dns.setMode('drop');
    const silent = discover({ type: 'A' });
    const err = await silent.discovery.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DnsDiscoveryError);
    expect((err as DnsDiscoveryError).code).toBe('ETIMEOUT');
    expect((err as Error).message).toContain(NAME);
    // A failed start does not poll.
    dns.setMode('answer');
    const seen = dns.queries.length;
    await sleep(INTERVAL * 4);
    expect(dns.queries.length).toBe(seen);
    expect(missing.errors).toEqual([]);
    expect(missing.changes).toEqual([]);
  });

  it('stop(): no more queries or callbacks, and no timer holds the event loop', async () => {
    const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    dns.setRecords({ [NAME]: { A: ['10.0.0.5'] } });
    const h = discover({ type: 'A' });
    const before = timers();
    await h.discovery.start();
    await afterQueries(2);
    // The poll timer is unref'd: it never shows up among the resources keeping the loop alive.
    expect(timers()).toBeLessThanOrEqual(before);
    h.discovery.stop();
    const seen = dns.queries.length;
    dns.setRecords({ [NAME]: { A: ['10.0.0.9'] } });
    await sleep(INTERVAL * 5);
    expect(dns.queries.length).toBe(seen);
    expect(h.changes).toEqual([]);
    expect(h.errors).toEqual([]);
    await expect(h.discovery.start()).rejects.toThrow('start() after stop()');
  });

  it('a polling discovery does not keep a process alive (built module, child process)', async () => {
    const built = join(ROOT, 'dist/src/backends/discovery.js');
    expect(existsSync(built), `${built} missing: run npm run build`).toBe(true);
    dns.setRecords({ [NAME]: { A: ['10.0.0.5'] } });
    const script = `
      const { DnsDiscovery } = await import(${JSON.stringify(pathToFileURL(built).href)});
      const d = new DnsDiscovery({ name: ${JSON.stringify(NAME)}, type: 'A', port: 8000, intervalMs: 20, servers: [${JSON.stringify(dns.address)}] }, () => {}, () => {});
      const list = await d.start();
      console.log(JSON.stringify(list.map((b) => b.id)));
      // no stop(): the process must still end on its own
    `;
    const started = Date.now();
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 10_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
      );
    });
    expect(JSON.parse(out)).toEqual(['10.0.0.5:8000']);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
