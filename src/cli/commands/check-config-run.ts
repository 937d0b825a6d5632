// What `roomgate check-config` does (src/cli/commands/check-config.ts says what it is): validate the
// configuration as start would and print it, secrets redacted, with notes on what start will do.
import { listKeys, redactUrlPassword } from '../../config/describe.js';
import type { LoadedConfig } from '../../config/load.js';
import { demoNotes, isDemo } from '../../demo/demo-mode.js';
import { BACKEND_TLS_UNVERIFIED, loadBackendTls } from '../../backends/backend-tls.js';
import { loadTls, tlsExpiryWarnings } from '../../server/tls-config.js';
import { flag, type Parsed } from '../args.js';
import { loadChecked } from '../checked-config.js';
import { configSource, type ConfigSource } from '../config.js';
import { print, printJson } from '../output.js';

/** Every key the schema marks secret (admin.token, admin.drainTokens, api.tokens, push.tokens, backendCalls.secrets, cookie.secrets...). */
const SECRET_PATHS = listKeys()
  .filter((k) => k.doc.secret === 'value' && !k.path.includes('[]'))
  .map((k) => k.path.split('.'));

function redacted(config: LoadedConfig): unknown {
  const redact = (s: unknown): unknown => (Array.isArray(s) ? s.map(redact) : typeof s === 'string' && s !== '' ? '<redacted>' : s);
  const out = structuredClone(config) as unknown as Record<string, unknown>;
  for (const path of SECRET_PATHS) {
    const parent = path.slice(0, -1).reduce<Record<string, unknown> | undefined>((o, k) => o?.[k] as Record<string, unknown> | undefined, out);
    const key = path.at(-1) as string;
    if (parent && key in parent) parent[key] = redact(parent[key]);
  }
  // Only the password of the URL is secret: host, port and db stay readable.
  return { ...out, redis: { ...config.redis, url: config.redis.url === null ? null : redactUrlPassword(config.redis.url) } };
}

/** What start will do on its own with this configuration, and certificates about to expire. */
function notes(config: LoadedConfig, source: ConfigSource): string[] {
  // The files were checked by loadChecked: read again here for what they say (expiry, verify).
  const tls = loadTls(config);
  const backendTls = loadBackendTls(config.backendTls);
  return [...startNotes(config, source), ...(tls ? tlsExpiryWarnings(tls, Date.now()) : []), ...(backendTls.verify ? [] : [BACKEND_TLS_UNVERIFIED])];
}

/** The defaults start fills in by itself (demo backends, a generated cookie secret). */
function startNotes(config: LoadedConfig, source: ConfigSource): string[] {
  if (isDemo(config)) return demoNotes(config, source);
  if (config.cookie.signed && config.cookie.secrets.length === 0) {
    return ['no cookie secret; start will generate one and room cookies will not survive a restart'];
  }
  return [];
}

export async function runCheckConfig({ values }: Parsed): Promise<number> {
  const source = configSource(values);
  const config = loadChecked(source);
  if (flag(values, 'json')) {
    printJson({ valid: true, config: redacted(config), notes: notes(config, source) });
    return 0;
  }
  print(`configuration is valid\n${JSON.stringify(redacted(config), null, 2)}`);
  for (const n of notes(config, source)) print(`note: ${n}`);
  return 0;
}
