import { randomUUID } from 'node:crypto';
import type { InvalidationEntry, InvalidationLog, InvalidationPage } from '../decision/fleet-invalidation.js';
import type { Revocation } from '../lib/revocation-hook.js';
import type { RedisConnection } from './connection.js';
import { RedisError } from './errors.js';
import type { RedisKeyspace } from './keyspace.js';
import { waitForReplicas, type ReplicaWait } from './replicas.js';
import { RedisScript } from './script.js';
import { compareStreamIds, isStreamId } from './stream-ids.js';

/** Channel (under the tag) nudged with the new entry's id after each append. */
export const INVALIDATE_CHANNEL = 'invalidate';
/** Entries the stream keeps (approximately: whole nodes are trimmed). A reader further behind purges all. */
export const INVALIDATION_LOG_MAX_ENTRIES = 10_000;

/**
 * KEYS: stream, epoch. ARGV: origin, scope, user reference, max entries, channel, new epoch.
 * The epoch is created with the first entry; a store that lost it (restarted empty) gets a new one,
 * which every reader sees as a reset. An epoch is `<the store's clock, ms>.<random>`: when it was
 * born tells a reader that never saw the old one whether the log restarted after it started.
 */
const APPEND = new RedisScript(`
if not redis.call('GET', KEYS[2]) then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], (t[1] * 1000 + math.floor(t[2] / 1000)) .. '.' .. ARGV[6])
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', 'o', ARGV[1], 's', ARGV[2], 'u', ARGV[3])
redis.call('PUBLISH', ARGV[5], id)
return id
`);

/**
 * KEYS: stream, epoch. ARGV: after (a stream id, '' for the head alone), max, new epoch.
 * Returns {epoch, last generated id, entries ever added (-1 before Redis 7), length, first entry id
 * ('' when empty), entries after `after`}.
 */
const READ = new RedisScript(`
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  local t = redis.call('TIME')
  epoch = (t[1] * 1000 + math.floor(t[2] / 1000)) .. '.' .. ARGV[3]
  redis.call('SET', KEYS[2], epoch)
end
local head, added, len, first = '0-0', 0, 0, ''
if redis.call('EXISTS', KEYS[1]) == 1 then
  added = -1
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    local k = info[i]
    if k == 'last-generated-id' then head = info[i + 1]
    elseif k == 'entries-added' then added = info[i + 1]
    elseif k == 'length' then len = info[i + 1]
    elseif k == 'first-entry' and type(info[i + 1]) == 'table' then first = info[i + 1][1] end
  end
end
if ARGV[1] == '' then return {epoch, head, added, len, first, {}} end
return {epoch, head, added, len, first, redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])}
`);

/**
 * A reader's position: the stream id it read last and that entry's rank among all entries ever
 * added (Redis 7's `entries-added`), so trimming past it can be told from nothing being there.
 */
interface Position {
  readonly id: string;
  /** -1 when Redis does not count (before 7.0): gaps are then judged by ids alone. */
  readonly rank: number;
}

const encode = (p: Position): string => `${p.id}/${p.rank}`;

function decode(position: string): Position {
  const [id, rank] = position.split('/');
  if (id === undefined || !isStreamId(id) || rank === undefined || !/^-?\d+$/.test(rank)) throw new RangeError(`RedisInvalidationLog: not a position: ${position}`);
  return { id, rank: Number(rank) };
}

/**
 * {@link InvalidationLog} on a Redis stream (`invalidations`, bounded to
 * {@link INVALIDATION_LOG_MAX_ENTRIES}), an epoch key, and a pub/sub nudge. Scripts and parsing
 * only: what a reader does about a gap is not decided here. What Redis hands back is checked: an
 * entry it cannot read comes out with a null revocation, a reply of the wrong shape is an error.
 */
export class RedisInvalidationLog implements InvalidationLog {
  private readonly keys: [string, string];
  private readonly channel: string;

  constructor(
    private readonly connection: RedisConnection,
    keyspace: RedisKeyspace,
    /**
     * With `--redis-wait-replicas`, an append resolves only once the replicas hold it (a
     * revocation is answered 200 only then); `maxEntries` bounds the stream (default
     * {@link INVALIDATION_LOG_MAX_ENTRIES}).
     */
    private readonly options: ReplicaWait & { readonly maxEntries?: number } = {},
  ) {
    this.keys = [keyspace.key('invalidations'), keyspace.key('invalidations-epoch')];
    this.channel = keyspace.channel(INVALIDATE_CHANNEL);
  }

  async append(origin: string, revocation: Revocation): Promise<void> {
    const user = revocation.scope === 'user' ? revocation.userReference : '';
    await this.connection.call('invalidate_publish', async (c) => {
      await APPEND.run(c, this.keys, [origin, revocation.scope, user, String(this.options.maxEntries ?? INVALIDATION_LOG_MAX_ENTRIES), this.channel, randomUUID()]);
      await waitForReplicas(c, this.options);
    });
  }

  async readAfter(position: string | null, max: number): Promise<InvalidationPage> {
    const from = position === null ? null : decode(position);
    const reply = await this.connection.call('invalidate_read', (c) => READ.run(c, this.keys, [from?.id ?? '', String(max), randomUUID()]));
    if (!Array.isArray(reply) || reply.length !== 6) throw malformed();
    const [epoch, head, added, length, first, list] = reply as unknown[];
    if (
      typeof epoch !== 'string' ||
      typeof head !== 'string' ||
      !isStreamId(head) ||
      !Number.isSafeInteger(added) ||
      !Number.isSafeInteger(length) ||
      typeof first !== 'string' ||
      (first !== '' && !isStreamId(first)) ||
      !Array.isArray(list)
    ) {
      throw malformed();
    }
    const counted = (added as number) >= 0;
    const entries: InvalidationEntry[] = [];
    let rank = from?.rank ?? (added as number);
    for (const item of list) {
      if (!Array.isArray(item) || typeof item[0] !== 'string' || !isStreamId(item[0])) throw malformed();
      rank = counted && rank >= 0 ? rank + 1 : -1;
      entries.push({ position: encode({ id: item[0], rank }), ...decodeEntry(item[1]) });
    }
    return {
      epoch,
      epochBornMs: epochBornMs(epoch),
      head: encode({ id: head, rank: counted ? (added as number) : -1 }),
      trimmed: from !== null && trimmedPast(from, { counted, added: added as number, length: length as number, first }),
      rewound: from !== null && (compareStreamIds(head, from.id) < 0 || (counted && from.rank > (added as number))),
      entries,
    };
  }

  async readSince(sinceMs: number, max: number): Promise<InvalidationPage> {
    // Entries are stream ids, the store's milliseconds: those after `<since>-0`. Their ranks are
    // unknown from here; the reader moves to the head after this page.
    return this.readAfter(encode({ id: `${Math.max(0, Math.floor(sinceMs))}-0`, rank: -1 }), max);
  }

  async onAppended(nudge: () => void): Promise<void> {
    await this.connection.subscribe(this.channel, () => nudge());
  }

  onRestored(hook: () => void): void {
    this.connection.onRestored(hook);
  }
}

/**
 * Whether entries after `from` were removed before they were read. With Redis' count of entries
 * ever added, the first entry still there has rank `added − length + 1`; the next one we need has
 * rank `from.rank + 1`. Without the count, a first entry after `from` means `from` itself was
 * trimmed, and perhaps more: taken as a gap (a purge too many, never one too few).
 */
function trimmedPast(from: Position, s: { counted: boolean; added: number; length: number; first: string }): boolean {
  if (s.counted && from.rank >= 0) return s.added - s.length + 1 > from.rank + 1 && s.added > from.rank;
  const firstAfter = s.first !== '' && compareStreamIds(s.first, from.id) > 0;
  // Without a rank: entries were removed (more added than held), and the oldest left is after `from`.
  return s.counted ? s.added > s.length && firstAfter : firstAfter;
}

/** When the epoch was made (the store's clock, ms), or null when it does not say (written by an older version or by something else). */
function epochBornMs(epoch: string): number | null {
  const m = /^(\d{1,15})\.[0-9a-f-]{36}$/.exec(epoch);
  return m ? Number(m[1]) : null;
}

function malformed(): RedisError {
  return new RedisError('ERR_REDIS_REPLY', 'unexpected reply from the invalidation log');
}

function decodeEntry(fields: unknown): { origin: string; revocation: Revocation | null } {
  const f = new Map<string, string>();
  if (Array.isArray(fields)) for (let i = 0; i + 1 < fields.length; i += 2) f.set(String(fields[i]), String(fields[i + 1]));
  const origin = f.get('o') ?? '';
  const scope = f.get('s');
  const user = f.get('u');
  if (scope === 'all') return { origin, revocation: { scope: 'all' } };
  if (scope === 'user' && user) return { origin, revocation: { scope: 'user', userReference: user } };
  return { origin, revocation: null };
}
