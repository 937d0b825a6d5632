// The cluster several chaos scenarios run on: a redis-server, demo backends, two gateways sharing
// the Redis (each with the config the scenario gives it, both connected to Redis before the
// scenario starts), and a SplitWatcher sampling the backends. `backends` is the array the watcher
// reads: a scenario that restarts a backend puts the new process at the same index.
// stopTwoGateways() tears down what this and the harness started.
import { startBackends, startGateway, stopAll, waitFor, type BackendProc, type GatewayProc } from './processes.js';
import { startRedis, stopAllRedis } from './redis.js';
import { SplitWatcher, adminGet, witnessOf } from './room-clients.js';

export interface TwoGateways {
  readonly redisUrl: string;
  readonly backends: BackendProc[];
  readonly gwA: GatewayProc;
  readonly gwB: GatewayProc;
  readonly watcher: SplitWatcher;
}

/** Starts the cluster; `config` is each gateway's config, given Redis's URL and the backends; `backendArgs`: each backend's extra arguments. */
export async function startTwoGateways(
  ids: readonly string[],
  config: (redisUrl: string, backends: readonly BackendProc[]) => Record<string, unknown>,
  env?: Record<string, string>,
  backendArgs: string[] = [],
): Promise<TwoGateways> {
  const redis = await startRedis();
  const backends = await startBackends(ids, backendArgs);
  const gateway = (): Promise<GatewayProc> => startGateway({ config: config(redis.url, backends), ...(env ? { env } : {}) });
  const [gwA, gwB] = await Promise.all([gateway(), gateway()]);
  for (const gw of [gwA, gwB]) await waitFor('gateway connected to Redis', 10_000, async () => (await adminGet<{ degraded: boolean }>(gw, '/status')).degraded === false, 50);
  const watcher = new SplitWatcher(() => witnessOf(backends), 100);
  watcher.start();
  return { redisUrl: redis.url, backends, gwA, gwB, watcher };
}

/** Stops the watcher, then `stopClients` (the scenario's own clients), then every process and Redis. */
export async function stopTwoGateways(t: TwoGateways | undefined, stopClients: () => void): Promise<void> {
  await t?.watcher.stop();
  stopClients();
  await stopAll();
  await stopAllRedis();
}
