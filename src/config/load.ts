// Loads the configuration: schema defaults < YAML file < environment < command-line flags.
// Every problem is reported at once, each naming the field, the bad value and what is allowed.
import { readFileSync } from 'node:fs';
import { resolve as pathResolve } from 'node:path';
import { parseDocument } from 'yaml';
import { backendAddress, CROSS_CHECKS, viewOf, type View } from './checks.js';
import { BUILTIN, fieldName, issueProblems, yamlProblem, type Origin } from './messages.js';
import { configSchema, type Config } from './schema.js';
import { ConfigError } from './config-error.js';
import { ENV_VARS, type EnvForm } from './env-vars.js';

// Re-exported: their own modules load nothing else, for the CLI's light paths (src/cli/run.ts).
export { ConfigError } from './config-error.js';
export { ENV_VARS } from './env-vars.js';

/** Flags given on the command line; they win over file and environment. */
export interface ConfigOverrides {
  port?: number | string;
  host?: string | undefined;
  backends?: readonly string[];
}

export interface LoadOptions {
  file?: string | undefined;
  env?: NodeJS.ProcessEnv;
  overrides?: ConfigOverrides;
}

/** Backends after loading: every one has an id (defaults to host:port of its URL). */
export interface ResolvedBackend {
  readonly id: string;
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly weight: number;
  /** An https:// backend: spoken to over TLS, as `backendTls` says. Absent for http://. */
  readonly tls?: boolean;
}
export type LoadedConfig = Omit<Config, 'backends'> & { backends: ResolvedBackend[] };

/** Command-line flags that set keys (ConfigOverrides), for the reference. */
export const FLAGS: Readonly<Record<string, string>> = { 'listen.port': '--port', 'listen.host': '--host', backends: '--backend' };

export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const { config, problems } = inspectConfig(opts);
  if (!config) throw new ConfigError(problems);
  return config;
}

/** What loading finds: the configuration when it is valid, every problem, and its valid parts. */
export interface Inspected {
  readonly config: LoadedConfig | undefined;
  readonly problems: readonly string[];
  /** The valid parts, for checks beyond the schema's (the files a command reads: src/cli/checked-config.ts). */
  readonly view: View;
  /** The environment variable or flag a field ("tls.certs.0.key") came from; undefined: the file or a default. */
  readonly origin: (field: string) => string | undefined;
}

/** Loads without throwing on an invalid configuration (an unreadable file or bad YAML still throws). */
export function inspectConfig(opts: LoadOptions = {}): Inspected {
  const env = opts.env ?? process.env;
  const file = opts.file ?? env.ROOMGATE_CONFIG;
  const raw: Record<string, unknown> = file ? readConfigFile(file) : {};
  const origins = new Map<string, string>();
  applyEnv(raw, env, origins);
  applyOverrides(raw, opts.overrides ?? {}, origins);
  const { config, problems } = validate(raw, origins);
  const origin = originOf(origins);
  return { config: config ? resolve(config) : undefined, problems, view: viewOf(raw), origin: (field) => origin(field.split('.')) };
}

/**
 * Checks a raw configuration (file, environment and flags merged): the config, or every problem.
 * `origins` names where a key came from when not the file ("listen.port" -> "ROOMGATE_PORT").
 */
export function validate(raw: Record<string, unknown>, origins: ReadonlyMap<string, string> = new Map()): { config?: Config; problems: string[] } {
  const origin = originOf(origins);
  const result = configSchema.safeParse(raw, { error: () => BUILTIN });
  const problems = result.success ? [] : result.error.issues.flatMap((i) => issueProblems(i, raw, origin));
  // The rules across keys run on whatever parts are valid, so one run names every problem.
  const view = viewOf(raw);
  problems.push(...CROSS_CHECKS.flatMap((c) => c.check(view)));
  return result.success && problems.length === 0 ? { config: result.data, problems } : { problems: [...new Set(problems)] };
}

/** Where the value at a path came from: the key's own origin, or that of the nearest parent set whole. */
function originOf(origins: ReadonlyMap<string, string>): Origin {
  return (path) => {
    for (let n = path.length; n > 0; n--) {
      const o = origins.get(fieldName(path.slice(0, n)));
      if (o) return o;
    }
    return undefined;
  };
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    const why = code === 'ENOENT' ? 'there is no such file' : code === 'EISDIR' ? 'it is a directory' : code === 'EACCES' ? 'permission denied' : 'reading it failed';
    throw new ConfigError([`config file ${file}: cannot be read (${code}): ${why}; check the path given by --config or ROOMGATE_CONFIG`]);
  }
  const parsed = parseDocument(text, { uniqueKeys: true });
  if (parsed.errors.length > 0) throw new ConfigError(parsed.errors.map((e) => yamlProblem(file, text, e)));
  let doc: unknown;
  try {
    doc = parsed.toJS();
  } catch (err) {
    throw new ConfigError([`config file ${file}: not valid YAML: ${(err as Error).message}`]);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigError([`config file ${file}: got ${Array.isArray(doc) ? 'a list' : JSON.stringify(doc)} at the top level; expected a mapping of keys (listen:, backends:, ...)`]);
  }
  return doc as Record<string, unknown>;
}

// Numbers from text stay text when they are not numbers, so the error shows what was given.
function num(s: string): number | string {
  return /^\s*\d+\s*$/.test(s) ? Number(s) : s;
}

function list(s: string): string[] {
  return s
    .split(/[,\s]+/)
    .map((x) => x.trim())
    .filter(Boolean);
}

function backendSpec(spec: string): Record<string, unknown> {
  const eq = spec.indexOf('=');
  // "id=http://..." names the backend; a bare URL gets host:port as its id.
  if (eq > 0 && !spec.slice(0, eq).includes(':')) return { id: spec.slice(0, eq), url: spec.slice(eq + 1) };
  return { url: spec };
}

/** Sets a dotted key in the raw configuration, making (or replacing) the mappings on the way. */
function setKey(raw: Record<string, unknown>, key: string, value: unknown): void {
  const steps = key.split('.');
  let at = raw;
  for (const step of steps.slice(0, -1)) {
    const v = at[step];
    if (!v || typeof v !== 'object' || Array.isArray(v)) at[step] = {};
    at = at[step] as Record<string, unknown>;
  }
  at[steps.at(-1) as string] = value;
}

const FORMS: Record<EnvForm, (s: string) => unknown> = {
  text: (s) => s,
  number: num,
  list,
  backends: (s) => list(s).map(backendSpec),
  // CERT:KEY, split at the last colon; without one, the key is missing and the schema says so.
  certs: (s) =>
    list(s).map((pair) => {
      const colon = pair.lastIndexOf(':');
      return colon <= 0 ? { cert: pair } : { cert: pair.slice(0, colon), key: pair.slice(colon + 1) };
    }),
};

function applyEnv(raw: Record<string, unknown>, env: NodeJS.ProcessEnv, origins: Map<string, string>): void {
  for (const [name, { key, form }] of Object.entries(ENV_VARS)) {
    const text = env[name];
    if (!key || !form || !text) continue;
    setKey(raw, key, FORMS[form](text));
    origins.set(key, name);
  }
}

function applyOverrides(raw: Record<string, unknown>, o: ConfigOverrides, origins: Map<string, string>): void {
  if (o.port !== undefined) {
    setKey(raw, 'listen.port', typeof o.port === 'string' ? num(o.port) : o.port);
    origins.set('listen.port', '--port');
  }
  if (o.host) {
    setKey(raw, 'listen.host', o.host);
    origins.set('listen.host', '--host');
  }
  if (o.backends && o.backends.length > 0) {
    raw.backends = o.backends.flatMap(list).map(backendSpec);
    origins.set('backends', '--backend');
  }
}

function resolve(c: Config): LoadedConfig {
  const backends = c.backends.map((b) => ({ ...backendAddress(b), weight: b.weight }));
  const mounts = c.static.mounts.map((m) => ({ ...m, dir: pathResolve(m.dir) }));
  return { ...c, backends, static: { ...c.static, mounts } };
}
