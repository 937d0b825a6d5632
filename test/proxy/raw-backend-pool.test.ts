// The byte-level page path's backend connections: kept per backend *and address*, so a reload
// that moves a backend (same id, new URL) never sends a request to the old address; an idle
// connection whose idle timeout fired is never handed to a request, even one read in the same
// turn of the event loop (its 'close' comes only later); `fresh` always opens a new connection.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawBackendPool, type RawBackendConn, type RawBackendUser } from '../../src/proxy/raw-backend-pool.js';

const servers: Server[] = [];
const accepted = new Map<number, Socket[]>();

async function listen(): Promise<number> {
  const server = createServer((s) => {
    const port = (server.address() as AddressInfo).port;
    accepted.set(port, [...(accepted.get(port) ?? []), s]);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

const quiet: RawBackendUser = { onData: () => undefined, onGone: () => undefined };

function connected(socket: Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!socket.connecting) return resolve();
    socket.once('connect', () => resolve());
    socket.once('error', reject);
    setTimeout(() => reject(new Error('connect timed out')), 5_000).unref();
  });
}

let portA = 0;
let portB = 0;
beforeAll(async () => {
  portA = await listen();
  portB = await listen();
});
afterAll(async () => {
  for (const list of accepted.values()) for (const s of list) s.destroy();
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
});

describe('RawBackendPool', () => {
  it('reuses an idle connection for the same backend and address, and opens a new one when the address changed', async () => {
    const pool = new RawBackendPool(4, 30_000);
    try {
      const first = pool.acquire('b1', '127.0.0.1', portA, quiet);
      await connected(first.socket);
      pool.release(first);
      const again = pool.acquire('b1', '127.0.0.1', portA, quiet);
      expect(again).toBe(first);
      expect(again.uses).toBe(2);
      pool.release(again);
      // b1 moved to another port (a reload): the pooled connection to the old one is not used.
      const moved = pool.acquire('b1', '127.0.0.1', portB, quiet);
      expect(moved).not.toBe(first);
      await connected(moved.socket);
      expect(moved.socket.remotePort).toBe(portB);
      pool.release(moved);
    } finally {
      pool.close();
    }
  });

  it('a connection whose idle timeout fired is not taken by a request in the same turn', async () => {
    const pool = new RawBackendPool(4, 30);
    try {
      const first = pool.acquire('b1', '127.0.0.1', portA, quiet);
      await connected(first.socket);
      pool.release(first);
      const next = await new Promise<RawBackendConn>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no idle timeout in 5 s')), 5_000);
        // Listeners run in order: the pool's own 'timeout' listener (registered first) ran already.
        first.socket.once('timeout', () => {
          clearTimeout(timer);
          resolve(pool.acquire('b1', '127.0.0.1', portA, quiet));
        });
      });
      expect(first.socket.destroyed).toBe(true);
      expect(next).not.toBe(first);
      expect(next.uses).toBe(1);
    } finally {
      pool.close();
    }
  });

  it('a request that asks for a fresh connection gets one, and the idle one stays for the next', async () => {
    const pool = new RawBackendPool(4, 30_000);
    try {
      const first = pool.acquire('b1', '127.0.0.1', portA, quiet);
      await connected(first.socket);
      pool.release(first);
      const fresh = pool.acquire('b1', '127.0.0.1', portA, quiet, true);
      expect(fresh).not.toBe(first);
      expect(pool.acquire('b1', '127.0.0.1', portA, quiet)).toBe(first);
      fresh.socket.destroy();
    } finally {
      pool.close();
    }
  });
});
