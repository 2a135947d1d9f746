import { RedisScript } from './script.js';

/**
 * The stream's `XINFO STREAM` reply, or nil when there is no stream (any other error, `NOPERM`
 * among them, is the script's error: a refusal is not an empty log).
 */
const STREAM_INFO = `
local function stream_info(key)
  local info = redis.pcall('XINFO', 'STREAM', key)
  if type(info) == 'table' and info.err then
    if string.find(info.err, 'no such key', 1, true) then return nil end
    error(info)
  end
  return info
end
`;

/**
 * KEYS: stream, epoch. ARGV: the epoch the entry was sealed for, origin, scope, user reference, max
 * entries, new epoch, how far (ms) an id may be behind the store's clock, then the places it may
 * take, in ascending order, each an id and the entry's MAC sealed for it ('' for none).
 *
 * Adds the entry under the first of those ids after the stream's last generated id, with that
 * id's MAC (a reader verifies the MAC over the id and the epoch): returns {1, epoch, id, the
 * store's clock in ms, the stream's last generated id before it ('0-0' for none)}, which the
 * appender seals into the nudge it publishes next. Several places let appends that reach Redis
 * together (a bulk revocation, delivered to many replicas at once, sealed for the same
 * millisecond) each take one in the same turn, where with one id each all but one failed and tried
 * again. When the epoch is another, no place is after the stream's last, or the one after it is
 * further behind the store's clock than allowed (ids stay the store's milliseconds, which a reader
 * without a position reads from), adds nothing and returns {0, epoch, last generated id, clock}:
 * the caller seals again for new places. The epoch is created with the first entry; a store that
 * lost it (restarted empty) gets a new one, which every reader sees as a reset. An epoch is `<the
 * store's clock, ms>.<random>`: when it was born tells a reader that never saw the old one whether
 * the log restarted after it started.
 */
export const APPEND = new RedisScript(`${STREAM_INFO}
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  epoch = now .. '.' .. ARGV[6]
  redis.call('SET', KEYS[2], epoch)
end
local last = '0-0'
local info = stream_info(KEYS[1])
if info then
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] end
  end
end
if epoch ~= ARGV[1] then return {0, epoch, last, now} end
local lms, lseq = string.match(last, '^(%d+)-(%d+)$')
lms, lseq = tonumber(lms), tonumber(lseq)
for i = 8, #ARGV - 1, 2 do
  local ms, seq = string.match(ARGV[i], '^(%d+)-(%d+)$')
  ms, seq = tonumber(ms), tonumber(seq)
  if ms and seq and (ms > lms or (ms == lms and seq > lseq)) then
    if ms < now - tonumber(ARGV[7]) then return {0, epoch, last, now} end
    local fields = {'o', ARGV[2], 's', ARGV[3], 'u', ARGV[4]}
    if ARGV[i + 1] ~= '' then
      fields[7] = 'm'
      fields[8] = ARGV[i + 1]
    end
    local id = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], ARGV[i], unpack(fields))
    if type(id) == 'table' and id.err then return {0, epoch, last, now} end
    return {1, epoch, id, now, last}
  end
end
return {0, epoch, last, now}
`);

/**
 * KEYS: stream, epoch, the health probe's key. ARGV: after (a stream id, '' for the head alone),
 * max, new epoch, max entry bytes, echo channel ('' for none), echo token, the health key's TTL (ms).
 *
 * Writes the health probe's key first (so the read fails exactly where every write here would:
 * READONLY, OOM, MOVED, NOAUTH; see health-probe.ts), then returns {epoch, last generated id,
 * entries ever added (-1 before Redis 7), length, first entry id ('' when empty), the newest id
 * ever removed by XDEL ('0-0' when none or before Redis 7; trimming does not set it), entries
 * after `after` (none read when `after` is the last generated id)}. An entry whose fields hold
 * more than the max comes back as its id alone. Last, publishes the token on the echo channel:
 * heard, it proves the reader's subscription was up when this read ran (refused, by an ACL that
 * denies the reader its channels, the read stands: the reader is then never proven subscribed,
 * and reads every second).
 */
export const READ = new RedisScript(`${STREAM_INFO}
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  local t = redis.call('TIME')
  epoch = (t[1] * 1000 + math.floor(t[2] / 1000)) .. '.' .. ARGV[3]
  redis.call('SET', KEYS[2], epoch)
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[7])
local head, added, len, first, deleted = '0-0', 0, 0, '', '0-0'
local info = stream_info(KEYS[1])
if info then
  added = -1
  for i = 1, #info, 2 do
    local k = info[i]
    if k == 'last-generated-id' then head = info[i + 1]
    elseif k == 'entries-added' then added = info[i + 1]
    elseif k == 'length' then len = info[i + 1]
    elseif k == 'max-deleted-entry-id' then deleted = info[i + 1]
    elseif k == 'first-entry' and type(info[i + 1]) == 'table' then first = info[i + 1][1] end
  end
end
local list = {}
if ARGV[1] ~= '' and ARGV[1] ~= head then
  list = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
  local limit = tonumber(ARGV[4])
  for i, e in ipairs(list) do
    local n = 0
    for j = 1, #e[2] do n = n + #e[2][j] end
    if n > limit then list[i] = {e[1], {}} end
  end
end
if ARGV[5] ~= '' then redis.pcall('PUBLISH', ARGV[5], ARGV[6]) end
return {epoch, head, added, len, first, deleted, list}
`);
