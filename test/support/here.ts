// The gateways and demo backends of test/support/processes.ts, started in the test's own process
// instead of as children: a node process costs about 0.75 s of CPU just loading its modules, so a
// test that does not need the process itself (no signal, exit code, kill -9 or the binary's own
// output) starts them here. startGatewayHere takes startGateway's options and loads its
// configuration as `roomgate start` would (the same file, environment and --backend flags), and
// keeps its log lines (debug, as the processes log) for logs(). Everything started here is
// stopped by stopAllHere(), which also removes its config file's temp dir (a file that never
// calls stopAll() must not leave it in /tmp).
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { startDemoBackend, type DemoBackend, type DemoBackendOptions } from '../../examples/demo-backend/server.js';
import { backendKeys } from '../../src/http/call-proof.js';
import { loadConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { CALL_SECRET, gatewayConfigFile, gatewayEnv, type GatewayOptions } from './processes.js';

export interface BackendHere {
  readonly id: string;
  readonly port: number;
  readonly url: string;
  readonly backend: DemoBackend;
}

export interface GatewayHere {
  readonly gateway: Gateway;
  readonly port: number;
  readonly adminPort: number;
  readonly url: string;
  readonly wsUrl: string;
  /** Log lines (JSON text, as the process writes them) so far. */
  readonly lines: string[];
  /** Log lines (parsed JSON) so far. */
  logs(): Record<string, unknown>[];
  /** A graceful stop, as SIGTERM gives the process. */
  stop(): Promise<void>;
}

const backends = new Set<DemoBackend>();
/** Every gateway started here, with its config file (undefined: none). */
const gateways = new Map<Gateway, string | undefined>();

function removeConfig(file: string | undefined): void {
  if (file !== undefined) rmSync(dirname(file), { recursive: true, force: true });
}

/** A demo backend (examples/demo-backend) with its call key from CALL_SECRET, as startBackend's. */
export async function startBackendHere(id: string, opts: Partial<DemoBackendOptions> = {}): Promise<BackendHere> {
  const backend = await startDemoBackend({ id, port: 0, callKeys: backendKeys([CALL_SECRET], id), ...opts });
  backends.add(backend);
  return { id, port: backend.port, url: `http://127.0.0.1:${backend.port}`, backend };
}

export function startBackendsHere(ids: readonly string[]): Promise<BackendHere[]> {
  return Promise.all(ids.map((id) => startBackendHere(id)));
}

/** startGateway's gateway, in this process. */
export async function startGatewayHere(o: GatewayOptions = {}): Promise<GatewayHere> {
  const lines: string[] = [];
  const file = gatewayConfigFile(o);
  const config = loadConfig({
    env: gatewayEnv(o.env),
    file,
    overrides: { port: '0', backends: (o.backends ?? []).map((b) => (typeof b === 'string' ? b : `${b.id}=${b.url}`)) },
  });
  const logger = createLogger(config.log.level, { write: (line: string) => void lines.push(line) });
  const gateway = new Gateway(config, { logger });
  gateways.set(gateway, file);
  await gateway.start();
  const { port } = gateway;
  return {
    gateway,
    port,
    adminPort: gateway.adminPort ?? 0,
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    lines,
    logs: () =>
      lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      }),
    stop: () =>
      gateway.stop().finally(() => {
        gateways.delete(gateway);
        removeConfig(file);
      }),
  };
}

/**
 * Stops every gateway and backend started here. The gateways with no grace period: what a test
 * left open is closed at once, as stopAll's SIGKILL does to a process.
 */
export async function stopAllHere(): Promise<void> {
  await Promise.all(
    [...gateways].map(async ([g, file]) => {
      g.config = { ...g.config, shutdown: { ...g.config.shutdown, graceMs: 0, readinessDelayMs: 0 } };
      await g.stop();
      removeConfig(file);
    }),
  );
  gateways.clear();
  await Promise.all([...backends].map((b) => b.close()));
  backends.clear();
}
