// The Redis shared store: presence, lobby and leaderboards shared by several gateways. Same
// semantics as MemorySharedDataStore (see the top of memory-store.ts; the pure helpers there are used
// here too), made atomic across gateways by Lua scripts.
//
// Key layout. B = `${keyPrefix}{rg}:`. Every key has the one hash tag `{rg}` (as the placement
// store's keys, with other names), so in a Redis Cluster all keys live in one slot and the scripts
// may touch keys they only learn while running (other gateways' reports, a room's metadata).
// keyPrefix must not contain `{` or `}` (it could change the hash tag).
//
//   B pres:gws        ZSET  gatewayId -> expiry (ms, Redis clock) of its presence; a gateway's
//                           report counts while its score > now. Expired members are removed (with
//                           their reports) by the next publishPresence of any gateway, up to 20 at
//                           a time, and their rooms announced in its event.
//   B pres:gw:<id>    HASH  room -> JSON {backend, sockets, since}: the gateway's last report,
//                           replaced whole by each publishPresence. PEXPIRE ttlMs + max(ttlMs,
//                           10 s): reads stop counting it at ttlMs (its pres:gws score); the rest
//                           only lets the next heartbeat of another gateway see which rooms it
//                           took along (for the event), then it is deleted or expires.
//   B meta:<room>     STRING JSON {pinned, listed, at, meta}: the room's metadata, `at` = when it was
//                           set (ms, Redis clock; the `since` of a room that is not live), `listed`
//                           whether the public reads may name the room (absent, as written before
//                           it existed: true). No TTL.
//   B meta-exp        ZSET  room -> expiry (ms) of UNPINNED metadata only. setMeta sets it to
//                           now + presenceTtlMs (never lowering it); every heartbeat raises it to
//                           the heartbeat's expiry for its live rooms (one `ZADD XX GT` for all
//                           rooms, no command per room). Expired entries whose room is not live are
//                           deleted with their meta:<room> by the next heartbeat of any gateway (up
//                           to 50 at a time); until then reads ignore them. (`meta-exp` cannot
//                           clash with a room's key: those all start with `meta:`.)
//   B lb:<board>      ZSET  member -> NEGATED score. Redis orders equal scores by member bytes
//                           ascending in ZRANGE but descending in ZREVRANGE; storing -score makes
//                           "highest first, ties by member ascending" the plain ascending order, so
//                           ZRANGE, ZRANK and ZINCRBY (with -delta) work unchanged and rank = ZRANK+1.
//                           Keep-max is `ZADD LT` on the negated score (Redis >= 6.2). 0 is stored
//                           as 0, never -0. A board exists while it has a member.
//   B lobby           pub/sub channel (not a key): JSON {type:'lobby', rooms:[...]} (and
//                     {type:'cache-purge', purge} from the admin API, {type:'handoff', signal}
//                     between gateways during a version-2 handoff: handoff-signal.ts).
//   B idem:<sha256>   string, PX the push idempotency window: "pending", then the first call's
//                     recorded answer (JSON).
//                     Pub/sub ignores the database number (redis://host/<db>): stores on
//                     different databases of one server need different prefixes too.
//
// Time: the scripts take "now" from Redis (TIME), as the placement store does: one clock for every
// gateway, the clock of PEXPIRE. Redis >= 6.2 (ZADD GT/LT); Debian's 7.0 is fine.
//
// Cost. publishPresence is ONE round trip (one EVALSHA) whatever the number of rooms. A whole report
// is written with one HSET per 500 rooms, the metadata expiries with one ZADD per 500 rooms, and the
// change event is one PUBLISH (only when something changed; the gateway diffs against its previous
// report): for R rooms, 1 EVALSHA + TIME, DEL, ceil(R/500) HSET, ceil(R/500) ZADD, PEXPIRE, ZADD,
// 2 ZRANGEBYSCORE and at most 1 PUBLISH: 8 + 2*ceil(R/500) commands (as counted by INFO
// commandstats; test/shared-data/redis-store.test.ts checks it). A gateway sends it whole only
// when Redis may not have its report (the first, after a reconnect, after a failure); every other
// heartbeat sends its changes (a delta: the changed rooms' HSET/HDEL and metadata ZADD, one ZSCORE
// for its stamp) or nothing changed, which is TIME, ZSCORE, PEXPIRE, ZADD and 2 ZRANGEBYSCORE
// whatever the number of rooms. Only when something expired does a heartbeat
// run more: HKEYS, DEL, ZREM per dead gateway (<= 20 per heartbeat) and, per expired metadata
// entry (<= 50), one HEXISTS per live gateway and DEL + ZREM (or one ZADD if the room is live).
// Reads: lobby() and online() share one aggregate snapshot (1 EVALSHA + TIME, ZRANGEBYSCORE, one
// HGETALL per live gateway and one MGET per 500 live rooms: 9 commands for one gateway and 2,500
// rooms) that the gateway caches for up to `aggregateCacheMs` (250 ms by default) to bound Redis
// work under polling: at most 4 snapshots/s per gateway, plus one after each change event (own
// writes and 'lobby' events drop the cache, so a reader never sees data older than the last event
// it got). Continuous lobby polling thus adds <= (4 + 1) * 9 = 45 commands/s per gateway. room()
// is not cached (1 EVALSHA: TIME, ZRANGEBYSCORE, GET, ZSCORE, one HGET per live gateway).
// Leaderboard calls are 1 round trip each (2 to 5 commands).
//
// Availability: a commands connection and a subscriber connection, handled by the RedisLink of
// src/redis/link.ts exactly as the placement store's: `available` is true while the commands
// connection is ready AND the lobby channel is subscribed (so after an {type:'available',
// available:true} event every later change arrives as an event); every method rejects at once
// while the commands connection is not ready (no offline queue), and a command on a connection that
// hangs is rejected after commandTimeoutMs. A rejected write may still have been applied. After a reconnect (Redis may have
// lost its data) the next publishPresence rewrites the whole report and announces all its rooms.
//
// Data loss: Redis is the only copy of metadata and leaderboards: run it with persistence and
// `maxmemory-policy noeviction`. Presence repairs itself with the next heartbeat of each gateway.
import { createHash } from 'node:crypto';
import { LuaScript, RedisLink, storeKeyBase, type ConnectOptions, type RedisTarget } from '../redis/link.js';
import {
  PresenceAggregator,
  isPresenceList,
  checkLobbyQuery,
  checkRange,
  checkRoom,
  checkScoreArgs,
  checkTtl,
  copyMeta,
  deepFreeze,
  diffReports,
  normalizeReport,
  queryLobby,
  toLobbyRoom,
  type LivePresence,
  type LobbyEntry,
} from './rules.js';
import { parseHandoffSignal } from './handoff-signal.js';
import { IDEMPOTENCY_PENDING } from './store.js';
import type {
  CachePurge,
  HandoffSignal,
  LobbyPage,
  LobbyQuery,
  LobbyRoom,
  Online,
  Ranked,
  RoomMeta,
  PresenceAnswer,
  PresenceDelta,
  RoomPresence,
  ScoreMode,
  SharedDataEvent,
  SharedDataStore,
} from './store.js';

export interface RedisSharedDataStoreOptions extends RedisTarget {
  /** e.g. "roomgate:"; every key this store writes starts with it (several apps share one Redis). */
  keyPrefix: string;
  /** Unique per gateway process. */
  gatewayId: string;
  /** The ttlMs this gateway passes to publishPresence; unpinned metadata of a room not live is kept this long after setMeta. */
  presenceTtlMs: number;
  /** e.g. 500: no call waits longer on a dead Redis. */
  commandTimeoutMs: number;
  /** lobby()/online() reuse one aggregate read for this long (default 250 ms; 0 = never). */
  aggregateCacheMs?: number;
  onLog?: (level: 'info' | 'warn', msg: string, fields?: Record<string, unknown>) => void;
}

export type { ConnectOptions } from '../redis/link.js';

const DEFAULT_AGGREGATE_CACHE_MS = 250;
const LABEL = 'redis lobby store';
const STORE = 'redis';
/** Ranges beyond this are clamped (Redis takes 64-bit indexes; Lua formats big numbers badly). */
const MAX_RANGE = 2 ** 31;

// Shared Lua prologue: "now" in ms from the Redis server clock.
const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function ms(x) return string.format('%.0f', x) end
`;

/**
 * publishPresence(): replace this gateway's report (or change the rooms a delta names), raise its
 * named live rooms' metadata expiry, remove (and announce) expired gateways, collect expired
 * metadata, announce the changes.
 * KEYS: 1 pres:gws, 2 this gateway's pres:gw hash, 3 meta-exp.
 * ARGV: 1 base, 2 gatewayId, 3 ttlMs, 4 channel, 5 mode: '1' = a whole report, also announcing the
 *       rooms of the old one (the gateway does not know what it is), '0' = a whole report, 'delta' =
 *       only the changed rooms are written (those without a pair below left the report; with none,
 *       nothing changed); 6 k, 7..6+k changed rooms, then room, JSON pairs.
 * Returns 1, or 'resync' for a delta when this gateway's report no longer counts (its pres:gws
 * score is missing or past: Redis lost it, or it expired): nothing was written.
 * A delta costs its rooms, not the report's: the live rooms it does not name keep their entries,
 * and their metadata is kept by being live (reads and the collection below check that).
 */
const PUBLISH_PRESENCE = new LuaScript(`${NOW}
local base, gw, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local k = tonumber(ARGV[6])
local delta = ARGV[5] == 'delta'
local prevExp = delta and redis.call('ZSCORE', KEYS[1], gw)
if delta and (not prevExp or tonumber(prevExp) <= now) then return 'resync' end
local changed, seen = {}, {}
local function note(r)
  if not seen[r] then
    seen[r] = true
    changed[#changed + 1] = r
  end
end
for i = 7, 6 + k do note(ARGV[i]) end
if ARGV[5] == '1' then
  for _, r in ipairs(redis.call('HKEYS', KEYS[2])) do note(r) end
end
local first = 7 + k
if delta then
  local kept = {}
  for j = first, #ARGV, 2 do kept[ARGV[j]] = true end
  for i = 7, 6 + k do
    local r = ARGV[i]
    if not kept[r] then
      -- Left the report: unpinned metadata stays until the report's last expiry while it was live.
      redis.call('HDEL', KEYS[2], r)
      redis.call('ZADD', KEYS[3], 'XX', 'GT', prevExp, r)
    end
  end
else
  redis.call('DEL', KEYS[2])
end
local exp = ms(now + ttl)
local i = first
while i <= #ARGV do
  local last = math.min(i + 999, #ARGV)
  local h, z = {}, {}
  for j = i, last, 2 do
    h[#h + 1] = ARGV[j]
    h[#h + 1] = ARGV[j + 1]
    z[#z + 1] = exp
    z[#z + 1] = ARGV[j]
  end
  redis.call('HSET', KEYS[2], unpack(h))
  -- Only rooms with unpinned metadata (XX), never lowering an expiry (GT).
  redis.call('ZADD', KEYS[3], 'XX', 'GT', unpack(z))
  i = last + 1
end
if #ARGV >= first or delta then redis.call('PEXPIRE', KEYS[2], ms(ttl + math.max(ttl, 10000))) end
redis.call('ZADD', KEYS[1], exp, gw)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now), 'LIMIT', 0, 20)) do
  -- A gateway that stopped heartbeating (crash, kill -9): its rooms just lost its sockets.
  local hk = base .. 'pres:gw:' .. id
  for _, r in ipairs(redis.call('HKEYS', hk)) do note(r) end
  redis.call('DEL', hk)
  redis.call('ZREM', KEYS[1], id)
end
local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ms(now), 'LIMIT', 0, 50)
if #stale > 0 then
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ms(now), '+inf', 'WITHSCORES')
  for _, room in ipairs(stale) do
    local keep = 0
    for j = 1, #ids, 2 do
      if redis.call('HEXISTS', base .. 'pres:gw:' .. ids[j], room) == 1 then keep = math.max(keep, tonumber(ids[j + 1])) end
    end
    if keep > 0 then
      redis.call('ZADD', KEYS[3], ms(keep), room)
    else
      redis.call('DEL', base .. 'meta:' .. room)
      redis.call('ZREM', KEYS[3], room)
    end
  end
end
if #changed > 0 then redis.call('PUBLISH', ARGV[4], cjson.encode({type = 'lobby', rooms = changed})) end
return 1
`);

/**
 * withdrawPresence(): remove this gateway's report; announce its rooms if it still counted.
 * KEYS: 1 pres:gws, 2 this gateway's hash. ARGV: 1 gatewayId, 2 channel.
 */
const WITHDRAW = new LuaScript(`${NOW}
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
local rooms = redis.call('HKEYS', KEYS[2])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
if score and tonumber(score) > now and #rooms > 0 then
  redis.call('PUBLISH', ARGV[2], cjson.encode({type = 'lobby', rooms = rooms}))
end
return 1
`);

/**
 * The aggregate read of lobby()/online(): every counting gateway's report, and the metadata of
 * their rooms. KEYS: 1 pres:gws. ARGV: 1 base.
 * Returns {{room, metaJSON, ...}, report1 {room, JSON, ...}, report2, ...}.
 */
const SNAPSHOT = new LuaScript(`${NOW}
local base = ARGV[1]
local out = {{}}
local rooms, seen = {}, {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ms(now), '+inf')) do
  local h = redis.call('HGETALL', base .. 'pres:gw:' .. id)
  out[#out + 1] = h
  for j = 1, #h, 2 do
    local r = h[j]
    if not seen[r] then
      seen[r] = true
      rooms[#rooms + 1] = r
    end
  end
end
local metas = out[1]
for i = 1, #rooms, 500 do
  local keys = {}
  for j = i, math.min(i + 499, #rooms) do keys[#keys + 1] = base .. 'meta:' .. rooms[j] end
  local vals = redis.call('MGET', unpack(keys))
  for j = 1, #keys do
    if vals[j] then
      metas[#metas + 1] = rooms[i + j - 1]
      metas[#metas + 1] = vals[j]
    end
  end
end
return out
`);

/**
 * room(): one room's reports from the counting gateways and its metadata.
 * KEYS: 1 pres:gws, 2 meta:<room>, 3 meta-exp. ARGV: 1 base, 2 room.
 * Returns {metaJSON|nil, metaExpiry|nil, now, reportJSON...}.
 */
const ROOM = new LuaScript(`${NOW}
local out = {redis.call('GET', KEYS[2]), redis.call('ZSCORE', KEYS[3], ARGV[2]), ms(now)}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ms(now), '+inf')) do
  local v = redis.call('HGET', ARGV[1] .. 'pres:gw:' .. id, ARGV[2])
  if v then out[#out + 1] = v end
end
return out
`);

/**
 * setMeta(): replace and announce. KEYS: 1 meta:<room>, 2 meta-exp.
 * ARGV: 1 room, 2 metadata JSON (an object), 3 pinned '1'|'0', 4 presenceTtlMs, 5 channel, 6 event JSON,
 * 7 listed '1'|'0'.
 */
const SET_META = new LuaScript(`${NOW}
local pinned = ARGV[3] == '1'
local listed = ARGV[7] == '1' and 'true' or 'false'
redis.call('SET', KEYS[1], '{"pinned":' .. (pinned and 'true' or 'false') .. ',"listed":' .. listed .. ',"at":' .. ms(now) .. ',"meta":' .. ARGV[2] .. '}')
if pinned then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], 'GT', ms(now + tonumber(ARGV[4])), ARGV[1])
end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
`);

/**
 * deleteMeta(): delete; 1 if there was metadata that still counted (expired unpinned metadata of a
 * room that is not live counts as already gone), announced then.
 * KEYS: 1 meta:<room>, 2 meta-exp, 3 pres:gws. ARGV: 1 base, 2 room, 3 channel, 4 event JSON.
 */
const DELETE_META = new LuaScript(`${NOW}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local existed = 1
local exp = redis.call('ZSCORE', KEYS[2], ARGV[2])
if exp and tonumber(exp) <= now then
  existed = 0
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ms(now), '+inf')) do
    if redis.call('HEXISTS', ARGV[1] .. 'pres:gw:' .. id, ARGV[2]) == 1 then
      existed = 1
      break
    end
  end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
if existed == 1 then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
return existed
`);

/**
 * score(): KEYS: 1 lb:<board>. ARGV: 1 mode, 2 NEGATED value, 3 member.
 * Returns the stored (negated) score afterwards, as Redis formats it (exact).
 */
const SCORE = new LuaScript(`
local mode, v, m = ARGV[1], ARGV[2], ARGV[3]
if mode == 'set' then
  redis.call('ZADD', KEYS[1], v, m)
  return redis.call('ZSCORE', KEYS[1], m)
end
if mode == 'incr' then
  -- Lua adds doubles exactly as ZINCRBY does: refuse a sum that would not be finite.
  local n = tonumber(redis.call('ZSCORE', KEYS[1], m) or '0') + tonumber(v)
  if n ~= n or n == math.huge or n == -math.huge then return redis.error_reply('ERR score would not be finite') end
  return redis.call('ZINCRBY', KEYS[1], v, m)
end
-- max: keep the highest score = the lowest negated one.
redis.call('ZADD', KEYS[1], 'LT', v, m)
return redis.call('ZSCORE', KEYS[1], m)
`);

/** member(): KEYS: 1 lb:<board>. ARGV: 1 member. Returns nil or {negated score, 0-based rank}. */
const MEMBER = new LuaScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then return false end
return {s, redis.call('ZRANK', KEYS[1], ARGV[1])}
`);

/**
 * around(): KEYS: 1 lb:<board>. ARGV: 1 member, 2 n.
 * Returns {} (unknown member) or {first 0-based rank, {member, negated score, ...}}.
 */
const AROUND = new LuaScript(`
local r = redis.call('ZRANK', KEYS[1], ARGV[1])
if not r then return {} end
local n = tonumber(ARGV[2])
local start = math.max(0, r - n)
local stop = math.min(r + n, redis.call('ZCARD', KEYS[1]) - 1)
return {start, redis.call('ZRANGE', KEYS[1], start, stop, 'WITHSCORES')}
`);

/** otherGateways(): the gateways whose presence counts now (this one filtered out by the caller). KEYS: 1 pres:gws. */
const LIVE_GATEWAYS = new LuaScript(`${NOW}
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ms(now), '+inf')
`);

const SCRIPTS = [PUBLISH_PRESENCE, WITHDRAW, SNAPSHOT, ROOM, LIVE_GATEWAYS, SET_META, DELETE_META, SCORE, MEMBER, AROUND];

/** A stored score (negated, as Redis formats doubles) -> the score. */
function decodeScore(raw: unknown): number {
  const s = typeof raw === 'number' ? raw : String(raw);
  const n = s === 'inf' || s === '+inf' ? Infinity : s === '-inf' ? -Infinity : Number(s);
  if (Number.isNaN(n)) throw new Error(`redis lobby store: bad score in Redis: ${String(raw)}`);
  return n === 0 ? 0 : -n;
}

function encodeScore(v: number): string {
  return String(v === 0 ? 0 : -v);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseJson(s: unknown): unknown {
  if (typeof s !== 'string') return undefined;
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/** A room's presence as stored in a report hash. */
function presenceJson(r: RoomPresence): string {
  return JSON.stringify({ backend: r.backend, sockets: r.sockets, since: r.since });
}

function parsePresence(room: string, json: unknown): RoomPresence | undefined {
  const v = parseJson(json);
  if (!isRecord(v)) return undefined;
  const { backend, sockets, since } = v;
  if (typeof backend !== 'string' || typeof sockets !== 'number' || !Number.isFinite(sockets) || typeof since !== 'number' || !Number.isFinite(since)) {
    return undefined;
  }
  return { room, backend, sockets, since };
}

interface StoredMeta {
  readonly meta: RoomMeta;
  readonly pinned: boolean;
  readonly listed: boolean;
  readonly at: number;
}

function parseStoredMeta(json: unknown): StoredMeta | undefined {
  const v = parseJson(json);
  if (!isRecord(v) || !isRecord(v.meta) || typeof v.pinned !== 'boolean' || typeof v.at !== 'number') return undefined;
  // Metadata written before `listed` existed was set for the lobby, which then listed every room: listed.
  if (v.listed !== undefined && typeof v.listed !== 'boolean') return undefined;
  return { meta: deepFreeze(v.meta), pinned: v.pinned, listed: v.listed ?? true, at: v.at };
}

/** An event from the channel, or undefined if it is not one. */
function parseEvent(message: string): SharedDataEvent | undefined {
  const v = parseJson(message);
  if (isRecord(v) && v.type === 'cache-purge' && isRecord(v.purge)) {
    const out: { url?: string; prefix?: string; room?: string } = {};
    for (const k of ['url', 'prefix', 'room'] as const) {
      const f = v.purge[k];
      if (typeof f === 'string') out[k] = f;
      else if (f !== undefined) return undefined;
    }
    return Object.keys(out).length === 0 ? undefined : { type: 'cache-purge', purge: out };
  }
  if (isRecord(v) && v.type === 'handoff') {
    const signal = parseHandoffSignal(v.signal);
    return signal === undefined ? undefined : { type: 'handoff', signal };
  }
  if (!isRecord(v) || v.type !== 'lobby' || !Array.isArray(v.rooms)) return undefined;
  // cjson encodes an empty Lua table as {} (never sent: empty changes are not published).
  if (!v.rooms.every((r): r is string => typeof r === 'string')) return undefined;
  return { type: 'lobby', rooms: v.rooms };
}

interface Snapshot {
  readonly live: Map<string, LivePresence>;
  readonly online: Online;
  readonly meta: Map<string, StoredMeta>;
}

export class RedisSharedDataStore implements SharedDataStore {
  readonly kind = 'redis' as const;

  private readonly base: string;
  private readonly channel: string;
  private readonly keys: { readonly gateways: string; readonly report: string; readonly metaExp: string };
  private readonly cacheMs: number;
  /** Both connections, the lobby channel, availability and listeners. */
  private readonly link: RedisLink<SharedDataEvent>;
  /**
   * This gateway's last report as Redis has it, and when it was written (performance.now());
   * undefined when unknown (never sent, a failed call, a reconnect): the next report is then
   * announced whole.
   */
  private lastReport: { readonly rooms: Map<string, RoomPresence>; readonly at: number; readonly ttlMs: number } | undefined;
  /** Bumped by own writes, 'lobby' events and availability changes: a cached snapshot from an older generation is not used. */
  private generation = 0;
  private snapshot: { readonly generation: number; readonly startedAt: number; readonly promise: Promise<Snapshot> } | undefined;

  constructor(private readonly opts: RedisSharedDataStoreOptions) {
    const base = storeKeyBase(LABEL, opts);
    checkTtl(STORE, opts.presenceTtlMs);
    this.cacheMs = opts.aggregateCacheMs ?? DEFAULT_AGGREGATE_CACHE_MS;
    if (!(this.cacheMs >= 0)) throw new Error(`redis lobby store: aggregateCacheMs must be >= 0, got ${this.cacheMs}`);
    this.base = base;
    this.channel = `${this.base}lobby`;
    this.keys = {
      gateways: `${this.base}pres:gws`,
      report: `${this.base}pres:gw:${opts.gatewayId}`,
      metaExp: `${this.base}meta-exp`,
    };
    this.link = new RedisLink<SharedDataEvent>({
      url: opts.url,
      sentinels: opts.sentinels,
      sentinelName: opts.sentinelName,
      clusterNodes: opts.clusterNodes,
      tls: opts.tls,
      label: LABEL,
      connectionName: `roomgate-lobby-${opts.gatewayId}`,
      channel: this.channel,
      commandTimeoutMs: opts.commandTimeoutMs,
      parseEvent,
      // Whoever reads after this event sees the change (the cached aggregate is older).
      onEvent: () => {
        this.generation++;
      },
      // Either way what we knew may be wrong now (Redis may have restarted empty, events were missed).
      onAvailability: () => {
        this.lastReport = undefined;
        this.generation++;
        this.snapshot = undefined;
      },
      // So that the first call of each script after a (re)connect is one round trip too.
      preload: SCRIPTS,
      onLog: opts.onLog,
    });
  }

  get available(): boolean {
    return this.link.available;
  }

  /**
   * Starts connecting. Resolves once available (commands connection ready and the lobby channel
   * subscribed); rejects after timeoutMs with the last connection error. The store keeps
   * reconnecting by itself either way, until close().
   */
  connect(opts: ConnectOptions = {}): Promise<void> {
    return this.link.connect(opts);
  }

  // --- presence ---------------------------------------------------------------------------------

  async publishPresence(rooms: readonly RoomPresence[] | PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer> {
    checkTtl(STORE, ttlMs);
    if (!isPresenceList(rooms)) return this.publishChanges(rooms, ttlMs);
    const next = normalizeReport(STORE, rooms);
    this.link.ensureReady();
    const startedAt = performance.now();
    const last = this.lastReport;
    // A previous report older than its TTL no longer counts: everything is news again.
    const prev = last && startedAt - last.at < last.ttlMs ? last.rooms : null;
    const changed = diffReports(prev, next);
    const args = [this.base, this.opts.gatewayId, String(ttlMs), this.channel, prev === null ? '1' : '0', String(changed.length), ...changed];
    for (const r of next.values()) args.push(r.room, presenceJson(r));
    this.lastReport = undefined;
    try {
      await this.link.run(PUBLISH_PRESENCE, [this.keys.gateways, this.keys.report, this.keys.metaExp], args);
      // Measured from before the call: Redis's TTL started no earlier than that.
      this.lastReport = { rooms: next, at: startedAt, ttlMs };
    } finally {
      this.generation++;
    }
  }

  /**
   * Unchanged (null) or changes (a delta) applied to the report Redis has: only the changed rooms
   * are written, so its cost is theirs, not the report's. Without a report that still counts
   * (never sent, expired, a reconnect: Redis may have lost it), 'resync': the caller sends the list.
   */
  private async publishChanges(delta: PresenceDelta | null, ttlMs: number): Promise<PresenceAnswer> {
    this.link.ensureReady();
    const startedAt = performance.now();
    const last = this.lastReport;
    if (last === undefined || startedAt - last.at >= last.ttlMs) return 'resync';
    const changed: string[] = [];
    const pairs: string[] = [];
    const next = delta === null ? new Map<string, RoomPresence>() : normalizeReport(STORE, delta.rooms);
    for (const room of delta?.gone ?? []) if (last.rooms.has(room) && !next.has(room)) changed.push(room);
    for (const [room, r] of next) {
      const p = last.rooms.get(room);
      if (p && p.sockets === r.sockets && p.backend === r.backend && p.since === r.since) continue;
      changed.push(room);
      pairs.push(room, presenceJson(r));
    }
    this.lastReport = undefined;
    let reply: unknown;
    try {
      reply = await this.link.run(PUBLISH_PRESENCE, [this.keys.gateways, this.keys.report, this.keys.metaExp], [this.base, this.opts.gatewayId, String(ttlMs), this.channel, 'delta', String(changed.length), ...changed, ...pairs]);
    } finally {
      if (changed.length > 0) this.generation++;
    }
    if (reply === 'resync') return 'resync';
    const rooms = last.rooms;
    for (const room of changed) {
      const r = next.get(room);
      if (r) rooms.set(room, r);
      else rooms.delete(room);
    }
    this.lastReport = { rooms, at: startedAt, ttlMs };
  }

  async withdrawPresence(): Promise<void> {
    this.link.ensureReady();
    this.lastReport = undefined;
    try {
      await this.link.run(WITHDRAW, [this.keys.gateways, this.keys.report], [this.opts.gatewayId, this.channel]);
    } finally {
      this.generation++;
    }
  }

  async online(): Promise<Online> {
    this.link.ensureReady();
    return (await this.aggregate()).online;
  }

  async lobby(q: LobbyQuery): Promise<LobbyPage> {
    checkLobbyQuery(STORE, q);
    this.link.ensureReady();
    const snap = await this.aggregate();
    const entries: LobbyEntry[] = [];
    for (const p of snap.live.values()) {
      const m = snap.meta.get(p.room);
      entries.push({ ...p, meta: m?.meta ?? null, pinned: m?.pinned ?? false, listed: m?.listed ?? false });
    }
    return queryLobby(entries, q);
  }

  async room(room: string): Promise<LobbyRoom | null> {
    checkRoom(STORE, room);
    const reply = await this.link.run(ROOM, [this.keys.gateways, this.metaKey(room), this.keys.metaExp], [this.base, room]);
    if (!Array.isArray(reply) || reply.length < 3) throw new Error(`redis lobby store: unexpected room reply ${JSON.stringify(reply)}`);
    const [metaJson, exp, now, ...reports] = reply as unknown[];
    const agg = new PresenceAggregator();
    for (const json of reports) {
      const p = parsePresence(room, json);
      if (p) agg.add(p);
      else this.link.log('warn', 'redis lobby store: ignoring malformed presence', { room, value: String(json).slice(0, 200) });
    }
    const live = agg.live().get(room);
    let m = metaJson === null || metaJson === undefined ? undefined : parseStoredMeta(metaJson);
    if (metaJson !== null && metaJson !== undefined && !m) this.link.log('warn', 'redis lobby store: ignoring malformed metadata', { room });
    // Unpinned metadata past its expiry counts only while the room is live (not yet collected).
    if (m && !m.pinned && !live && exp !== null && exp !== undefined && Number(exp) <= Number(now)) m = undefined;
    if (live) return toLobbyRoom({ ...live, meta: m?.meta ?? null, pinned: m?.pinned ?? false, listed: m?.listed ?? false });
    if (!m) return null;
    return toLobbyRoom({ room, backend: '', sockets: 0, since: m.at, meta: m.meta, pinned: m.pinned, listed: m.listed });
  }

  // --- metadata ---------------------------------------------------------------------------------

  async claimIdempotency(key: string, ttlMs: number): Promise<string | null> {
    const k = this.idempotencyKey(key);
    const redis = this.link.commands();
    // SET NX: exactly one caller gets the key; the others read what it holds.
    const set = await redis.set(k, IDEMPOTENCY_PENDING, 'PX', ttlMs, 'NX');
    if (set === 'OK') return null;
    return (await this.link.commands().get(k)) ?? IDEMPOTENCY_PENDING;
  }

  async settleIdempotency(key: string, answer: string, ttlMs: number): Promise<void> {
    await this.link.commands().set(this.idempotencyKey(key), answer, 'PX', ttlMs);
  }

  async releaseIdempotency(key: string): Promise<void> {
    await this.link.commands().del(this.idempotencyKey(key));
  }

  /** The Redis key of an idempotency key: hashed, so its length and bytes are ours. */
  private idempotencyKey(key: string): string {
    return `${this.base}idem:${createHash('sha256').update(key).digest('base64url')}`;
  }

  async publishCachePurge(purge: CachePurge): Promise<void> {
    await this.link.commands().publish(this.channel, JSON.stringify({ type: 'cache-purge', purge }));
  }

  async publishHandoff(signal: HandoffSignal): Promise<void> {
    await this.link.commands().publish(this.channel, JSON.stringify({ type: 'handoff', signal }));
  }

  async otherGateways(): Promise<string[]> {
    const reply = await this.link.run(LIVE_GATEWAYS, [this.keys.gateways], []);
    if (!Array.isArray(reply)) throw new Error(`redis lobby store: unexpected live gateways reply ${JSON.stringify(reply)}`);
    return reply.map(String).filter((id) => id !== this.opts.gatewayId);
  }

  async setMeta(room: string, meta: RoomMeta, pinned: boolean, listed = true): Promise<void> {
    checkRoom(STORE, room);
    const { json } = copyMeta(STORE, meta);
    try {
      await this.link.run(
        SET_META,
        [this.metaKey(room), this.keys.metaExp],
        [room, json, pinned === true ? '1' : '0', String(this.opts.presenceTtlMs), this.channel, JSON.stringify({ type: 'lobby', rooms: [room] }), listed === false ? '0' : '1'],
      );
    } finally {
      this.generation++;
    }
  }

  async deleteMeta(room: string): Promise<boolean> {
    checkRoom(STORE, room);
    try {
      const reply = await this.link.run(
        DELETE_META,
        [this.metaKey(room), this.keys.metaExp, this.keys.gateways],
        [this.base, room, this.channel, JSON.stringify({ type: 'lobby', rooms: [room] })],
      );
      return Number(reply) === 1;
    } finally {
      this.generation++;
    }
  }

  // --- leaderboards -----------------------------------------------------------------------------

  async score(board: string, member: string, value: number, mode: ScoreMode): Promise<number> {
    checkScoreArgs(STORE, board, member, value, mode);
    const reply = await this.link.run(SCORE, [this.boardKey(board)], [mode, encodeScore(value), member]);
    return decodeScore(reply);
  }

  async top(board: string, offset: number, limit: number): Promise<Ranked[]> {
    checkRange(STORE, 'offset', offset);
    checkRange(STORE, 'limit', limit);
    const redis = this.link.commands();
    if (limit === 0 || offset >= MAX_RANGE) return [];
    const stop = Math.min(offset + limit, MAX_RANGE) - 1;
    const flat = await redis.zrange(this.boardKey(board), String(offset), String(stop), 'WITHSCORES');
    return this.ranked(flat, offset);
  }

  async member(board: string, member: string): Promise<Ranked | null> {
    const reply = await this.link.run(MEMBER, [this.boardKey(board)], [member]);
    if (reply === null || reply === undefined) return null;
    if (!Array.isArray(reply) || reply.length !== 2) throw new Error(`redis lobby store: unexpected member reply ${JSON.stringify(reply)}`);
    return { member, score: decodeScore(reply[0]), rank: Number(reply[1]) + 1 };
  }

  async around(board: string, member: string, n: number): Promise<Ranked[]> {
    checkRange(STORE, 'n', n);
    const reply = await this.link.run(AROUND, [this.boardKey(board)], [member, String(Math.min(n, MAX_RANGE))]);
    if (!Array.isArray(reply)) throw new Error(`redis lobby store: unexpected around reply ${JSON.stringify(reply)}`);
    if (reply.length === 0) return [];
    const [start, flat] = reply as [unknown, unknown];
    if (!Array.isArray(flat)) throw new Error(`redis lobby store: unexpected around reply ${JSON.stringify(reply)}`);
    return this.ranked(flat, Number(start));
  }

  async boardExists(board: string): Promise<boolean> {
    return (await this.link.commands().exists(this.boardKey(board))) === 1;
  }

  async boardSize(board: string): Promise<number> {
    return await this.link.commands().zcard(this.boardKey(board));
  }

  // --- events and lifecycle ---------------------------------------------------------------------

  subscribe(listener: (ev: SharedDataEvent) => void): () => void {
    return this.link.subscribe(listener);
  }

  /** Withdraws this gateway's presence (best effort), then quits both connections; bounded in time. */
  close(): Promise<void> {
    this.snapshot = undefined;
    return this.link.close({
      script: WITHDRAW,
      keys: [this.keys.gateways, this.keys.report],
      args: [this.opts.gatewayId, this.channel],
      failure: 'could not withdraw presence on close',
    });
  }

  // --- internals --------------------------------------------------------------------------------

  private metaKey(room: string): string {
    return `${this.base}meta:${room}`;
  }

  private boardKey(board: string): string {
    return `${this.base}lb:${board}`;
  }

  private ranked(flat: unknown[], start: number): Ranked[] {
    const out: Ranked[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ member: String(flat[i]), score: decodeScore(flat[i + 1]), rank: start + i / 2 + 1 });
    return out;
  }

  /** The aggregate read, shared by lobby() and online(); cached, see the cost notes at the top. */
  private aggregate(): Promise<Snapshot> {
    const now = performance.now();
    const s = this.snapshot;
    if (s && this.cacheMs > 0 && s.generation === this.generation && now - s.startedAt < this.cacheMs) return s.promise;
    const promise = this.readSnapshot();
    const entry = { generation: this.generation, startedAt: now, promise };
    this.snapshot = entry;
    promise.catch(() => {
      if (this.snapshot === entry) this.snapshot = undefined;
    });
    return promise;
  }

  private async readSnapshot(): Promise<Snapshot> {
    const reply = await this.link.run(SNAPSHOT, [this.keys.gateways], [this.base]);
    if (!Array.isArray(reply) || !Array.isArray(reply[0])) throw new Error(`redis lobby store: unexpected snapshot reply`);
    const [metaFlat, ...reports] = reply as unknown[][];
    const agg = new PresenceAggregator();
    let bad = 0;
    for (const flat of reports) {
      if (!Array.isArray(flat)) continue;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const p = parsePresence(String(flat[i]), flat[i + 1]);
        if (p) agg.add(p);
        else bad++;
      }
    }
    const meta = new Map<string, StoredMeta>();
    for (let i = 0; metaFlat && i + 1 < metaFlat.length; i += 2) {
      const m = parseStoredMeta(metaFlat[i + 1]);
      if (m) meta.set(String(metaFlat[i]), m);
      else bad++;
    }
    if (bad > 0) this.link.log('warn', 'redis lobby store: ignoring malformed presence or metadata entries', { count: bad });
    return { live: agg.live(), online: agg.online(), meta };
  }
}
