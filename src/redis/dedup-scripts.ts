import { RedisScript } from './script.js';

/**
 * The dedup key `dedup:<id>` holds `inflight:<token>` (with the lease as TTL) while a replica
 * forwards the event, then `accepted` (with the retention as TTL). Each step is one script, so the
 * check of the token and the write are atomic.
 */

/**
 * KEYS[1] dedup key; ARGV[1] token, ARGV[2] lease (ms).
 * Returns `{'claimed', 0}`, `{'duplicate', 0}` or `{'in_flight', pttl}`.
 */
export const CLAIM = new RedisScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'inflight:' .. ARGV[1], 'PX', ARGV[2])
  return {'claimed', 0}
end
if v == 'accepted' then return {'duplicate', 0} end
return {'in_flight', redis.call('PTTL', KEYS[1])}
`);

/**
 * KEYS[1] dedup key; ARGV[1] token, ARGV[2] retention (ms), ARGV[3] channel, ARGV[4] message.
 * The app accepted the event, so it is recorded as accepted whatever the key holds; the answer
 * says whether our claim was still there: 1 held, 2 already accepted, 0 lapsed (gone or someone
 * else's, which means the lease was shorter than the forward took).
 */
export const ACCEPT = new RedisScript(`
local v = redis.call('GET', KEYS[1])
if v == 'accepted' then return 2 end
redis.call('SET', KEYS[1], 'accepted', 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
if v == 'inflight:' .. ARGV[1] then return 1 end
return 0
`);

/** KEYS[1] dedup key; ARGV[1] token, ARGV[2] channel, ARGV[3] message. 1 released, 0 not ours (any more). */
export const RELEASE = new RedisScript(`
if redis.call('GET', KEYS[1]) == 'inflight:' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`);
