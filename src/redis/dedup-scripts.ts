import { RedisScript } from './script.js';

/**
 * The dedup key `dedup:<id>` holds `inflight:<token>` (with the lease as TTL) while a replica
 * forwards the event, then `accepted:<MAC>` (with the retention as TTL; the MAC is keyed from the
 * webhook secrets, computed and checked by the policy in src/webhooks/). Each step is one script,
 * so the check of the token and the write are atomic. A value of any other shape (forged, written
 * without our secrets, an in-flight claim without a TTL or with more left than the longest lease a
 * replica may hold, or larger than any of ours) is no marker: a claim takes its place. A key of
 * another type is an error reply (a refusal).
 */

/** Values longer than this are none of ours (an in-flight token or a MAC is a few dozen bytes): never read. */
export const DEDUP_VALUE_MAX_BYTES = 256;

/** The value of an accepted id: its marker MAC behind a fixed word. */
export const acceptedValue = (mac: string): string => `accepted:${mac}`;

/**
 * KEYS[1] dedup key; ARGV[1] token, ARGV[2] lease (ms), ARGV[3] max value bytes, ARGV[4] the
 * longest lease (ms) a claim of a replica may have, ARGV[5..] the accepted markers that count
 * (`accepted:<mac>`, one per configured secret). An in-flight value is honoured only while its TTL
 * is at most ARGV[4]: a TTL no replica's lease could leave is a writer's, which would otherwise
 * hold the event for as long as it chose.
 * Returns `{'claimed', 0}` (free), `{'claimed', 1}` (took the place of a value that is no marker
 * of ours), `{'duplicate', 0}` or `{'in_flight', pttl}`.
 */
export const CLAIM = new RedisScript(`
local n = redis.call('STRLEN', KEYS[1])
local v = false
if n > tonumber(ARGV[3]) then v = true elseif n > 0 then v = redis.call('GET', KEYS[1]) end
if v and v ~= true then
  for i = 5, #ARGV do if v == ARGV[i] then return {'duplicate', 0} end end
  if string.sub(v, 1, 9) == 'inflight:' then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl >= 0 and ttl <= tonumber(ARGV[4]) then return {'in_flight', ttl} end
  end
end
redis.call('SET', KEYS[1], 'inflight:' .. ARGV[1], 'PX', ARGV[2])
if v then return {'claimed', 1} end
return {'claimed', 0}
`);

/**
 * KEYS[1] dedup key; ARGV[1] token, ARGV[2] retention (ms), ARGV[3] channel, ARGV[4] message,
 * ARGV[5] the marker to write, ARGV[6] max value bytes, ARGV[7..] the accepted markers that count.
 * The app accepted the event, so it is recorded as accepted whatever the key holds; the answer
 * says whether our claim was still there: 1 held, 2 already accepted, 0 lapsed (gone or someone
 * else's, which means the lease was shorter than the forward took).
 */
export const ACCEPT = new RedisScript(`
local n = redis.call('STRLEN', KEYS[1])
local v = false
if n > 0 and n <= tonumber(ARGV[6]) then v = redis.call('GET', KEYS[1]) end
if v then for i = 7, #ARGV do if v == ARGV[i] then return 2 end end end
redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
if v == 'inflight:' .. ARGV[1] then return 1 end
return 0
`);

/** KEYS[1] dedup key; ARGV[1] token, ARGV[2] channel, ARGV[3] message. 1 released, 0 not ours (any more). */
export const RELEASE = new RedisScript(`
if redis.call('STRLEN', KEYS[1]) > 256 then return 0 end
if redis.call('GET', KEYS[1]) == 'inflight:' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`);
