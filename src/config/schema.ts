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

export const configSchema = z.strictObject({
  listen: z
    .strictObject({
      host: z.string().min(1).default('0.0.0.0'),
      port: port.default(8080),
      // Bigger request heads are refused with 431 before any routing (Node's parser enforces it).
      maxHeaderBytes: z.number().int().min(1024).max(1_048_576).default(16_384),
      // Time a client has to send a complete request head (slowloris guard).
      headersTimeoutMs: positiveMs.default(20_000),
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
    })
    .prefault({}),
  backends: z.array(backend).default([]),
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
