// The environment variables roomgate reads, each with the key it sets and its text. Its own module,
// with no imports: the CLI's help lists them without loading the schema (src/cli/help.ts).

/** How an environment variable's text becomes a value. */
export type EnvForm = 'text' | 'number' | 'list' | 'backends' | 'certs';

/**
 * Environment variables read: the key each sets (none: read elsewhere, e.g. by the CLI) and what
 * it holds. loadConfig applies them from this table; the reference lists them.
 */
export const ENV_VARS: Readonly<Record<string, { readonly key?: string; readonly form?: EnvForm; readonly text: string }>> = {
  ROOMGATE_CONFIG: { text: 'path of the YAML config file (when --config is not given)' },
  ROOMGATE_HOST: { key: 'listen.host', form: 'text', text: 'the public address' },
  ROOMGATE_PORT: { key: 'listen.port', form: 'number', text: 'the public port' },
  ROOMGATE_ADMIN_HOST: { key: 'admin.host', form: 'text', text: 'the admin address' },
  ROOMGATE_ADMIN_PORT: { key: 'admin.port', form: 'number', text: 'the admin port' },
  ROOMGATE_BACKENDS: { key: 'backends', form: 'backends', text: 'comma-separated URLs, each optionally id=URL' },
  ROOMGATE_COOKIE_SECRETS: { key: 'cookie.secrets', form: 'list', text: 'comma-separated, the first signs' },
  ROOMGATE_LOG_LEVEL: { key: 'log.level', form: 'text', text: 'the log level' },
  ROOMGATE_ADMIN_TOKEN: { key: 'admin.token', form: 'text', text: 'the admin token (the CLI sends it too)' },
  ROOMGATE_DRAIN_TOKENS: { key: 'admin.drainTokens', form: 'list', text: 'comma-separated tokens allowed only to drain and undrain a backend (drain and undrain send the first when no admin token is given)' },
  ROOMGATE_API_TOKENS: { key: 'api.tokens', form: 'list', text: 'comma-separated bearer tokens for API writes' },
  ROOMGATE_API_LIST_ROOMS: { key: 'api.listRooms', form: 'list', text: 'comma-separated globs of room keys the public lobby may list (api.listRooms), e.g. public-*' },
  ROOMGATE_PUSH_TOKENS: { key: 'push.tokens', form: 'list', text: 'comma-separated bearer tokens with the push scope' },
  ROOMGATE_CALL_SECRETS: { key: 'backendCalls.secrets', form: 'list', text: "comma-separated secrets that sign roomgate's calls to backends (pushes, handoff hooks); each backend gets only its own keys (roomgate backend-key ID)" },
  ROOMGATE_TLS_CERTS: { key: 'tls.certs', form: 'certs', text: 'comma-separated CERT:KEY pairs of PEM file paths (the first is the default), e.g. a Kubernetes TLS Secret mounted at /etc/roomgate/tls: /etc/roomgate/tls/tls.crt:/etc/roomgate/tls/tls.key' },
  ROOMGATE_WORKERS: { text: 'start --workers: worker processes on the one port (1-64 or auto)' },
  ROOMGATE_BALANCE: { text: 'start --balance: how workers share the port (kernel or primary)' },
  ROOMGATE_DEMO_BASE_PORT: { key: 'demo.basePort', form: 'number', text: 'the first demo backend port (the demo only)' },
  REDIS_URL: { key: 'redis.url', form: 'text', text: 'the Redis URL' },
  REDIS_SENTINELS: { key: 'redis.sentinels', form: 'list', text: 'comma-separated host:port of the Redis Sentinels' },
  REDIS_SENTINEL_NAME: { key: 'redis.sentinelName', form: 'text', text: 'the Sentinel master group name' },
  REDIS_CLUSTER_NODES: { key: 'redis.clusterNodes', form: 'list', text: 'comma-separated host:port of Redis Cluster nodes' },
  REDIS_TLS_CA: { key: 'redis.tlsCa', form: 'text', text: 'PEM file of the CAs that sign the Redis servers\' certificates (rediss://)' },
  REDIS_TLS_CERT: { key: 'redis.tlsCert', form: 'text', text: 'PEM file of the client certificate shown to Redis (rediss://)' },
  REDIS_TLS_KEY: { key: 'redis.tlsKey', form: 'text', text: 'PEM file of the key of that client certificate' },
};
