// The configuration contract: every key, its type, its default and what is allowed.
// config/roomgate.example.yaml documents the same keys; a test keeps the two equal.
import { z } from 'zod';

const port = z.number().int().min(0).max(65535);
const positiveMs = z.number().int().min(1).max(86_400_000);
const optionalMs = z.number().int().min(0).max(86_400_000); // 0 = off

export const KEY_SOURCES = ['path-prefix', 'query', 'page-path', 'cookie', 'header'] as const;
export type KeySource = (typeof KEY_SOURCES)[number];

const regex = z.string().superRefine((s, ctx) => {
  try {
    new RegExp(s);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a valid regular expression (${(err as Error).message})` });
  }
});

// A page path pattern such as /game/{room}/: {room} once, as one whole path segment; the rest literal.
const pagePattern = z
  .string()
  .regex(/^\/(?:[^{}]*\/)?\{room\}(?:\/[^{}]*)?$/, 'a path with {room} once as a whole segment, e.g. "/game/{room}/"');

const backend = z.strictObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'an id of 1-64 characters from A-Z a-z 0-9 _ . : -')
    .optional(),
  url: z.string().refine((s) => /^http:\/\/[^/?#\s]+\/?$/.test(s) && URL.canParse(s), {
    message: 'an http:// URL with host and port and no path, e.g. "http://10.0.0.5:8000"',
  }),
  weight: z.number().min(0).max(100).default(1),
});

// A static mount: URL prefix -> directory. The prefix is matched against the raw request path,
// so it is limited to characters that are never percent-encoded; /_roomgate/ is roomgate's own.
const staticMount = z.strictObject({
  prefix: z
    .string()
    .regex(/^\/(?:[A-Za-z0-9_~!$&'()*+,;=:@.-]+\/)+$/, 'a URL path that starts and ends with "/", e.g. "/static/"')
    .refine((p) => !p.split('/').some((s) => s === '.' || s === '..'), { message: 'a path without "." or ".." segments, e.g. "/static/"' })
    .refine((p) => !p.startsWith('/_roomgate/'), { message: 'a prefix outside /_roomgate/ (reserved for roomgate\'s own API), e.g. "/static/"' }),
  // Must exist and be a readable directory when the configuration is loaded; relative to the
  // working directory.
  dir: z.string().min(1),
});

export const configSchema = z.strictObject({
  listen: z
    .strictObject({
      host: z.string().min(1).default('0.0.0.0'),
      port: port.default(8080),
      // Bigger request heads are refused with 431 before any routing (Node's parser enforces it).
      maxHeaderBytes: z.number().int().min(1024).max(1_048_576).default(16_384),
      // More request header lines than this get 431 (Apache's LimitRequestFields is 100 too).
      maxHeaders: z.number().int().min(16).max(10_000).default(100),
      // Time a client has to send a complete request head (slowloris guard).
      headersTimeoutMs: positiveMs.default(20_000),
      // Time for a whole request, head and body, to arrive (a body trickled byte by byte is cut
      // with 408). 0 = no limit. WebSocket sockets are not affected.
      requestTimeoutMs: optionalMs.default(300_000),
      // How long an idle keep-alive client connection stays open.
      keepAliveTimeoutMs: positiveMs.default(5_000),
    })
    .prefault({}),
  admin: z
    .strictObject({
      // The admin port (/metrics, /backends) binds to loopback unless you say otherwise.
      host: z.string().min(1).default('127.0.0.1'),
      port: port.default(9090),
      enabled: z.boolean().default(true),
      // Bearer token for admin writes (drain, undrain, maintenance). Empty: writes are refused.
      // Prefer the ROOMGATE_ADMIN_TOKEN environment variable.
      token: z.string().refine((t) => t === '' || t.length >= 16, { message: 'empty (writes off) or at least 16 characters' }).default(''),
      // Host names (no port) the admin port answers besides IP addresses and localhost; other
      // Hosts get 421, a guard against DNS rebinding (a web page re-pointing its own name at the
      // admin port). E.g. the name Prometheus scrapes it by.
      allowedHosts: z
        .array(z.string().regex(/^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/, 'a host name without port, e.g. "roomgate-admin"'))
        .default([]),
    })
    .prefault({}),
  backends: z.array(backend).default([]),
  discovery: z
    .strictObject({
      // DNS discovery of backends (a Kubernetes headless Service). null: the static list only.
      dns: z
        .strictObject({
          name: z.string().min(1),
          type: z.enum(['A', 'AAAA', 'A+AAAA', 'SRV']).default('SRV'),
          // Port of A/AAAA backends (SRV records carry their own).
          port: port.default(8000),
          intervalMs: positiveMs.default(5_000),
          // DNS servers ("ip" or "ip:port"); empty = the system's resolvers.
          servers: z.array(z.string()).default([]),
        })
        .nullable()
        .default(null),
    })
    .prefault({}),
  health: z
    .strictObject({
      // null (default): a TCP connect check, which every backend passes while it listens (like
      // HAProxy's plain `check`): many apps (Django, djust) have no health route, and a default
      // path they answer 404 would take every backend out. A path: GET it on each backend
      // (2xx/3xx passes), opt-in for apps that have such a route.
      path: z.string().startsWith('/', 'a path starting with "/"').nullable().default(null),
      // Host header of the HTTP check; null = host:port of the backend's URL. Django answers 400
      // to a Host that is not in ALLOWED_HOSTS (e.g. "127.0.0.1:8000"): set one it accepts.
      host: z
        .string()
        .regex(/^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/, 'a Host header value: a name or address with an optional port, e.g. "app.example.com" or "app.example.com:8000"')
        .nullable()
        .default(null),
      intervalMs: positiveMs.default(2_000),
      timeoutMs: positiveMs.default(1_000),
      // Consecutive passes to go down -> up, failures to go up -> down.
      rise: z.number().int().min(1).max(100).default(2),
      fall: z.number().int().min(1).max(100).default(3),
      // A backend marked down by its checks gets no new rooms. 'keep': its live sockets stay until
      // they end by themselves (a failed check is weaker evidence than sockets carrying frames),
      // and its rooms' new sockets and pages still go there while this gateway holds live sockets
      // of them, so no room is split. 'close': its sockets are closed at once (unless no other
      // backend is up), as HAProxy's on-marked-down shutdown-sessions.
      onDown: z.enum(['keep', 'close']).default('keep'),
    })
    .prefault({}),
  placement: z
    .strictObject({
      // A room with no live socket keeps its backend this long (longer than djust's ~150 s
      // reconnect window: 10 attempts, back-off up to 30 s).
      idleTtlMs: positiveMs.default(180_000),
      // A cached placement is re-read from the store after this long.
      cacheTtlMs: positiveMs.default(5_000),
      // Live rooms and load figures are exchanged with the store this often.
      heartbeatMs: positiveMs.default(1_000),
      // A gateway silent this long no longer holds rooms busy (must exceed 2 heartbeats).
      gatewayTtlMs: positiveMs.default(5_000),
      // Bounded loads: a new room skips a backend whose load is at ceil(factor * average).
      // 0 turns them off (pure consistent hashing). Never applies to a placed room.
      boundedLoadFactor: z.union([z.literal(0), z.number().min(1).max(10)]).default(1.25),
      // What "load" counts: rooms placed (all gateways) or this gateway's live sockets.
      loadMetric: z.enum(['rooms', 'sockets']).default('rooms'),
    })
    .prefault({}),
  redis: z
    .strictObject({
      // redis://[:password@]host:port/db, rediss:// for TLS. null: in-memory store (one gateway).
      // Prefer the REDIS_URL environment variable.
      url: z.string().regex(/^rediss?:\/\//, 'a redis:// or rediss:// URL').nullable().default(null),
      // Sentinel form: "host:port" of each sentinel (env REDIS_SENTINELS, comma-separated) and the
      // master group name. redis.url, if set, then only carries password, TLS (rediss://) and db
      // (its host:port is not used).
      sentinels: z.array(z.string()).default([]),
      sentinelName: z.string().min(1).default('mymaster'),
      // Cluster form: "host:port" of some cluster nodes (env REDIS_CLUSTER_NODES, comma-separated).
      // redis.url, if set, then only carries password and TLS (rediss://; its host:port is not used).
      clusterNodes: z.array(z.string()).default([]),
      // Every key starts with this, so several apps can share one Redis.
      keyPrefix: z.string().regex(/^[A-Za-z0-9_.:-]{0,64}$/, 'up to 64 characters from A-Z a-z 0-9 _ . : -').default('roomgate:'),
      // No Redis call waits longer than this (then the gateway runs degraded).
      commandTimeoutMs: positiveMs.default(500),
    })
    .prefault({}),
  api: z
    .strictObject({
      // The shared-data API under /_roomgate/api/ on the public port (lobby, presence, leaderboards).
      enabled: z.boolean().default(true),
      // Bearer tokens allowed to write room metadata and scores (16+ characters each). Empty:
      // writes are refused. Prefer the ROOMGATE_API_TOKENS environment variable.
      tokens: z.array(z.string().min(16, 'at least 16 characters')).default([]),
      // Largest room metadata document accepted (bytes of JSON).
      maxMetaBytes: z.number().int().min(64).max(1_048_576).default(4_096),
      // The lobby stream pushes changes at most this often.
      streamIntervalMs: z.number().int().min(50).max(60_000).default(500),
      // Concurrent Server-Sent Event streams per port (a count): on the public port the lobby
      // streams and the public status streams together, on the admin port the status streams.
      // Each holds a connection and up to 1 MiB of unread frames, so this bounds what anyone who
      // reaches the port can hold open; past it: 503 with Retry-After. Per worker with --workers.
      maxStreams: z.number().int().min(1).max(10_000).default(64),
    })
    .prefault({}),
  status: z
    .strictObject({
      // The status page (/_roomgate/) on the public port: 'off' (admin port only), 'token' (the
      // admin token as HTTP Basic password or bearer token), 'open' (anyone). Always on the admin port.
      public: z.enum(['off', 'token', 'open']).default('off'),
    })
    .prefault({}),
  presence: z
    .strictObject({
      // A gateway's presence counts vanish this long after its last heartbeat (crash, kill -9).
      ttlMs: z.number().int().min(1_000).max(15_000).default(10_000),
    })
    .prefault({}),
  admission: z
    .strictObject({
      // Per backend: WebSocket handshakes in flight (0 = unlimited).
      maxInflightUpgrades: z.number().int().min(0).max(100_000).default(200),
      // Per backend: handshakes per second, also the burst (0 = unlimited).
      upgradesPerSecond: z.number().int().min(0).max(1_000_000).default(500),
      retryAfterS: z.number().int().min(1).max(3600).default(1),
    })
    .prefault({}),
  demo: z
    .strictObject({
      // With no backends configured, `roomgate start` runs this many demo backends itself.
      backends: z.number().int().min(1).max(16).default(3),
      basePort: port.default(8101),
    })
    .prefault({}),
  room: z
    .strictObject({
      sources: z
        .array(z.enum(KEY_SOURCES))
        .min(1)
        .refine((a) => new Set(a).size === a.length, { message: 'each source at most once' })
        .default(['path-prefix', 'query', 'page-path', 'cookie', 'header']),
      pattern: regex.default('^[A-Za-z0-9_.:-]{1,128}$'),
      queryParam: z.string().min(1).default('room'),
      // /r/{room}/rest is forwarded as /rest. Must start and end with "/".
      pathPrefix: z
        .string()
        .regex(/^\/([A-Za-z0-9_.-]+\/)+$/, 'a path like "/r/" that starts and ends with "/"')
        .default('/r/'),
      pagePaths: z.array(pagePattern).default(['/game/{room}/']),
      header: z
        .string()
        .regex(/^[A-Za-z0-9-]+$/, 'an HTTP header name')
        .default('X-Room-Key'),
      // What to do with a request that carries no valid room key.
      noRoom: z.enum(['least-loaded', 'reject']).default('least-loaded'),
    })
    .prefault({}),
  cookie: z
    .strictObject({
      name: z
        .string()
        .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a cookie name of 1-64 characters from A-Z a-z 0-9 _ -')
        .default('roomgate_room'),
      // 'roomgate' (own format), 'django-signer' (signing.Signer(salt=...)),
      // 'django-cookie' (HttpResponse.set_signed_cookie(name, room, salt=...)).
      format: z.enum(['roomgate', 'django-signer', 'django-cookie']).default('roomgate'),
      // The first secret signs, all verify. Prefer the ROOMGATE_COOKIE_SECRETS environment variable.
      secrets: z.array(z.string().min(16, 'at least 16 characters')).default([]),
      salt: z.string().default(''),
      // Cookie lifetime and the oldest signature accepted (formats with a timestamp). 0 = session cookie.
      maxAgeS: z.number().int().min(0).max(31_536_000).default(86_400),
      // false accepts a plain, unsigned room cookie: only for apps on a trusted network.
      signed: z.boolean().default(true),
      // Set the signed room cookie on page responses whose key came from query, path or header.
      setOnPages: z.boolean().default(true),
    })
    .prefault({}),
  proxy: z
    .strictObject({
      // Upgrades are proxied on paths with one of these prefixes; others get 404. "/" = any path.
      websocketPaths: z
        .array(z.string().startsWith('/', 'a path prefix starting with "/"'))
        .min(1)
        .default(['/']),
      connectTimeoutMs: positiveMs.default(5_000),
      // Time from sending a request to the backend's response head; then 504.
      responseTimeoutMs: positiveMs.default(60_000),
      // Close a proxied WebSocket with no traffic either way for this long. 0 = never (djust pings every 30 s).
      websocketIdleTimeoutMs: optionalMs.default(0),
      // Idle keep-alive connections kept per backend.
      maxIdleSocketsPerBackend: z.number().int().min(0).max(10_000).default(64),
      // Peers whose X-Forwarded-* headers are trusted (IPs or CIDRs). Others' are replaced.
      trustedProxies: z.array(z.string()).default([]),
      // A backend that refuses a connection gets no new traffic for this long.
      passiveDownMs: positiveMs.default(10_000),
      // Retry-After seconds sent with a 503 when no backend can take a request.
      retryAfterS: z.number().int().min(1).max(3600).default(2),
    })
    .prefault({}),
  static: z
    .strictObject({
      // Directories roomgate serves itself (e.g. Django's collectstatic output); longest prefix wins.
      // A path under a mount never reaches a backend (404 when the file is missing).
      mounts: z.array(staticMount).default([]),
      // Cache-Control max-age (s) of files whose name has no content hash; 0 = no-cache.
      maxAgeS: z.number().int().min(0).max(31_536_000).default(60),
      // Paths (under the mount) matching this are content-hashed: cached a year, immutable.
      // The default matches "app.3f2a9c1b.js" and Django's "css/base.5af66c1b1797.css". null = none.
      hashedNames: regex.nullable().default('[.-][0-9a-f]{8,64}\\.[A-Za-z0-9]+$'),
    })
    .prefault({}),
  shutdown: z
    .strictObject({
      // After SIGTERM: readiness is false for this long before the listener closes.
      readinessDelayMs: optionalMs.default(0),
      // Then live sockets get this long to finish before they are closed.
      graceMs: optionalMs.default(10_000),
    })
    .prefault({}),
  log: z
    .strictObject({
      level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    })
    .prefault({}),
});

export type Config = z.infer<typeof configSchema>;
export type BackendConfig = Config['backends'][number];
