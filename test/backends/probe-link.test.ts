// Which connection a health check gets (src/backends/probe-link.ts): the addon's native probe for a
// plain check of an IP address, a Node socket for an https backend or a host name (the kept
// answers and Node's address selection stay the one way names are connected); and the gateway
// wires the native probe exactly when it runs the native relay. Real checks against real servers:
// the addon is the real one, only counted on its way through.
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { HealthChecker, type HealthResult } from '../../src/backends/health.js';
import { nativeProbe, type ProbeAddon } from '../../src/backends/probe-link.js';
import { chooseRelay } from '../../src/proxy/native-relay.js';
import { signedServer } from '../support/certs.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { waitFor } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const addon = chooseRelay('native').addon as ProbeAddon;
const dir = scopeTempDir('roomgate-probe-link-');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The real addon, each probeOpen counted. */
function counted(): { addon: ProbeAddon; opened: () => number } {
  let n = 0;
  return {
    addon: {
      probeOpen: (...args) => {
        n++;
        return addon.probeOpen(...args);
      },
      probeClose: (h) => addon.probeClose(h),
    },
    opened: () => n,
  };
}

async function listen(server: net.Server, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((r) => server.listen(0, host, r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  server.on('connection', (s: net.Socket) => cleanups.push(() => void s.destroy()));
  return (server.address() as net.AddressInfo).port;
}

/** The first result of one check of `host:port` (a long interval: no second check). */
async function firstCheck(addonUsed: ProbeAddon, host: string, port: number, extra: { tls?: boolean; ca?: string | Buffer } = {}): Promise<HealthResult> {
  const checker = new HealthChecker(
    {
      path: '/h',
      intervalMs: 600_000,
      timeoutMs: 10_000,
      rise: 1,
      fall: 1,
      open: nativeProbe(addonUsed),
      ...(extra.ca ? { tls: { verify: true, servername: null, context: tls.createSecureContext({ ca: extra.ca }), clientCert: false } } : {}),
    },
    () => undefined,
  );
  cleanups.push(() => checker.stop());
  checker.setTargets([{ id: 'b', host, port, ...(extra.tls ? { tls: true } : {}) }]);
  return waitFor('the check', 10_000, () => checker.history('b')[0]);
}

describe('nativeProbe', () => {
  it('takes a plain check of an IPv4 or IPv6 address through the addon', async () => {
    const c = counted();
    const v4 = await listen(http.createServer((_q, r) => r.end('ok')));
    expect(await firstCheck(c.addon, '127.0.0.1', v4)).toMatchObject({ ok: true });
    expect(c.opened()).toBe(1);
    const v6 = await listen(http.createServer((_q, r) => r.end('ok')), '::1');
    expect(await firstCheck(c.addon, '::1', v6)).toMatchObject({ ok: true });
    expect(c.opened()).toBe(2);
  });

  it('leaves a host name and an https backend to a Node socket, with the same verdicts', async () => {
    const c = counted();
    const plain = await listen(http.createServer((_q, r) => r.end('ok')));
    expect(await firstCheck(c.addon, 'localhost', plain)).toMatchObject({ ok: true });
    const files = signedServer(dir, ['127.0.0.1']);
    const secure = await listen(https.createServer({ cert: readFileSync(files.cert), key: readFileSync(files.key) }, (_q, r) => r.writeHead(503).end()));
    expect(await firstCheck(c.addon, '127.0.0.1', secure, { tls: true, ca: files.ca })).toMatchObject({ ok: false, error: 'HTTP 503' });
    expect(c.opened()).toBe(0);
  });
});

describe('a check whose connection cannot even start', () => {
  it('an address the addon refuses (a long IPv6 scope id, as a discovered record may hold) goes to a Node socket: a failed check, nothing thrown', async () => {
    const c = counted();
    const odd = `fe80::1%${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}`;
    expect(net.isIP(odd)).toBe(6);
    expect(() => addon.probeOpen(odd, 80, Buffer.alloc(0), () => undefined)).toThrow(/IP address|probeOpen/);
    const checker = new HealthChecker({ path: null, intervalMs: 600_000, timeoutMs: 300, rise: 1, fall: 1, open: nativeProbe(c.addon) }, () => undefined);
    cleanups.push(() => checker.stop());
    checker.setTargets([{ id: 'odd', host: odd, port: 80 }]);
    const result = await waitFor('the check', 10_000, () => checker.history('odd')[0]);
    expect(result.ok).toBe(false);
    expect(c.opened()).toBe(1); // asked, refused, and the socket took it
  });

  it('an opener that throws fails the check with its reason instead of rejecting it', async () => {
    const checker = new HealthChecker(
      {
        path: '/h',
        intervalMs: 600_000,
        timeoutMs: 1_000,
        rise: 1,
        fall: 1,
        open: () => {
          throw new Error('no descriptors left');
        },
      },
      () => undefined,
    );
    cleanups.push(() => checker.stop());
    checker.setTargets([{ id: 'b', host: '127.0.0.1', port: 9 }]);
    expect(await waitFor('the check', 10_000, () => checker.history('b')[0])).toMatchObject({ ok: false, error: 'cannot connect: no descriptors left' });
  });
});

describe('the gateway', () => {
  // Node's sockets connect through net.Socket.prototype.connect; the native probe does not. Counted
  // on the way through (the connection is made as before), per destination port.
  function countSocketConnects(port: number): () => number {
    const original = net.Socket.prototype.connect;
    let n = 0;
    net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
      // net.connect passes its normalized arguments as one array.
      const o = (Array.isArray(args[0]) ? args[0][0] : args[0]) as { port?: unknown } | undefined;
      if (typeof o === 'object' && o !== null && Number(o.port) === port) n++;
      return (original as (...a: unknown[]) => net.Socket).apply(this, args);
    } as typeof original;
    cleanups.push(() => void (net.Socket.prototype.connect = original));
    return () => n;
  }

  it.each([
    ['native', false],
    ['javascript', true],
  ] as const)('with proxy.relay: %s checks its backends through the native probe exactly when the native relay runs', async (relay, onSockets) => {
    let requests = 0;
    const port = await listen(
      http.createServer((_q, r) => {
        requests++;
        r.end('ok');
      }),
    );
    const sockets = countSocketConnects(port);
    const g = await startInProcessGateway(dir, `http://127.0.0.1:${port}`, { health: { path: '/h', intervalMs: 100, timeoutMs: 100 }, proxy: { relay } });
    cleanups.push(() => g.stop());
    await waitFor('3 checks', 10_000, () => requests >= 3);
    await g.stop();
    // With the native relay no check went through a Node socket; with the JavaScript one, every one.
    expect(sockets()).toBe(onSockets ? requests : 0);
  });
});
