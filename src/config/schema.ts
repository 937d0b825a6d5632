// The configuration contract: every key, its type, its default, what is allowed and what it does.
// The words live next to the rules: `doc(...)` gives each key the text that the reference
// (docs/configuration.md) and the example (config/roomgate.example.yaml) show, and each custom
// rule says in its message what is allowed (an "expected ..." phrase). `npm run docs:config`
// writes both files from here; a test fails when they are out of date.
import { isIP } from 'node:net';
import { z } from 'zod';
import { targetFlaw } from '../http/syntax.js';

/** What the reference, the example file and the error messages know about a key or a value type. */
export interface KeyDoc {
  /** What the key does, in sentences. */
  text?: string;
  /** What a value must be, when the type and range do not say it (a pattern, a format). */
  allowed?: string;
  /** Unit of a number. */
  unit?: 'ms' | 's' | 'bytes';
  /** What 0 means, when it is special (e.g. "no limit"). */
  zero?: string;
  /** What null means. */
  null?: string;
  /** A secret is never printed: 'value' hides all of it, 'url-password' only the password in a URL. */
  secret?: 'value' | 'url-password';
  /** A value worth showing (commented out in the example file) when the default is empty or null. */
  example?: unknown;
}

/** The documentation of schema nodes; describe.ts reads it. */
export const docs = z.registry<KeyDoc>();

/** Gives a schema node its documentation and returns the node. */
function doc<T extends z.ZodType>(schema: T, d: KeyDoc): T {
  docs.add(schema, d);
  return schema;
}

/** Text that must match `re`; `allowed` says what that means, for messages and the reference. */
function matching(re: RegExp, allowed: string): z.ZodString {
  return z.string().regex(re, allowed);
}

const port = z.number().int().min(0).max(65535);
const positiveMs = doc(z.number().int().min(1).max(86_400_000), { unit: 'ms' });
const optionalMs = doc(z.number().int().min(0).max(86_400_000), { unit: 'ms', zero: 'off' });
const seconds = (min: number, max: number) => doc(z.number().int().min(min).max(max), { unit: 's' });

export const KEY_SOURCES = ['pin', 'path-prefix', 'query', 'page-path', 'cookie', 'header'] as const;
export type KeySource = (typeof KEY_SOURCES)[number];

const regex = doc(
  z.string().superRefine((s, ctx) => {
    try {
      new RegExp(s);
    } catch (err) {
      // "Invalid regular expression: /([/: Unterminated character class" -> "unterminated character class"
      const why = (err as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
      ctx.addIssue({ code: 'custom', message: `a regular expression (JavaScript syntax) that compiles; this one does not: ${why.charAt(0).toLowerCase()}${why.slice(1)}` });
    }
  }),
  { allowed: 'a regular expression (JavaScript syntax)' },
);

/** A glob of api.listRooms: `*` matches any characters, every other character itself; no regular expression. */
const listGlob = doc(
  z
    .string()
    .min(1, 'a glob such as "public-*" (an empty one lists nothing; leave the list empty instead)')
    .max(256, 'a glob of at most 256 characters')
    .superRefine((s, ctx) => {
      const bad = /[\\^$()[\]{}|+?,]/.exec(s);
      if (bad) {
        ctx.addIssue({
          code: 'custom',
          message: `a glob such as "public-*", where only * is special, not a regular expression: "${bad[0]}" is not allowed here (for ^public-.*$ write public-*)`,
        });
      }
    }),
  { allowed: 'a glob: * matches any characters, every other character itself (no \\ ^ $ ( ) [ ] { } | + ? or comma), e.g. "public-*"' },
);

const HOST_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;
const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/;

/** "host:port" with a port from 1 to 65535 ("[ipv6]:port" for IPv6). */
const hostPort = (example: string) =>
  z.string().refine(
    (s) => {
      const m = HOST_PORT.exec(s);
      return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65535;
    },
    { message: `a "host:port" with a port from 1 to 65535, e.g. "${example}"` },
  );

export function isIpOrCidr(s: string): boolean {
  const [addr, bits, extra] = s.split('/');
  if (extra !== undefined || !addr) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** A DNS server as Node's resolver takes it: "ip", "ip:port" or "[ipv6]:port". */
function isDnsServer(s: string): boolean {
  if (isIP(s) !== 0) return true;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(s);
  if (!m) return false;
  const addr = m[1] ?? m[2] ?? '';
  const p = Number(m[3]);
  return isIP(addr) !== 0 && p >= 1 && p <= 65535;
}

// A page path pattern such as /game/{room}/: {room} once, as one whole path segment; the rest literal.
const pagePattern = matching(/^\/(?:[^{}]*\/)?\{room\}(?:\/[^{}]*)?$/, 'a path with {room} once as a whole segment, e.g. "/game/{room}/"');

/** A cache path: a prefix, or "~" and a regular expression on the path. */
const cachePath = doc(z.string().superRefine((s, ctx) => {
  if (s.startsWith('~')) {
    try {
      new RegExp(s.slice(1));
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `a valid regular expression after "~" (${(err as Error).message})` });
    }
  } else if (!s.startsWith('/')) ctx.addIssue({ code: 'custom', message: 'a path prefix starting with "/", or "~" and a regular expression' });
}), { allowed: 'a path prefix starting with "/" (e.g. "/blog/"), or "~" and a regular expression on the path (e.g. "~^/game/[0-9]+$")' });
const cookieName = matching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'a cookie name (a token; "*" at the end matches a prefix), e.g. "sessionid" or "_ga*"');

// The health check writes its path into the request line as it is: a space, CR or LF there would
// split the line or add header lines, so only request-target characters (src/http/syntax.ts).
const HEALTH_PATH = `a path starting with "/" of the characters a request target allows (letters, digits and -._~!$&'()*+,;=:@/?%, each "%" starting an escape such as %20), e.g. "/healthz"`;
function healthPathRule(s: string, ctx: z.RefinementCtx): void {
  if (!s.startsWith('/')) return void ctx.addIssue({ code: 'custom', message: 'a path starting with "/", e.g. "/healthz"' });
  const at = targetFlaw(s);
  if (at === -1) return;
  const ch = String.fromCodePoint(s.codePointAt(at) as number);
  const c = ch.charCodeAt(0);
  const fix =
    ch === '%'
      ? `the "%" at offset ${at} starts no escape of two hex digits: write a "%" itself as %25`
      : c < 0x20 || c === 0x7f
        ? `remove the control character ${JSON.stringify(ch)} at offset ${at} (a line break or tab in the value?)`
        : `percent-encode ${JSON.stringify(ch)} as ${[...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('')}`;
  ctx.addIssue({ code: 'custom', message: `${HEALTH_PATH}; ${fix}` });
}

const BACKEND_URL = 'an http:// or https:// URL with host and port and no path, e.g. "http://10.0.0.5:8000" or "https://app-1.internal:8443"';
const backend = z.strictObject({
  id: doc(matching(/^[A-Za-z0-9_.:-]{1,64}$/, 'an id of 1-64 characters from A-Z a-z 0-9 _ . : -').optional(), {
    text: 'Names the backend in logs, metrics and the admin API; the ring hashes ids, so keep them stable. Default: host:port of the URL.',
  }),
  url: doc(
    z.string().superRefine((s, ctx) => {
      if (/^https?:\/\/[^/?#\s]+\/?$/.test(s) && URL.canParse(s)) return;
      const fix = /^https?:\/\/[^/?#\s]+[/?#]./.test(s) ? '; remove the path (roomgate forwards each request path as it comes)' : '';
      ctx.addIssue({ code: 'custom', message: BACKEND_URL + fix });
    }),
    {
      text: 'Where the backend listens. https:// speaks TLS to it (pages, WebSockets and health checks), verified as `backendTls` says; the port defaults to 80 for http, 443 for https.',
      allowed: BACKEND_URL,
    },
  ),
  weight: doc(z.number().min(0).max(100).default(1), {
    text: 'Relative share of new rooms; 0 takes no new rooms (its placed rooms stay).',
    zero: 'no new rooms',
  }),
});

// A static mount: URL prefix -> directory. The prefix is matched against the raw request path,
// so it is limited to characters that are never percent-encoded; /_roomgate/ is roomgate's own.
const staticMount = z.strictObject({
  prefix: doc(
    matching(/^\/(?:[A-Za-z0-9_~!$&'()*+,;=:@.-]+\/)+$/, 'a URL path that starts and ends with "/", e.g. "/static/"')
      .refine((p) => !p.split('/').some((s) => s === '.' || s === '..'), { message: 'a URL path without "." or ".." segments, e.g. "/static/"' })
      .refine((p) => !p.startsWith('/_roomgate/'), { message: 'a URL path outside /_roomgate/ (reserved for roomgate\'s own pages and API), e.g. "/static/"' }),
    {
      text: 'URL path prefix served from `dir`; it starts and ends with "/". The longest matching prefix wins.',
      allowed: 'a URL path that starts and ends with "/" (e.g. "/static/"), without "." or ".." segments, outside /_roomgate/',
    },
  ),
  dir: doc(z.string().min(1), {
    text: 'The directory to serve; relative to the working directory. It must exist and be readable when the configuration is loaded.',
  }),
});

// A group of keys: every key has a default, so an absent group is all defaults.
const errorPage = z.strictObject({
  status: doc(z.number().int().min(400).max(599), { text: 'The status whose answer this page is (e.g. 502, 503, 504).' }),
  file: doc(z.string().min(1), { text: 'An HTML file, read at start.' }),
});

const section = <T extends z.core.$ZodLooseShape>(text: string, shape: T) => doc(z.strictObject(shape).prefault({} as z.input<z.ZodObject<T>>), { text });

export const configSchema = z.strictObject({
  listen: section('The public listener: pages, API and WebSockets.', {
    host: doc(z.string().min(1).default('0.0.0.0'), { text: 'Public address.' }),
    port: doc(port.default(8080), { text: 'Public port; 0 = any free port (the `listening` log line says which).' }),
    maxHeaderBytes: doc(z.number().int().min(1024).max(1_048_576).default(16_384), {
      text: "Bigger request heads are refused with 431 before any routing (Node's parser enforces it).",
      unit: 'bytes',
    }),
    maxHeaders: doc(z.number().int().min(16).max(10_000).default(100), {
      text: "More request header lines than this get 431 (Apache's LimitRequestFields is 100 too). Host counts; on HTTP/2 the Host made from :authority counts the same, so one limit holds on both protocols.",
    }),
    headersTimeoutMs: doc(positiveMs.default(20_000), { text: 'Time a client has to send a complete request head (slowloris guard).' }),
    requestTimeoutMs: doc(optionalMs.default(300_000), {
      text: 'Time for a whole request, head and body, to arrive: a body trickled byte by byte is cut with 408. At least `headersTimeoutMs`. WebSocket sockets are not affected.',
      zero: 'no limit',
    }),
    keepAliveTimeoutMs: doc(positiveMs.default(5_000), { text: 'How long an idle keep-alive client connection stays open.' }),
    maxConnections: doc(z.number().int().min(0).max(10_000_000).default(0), {
      text: 'Client connections the public port holds at once (HTTP/1.1, h2 and WebSockets alike); one more is closed at once on accept and counted in roomgate_connections_refused_total. Per process (with `--workers N`, each worker has this limit).',
      zero: 'derived from the process\'s open-file limit (`ulimit -n`, read from /proc/self/limits; 1024 where it cannot be read): (limit - `descriptorReserve`) / 2, since each client connection may hold a backend connection',
    }),
    descriptorReserve: doc(z.number().int().min(0).max(10_000_000).default(0), {
      text: 'File descriptors the derived `maxConnections` leaves for everything else: keep-alive connections to backends, Redis, static files, the admin port (`admin.maxConnections`) and the redirect port. Raise it with many backends (each may keep 2 x `proxy.maxIdleSocketsPerBackend` idle connections).',
      zero: 'max(256, limit / 8), at most half the limit',
    }),
    maxConnectionsPerAddress: doc(z.number().int().min(0).max(10_000_000).default(0), {
      text: "Client connections at once from one client address on the public port; one more is closed at once and counted. Off by default: many users can share one address (NAT, a company proxy, a mobile carrier), and behind a load balancer every connection comes from the balancer's address. A value for direct exposure: a few hundred.",
      zero: 'no cap',
    }),
  }),
  tls: section('TLS on the public port (https and wss), off while no certificate is listed.', {
    certs: doc(
      z
        .array(
          z.strictObject({
            cert: doc(z.string().min(1), { text: 'PEM certificate file, the chain after it (fullchain.pem).' }),
            key: doc(z.string().min(1), { text: 'PEM private key file of that certificate.' }),
          }),
        )
        .max(100)
        .default([]),
      {
        text: 'Certificates and keys from PEM files. The first is for clients that send no server name or one no certificate covers; the others are chosen by SNI from the names in each certificate (DNS subjectAltNames, else the CN; *.example.com covers one label). Read again on SIGHUP and when a file changes, without dropping a socket; a reload that fails keeps the certificates in use. Listing certificates turns TLS on: the port then speaks only TLS.',
        example: [{ cert: '/etc/roomgate/tls/fullchain.pem', key: '/etc/roomgate/tls/privkey.pem' }],
      },
    ),
    minVersion: doc(z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2'), { text: 'Oldest TLS version accepted; Node picks the ciphers and curves (modern defaults).' }),
    ticketKeyRotationS: doc(seconds(0, 604_800).default(3_600), {
      text: "The keys TLS session resumption data is encrypted with (Node's ticketKeys) are replaced this often (with `--workers N` by the primary, for all workers at once): a stolen key opens only the sessions of its own period. A client resuming with data of an older key makes a full handshake.",
      zero: 'never: one key for the life of the process (or of the cluster)',
    }),
    reloadCheckMs: doc(optionalMs.default(10_000), { text: 'How often the certificate files are checked for a change (size or time); a change reloads them.', zero: 'only on SIGHUP' }),
    redirectPort: doc(port.nullable().default(null), {
      text: 'A plain-HTTP listener on this port (same address as the public one) that answers every request with a 308 to the same URL on https, except /healthz and /readyz, which it answers itself (probes often speak plain HTTP). Only with certificates.',
      null: 'no plain-HTTP listener',
      example: 80,
    }),
    hstsMaxAgeS: doc(z.number().int().min(0).max(63_072_000).default(0), {
      text: 'Strict-Transport-Security: browsers that saw it use only https for the host this long. Added to every answer on the TLS port that has none of its own (a backend\'s own wins). Start small: a browser remembers it even if TLS is turned off later.',
      unit: 's',
      zero: 'no header',
    }),
    hstsIncludeSubdomains: doc(z.boolean().default(false), { text: 'Adds includeSubDomains to Strict-Transport-Security: every subdomain must then serve https too.' }),
  }),
  http2: section('HTTP/2 on the TLS port (ALPN "h2" beside "http/1.1"); browsers pick it on their own. Plain-HTTP ports speak HTTP/1.1 only.', {
    enabled: doc(z.boolean().default(true), { text: 'Offer h2 to TLS clients. Page requests on h2 streams are proxied to the backends over HTTP/1.1, read and routed exactly as HTTP/1.1 requests are.' }),
    websockets: doc(z.boolean().default(true), {
      text: 'WebSockets over h2 (RFC 8441): roomgate sends SETTINGS_ENABLE_CONNECT_PROTOCOL and browsers open their WebSockets as streams of the page\'s h2 connection; each is joined to the backend\'s HTTP/1.1 upgrade with the same room key, admission, placement and X-Forwarded-* as an HTTP/1.1 handshake. Off: browsers open WebSockets on HTTP/1.1 connections.',
    }),
    maxConcurrentStreams: doc(z.number().int().min(1).max(1000).default(100), {
      text: 'Streams one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS), WebSockets included; more are refused with REFUSED_STREAM.',
    }),
    maxResets: doc(z.number().int().min(1).max(100_000).default(100), {
      text: 'Streams a client may reset (RST_STREAM) before their answer on one connection, at once; the budget refills at this many per `resetWindowS`. The connection that overdraws it is closed with GOAWAY ENHANCE_YOUR_CALM: the rapid-reset attack (CVE-2023-44487) opens and resets streams to make the proxy start backend work it never waits for. A stream reset in the same read as its request never reaches a backend. Browsers reset a few streams when a page is left; resets after the answer began (a cancelled download, a closed WebSocket) are not counted.',
    }),
    resetWindowS: doc(seconds(1, 3_600).default(10), {
      text: 'The time in which the `maxResets` budget refills entirely (at an even rate): with the defaults a connection may reset 100 streams at once and 10 a second for ever.',
    }),
  }),
  admin: section('The admin listener: /metrics, /backends, the status page and admin writes (drain, undrain, maintenance, moves, purges).', {
    enabled: doc(z.boolean().default(true), { text: 'Run the admin listener.' }),
    host: doc(z.string().min(1).default('127.0.0.1'), { text: 'Admin address: loopback unless you open it.' }),
    port: doc(port.default(9090), { text: 'Admin port.' }),
    token: doc(
      z
        .string()
        .refine((t) => t === '' || t.length >= 16, { message: 'empty (admin writes off) or a token of at least 16 characters' })
        .default(''),
      {
        text: 'Bearer token for admin writes (drain, undrain, maintenance) and for `status.public: token` (as bearer token or HTTP Basic password). Empty: writes are refused. Prefer the environment variable to the file.',
        secret: 'value',
      },
    ),
    drainTokens: doc(z.array(z.string().min(16, 'a token of at least 16 characters, e.g. from `openssl rand -hex 24`')).max(4).default([]), {
      text: "Bearer tokens allowed only to drain (with or without handoff) and undrain a backend: for a backend pod's own `preStop` hook (docs/deployment.md), so the app pods never hold `admin.token`. Every other admin write answers them 403, as does a backend in maintenance; with `drainFrom: backend` only the drained backend's own address may use them. Any of them passes: rotate by adding the new one, then giving it to the apps, then removing the old one. Must differ from `admin.token`. Prefer the environment variable to the file.",
      secret: 'value',
    }),
    drainFrom: doc(z.enum(['backend', 'anywhere']).default('backend'), {
      text: "Where a drain token (`drainTokens`) is accepted from. backend: only from an address of the backend it drains or undrains (its URL's host, resolved when it is a name), so a pod can drain itself and no other; anywhere: from any address that reaches the admin port (for a path that hides the pod's address, e.g. a proxy or SNAT in front of the admin port). `admin.token` is accepted from anywhere either way.",
    }),
    maxConnections: doc(z.number().int().min(1).max(100_000).default(64), {
      text: "Connections the admin port holds at once; one more is closed at once and counted. Small, and inside the public port's descriptor reserve, so /healthz and /readyz here answer even when the public port is at its limit: point probes at this port.",
    }),
    allowedHosts: doc(z.array(matching(HOST_NAME, 'a host name without port, e.g. "roomgate-admin"')).default([]), {
      text: 'Host names (no port) the admin port answers besides IP addresses and localhost, e.g. the name Prometheus scrapes it by. Other Hosts get 421: a guard against DNS rebinding (a web page re-pointing its own name at the admin port).',
      example: ['roomgate-admin'],
    }),
  }),
  backends: doc(z.array(backend).default([]), {
    text: 'The app backends: single-process servers that each hold their rooms in memory. Empty (and no `discovery.dns`): `roomgate start` runs demo backends (see `demo`).',
    example: [
      { id: 'b1', url: 'http://10.0.0.5:8000', weight: 1 },
      { id: 'b2', url: 'http://10.0.0.6:8000' },
    ],
  }),
  discovery: section('Backends found by DNS instead of (or besides) the static `backends` list.', {
    dns: doc(
      z
        .strictObject({
          name: doc(z.string().min(1), {
            text: 'The DNS name to query: for SRV records of a headless Service `_<port name>._<protocol>.<service>.<namespace>.svc.cluster.local`.',
            allowed: 'a DNS name, e.g. "_http._tcp.app-headless.default.svc.cluster.local"',
          }),
          type: doc(z.enum(['A', 'AAAA', 'A+AAAA', 'SRV']).default('SRV'), { text: 'Record type: SRV (stable ids from pod names, ports from the records), A, AAAA or A+AAAA.' }),
          port: doc(port.default(8000), { text: 'Port of A/AAAA backends (SRV records carry their own).' }),
          scheme: doc(z.enum(['http', 'https']).default('http'), { text: 'How discovered backends are spoken to: https uses TLS as `backendTls` says (the certificate must name the SRV target, or the address for A/AAAA, unless `backendTls.servername` is set).' }),
          intervalMs: doc(positiveMs.default(5_000), { text: 'How often the name is resolved again.' }),
          servers: doc(z.array(z.string().refine(isDnsServer, { message: 'a DNS server "ip" or "ip:port" ("[ipv6]:port"), e.g. "10.96.0.10" or "10.96.0.10:53"' })).default([]), {
            text: "DNS servers to ask; empty: the system's resolvers.",
          }),
        })
        .nullable()
        .default(null),
      {
        text: 'DNS discovery of backends, e.g. a Kubernetes headless Service.',
        null: 'no DNS discovery: the static list only',
        example: { name: '_http._tcp.app-headless.default.svc.cluster.local', type: 'SRV', port: 8000, scheme: 'http', intervalMs: 5000, servers: [] },
      },
    ),
  }),
  backendTls: section('TLS toward https:// backends (pages, WebSockets and health checks); read at start. http:// backends ignore it.', {
    ca: doc(z.string().min(1).nullable().default(null), {
      text: 'PEM file of the CA certificates that sign the backends\' certificates (e.g. an internal CA); it replaces Node\'s default list for backend connections. Read and checked at start.',
      allowed: 'a path to a PEM file, e.g. "/etc/roomgate/backend-ca.pem"',
      null: "Node's default trust store, the Mozilla CA list",
    }),
    verify: doc(z.boolean().default(true), {
      text: "Verify each https backend's certificate: signed by a CA of `ca` (or Node's list), not expired, and naming the backend (the URL's host, or `servername`). A backend that fails it is treated as unreachable (marked down, reason e.g. \"tls: CERT_HAS_EXPIRED\"). false accepts any certificate, so anyone on the path can pose as a backend: start logs a warning and check-config notes it.",
    }),
    servername: doc(matching(HOST_NAME, 'a host name, e.g. "app.internal"').nullable().default(null), {
      text: "The name sent as SNI and checked against every backend's certificate, when the certificates name a service rather than each backend (e.g. backends listed by address).",
      null: "the URL's host when it is a name; for an IP address no SNI, and the certificate must list that address",
    }),
    cert: doc(z.string().min(1).nullable().default(null), {
      text: 'PEM file of a client certificate (the chain after it) roomgate shows to backends that ask for one (mutual TLS). With `key`.',
      allowed: 'a path to a PEM file',
      null: 'no client certificate',
    }),
    key: doc(z.string().min(1).nullable().default(null), {
      text: 'PEM file of the private key of `cert`; it must belong to that certificate.',
      allowed: 'a path to a PEM file',
      null: 'no client certificate',
    }),
  }),
  health: section('Health checks of each backend.', {
    path: doc(z.string().superRefine(healthPathRule).nullable().default(null), {
      allowed: HEALTH_PATH,
      text: "A path to GET on each backend (2xx/3xx passes), for apps that have a health route. null: a TCP connect check, which a backend passes while it listens (like HAProxy's plain `check`): many apps (Django, djust) have no health route, and a default path they answer 404 would take every backend out.",
      null: 'a TCP connect check',
    }),
    host: doc(
      matching(
        /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/,
        'a Host header value: a name or address with an optional port, e.g. "app.example.com" or "app.example.com:8000"',
      )
        .nullable()
        .default(null),
      {
        text: 'Host header of the HTTP check (only with `health.path`). Django answers 400 to a Host that is not in ALLOWED_HOSTS (e.g. "127.0.0.1:8000"): set one it accepts.',
        null: "host:port of the backend's URL",
      },
    ),
    intervalMs: doc(positiveMs.default(2_000), { text: 'Time between two checks of one backend.' }),
    timeoutMs: doc(positiveMs.default(1_000), { text: 'A check slower than this fails; at most `intervalMs`.' }),
    rise: doc(z.number().int().min(1).max(100).default(2), { text: 'Passes in a row for a backend that is down to come back up.' }),
    fall: doc(z.number().int().min(1).max(100).default(3), { text: 'Failures in a row for a backend that is up to go down.' }),
    onDown: doc(z.enum(['keep', 'close']).default('keep'), {
      text: "A backend marked down by its checks gets no new rooms. keep: its live sockets stay until they end by themselves (a failed check is weaker evidence than sockets carrying frames), and its rooms' new sockets and pages still go there while this gateway holds live sockets of them, so no room is split. close: its sockets are closed at once (unless no other backend is up), as HAProxy's on-marked-down shutdown-sessions.",
    }),
  }),
  placement: section('Which backend a room goes to, and how long it stays there.', {
    idleTtlMs: doc(positiveMs.default(180_000), {
      text: "A room with no live socket keeps its backend this long; longer than djust's reconnect window (~150 s: 10 attempts, back-off up to 30 s).",
    }),
    cacheTtlMs: doc(positiveMs.default(5_000), { text: 'A cached placement is re-read from the store after this long.' }),
    maxIdleRooms: doc(z.number().int().min(100).max(10_000_000).default(20_000), {
      text: 'At most this many placements of rooms without a live socket are kept, in the gateway (per process) and in the store (memory or Redis, all gateways together); beyond it the least recently used go first, before `idleTtlMs`, so a flood of distinct room keys cannot grow memory. Rooms with live sockets, rooms placed while the store was unreachable and not yet written back, and (several gateways) placements younger than `gatewayTtlMs` are never evicted. Counted in roomgate_idle_rooms_evicted_total.',
    }),
    heartbeatMs: doc(positiveMs.default(1_000), { text: 'Live rooms and load figures are exchanged with the store this often.' }),
    gatewayTtlMs: doc(positiveMs.default(5_000), { text: 'A gateway silent this long no longer holds rooms busy; at least 2 x `heartbeatMs`.' }),
    boundedLoadFactor: doc(z.union([z.literal(0), z.number().min(1).max(10)]).default(1.25), {
      text: 'Bounded loads: a new room skips a backend whose load is at ceil(factor x average). Never applies to a placed room.',
      zero: 'bounded loads off: pure consistent hashing',
    }),
    loadMetric: doc(z.enum(['rooms', 'sockets']).default('rooms'), { text: "What load counts: rooms placed (all gateways) or this gateway's live sockets." }),
  }),
  redis: section(
    'The store several gateways share (placements, presence, shared data). Three forms: `url` alone; Sentinel (`sentinels` and `sentinelName`, `url` then only carries password, TLS and db); Cluster (`clusterNodes`, `url` then only carries password and TLS).',
    {
      url: doc(
        z
          .string()
          .refine((s) => /^rediss?:\/\//.test(s) && URL.canParse(s), { message: 'a redis:// or rediss:// URL, e.g. "redis://:password@10.0.0.7:6379/0"' })
          .nullable()
          .default(null),
        {
          text: 'redis://[:password@]host:port/db, or rediss:// for TLS. Prefer the environment variable to the file (it carries the password).',
          null: 'an in-memory store, for one gateway',
          secret: 'url-password',
        },
      ),
      sentinels: doc(z.array(hostPort('10.0.0.5:26379')).default([]), {
        text: 'Sentinel form: "host:port" of each sentinel. Not together with `clusterNodes`.',
        example: ['10.0.0.5:26379', '10.0.0.6:26379', '10.0.0.7:26379'],
      }),
      sentinelName: doc(z.string().min(1).default('mymaster'), { text: 'The Sentinel master group name.' }),
      clusterNodes: doc(z.array(hostPort('10.0.0.5:6379')).default([]), {
        text: 'Cluster form: "host:port" of some Cluster nodes (the rest are discovered). Not together with `sentinels`; db 0 only.',
        example: ['10.0.0.5:6379', '10.0.0.6:6379'],
      }),
      tlsCa: doc(z.string().min(1).nullable().default(null), {
        text: "With a rediss:// `url` (any form): PEM file of the CA certificates that sign the Redis servers' certificates (e.g. a private CA); it replaces Node's default list for Redis connections. Read and checked at start. A server whose certificate it does not verify is unreachable (the log says why).",
        allowed: 'a path to a PEM file, e.g. "/etc/roomgate/redis-ca.pem"',
        null: "Node's default trust store, the Mozilla CA list (managed Redis services with public certificates)",
      }),
      tlsCert: doc(z.string().min(1).nullable().default(null), {
        text: 'With a rediss:// `url`: PEM file of a client certificate roomgate shows to Redis (needed when the server runs with `tls-auth-clients yes`, its default). With `tlsKey`.',
        allowed: 'a path to a PEM file',
        null: 'no client certificate',
      }),
      tlsKey: doc(z.string().min(1).nullable().default(null), {
        text: 'PEM file of the private key of `tlsCert`; it must belong to that certificate.',
        allowed: 'a path to a PEM file',
        null: 'no client certificate',
      }),
      keyPrefix: doc(matching(/^[A-Za-z0-9_.:-]{0,64}$/, 'up to 64 characters from A-Z a-z 0-9 _ . : -').default('roomgate:'), {
        text: 'Every key starts with this, so several apps can share one Redis.',
      }),
      commandTimeoutMs: doc(positiveMs.default(500), { text: 'No Redis call waits longer than this (then the gateway runs degraded).' }),
    },
  ),
  api: section('The shared-data API under /_roomgate/api/ on the public port: lobby, presence, leaderboards.', {
    enabled: doc(z.boolean().default(true), {
      text: 'Serve the API: its reads, its writes and the pushes (push.tokens). Off: none of it, nor the lobby page; those paths go to the app. To keep writes and pushes but serve no read to anyone without a token, set `publicReads: false` instead.',
    }),
    publicReads: doc(z.boolean().default(true), {
      text: 'Serve the reads that need no token: GET /online, /lobby, /lobby/stream, /rooms/{room}, the leaderboard pages, and the lobby page (/_roomgate/lobby). Off: those answer 404 (the lobby page\'s paths go to the app), while metadata and score writes and the pushes work as before. Even on, the reads name only listed rooms (`listRooms`, and rooms whose metadata lists them) and never a backend id.',
    }),
    listRooms: doc(z.array(listGlob).max(100).default([]), {
      text: 'Room keys the public reads may name without the app listing them: globs where `*` matches any characters, e.g. ["public-*", "lobby.*"]; "*" lists every room. Any other room is listed only when the app sets its metadata (PUT /_roomgate/api/rooms/{room}/meta, unless ?listed=false): a per-tab or per-invite room key is never public by default.',
      example: ['public-*'],
    }),
    tokens: doc(z.array(z.string().min(16, 'a token of at least 16 characters')).default([]), {
      text: 'Bearer tokens allowed to write room metadata and scores (any of them passes, as bearer token or HTTP Basic password). Empty: writes are refused. Prefer the environment variable to the file.',
      secret: 'value',
    }),
    maxMetaBytes: doc(z.number().int().min(64).max(1_048_576).default(4_096), { text: 'Largest room metadata document accepted (bytes of JSON).', unit: 'bytes' }),
    streamIntervalMs: doc(z.number().int().min(50).max(60_000).default(500), { text: 'The lobby stream pushes changes at most this often.', unit: 'ms' }),
    maxStreams: doc(z.number().int().min(1).max(10_000).default(64), {
      text: 'Server-Sent Event streams open at once per port: on the public port the lobby and public status streams together, on the admin port the status streams. Each holds a connection and up to 1 MiB of unread frames, so this bounds what anyone who reaches the port can hold open; past it: 503 with Retry-After. Per worker with --workers.',
    }),
  }),
  push: section(
    'Cross-room push: POST /_roomgate/api/rooms/{room}/messages delivers a JSON message to the backend that holds the room (docs/push.md).',
    {
      tokens: doc(z.array(z.string().min(16, 'a token of at least 16 characters, e.g. from `openssl rand -hex 24`')).default([]), {
        text: 'Bearer tokens with the push scope (as bearer token or HTTP Basic password). Empty: pushes are refused (403). Prefer the environment variable to the file.',
        secret: 'value',
      }),
      path: doc(matching(/^\/[!-~]*$/, 'a path starting with "/" of visible ASCII characters, e.g. "/_roomgate/push"').default('/_roomgate/push'), {
        text: "The backend path a message is POSTed to, with the room's ownership fields (X-Roomgate-Room, X-Roomgate-Epoch), X-Roomgate-Message-Id and X-Roomgate-Sender.",
      }),
      maxBytes: doc(z.number().int().min(64).max(1_048_576).default(65_536), { text: 'Largest message body accepted (bytes of JSON); 413 beyond.', unit: 'bytes' }),
      timeoutMs: doc(positiveMs.default(5_000), { text: "Time for the backend to answer a delivery (connect included); then 504." }),
      requireLive: doc(z.boolean().default(false), {
        text: 'A push to one room needs live sockets of the room (through any gateway, from presence), not only a placement: 404 room_not_live otherwise.',
      }),
      maxFanoutRooms: doc(z.number().int().min(1).max(1_000_000).default(10_000), {
        text: 'A fan-out (POST /_roomgate/api/messages) reaches at most this many live rooms; more: 413, narrow it with ?prefix=.',
      }),
      idempotencyWindowMs: doc(positiveMs.default(3_600_000), {
        text: 'A push with an Idempotency-Key is delivered once: a retry with the same key (for the same room) within this window gets the first answer again, through any gateway sharing the store.',
      }),
    },
  ),
  handoff: section(
    "Room handoff (docs/handoff.md): a room moves to another backend with its state, through hooks the app serves on the backend's own address (`POST {path}/hello`, `/export`, `/import`, `/release`, `/resume`), each call signed with `backendCalls.secrets`. Used by `roomgate move` and `roomgate drain --handoff`; apps without the hooks keep today's behaviour.",
    {
      path: doc(matching(/^\/[!-~]*$/, 'a path starting with "/" of visible ASCII characters, e.g. "/_roomgate/handoff"').default('/_roomgate/handoff'), {
        text: 'The backend path under which the hooks are served; reserved from clients like `push.path` (404 from every front, in any spelling).',
      }),
      maxStateBytes: doc(z.number().int().min(1024).max(268_435_456).default(16_777_216), {
        text: "Largest room state an export may answer; a larger one fails the handoff (rolled back: the room stays where it is, with its state).",
        unit: 'bytes',
      }),
      leaseMs: doc(positiveMs.default(30_000), {
        text: "How long the old owner keeps an exported room frozen; if neither release nor resume arrives by then it resumes the room by itself, so a gateway that dies mid-handoff leaves nothing frozen. Sent with each export.",
      }),
      timeoutMs: doc(positiveMs.default(5_000), {
        text: 'Time each hook call has to answer (connect included). An export or import that does not answer in time rolls the handoff back; a release that does not: the room\'s sockets on the old backend are cut.',
      }),
      heldBytesPerSocket: doc(z.number().int().min(1024).max(16_777_216).default(65_536), {
        text: "Version 2 (a backend whose hello says `messages`): a socket's client messages held during a handoff beyond this close it with 1012 (service restart: its client reconnects; its messages, and what it sends until it sees the close, are still delivered to the new owner, or written on to the old one by a rollback; roomgate_handoff_held_total{result=\"over-limit\"} and a warning in the log).",
        unit: 'bytes',
      }),
      heldBytesPerRoom: doc(z.number().int().min(1024).max(268_435_456).default(1_048_576), {
        text: "Version 2: a room's held client messages, all its sockets on this gateway together; the socket that passes it is closed with 1012, its messages still delivered.",
        unit: 'bytes',
      }),
      maxConcurrentPerBackend: doc(z.number().int().min(1).max(1_000).default(4), {
        text: 'Handoffs at once that involve one backend (as old or new owner), through this gateway; a move beyond it is refused (503, retry), a drain waits.',
      }),
      drainBatch: doc(z.number().int().min(1).max(1_000).default(4), {
        text: 'A drain with handoff moves the rooms of the backend this many at a time (and never more at once than `maxConcurrentPerBackend`).',
      }),
      rebalance: doc(
        z
          .strictObject({
            enabled: doc(z.boolean().default(false), {
              text: 'Move live rooms, with their state, to a backend that joins or comes back (recovers, is undrained) while the load is skewed. Off: a live room never moves by itself. Only rooms whose backend and target both serve the hooks move; only by handoff, never otherwise. Needs `backendCalls.secrets`. Applied by a reload (SIGHUP) too: turning it off stops a rebalance at once.',
            }),
            skewFactor: doc(z.number().min(1.1).max(100).default(1.5), {
              text: "How skewed the load must be for a room to move: the most loaded backend whose rooms can move holds more than this many times the live rooms of the backend that came back (per unit of weight). A room moves only if the target then holds no more than the source; rebalancing stops once no backend is over the factor.",
              allowed: 'a number from 1.1 to 100, e.g. 1.5 (below 1.1 rooms would move back and forth over one room of difference)',
            }),
            roomsPerMinute: doc(z.number().int().min(1).max(600).default(30), {
              text: 'Rate of the moves: one room at a time, one every 60000 / roomsPerMinute ms, for all the gateways that share the shared data store together (each move first takes a turn there that lasts one interval).',
            }),
          })
          .prefault({}),
        { text: 'Rebalancing (docs/handoff.md, "Rebalancing"): off by default.' },
      ),
    },
  ),
  backendCalls: section(
    "Calls roomgate makes to a backend's own endpoints (the push receiver, `push.path`, and the handoff hooks, `handoff.path`): each carries a proof no client can make (docs/push.md).",
    {
      secrets: doc(z.array(z.string().min(32, 'a secret of at least 32 characters, e.g. from `openssl rand -base64 32`')).max(4).default([]), {
        text: "Secrets that sign roomgate's calls to backends (pushes, handoff hooks). They never leave the gateways: each backend is given only its own keys, derived from them and its id (`roomgate backend-key ID`), so a backend can check calls made for it and sign none for another. Each call is signed once per secret (X-Roomgate-Signature: v2=<key id>:..., one per secret), so a backend holding either key accepts it: rotate by adding the new secret here (a reload applies it), handing each backend its new keys, then removing the old one. Needed when pushes are on (`push.tokens`) or handoffs are used; the demo generates one and hands its backends their keys. Prefer the environment variable to the file.",
        secret: 'value',
      }),
    },
  ),
  auth: section('Wrong tokens (admin writes, API writes, pushes, the token-protected status page), counted per client address.', {
    maxFailures: doc(z.number().int().min(0).max(1_000_000).default(10), {
      text: "Wrong tokens one client address may send per `windowMs`, all surfaces and both ports together; after that, each of its requests that needs a token gets 429 with Retry-After until the window ends, its token unread. Counted in roomgate_auth_throttled_total. The address is the connection's peer: behind a load balancer all clients share the balancer's.",
      zero: 'no limit',
    }),
    windowMs: doc(positiveMs.default(60_000), { text: "The window, opened by an address's first wrong token." }),
  }),
  status: section('The status page /_roomgate/ (always on the admin port).', {
    public: doc(z.enum(['off', 'token', 'open']).default('off'), {
      text: 'The status page on the public port. off: admin port only; token: with the admin token (`admin.token`, as HTTP Basic password or bearer token); open: anyone.',
    }),
  }),
  presence: section('Presence counts that gateways share.', {
    ttlMs: doc(z.number().int().min(1_000).max(15_000).default(10_000), {
      text: "A gateway's presence counts vanish this long after its last heartbeat (crash, kill -9); at least 2 x `placement.heartbeatMs`.",
      unit: 'ms',
    }),
  }),
  admission: section('Limits on WebSocket handshakes per backend; beyond them: 503 with Retry-After.', {
    maxInflightUpgrades: doc(z.number().int().min(0).max(100_000).default(500), {
      text: "Per backend: WebSocket handshakes in flight. Keep it at least `upgradesPerSecond`: djust's clients come back from a failed backend in a spike (half of them exactly 500 ms after their close), and each handshake this cap refuses costs its client one more step of djust's back-off (docs/performance.md, reconnect storm).",
      zero: 'unlimited',
    }),
    upgradesPerSecond: doc(z.number().int().min(0).max(1_000_000).default(500), { text: 'Per backend: handshakes per second, also the burst.', zero: 'unlimited' }),
    retryAfterS: doc(seconds(1, 3600).default(1), { text: 'Retry-After of the 503 beyond those limits.' }),
  }),
  demo: section('Demo backends, for trying roomgate out.', {
    backends: doc(z.number().int().min(1).max(16).default(3), { text: 'With no backends configured, `roomgate start` runs this many demo backends itself.' }),
    basePort: doc(port.default(8101), { text: 'They listen on 127.0.0.1:basePort, basePort+1, ...' }),
  }),
  room: section('Where the room key of a request is read from, and what a valid key looks like.', {
    sources: doc(
      z
        .array(z.enum(KEY_SOURCES))
        .min(1)
        .refine((a) => new Set(a).size === a.length, { message: 'each source at most once' })
        .default(['pin', 'path-prefix', 'query', 'page-path', 'cookie', 'header']),
      {
        text: 'Where the room key is read from, in order; the first valid key wins. pin: the signed per-tab room pin (`pinParam`, docs/per-tab-rooms.md); unlike the other sources a pin that is present but forged, malformed or expired is refused (400/403), never passed over.',
      },
    ),
    pattern: doc(regex.default('^[A-Za-z0-9_.:-]{1,128}$'), { text: 'A room key must match this (and be at most 1024 characters).' }),
    queryParam: doc(z.string().min(1).default('room'), { text: 'Query parameter carrying the key: ?room=42.' }),
    pathPrefix: doc(matching(/^\/([A-Za-z0-9_.-]+\/)+$/, 'a path that starts and ends with "/", e.g. "/r/"').default('/r/'), {
      text: 'Per-tab prefix: /r/42/ws/live/ is forwarded as /ws/live/.',
    }),
    pagePaths: doc(z.array(pagePattern).default(['/game/{room}/']), { text: 'Page paths that name the room (not stripped).' }),
    pinParam: doc(matching(/^[A-Za-z0-9_-]{1,64}$/, 'a query parameter name of 1-64 characters from A-Z a-z 0-9 _ -').default('roomgate_pin'), {
      text: "Query parameter carrying a signed per-tab room pin (the `pin` source): /ws/live/?roomgate_pin=<room.ts.sig>, put there by /_roomgate/room-pin.v1.js. Signed with `cookie.secrets` (first signs, all verify) whatever `cookie.format`; always removed before the request is forwarded.",
    }),
    pinMaxAgeS: doc(seconds(0, 31_536_000).default(604_800), {
      text: 'The oldest room pin accepted: a tab left open longer gets 403 on its next socket until the page is reloaded. Keep a rotated-out cookie secret this long.',
      zero: 'no expiry',
    }),
    pinInject: doc(z.boolean().default(false), {
      text: "roomgate puts the room pin into the app's pages itself: a 200 `text/html` answer with no Content-Encoding (and no `Cache-Control: no-transform`) to a GET that has a room gets `<meta name=\"roomgate-pin\">` with the room signed and the script tag of /_roomgate/room-pin.v1.js (with its SRI hash) right after its `<head>` tag; a page whose `<head>` is not among its first 16 KB, before any other element, is passed on unchanged. ETag, Last-Modified and Content-Length are dropped or adjusted (the page is no longer the backend's bytes); the page cache stores each room's page with its own pin. Needs `pin` in `sources` and a cookie secret (docs/per-tab-rooms.md#injection-by-roomgate).",
    }),
    header: doc(matching(/^[A-Za-z0-9-]+$/, 'an HTTP header name (A-Z a-z 0-9 -), e.g. "X-Room-Key"').default('X-Room-Key'), {
      text: 'Header carrying the key, for non-browser clients and upstream balancers.',
    }),
    noRoom: doc(z.enum(['least-loaded', 'reject']).default('least-loaded'), {
      text: 'A request with no valid room key: least-loaded sends it to the least-loaded backend, reject answers 400.',
    }),
  }),
  cookie: section('The room cookie: which room a browser is in, signed so that a client cannot choose a room by forging it.', {
    name: doc(matching(/^[A-Za-z0-9_-]{1,64}$/, 'a cookie name of 1-64 characters from A-Z a-z 0-9 _ -').default('roomgate_room'), { text: 'Room cookie name.' }),
    format: doc(z.enum(['roomgate', 'django-signer', 'django-cookie']).default('roomgate'), {
      text: "roomgate: its own format; django-signer: Django's signing.Signer(salt=...); django-cookie: Django's HttpResponse.set_signed_cookie(name, room, salt=...).",
    }),
    secrets: doc(z.array(z.string().min(16, 'a secret of at least 16 characters')).default([]), {
      text: 'Signing secrets: the first signs, all verify (rotate by putting the new one first). With a Django format: the app\'s SECRET_KEY. Empty: a random secret per start, with a warning. Prefer the environment variable to the file.',
      secret: 'value',
    }),
    salt: doc(z.string().default(''), {
      text: "Django salt (django-signer, django-cookie). With a Django format and `setOnPages: true`: a salt only roomgate uses, never one the app passes to Signer or set_signed_cookie.",
    }),
    maxAgeS: doc(seconds(0, 31_536_000).default(86_400), {
      text: 'Cookie lifetime and the oldest signature accepted (formats with a timestamp).',
      zero: 'a session cookie',
    }),
    signed: doc(z.boolean().default(true), { text: 'false accepts and sets a plain, unsigned room cookie: only for apps on a trusted network.' }),
    setOnPages: doc(z.boolean().default(true), { text: 'Set the signed room cookie on page responses whose key came from query, path or header.' }),
  }),
  proxy: section('Forwarding requests and WebSockets to backends.', {
    websocketPaths: doc(z.array(z.string().startsWith('/', 'a path prefix starting with "/"')).min(1).default(['/']), {
      text: 'Upgrades are proxied on paths with one of these prefixes; others get 404. "/" = any path.',
    }),
    connectTimeoutMs: doc(positiveMs.default(5_000), { text: 'Connecting to a backend; then it is marked down.' }),
    responseTimeoutMs: doc(positiveMs.default(60_000), { text: "Time from sending a request to the backend's response head (or 101); then 504." }),
    websocketIdleTimeoutMs: doc(optionalMs.default(0), { text: 'Close a proxied WebSocket with no traffic either way for this long (djust pings every 30 s).', zero: 'never' }),
    websocketClientSilenceMs: doc(optionalMs.default(90_000), {
      text: "Close a proxied WebSocket (both sides) whose client has sent nothing for this long: a client whose network vanished without a close never says so, and a backend that keeps sending to it keeps TCP from noticing for many minutes. Healthy clients send far more often: djust's client pings every 30 s, and browsers answer the pings of servers that send them (Daphne and uvicorn every 20 s). Set 0 for an app whose clients only listen and whose server never pings.",
      zero: 'never',
    }),
    clientWriteTimeoutMs: doc(optionalMs.default(60_000), {
      text: "A write to a client (a page answer or a WebSocket frame) that has not gone out for this long closes the connection, and the backend connection behind it: a client that stops reading holds nothing of the gateway's beyond this (nginx's send_timeout is 60 s too). Progress resets it: a slow reader is not cut, one that reads nothing is.",
      zero: 'never',
    }),
    maxIdleSocketsPerBackend: doc(z.number().int().min(0).max(10_000).default(64), { text: 'Idle keep-alive connections kept per backend.' }),
    backendIdleTimeoutMs: doc(positiveMs.default(1_500), {
      text: "How long an idle keep-alive connection to a backend is kept before roomgate closes it. Keep it below the backends' own keep-alive timeout (Node 5 s, uvicorn 5 s, gunicorn 2 s): a backend that closes an idle connection just as a request with a body is sent on it makes that request fail with 502 (only requests without a body are retried).",
    }),
    // --- proxy.rewriteLocation (Hardening 3, item 8) ---
    rewriteLocation: doc(z.boolean().default(false), {
      text: "nginx's `proxy_redirect default`: an absolute URL in a backend answer's Location or Refresh whose scheme, host and port are that backend's own (its `url` in `backends`, e.g. `http://127.0.0.1:8102/internal`) is pointed at the request's public scheme and Host (`https://example.com/internal`), the path kept; relative URLs, other hosts and URLs with userinfo pass unchanged. On every front (byte-level HTTP/1.1, node:http, TLS, HTTP/2, --workers), on answers the page cache stores (rewritten once when fetched: a hit and a miss agree) and on a backend's non-101 answer to a WebSocket handshake (HTTP/1.1 and h2 extended CONNECT). Off: every Location reaches the client as the backend sent it.",
    }),
    // --- end proxy.rewriteLocation ---
    relay: doc(z.enum(['auto', 'native', 'javascript']).default('auto'), {
      text: "What moves an open WebSocket's bytes once the backend's 101 is relayed. native: roomgate's native relay (a Node-API addon built from native/relay.cc when roomgate is installed, with a C++ compiler) takes each plain tunnel (plain client connection, http:// backend) into one thread of its own: less CPU per frame and memory per socket than JavaScript; a seamless handoff takes a tunnel back between two messages; TLS and HTTP/2 tunnels stay on JavaScript. The same addon then opens the health checks' plain connections to backend addresses (less CPU per check; TLS and host names stay on Node's sockets). The gateway refuses to start when the addon is not built. javascript: every tunnel and check on JavaScript, and the addon is not loaded. auto: native when the addon is built, else javascript (said once at start). The relay that runs is in /status and the metrics (roomgate_relay_info).",
    }),
    leanPages: doc(z.boolean().default(true), {
      text: "HTTP/1.1 GET and HEAD requests without a body (plain or over TLS) are read and relayed by roomgate's own HTTP/1.1 code on raw sockets (about a third of the CPU per page); everything else, and every request after the first one it does not take on a connection, goes through node:http (h2 through node:http2). false: node:http for all.",
    }),
    bufferBodyBytes: doc(z.number().int().min(0).max(67_108_864).default(65_536), {
      text: "A request body up to this size is read whole before the backend request opens, and sent with its Content-Length: a client that sends its body slowly then holds a gateway buffer, never a backend (a single-process or sync-worker app is held whole by one slow upload). A backend that refuses the connection can then be tried again with it. Larger bodies stream, after the bytes read.",
      unit: 'bytes',
      zero: 'every body streams as it arrives',
    }),
    maxBodyBytes: doc(z.number().int().min(0).max(68_719_476_736).default(104_857_600), {
      text: 'A request body over this size gets 413 (a declared Content-Length at once, a chunked body when it passes it).',
      unit: 'bytes',
      zero: 'no limit',
    }),
    bodyIdleTimeoutMs: doc(optionalMs.default(30_000), {
      text: 'A streamed request body (over `bufferBodyBytes`) that sends nothing for this long ends its request: 408 when no answer has started, the backend request given up.',
      zero: 'never (listen.requestTimeoutMs still bounds the whole request)',
    }),
    extraMethods: doc(
      z
        .array(
          matching(/^[A-Z][A-Z0-9-]{0,31}$/, 'an upper-case method name, e.g. "PROPFIND"').refine((m) => m !== 'TRACE' && m !== 'CONNECT', {
            message: 'a method other than TRACE (never forwarded: it echoes cookies back) and CONNECT (roomgate is no forward proxy)',
          }),
        )
        .default([]),
      {
        text: 'Methods forwarded besides GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS (WebDAV\'s PROPFIND, MKCOL, ... for example). Others get 405 (a registered method) or 501 (one roomgate does not know); TRACE never passes.',
        example: ['PROPFIND', 'MKCOL'],
      },
    ),
    errorPages: doc(z.array(errorPage).default([]), {
      text: "HTML pages of your own for roomgate's answers to browsers (Accept: text/html) by status, read at start: `{{status}}`, `{{message}}` and `{{requestId}}` are filled in. Other clients get one line of plain text with the request id. Without one, a built-in page.",
      example: [{ status: 503, file: '/etc/roomgate/503.html' }],
    }),
    trustedProxies: doc(z.array(z.string().refine(isIpOrCidr, { message: 'an IP address or CIDR such as "10.0.0.0/8" or "::1"' })).default([]), {
      text: "Peers whose X-Forwarded-* headers are believed. Others' are replaced.",
      example: ['10.0.0.0/8'],
    }),
    passiveDownMs: doc(positiveMs.default(10_000), { text: 'A backend that refuses a connection gets no new traffic for this long.' }),
    retryAfterS: doc(seconds(1, 3600).default(2), { text: 'Retry-After of a 503 when no backend can take a request.' }),
  }),
  cache: section(
    "A page cache in front of the backends (per process): anonymous GET/HEAD answers of the paths listed, stored by RFC 9111's rules for a shared cache, per room; one backend fetch per key at a time; stale copies served while one refresh runs and when the backend fails. Off until `paths` lists something.",
    {
      paths: doc(z.array(cachePath).default([]), {
        text: 'Path prefixes whose answers may be cached ("/" = every path); one starting with "~" is a regular expression on the path. Empty: the cache is off.',
        example: ['/', '~^/blog/[0-9]+$'],
      }),
      bypassPaths: doc(z.array(cachePath).default(['/admin/']), { text: 'Never cached, even under `paths` (prefixes, or "~" regular expressions).' }),
      honorClientNoCache: doc(z.boolean().default(false), {
        text: "A client's `Cache-Control: no-cache` or `max-age=0` (or `Pragma: no-cache`) fetches a new copy, which is stored for everyone. Off, as in Varnish: a client's request directives are ignored and the stored copy is served, so no client can replace the copy others get (with anything the app reflects of its request into the page) or reach the backend at will. Turn it on only when every client is trusted.",
      }),
      bypassCookies: doc(z.array(cookieName).default(['sessionid']), {
        text: 'A request carrying one of these cookies is not answered from the cache nor stored (a logged-in user). "name*" matches a prefix. A request with Authorization always bypasses.',
      }),
      cookies: doc(z.array(cookieName).default([]), {
        text: 'Cookies forwarded to the backend on cacheable requests ("name*" matches a prefix): with cookiesMode allow only these (none by default: all are stripped), with deny all but these. The cookies forwarded are part of the cache key. The room cookie is never forwarded on them nor part of the key (the room itself is).',
        example: ['django_language'],
      }),
      cookiesMode: doc(z.enum(['allow', 'deny']).default('allow'), { text: 'allow: `cookies` lists the cookies kept; deny: `cookies` lists the cookies stripped (analytics, consent).' }),
      maxBytes: doc(z.number().int().min(1).max(68_719_476_736).default(67_108_864), { text: 'Bytes of stored answers (heads and bodies); the least recently used go first.', unit: 'bytes' }),
      maxObjectBytes: doc(z.number().int().min(1).max(1_073_741_824).default(1_048_576), { text: 'A larger answer is relayed but not stored.', unit: 'bytes' }),
      defaultTtlMs: doc(optionalMs.default(0), {
        text: 'Freshness of a storable answer that states none (no max-age, s-maxage or Expires). 0: such answers are not stored.',
        zero: 'not stored',
      }),
      graceMs: doc(optionalMs.default(0), {
        text: "How long past its freshness a stored answer is still served: at once while one background refresh runs (stale-while-revalidate), and instead of an error when the backend is down, times out or answers 5xx (stale-if-error). An answer's own stale-while-revalidate / stale-if-error extend it; must-revalidate, proxy-revalidate and no-cache answers are never served stale.",
        zero: 'only what the answer itself allows',
      }),
      maxWaiters: doc(z.number().int().min(0).max(1_000_000).default(1_000), {
        text: 'Requests that wait for one fetch in flight; more go to the backend themselves.',
      }),
      uncacheableMs: doc(optionalMs.default(10_000), {
        text: 'After an answer that could not be stored (Set-Cookie, private, too big...), requests for that key go straight to the backend for this long instead of waiting on each other.',
      }),
    },
  ),
  static: section(
    "Files roomgate serves itself, never proxied (e.g. Django's collectstatic output, STATIC_ROOT): GET/HEAD, ETag/Last-Modified, ranges, precompressed file.br/file.gz.",
    {
      mounts: doc(z.array(staticMount).default([]), {
        text: 'Directories to serve, each a URL prefix and a directory. A path under a prefix never reaches a backend (404 when the file is missing).',
        example: [{ prefix: '/static/', dir: '/app/staticfiles' }],
      }),
      maxAgeS: doc(seconds(0, 31_536_000).default(60), { text: 'Cache-Control max-age of files whose name has no content hash.', zero: 'no-cache' }),
      hashedNames: doc(regex.nullable().default('[.-][0-9a-f]{8,64}\\.[A-Za-z0-9]+$'), {
        text: 'Paths (under the mount) matching this are content-hashed: cached a year, immutable. The default matches "app.3f2a9c1b.js" and Django\'s "css/base.5af66c1b1797.css".',
        null: 'no name is content-hashed',
      }),
    },
  ),
  shutdown: section('What SIGTERM does.', {
    readinessDelayMs: doc(optionalMs.default(0), { text: 'After SIGTERM, /readyz answers 503 this long before the listener closes.', zero: 'close at once' }),
    graceMs: doc(optionalMs.default(10_000), { text: 'Then live sockets get this long to finish before they are closed.', zero: 'close them at once' }),
  }),
  log: section('Logging (JSON lines on stdout).', {
    level: doc(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'), { text: 'The least severe level logged.' }),
  }),
});

export type Config = z.infer<typeof configSchema>;
export type BackendConfig = Config['backends'][number];
