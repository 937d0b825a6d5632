/**
 * The four targets: `direct` (no proxy: clients go straight to their room's backend, the limit),
 * nginx, HAProxy and roomgate, each started fresh for one workload run with a generated config in
 * a temp directory that is removed when it stops, pinned to the proxy core.
 *
 * The three proxies are configured alike, as one would for djust in production: room key from a
 * cookie, consistent hashing over the 3 backends, Host passed through, X-Forwarded-For appended,
 * keep-alive connections to the backends, WebSocket tunnels without an idle timeout that a 30 s
 * ping would hit, no access log. nginx: 1 worker; HAProxy: 1 thread; roomgate: one process.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, removeDir, startProc, stopProc, tempDir, waitHttpOk, which, type Proc } from './procs.js';
import { NODE_FLAGS } from '../../src/node-flags.js';

/** `roomgate-b`: roomgate again, with --roomgate-config-b instead of --roomgate-config (two configurations in one run). */
export const TARGETS = ['direct', 'nginx', 'haproxy', 'roomgate', 'roomgate-b'] as const;
export type TargetName = (typeof TARGETS)[number];

export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
/** BENCH_ROOMGATE_MAIN=/path/to/other/dist/src/main.js measures another build of roomgate. */
export const ROOMGATE_MAIN = process.env.BENCH_ROOMGATE_MAIN || join(ROOT, 'dist/src/main.js');

export interface BackendAddr {
  readonly id: string;
  readonly port: number;
}

export interface Running {
  readonly name: TargetName;
  /** The proxy's port; null for direct. */
  readonly port: number | null;
  /** Root of the proxy's process tree; null for direct. */
  readonly pid: number | null;
  /** The last lines the proxy logged (nginx's error log, stderr of the others), for failure notes. */
  logTail(n: number): string[];
  /** roomgate: how often it logged a backend down (its active health checks or a refused connect). */
  backendDowns(): number;
  stop(): Promise<void>;
}

export interface ProxyContext {
  readonly backends: readonly BackendAddr[];
  /** taskset CPU list of the proxy. */
  readonly cpu: string;
  /** roomgate's cookie secret (the load generator signs with it). */
  readonly secret: string;
  /** Open files the proxy may use (the hard limit). */
  readonly nofile: number;
  /** Merged over roomgate's generated config (--roomgate-config). */
  readonly roomgateConfig?: Record<string, unknown>;
  /** The same for the target roomgate-b (--roomgate-config-b). */
  readonly roomgateConfigB?: Record<string, unknown>;
  /** Another build's dist/src/main.js for this roomgate (a before/after in one run); default ROOMGATE_MAIN. */
  readonly roomgateMain?: string;
  /** --tls: every proxy terminates TLS with this certificate (pem: certificate and key, for HAProxy). */
  readonly tls?: { readonly cert: string; readonly key: string; readonly pem: string } | undefined;
  /** With tls: nginx and HAProxy offer h2 by ALPN too (roomgate does by default). */
  readonly http2?: boolean;
  /** More nginx directives: `http` in the http block (before the upstream), `location` at the end of `location /`. */
  readonly nginx?: { readonly http?: string; readonly location?: string };
}

export async function startTarget(name: TargetName, ctx: ProxyContext): Promise<Running> {
  if (name === 'direct') return { name, port: null, pid: null, logTail: () => [], backendDowns: () => 0, stop: async () => undefined };
  const dir = tempDir(`roomgate-bench-${name}-`);
  const port = await freePort();
  let proc: Proc;
  try {
    if (name === 'nginx') proc = startNginx(dir, port, ctx);
    else if (name === 'haproxy') proc = startHaproxy(dir, port, ctx);
    else proc = startRoomgate(dir, port, name === 'roomgate-b' ? { ...ctx, roomgateConfig: ctx.roomgateConfigB ?? {} } : ctx);
    // /healthz: roomgate answers it itself; nginx and HAProxy proxy it to a backend.
    await waitHttpOk(proc, `${ctx.tls ? 'https' : 'http'}://127.0.0.1:${port}/healthz`, 20_000);
  } catch (err) {
    removeDir(dir);
    throw err;
  }
  const p = proc;
  let downs = 0;
  p.watchers.add((line) => {
    if (line.includes('"msg":"backend down"')) downs++;
  });
  return {
    name,
    port,
    pid: p.pid,
    logTail: (n) => {
      let lines = p.output;
      try {
        if (name === 'nginx') lines = readFileSync(join(dir, 'error.log'), 'utf8').split('\n').filter(Boolean);
      } catch {
        /* no log */
      }
      return lines.slice(-n);
    },
    backendDowns: () => downs,
    stop: async () => {
      await stopProc(p);
      removeDir(dir);
    },
  };
}

// ---------------------------------------------------------------------------------------------

/** Connections a proxy may hold: 2 per proxied socket (client side, backend side) + headroom. */
function maxConns(ctx: ProxyContext): number {
  return Math.max(1024, ctx.nofile - 128);
}

function startNginx(dir: string, port: number, ctx: ProxyContext): Proc {
  const conf = `# generated by bench/suite/proxies.ts
worker_processes 1;
worker_rlimit_nofile ${ctx.nofile};
daemon off;
master_process on;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events {
  # Above the open-files limit on purpose: nginx closes new idle connections ("worker_connections
  # are not enough, reusing connections") once fewer than 1/16 of worker_connections are free, so
  # the open-files limit must be what binds, as for the other proxies.
  worker_connections ${2 * ctx.nofile};
}
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${ctx.nginx?.http ?? ''}
  map $http_upgrade $connection_upgrade {
    default upgrade;
    '' '';
  }
  upstream rooms {
    hash $cookie_room consistent;
${ctx.backends.map((b) => `    server 127.0.0.1:${b.port};`).join('\n')}
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port}${ctx.tls ? ' ssl' : ''}${ctx.tls && ctx.http2 ? ' http2' : ''} backlog=4096;${ctx.tls ? `
    ssl_certificate ${ctx.tls.cert};
    ssl_certificate_key ${ctx.tls.key};
    ssl_protocols TLSv1.2 TLSv1.3;` : ''}
    location / {
      proxy_pass http://rooms;
      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
${ctx.nginx?.location ?? ''}
    }
  }
}
`;
  writeFileSync(join(dir, 'nginx.conf'), conf);
  return startProc('nginx', which('nginx') ?? 'nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], { cpu: ctx.cpu });
}

function startHaproxy(dir: string, port: number, ctx: ProxyContext): Proc {
  // maxconn counts client connections; each one also holds a server connection.
  const conns = Math.floor(maxConns(ctx) / 2);
  const conf = `# generated by bench/suite/proxies.ts
global
  nbthread 1
  maxconn ${conns}
defaults
  mode http
  maxconn ${conns}
  timeout connect 5s
  timeout client 1h
  timeout server 1h
  timeout tunnel 1h
  timeout http-request 20s
  option forwardfor
frontend public
  bind 127.0.0.1:${port}${ctx.tls ? ` ssl crt ${ctx.tls.pem}` : ''}${ctx.tls && ctx.http2 ? ' alpn h2,http/1.1' : ''}
  http-request set-header X-Forwarded-Proto ${ctx.tls ? 'https' : 'http'}
  default_backend rooms
backend rooms
  balance hash req.cook(room)
  hash-type consistent
${ctx.backends.map((b) => `  server ${b.id} 127.0.0.1:${b.port}`).join('\n')}
`;
  writeFileSync(join(dir, 'haproxy.cfg'), conf);
  return startProc('haproxy', which('haproxy') ?? 'haproxy', ['-db', '-f', join(dir, 'haproxy.cfg')], { cpu: ctx.cpu });
}

function startRoomgate(dir: string, port: number, ctx: ProxyContext): Proc {
  // YAML is a superset of JSON.
  const config = {
    listen: { host: '127.0.0.1', port },
    admin: { enabled: false },
    backends: ctx.backends.map((b) => ({ id: b.id, url: `http://127.0.0.1:${b.port}` })),
    // The burst workload measures the proxy, not the reconnect-storm limiter.
    admission: { maxInflightUpgrades: 0, upgradesPerSecond: 0 },
    log: { level: 'warn' },
    // The suite closes its sockets before it stops a target; do not wait 10 s for stragglers.
    shutdown: { graceMs: 1000 },
    // The HTTP check of the published results (the default is a TCP connect check now); the bench
    // backends answer GET /healthz.
    health: { path: '/healthz' },
    ...(ctx.tls ? { tls: { certs: [{ cert: ctx.tls.cert, key: ctx.tls.key }] } } : {}),
    // h2 is on by default with TLS; the suite's --tls runs (wrk, no ALPN) speak HTTP/1.1 anyway.
    ...(ctx.tls ? { http2: { enabled: ctx.http2 !== false } } : {}),
  };
  const file = join(dir, 'roomgate.yaml');
  writeFileSync(file, JSON.stringify(merge(config, ctx.roomgateConfig ?? {}), null, 2));
  // BENCH_ROOMGATE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof": more node flags (a profile of a run).
  const nodeArgs = [...roomgateNodeArgs(), ...(process.env.BENCH_ROOMGATE_NODE_ARGS ?? '').split(' ').filter(Boolean)];
  // BENCH_ROOMGATE_START_ARGS="--workers 2 --balance primary": more arguments for `roomgate start`.
  const startArgs = (process.env.BENCH_ROOMGATE_START_ARGS ?? '').split(' ').filter(Boolean);
  return startProc('roomgate', process.execPath, [...nodeArgs, ctx.roomgateMain ?? ROOMGATE_MAIN, 'start', '--config', file, ...startArgs], {
    cpu: ctx.cpu,
    cwd: dir,
    // A clean environment: no ROOMGATE_* or REDIS_* of the caller's leaks in.
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ROOMGATE_COOKIE_SECRETS: ctx.secret, NODE_ENV: 'production' },
  });
}

/**
 * The node flags roomgate runs with here: the ones it ships with (npm start, the image), unless
 * BENCH_ROOMGATE_NODE_ARGS replaces them, e.g. "--max-semi-space-size=4 --cpu-prof
 * --cpu-prof-dir=/tmp/prof" to profile, or "" to measure V8's defaults.
 */
export function roomgateNodeArgs(): string[] {
  return (process.env.BENCH_ROOMGATE_NODE_ARGS ?? NODE_FLAGS.join(' ')).split(' ').filter(Boolean);
}

/** `over` merged into `base`, objects key by key, anything else replaced. */
export function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
    out[k] = isObj(b) && isObj(v) ? merge(b, v) : v;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tools and versions

const PACKAGES: Record<string, string> = { nginx: 'nginx', haproxy: 'haproxy', wrk: 'wrk', taskset: 'util-linux' };

/**
 * Makes sure the programs the chosen targets and workloads need are installed: apt-get as root,
 * else a message saying what to install (or which --targets/--only to drop).
 */
export function ensureTools(tools: readonly string[], log: (s: string) => void): void {
  const missing = tools.filter((t) => !which(t));
  if (missing.length === 0) return;
  const pkgs = [...new Set(missing.map((t) => PACKAGES[t] ?? t))];
  if (process.getuid?.() !== 0) {
    throw new Error(
      `missing ${missing.join(', ')}: install them with \`sudo apt-get install -y ${pkgs.join(' ')}\` ` +
        `(or leave them out: --targets direct,roomgate / --only game,burst,scale without wrk)`,
    );
  }
  log(`installing ${pkgs.join(' ')} (apt-get)...`);
  // Installing must not start the Debian services (nginx on :80): policy-rc.d says no, and
  // DEBIAN_FRONTEND keeps apt quiet.
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', RUNLEVEL: '1' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', ...pkgs]]) {
    const r = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'pipe'], env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed:\n${r.stderr ?? ''}`);
  }
  const still = tools.filter((t) => !which(t));
  if (still.length > 0) throw new Error(`still missing after apt-get: ${still.join(', ')}`);
  stopInstalledServices(pkgs, log);
}

/** A Debian postinst may have started nginx/haproxy as a service: stop exactly those services. */
function stopInstalledServices(pkgs: readonly string[], log: (s: string) => void): void {
  for (const svc of pkgs.filter((p) => p === 'nginx' || p === 'haproxy')) {
    const r = spawnSync('service', [svc, 'stop'], { stdio: 'ignore' });
    if (r.status === 0) log(`stopped the ${svc} service that apt-get started`);
  }
}

function firstLine(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n').find((l) => l.trim() !== '')?.trim() ?? 'unknown';
}

export function versions(): Record<string, string> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const rev = spawnSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout?.trim() || 'unknown';
  const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).stdout?.trim() ? '+changes in src/' : '';
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown';
  return {
    roomgate: `${pkg.version} (${rev}${dirty ? ` ${dirty}` : ''})`,
    node: process.version,
    nginx: which('nginx') ? firstLine('nginx', ['-v']).replace(/^nginx version: /, '') : 'not installed',
    haproxy: which('haproxy') ? firstLine('haproxy', ['-v']).replace(/ - https.*$/, '') : 'not installed',
    wrk: which('wrk') ? firstLine('wrk', ['-v']).replace(/ Copyright.*$/, '') : 'not installed',
    kernel: firstLine('uname', ['-r']),
    cpu,
  };
}
