// Demo mode: `roomgate start` with no backends and no discovery configured runs demo backends of
// its own. Everything the demo needs lives here and is reached only from the CLI; the gateway,
// the runtime and the cluster primary know nothing of it (the primary runs it as a Sidecar).
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../observability/logger.js';
import { demoBackendSpecs, startDemoBackends, stopDemoBackends, type DemoBackend } from './demo-backends.js';

/** What `check-config` notes about demo mode. */
export function demoNotes(config: LoadedConfig): string[] {
  const notes = [`no backends configured; start will run ${config.demo.backends} demo backends`];
  if (config.cookie.signed && config.cookie.secrets.length === 0) notes.push('no cookie secret; start will generate one and room cookies will not survive a restart');
  return notes;
}

/** Demo mode: no static backends and no discovery. */
export function isDemo(config: LoadedConfig): boolean {
  return config.backends.length === 0 && config.discovery.dns === null;
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

/** The demo backends as processes beside the gateway (or the cluster primary's workers). */
export class DemoBackends {
  private running: DemoBackend[] = [];
  private starting: Promise<DemoBackend[]> | null = null;

  constructor(
    private readonly config: LoadedConfig,
    private readonly logger: Logger,
  ) {}

  get backends(): readonly DemoBackend[] {
    return this.running;
  }

  async start(): Promise<void> {
    this.starting = startDemoBackends(this.config.demo.backends, this.config.demo.basePort, this.logger);
    this.running = await this.starting;
  }

  /** The configuration the gateways run: the demo backends filled in. */
  configFor(c: LoadedConfig): LoadedConfig {
    return withDemoBackends(c);
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

/** The banner `start` prints in demo mode (the CLI prints it). */
export function demoBannerText(port: number, adminPort: number | null, demo: readonly DemoBackend[]): string {
  const base = `http://localhost:${port}`;
  const lines = [
    '',
    `roomgate demo: gateway on ${base} in front of ${demo.length} demo backends`,
    `  a game room:            ${base}/game/lobby/`,
    `  another room:           ${base}/game/blue/`,
    `  a per-tab room (path):  ${base}/r/green/game/green/`,
    `  which backend has it:   npx roomgate where lobby blue green`,
    adminPort ? `  metrics:                http://127.0.0.1:${adminPort}/metrics` : '',
    adminPort ? `  backends:               http://127.0.0.1:${adminPort}/backends` : '',
    ...demo.map((d) => `  backend ${d.id}:           ${d.url} (pid ${d.process.pid})`),
    '  Ctrl-C stops everything.',
    '',
  ];
  return `${lines.filter((l) => l !== '').join('\n')}\n`;
}
