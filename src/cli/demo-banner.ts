// The demo banner `start` prints once the demo listens: what to open, on stderr.
import type { LoadedConfig } from '../config/load.js';
import { demoBannerText, type DemoBackends } from '../demo/demo-mode.js';
import { say } from './output.js';

export function showDemoBanner(demo: DemoBackends, _config: LoadedConfig, addr: { port: number; adminPort: number | null }, _json: boolean): void {
  say(`\n${demoBannerText(addr.port, addr.adminPort, demo.backends)}`);
}
