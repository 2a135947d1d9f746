import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ErrorReply } from '@redis/client';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import { Forwarder, type EnqueueResult, type EventQueue, type QueuedEvent } from '../webhooks/index.js';
import type { RedisConnection } from './connection.js';
import { DEDUP_KEY_OWNER } from './dedup-store.js';
import type { RedisKeyspace } from './keyspace.js';
import type { QueueMetrics } from './metrics.js';
import { DEAD_LETTER, DELIVERED, DROP, ENQUEUE, PROMOTE, RETRY_LATER, SEEN } from './queue-scripts.js';
import { parseEntries, QUEUE_GROUP, QueueKeys, type StoredEvent, type StreamEntry } from './queue-store.js';

/** First retry delay (ms); doubles per attempt (±20 % jitter) up to {@link QUEUE_BACKOFF_MAX_MS}. */
export const QUEUE_BACKOFF_MIN_MS = 1000;
/** Longest retry delay (ms): 5 minutes. */
export const QUEUE_BACKOFF_MAX_MS = 300_000;
/** Forwards in flight per replica. */
export const QUEUE_CONCURRENCY = 32;
/** Workers look for due, new and abandoned events at least this often (ms); a wake message makes it sooner. */
export const QUEUE_POLL_INTERVAL_MS = 250;
/** How often the gauges are read from Redis (ms). */
const STATS_INTERVAL_MS = 1000;
/** How often a worker looks for consumers of dead processes to remove from the group (ms). */
const CONSUMER_SWEEP_INTERVAL_MS = 60_000;
/** A consumer with nothing pending and idle this long is removed (ms); a live one is recreated by its next read. */
export const QUEUE_STALE_CONSUMER_MS = 3_600_000;
/** Due events moved back to the stream per step. */
const PROMOTE_BATCH = 200;
const ERROR_LOG_INTERVAL_MS = 30_000;
/** At most one `webhook_retry_scheduled` line per failure cause per this interval (ms); the rest are counted. */
const RETRY_LOG_INTERVAL_MS = 1000;

/** Delay before attempt `attempts + 1` (ms), after `attempts` failures (≥ 1). */
export function backoffMs(attempts: number, random: () => number = Math.random, minMs = QUEUE_BACKOFF_MIN_MS, maxMs = QUEUE_BACKOFF_MAX_MS): number {
  const base = minMs * 2 ** Math.min(Math.max(attempts, 1) - 1, 30);
  return Math.round(Math.min(maxMs, base * (0.8 + 0.4 * random())));
}

export interface RedisWebhookQueueOptions {
  readonly connection: RedisConnection;
  readonly keyspace: RedisKeyspace;
  readonly logger: Logger;
  readonly metrics: QueueMetrics;
  /** The app (`--app-webhook-url`). */
  readonly appUrl: URL;
  /** `--webhook-forward-timeout-ms`. */
  readonly forwardTimeoutMs: number;
  /**
   * How long an event taken by a worker stays its own before another replica may take it
   * (XAUTOCLAIM min idle), ms; `--webhook-dedup-lease-ms`. Must exceed the forward timeout: a
   * slow app must never get two copies at once.
   */
  readonly visibilityMs: number;
  /** `--webhook-queue-horizon-ms`: retried this long after acceptance, then dead-lettered. */
  readonly horizonMs: number;
  /** How long an accepted id is remembered and the delivered marker lives (ms), `--webhook-dedup-retention-ms`. */
  readonly deliveredRetentionMs: number;
  /** Epoch ms. */
  readonly now: () => number;
  readonly concurrency?: number;
  readonly pollIntervalMs?: number;
  /** Default {@link QUEUE_STALE_CONSUMER_MS}. */
  readonly staleConsumerMs?: number;
}

/**
 * The durable queue on Redis streams (contract, Webhooks, `queue`). {@link enqueue} is the
 * ingress's side; the workers (started by {@link start}, in every replica) are the other:
 *
 * - one consumer group, this process one consumer; new events arrive by `XREADGROUP` (no BLOCK on
 *   the shared connection: a `queue:wake` message, or the 250 ms poll, starts a read);
 * - each event is forwarded to this replica's app with the passthrough headers; a 2xx writes the
 *   delivered marker and removes it; a failure parks it in `queue:delayed` for its backoff, and
 *   past the horizon moves it to the dead letters with its last error;
 * - events held by a consumer that died are taken over with `XAUTOCLAIM` once idle
 *   `visibilityMs`; the delivered marker, checked before each forward, drops a copy the app has had;
 * - `NOGROUP` (Redis restarted empty) recreates the group, from the start of the stream.
 */
export class RedisWebhookQueue implements EventQueue {
  readonly keys: QueueKeys;
  /** This process's consumer name in the group. */
  readonly consumer = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly forwarder: Forwarder;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly errorLog = new RateLimiter(ERROR_LOG_INTERVAL_MS);
  /** An app down with thousands of events waiting must not turn every retry into a log line. */
  private readonly retryLog = new RateLimiter(RETRY_LOG_INTERVAL_MS);
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private pumping = false;
  private again = false;
  private stopped = false;
  private groupReady = false;
  private claimCursor = '0-0';
  private lastClaim = 0;
  private lastPromote = 0;
  private lastStats = 0;
  private lastSweep = 0;

  constructor(private readonly options: RedisWebhookQueueOptions) {
    if (!(options.visibilityMs > options.forwardTimeoutMs)) throw new RangeError('RedisWebhookQueue: visibilityMs must exceed forwardTimeoutMs');
    if (!(options.horizonMs > 0) || !(options.deliveredRetentionMs > 0)) throw new RangeError('RedisWebhookQueue: horizonMs and deliveredRetentionMs must be > 0');
    this.keys = new QueueKeys(options.keyspace);
    this.forwarder = new Forwarder({ appUrl: options.appUrl, timeoutMs: options.forwardTimeoutMs });
    this.concurrency = options.concurrency ?? QUEUE_CONCURRENCY;
    this.pollIntervalMs = options.pollIntervalMs ?? QUEUE_POLL_INTERVAL_MS;
  }

  /** Starts the workers; never waits for Redis. */
  async start(): Promise<void> {
    const { connection } = this.options;
    connection.onRestored(() => {
      // Redis may have come back empty: the group is checked again before the next read.
      this.groupReady = false;
      this.kick();
    });
    this.timer = setInterval(() => this.kick(), this.pollIntervalMs);
    this.timer.unref();
    await connection.subscribe(this.keys.wake, () => this.kick());
    this.kick();
  }

  /**
   * Stores the event unless its id was accepted before: one script marks the shared dedup key
   * `accepted` (retention as TTL, as passthrough does) and adds the event, so two copies arriving
   * at two replicas at once cannot both be queued.
   */
  async enqueue(event: QueuedEvent): Promise<EnqueueResult> {
    const acceptedAt = this.options.now();
    const stored: StoredEvent = { id: event.id, type: event.type, headers: event.headers, body: event.body.toString('base64'), acceptedAt, attempts: 0 };
    const added = await this.options.connection.call('queue_enqueue', (c) =>
      ENQUEUE.run(
        c,
        [this.keys.events, this.keys.born, this.options.keyspace.key(DEDUP_KEY_OWNER, event.id)],
        [JSON.stringify(stored), event.id, String(acceptedAt), this.keys.wake, String(this.options.deliveredRetentionMs)],
      ),
    );
    return Number(added) === 1 ? 'queued' : 'duplicate';
  }

  /**
   * Stops taking events and gives those in flight up to `graceMs` to finish (what is left of
   * `--shutdown-timeout-ms`); what is still unfinished stays pending in Redis and is taken over by
   * another replica after `visibilityMs`.
   */
  async stop(graceMs = 0): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    await this.forwarder.destroy();
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    void this.pump().finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  private async pump(): Promise<void> {
    const { connection } = this.options;
    try {
      if (!this.groupReady) await this.ensureGroup();
      const now = this.options.now();
      if (now - this.lastPromote >= this.pollIntervalMs) {
        this.lastPromote = now;
        await connection.call('queue_promote', (c) => PROMOTE.run(c, [this.keys.delayed, this.keys.events], [String(now), String(PROMOTE_BATCH), this.keys.wake]));
      }
      if (this.free() > 0 && now - this.lastClaim >= this.pollIntervalMs) {
        this.lastClaim = now;
        const reply = await connection.call('queue_autoclaim', (c) =>
          c.sendCommand(['XAUTOCLAIM', this.keys.events, QUEUE_GROUP, this.consumer, String(this.options.visibilityMs), this.claimCursor, 'COUNT', String(this.free())]),
        );
        const [cursor, claimed] = Array.isArray(reply) ? reply : [];
        this.claimCursor = typeof cursor === 'string' ? cursor : '0-0';
        const entries = parseEntries(claimed);
        if (entries.length > 0) this.options.logger.info({ event: 'webhook_queue_taken_over', events: entries.length }, 'events abandoned by another replica taken over');
        await this.dispatchBatch(entries);
      }
      while (this.free() > 0 && !this.stopped) {
        const reply = await connection.call('queue_read', (c) =>
          c.sendCommand(['XREADGROUP', 'GROUP', QUEUE_GROUP, this.consumer, 'COUNT', String(this.free()), 'STREAMS', this.keys.events, '>']),
        );
        const streams = Array.isArray(reply) ? (reply as unknown[]) : [];
        const entries = parseEntries(Array.isArray(streams[0]) ? (streams[0] as unknown[])[1] : undefined);
        if (entries.length === 0) break;
        await this.dispatchBatch(entries);
      }
      if (now - this.lastStats >= STATS_INTERVAL_MS) {
        this.lastStats = now;
        await this.readStats(now);
      }
      if (now - this.lastSweep >= CONSUMER_SWEEP_INTERVAL_MS) {
        this.lastSweep = now;
        await this.sweepConsumers();
      }
    } catch (err) {
      if (isNoGroup(err)) {
        // Redis lost the group (restarted empty, or the stream was deleted): recreate it at once.
        this.groupReady = false;
        this.again = true;
        this.options.logger.warn({ event: 'webhook_queue_group_lost' }, 'the queue consumer group is gone (Redis restarted empty?); recreating it');
        return;
      }
      this.logError('pump', err);
    }
  }

  private async ensureGroup(): Promise<void> {
    try {
      // From the start of the stream: events added before the group existed are read too.
      await this.options.connection.call('queue_group', (c) => c.sendCommand(['XGROUP', 'CREATE', this.keys.events, QUEUE_GROUP, '0', 'MKSTREAM']));
    } catch (err) {
      if (!errorText(err).startsWith('BUSYGROUP')) throw err;
    }
    this.groupReady = true;
  }

  private free(): number {
    return this.concurrency - this.inFlight.size;
  }

  /**
   * Starts a batch of entries: one script tells which were delivered already (a copy, or an entry
   * taken over after a crash that followed the app's 2xx); those are dropped, never forwarded.
   */
  private async dispatchBatch(entries: StreamEntry[]): Promise<void> {
    const events = entries.filter((e) => e.event);
    const seen = events.length === 0 ? [] : await this.options.connection.call('queue_seen', (c) => SEEN.run(c, events.map((e) => this.keys.delivered(e.event!.id)), []));
    const delivered = new Set(events.filter((_e, i) => Array.isArray(seen) && Number(seen[i]) === 1));
    for (const e of entries) {
      if (delivered.has(e)) this.dispatch(e, (entry) => this.dropDelivered(entry));
      else this.dispatch(e);
    }
  }

  private async dropDelivered({ entryId, event }: StreamEntry): Promise<void> {
    await this.options.connection.call('queue_drop', (c) => DROP.run(c, [this.keys.events], [QUEUE_GROUP, entryId]));
    this.options.metrics.forwards.inc({ outcome: 'already_delivered' });
    this.options.logger.info({ event: 'webhook_queue_duplicate', eventId: event?.id, type: event?.type, attempts: event?.attempts }, 'queued event delivered before; dropped');
  }

  private dispatch(entry: StreamEntry, work: (e: StreamEntry) => Promise<void> = (e) => this.handle(e)): void {
    const running = work(entry)
      .catch((err: unknown) => this.logError('handle', err))
      .finally(() => {
        this.inFlight.delete(running);
        // Read again once a quarter of the slots are free: batches, not one read per event.
        if (this.inFlight.size <= this.concurrency - Math.max(1, Math.floor(this.concurrency / 4))) this.kick();
      });
    this.inFlight.add(running);
  }

  private async handle({ entryId, event }: StreamEntry): Promise<void> {
    const { connection, metrics, logger } = this.options;
    const { events, born } = this.keys;
    if (!event) {
      // Not an event of ours (or unreadable): never forwarded, never retried.
      logger.error({ event: 'webhook_queue_bad_entry', entryId }, 'unreadable queue entry dropped');
      await connection.call('queue_drop', (c) => DROP.run(c, [events], [QUEUE_GROUP, entryId]));
      return;
    }
    const log = { eventId: event.id, type: event.type, attempts: event.attempts };
    const result = await this.forwarder.forward(Buffer.from(event.body, 'base64'), { ...event.headers });
    if (result.ok) {
      await this.settle('queue_delivered', () =>
        connection.call('queue_delivered', (c) =>
          DELIVERED.run(c, [events, born, this.keys.delivered(event.id)], [QUEUE_GROUP, entryId, event.id, String(this.options.deliveredRetentionMs)]),
        ),
      );
      metrics.forwards.inc({ outcome: 'delivered' });
      // Debug: one line per event costs more than the event; the forwards counter says it in aggregate.
      logger.debug({ event: 'webhook_accepted', ...log, appStatus: result.status, queuedMs: this.options.now() - event.acceptedAt }, 'queued webhook forwarded');
      return;
    }

    const now = this.options.now();
    const attempts = event.attempts + 1;
    const failed: StoredEvent = { ...event, attempts, lastError: result.detail };
    const horizonEnd = event.acceptedAt + this.options.horizonMs;
    if (now >= horizonEnd) {
      const dead: StoredEvent = { ...failed, deadAt: now };
      await connection.call('queue_dead_letter', (c) => DEAD_LETTER.run(c, [events, born, this.keys.dead], [QUEUE_GROUP, entryId, event.id, JSON.stringify(dead)]));
      metrics.forwards.inc({ outcome: 'dead_lettered' });
      logger.warn({ event: 'webhook_dead_lettered', ...log, attempts, lastError: result.detail }, 'webhook retried past --webhook-queue-horizon-ms; dead-lettered');
      return;
    }
    // The last try falls on the horizon itself.
    const dueAt = Math.min(now + backoffMs(attempts), horizonEnd);
    await connection.call('queue_retry', (c) => RETRY_LATER.run(c, [events, this.keys.delayed], [QUEUE_GROUP, entryId, String(dueAt), JSON.stringify(failed)]));
    metrics.forwards.inc({ outcome: 'retry_scheduled' });
    const suppressed = this.retryLog.admit(result.cause);
    if (suppressed !== undefined) {
      logger.info(
        { event: 'webhook_retry_scheduled', ...log, attempts, cause: result.cause, detail: result.detail, retryInMs: dueAt - now, suppressedSinceLast: suppressed },
        'app did not accept queued webhook; retry scheduled',
      );
    }
  }

  /** The app accepted: recording it is worth a second try (a miss means one more copy later). */
  private async settle(op: string, work: () => Promise<unknown>): Promise<void> {
    try {
      await work();
    } catch (first) {
      this.logError(op, first);
      await work();
    }
  }

  /**
   * Every pod that ever ran left a consumer in the group: remove those with nothing pending and
   * idle past {@link QUEUE_STALE_CONSUMER_MS} (whatever they held was taken over by XAUTOCLAIM).
   */
  private async sweepConsumers(): Promise<void> {
    const { connection } = this.options;
    const staleMs = this.options.staleConsumerMs ?? QUEUE_STALE_CONSUMER_MS;
    const reply = await connection.call('queue_consumers', (c) => c.sendCommand(['XINFO', 'CONSUMERS', this.keys.events, QUEUE_GROUP]));
    for (const item of Array.isArray(reply) ? reply : []) {
      const fields = new Map<string, unknown>();
      if (Array.isArray(item)) for (let i = 0; i + 1 < item.length; i += 2) fields.set(String(item[i]), item[i + 1]);
      const name = String(fields.get('name') ?? '');
      if (name === '' || name === this.consumer || Number(fields.get('pending')) !== 0 || !(Number(fields.get('idle')) >= staleMs)) continue;
      await connection.call('queue_consumers', (c) => c.sendCommand(['XGROUP', 'DELCONSUMER', this.keys.events, QUEUE_GROUP, name]));
    }
  }

  private async readStats(now: number): Promise<void> {
    const { connection, metrics } = this.options;
    const [depth, oldest, dead] = await connection.call('queue_stats', (c) =>
      Promise.all([
        c.sendCommand(['ZCARD', this.keys.born]),
        c.sendCommand(['ZRANGE', this.keys.born, '0', '0', 'WITHSCORES']),
        c.sendCommand(['XLEN', this.keys.dead]),
      ]),
    );
    metrics.depth.set(Number(depth) || 0);
    const bornAt = Array.isArray(oldest) && oldest.length >= 2 ? Number(oldest[1]) : Number.NaN;
    metrics.oldestAge.set(Number.isFinite(bornAt) ? Math.max(0, (now - bornAt) / 1000) : 0);
    metrics.deadLetters.set(Number(dead) || 0);
  }

  private logError(where: string, err: unknown): void {
    if (this.stopped) return;
    const code = (err as { code?: unknown })?.code;
    const suppressed = this.errorLog.admit(`${where}:${typeof code === 'string' ? code : 'error'}`);
    if (suppressed === undefined) return;
    this.options.logger.warn({ event: 'webhook_queue_error', where, code, suppressed }, `webhook queue ${where} failed: ${errorText(err)}`);
  }
}

function errorText(err: unknown): string {
  const cause = (err as { cause?: unknown })?.cause;
  if (cause instanceof ErrorReply) return cause.message;
  if (err instanceof ErrorReply) return err.message;
  return (err as Error)?.message ?? String(err);
}

function isNoGroup(err: unknown): boolean {
  return errorText(err).startsWith('NOGROUP');
}
