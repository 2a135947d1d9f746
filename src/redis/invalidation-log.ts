import { randomUUID } from 'node:crypto';
import type { AppendedPlace, ChainedPlace, EntrySealer, InvalidationEntry, InvalidationLog, InvalidationNudge, InvalidationPage, ReadOptions, Step } from '../decision/index.js';
import type { Revocation } from '../lib/revocation-hook.js';
import type { RedisConnection } from './connection.js';
import { RedisError } from './errors.js';
import { HEALTH_KEY_TTL_MS } from './health-probe.js';
import type { RedisKeyspace } from './keyspace.js';
import { replicasInSync, waitForReplicas, type ReplicaWait } from './replicas.js';
import { APPEND, READ } from './invalidation-scripts.js';
import { compareStreamIds, isStreamId, nextStreamId } from './stream-ids.js';

/** Channel (under the tag) on which each append publishes its entry (see {@link nudgeMessage}). */
export const INVALIDATE_CHANNEL = 'invalidate';
/** Channel prefix (under the tag) of each reader's own echoes: `invalidate-echo:<random>`. */
export const INVALIDATE_ECHO_CHANNEL = 'invalidate-echo';
/** Entries the stream keeps (approximately: whole nodes are trimmed). A reader further behind purges all. */
export const INVALIDATION_LOG_MAX_ENTRIES = 10_000;
/**
 * Tries an append makes at places others took first (more appends than its places in one turn,
 * another replica's clock ahead of ours, this one held up between sealing and sending) before it
 * rejects: each try learns the store's last id and epoch, and offers the places right after it.
 */
const APPEND_TRIES = 8;
/** How far (ms) an appended id may be behind the store's clock: ids stay the store's milliseconds (see `readSince`). */
const APPEND_CLOCK_SLACK_MS = 1000;
/**
 * The places one append offers (see the APPEND script): this many milliseconds from the first one,
 * each with this many sequence numbers. Appends that reach Redis in the same turn all find one as
 * long as their clocks (the store's, as each estimates it when it seals) are within about 15 ms
 * and there are no more than 32 of them; each place is one more MAC to compute, a microsecond or two.
 */
const APPEND_PLACE_MS = 16;
const APPEND_PLACE_SEQS = 2;
/**
 * Bytes an entry's fields may hold together (a replica id, a scope, a user reference of at most
 * 1,024 characters, a MAC), and a nudge (the same and two ids): a larger one is nobody's
 * revocation, and only its id is read into the process.
 */
export const INVALIDATION_ENTRY_MAX_BYTES = 16_384;
/** The first element of a nudge that carries its entry (a bare stream id is a nudge of an older version). */
const NUDGE_VERSION = 'e1';
/**
 * A nudge with no entry: an entry was written whose own nudge was not published (its replication
 * did not complete in time). Readers of an older version take it, like any message, as "read the log".
 */
export const BARE_NUDGE = '["r"]';

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
 * What an append publishes: the entry as a reader needs it to apply it without reading, as a JSON
 * array `["e1", id, previous, origin, scope, user, chained MAC]` (the epoch is the reader's own: a
 * nudge of another epoch does not verify). Readers of an older version take any message as "read
 * the log".
 */
export function nudgeMessage(place: ChainedPlace, origin: string, revocation: Revocation, chain: string | null): string {
  return JSON.stringify([NUDGE_VERSION, place.id, place.previous, origin, revocation.scope, revocation.scope === 'user' ? revocation.userReference : '', chain ?? '']);
}

/** A nudge as published, unchecked; `entry` null for anything that is not one of {@link nudgeMessage}'s. */
export function parseNudge(message: string): InvalidationNudge {
  if (message === BARE_NUDGE) return { entry: null, bare: true };
  if (message.length > INVALIDATION_ENTRY_MAX_BYTES || !message.startsWith(`["${NUDGE_VERSION}"`)) return { entry: null };
  let fields: unknown;
  try {
    fields = JSON.parse(message);
  } catch {
    return { entry: null };
  }
  if (!Array.isArray(fields) || fields.length !== 7 || !fields.every((f) => typeof f === 'string')) return { entry: null };
  const [, id, previous, origin, scope, user, chain] = fields as string[];
  if (!isStreamId(id!) || !isStreamId(previous!)) return { entry: null };
  const revocation: Revocation | null = scope === 'all' ? { scope: 'all' } : scope === 'user' && user ? { scope: 'user', userReference: user } : null;
  if (!revocation) return { entry: null };
  return { entry: { id: id!, previous: previous!, origin: origin!, revocation, chain: chain === '' ? null : chain! } };
}

/**
 * {@link InvalidationLog} on a Redis stream (`invalidations`, bounded to
 * {@link INVALIDATION_LOG_MAX_ENTRIES}), an epoch key, a pub/sub channel on which each append
 * publishes its entry, and a channel of this reader's own on which each read echoes a token.
 * Scripts and parsing only: what a reader does about a gap is not decided here. What Redis hands
 * back is checked: an entry it cannot read (or larger than {@link INVALIDATION_ENTRY_MAX_BYTES})
 * comes out with a null revocation, a reply of the wrong shape is an error.
 *
 * Every entry removed after a reader's position is reported (`deleted`), however it was removed,
 * by three independent facts: Redis 7's `max-deleted-entry-id` (set by XDEL, not by trimming);
 * fewer entries after the position than `entries-added` says were added after it; and an entry a
 * nudge announced (the reader verified it) that the read does not find. A writer who deletes an
 * entry and rewrites the stream's counters (XSETID) still trips the third while the reader's
 * subscription is up; and a reader that heard an entry's nudge has it whatever becomes of the log.
 *
 * Every read also writes the health probe's key: a read that passes is a passed health check
 * (`RedisConnection.call` with `probe`), so an idle replica checks Redis with its log poll alone.
 */
export class RedisInvalidationLog implements InvalidationLog {
  private readonly keys: [string, string];
  private readonly healthKey: string;
  private readonly channel: string;
  private readonly echoChannel: string;
  private readonly echoListeners: ((token: string) => void)[] = [];
  /** The log's epoch and last generated id as last seen (where the next append is sealed for). */
  private place: { epoch: string; last: string } = { epoch: '', last: '0-0' };
  /** The store's clock minus ours (ms), as its last append answer said: new ids are its milliseconds. */
  private clockOffsetMs = 0;

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
    this.healthKey = keyspace.key('health');
    this.channel = keyspace.channel(INVALIDATE_CHANNEL);
    this.echoChannel = keyspace.channel(`${INVALIDATE_ECHO_CHANNEL}:${randomUUID()}`);
  }

  /**
   * Adds the entry at one of the places offered here (the epoch and ids after the last one seen, or
   * after `after`, a position the reader reached), each sealed by `seal.entry`, so the MAC binds it
   * where it lands (when every place was taken first, new ones are sealed for, at most
   * {@link APPEND_TRIES} times); then, once it is written (and replicated, with `--redis-wait-replicas`: a reader that
   * applies it unread then holds nothing a failover can take back), publishes the nudge: the entry
   * and the id the append found last before it, sealed by `seal.chain`. When the replicas did not
   * acknowledge it in time, a bare nudge ({@link BARE_NUDGE}): every reader reads the log.
   */
  append(origin: string, revocation: Revocation, seal: EntrySealer, after: string | null): Promise<AppendedPlace> {
    const user = revocation.scope === 'user' ? revocation.userReference : '';
    const max = String(this.options.maxEntries ?? INVALIDATION_LOG_MAX_ENTRIES);
    if (after !== null) this.learn(this.place.epoch, decode(after).id);
    return this.connection.call('invalidate_publish', async (c) => {
      await replicasInSync(c, this.options);
      let placed: AppendedPlace | null = null;
      for (let tries = 1; placed === null; tries++) {
        const epochSealed = this.place.epoch;
        // The same places as any append sent meanwhile (this replica's or another's): each takes the first left.
        const ids = placesAfter(this.place.last, Date.now() + this.clockOffsetMs);
        const places = ids.flatMap((id) => [id, epochSealed === '' ? '' : (seal.entry({ epoch: epochSealed, id }) ?? '')]);
        const sentAt = Date.now();
        const reply = await APPEND.run(c, this.keys, [epochSealed, origin, revocation.scope, user, max, randomUUID(), String(APPEND_CLOCK_SLACK_MS), ...places]);
        if (!Array.isArray(reply) || reply.length < 4) throw malformed();
        const [added, epoch, last, storeMs, previous] = reply as unknown[];
        if ((added !== 0 && added !== 1) || typeof epoch !== 'string' || typeof last !== 'string' || !isStreamId(last) || !Number.isSafeInteger(storeMs)) throw malformed();
        this.learn(epoch, last);
        this.clockOffsetMs = (storeMs as number) - sentAt;
        if (added === 1) {
          if (!ids.includes(last) || epoch !== epochSealed || typeof previous !== 'string' || !isStreamId(previous)) throw malformed();
          placed = { epoch, id: last, previous };
        } else if (tries >= APPEND_TRIES) {
          throw new RedisError('ERR_REDIS_REPLY', `the invalidation log took no entry in ${APPEND_TRIES} tries (its places taken first)`);
        }
      }
      try {
        await waitForReplicas(c, this.options);
      } catch (err) {
        // The entry is in the log, not (known to be) on the replicas: no reader may apply it unread
        // (a failover could take it back), but every one must read it now, not at its quiet poll
        // (the append is answered 503 and retried; meanwhile others may be answered 200 for later ones).
        await c.sendCommand(['PUBLISH', this.channel, BARE_NUDGE]).catch(() => undefined);
        throw err;
      }
      await c.sendCommand(['PUBLISH', this.channel, nudgeMessage(placed, origin, revocation, seal.chain(placed))]);
      return placed;
    });
  }

  readAfter(position: string | null, max: number, options: ReadOptions = {}): Promise<InvalidationPage> {
    return this.read(position === null ? null : decode(position), max, options, true);
  }

  readSince(sinceMs: number, max: number, options: ReadOptions = {}): Promise<InvalidationPage> {
    // Entries are stream ids, the store's milliseconds: those after `<since>-0`. Their ranks are
    // unknown from here; the reader moves to the head after this page.
    return this.read({ id: `${Math.max(0, Math.floor(sinceMs))}-0`, rank: -1 }, max, { echo: options.echo }, false);
  }

  /** Entries after `from`: a position a reader reached (`reached`), or a time it reads since. */
  private async read(from: Position | null, max: number, options: ReadOptions, reached: boolean): Promise<InvalidationPage> {
    const args = [from?.id ?? '', String(max), randomUUID(), String(INVALIDATION_ENTRY_MAX_BYTES), options.echo === undefined ? '' : this.echoChannel, options.echo ?? '', String(HEALTH_KEY_TTL_MS)];
    const reply = await this.connection.call('invalidate_read', (c) => READ.run(c, [...this.keys, this.healthKey], args), { probe: true });
    if (!Array.isArray(reply) || reply.length !== 7) throw malformed();
    const [epoch, head, added, length, first, maxDeleted, list] = reply as unknown[];
    if (
      typeof epoch !== 'string' ||
      typeof head !== 'string' ||
      !isStreamId(head) ||
      !Number.isSafeInteger(added) ||
      !Number.isSafeInteger(length) ||
      typeof first !== 'string' ||
      (first !== '' && !isStreamId(first)) ||
      typeof maxDeleted !== 'string' ||
      !isStreamId(maxDeleted) ||
      !Array.isArray(list)
    ) {
      throw malformed();
    }
    this.learn(epoch, head);
    const counted = (added as number) >= 0;
    const entries: InvalidationEntry[] = [];
    const ids: string[] = [];
    let rank = from?.rank ?? (added as number);
    for (const item of list) {
      if (!Array.isArray(item) || typeof item[0] !== 'string' || !isStreamId(item[0])) throw malformed();
      rank = counted && rank >= 0 ? rank + 1 : -1;
      ids.push(item[0]);
      entries.push({ position: encode({ id: item[0], rank }), id: item[0], ...decodeEntry(item[1]) });
    }
    const complete = list.length < max;
    const gaps = from === null ? { trimmed: false, deleted: false, rewound: false } : gapsAfter(from, { counted, added: added as number, length: length as number, first, maxDeleted, head, read: ids.length, complete });
    return {
      epoch,
      epochBornMs: epochBornMs(epoch),
      head: encode({ id: head, rank: counted ? (added as number) : -1 }),
      trimmed: gaps.trimmed,
      deleted: gaps.deleted || (from !== null && reached && announcedMissing(options.announced ?? null, from.id, ids, complete)),
      rewound: gaps.rewound,
      entries,
    };
  }

  compareIds(a: string, b: string): number {
    return compareStreamIds(a, b);
  }

  step(position: string, entry: { readonly id: string; readonly previous: string }): Step {
    const at = decode(position);
    if (!isStreamId(entry.id) || compareStreamIds(entry.id, at.id) <= 0) return 'stale';
    // Its rank is the next one: nothing was added between (the append took the place only while
    // `previous` was the stream's last generated id).
    if (entry.previous === at.id) return { next: encode({ id: entry.id, rank: at.rank >= 0 ? at.rank + 1 : -1 }) };
    return 'gap';
  }

  async onAppended(listener: (nudge: InvalidationNudge) => void): Promise<void> {
    await Promise.all([
      this.connection.subscribe(this.channel, (message) => listener(parseNudge(message))),
      this.connection.subscribe(this.echoChannel, (token) => {
        for (const l of this.echoListeners) l(token);
      }),
    ]);
  }

  onEcho(listener: (token: string) => void): void {
    this.echoListeners.push(listener);
  }

  async echo(token: string): Promise<void> {
    await this.connection.call('invalidate_echo', (c) => c.sendCommand(['PUBLISH', this.echoChannel, token]));
  }

  onRestored(hook: () => void): void {
    this.connection.onRestored(hook);
  }

  onDisturbed(hook: () => void): void {
    this.connection.onDisturbed(hook);
  }

  answeredSince(since: number): boolean {
    return this.connection.answeredSince(since);
  }

  /** Where the next append goes: after `last` (in the same epoch), as a read of the head saw it. */
  private learn(epoch: string, last: string): void {
    if (epoch !== this.place.epoch || compareStreamIds(last, this.place.last) > 0) this.place = { epoch, last };
  }
}

/**
 * Whether the newest entry announced before this read (after `from`, and within what it covers)
 * is missing from it.
 */
function announcedMissing(announced: string | null, from: string, ids: readonly string[], complete: boolean): boolean {
  if (announced === null || !isStreamId(announced) || compareStreamIds(announced, from) <= 0) return false;
  const last = ids.at(-1);
  if (!complete && (last === undefined || compareStreamIds(announced, last) > 0)) return false;
  return !ids.includes(announced);
}

/** What one read of the stream says about it, beside its entries. */
interface StreamFacts {
  /** Redis counts entries ever added (7.0 on): `added` is that count. */
  readonly counted: boolean;
  readonly added: number;
  readonly length: number;
  /** The oldest entry's id, '' when the stream is empty. */
  readonly first: string;
  /** The newest id XDEL ever removed ('0-0': none); trimming does not set it. */
  readonly maxDeleted: string;
  readonly head: string;
  /** Entries read after `from`, and whether that is all of them. */
  readonly read: number;
  readonly complete: boolean;
}

/**
 * Whether entries after `from` are gone, and how. Entries added after `from` are `added −
 * from.rank`; those still after it are the whole stream when its oldest entry is after `from`, else
 * what a complete read found. Fewer means some were removed: from the front (`trimmed`: the oldest
 * left is after `from`, and no XDEL after `from` explains it), or otherwise (`deleted`). Redis'
 * record of the newest XDEL after `from` is a deletion whatever the counts say. Without a rank
 * (before Redis 7, or a reader starting from a time), an oldest entry after `from` is taken as a
 * trim past it: a purge too many, never one too few.
 */
function gapsAfter(from: Position, f: StreamFacts): { trimmed: boolean; deleted: boolean; rewound: boolean } {
  const rewound = compareStreamIds(f.head, from.id) < 0 || (f.counted && from.rank > f.added);
  const frontPast = f.first === '' || compareStreamIds(f.first, from.id) > 0;
  const deletedAfter = compareStreamIds(f.maxDeleted, from.id) > 0;
  let gone: boolean;
  if (f.counted && from.rank >= 0) {
    const stillAfter = frontPast ? f.length : f.complete ? f.read : null;
    gone = stillAfter !== null && f.added - from.rank > stillAfter;
  } else {
    gone = f.first !== '' && compareStreamIds(f.first, from.id) > 0 && (!f.counted || f.added > f.length);
  }
  const trimmed = gone && frontPast && !deletedAfter;
  return { trimmed, deleted: deletedAfter || (gone && !trimmed), rewound };
}

/**
 * The places an append offers after `last` at `nowMs`, ascending: the first is the next id after
 * `last` (or `<now>-0`), then the next sequence numbers of its millisecond and of the few after it.
 */
function placesAfter(last: string, nowMs: number): string[] {
  const [ms, seq] = nextStreamId(last, nowMs).split('-').map(BigInt) as [bigint, bigint];
  const ids: string[] = [];
  for (let d = 0n; d < BigInt(APPEND_PLACE_MS); d++) {
    for (let j = 0n; j < BigInt(APPEND_PLACE_SEQS); j++) ids.push(`${ms + d}-${(d === 0n ? seq : 0n) + j}`);
  }
  return ids;
}

/** When the epoch was made (the store's clock, ms), or null when it does not say (written by an older version or by something else). */
function epochBornMs(epoch: string): number | null {
  const m = /^(\d{1,15})\.[0-9a-f-]{36}$/.exec(epoch);
  return m ? Number(m[1]) : null;
}

function malformed(): RedisError {
  return new RedisError('ERR_REDIS_REPLY', 'unexpected reply from the invalidation log');
}

/** What an entry says, unchecked: the reader believes none of it before its MAC (`m`) verifies. */
function decodeEntry(fields: unknown): { origin: string; revocation: Revocation | null; mac: string | null } {
  const f = new Map<string, string>();
  if (Array.isArray(fields)) for (let i = 0; i + 1 < fields.length; i += 2) f.set(String(fields[i]), String(fields[i + 1]));
  const origin = f.get('o') ?? '';
  const scope = f.get('s');
  const user = f.get('u');
  const mac = f.get('m') ?? null;
  if (scope === 'all') return { origin, revocation: { scope: 'all' }, mac };
  if (scope === 'user' && user) return { origin, revocation: { scope: 'user', userReference: user }, mac };
  return { origin, revocation: null, mac };
}
