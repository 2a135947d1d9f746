import { RedisScript } from './script.js';

/**
 * The durable webhook queue (`--webhook-delivery queue`), all under `{<prefix>}queue:`:
 *
 * | key | type | holds |
 * |---|---|---|
 * | `queue:events` | stream, group `workers` | events due now; field `e` = the stored delivery's JSON |
 * | `queue:delayed` | sorted set, score = due time (epoch ms) | events waiting for their next attempt (member = JSON) |
 * | `queue:born` | sorted set, score = accepted at (epoch ms) | one member per event id not yet delivered nor dead: depth, oldest age, the bound |
 * | `queue:dead` | stream, bounded | dead letters; field `e` = the JSON with `lastError`, `deadAt` |
 * | `queue:delivered:<id>` | string, TTL = dedup retention | the app answered 2xx: a redelivery is dropped |
 * | `queue:wake` | channel | "something is due": workers read at once instead of at their next poll |
 *
 * Every step that moves an event is one script, so an event is never in two places nor in none.
 * Every key carries the deployment's hash tag: on a cluster each script runs on one slot.
 */

/**
 * Deduplicate, bound and store in one step. KEYS: events, born, the shared dedup key (`dedup:<id>`).
 * ARGV: json, event id, accepted at (ms), wake channel, dedup retention (ms), max events.
 * 0: accepted before (not stored again); 1: stored; 2: full (not stored, nothing marked). A
 * passthrough claim in flight (a fleet in the middle of a change of mode) is taken over.
 */
export const ENQUEUE = new RedisScript(`
if redis.call('GET', KEYS[3]) == 'accepted' then return 0 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return 2 end
redis.call('SET', KEYS[3], 'accepted', 'PX', ARGV[5])
redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[2])
redis.call('PUBLISH', ARGV[4], '1')
return 1
`);

/**
 * The app accepted it. KEYS: events, born, delivered marker. ARGV: group, entry id, event id, retention (ms).
 * The marker is written whatever else happened (the app did accept); 1 when our entry was still pending.
 */
export const DELIVERED = new RedisScript(`
redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
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
 * ARGV: group, entry id, due at (ms), json. 0 (nothing moved) when the entry is not pending any
 * more: another worker took it over, and that one decides.
 */
export const RETRY_LATER = new RedisScript(`
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
`);

/**
 * Past the horizon, or not verifying: a dead letter. KEYS: events, born, dead.
 * ARGV: group, entry id, event id, json, max dead letters.
 */
export const DEAD_LETTER = new RedisScript(`
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[4])
return 1
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

/** Which events were delivered already. KEYS: their delivered markers. Returns 1/0 per key, in order. */
export const SEEN = new RedisScript(`
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('EXISTS', k) end
return out
`);

/** The gauges' counts in one call. KEYS: born, dead. Returns {depth, oldest accepted at or '', dead letters}. */
export const STATS = new RedisScript(`
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {redis.call('ZCARD', KEYS[1]), oldest[2] or '', redis.call('XLEN', KEYS[2])}
`);
