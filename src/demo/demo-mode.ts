// Demo mode: `roomgate start` with no backends and no discovery configured runs demo backends of
// its own. Everything the demo needs lives here and is reached only from the CLI; the gateway,
// the runtime and the cluster primary know nothing of it (the primary runs it as a Sidecar).
// Only in demo mode, so that it can show all it does from a bare `npm start`:
// - it listens on 127.0.0.1 unless a host is given (--host, ROOMGATE_HOST or listen.host in the
//   file): the banner says localhost, and a demo is nothing to expose;
// - with no configuration file (no --config, no $ROOMGATE_CONFIG), a cookie secret, an admin
//   token, an API token and a push token are generated when none is in the environment (the CLI
//   prints them once, in the banner), so sign, drain, API writes and pushes work, and the lobby lists
//   every room (api.listRooms ["*"] when none is configured: the demo's rooms, "New room"'s too, are
//   nobody's secret). A configuration file is a deployment being tried: nothing is generated or
//   listed for it, its own secrets (or none) and its own api.listRooms are used.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import { demoBackendSpecs, startDemoBackends, stopDemoBackends, type DemoBackend } from './demo-backends.js';

/** The game rooms the banner links to (the demo backend's index page links the same). */
export const DEMO_ROOMS = ['chess', 'poker', 'tetris'] as const;

/** Demo mode: no static backends and no discovery. */
export function isDemo(config: LoadedConfig): boolean {
  return config.backends.length === 0 && config.discovery.dns === null;
}

/** Where the configuration came from: a file (given or $ROOMGATE_CONFIG), a --host flag. */
export interface DemoSource {
  readonly file: string | undefined;
  readonly overrides?: { readonly host?: string | undefined };
}

/** A configuration file is given: --config, or $ROOMGATE_CONFIG. */
export function configFileGiven(source: DemoSource, env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(source.file ?? env.ROOMGATE_CONFIG);
}

/** What `check-config` notes about demo mode. */
export function demoNotes(config: LoadedConfig, source: DemoSource): string[] {
  const notes = [`no backends configured; start will run ${config.demo.backends} demo backends, on 127.0.0.1 unless a host is given (--host, ROOMGATE_HOST, listen.host)`];
  if (configFileGiven(source)) return notes;
  const missing = Object.entries(missingSecrets(config))
    .filter(([, missing]) => missing)
    .map(([name]) => name);
  if (missing.length > 0) {
    const names = missing.length === 1 ? missing[0] : `${missing.slice(0, -1).join(', ')} or ${missing.at(-1)}`;
    notes.push(`no ${names} configured; start will generate ${missing.length === 1 ? 'it' : 'them'} for the demo and print ${missing.length === 1 ? 'it' : 'them'} in its banner`);
  }
  return notes;
}

function missingSecrets(config: LoadedConfig): Record<'cookie secret' | 'admin token' | 'API token' | 'push token', boolean> {
  return {
    'cookie secret': config.cookie.signed && config.cookie.secrets.length === 0,
    'admin token': config.admin.enabled && config.admin.token === '',
    'API token': config.api.enabled && config.api.tokens.length === 0,
    'push token': config.push.tokens.length === 0,
  };
}

/** The configured backends, or the demo backends `start` would run when none are configured. */
export function withDemoBackends(config: LoadedConfig): LoadedConfig {
  if (!isDemo(config)) return config;
  return {
    ...config,
    backends: demoBackendSpecs(config.demo.backends, config.demo.basePort).map((s) => ({
      id: s.id,
      url: s.url,
      host: '127.0.0.1',
      port: s.port,
      weight: 1,
    })),
  };
}

/** Secrets the demo generated because none was configured (null: configured, or not needed). */
export interface DemoSecrets {
  readonly cookieSecret: string | null;
  readonly adminToken: string | null;
  readonly apiToken: string | null;
  /** Pushes to rooms (push.tokens): the banner prints it with a curl that pushes to a demo room. */
  readonly pushToken: string | null;
  /**
   * The secret that signs pushes to the demo backends, which verify it: generated whenever none is
   * configured (a configuration file or not), as the demo backends are roomgate's own.
   */
  readonly callSecret: string | null;
}

function generateSecrets(config: LoadedConfig, source: DemoSource): DemoSecrets {
  const fresh = (): string => randomBytes(24).toString('base64url');
  const callSecret = config.backendCalls.secrets.length === 0 ? randomBytes(32).toString('base64url') : null;
  if (configFileGiven(source)) return { cookieSecret: null, adminToken: null, apiToken: null, pushToken: null, callSecret };
  const missing = missingSecrets(config);
  return {
    callSecret,
    cookieSecret: missing['cookie secret'] ? fresh() : null,
    adminToken: missing['admin token'] ? fresh() : null,
    apiToken: missing['API token'] ? fresh() : null,
    pushToken: missing['push token'] ? fresh() : null,
  };
}

/** A host is given: --host, ROOMGATE_HOST, or listen.host in the configuration file. */
export function listenHostGiven(source: DemoSource, env: NodeJS.ProcessEnv = process.env): boolean {
  if (source.overrides?.host || env.ROOMGATE_HOST) return true;
  const path = source.file ?? env.ROOMGATE_CONFIG;
  if (!path) return false;
  try {
    const doc = parseYaml(readFileSync(path, 'utf8')) as { listen?: { host?: unknown } } | null;
    return doc?.listen?.host !== undefined;
  } catch {
    return false; // loadConfig read it already; a file that cannot be read again (a pipe) sets nothing
  }
}

/** The demo backends as processes beside the gateway (or the cluster primary's workers). */
export class DemoBackends {
  /** Generated once: a reload (SIGHUP) keeps them. */
  readonly secrets: DemoSecrets;
  private readonly hostGiven: boolean;
  /** No configuration file: the lobby lists every room unless api.listRooms says otherwise. */
  private readonly listAll: boolean;
  private running: DemoBackend[] = [];
  private starting: Promise<DemoBackend[]> | null = null;

  constructor(
    private readonly config: LoadedConfig,
    private readonly logger: Logger,
    /** The configuration file the demo started with (--config) and the flags. */
    source: DemoSource,
  ) {
    this.secrets = generateSecrets(config, source);
    this.hostGiven = listenHostGiven(source);
    this.listAll = !configFileGiven(source);
  }

  get backends(): readonly DemoBackend[] {
    return this.running;
  }

  async start(): Promise<void> {
    const secrets = this.secrets.callSecret !== null ? [this.secrets.callSecret] : this.config.backendCalls.secrets;
    this.starting = startDemoBackends(this.config.demo.backends, this.config.demo.basePort, this.logger, secrets, this.config.handoff.path);
    this.running = await this.starting;
  }

  /** The configuration the gateways run: the demo backends, loopback and the generated secrets filled in. */
  configFor(c: LoadedConfig): LoadedConfig {
    if (!isDemo(c)) return c;
    const d = withDemoBackends(c);
    const s = this.secrets;
    return {
      ...d,
      listen: this.hostGiven ? d.listen : { ...d.listen, host: '127.0.0.1' },
      cookie: s.cookieSecret !== null && d.cookie.secrets.length === 0 ? { ...d.cookie, secrets: [s.cookieSecret] } : d.cookie,
      admin: s.adminToken !== null && d.admin.token === '' ? { ...d.admin, token: s.adminToken } : d.admin,
      api: {
        ...d.api,
        tokens: s.apiToken !== null && d.api.tokens.length === 0 ? [s.apiToken] : d.api.tokens,
        listRooms: this.listAll && d.api.listRooms.length === 0 ? ['*'] : d.api.listRooms,
      },
      push: s.pushToken !== null && d.push.tokens.length === 0 ? { ...d.push, tokens: [s.pushToken] } : d.push,
      backendCalls: s.callSecret !== null && d.backendCalls.secrets.length === 0 ? { secrets: [s.callSecret] } : d.backendCalls,
    };
  }

  /** Graceful stop; backends still starting are waited for (startDemoBackends stops them if it fails). */
  async stop(): Promise<void> {
    await stopDemoBackends(this.starting ? await this.starting.catch(() => []) : this.running);
  }

  /** A second signal: never leave demo backends behind holding their ports. */
  killNow(): void {
    for (const d of this.running) d.process.kill('SIGKILL');
  }
}
