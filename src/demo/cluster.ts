#!/usr/bin/env node
// `npm run demo:cluster`: the topology of deploy/docker-compose.yml as local processes. One
// redis-server, three demo backends (b1-b3), two gateways (A and B) sharing placements, presence
// and the lobby through that Redis. Prints the URLs; SIGINT/SIGTERM/SIGHUP stops everything
// (gateways first, then backends, then Redis) and exits 0; a second signal kills at once.
import { backendKeys } from '../http/call-proof.js';
import { onStopSignals } from '../lifecycle/signals.js';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ENV_VARS } from '../config/load.js';
import { ChildStartError, runningChildren, spawnReady, stopChild, type Child } from './child.js';
import { DEMO_BACKEND_SCRIPT } from './demo-backends.js';
import { RedisMissingError, startRedisServer } from './redis-server.js';

const MAIN_SCRIPT = fileURLToPath(new URL('../main.js', import.meta.url));
const BACKEND_IDS = ['b1', 'b2', 'b3'] as const;
const GATEWAYS = ['a', 'b'] as const;
const START_TIMEOUT_MS = 20_000;
/** The gateways' shutdown.graceMs is 10 s (default); then they are killed. */
const GATEWAY_STOP_MS = 15_000;
const OTHER_STOP_MS = 5_000;
/** A signal this soon after the first is the same Ctrl-C delivered twice (npm, shells). */
const DUPLICATE_SIGNAL_MS = 500;

const USAGE = `Usage: node dist/src/demo/cluster.js [options]     (npm run demo:cluster -- [options])

Runs Redis, three demo backends (b1-b3) and two roomgate gateways (A, B) sharing the Redis: the
topology of deploy/docker-compose.yml, as local processes. Ctrl-C stops everything.

Options (port 0 = any free port):
  --host H             gateways listen here (default 127.0.0.1)
  --port N             gateway A (default 8080)
  --port-b N           gateway B (default 8081)
  --admin-port N       gateway A's admin port (default 9090)
  --admin-port-b N     gateway B's admin port (default 9091)
  --backend-port N     b1 on N, b2 on N+1, b3 on N+2 (default 8101; 0 = free ports)
  --redis-port N       the redis-server started here (default 0)
  --redis-url URL      use this Redis instead of starting redis-server
  --json               when ready, print one JSON line with every URL and pid on stdout
  --verbose            copy the gateways' info logs too (default: warnings and errors)
  -h, --help           this text

Environment: ROOMGATE_COOKIE_SECRETS, ROOMGATE_ADMIN_TOKEN, ROOMGATE_API_TOKENS are passed to both
gateways when set (random otherwise); REDIS_SERVER names the redis-server binary.`;

class UsageError extends Error {}

interface Options {
  host: string;
  ports: { a: number; b: number };
  adminPorts: { a: number; b: number };
  backendPort: number;
  redisPort: number;
  redisUrl: string | undefined;
  json: boolean;
  verbose: boolean;
}

function portArg(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535) throw new UsageError(`--${name}: got "${value}"; expected a port 0-65535`);
  return n;
}

function parseOptions(argv: string[]): Options | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      'port-b': { type: 'string' },
      'admin-port': { type: 'string' },
      'admin-port-b': { type: 'string' },
      'backend-port': { type: 'string' },
      'redis-port': { type: 'string' },
      'redis-url': { type: 'string' },
      json: { type: 'boolean' },
      verbose: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const backendPort = portArg('backend-port', values['backend-port'], 8101);
  if (backendPort > 65533) throw new UsageError(`--backend-port: got ${backendPort}; b3 would need ${backendPort + 2}`);
  const redisUrl = values['redis-url'];
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) throw new UsageError('--redis-url: expected a redis:// or rediss:// URL');
  return {
    host: values.host ?? '127.0.0.1',
    ports: { a: portArg('port', values.port, 8080), b: portArg('port-b', values['port-b'], 8081) },
    adminPorts: { a: portArg('admin-port', values['admin-port'], 9090), b: portArg('admin-port-b', values['admin-port-b'], 9091) },
    backendPort,
    redisPort: portArg('redis-port', values['redis-port'], 0),
    redisUrl,
    json: values.json === true,
    verbose: values.verbose === true,
  };
}

function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

const QUIET_LEVELS = new Set(['trace', 'debug', 'info']);

/** Copies a child's line to stderr, prefixed; gateway info/debug logs only with --verbose. */
function relay(verbose: boolean) {
  return (child: Child, line: string): void => {
    if (!verbose && line.startsWith('{')) {
      try {
        // roomgate logs levels by name; pino's numbers (30 = info) are accepted too.
        const level = (JSON.parse(line) as { level?: unknown }).level;
        if (typeof level === 'string' ? QUIET_LEVELS.has(level) : typeof level === 'number' && level < 40) return;
      } catch {
        // not JSON: copy it
      }
    }
    if (!verbose && child.name === 'redis') return;
    say(`[${child.name}] ${line}`);
  };
}

interface Started {
  redis: { url: string; pid: number | null };
  backends: { id: string; url: string; pid: number }[];
  gateways: { name: string; url: string; adminUrl: string; port: number; adminPort: number; pid: number }[];
  /** For the banner's drain example; not in the --json line. */
  adminToken: string;
}

/** Environment of a gateway: the caller's, minus every roomgate variable, plus the cluster's. */
function gatewayEnv(o: Options, name: 'a' | 'b', backends: Started['backends'], redisUrl: string, secrets: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(ENV_VARS)) delete env[key];
  return {
    ...env,
    ...secrets,
    ROOMGATE_HOST: o.host,
    ROOMGATE_PORT: String(o.ports[name]),
    ROOMGATE_ADMIN_HOST: '127.0.0.1',
    ROOMGATE_ADMIN_PORT: String(o.adminPorts[name]),
    ROOMGATE_BACKENDS: backends.map((b) => `${b.id}=${b.url}`).join(','),
    REDIS_URL: redisUrl,
    // A demo's rooms are nobody's secret: the lobby lists every one (a deployment lists what it chooses).
    ROOMGATE_API_LIST_ROOMS: '*',
    ROOMGATE_LOG_LEVEL: 'info', // the "listening" line is info; relay() hides info unless --verbose
  };
}

async function startAll(o: Options, isStopping: () => boolean): Promise<Started> {
  const output = relay(o.verbose);
  const token = (): string => randomBytes(24).toString('base64url');
  const secrets = {
    ROOMGATE_COOKIE_SECRETS: process.env.ROOMGATE_COOKIE_SECRETS || token(),
    ROOMGATE_ADMIN_TOKEN: process.env.ROOMGATE_ADMIN_TOKEN || token(),
    ROOMGATE_API_TOKENS: process.env.ROOMGATE_API_TOKENS || token(),
    // Signs pushes and handoff calls on both gateways; each backend gets only its own key.
    ROOMGATE_CALL_SECRETS: process.env.ROOMGATE_CALL_SECRETS || randomBytes(32).toString('base64url'),
  };
  const callSecrets = secrets.ROOMGATE_CALL_SECRETS.split(',').map((s) => s.trim()).filter(Boolean);

  let redis: Started['redis'];
  if (o.redisUrl) redis = { url: o.redisUrl, pid: null };
  else {
    const r = await startRedisServer(o.redisPort, START_TIMEOUT_MS);
    redis = { url: r.url, pid: r.child.process.pid ?? null };
  }
  if (isStopping()) throw new Stopped();

  const backends = await Promise.all(
    BACKEND_IDS.map(async (id, i) => {
      const port = o.backendPort === 0 ? 0 : o.backendPort + i;
      const { child, value } = await spawnReady({
        name: id,
        command: process.execPath,
        args: [DEMO_BACKEND_SCRIPT, '--host', '127.0.0.1', '--port', String(port), '--id', id],
        env: { ...process.env, ROOMGATE_CALL_SECRETS: '', ROOMGATE_BACKEND_KEYS: backendKeys(callSecrets, id).join(',') },
        ready: (line) => (line.includes('"listening"') ? (JSON.parse(line) as { port: number }).port : undefined),
        timeoutMs: START_TIMEOUT_MS,
        output,
      });
      return { id, url: `http://127.0.0.1:${value}`, pid: child.process.pid! };
    }),
  );
  if (isStopping()) throw new Stopped();

  const gateways = await Promise.all(
    GATEWAYS.map(async (name) => {
      const { child, value } = await spawnReady({
        name: `gateway-${name}`,
        command: process.execPath,
        args: [MAIN_SCRIPT, 'start'],
        env: gatewayEnv(o, name, backends, redis.url, secrets),
        ready: (line) => {
          if (!line.includes('"msg":"listening"')) return undefined;
          return JSON.parse(line) as { port: number; adminPort: number };
        },
        timeoutMs: START_TIMEOUT_MS,
        output,
      });
      const host = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host.includes(':') ? `[${o.host}]` : o.host;
      return {
        name,
        url: `http://${host}:${value.port}`,
        adminUrl: `http://127.0.0.1:${value.adminPort}`,
        port: value.port,
        adminPort: value.adminPort,
        pid: child.process.pid!,
      };
    }),
  );
  return { redis, backends, gateways, adminToken: secrets.ROOMGATE_ADMIN_TOKEN };
}

class Stopped extends Error {}

function banner(s: Started): void {
  const [a, b] = s.gateways;
  if (!a || !b) return;
  // Browsers share cookies across ports of one host: the room cookie works through A and B.
  const pretty = (g: Started['gateways'][number]): string => g.url.replace('//127.0.0.1:', '//localhost:');
  say(
    [
      '',
      'roomgate demo cluster: 2 gateways sharing one Redis, 3 demo backends',
      `  gateway A:   ${pretty(a)}/game/chess/`,
      `  gateway B:   ${pretty(b)}/game/chess/   (same room, same backend)`,
      `  the lobby:   ${pretty(a)}/_roomgate/lobby   (its data: /_roomgate/api/lobby)`,
      `  online:      ${pretty(b)}/_roomgate/api/online`,
      `  admin A, B:  ${a.adminUrl}/backends  ${b.adminUrl}/backends`,
      `  drain b2:    ROOMGATE_ADMIN_TOKEN=${s.adminToken} node dist/src/main.js drain b2 --deadline 5m --admin ${a.adminUrl}`,
      `  redis:       ${s.redis.url}${s.redis.pid ? ` (pid ${s.redis.pid})` : ' (not started here)'}`,
      ...s.backends.map((x) => `  backend ${x.id}:  ${x.url} (pid ${x.pid})`),
      '  Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
}

/** Gateways first (they close their sockets gracefully), then backends, then Redis. */
async function stopAll(): Promise<void> {
  const byKind = (pred: (c: Child) => boolean): Child[] => runningChildren().filter(pred);
  await Promise.all(byKind((c) => c.name.startsWith('gateway-')).map((c) => stopChild(c, 'SIGTERM', GATEWAY_STOP_MS)));
  await Promise.all(byKind((c) => c.name !== 'redis').map((c) => stopChild(c, 'SIGTERM', OTHER_STOP_MS)));
  await Promise.all(runningChildren().map((c) => stopChild(c, 'SIGTERM', OTHER_STOP_MS)));
}

async function main(argv: string[]): Promise<number> {
  const o = parseOptions(argv);
  if (o === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }

  let stopping: Promise<number> | null = null;
  onStopSignals({
    // npm and the terminal may deliver one Ctrl-C twice: that is not a second request.
    duplicateWindowMs: DUPLICATE_SIGNAL_MS,
    signals: ['SIGINT', 'SIGTERM', 'SIGHUP'],
    graceful: (signal) => {
      say(`demo:cluster: ${signal}: stopping gateways, then backends, then Redis`);
      stopping = stopAll().then(() => 0);
      void stopping.then((code) => {
        say('demo:cluster: stopped');
        process.exit(code);
      });
    },
    immediate: (signal) => {
      say(`demo:cluster: second signal (${signal}): killing everything now`);
      for (const c of runningChildren()) c.process.kill('SIGKILL');
    },
  }).ready();

  let started: Started;
  try {
    started = await startAll(o, () => stopping !== null);
  } catch (err) {
    if (err instanceof Stopped || stopping) return -1; // the signal handler exits
    await stopAll();
    throw err;
  }
  if (stopping) return -1;
  banner(started);
  if (o.json) {
    const pids = [started.redis.pid, ...started.backends.map((b) => b.pid), ...started.gateways.map((g) => g.pid)].filter((p) => p !== null);
    const { adminToken: _secret, ...shown } = started;
    process.stdout.write(`${JSON.stringify({ event: 'ready', ...shown, pids })}\n`);
  }
  // Say so when a child dies on its own (a crashed backend is a failover demo, not a reason to stop).
  for (const c of runningChildren()) {
    void c.exited.then((code) => {
      if (!stopping) say(`demo:cluster: ${c.name} exited (${code}); the rest keeps running`);
    });
  }
  return -1; // keeps running until a signal
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      say(`demo:cluster: ${(err as Error).message}\n\n${USAGE}`);
      process.exitCode = 2;
    } else if (err instanceof RedisMissingError) {
      say(`demo:cluster: ${err.message}`);
      process.exitCode = 2;
    } else if (err instanceof ChildStartError) {
      say(`demo:cluster: ${err.message}`);
      process.exitCode = 1;
    } else {
      say(`demo:cluster: ${(err as Error).stack ?? String(err)}`);
      process.exitCode = 1;
    }
  },
);
