import { RedisScript } from './script.js';

/**
 * The dedup key `dedup:<id>` holds `inflight:<token>` (with the lease as TTL) while a replica
 * forwards the event, then `accepted:<MAC>` (with the retention as TTL; the MAC is keyed from the
 * webhook secrets, computed and checked by the policy in src/webhooks/). Each step is one script,
 * so the check of the token and the write are atomic. A value of any other shape (forged, written
 * without our secrets, an in-flight claim without a TTL or with more left than the longest lease a
 * replica may hold, larger than any of ours, or a key of another type) is no marker: a claim takes
 * its place. `dedup-waiting:<id>` exists while a replica waits for the event's claim to settle: only
 * then do accept and release announce the settlement.
 */

/** Values longer than this are none of ours (an in-flight token or a MAC is a few dozen bytes): never read. */
export const DEDUP_VALUE_MAX_BYTES = 256;

/** The value of an accepted id: its marker MAC behind a fixed word. */
export const acceptedValue = (mac: string): string => `accepted:${mac}`;

/**
 * Lua, the head of every script that reads a marker: `marker(key, max)` is `false` when the key
 * does not exist, `true` when it holds nothing of ours that can be read (a key of another type: a
 * hash, a list…, or a string longer than `max`, never read), else the string. A key of another
 * type is no error: an error reply would refuse every delivery of the event for as long as the
 * key lives. Whoever writes next (`SET`) replaces it, whatever its type.
 */
export const READ_MARKER_LUA = `
local function marker(k, max)
  local t = redis.call('TYPE', k)['ok']
  if t == 'none' then return false end
  if t ~= 'string' or redis.call('STRLEN', k) > max then return true end
  return redis.call('GET', k)
end
`;

/**
 * KEYS[1] dedup key, KEYS[2] waiting key; ARGV[1] token, ARGV[2] lease (ms), ARGV[3] max value
 * bytes, ARGV[4] the longest lease (ms) a claim of a replica may have, ARGV[5] how long past the
 * holder's lease a waiter may still be told (ms), ARGV[6..] the accepted markers that count
 * (`accepted:<mac>`, one per configured secret). An in-flight value is honoured only while its TTL
 * is at most ARGV[4]: a TTL no replica's lease could leave is a writer's, which would otherwise
 * hold the event for as long as it chose. Answering `in_flight` records that a replica waits, for
 * as long as the holder's lease (plus ARGV[5]).
 * Returns `{'claimed', 0}` (free), `{'claimed', 1}` (took the place of a value that is no marker
 * of ours), `{'duplicate', 0}` or `{'in_flight', pttl}`.
 */
export const CLAIM = new RedisScript(`${READ_MARKER_LUA}
local v = marker(KEYS[1], tonumber(ARGV[3]))
if v and v ~= true then
  for i = 6, #ARGV do if v == ARGV[i] then return {'duplicate', 0} end end
  if string.sub(v, 1, 9) == 'inflight:' then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl >= 0 and ttl <= tonumber(ARGV[4]) then
      redis.call('SET', KEYS[2], '1', 'PX', ttl + tonumber(ARGV[5]))
      return {'in_flight', ttl}
    end
  end
end
redis.call('SET', KEYS[1], 'inflight:' .. ARGV[1], 'PX', ARGV[2])
if v then return {'claimed', 1} end
return {'claimed', 0}
`);

/**
 * KEYS[1] dedup key, KEYS[2] waiting key; ARGV[1] token, ARGV[2] retention (ms), ARGV[3] channel,
 * ARGV[4] message, ARGV[5] the marker to write, ARGV[6] max value bytes, ARGV[7..] the accepted
 * markers that count. The app accepted the event, so it is recorded as accepted whatever the key
 * holds, and announced only when a replica waits for it; the answer says whether our claim was
 * still there: 1 held, 2 already accepted, 0 lapsed (gone or someone else's, which means the lease
 * was shorter than the forward took).
 */
export const ACCEPT = new RedisScript(`${READ_MARKER_LUA}
local v = marker(KEYS[1], tonumber(ARGV[6]))
if v and v ~= true then for i = 7, #ARGV do if v == ARGV[i] then return 2 end end end
redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[2])
if redis.call('UNLINK', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
if v == 'inflight:' .. ARGV[1] then return 1 end
return 0
`);

/**
 * KEYS[1] dedup key, KEYS[2] waiting key; ARGV[1] token, ARGV[2] channel, ARGV[3] message, ARGV[4]
 * max value bytes. Announced only when a replica waits. 1 released, 0 not ours (any more).
 */
export const RELEASE = new RedisScript(`${READ_MARKER_LUA}
if marker(KEYS[1], tonumber(ARGV[4])) == 'inflight:' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('UNLINK', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
  return 1
end
return 0
`);
