// A real Gateway in the test's own process (not a child), for tests that read its state or give
// it a clock: one backend, the admin port off unless asked, logs silent. The config file is
// written into the test's temp directory (removed by the test).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { Gateway, type GatewayOptions } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';

let files = 0;

/** Starts a gateway in front of `backendUrl`; `config` is merged over the test defaults (top-level keys). */
export async function startInProcessGateway(dir: string, backendUrl: string, config: Record<string, unknown>, opts: Partial<GatewayOptions> = {}): Promise<Gateway> {
  const file = join(dir, `gateway-${process.pid}-${++files}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      listen: { host: '127.0.0.1', port: 0 },
      admin: { enabled: false },
      backends: [{ id: 'b1', url: backendUrl }],
      cookie: { secrets: ['0123456789abcdef0123456789abcdef'] },
      shutdown: { graceMs: 0 },
      log: { level: 'silent' },
      ...config,
    }),
  );
  const g = new Gateway(loadConfig({ env: {}, file }), { logger: createLogger('silent'), ...opts });
  await g.start();
  return g;
}

/** One gateway per HTTP/1.1 front: the byte-level one (`lean`) and node:http alone (`node`). */
export type BothFronts = Record<'lean' | 'node', Gateway>;

/**
 * Both HTTP/1.1 fronts in front of one backend, for a test file that holds a WebSocket path to
 * both: health checks off (the backend need not answer them), WebSockets on /ws/. Before the
 * file's tests `backend` listens and both start (the returned object is filled then); after them
 * both stop, `backendSockets` are destroyed, the backend closes and the temp directory goes.
 */
export function bothFrontsFor(backend: Server, backendSockets: Iterable<Socket>): BothFronts {
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-both-fronts-'));
  const fronts = {} as { lean: Gateway; node: Gateway };
  beforeAll(async () => {
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
    const start = (leanPages: boolean): Promise<Gateway> => startInProcessGateway(dir, url, { health: { path: null }, proxy: { leanPages, websocketPaths: ['/ws/'] } });
    [fronts.lean, fronts.node] = await Promise.all([start(true), start(false)]);
  });
  afterAll(async () => {
    await Promise.all(Object.values(fronts).map((g) => g.stop()));
    for (const s of backendSockets) s.destroy();
    await new Promise<void>((resolve) => backend.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });
  return fronts;
}

/** One gateway per relay (proxy.relay): the JavaScript relay and the native one. */
export type BothRelays = Record<'javascript' | 'native', Gateway>;

/** `p`, or a warning after `ms`: a gateway whose native relay lost a tunnel would not finish stopping. */
export async function bounded(p: Promise<unknown>, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise<void>((resolve) => (timer = setTimeout(() => (console.warn(`${what}: not within ${ms} ms`), resolve()), ms)))]).finally(() => clearTimeout(timer));
}

/**
 * Both relays in front of one backend, for a test file that compares them: health checks off,
 * WebSockets on /ws/. As bothFrontsFor: before the file's tests `backend` listens and both start;
 * after them `clients` and `backendSockets` are destroyed, both stop (bounded), the backend closes
 * and the temp directory goes.
 */
export function bothRelaysFor(backend: Server, backendSockets: Iterable<Socket>, clients: Iterable<Socket>): BothRelays {
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-both-relays-'));
  const relays = {} as BothRelays;
  beforeAll(async () => {
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
    const start = (relay: 'javascript' | 'native'): Promise<Gateway> => startInProcessGateway(dir, url, { health: { path: null }, proxy: { relay, websocketPaths: ['/ws/'] } });
    [relays.javascript, relays.native] = await Promise.all([start('javascript'), start('native')]);
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    for (const s of backendSockets) s.destroy();
    await bounded(Promise.all(Object.values(relays).map((g) => g?.stop())), 8_000, 'the gateways stopping');
    await bounded(new Promise<void>((resolve) => backend.close(() => resolve())), 4_000, 'the backend closing');
    rmSync(dir, { recursive: true, force: true });
  }, 15_000);
  return relays;
}
