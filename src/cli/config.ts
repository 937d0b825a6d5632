// The configuration a command runs with: file (--config or $ROOMGATE_CONFIG) < environment <
// --port, --host and --backend.
import { loadConfig, type ConfigOverrides, type LoadedConfig } from '../config/load.js';
import { list, str, type Values } from './args.js';

export interface ConfigSource {
  readonly file: string | undefined;
  readonly overrides: ConfigOverrides;
}

export function configSource(values: Values): ConfigSource {
  return { file: str(values, 'config'), overrides: { port: str(values, 'port'), host: str(values, 'host'), backends: list(values, 'backend') } };
}

export function loadFrom(source: ConfigSource): LoadedConfig {
  return loadConfig({ file: source.file, overrides: source.overrides });
}
