// A real Gateway in the test's own process (not a child), for tests that read its state or give
// it a clock: one backend, the admin port off unless asked, logs silent. The config file is
// written into the test's temp directory (removed by the test).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
 * Both HTTP/1.1 fronts in front of one backend, for tests that hold a WebSocket path to both:
 * health checks off (the backend need not answer them), WebSockets on /ws/.
 */
export async function startBothFronts(dir: string, backendUrl: string): Promise<BothFronts> {
  const start = (leanPages: boolean): Promise<Gateway> => startInProcessGateway(dir, backendUrl, { health: { path: null }, proxy: { leanPages, websocketPaths: ['/ws/'] } });
  const [lean, node] = await Promise.all([start(true), start(false)]);
  return { lean, node };
}
