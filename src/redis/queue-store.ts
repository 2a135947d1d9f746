import { ErrorReply } from '@redis/client';
import type { Logger } from '../observability/index.js';
import type { AcceptedMarks, AdvertBounds, Enqueued, ForwardClaim, QueueBatch, QueueEntry, QueueStats, QueueStore, ReadBounds, RouterAdvert, RouterListing } from '../webhooks/index.js';
import { DEDUP_KEY_OWNER } from './claim-store.js';
import { acceptedValue, DEDUP_VALUE_MAX_BYTES } from './dedup-scripts.js';
import type { RedisConnection } from './connection.js';
import { RedisError } from './errors.js';
import type { RedisKeyspace } from './keyspace.js';
import { ADVERTISE, CLAIM_FORWARD, DEAD_LETTER, DELIVERED, DROP, ENQUEUE, HAND_OVER, LIST_DEAD, PROMOTE, READ, RELEASE_FORWARD, REPLAY, RETRY_LATER, ROUTERS, SEEN, STATS } from './queue-scripts.js';
import { replicasInSync, waitForReplicas, type ReplicaWait } from './replicas.js';
import { isStreamId } from './stream-ids.js';

/** Owner segment of every queue key: `{<prefix>}queue:…` (reserved in {@link RedisKeyspace}). */
export const QUEUE_KEY_OWNER = 'queue';
/** The consumer group every replica's workers join (one consumer per process). */
export const QUEUE_GROUP = 'workers';
/** Events the queue holds at most (`--webhook-queue-max-events`); beyond, enqueue answers `full`. */
export const DEFAULT_QUEUE_MAX_EVENTS = 100_000;

export interface RedisQueueStoreOptions extends ReplicaWait {
  /** `--webhook-queue-max-events`: events waiting at most, and dead letters kept at most. */
  readonly maxEvents?: number;
  readonly logger?: Logger;
}

/** The names of the queue's keys (see queue-scripts.ts for what each holds). */
export class QueueKeys {
  readonly events: string;
  readonly delayed: string;
  readonly born: string;
  readonly dead: string;
  readonly wake: string;
  /** Channel of delivery announcements. */
  readonly deliveries: string;
  /** Each live consumer's route table. */
  readonly routes: string;
  /** Prefix of each consumer's own channel, on which it is told an entry was handed to it. */
  readonly handed: string;

  constructor(private readonly keyspace: RedisKeyspace) {
    this.events = keyspace.key(QUEUE_KEY_OWNER, 'events');
    this.delayed = keyspace.key(QUEUE_KEY_OWNER, 'delayed');
    this.born = keyspace.key(QUEUE_KEY_OWNER, 'born');
    this.dead = keyspace.key(QUEUE_KEY_OWNER, 'dead');
    this.wake = keyspace.channel(`${QUEUE_KEY_OWNER}:wake`);
    this.deliveries = keyspace.channel(`${QUEUE_KEY_OWNER}:delivered`);
    this.routes = keyspace.key(QUEUE_KEY_OWNER, 'routes');
    this.handed = keyspace.channel(`${QUEUE_KEY_OWNER}:handed`);
  }

  delivered(eventId: string): string {
    return this.keyspace.key(QUEUE_KEY_OWNER, 'delivered', eventId);
  }

  dedup(eventId: string): string {
    return this.keyspace.key(DEDUP_KEY_OWNER, eventId);
  }

  /** The event's forward claim: which entry of it is being forwarded. */
  claim(eventId: string): string {
    return this.keyspace.key(QUEUE_KEY_OWNER, 'claim', eventId);
  }
}

/**
 * {@link QueueStore} on Redis streams and scripts (contract, Webhooks `queue`). Storage only: what
 * is forwarded, retried, verified or dead-lettered is `QueueWorker`'s in src/webhooks/. Replies
 * are checked for shape; a group that vanished (Redis restarted empty, the stream deleted) is
 * created again and the read repeated.
 */
export class RedisQueueStore implements QueueStore {
  readonly keys: QueueKeys;
  readonly routesAt: string;
  private readonly maxEvents: number;
  private claimCursor = '0-0';
  private groupReady = false;

  constructor(
    private readonly connection: RedisConnection,
    keyspace: RedisKeyspace,
    private readonly options: RedisQueueStoreOptions = {},
  ) {
    this.keys = new QueueKeys(keyspace);
    this.routesAt = this.keys.routes;
    this.maxEvents = options.maxEvents ?? DEFAULT_QUEUE_MAX_EVENTS;
    if (!Number.isSafeInteger(this.maxEvents) || this.maxEvents < 1) throw new RangeError('RedisQueueStore: maxEvents must be a positive integer');
    // A restarted Redis may have come back empty: the group is checked before the next read.
    connection.onRestored(() => (this.groupReady = false));
  }

  async enqueue(eventId: string, json: string, acceptedAt: number, retentionMs: number, marks: AcceptedMarks): Promise<Enqueued> {
    const { events, born, wake } = this.keys;
    const args = [json, eventId, String(acceptedAt), wake, String(retentionMs), String(this.maxEvents), acceptedValue(marks.mac), String(DEDUP_VALUE_MAX_BYTES), ...marks.accepted.map(acceptedValue)];
    const reply = await this.connection.call('queue_enqueue', async (c) => {
      // Nothing is stored that could not be acknowledged (it would be delivered, and retried too).
      await replicasInSync(c, this.options);
      const r = await ENQUEUE.run(c, [events, born, this.keys.dedup(eventId)], args);
      // A duplicate is waited for too: the first copy's write may not have reached the replicas.
      if (r !== 2) await waitForReplicas(c, this.options);
      return r;
    });
    if (reply === 1 || reply === 3) return { outcome: 'queued', displaced: reply === 3 };
    if (reply === 0) return { outcome: 'duplicate', displaced: false };
    if (reply === 2) return { outcome: 'full', displaced: false };
    throw malformed('enqueue');
  }

  readNew(consumer: string, max: number, bounds: ReadBounds): Promise<QueueBatch> {
    return this.read('queue_read', consumer, 'new', '>', max, bounds);
  }

  readPending(consumer: string, max: number, afterEntryId: string, bounds: ReadBounds): Promise<QueueBatch> {
    if (!isStreamId(afterEntryId)) throw new RangeError(`RedisQueueStore: not a stream id: ${afterEntryId}`);
    return this.read('queue_read_pending', consumer, 'pending', afterEntryId, max, bounds);
  }

  async takeOver(consumer: string, minIdleMs: number, max: number, bounds: ReadBounds): Promise<QueueBatch> {
    const batch = await this.read('queue_autoclaim', consumer, 'claim', this.claimCursor, max, bounds, minIdleMs);
    return batch;
  }

  async deliveredMarks(eventIds: readonly string[]): Promise<(string | null)[]> {
    const reply = await this.connection.call('queue_seen', (c) => SEEN.run(c, eventIds.map((id) => this.keys.delivered(id)), [String(DEDUP_VALUE_MAX_BYTES)]));
    if (!Array.isArray(reply) || reply.length !== eventIds.length) throw malformed('seen');
    return reply.map((v) => (typeof v === 'string' && v !== '' ? v : null));
  }

  async claimForward(eventId: string, token: string, leaseMs: number, longestLeaseMs: number, deliveredMacs: readonly string[]): Promise<ForwardClaim> {
    const args = [token, String(Math.max(1, Math.round(leaseMs))), String(Math.round(longestLeaseMs)), String(DEDUP_VALUE_MAX_BYTES), ...deliveredMacs];
    const reply = await this.connection.call('queue_claim', (c) => CLAIM_FORWARD.run(c, [this.keys.claim(eventId), this.keys.delivered(eventId)], args));
    if (Array.isArray(reply) && typeof reply[1] === 'number') {
      if (reply[0] === 'claimed') return { kind: 'claimed', displaced: reply[1] === 1 };
      if (reply[0] === 'delivered') return { kind: 'delivered' };
      if (reply[0] === 'busy') return { kind: 'busy', remainingMs: reply[1] };
    }
    throw malformed('claim');
  }

  async releaseForward(eventId: string, token: string): Promise<void> {
    await this.connection.call('queue_release', (c) => RELEASE_FORWARD.run(c, [this.keys.claim(eventId)], [token, String(DEDUP_VALUE_MAX_BYTES)]));
  }

  async markDelivered(entryId: string, eventId: string, markerTtlMs: number, mac: string): Promise<void> {
    const { events, born, deliveries } = this.keys;
    const message = JSON.stringify({ id: eventId, mac });
    await this.connection.call('queue_delivered', (c) =>
      DELIVERED.run(c, [events, born, this.keys.delivered(eventId)], [QUEUE_GROUP, entryId, eventId, String(Math.max(1, Math.round(markerTtlMs))), mac, deliveries, message]),
    );
  }

  async drop(entryId: string, eventId?: string): Promise<void> {
    await this.connection.call('queue_drop', (c) => DROP.run(c, [this.keys.events, this.keys.born], [QUEUE_GROUP, entryId, eventId ?? '']));
  }

  async retryLater(consumer: string, entryId: string, dueAt: number, json: string): Promise<boolean> {
    const r = await this.connection.call('queue_retry', (c) => RETRY_LATER.run(c, [this.keys.events, this.keys.delayed], [QUEUE_GROUP, entryId, String(dueAt), json, consumer]));
    return r === 1;
  }

  async deadLetter(consumer: string, entryId: string, eventId: string, json: string): Promise<boolean> {
    const { events, born, dead } = this.keys;
    const r = await this.connection.call('queue_dead_letter', (c) => DEAD_LETTER.run(c, [events, born, dead], [QUEUE_GROUP, entryId, eventId, json, String(this.maxEvents), consumer]));
    return r === 1;
  }

  async handOver(consumer: string, entryId: string, to: string): Promise<boolean> {
    const r = await this.connection.call('queue_hand_over', (c) => HAND_OVER.run(c, [this.keys.events], [QUEUE_GROUP, entryId, consumer, to, this.handedTo(to)]));
    return r === 1;
  }

  async advertiseRoutes(consumer: string, json: string): Promise<void> {
    await this.connection.call('queue_routes', (c) => ADVERTISE.run(c, [this.keys.routes], [consumer, json]));
  }

  async forgetRoutes(consumer: string): Promise<void> {
    await this.connection.call('queue_routes', (c) => c.sendCommand(['HDEL', this.keys.routes, consumer]));
  }

  async routers(bounds: AdvertBounds): Promise<RouterListing> {
    const reply = await this.connection.call('queue_routers', (c) => ROUTERS.run(c, [this.keys.routes], [String(bounds.max), String(bounds.entryBytes), String(bounds.totalBytes)]));
    if (!Array.isArray(reply) || reply.length % 2 !== 1 || (reply[0] !== 0 && reply[0] !== 1)) throw malformed('routers');
    const tables: RouterAdvert[] = [];
    for (let i = 1; i < reply.length; i += 2) {
      const [consumer, json] = [reply[i], reply[i + 1]];
      if (typeof consumer === 'string' && typeof json === 'string') tables.push({ consumer, json });
    }
    return { tables, whole: reply[0] === 1 };
  }


  async promoteDue(now: number, max: number): Promise<number> {
    const r = await this.connection.call('queue_promote', (c) => PROMOTE.run(c, [this.keys.delayed, this.keys.events], [String(now), String(max), this.keys.wake]));
    return typeof r === 'number' ? r : 0;
  }

  async stats(): Promise<QueueStats> {
    const reply = await this.connection.call('queue_stats', (c) => STATS.run(c, [this.keys.born, this.keys.dead], []));
    if (!Array.isArray(reply) || reply.length !== 3) throw malformed('stats');
    const oldest = reply[1] === '' ? null : Number(reply[1]);
    return { depth: Number(reply[0]) || 0, oldestAcceptedAt: Number.isFinite(oldest) ? oldest : null, deadLetters: Number(reply[2]) || 0 };
  }

  async sweepConsumers(self: string, staleMs: number): Promise<void> {
    const reply = await this.connection.call('queue_consumers', (c) => c.sendCommand(['XINFO', 'CONSUMERS', this.keys.events, QUEUE_GROUP])).catch((err: unknown) => {
      if (isNoGroup(err)) return [];
      throw err;
    });
    for (const item of Array.isArray(reply) ? reply : []) {
      const fields = new Map<string, unknown>();
      if (Array.isArray(item)) for (let i = 0; i + 1 < item.length; i += 2) fields.set(String(item[i]), item[i + 1]);
      const name = String(fields.get('name') ?? '');
      if (name === '' || name === self || Number(fields.get('pending')) !== 0 || !(Number(fields.get('idle')) >= staleMs)) continue;
      await this.connection.call('queue_consumers', (c) => c.sendCommand(['XGROUP', 'DELCONSUMER', this.keys.events, QUEUE_GROUP, name]));
    }
  }

  async listDead(afterEntryId: string | null, max: number, bounds: ReadBounds): Promise<QueueEntry[]> {
    if (afterEntryId !== null && !isStreamId(afterEntryId)) throw new RangeError(`RedisQueueStore: not a stream id: ${afterEntryId}`);
    const start = afterEntryId === null ? '-' : `(${afterEntryId}`;
    const reply = await this.connection.call('queue_dead_list', (c) => LIST_DEAD.run(c, [this.keys.dead], [start, String(max), String(bounds.entryBytes), String(bounds.batchBytes)]));
    return parseEntries(reply);
  }

  async replayDead(entryId: string, eventId: string, json: string, now: number): Promise<boolean> {
    const { dead, events, born, wake } = this.keys;
    const r = await this.connection.call('queue_replay', (c) => REPLAY.run(c, [dead, events, born], [entryId, json, eventId, String(now), wake]));
    return r === 1;
  }

  async exists(): Promise<boolean> {
    const n = await this.connection.call('queue_exists', (c) => c.sendCommand(['EXISTS', this.keys.events, this.keys.dead, this.keys.delayed]));
    return Number(n) > 0;
  }

  async onWake(wake: () => void): Promise<void> {
    await this.connection.subscribe(this.keys.wake, () => wake());
  }

  async onDelivered(listener: (eventId: string, mac: string) => void): Promise<void> {
    await this.connection.subscribe(this.keys.deliveries, (message) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(message);
      } catch {
        return;
      }
      const { id, mac } = (parsed ?? {}) as { id?: unknown; mac?: unknown };
      if (typeof id === 'string' && typeof mac === 'string') listener(id, mac);
    });
  }

  async onHandedOver(consumer: string, hook: () => void): Promise<void> {
    await this.connection.subscribe(this.handedTo(consumer), () => hook());
  }

  /** The channel telling `consumer` alone that an entry was handed to it. */
  private handedTo(consumer: string): string {
    return `${this.keys.handed}:${consumer}`;
  }

  onRestored(hook: () => void): void {
    this.connection.onRestored(hook);
  }

  /**
   * One bounded read (see READ in queue-scripts.ts): new entries (`'>'`), this consumer's own
   * pending ones after an id, or a takeover from the XAUTOCLAIM cursor.
   */
  private read(op: string, consumer: string, how: 'new' | 'pending' | 'claim', from: string, max: number, bounds: ReadBounds, minIdleMs = 0): Promise<QueueBatch> {
    const { events, born, dead } = this.keys;
    const args = [QUEUE_GROUP, consumer, how, from, String(max), String(bounds.entryBytes), String(bounds.batchBytes), String(minIdleMs), String(this.maxEvents), String(Date.now())];
    return this.withGroup(async () => {
      const reply = await this.connection.call(op, (c) => READ.run(c, [events, born, dead], args));
      if (!Array.isArray(reply) || reply.length !== 3 || typeof reply[0] !== 'string' || typeof reply[1] !== 'number') throw malformed('read');
      if (how === 'claim') this.claimCursor = isStreamId(reply[0]) ? reply[0] : '0-0';
      return { entries: parseEntries(reply[2]), oversized: reply[1] };
    });
  }

  /** Creates the group when it is not known to exist, and once more if Redis says it vanished. */
  private async withGroup<T>(work: () => Promise<T>): Promise<T> {
    if (!this.groupReady) await this.ensureGroup();
    try {
      return await work();
    } catch (err) {
      if (!isNoGroup(err)) throw err;
      this.options.logger?.warn({ event: 'webhook_queue_group_lost' }, 'the queue consumer group is gone (Redis restarted empty?); recreating it');
      await this.ensureGroup();
      return work();
    }
  }

  private async ensureGroup(): Promise<void> {
    try {
      // From the start of the stream: events added before the group existed are read too.
      await this.connection.call('queue_group', (c) => c.sendCommand(['XGROUP', 'CREATE', this.keys.events, QUEUE_GROUP, '0', 'MKSTREAM']));
    } catch (err) {
      if (!replyText(err).startsWith('BUSYGROUP')) throw err;
    }
    this.groupReady = true;
  }
}

function malformed(what: string): RedisError {
  return new RedisError('ERR_REDIS_REPLY', `unexpected reply from the queue (${what})`);
}

function replyText(err: unknown): string {
  const cause = (err as { cause?: unknown })?.cause;
  if (cause instanceof ErrorReply) return cause.message;
  if (err instanceof ErrorReply) return err.message;
  return (err as Error)?.message ?? String(err);
}

function isNoGroup(err: unknown): boolean {
  return replyText(err).startsWith('NOGROUP');
}

/** `[[id, [field, value, …]] | null, …]` (XRANGE, the READ and LIST_DEAD scripts). */
export function parseEntries(list: unknown): QueueEntry[] {
  if (!Array.isArray(list)) return [];
  const out: QueueEntry[] = [];
  for (const item of list) {
    if (!Array.isArray(item) || typeof item[0] !== 'string' || !isStreamId(item[0])) continue;
    const fields = Array.isArray(item[1]) ? (item[1] as unknown[]) : [];
    let json: string | null = null;
    let size: number | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (String(fields[i]) === 'e') json = String(fields[i + 1]);
      // Set by LIST_DEAD for an entry too large to read: its size, never its content.
      else if (String(fields[i]) === 'n' && json === null) size = Number(fields[i + 1]);
    }
    out.push({ entryId: item[0], json, ...(size !== undefined && Number.isSafeInteger(size) ? { size } : {}) });
  }
  return out;
}
