// Pooled backend connections are closed by roomgate after proxy.backendIdleTimeoutMs of idleness,
// before a backend's own keep-alive timeout could close one just as a request with a body goes
// out on it (that request would fail with 502: only bodyless requests are retried). The backend
// here keeps connections open for a minute, so any close seen is roomgate's.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, startGateway, stop, stopAll, waitFor } from '../support/processes.js';

let backend: http.Server;
let port = 0;
/** Per backend connection: when it opened and closed (ms since the epoch). */
const conns: { opened: number; closed: number | null }[] = [];
/** Health checks every minute only: fewer connections that are not the pool's. */
const QUIET_HEALTH = { intervalMs: 60_000 };

beforeAll(async () => {
  // A connection counts from its first request: the gateway's health checks (a TCP connect) carry
  // none, and a slow, loaded run once saw one land between two requests.
  const counted = new WeakSet<Socket>();
  backend = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const s = req.socket;
    if (!counted.has(s)) {
      counted.add(s);
      const c = { opened: Date.now(), closed: null as number | null };
      conns.push(c);
      s.on('close', () => (c.closed = Date.now()));
    }
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', () => r()));
  port = (backend.address() as AddressInfo).port;
});

afterAll(async () => {
  await stopAll();
  backend.closeAllConnections();
  await new Promise<void>((r) => backend.close(() => r()));
});

/** Answers one proxied request and returns when the response has fully arrived. */
async function oneRequest(gwPort: number, method = 'GET'): Promise<number> {
  const a = await httpRequest(gwPort, '/page?room=keepalive', { method, headers: { Host: 'app.test' }, ...(method === 'POST' ? { body: 'x'.repeat(100) } : {}) });
  expect(a.status).toBe(200);
  return Date.now();
}

describe('idle backend connections', () => {
  it('are closed by roomgate after backendIdleTimeoutMs, and the next request opens a new one', async () => {
    const gw = await startGateway({ backends: [`ka=http://127.0.0.1:${port}`], config: { proxy: { backendIdleTimeoutMs: 500 }, health: QUIET_HEALTH } });
    try {
      conns.length = 0;
      const answered = await oneRequest(gw.port);
      expect(conns).toHaveLength(1);
      await waitFor('the pooled connection closed', 5_000, () => conns[0]?.closed !== null);
      // Not before the idle limit (a lower bound, which no slow machine breaks); and roomgate's doing,
      // not the backend's: its keepAliveTimeout is 60 s, far past the 5 s guard above.
      const idle = (conns[0]?.closed as number) - answered;
      expect(idle).toBeGreaterThanOrEqual(300);
      await oneRequest(gw.port, 'POST');
      expect(conns).toHaveLength(2);
    } finally {
      await stop(gw);
    }
  });

  // GET and HEAD (the byte-level path) and requests with a body (node:http's path) keep their
  // own pools of backend connections: each is checked.
  it.each(['GET', 'POST'])('are reused while they are younger than backendIdleTimeoutMs (%s)', async (method) => {
    const gw = await startGateway({ backends: [`ka=http://127.0.0.1:${port}`], config: { proxy: { backendIdleTimeoutMs: 30_000 }, health: QUIET_HEALTH } });
    try {
      conns.length = 0;
      await oneRequest(gw.port, method);
      await new Promise((r) => setTimeout(r, 1_000));
      await oneRequest(gw.port, method);
      expect(conns).toHaveLength(1);
      expect(conns[0]?.closed).toBeNull();
    } finally {
      await stop(gw);
    }
  });
});
