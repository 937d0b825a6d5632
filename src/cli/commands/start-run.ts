// What `roomgate start` does (src/cli/commands/start.ts says what it is): run the gateway, one
// process or a primary and N workers; with no backends configured, the demo and its banner.
import { parseBalance, parseWorkers, type Balance } from '../../cluster/count.js';
import { runPrimary } from '../../cluster/primary.js';
import { isClusterWorker, runWorker } from '../../cluster/worker.js';
import type { LoadedConfig } from '../../config/load.js';
import { DemoBackends, isDemo } from '../../demo/demo-mode.js';
import { Gateway } from '../../gateway.js';
import { onStopSignals } from '../../lifecycle/signals.js';
import { createLogger } from '../../observability/logger.js';
import { flag, str, UsageError, type Parsed, type Values } from '../args.js';
import { KEEP_RUNNING } from '../command.js';
import { loadChecked } from '../checked-config.js';
import { configSource, loadFrom, type ConfigSource } from '../config.js';
import { showDemoBanner } from '../demo-banner.js';

/** The option if given, else its environment variable; a bad value is a usage error naming its source. */
function optionOrEnv<T>(values: Values, name: string, env: string, parse: (value: string | undefined, source: string) => T): T {
  const given = str(values, name);
  try {
    return given !== undefined ? parse(given, `--${name}`) : parse(process.env[env], env);
  } catch (err) {
    throw new UsageError((err as Error).message, 'see: roomgate start --help');
  }
}

/** One process: the gateway (and the demo backends), until a signal. */
async function startOne(config: LoadedConfig, source: ConfigSource, json: boolean): Promise<void> {
  const logger = createLogger(config.log.level);
  const demo = isDemo(config) ? new DemoBackends(config, logger, source) : null;
  let gateway: Gateway | null = null;
  // A signal during start-up is held until start-up ends (every step of it has a timeout), then
  // acted on: dying half-way would orphan the demo backends already started.
  const signals = onStopSignals({
    onSignal: (signal, n) => {
      if (n === 1 && gateway === null) logger.warn({ signal }, 'signal during start-up: stopping once start-up has finished');
    },
    graceful: (signal) => {
      logger.info({ signal }, 'shutdown requested');
      (gateway?.stop() ?? Promise.resolve())
        .then(() => demo?.stop())
        .then(
          () => {
            logger.flush();
            process.exit(0);
          },
          (err: Error) => {
            logger.error({ err: err.message }, 'shutdown failed');
            process.exit(1);
          },
        );
    },
    immediate: (signal) => {
      logger.warn({ signal }, 'second signal: exiting now');
      demo?.killNow();
    },
  });
  if (demo) {
    await demo.start();
    config = demo.configFor(config);
  }
  const gw = new Gateway(config, { logger });
  try {
    await gw.start();
  } catch (err) {
    signals.dispose();
    await demo?.stop();
    throw err;
  }
  gateway = gw;
  if (demo) showDemoBanner(demo, config, { port: gw.port, adminPort: gw.adminPort }, source, json);
  signals.ready();
  // SIGHUP: re-read the configuration; the backend list is applied without dropping a socket.
  process.on('SIGHUP', () => {
    try {
      const next = loadFrom(source);
      gw.reload(demo ? demo.configFor(next) : next);
    } catch (err) {
      logger.error({ err: (err as Error).message }, 'reload refused: the running configuration stays');
    }
  });
}

export async function runStart({ values }: Parsed): Promise<number> {
  // A worker of `start --workers N` (forked by the primary, same arguments) runs the
  // configuration the primary sends it.
  if (isClusterWorker()) {
    await runWorker();
    return KEEP_RUNNING;
  }
  const workers = optionOrEnv(values, 'workers', 'ROOMGATE_WORKERS', (v, src) => parseWorkers(v, src));
  // Checked with one process too: a typo is an error, not a setting that waits for --workers.
  const balance: Balance = optionOrEnv(values, 'balance', 'ROOMGATE_BALANCE', (v, src) => parseBalance(v, src));
  const source = configSource(values);
  // Every problem at once, certificate files included, before anything starts (exit 2).
  const config = loadChecked(source);
  const json = flag(values, 'json');
  if (workers === 1) {
    await startOne(config, source, json);
    return KEEP_RUNNING;
  }
  const demo = isDemo(config) ? new DemoBackends(config, createLogger(config.log.level).child({ role: 'primary' }), source) : undefined;
  const running = demo ? demo.configFor(config) : config;
  await runPrimary(running, {
    workers,
    balance,
    sidecars: demo,
    reloadConfig: () => loadFrom(source),
    onListening: ({ port, adminPort }) => {
      if (demo) showDemoBanner(demo, running, { port, adminPort }, source, json);
    },
  });
  return KEEP_RUNNING;
}
