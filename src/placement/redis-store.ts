// The Redis placement store: the shared placement state of several gateways. Same semantics as
// MemoryPlacementStore (compare-and-set on epochs, busy moves refused, idle expiry), made atomic
// across gateways by Lua scripts.
//
// Key layout. B = `${keyPrefix}{rg}:`. Every key has the one hash tag `{rg}`, so in a Redis Cluster
// all keys live in one slot and the scripts may touch keys they only learn while running (other
// gateways' reports, the old backend's room set). keyPrefix must not contain `{` or `}` (it could
// change the hash tag).
//
//   B p:<room>        HASH  backend, epoch, at (ms, when placed)            PEXPIRE idleTtlMs; refreshed by a same-backend
//                                                     place(). No TTL while a live gateway's report holds
//                                                     the room on its backend ("kept live"): the TTL is set
//                                                     again when the last such report drops it (expiring
//                                                     idleTtlMs later), or when its gateway is reaped
//                                                     (expiring idleTtlMs after its last heartbeat).
//                                                     Absent (expired) = no placement = epoch 0.
//   B rooms:<backend> ZSET  room -> expiry (ms)       the rooms placed on a backend; a member counts
//                                                     while its score > now (score = the placement
//                                                     key's expiry, set in the same script; +inf
//                                                     while the placement is kept live).
//                                                     Expired members are trimmed by roomsPerBackend().
//   B backends        SET   backend ids               index of the rooms:<backend> ZSETs (so that
//                                                     roomsPerBackend() needs no SCAN); a backend is
//                                                     dropped when its ZSET has no live member left.
//   B gw              ZSET  gatewayId -> last heartbeat (ms); fresh while score > now - gatewayTtlMs
//                                                     (its report makes rooms busy); stale members are
//                                                     trimmed by heartbeats once reaped (gw-live).
//   B gw-live         ZSET  gatewayId -> last heartbeat (ms): the gateway's liveness stamp, the one
//                                                     key a heartbeat refreshes for all its rooms. Its
//                                                     report keeps its rooms' placements live while
//                                                     score > now - min(idleTtlMs, gatewayTtlMs); past
//                                                     that any script "reaps" it (below) and removes it.
//                                                     Missing for a gateway that heartbeats: Redis lost
//                                                     it (or reaped it): the gateway sends a full report.
//   B gw:<gatewayId>  HASH  room -> backend           the gateway's report (rooms with sockets), changed
//                                                     room by room by its heartbeats; no TTL: deleted
//                                                     when the gateway is trimmed from gw (or leaves).
//   B bstate          HASH  backend id -> JSON BackendAdminState
//   B epoch           STRING counter: every new placement takes the next value, so epochs never
//                     repeat, even for a room whose placement expired
//   B events          pub/sub channel (not a key): JSON {type:'placement', room, placement} |
//                                                  {type:'backend-state', id, state}
//                     Pub/sub ignores the database number (redis://host/<db>): stores on
//                     different databases of one server need different prefixes too.
//
// Time: every script takes "now" from Redis (TIME), never from the calling gateway: gateways'
// clocks may differ, Redis's is one clock, and it is the clock PEXPIRE uses, so a ZSET score and
// the placement key's TTL agree. (Redis >= 5 replicates scripts by effects, so TIME is allowed
// before writes.) BackendAdminState.since/deadline are the caller's own values and stored as is.
//
// Availability: a commands connection and a subscriber connection (the RedisLink of
// src/redis/link.ts, shared with the lobby store). `available` is true while the commands
// connection is ready AND the event channel is subscribed, so that after an {type:'available',
// available:true} event a reader sees every later change as an event. Every method rejects at once
// while the commands connection is not ready (no offline queue), and a command on a connection that
// hangs is rejected after commandTimeoutMs. A rejected write may still have been applied (it
// reached Redis before the timeout): callers read again with get().
//
// Scripts: one Lua script per write (EVALSHA, EVAL when Redis answers NOSCRIPT, e.g. after a
// restart), so each call is one round trip and atomic against every other gateway. The fixed keys
// are passed as KEYS; per-room / per-backend / per-gateway keys are built in the script from
// ARGV[1] (the prefix), which the single hash tag makes valid in a Cluster too. Like the memory
// store, expiry is silent (no {placement: null} event) and a same-backend place() emits nothing.
//
// Heartbeats follow changes (docs/architecture.md "Placement heartbeats"): a gateway sends its
// whole report once (at start, after a reconnect, or when Redis answers 'resync' because its
// gw-live stamp is missing), then only the rooms that changed, or nothing. A heartbeat's cost is
// then O(1) plus O(changed rooms), whatever the number of live rooms: the stamp in gw-live keeps
// every room of the report live, and the per-room writes happen when a room joins or leaves it.
// A gateway that stops heartbeating (crash, kill -9) is reaped by the next script of any other
// gateway (heartbeat, place, roomsPerBackend) once its stamp is min(idleTtlMs, gatewayTtlMs) old:
// each placement its report kept live, and no other live report keeps live, gets the TTL it would
// have had (idleTtlMs after that gateway's last heartbeat). With no gateway left at all, nothing
// reaps: the keys stay until a gateway runs again.
//
// Data loss: Redis is the only copy. Run it with `maxmemory-policy noeviction` (all keys here have
// TTLs; a volatile-* policy would evict live placements). After Redis loses its data (restart
// without persistence, failover to a lagging replica) each gateway's next heartbeat re-creates the
// placements of its live rooms (epochs continue from the clock); idle rooms are placed anew.
// A gateway knows Redis lost them when its gw-live stamp is missing, and after every reconnect
// (a failover to a lagging replica may lack its last changes): its next report is then whole.
import { LuaScript, RedisLink, storeKeyBase, type ConnectOptions, type RedisTarget } from '../redis/link.js';
import { isFullReport } from './store.js';
import type {
  AdminState,
  BackendAdminState,
  HeartbeatAnswer,
  LiveReport,
  PlaceOptions,
  PlaceResult,
  PlacementRecord,
  PlacementStore,
  StoreEvent,
  StoreTiming,
} from './store.js';

export interface RedisStoreOptions extends RedisTarget {
  /** e.g. "roomgate:"; every key this store writes starts with it (several apps share one Redis). */
  keyPrefix: string;
  /** Unique per gateway process. */
  gatewayId: string;
  timing: StoreTiming;
  /** e.g. 500: no call waits longer on a dead Redis. */
  commandTimeoutMs: number;
  onLog?: (level: 'info' | 'warn', msg: string, fields?: Record<string, unknown>) => void;
}

export type { ConnectOptions } from '../redis/link.js';

const LABEL = 'redis placement store';

// Shared Lua prologue: "now" in ms from the Redis server clock.
const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function ms(x) return string.format('%.0f', x) end
-- Epochs reach 16 digits: tostring() and cjson print only 14 significant digits, so epochs are
-- always formatted with ms() and events are built by hand.
local function placementEvent(room, backend, epoch)
  return '{"type":"placement","room":' .. cjson.encode(room) .. ',"placement":{"backend":' .. cjson.encode(backend) .. ',"epoch":' .. ms(epoch) .. '}}'
end
-- The epoch counter, never below the clock (ms x 1000, below 2^53): if Redis lost the counter
-- (restart without persistence, FLUSHALL) or some of its last increments (a failover to a
-- replica that had not received them yet: replication is asynchronous), the next epoch is still
-- above every epoch handed out before, as long as Redis's clocks agree to better than the time
-- the failover took. At fewer than 1000 placements per ms the counter simply follows the clock.
local function nextEpoch(base)
  local k = base .. 'epoch'
  local e = redis.call('INCR', k)
  local floor = now * 1000
  if e < floor then
    redis.call('SET', k, ms(floor))
    e = floor
  end
  return e
end
`;

/**
 * placement.maxIdleRooms, run by place() after it wrote a new placement. The rooms ZSETs' scores
 * are the placements' expiries, refreshed by every same-backend place() and by the heartbeats of
 * live rooms, so the lowest score over all backends is the placement least recently kept alive.
 * While the placements (expired members trimmed first) exceed maxIdleRooms plus the rooms the live
 * gateways report, the oldest is deleted, at most 2 per call (each call adds one, so the count
 * comes back under the cap). Never a room a live gateway reports (stepped over), nor, with another
 * gateway alive, one placed less than gatewayTtlMs ago (its sockets may not be reported yet): it
 * stops there. Uses KEYS[2] (gateways ZSET), KEYS[3] (backends SET), ARGV[1], 6, 10, and idle/gwttl.
 * Returns the number evicted.
 */
const EVICT_IDLE = `
local function evictIdle()
  local max = tonumber(ARGV[10])
  if not max then return 0 end
  local base = ARGV[1]
  local backends = redis.call('SMEMBERS', KEYS[3])
  local total = 0
  for _, b in ipairs(backends) do
    local zk = base .. 'rooms:' .. b
    redis.call('ZREMRANGEBYSCORE', zk, '-inf', ms(now))
    total = total + redis.call('ZCARD', zk)
  end
  if total <= max then return 0 end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ms(now - gwttl), '+inf')
  local live, others = 0, false
  for _, id in ipairs(ids) do
    live = live + redis.call('HLEN', base .. 'gw:' .. id)
    if id ~= ARGV[6] then others = true end
  end
  local excess, evicted = total - max - live, 0
  -- The 8 oldest of each backend, oldest first over all backends: enough to step over a few
  -- rooms reported live (their heartbeats keep their scores recent, so they are rarely here).
  local cands = {}
  for _, b in ipairs(backends) do
    local m = redis.call('ZRANGE', base .. 'rooms:' .. b, 0, 7, 'WITHSCORES')
    for i = 1, #m, 2 do cands[#cands + 1] = {b, m[i], tonumber(m[i + 1]) or math.huge} end
  end
  table.sort(cands, function(x, y) return x[3] < y[3] end)
  for _, c in ipairs(cands) do
    if excess <= 0 or evicted >= 2 then break end
    local b, r = c[1], c[2]
    local pk = base .. 'p:' .. r
    local p = redis.call('HMGET', pk, 'backend', 'at')
    if others and now - (tonumber(p[2]) or 0) < gwttl then break end
    local isLive = false
    for _, id in ipairs(ids) do
      if redis.call('HEXISTS', base .. 'gw:' .. id, r) == 1 then isLive = true; break end
    end
    if not isLive then
      if p[1] == b then redis.call('DEL', pk) end
      redis.call('ZREM', base .. 'rooms:' .. b, r)
      evicted = evicted + 1
      excess = excess - 1
    end
  end
  return evicted
end
`;

/**
 * Liveness of reports (see "Heartbeats follow changes" above). Expects base, idle, gwttl and NOW.
 * - livePeers(): gateways whose report keeps rooms live now (fresh in gw-live).
 * - keepLive(room, backend): the placement (on that backend) has no TTL and counts forever.
 * - release(room, backend, at, ids, except): a report dropped the room on backend: unless another
 *   live gateway (ids, except the one dropping it) reports it there, a placement kept live there
 *   expires at `at` (at once when `at` has passed). A placement with a TTL is left alone.
 * - reap(): gateways whose stamp is older than min(idle, gwttl): their rooms released as of their
 *   last heartbeat, their stamp removed (at most 4 per call); their report stays for busy checks
 *   until trim() (gwttl) deletes it.
 */
const LIVENESS = `
local liveKey, gwKey = base .. 'gw-live', base .. 'gw'
local keepFor = math.min(idle, gwttl)
local function livePeers()
  return redis.call('ZRANGEBYSCORE', liveKey, '(' .. ms(now - keepFor), '+inf')
end
local function keepLive(room, backend)
  redis.call('PERSIST', base .. 'p:' .. room)
  redis.call('ZADD', base .. 'rooms:' .. backend, '+inf', room)
end
local function release(room, backend, at, ids, except)
  local pk = base .. 'p:' .. room
  if redis.call('HGET', pk, 'backend') ~= backend or redis.call('PTTL', pk) ~= -1 then return end
  for _, id in ipairs(ids) do
    if id ~= except and redis.call('HGET', base .. 'gw:' .. id, room) == backend then return end
  end
  if at <= now then
    redis.call('DEL', pk)
    redis.call('ZREM', base .. 'rooms:' .. backend, room)
  else
    redis.call('PEXPIREAT', pk, ms(at))
    redis.call('ZADD', base .. 'rooms:' .. backend, ms(at), room)
  end
end
local function reap()
  local dead = redis.call('ZRANGEBYSCORE', liveKey, '-inf', ms(now - keepFor), 'WITHSCORES', 'LIMIT', 0, 4)
  if #dead == 0 then return end
  local ids = livePeers()
  for i = 1, #dead, 2 do
    local id, at = dead[i], tonumber(dead[i + 1]) + idle
    local flat = redis.call('HGETALL', base .. 'gw:' .. id)
    for j = 1, #flat, 2 do release(flat[j], flat[j + 1], at, ids, id) end
    redis.call('ZREM', liveKey, id)
  end
end
local function trim()
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', gwKey, '-inf', ms(now - gwttl), 'LIMIT', 0, 20)) do
    if not redis.call('ZSCORE', liveKey, id) then
      redis.call('DEL', base .. 'gw:' .. id)
      redis.call('ZREM', gwKey, id)
    end
  end
end
`;

/**
 * place(): the whole compare-and-set.
 * KEYS: 1 placement hash, 2 gateways ZSET, 3 backends SET.
 * ARGV: 1 base (prefix..'{rg}:'), 2 room, 3 backend, 4 expectedEpoch, 5 force ('1'|'0'),
 *       6 gatewayId, 7 idleTtlMs, 8 gatewayTtlMs, 9 events channel, 10 maxIdleRooms ('' = no cap),
 *       11 the epoch to write, reserved before (RESERVE_EPOCH; '' = the next from the counter).
 * Returns {'ok', backend, epoch, evicted} | {'lost-race'} | {'lost-race', backend, epoch, evicted}
 * | {'busy', backend, epoch}.
 */
const PLACE = new LuaScript(`${NOW}
local base, room, backend = ARGV[1], ARGV[2], ARGV[3]
local idle, gwttl = tonumber(ARGV[7]), tonumber(ARGV[8])
${EVICT_IDLE}
${LIVENESS}
reap()
-- A new placement: kept live if a live gateway already reports the room there, else it expires.
local function expiry(b)
  for _, id in ipairs(livePeers()) do
    if redis.call('HGET', base .. 'gw:' .. id, room) == b then
      keepLive(room, b)
      return
    end
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  redis.call('ZADD', base .. 'rooms:' .. b, ms(now + idle), room)
end
local cur = redis.call('HMGET', KEYS[1], 'backend', 'epoch', 'at')
local curB = cur[1]
local curE = 0
if curB then curE = tonumber(cur[2]) or 0 end
if curE ~= tonumber(ARGV[4]) then
  if curB then return {'lost-race', curB, ms(curE)} end
  return {'lost-race'}
end
local exp = ms(now + idle)
if curB and curB ~= backend and ARGV[5] ~= '1' then
  local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ms(now - gwttl), '+inf')
  local young = now - (tonumber(cur[3]) or 0) < gwttl
  for _, id in ipairs(ids) do
    if id ~= ARGV[6] then
      -- Another gateway is alive: a placement younger than one gateway TTL may have sockets
      -- there that no heartbeat has reported yet.
      if young then return {'busy', curB, ms(curE)} end
      if redis.call('HGET', base .. 'gw:' .. id, room) == curB then return {'busy', curB, ms(curE)} end
    end
  end
end
if not curB then
  -- No placement, yet another gateway reports live sockets of the room (the placement expired
  -- under a stalled heartbeat, or Redis lost its data): adopt that backend rather than split.
  local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ms(now - gwttl), '+inf')
  for _, id in ipairs(ids) do
    local live = id ~= ARGV[6] and redis.call('HGET', base .. 'gw:' .. id, room)
    if live and live ~= backend then
      local ae = nextEpoch(base)
      redis.call('HSET', KEYS[1], 'backend', live, 'epoch', ms(ae), 'at', ms(now))
      expiry(live)
      redis.call('SADD', KEYS[3], live)
      redis.call('PUBLISH', ARGV[9], placementEvent(room, live, ae))
      return {'lost-race', live, ms(ae), evictIdle()}
    end
  end
end
if curB == backend then
  -- Kept live (no TTL): it stays so; else the idle TTL starts again.
  if redis.call('PTTL', KEYS[1]) ~= -1 then
    redis.call('PEXPIRE', KEYS[1], ARGV[7])
    redis.call('ZADD', base .. 'rooms:' .. backend, exp, room)
  end
  redis.call('SADD', KEYS[3], backend)
  return {'ok', backend, ms(curE)}
end
-- Epochs come from one counter and never repeat, even after a placement expired: a gateway
-- holding a stale {backend, epoch} can never win a compare-and-set against a newer placement.
-- A reserved epoch (a handoff's) came from the same counter after the room's epoch was read; one
-- not above it (the counter was lost meanwhile) is refused rather than written out of order.
local e
if ARGV[11] ~= '' then
  e = tonumber(ARGV[11])
  if e <= curE then return {'lost-race', curB, ms(curE)} end
else
  e = nextEpoch(base)
end
redis.call('HSET', KEYS[1], 'backend', backend, 'epoch', ms(e), 'at', ms(now))
if curB then redis.call('ZREM', base .. 'rooms:' .. curB, room) end
expiry(backend)
redis.call('SADD', KEYS[3], backend)
redis.call('PUBLISH', ARGV[9], placementEvent(room, backend, e))
return {'ok', backend, ms(e), evictIdle()}
`);

/**
 * heartbeat(): this gateway's report, whole or its changes, and its liveness stamp.
 * KEYS: 1 gateways ZSET, 2 this gateway's report hash, 3 backends SET.
 * ARGV: 1 base, 2 gatewayId, 3 idleTtlMs, 4 gatewayTtlMs, 5 events channel, 6 mode ('full': the
 *       pairs are the whole report, replacing it; 'delta': only changes; 'same': nothing changed),
 *       7 the stamp this gateway's last report wrote ('' with a full one), 8 n, 9..8+n rooms gone
 *       from the report, then room, backend pairs (sockets > 0).
 * Returns 'ok <stamp written>', or 'resync' (delta or same without this gateway's own last stamp in
 * gw-live: Redis lost it or has an older one, as after a failover to a replica that missed the last
 * write, or this gateway was reaped, or this is a late report overtaken by a newer one): nothing was
 * written, send a full report.
 * Full: per room HGET + PERSIST; the report and the rooms ZSETs in chunks of 500 fields, the
 * backends SET once per backend, and rooms that left the report released. Delta: per changed room
 * HGET, HSET or HDEL, and the placement's writes. Same: the stamp (ZADD x 2) and the reap checks.
 */
const HEARTBEAT = new LuaScript(`${NOW}
local base, me = ARGV[1], ARGV[2]
local idle, gwttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local mode = ARGV[6]
${LIVENESS}
reap()
trim()
if mode ~= 'full' then
  local stamp = redis.call('ZSCORE', liveKey, me)
  if not stamp or tonumber(stamp) <= now - keepFor or tonumber(stamp) ~= tonumber(ARGV[7]) then return 'resync' end
end
local function flush(key, cmd, args)
  if #args > 0 then redis.call(cmd, key, unpack(args)) end
end
-- A room reported live on backend: its placement kept live there, or (none: Redis lost its data,
-- or a long stall) re-created from the sockets' truth, so no other gateway places it elsewhere.
-- Returns whether the placement is on that backend (its rooms ZSET entry is then +inf).
local function touch(room, backend)
  local pk = base .. 'p:' .. room
  local placed = redis.call('HGET', pk, 'backend')
  if placed and placed ~= backend then return false end
  if not placed then
    local e = nextEpoch(base)
    redis.call('HSET', pk, 'backend', backend, 'epoch', ms(e), 'at', ms(now))
    redis.call('PUBLISH', ARGV[5], placementEvent(room, backend, e))
  end
  redis.call('PERSIST', pk)
  return true
end
local gone = tonumber(ARGV[8])
local first = 9 + gone
local ids = nil
local function peers()
  if not ids then ids = livePeers() end
  return ids
end
if mode == 'full' then
  local old = redis.call('HGETALL', KEYS[2])
  redis.call('DEL', KEYS[2])
  local report, perBackend, now_ = {}, {}, {}
  for i = first, #ARGV - 1, 2 do
    local room, backend = ARGV[i], ARGV[i + 1]
    now_[room] = backend
    report[#report + 1] = room
    report[#report + 1] = backend
    if #report >= 1000 then flush(KEYS[2], 'HSET', report); report = {} end
    if touch(room, backend) then
      local z = perBackend[backend]
      if not z then z = {}; perBackend[backend] = z end
      z[#z + 1] = '+inf'
      z[#z + 1] = room
      if #z >= 1000 then flush(base .. 'rooms:' .. backend, 'ZADD', z); perBackend[backend] = {} end
    end
  end
  flush(KEYS[2], 'HSET', report)
  for backend, z in pairs(perBackend) do
    flush(base .. 'rooms:' .. backend, 'ZADD', z)
    redis.call('SADD', KEYS[3], backend)
  end
  for j = 1, #old, 2 do
    if now_[old[j]] ~= old[j + 1] then release(old[j], old[j + 1], now + idle, peers(), me) end
  end
elseif mode == 'delta' then
  for i = 9, first - 1 do
    local room = ARGV[i]
    local was = redis.call('HGET', KEYS[2], room)
    if was then
      redis.call('HDEL', KEYS[2], room)
      release(room, was, now + idle, peers(), me)
    end
  end
  for i = first, #ARGV - 1, 2 do
    local room, backend = ARGV[i], ARGV[i + 1]
    local was = redis.call('HGET', KEYS[2], room)
    if was ~= backend then
      redis.call('HSET', KEYS[2], room, backend)
      if was then release(room, was, now + idle, peers(), me) end
      if touch(room, backend) then
        redis.call('ZADD', base .. 'rooms:' .. backend, '+inf', room)
        redis.call('SADD', KEYS[3], backend)
      end
    end
  end
end
redis.call('ZADD', KEYS[1], ms(now), me)
redis.call('ZADD', liveKey, ms(now), me)
return 'ok ' .. ms(now)
`);

/**
 * roomsPerBackend(): reap silent gateways, count live members of every backend's ZSET, trim the
 * expired ones. KEYS: 1 backends SET. ARGV: 1 base, 2 idleTtlMs, 3 gatewayTtlMs. Returns {backend, count, backend, count, ...}.
 */
const ROOMS_PER_BACKEND = new LuaScript(`${NOW}
local base, idle, gwttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
${LIVENESS}
reap()
local out = {}
for _, b in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local zk = ARGV[1] .. 'rooms:' .. b
  redis.call('ZREMRANGEBYSCORE', zk, '-inf', ms(now))
  local n = redis.call('ZCARD', zk)
  if n == 0 then
    redis.call('SREM', KEYS[1], b)
  else
    out[#out + 1] = b
    out[#out + 1] = n
  end
end
return out
`);

/** reserveEpoch(): the next epoch, placing nothing. KEYS: 1 the epoch counter (its slot). ARGV: 1 base. */
const RESERVE_EPOCH = new LuaScript(`${NOW}
return ms(nextEpoch(ARGV[1]))
`);

/**
 * setBackendState(): write (or delete, when ARGV[2] is '') and announce.
 * KEYS: 1 bstate HASH. ARGV: 1 id, 2 JSON state or '', 3 channel, 4 event JSON.
 */
const SET_BACKEND_STATE = new LuaScript(`
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`);

/**
 * close(): this gateway no longer counts; the placements its report kept live expire idleTtlMs
 * after its last heartbeat (as if it had stopped). KEYS: 1 gateways ZSET, 2 report hash.
 * ARGV: 1 gatewayId, 2 base, 3 idleTtlMs, 4 gatewayTtlMs.
 */
const LEAVE = new LuaScript(`${NOW}
local base, idle, gwttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
${LIVENESS}
local stamp = redis.call('ZSCORE', liveKey, ARGV[1])
if stamp then
  local at, ids = tonumber(stamp) + idle, livePeers()
  local flat = redis.call('HGETALL', KEYS[2])
  for j = 1, #flat, 2 do release(flat[j], flat[j + 1], at, ids, ARGV[1]) end
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', liveKey, ARGV[1])
redis.call('DEL', KEYS[2])
return 1
`);

const ADMIN_STATES: ReadonlySet<string> = new Set<AdminState>(['active', 'draining', 'maintenance']);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseAdminState(v: unknown): BackendAdminState | undefined {
  if (!isRecord(v)) return undefined;
  const { state, deadline, since } = v;
  if (typeof state !== 'string' || !ADMIN_STATES.has(state)) return undefined;
  if (deadline !== null && (typeof deadline !== 'number' || !Number.isFinite(deadline))) return undefined;
  if (typeof since !== 'number' || !Number.isFinite(since)) return undefined;
  return { state: state as AdminState, deadline, since };
}

function parsePlacement(v: unknown): PlacementRecord | null | undefined {
  if (v === null) return null;
  if (!isRecord(v) || typeof v.backend !== 'string' || typeof v.epoch !== 'number' || !Number.isSafeInteger(v.epoch)) return undefined;
  return { backend: v.backend, epoch: v.epoch };
}

/** An event from the channel, or undefined if it is not one. */
function parseEvent(message: string): StoreEvent | undefined {
  let v: unknown;
  try {
    v = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (!isRecord(v)) return undefined;
  if (v.type === 'placement' && typeof v.room === 'string') {
    const placement = parsePlacement(v.placement);
    return placement === undefined ? undefined : { type: 'placement', room: v.room, placement };
  }
  if (v.type === 'backend-state' && typeof v.id === 'string') {
    if (v.state === null) return { type: 'backend-state', id: v.id, state: null };
    const state = parseAdminState(v.state);
    return state ? { type: 'backend-state', id: v.id, state } : undefined;
  }
  return undefined;
}

function parseEpoch(s: unknown): number {
  const n = typeof s === 'number' ? s : Number(s);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`redis placement store: bad epoch in Redis: ${String(s)}`);
  return n;
}

export class RedisPlacementStore implements PlacementStore {
  readonly kind = 'redis' as const;

  private readonly base: string;
  private readonly channel: string;
  private readonly keys: { readonly gateways: string; readonly report: string; readonly backends: string; readonly bstate: string };
  /** Both connections, the event channel, availability and listeners. */
  private readonly link: RedisLink<StoreEvent>;

  constructor(private readonly opts: RedisStoreOptions) {
    const base = storeKeyBase(LABEL, opts);
    const { idleTtlMs, gatewayTtlMs } = opts.timing;
    if (!Number.isSafeInteger(idleTtlMs) || idleTtlMs <= 0 || !Number.isSafeInteger(gatewayTtlMs) || gatewayTtlMs <= 0) {
      throw new Error(`redis placement store: idleTtlMs and gatewayTtlMs must be positive integers (ms), got ${idleTtlMs}, ${gatewayTtlMs}`);
    }
    this.base = base;
    this.channel = `${this.base}events`;
    this.keys = {
      gateways: `${this.base}gw`,
      report: `${this.base}gw:${opts.gatewayId}`,
      backends: `${this.base}backends`,
      bstate: `${this.base}bstate`,
    };
    this.link = new RedisLink<StoreEvent>({
      url: opts.url,
      sentinels: opts.sentinels,
      sentinelName: opts.sentinelName,
      clusterNodes: opts.clusterNodes,
      tls: opts.tls,
      label: LABEL,
      connectionName: `roomgate-${opts.gatewayId}`,
      channel: this.channel,
      commandTimeoutMs: opts.commandTimeoutMs,
      parseEvent,
      // Redis may have lost what this gateway wrote (a restart, a failover): the next report is whole.
      onAvailability: () => {
        this.needsFull = true;
      },
      onLog: opts.onLog,
    });
  }

  get available(): boolean {
    return this.link.available;
  }

  /**
   * Starts connecting. Resolves once available (commands connection ready and the event channel
   * subscribed); rejects after timeoutMs with the last connection error. The store keeps
   * reconnecting by itself either way, until close().
   */
  connect(opts: ConnectOptions = {}): Promise<void> {
    return this.link.connect(opts);
  }

  async get(room: string): Promise<PlacementRecord | null> {
    const [backend, epoch] = await this.link.commands().hmget(this.placementKey(room), 'backend', 'epoch');
    if (backend === null || backend === undefined) return null;
    return { backend, epoch: parseEpoch(epoch) };
  }

  async place(room: string, backend: string, expectedEpoch: number, opts: PlaceOptions): Promise<PlaceResult> {
    const { idleTtlMs, gatewayTtlMs } = this.opts.timing;
    const reply = await this.link.run(
      PLACE,
      [this.placementKey(room), this.keys.gateways, this.keys.backends],
      [
        this.base,
        room,
        backend,
        String(expectedEpoch),
        opts.force ? '1' : '0',
        this.opts.gatewayId,
        String(idleTtlMs),
        String(gatewayTtlMs),
        this.channel,
        this.opts.timing.maxIdleRooms === undefined ? '' : String(this.opts.timing.maxIdleRooms),
        opts.epoch === undefined ? '' : String(opts.epoch),
      ],
    );
    if (!Array.isArray(reply) || typeof reply[0] !== 'string') throw new Error(`redis placement store: unexpected place reply ${JSON.stringify(reply)}`);
    const [status, b, e, evicted] = reply as [string, unknown, unknown, unknown];
    if (typeof evicted === 'number' && evicted > 0) this.opts.timing.onEvicted?.(evicted);
    const current = typeof b === 'string' ? { backend: b, epoch: parseEpoch(e) } : null;
    if (status === 'ok' && current) return { ok: true, placement: current };
    if (status === 'lost-race') return { ok: false, reason: 'lost-race', current };
    if (status === 'busy' && current) return { ok: false, reason: 'busy', current };
    throw new Error(`redis placement store: unexpected place reply ${JSON.stringify(reply)}`);
  }

  async reserveEpoch(): Promise<number> {
    return parseEpoch(await this.link.run(RESERVE_EPOCH, [`${this.base}epoch`], [this.base]));
  }

  async heartbeat(report: LiveReport): Promise<HeartbeatAnswer> {
    const { idleTtlMs, gatewayTtlMs } = this.opts.timing;
    const full = isFullReport(report);
    // After a reconnect Redis may lack this gateway's last changes (a failover to a replica that
    // had not received them): only a full report is sure to leave it right.
    if (!full && this.needsFull) return 'resync';
    const live = full ? report : (report?.rooms ?? []);
    const gone = full || report === null ? [] : report.gone;
    const args = [this.base, this.opts.gatewayId, String(idleTtlMs), String(gatewayTtlMs), this.channel, full ? 'full' : report === null ? 'same' : 'delta', full ? '' : this.lastStamp, String(gone.length), ...gone];
    for (const r of live) if (r.sockets > 0) args.push(r.room, r.backend);
    this.needsFull = true;
    const reply = await this.link.run(HEARTBEAT, [this.keys.gateways, this.keys.report, this.keys.backends], args);
    if (reply === 'resync') return 'resync';
    if (typeof reply !== 'string' || !/^ok \d+$/.test(reply)) throw new Error(`redis placement store: unexpected heartbeat reply ${JSON.stringify(reply)}`);
    this.lastStamp = reply.slice(3);
    this.needsFull = false;
    return 'ok';
  }

  /**
   * The stamp this gateway's last report wrote in gw-live. A report of changes carries it and Redis
   * applies it only over that very stamp: a write Redis lost without a reconnect (a failover to a
   * replica that had not received it, the client's connection kept) or a late report overtaken by a
   * newer one leaves another stamp there, and the answer is 'resync'.
   */
  private lastStamp = '';

  /** True until a report was written since the last (re)connect, and after a failed one: the next report must be whole. */
  private needsFull = true;

  async roomsPerBackend(): Promise<Map<string, number>> {
    const { idleTtlMs, gatewayTtlMs } = this.opts.timing;
    const reply = await this.link.run(ROOMS_PER_BACKEND, [this.keys.backends], [this.base, String(idleTtlMs), String(gatewayTtlMs)]);
    const out = new Map<string, number>();
    if (!Array.isArray(reply)) throw new Error(`redis placement store: unexpected roomsPerBackend reply ${JSON.stringify(reply)}`);
    for (let i = 0; i + 1 < reply.length; i += 2) out.set(String(reply[i]), Number(reply[i + 1]));
    return out;
  }

  async setBackendState(id: string, state: BackendAdminState | null): Promise<void> {
    const stored = state === null ? '' : JSON.stringify({ state: state.state, deadline: state.deadline, since: state.since });
    const event = JSON.stringify({ type: 'backend-state', id, state: state === null ? null : JSON.parse(stored) });
    await this.link.run(SET_BACKEND_STATE, [this.keys.bstate], [id, stored, this.channel, event]);
  }

  async backendStates(): Promise<Map<string, BackendAdminState>> {
    // ioredis's HGETALL reply object keeps fields like "__proto__" as own properties.
    const all = await this.link.commands().hgetall(this.keys.bstate);
    const out = new Map<string, BackendAdminState>();
    for (const [id, json] of Object.entries(all)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(json);
      } catch {
        parsed = undefined;
      }
      const state = parseAdminState(parsed);
      if (state) out.set(id, state);
      else this.link.log('warn', 'redis placement store: ignoring malformed backend state', { id, value: json });
    }
    return out;
  }

  subscribe(listener: (ev: StoreEvent) => void): () => void {
    return this.link.subscribe(listener);
  }

  /** Deregisters this gateway (best effort), then quits both connections; bounded in time. */
  close(): Promise<void> {
    return this.link.close({
      script: LEAVE,
      keys: [this.keys.gateways, this.keys.report],
      args: [this.opts.gatewayId, this.base, String(this.opts.timing.idleTtlMs), String(this.opts.timing.gatewayTtlMs)],
      failure: 'could not deregister gateway on close',
    });
  }

  private placementKey(room: string): string {
    return `${this.base}p:${room}`;
  }
}
