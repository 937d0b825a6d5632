#!/usr/bin/env node
// The roomgate command: start, check-config, where, sign.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseWorkers } from './cluster/count.js';
import { runPrimary } from './cluster/primary.js';
import { isClusterWorker, runWorker } from './cluster/worker.js';
import { redactUrlPassword } from './config/describe.js';
import { ConfigError, ENV_VARS, loadConfig, type ConfigOverrides, type LoadedConfig } from './config/load.js';
import { DemoBackends, isDemo, printDemoBanner, withDemoBackends } from './demo/demo-mode.js';
import { onStopSignals } from './lifecycle/signals.js';
import { Gateway, signerFor } from './gateway.js';
import { createLogger } from './observability/logger.js';
import { decide } from './placement/decide.js';
import { buildRing } from './placement/ring.js';
import { createRoomValidator } from './room/validate.js';

const USAGE = `Usage: roomgate <command> [options]

Commands:
  start                 run the gateway (with no backends configured: 3 demo backends too)
  check-config          validate the configuration and print it, without starting
  where ROOM [ROOM...]  which backend each room goes to (all backends assumed up)
  sign ROOM             print a signed room cookie value (for testing)
  drain BACKEND         stop placing new rooms on BACKEND; its rooms stay until they empty or
                        the deadline (--deadline 10m), then their sockets are closed
  undrain BACKEND       back to active
  maintenance BACKEND   no traffic at all (for a restart after a drain)
  status                the running gateway's backends (state, rooms, sockets)

Options:
  --config FILE         YAML configuration (default: $ROOMGATE_CONFIG, else built-in defaults)
  --backend URL         a backend, repeatable ("http://host:port" or "id=http://host:port");
                        replaces the configured list
  --port N              public port (default 8080)
  --workers N           start: N worker processes on the one port (1-64 or auto = one per
                        CPU; default 1 = one process, or $ROOMGATE_WORKERS)
  --json                where: print JSON
  --deadline D          drain: 90s, 10m, 1h (default 10m)
  --admin URL           drain/undrain/maintenance/status: the gateway's admin URL
                        (default http://127.0.0.1:9090 or $ROOMGATE_ADMIN_URL)
  --token T             admin token (default $ROOMGATE_ADMIN_TOKEN)
  -h, --help            this text
  -v, --version         the version

Environment: ${Object.keys(ENV_VARS).join(', ')}
Exit codes: 0 ok, 1 failure while running, 2 bad usage or configuration.`;

class UsageError extends Error {}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function start(config: LoadedConfig, opts: { file: string | undefined; overrides: ConfigOverrides }): Promise<void> {
  const logger = createLogger(config.log.level);
  const demo = isDemo(config) ? new DemoBackends(config, logger) : null;
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
  if (demo) printDemoBanner(gw.port, gw.adminPort, demo.backends);
  signals.ready();
  // SIGHUP: re-read the configuration; the backend list is applied without dropping a socket.
  process.on('SIGHUP', () => {
    try {
      const next = loadConfig({ file: opts.file, overrides: opts.overrides });
      gw.reload(demo ? demo.configFor(next) : next);
    } catch (err) {
      logger.error({ err: (err as Error).message }, 'reload refused: the running configuration stays');
    }
  });
}

function checkConfig(config: LoadedConfig): void {
  const redact = (s: string): string => (s ? '<redacted>' : '');
  const shown = {
    ...config,
    cookie: { ...config.cookie, secrets: config.cookie.secrets.map(redact) },
    admin: { ...config.admin, token: redact(config.admin.token) },
    api: { ...config.api, tokens: config.api.tokens.map(redact) },
    // Only the password of the URL is secret: host, port and db stay readable.
    redis: { ...config.redis, url: config.redis.url === null ? null : redactUrlPassword(config.redis.url) },
  };
  process.stdout.write(`configuration is valid\n${JSON.stringify(shown, null, 2)}\n`);
  if (isDemo(config)) {
    process.stdout.write(`note: no backends configured; start will run ${config.demo.backends} demo backends\n`);
  }
  if (config.cookie.signed && config.cookie.secrets.length === 0) {
    process.stdout.write('note: no cookie secret; start will generate one and room cookies will not survive a restart\n');
  }
}

function where(config: LoadedConfig, rooms: readonly string[], json: boolean): number {
  if (rooms.length === 0) throw new UsageError('where needs at least one ROOM');
  const c = withDemoBackends(config);
  const ring = buildRing(c.backends.map((b) => ({ id: b.id, weight: b.weight })));
  const valid = createRoomValidator(c.room.pattern);
  const backends = c.backends.map((b) => ({ id: b.id, routable: true, acceptsNew: b.weight > 0, gone: false, checksDownOnly: false, weight: b.weight, load: 0, busy: 0 }));
  let bad = 0;
  const rows = rooms.map((room) => {
    if (!valid(room)) {
      bad++;
      return { room, error: `invalid room key (must match ${c.room.pattern})` };
    }
    // A new room with every backend up and no load skew: the ring owner.
    const d = decide(room, { ring, backends, placement: null, liveOnPlacement: false, onDown: c.health.onDown, noRoom: 'reject', boundFactor: 0, tieBreak: 0, retryAfterS: 1 });
    if ('reject' in d) return { room, error: 'no backend available' };
    return { room, backend: d.route, url: c.backends.find((b) => b.id === d.route)?.url };
  });
  if (json) process.stdout.write(`${JSON.stringify(rows)}\n`);
  else for (const r of rows) process.stdout.write('error' in r ? `${r.room}\terror: ${r.error}\n` : `${r.room}\t${r.backend}\t${r.url}\n`);
  return bad > 0 ? 2 : 0;
}

function sign(config: LoadedConfig, rooms: readonly string[]): void {
  const [room] = rooms;
  if (room === undefined || rooms.length !== 1) throw new UsageError('sign needs exactly one ROOM');
  if (!createRoomValidator(config.room.pattern)(room)) throw new UsageError(`invalid room key (must match ${config.room.pattern})`);
  if (!config.cookie.signed) throw new UsageError('cookie.signed is false: the cookie value is the room key itself');
  if (config.cookie.secrets.length === 0) {
    throw new UsageError('no cookie secret configured: set ROOMGATE_COOKIE_SECRETS (or cookie.secrets) to the secret the gateway uses');
  }
  process.stdout.write(`${signerFor(config, config.cookie.secrets)!.sign(room, Date.now())}\n`);
}

/** "90s", "10m", "1h", "1500ms" or plain milliseconds. */
function parseDuration(s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(s.trim());
  if (!m) throw new UsageError(`bad duration "${s}": use e.g. 90s, 10m, 1h`);
  const n = Number(m[1]);
  const unit = m[2] ?? 'ms';
  return Math.round(n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit]!);
}

/** drain / undrain / maintenance / status: talk to a running gateway's admin API. */
async function adminCommand(command: string, args: readonly string[], values: { admin?: string; token?: string; deadline?: string; json?: boolean }): Promise<number> {
  const base = (values.admin ?? process.env.ROOMGATE_ADMIN_URL ?? 'http://127.0.0.1:9090').replace(/\/$/, '');
  const token = values.token ?? process.env.ROOMGATE_ADMIN_TOKEN ?? '';
  let url: string;
  let init: RequestInit = { signal: AbortSignal.timeout(10_000) };
  if (command === 'status') url = `${base}/backends`;
  else {
    const [backend] = args;
    if (backend === undefined || args.length !== 1) throw new UsageError(`${command} needs exactly one BACKEND id`);
    const body = command === 'drain' ? { deadlineMs: parseDuration(values.deadline ?? '10m') } : {};
    url = `${base}/backends/${encodeURIComponent(backend)}/${command}`;
    init = { ...init, method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) };
  }
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (err) {
    process.stderr.write(`roomgate: cannot reach the admin API at ${base} (${(err as Error).cause ?? (err as Error).message}); is the gateway running? use --admin URL\n`);
    return 1;
  }
  const text = await res.text();
  if (!res.ok) {
    process.stderr.write(`roomgate: ${res.status}: ${text}`);
    return res.status === 401 || res.status === 403 || res.status === 404 || res.status === 400 ? 2 : 1;
  }
  process.stdout.write(text);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      config: { type: 'string' },
      backend: { type: 'string', multiple: true },
      port: { type: 'string' },
      workers: { type: 'string' },
      json: { type: 'boolean' },
      deadline: { type: 'string' },
      admin: { type: 'string' },
      token: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const [command, ...args] = positionals;
  if (command === undefined) throw new UsageError('no command given');
  if (!['start', 'check-config', 'where', 'sign', 'drain', 'undrain', 'maintenance', 'status'].includes(command)) throw new UsageError(`unknown command "${command}"`);
  if (['start', 'check-config', 'status'].includes(command) && args.length > 0) throw new UsageError(`${command} takes no arguments (got ${args.join(' ')})`);
  if (values.workers !== undefined && command !== 'start') throw new UsageError(`--workers is for start only (got it with ${command})`);
  if (['drain', 'undrain', 'maintenance', 'status'].includes(command)) return adminCommand(command, args, values);
  // A worker of `start --workers N` (forked by the primary, same arguments): it runs the
  // configuration the primary sends it.
  if (command === 'start' && isClusterWorker()) {
    await runWorker();
    return -1;
  }
  let workers = 1;
  if (command === 'start') {
    try {
      workers = values.workers !== undefined ? parseWorkers(values.workers) : parseWorkers(process.env.ROOMGATE_WORKERS, 'ROOMGATE_WORKERS');
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const overrides: ConfigOverrides = { port: values.port, backends: values.backend };
  const config = loadConfig({ file: values.config, overrides });
  switch (command) {
    case 'start':
      if (workers > 1) {
        const demo = isDemo(config) ? new DemoBackends(config, createLogger(config.log.level).child({ role: 'primary' })) : undefined;
        await runPrimary(config, {
          workers,
          sidecars: demo,
          reloadConfig: () => loadConfig({ file: values.config, overrides }),
          onListening: ({ port, adminPort }) => {
            if (demo) printDemoBanner(port, adminPort, demo.backends);
          },
        });
      } else await start(config, { file: values.config, overrides });
      return -1; // keeps running until a signal
    case 'check-config':
      checkConfig(config);
      return 0;
    case 'where':
      return where(config, args, values.json === true);
    default:
      sign(config, args);
      return 0;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`roomgate: ${err.message}\n`);
      process.exitCode = 2;
    } else if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`roomgate: ${(err as Error).message}\n\n${USAGE}\n`);
      process.exitCode = 2;
    } else if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE' || (err as NodeJS.ErrnoException).code === 'EACCES') {
      const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
      process.stderr.write(`roomgate: cannot listen on ${e.address}:${e.port} (${e.code}); choose another port with --port or listen.port / admin.port\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`roomgate: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    }
  },
);
