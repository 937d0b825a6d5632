// Backend host names resolved once and kept (src/backends/host-addresses.ts), against a real DNS
// server (test/support/dns-server.ts) and real TCP listeners: a kept answer opens connections
// while the resolver does not answer, a changed address is followed after the refresh interval, a
// failed refresh keeps the last good answer.
import { Resolver } from 'node:dns/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HostAddresses, type LookupFunction } from '../../src/backends/host-addresses.js';
import { TestDnsServer } from '../support/dns-server.js';

let dns: TestDnsServer;
const servers: Server[] = [];

beforeAll(async () => {
  dns = await TestDnsServer.start();
});
afterAll(async () => {
  await dns.close();
});
afterEach(async () => {
  dns.setMode('answer');
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A listener on `host` that tells each client which listener it reached. */
async function listener(host: string, name: string): Promise<number> {
  const server = createServer((s) => s.end(name));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as { port: number }).port;
}

/** The kept-address cache over the test DNS server, on a clock the test moves. */
function addresses(refreshMs = 1_000): { hosts: HostAddresses; clock: { now: number }; settled: () => Promise<void> } {
  const r = new Resolver({ timeout: 1_500, tries: 1 });
  r.setServers([`127.0.0.1:${dns.port}`]);
  const clock = { now: 1_000_000 };
  let last: Promise<unknown> = Promise.resolve();
  const hosts = new HostAddresses({
    refreshMs,
    now: () => clock.now,
    resolve: (host) => {
      const asked = r.resolve4(host).then((list) => list.map((address) => ({ address, family: 4 })));
      last = asked;
      return asked;
    },
  });
  // The last query answered (or failed), and the cache has taken its answer.
  const settled = async (): Promise<void> => {
    await last.catch(() => undefined);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { hosts, clock, settled };
}

/** Connects through `lookup` and reads which listener answered. */
function reach(host: string, port: number, lookup: LookupFunction): Promise<string> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ host, port, lookup });
    let got = '';
    s.setTimeout(5_000, () => s.destroy(new Error('no answer in 5 s')));
    s.on('data', (d) => (got += String(d)));
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
}

function lookupOnce(hosts: HostAddresses, name: string, options: Parameters<LookupFunction>[1]): Promise<unknown> {
  return new Promise((resolve, reject) => hosts.lookup(name, options, (err, address, family) => (err ? reject(err) : resolve({ address, family }))));
}

const queriesFor = (name: string): number => dns.queries.filter((q) => q === `A ${name}`).length;

describe('backend host addresses', () => {
  it('resolves a name once: later connections use the kept address without asking the resolver', async () => {
    const port = await listener('127.0.0.1', 'one');
    dns.setRecords({ 'app-1.test': { A: ['127.0.0.1'] } });
    const { hosts } = addresses();
    const before = queriesFor('app-1.test');
    // Concurrent first lookups share one query.
    expect(await Promise.all([reach('app-1.test', port, hosts.lookup), reach('app-1.test', port, hosts.lookup)])).toEqual(['one', 'one']);
    expect(await reach('app-1.test', port, hosts.lookup)).toBe('one');
    expect(queriesFor('app-1.test') - before).toBe(1);
  });

  it('opens a connection on the kept address while the resolver does not answer', async () => {
    const port = await listener('127.0.0.1', 'kept');
    dns.setRecords({ 'app-2.test': { A: ['127.0.0.1'] } });
    const { hosts, clock } = addresses();
    expect(await reach('app-2.test', port, hosts.lookup)).toBe('kept');
    dns.setMode('drop');
    clock.now += 5_000;
    const before = queriesFor('app-2.test');
    // The refresh is asked (and not answered); the connection does not wait for it.
    expect(await reach('app-2.test', port, hosts.lookup)).toBe('kept');
    expect(queriesFor('app-2.test')).toBe(before + 1);
    expect(hosts.addressesOf('app-2.test')).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('follows a changed address once the kept one is older than the refresh interval', async () => {
    const oldPort = await listener('127.0.0.1', 'old');
    dns.setRecords({ 'app-3.test': { A: ['127.0.0.1'] } });
    const { hosts, clock, settled } = addresses();
    expect(await reach('app-3.test', oldPort, hosts.lookup)).toBe('old');
    dns.setRecords({ 'app-3.test': { A: ['127.0.0.2'] } });
    // Younger than refreshMs: not asked again.
    clock.now += 500;
    await lookupOnce(hosts, 'app-3.test', {});
    expect(hosts.addressesOf('app-3.test')[0]?.address).toBe('127.0.0.1');
    clock.now += 1_000;
    await lookupOnce(hosts, 'app-3.test', {});
    await settled();
    expect(hosts.addressesOf('app-3.test')[0]?.address).toBe('127.0.0.2');
    const newPort = await listener('127.0.0.2', 'new');
    expect(await reach('app-3.test', newPort, hosts.lookup)).toBe('new');
  });

  it('keeps the last good answer when a refresh fails', async () => {
    dns.setRecords({ 'app-4.test': { A: ['127.0.0.1'] } });
    const { hosts, clock, settled } = addresses();
    await lookupOnce(hosts, 'app-4.test', {});
    dns.setMode('servfail');
    clock.now += 5_000;
    const before = queriesFor('app-4.test');
    await lookupOnce(hosts, 'app-4.test', {});
    await settled();
    expect(queriesFor('app-4.test')).toBe(before + 1);
    // The failed refresh counts as a try: no new query before refreshMs has passed again.
    await lookupOnce(hosts, 'app-4.test', {});
    await settled();
    expect(queriesFor('app-4.test')).toBe(before + 1);
    expect(await lookupOnce(hosts, 'app-4.test', {})).toEqual({ address: '127.0.0.1', family: 4 });
  });

  it('answers as dns.lookup would: all addresses, a family, an unknown name', async () => {
    dns.setRecords({ 'app-5.test': { A: ['127.0.0.1', '127.0.0.3'] } });
    const { hosts } = addresses();
    expect(await lookupOnce(hosts, 'app-5.test', { all: true })).toEqual({
      address: [
        { address: '127.0.0.1', family: 4 },
        { address: '127.0.0.3', family: 4 },
      ],
      family: undefined,
    });
    expect(await lookupOnce(hosts, 'app-5.test', { family: 4 })).toEqual({ address: '127.0.0.1', family: 4 });
    await expect(lookupOnce(hosts, 'app-5.test', { family: 6 })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    const port = await listener('127.0.0.1', 'x');
    await expect(reach('nowhere.test', port, hosts.lookup)).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });
});
