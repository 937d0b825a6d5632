// The Redis connection machinery shared by the Redis stores (placement, lobby): a commands
// connection and a subscriber connection to one Redis, one pub/sub channel, availability tracking
// and Lua scripts. The stores own their key layout, scripts, events and error wording (`label`
// prefixes every message and log line, e.g. "redis placement store").
//
// Fail fast: no offline queue, nothing in flight is retried after a reconnect (a timed-out write
// may or may not have run; callers read again), every command is bounded by commandTimeoutMs, a
// connection silent for 4 x commandTimeoutMs under waiting commands is replaced (a black hole),
// reconnect attempts never stop (until close()).
//
// Availability: `available` is true while the commands connection is ready AND the channel is
// subscribed, so that after an {type:'available', available:true} event a reader sees every later
// change as an event. The subscriber subscribes again itself on every 'ready' (ioredis's
// autoResubscribe is off, so we know when events flow); a generation counter makes a late SUBSCRIBE
// reply of an old connection count for nothing.
//
// A subscriber waits for messages with no command pending, so the silent-connection rule above
// never fires for it: a black-holed or stalled subscriber would stay 'ready' while every event is
// lost, and the link would look available. So the subscriber is sent a PING every
// SUBSCRIBER_CHECK_TIMEOUTS command timeouts (allowed in subscriber mode); one that is not answered
// within commandTimeoutMs marks the link unavailable (degraded: the stores route from cache and
// reconcile when it is back) and the subscriber is replaced; it subscribes again on 'ready'. Not on a
// Redis Cluster, whose PING goes to any node rather than the subscriber's.
//
// Scripts: EVALSHA, EVAL when Redis answers NOSCRIPT (first use, a restart, SCRIPT FLUSH), so each
// call is one round trip. Scripts given as `preload` are loaded on every (re)connect of the
// commands connection, so that the first call of each is one round trip too.
import { createHash } from 'node:crypto';
import type { ConnectionOptions } from 'node:tls';
import { createRequire } from 'node:module';
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { tlsFailure } from '../backends/backend-tls.js';
import { errorMessage } from '../http/errors.js';


/**
 * ioredis, loaded with the first Redis link: a gateway on the memory store never loads it (about a
 * tenth of a second of CPU at every start). It is CommonJS, so a require keeps link creation synchronous.
 */
function ioredis(): typeof import('ioredis') {
  return createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
}

/** The one hash tag of every key of the Redis stores (all keys in one Redis Cluster slot). */
export const HASH_TAG = '{rg}';

const DEFAULT_CONNECT_TIMEOUT_MS = 5000;
/** A connection error message is logged at most this often while Redis stays unreachable. */
const ERROR_LOG_EVERY_MS = 10_000;

// What to check after a TLS failure: a handshake OpenSSL gave up on (an alert from the server, e.g.
// it requires a client certificate; a port that does not speak TLS), or else a server certificate
// the client does not trust (a verification code, or a name it does not list).
const HANDSHAKE_CODE = /^tls: (ERR_SSL_|EPROTO)/;
const TLS_VERIFY_HINT = "the Redis server's certificate is not trusted: set redis.tlsCa to the CA that signs it, and connect by a name or address it lists";
const TLS_HANDSHAKE_HINT = 'the TLS handshake failed: a server with tls-auth-clients yes needs a client certificate (redis.tlsCert, redis.tlsKey), and the port must speak TLS';

/** A connection silent for this many command timeouts while commands wait is replaced. */
const SILENT_TIMEOUTS = 4;
/** The subscriber connection is asked for a PING this many command timeouts apart (at least 1 s). */
const SUBSCRIBER_CHECK_TIMEOUTS = 2;

export interface ConnectOptions {
  /** How long connect() waits for the first connection (default 5000 ms). */
  readonly timeoutMs?: number;
}

export type LogFn = (level: 'info' | 'warn', msg: string, fields?: Record<string, unknown>) => void;

export type AvailableEvent = { readonly type: 'available'; readonly available: boolean };

/** A Lua script run by EVALSHA, falling back to EVAL when Redis does not have it cached. */
export class LuaScript {
  readonly sha: string;
  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable url)';
  }
}

/**
 * Checks the options every Redis store has (in this order: keyPrefix, gatewayId, commandTimeoutMs)
 * and returns the key base `${keyPrefix}{rg}:`.
 */
export function storeKeyBase(label: string, opts: { readonly keyPrefix: string; readonly gatewayId: string; readonly commandTimeoutMs: number }): string {
  if (/[{}]/.test(opts.keyPrefix)) {
    throw new Error(`${label}: keyPrefix must not contain '{' or '}' (it would change the Redis Cluster hash tag): ${JSON.stringify(opts.keyPrefix)}`);
  }
  if (opts.gatewayId === '') throw new Error(`${label}: gatewayId must not be empty`);
  if (!(opts.commandTimeoutMs > 0)) throw new Error(`${label}: commandTimeoutMs must be > 0, got ${opts.commandTimeoutMs}`);
  return `${opts.keyPrefix}${HASH_TAG}:`;
}

/**
 * Where Redis is, in one of three forms:
 * - standalone: `url` (redis://[:password@]host:port/db, rediss:// for TLS);
 * - Sentinel: `sentinels` ("host:port" of each sentinel) and `sentinelName` (the master group,
 *   default "mymaster"); `url`, if given, only carries password, TLS (rediss://) and db;
 * - Cluster: `clusterNodes` ("host:port" of some nodes); `url`, if given, only carries password
 *   and TLS.
 */
export interface RedisTarget {
  readonly url?: string | null | undefined;
  readonly sentinels?: readonly string[] | undefined;
  readonly sentinelName?: string | undefined;
  readonly clusterNodes?: readonly string[] | undefined;
  /**
   * TLS options of the data connections when `url` is rediss:// (any form): the CA list and a
   * client certificate (src/redis/redis-tls.ts). Without: Node's default trust store.
   */
  readonly tls?: ConnectionOptions | undefined;
}

/** A Redis connection of either kind (standalone/Sentinel or Cluster). */
export type RedisConn = Redis | Cluster;

/** "host:port" as {host, port}; throws on anything else. */
export function parseHostPort(s: string): { host: string; port: number } {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(s.trim());
  const port = m ? Number(m[2]) : 0;
  if (!m || !m[1] || port < 1 || port > 65535) throw new Error(`not a host:port: ${JSON.stringify(s)}`);
  return { host: m[1], port };
}

/** The target for messages (no password). */
export function describeTarget(t: RedisTarget): string {
  if (t.clusterNodes && t.clusterNodes.length > 0) return `cluster ${t.clusterNodes.join(',')}`;
  if (t.sentinels && t.sentinels.length > 0) return `sentinel ${t.sentinelName ?? 'mymaster'}@${t.sentinels.join(',')}`;
  return t.url ? redactUrl(t.url) : '(no redis url)';
}

/** Password, username, TLS and db of a URL (for the Sentinel and Cluster forms). */
function urlCredentials(url: string | null | undefined): { username?: string; password?: string; tls?: boolean; db?: number } {
  if (!url) return {};
  const u = new URL(url);
  const out: { username?: string; password?: string; tls?: boolean; db?: number } = {};
  if (u.username) out.username = decodeURIComponent(u.username);
  if (u.password) out.password = decodeURIComponent(u.password);
  if (u.protocol === 'rediss:') out.tls = true;
  const db = u.pathname.replace(/^\//, '');
  if (db) out.db = Number(db);
  return out;
}

export interface RedisLinkOptions<E extends { readonly type: string }> extends RedisTarget {
  /** Prefix of every error message and log line, e.g. "redis placement store". */
  readonly label: string;
  /** CLIENT SETNAME of the commands connection (the subscriber's gets "-sub"); non-printable characters become '_'. */
  readonly connectionName: string;
  /** The pub/sub channel whose messages are the events. */
  readonly channel: string;
  /** e.g. 500: no call waits longer on a dead Redis. */
  readonly commandTimeoutMs: number;
  /** A message of the channel as an event, or undefined if it is not one (logged and dropped). */
  readonly parseEvent: (message: string) => E | undefined;
  /** Called with every channel event before the listeners get it. */
  readonly onEvent?: (ev: E) => void;
  /** Called on every availability change, before it is logged and announced. */
  readonly onAvailability?: (available: boolean) => void;
  /** Loaded (SCRIPT LOAD, best effort) on every 'ready' of the commands connection. */
  readonly preload?: readonly LuaScript[];
  readonly onLog?: LogFn | undefined;
}

/** A script a store runs on close(), before quitting (best effort). */
export interface Farewell {
  readonly script: LuaScript;
  readonly keys: readonly string[];
  readonly args: readonly string[];
  /** Logged (after the label) when it fails, e.g. "could not deregister gateway on close". */
  readonly failure: string;
}

/** The two connections of a Redis store, its channel subscription, availability and event listeners. */
export class RedisLink<E extends { readonly type: string }> {
  private readonly label: string;
  private readonly main: RedisConn;
  private readonly sub: RedisConn;
  private readonly target: string;
  private readonly listeners = new Set<(ev: E | AvailableEvent) => void>();
  /** Waiters of connect(): called on every availability change. */
  private readonly availabilityWaiters = new Set<() => void>();
  private subscribed = false;
  /** Counts the subscriber connection's 'ready' events, so that a late SUBSCRIBE reply of an old connection is ignored. */
  private subGeneration = 0;
  private lastAvailable = false;
  private lastError: string | undefined;
  /** Connection errors logged (label and message -> when), cleared when available again. */
  private readonly errorsLogged = new Map<string, number>();
  /** The last connection error when it was a TLS failure (cleared by any other outcome). */
  private tlsError: string | undefined;
  private started = false;
  /** 'closing' from the first close() call: methods reject, connect() waiters give up. */
  private phase: 'open' | 'closing' | 'closed' = 'open';
  /** The subscriber's PING timer (see the file comment); started by connect(). */
  private subscriberCheck: NodeJS.Timeout | null = null;
  private subscriberPinging = false;
  private closing: Promise<void> | undefined;

  constructor(private readonly opts: RedisLinkOptions<E>) {
    this.label = opts.label;
    const common: RedisOptions = {
      lazyConnect: true,
      // Fail fast: no queue while disconnected, nothing in flight is retried after a reconnect
      // (a timed-out write may or may not have run; the caller reads again), every command is
      // bounded, reconnect attempts never stop.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeout: opts.commandTimeoutMs,
      // A connection that answers nothing is replaced. A black hole (a partition, a dropped NAT or
      // conntrack entry, a Redis host gone without a RST) leaves the socket open and 'ready' while
      // every command times out, and TCP may take many minutes to give up on it: the link would
      // look available (so each heartbeat would start a recovery doomed to time out) and would
      // never try the fresh connection that may well work. So a connection on which commands wait
      // and nothing at all has come back for four command timeouts is destroyed and reconnected:
      // the link reports unavailable until a new connection answers. Four, so that a Redis that
      // is only slow for a moment (a fork, a long script) keeps its connection: its commands time
      // out, and their late replies are dropped when it answers again.
      socketTimeout: SILENT_TIMEOUTS * opts.commandTimeoutMs,
      connectTimeout: Math.max(1000, 2 * opts.commandTimeoutMs),
      retryStrategy: (attempt: number) => Math.min(200 * attempt, 2000),
      // We subscribe again ourselves on every 'ready' (see onSubReady) to know when events flow.
      autoResubscribe: false,
    };
    const name = opts.connectionName.replace(/[^\x21-\x7e]/g, '_');
    this.target = describeTarget(opts);
    const make = (connectionName: string): RedisConn => {
      if (opts.clusterNodes && opts.clusterNodes.length > 0) {
        const cred = urlCredentials(opts.url);
        const redisOptions: RedisOptions = { ...common, connectionName };
        if (cred.username) redisOptions.username = cred.username;
        if (cred.password) redisOptions.password = cred.password;
        if (cred.tls) redisOptions.tls = { ...opts.tls };
        const clusterOptions: ClusterOptions = {
          lazyConnect: true,
          // Fail fast, as above: no queue, bounded redirections, reconnect attempts never stop.
          enableOfflineQueue: false,
          enableReadyCheck: true,
          maxRedirections: 4,
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          retryDelayOnTryAgain: 100,
          slotsRefreshTimeout: Math.max(1000, 2 * opts.commandTimeoutMs),
          clusterRetryStrategy: (attempt: number) => Math.min(200 * attempt, 2000),
          redisOptions,
        };
        return new (ioredis().Cluster)(opts.clusterNodes.map(parseHostPort), clusterOptions);
      }
      if (opts.sentinels && opts.sentinels.length > 0) {
        const cred = urlCredentials(opts.url);
        const o: RedisOptions = {
          ...common,
          connectionName,
          sentinels: opts.sentinels.map(parseHostPort),
          name: opts.sentinelName ?? 'mymaster',
          sentinelRetryStrategy: (attempt: number) => Math.min(200 * attempt, 2000),
        };
        if (cred.username) o.username = cred.username;
        if (cred.password) o.password = cred.password;
        if (cred.db !== undefined) o.db = cred.db;
        if (cred.tls) {
          o.tls = { ...opts.tls };
          o.enableTLSForSentinelMode = true;
        }
        return new (ioredis().Redis)(o);
      }
      if (!opts.url) throw new Error(`${opts.label}: no Redis url, sentinels or clusterNodes given`);
      const tls = opts.tls && opts.url.startsWith('rediss://') ? { tls: { ...opts.tls } } : {};
      return new (ioredis().Redis)(opts.url, { ...common, connectionName, ...tls });
    };
    this.main = make(name);
    this.sub = make(`${name}-sub`);

    for (const [conn, label] of [[this.main, 'commands'], [this.sub, 'subscriber']] as const) {
      conn.on('error', (err: unknown) => this.onConnError(label, err));
      // A Cluster reports the errors of its node connections apart.
      if (conn instanceof ioredis().Cluster) conn.on('node error', (err: unknown) => this.onConnError(label, err));
      conn.on('close', () => this.onConnDown(conn, label));
      conn.on('end', () => this.onConnDown(conn, label));
    }
    this.main.on('ready', () => this.onMainReady());
    this.sub.on('ready', () => this.onSubReady());
    this.sub.on('message', (channel: string, message: string) => this.onMessage(channel, message));
  }

  /** Commands connection ready and the channel subscribed. */
  get available(): boolean {
    return this.lastAvailable;
  }

  /**
   * Starts connecting. Resolves once available (commands connection ready and the channel
   * subscribed); rejects after timeoutMs with the last connection error. The link keeps
   * reconnecting by itself either way, until close().
   */
  async connect(opts: ConnectOptions = {}): Promise<void> {
    if (this.phase !== 'open') throw new Error(`${this.label}: closed`);
    if (!this.started) {
      this.started = true;
      this.main.connect().catch(() => undefined);
      this.sub.connect().catch(() => undefined);
      if (!(this.sub instanceof ioredis().Cluster)) {
        this.subscriberCheck = setInterval(() => this.checkSubscriber(), Math.max(1000, SUBSCRIBER_CHECK_TIMEOUTS * this.opts.commandTimeoutMs));
        this.subscriberCheck.unref();
      }
    }
    if (this.lastAvailable) return;
    const timeoutMs = opts.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    await new Promise<void>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        this.availabilityWaiters.delete(check);
      };
      const check = (): void => {
        if (this.lastAvailable) {
          done();
          resolve();
        } else if (this.phase !== 'open') {
          done();
          reject(new Error(`${this.label}: closed while connecting`));
        } else if (this.tlsError !== undefined) {
          done();
          reject(new Error(`${this.label}: Redis at ${this.target}: ${this.tlsError}; still retrying in the background`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(
            `${this.label}: Redis at ${this.target} not reachable within ${timeoutMs} ms ` +
              `(last error: ${this.lastError ?? 'none'}); still retrying in the background`,
          ),
        );
      }, timeoutMs);
      this.availabilityWaiters.add(check);
    });
  }

  /** Throws at once unless open and the commands connection is ready (no offline queue). */
  ensureReady(): void {
    this.check(false);
  }

  /** The commands connection, for plain commands; throws at once like ensureReady(). */
  commands(): RedisConn {
    this.check(false);
    return this.main;
  }

  /** Runs a script (EVALSHA, EVAL on NOSCRIPT); throws at once like ensureReady(). */
  run(script: LuaScript, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.exec(script, keys, args, false);
  }

  subscribe(listener: (ev: E | AvailableEvent) => void): () => void {
    if (this.phase !== 'open') return () => undefined;
    // A wrapper, so that subscribing one function twice gives two independent subscriptions.
    const l = (ev: E | AvailableEvent): void => listener(ev);
    this.listeners.add(l);
    return () => {
      this.listeners.delete(l);
    };
  }

  /**
   * Runs `farewell` (best effort, if the commands connection is ready), then quits both
   * connections; bounded in time. Every call after the first returns the first call's promise.
   */
  close(farewell?: Farewell): Promise<void> {
    this.closing ??= this.doClose(farewell);
    return this.closing;
  }

  /** The store's onLog, guarded: a logger must not break the store. */
  log(level: 'info' | 'warn', msg: string, fields?: Record<string, unknown>): void {
    try {
      this.opts.onLog?.(level, msg, fields);
    } catch {
      // A logger must not break the store.
    }
  }

  private async doClose(farewell: Farewell | undefined): Promise<void> {
    this.phase = 'closing';
    if (this.subscriberCheck) clearInterval(this.subscriberCheck);
    this.lastAvailable = false;
    this.listeners.clear();
    for (const w of [...this.availabilityWaiters]) w();
    if (farewell && this.main.status === 'ready') {
      try {
        await this.exec(farewell.script, farewell.keys, farewell.args, true);
      } catch (err) {
        this.log('warn', `${this.label}: ${farewell.failure}`, { error: errorMessage(err) });
      }
    }
    this.phase = 'closed';
    await Promise.all([this.quit(this.main), this.quit(this.sub)]);
  }

  private async quit(conn: RedisConn): Promise<void> {
    if (conn.status === 'ready') {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        conn.quit().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, this.opts.commandTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
    }
    // Also clears a pending reconnect timer and closes a connection that is still being set up.
    if (conn.status !== 'end') conn.disconnect();
    // Wait (bounded) until the socket is closed, so that close() leaves nothing behind.
    if (conn.status === 'connecting' || conn.status === 'connect' || conn.status === 'ready' || conn.status === 'close') {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        conn.once('end', resolve);
        timer = setTimeout(resolve, this.opts.commandTimeoutMs);
      });
      clearTimeout(timer);
      conn.removeAllListeners('end');
    }
  }

  /** `closing`: also allowed while closing (the farewell script). */
  private check(closing: boolean): void {
    if (this.phase !== 'open' && !(closing && this.phase === 'closing')) throw new Error(`${this.label}: closed`);
    if (!this.mainWritable()) {
      throw new Error(`${this.label}: Redis unavailable (connection ${this.main.status}${this.lastError ? `, last error: ${this.lastError}` : ''})`);
    }
  }

  /**
   * Ready and its socket still writable. Right after Redis dies the status can still say 'ready'
   * while the socket is already closed for writing; ioredis would then reject with its own
   * "Stream isn't writeable" message, so the check looks at the socket too and every caller gets
   * the one "Redis unavailable" answer.
   */
  private mainWritable(): boolean {
    if (this.main.status !== 'ready') return false;
    if (this.main instanceof ioredis().Cluster) return true;
    const stream = this.main.stream as { writable?: boolean; writableEnded?: boolean } | undefined;
    return stream !== undefined && stream.writable !== false && stream.writableEnded !== true;
  }

  private async exec(script: LuaScript, keys: readonly string[], args: readonly string[], closing: boolean): Promise<unknown> {
    this.check(closing);
    try {
      return await this.main.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!errorMessage(err).includes('NOSCRIPT')) throw err;
      this.check(closing); // the connection may have gone while EVALSHA was out
      // Not cached (first use, Redis restarted, or SCRIPT FLUSH before our preload): EVAL loads it.
      return await this.main.eval(script.lua, keys.length, ...keys, ...args);
    }
  }

  private onMainReady(): void {
    const preload = this.opts.preload ?? [];
    if (preload.length > 0 && this.main instanceof ioredis().Cluster) {
      // Best effort, on every master (SCRIPT LOAD has no key to route by).
      for (const node of this.main.nodes('master')) {
        const p = node.pipeline();
        for (const s of preload) p.script('LOAD', s.lua);
        p.exec().catch(() => undefined);
      }
    } else if (preload.length > 0) {
      // Best effort: run() still falls back to EVAL.
      const p = this.main.pipeline();
      for (const s of preload) p.script('LOAD', s.lua);
      p.exec().catch(() => undefined);
    }
    this.updateAvailability();
  }

  private onConnError(label: string, err: unknown): void {
    const tls = err instanceof Error ? tlsFailure(err as NodeJS.ErrnoException) : null;
    // A TLS failure does not heal by retrying: connect() says so at once, with the likely fix.
    this.tlsError = tls === null ? undefined : `${tls}; ${HANDSHAKE_CODE.test(tls) ? TLS_HANDSHAKE_HINT : TLS_VERIFY_HINT}`;
    const msg = this.tlsError ?? errorMessage(err);
    // Logged once per outage (and message) rather than on every reconnect attempt. A Cluster stays
    // available while one node is down, and its errors alternate (refused, closed, redirections),
    // so a message is also not repeated within ERROR_LOG_EVERY_MS.
    const now = Date.now();
    const last = this.errorsLogged.get(`${label} ${msg}`);
    if (last === undefined || now - last >= ERROR_LOG_EVERY_MS) {
      this.errorsLogged.set(`${label} ${msg}`, now);
      this.log('warn', `${this.label}: ${label} connection error`, { error: msg });
    }
    this.lastError = msg;
    if (this.tlsError !== undefined) for (const w of [...this.availabilityWaiters]) w();
  }

  private onConnDown(conn: RedisConn, label: string): void {
    if (conn === this.sub) this.subscribed = false;
    if (this.lastAvailable && this.phase === 'open') this.log('warn', `${this.label}: ${label} connection lost`, { status: conn.status });
    this.updateAvailability();
  }

  private onSubReady(): void {
    const generation = ++this.subGeneration;
    this.sub.subscribe(this.opts.channel).then(
      () => {
        if (generation !== this.subGeneration || this.sub.status !== 'ready') return;
        this.subscribed = true;
        this.updateAvailability();
      },
      (err: unknown) => {
        if (generation !== this.subGeneration || this.phase !== 'open' || this.sub.status !== 'ready') return;
        // Connected but not subscribed (e.g. SUBSCRIBE timed out): start over with a new connection.
        this.log('warn', `${this.label}: subscribe failed, reconnecting`, { error: errorMessage(err) });
        this.sub.disconnect(true);
      },
    );
  }

  /** One PING of a subscribed subscriber; unanswered within commandTimeoutMs: replaced. */
  private checkSubscriber(): void {
    if (this.phase !== 'open' || this.sub.status !== 'ready' || !this.subscribed || this.subscriberPinging) return;
    this.subscriberPinging = true;
    const generation = this.subGeneration;
    this.sub.ping().then(
      () => {
        this.subscriberPinging = false;
      },
      (err: unknown) => {
        this.subscriberPinging = false;
        if (generation !== this.subGeneration || this.phase !== 'open' || this.sub.status !== 'ready') return;
        this.log('warn', `${this.label}: subscriber connection stalled (no answer to PING), reconnecting`, { error: errorMessage(err) });
        this.subscribed = false;
        this.updateAvailability();
        this.sub.disconnect(true);
      },
    );
  }

  private updateAvailability(): void {
    const available = this.phase === 'open' && this.main.status === 'ready' && this.sub.status === 'ready' && this.subscribed;
    if (available === this.lastAvailable) return;
    this.lastAvailable = available;
    this.opts.onAvailability?.(available);
    if (available) {
      this.lastError = undefined;
      this.tlsError = undefined;
      this.errorsLogged.clear();
      this.log('info', `${this.label}: available`, { redis: this.target });
    } else {
      this.log('warn', `${this.label}: unavailable`, { redis: this.target });
    }
    for (const w of [...this.availabilityWaiters]) w();
    this.emit({ type: 'available', available });
  }

  private onMessage(channel: string, message: string): void {
    if (channel !== this.opts.channel) return;
    const ev = this.opts.parseEvent(message);
    if (!ev) {
      this.log('warn', `${this.label}: ignoring malformed event`, { message: message.slice(0, 200) });
      return;
    }
    this.opts.onEvent?.(ev);
    this.emit(ev);
  }

  private emit(ev: E | AvailableEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(ev);
      } catch (err) {
        this.log('warn', `${this.label}: event listener threw`, { error: errorMessage(err), event: ev.type });
      }
    }
  }
}
