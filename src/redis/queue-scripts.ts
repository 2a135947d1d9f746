import { READ_MARKER_LUA } from './dedup-scripts.js';
import { RedisScript } from './script.js';

/**
 * The durable webhook queue (`--webhook-delivery queue`), all under `{<prefix>}queue:`:
 *
 * | key | type | holds |
 * |---|---|---|
 * | `queue:events` | stream, group `workers` | events due now; field `e` = the stored delivery's JSON, `i` = its event id |
 * | `queue:delayed` | sorted set, score = due time (epoch ms) | events waiting for their next attempt (member = JSON) |
 * | `queue:born` | sorted set, score = accepted at (epoch ms) | one member per event id not yet delivered nor dead: depth, oldest age, the bound |
 * | `queue:dead` | stream, bounded | dead letters; field `e` = the JSON with `lastError`, `deadAt` |
 * | `queue:delivered:<id>` | string (the marker's MAC), TTL ≥ horizon + 2 × tolerance | the app answered 2xx: a redelivery is dropped |
 * | `queue:routes` | hash, field = consumer | each live consumer's route table (globs only, with a MAC): where an entry its reader's routes do not take may go |
 * | `queue:claim:<id>` | string `forwarding:<token>`, TTL = the visibility | one entry of the event is being forwarded: no other entry of it (a copy) is |
 * | `queue:wake` | channel | "something is due": workers read at once instead of at their next poll |
 * | `queue:handed` | channel | the consumer an entry was just handed to: it reads its own pending entries at once |
 * | `queue:delivered` | channel | `{"id","mac"}` after each delivery: every replica remembers it in memory too |
 *
 * Every step that moves an event is one script, so an event is never in two places nor in none.
 * Every key carries the deployment's hash tag: on a cluster each script runs on one slot. What is
 * read back is bounded: an entry larger than the caller's limit is never returned (see READ), a
 * marker longer than any MAC never read. A marker key of another type than a string is no marker
 * (see READ_MARKER_LUA), never an error that would refuse the event for as long as it lives.
 */

/**
 * Deduplicate, bound and store in one step. KEYS: events, born, the shared dedup key (`dedup:<id>`).
 * ARGV: json, event id, accepted at (ms), wake channel, dedup retention (ms), max events, the
 * accepted marker to write, max marker bytes, the accepted markers that count (one per secret)...
 * 0: accepted before (not stored again); 1: stored; 2: full (not stored, nothing marked); 3:
 * stored, over a dedup value that was no marker of ours (forged, written without our secrets, or a
 * key of another type). A passthrough claim in flight (a fleet in the middle of a change of mode) is taken over.
 */
export const ENQUEUE = new RedisScript(`${READ_MARKER_LUA}
local v = marker(KEYS[3], tonumber(ARGV[8]))
if v and v ~= true then for i = 9, #ARGV do if v == ARGV[i] then return 0 end end end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return 2 end
redis.call('SET', KEYS[3], ARGV[7], 'PX', ARGV[5])
redis.call('XADD', KEYS[1], '*', 'e', ARGV[1], 'i', ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[2])
redis.call('PUBLISH', ARGV[4], '1')
if v and (v == true or string.sub(v, 1, 9) ~= 'inflight:') then return 3 end
return 1
`);

/**
 * The app accepted it. KEYS: events, born, delivered marker. ARGV: group, entry id, event id, marker
 * TTL (ms), the marker's MAC, the delivered channel, its message. The marker is written whatever
 * else happened (the app did accept); 1 when our entry was still pending.
 */
export const DELIVERED = new RedisScript(`
redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[4])
redis.call('PUBLISH', ARGV[6], ARGV[7])
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return acked
`);

/**
 * Delivered before (a copy, or a crash after the app's 2xx), or unreadable: drop it. KEYS: events,
 * born. ARGV: group, entry id, event id ('' for an unreadable entry). A copy delivered before also
 * leaves `born`: after a failover the entry can come back with its id in `born` while the delivered
 * marker says the app had it, and a member left there would count as waiting for ever (depth,
 * oldest age, the queue-old alert).
 */
export const DROP = new RedisScript(`
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('ZREM', KEYS[2], ARGV[3]) end
return acked
`);

/**
 * Not accepted, horizon not reached: park it until its next attempt. KEYS: events, delayed.
 * ARGV: group, entry id, due at (ms), json, consumer. 0 (nothing moved) when the entry is not
 * pending with this consumer any more: another worker took it over (this call was answered after
 * the entry's visibility, a Redis slow past it), and that one decides. XACK alone acknowledges an
 * entry whoever holds it: parked then, it would be promoted and forwarded again beside the
 * takeover's forward.
 */
export const RETRY_LATER = new RedisScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[5] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
`);

/**
 * Past the horizon, or not verifying: a dead letter. KEYS: events, born, dead.
 * ARGV: group, entry id, event id, json, max dead letters, consumer. 0 when the entry is not pending
 * with this consumer any more (as RETRY_LATER: the one that took it over decides).
 */
export const DEAD_LETTER = new RedisScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[6] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[4])
return 1
`);

/**
 * No route of this consumer takes the entry: give it to one whose routes do. KEYS: events. ARGV:
 * group, entry id, consumer, the consumer to give it to, that consumer's own handed channel (only it
 * is told: one delivery per hand-over, whatever the fleet's size). XCLAIM starts its visibility
 * afresh (JUSTID: not counted as a delivery). 0 (nothing moved) when the entry is not pending with
 * this consumer any more (as RETRY_LATER: the one that took it over decides).
 */
export const HAND_OVER = new RedisScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[4], 0, ARGV[2], 'JUSTID')
redis.call('PUBLISH', ARGV[5], ARGV[4])
return 1
`);

/**
 * The route tables filed. KEYS: routes. ARGV: at most (tables), max bytes of one (its consumer's
 * name and its table), max bytes in all. A larger table is skipped, never returned; the listing
 * stops at either bound, and then says it is not whole. A key of another type (a Redis writer's)
 * holds no table: none is listed, and ADVERTISE replaces it. Returns {whole (1 or 0), consumer,
 * json, consumer, json, …}.
 */
export const ROUTERS = new RedisScript(`
local out = {1}
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return out end
local max, one, all = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local total = 0
local fields = redis.call('HKEYS', KEYS[1])
for _, f in ipairs(fields) do
  local size = #f + redis.call('HSTRLEN', KEYS[1], f)
  if size <= one then
    if #out > 2 * max or total + size > all then out[1] = 0 break end
    local v = redis.call('HGET', KEYS[1], f)
    if v then out[#out + 1] = f out[#out + 1] = v total = total + size end
  end
end
return out
`);

/**
 * A consumer's route table filed. KEYS: routes. ARGV: consumer, json. A key of another type where
 * the tables go (a Redis writer's) is replaced: it would refuse every table, and every replica
 * would then believe no other one routes anything.
 */
export const ADVERTISE = new RedisScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then redis.call('DEL', KEYS[1]) end
return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
`);

/** Due events back into the stream. KEYS: delayed, events. ARGV: now (ms), at most, wake channel. */
export const PROMOTE = new RedisScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'e', m)
  redis.call('ZREM', KEYS[1], m)
end
if #due > 0 then redis.call('PUBLISH', ARGV[3], '1') end
return #due
`);

/**
 * A dead letter back on the queue. KEYS: dead, events, born. ARGV: dead entry id, json, event id,
 * now (ms), wake channel. 0 when that dead letter is gone (replayed by someone else).
 */
export const REPLAY = new RedisScript(`
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[2], '*', 'e', ARGV[2])
redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[3])
redis.call('PUBLISH', ARGV[5], '1')
return 1
`);

/**
 * The delivered markers of some events. KEYS: their marker keys. ARGV: max marker bytes. Returns,
 * in order, each marker's value, '' when there is none, '!' when it holds nothing of ours that can
 * be read (longer than any of ours, never read, or a key of another type): the caller checks each
 * MAC, and '!' fails it (counted).
 */
export const SEEN = new RedisScript(`${READ_MARKER_LUA}
local out = {}
for i, k in ipairs(KEYS) do
  local v = marker(k, tonumber(ARGV[1]))
  if v == false then out[i] = '' elseif v == true then out[i] = '!' else out[i] = v end
end
return out
`);

/**
 * One entry of an event is about to be forwarded: claim the event, so that no other entry of it
 * (a copy a writer added, a takeover) is forwarded meanwhile. KEYS: claim key, delivered marker.
 * ARGV: token, lease (ms), the longest lease (ms) a replica's claim may have, max value bytes, the
 * delivered MACs that count (one per secret). Returns `{'delivered', 0}` (a delivered marker with
 * one of the MACs: not forwarded), `{'busy', pttl}` (another token's claim with at most the longest
 * lease left), or `{'claimed', d}`, the claim written or renewed with the lease (the same token
 * claims again: an entry read again after an unknown outcome); d = 1 when it took the place of a
 * value that is no claim of ours (forged, a key of another type, no TTL or more left than any
 * replica's lease: a writer's, which would otherwise hold the event for as long as it chose).
 */
export const CLAIM_FORWARD = new RedisScript(`${READ_MARKER_LUA}
local max = tonumber(ARGV[4])
local d = marker(KEYS[2], max)
if d and d ~= true then for i = 5, #ARGV do if d == ARGV[i] then return {'delivered', 0} end end end
local mine = 'forwarding:' .. ARGV[1]
local v = marker(KEYS[1], max)
if v and v ~= true and v ~= mine and string.sub(v, 1, 11) == 'forwarding:' then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl >= 0 and ttl <= tonumber(ARGV[3]) then return {'busy', ttl} end
end
redis.call('SET', KEYS[1], mine, 'PX', ARGV[2])
if v and v ~= mine then return {'claimed', 1} end
return {'claimed', 0}
`);

/** The forward did not deliver: let the claim go. KEYS: claim key. ARGV: token, max value bytes. 1 released, 0 not ours (any more). */
export const RELEASE_FORWARD = new RedisScript(`${READ_MARKER_LUA}
if marker(KEYS[1], tonumber(ARGV[2])) == 'forwarding:' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`);

/**
 * Entries handed to a consumer, each checked for size before it leaves Redis. KEYS: events, born,
 * dead. ARGV: group, consumer, how ('new': never delivered; 'pending': this consumer's own, after
 * the id in ARGV[4]; 'claim': idle at least ARGV[8] ms, from the cursor in ARGV[4]), from, at most
 * (entries), max entry bytes, batch bytes, min idle (ms), max dead letters, now (ms).
 *
 * One entry per step, so a batch stops at its byte budget (the last entry may take it past, by at
 * most one entry). An entry whose fields hold more than the max is never returned: it is
 * dead-lettered here as `oversized` (its id and size only) and counted. An entry that is gone
 * (deleted while pending) comes back with no fields. Returns {cursor (the next id to read after,
 * or the next XAUTOCLAIM cursor), oversized count, entries}.
 */
export const READ = new RedisScript(`
local out, bytes, oversized = {}, 0, 0
local maxEntry, budget = tonumber(ARGV[6]), tonumber(ARGV[7])
local cursor = ARGV[4]
local function take(e)
  local fields = e[2]
  if type(fields) ~= 'table' then out[#out + 1] = {e[1], {}} return end
  local n, id = 0, ''
  for j = 1, #fields - 1, 2 do
    n = n + #fields[j] + #fields[j + 1]
    if fields[j] == 'i' and #fields[j + 1] <= 4096 then id = fields[j + 1] end
  end
  if n <= maxEntry then
    out[#out + 1] = e
    bytes = bytes + n
    return
  end
  redis.call('XACK', KEYS[1], ARGV[1], e[1])
  redis.call('XDEL', KEYS[1], e[1])
  if id ~= '' then redis.call('ZREM', KEYS[2], id) end
  local dead = cjson.encode({v = 2, id = id, timestamp = '', signature = '', body = '', acceptedAt = 0, attempts = 0, lastError = 'oversized', deadAt = tonumber(ARGV[10]), size = n})
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[9], '*', 'e', dead, 'i', id)
  oversized = oversized + 1
end
for step = 1, tonumber(ARGV[5]) do
  if bytes >= budget then break end
  if ARGV[3] == 'new' then
    local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
    if not r or #r[1][2] == 0 then break end
    take(r[1][2][1])
  elseif ARGV[3] == 'pending' then
    local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], cursor)
    local list = r and r[1][2] or {}
    if #list == 0 then break end
    cursor = list[1][1]
    take(list[1])
  else
    local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[8], cursor, 'COUNT', 1)
    cursor = r[1]
    if #r[2] > 0 then take(r[2][1]) end
    if cursor == '0-0' then break end
  end
end
return {cursor, oversized, out}
`);

/**
 * Dead letters, oldest first, each checked for size. KEYS: dead. ARGV: after ('-' from the
 * oldest, else '(' .. id), at most, max entry bytes, batch bytes. One larger than the max comes
 * back as its id and size (field `n`), never its content. Returns the entries.
 */
export const LIST_DEAD = new RedisScript(`
local out, bytes = {}, 0
local start = ARGV[1]
for step = 1, tonumber(ARGV[2]) do
  if bytes >= tonumber(ARGV[4]) then break end
  local page = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 1)
  if #page == 0 then break end
  local e = page[1]
  start = '(' .. e[1]
  local n = 0
  for j = 1, #e[2] do n = n + #e[2][j] end
  if n > tonumber(ARGV[3]) then out[#out + 1] = {e[1], {'n', tostring(n)}} else
    out[#out + 1] = e
    bytes = bytes + n
  end
end
return out
`);

/** The gauges' counts in one call. KEYS: born, dead. Returns {depth, oldest accepted at or '', dead letters}. */
export const STATS = new RedisScript(`
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {redis.call('ZCARD', KEYS[1]), oldest[2] or '', redis.call('XLEN', KEYS[2])}
`);
