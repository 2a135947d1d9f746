import type { Registry } from 'prom-client';
import type { RedisConfig, WebhookConfig } from '../config/index.js';
import type { RevocationHook } from '../lib/revocation-hook.js';
import type { Logger } from '../observability/index.js';
import { MemoryDedupStore, type DedupStore } from '../webhooks/index.js';
import { RedisConnection } from './connection.js';
import { RedisDedupStore } from './dedup-store.js';
import { InvalidationBus } from './invalidation-bus.js';
import { RedisKeyspace } from './keyspace.js';
import { createQueueMetrics, createRedisMetrics } from './metrics.js';
import { RedisWebhookQueue } from './webhook-queue.js';

export interface SharedStateOptions {
  readonly redis: RedisConfig;
  /** `null` when the webhook ingress is off (no dedup store then). */
  readonly webhooks: WebhookConfig | null;
  /** This replica's cache. */
  readonly local: RevocationHook;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly now: () => number;
}

/** What the composition root plugs into the seams when `--redis-url` is set. */
export interface SharedState {
  readonly connection: RedisConnection;
  readonly keyspace: RedisKeyspace;
  /** Purges here and fans out to the other replicas. */
  readonly revocations: RevocationHook;
  /** Shared dedup for the webhook ingress in passthrough mode, or null (no ingress, or queue mode). */
  readonly dedup: DedupStore | null;
  /** `--webhook-delivery queue`: the durable queue and its workers, else null. */
  readonly queue: RedisWebhookQueue | null;
  /** Stops the queue's workers (forwards in flight get up to `queueGraceMs`), then closes Redis. */
  close(queueGraceMs?: number): Promise<void>;
}

/**
 * Builds the Redis room: one connection (started in the background: nothing waits for Redis, and
 * readiness never depends on it), the invalidation bus around the local cache, and the shared
 * dedup store. Later users (the queue under `queue:*`, the reconciler under `redec:*`) take
 * `connection` and `keyspace` from here.
 */
export async function startSharedState(options: SharedStateOptions): Promise<SharedState> {
  const { redis, logger } = options;
  const metrics = createRedisMetrics(options.registry);
  const connection = new RedisConnection({ url: () => redis.url.current().href, commandTimeoutMs: redis.commandTimeoutMs, logger, metrics });
  const keyspace = new RedisKeyspace(redis.keyPrefix);
  const bus = new InvalidationBus({ connection, keyspace, local: options.local, metrics, logger });
  const webhooks = options.webhooks;
  // Queue mode deduplicates inside its enqueue script: no claim store, no settlement subscription.
  const dedup =
    webhooks && webhooks.delivery !== 'queue'
      ? new RedisDedupStore({
          connection,
          keyspace,
          local: new MemoryDedupStore({ retentionMs: webhooks.dedupRetentionMs, maxEntries: webhooks.dedupMaxEntries, now: options.now }),
          leaseMs: webhooks.dedupLeaseMs,
          retentionMs: webhooks.dedupRetentionMs,
          metrics,
          logger,
        })
      : null;
  const queue =
    webhooks?.delivery === 'queue'
      ? new RedisWebhookQueue({
          connection,
          keyspace,
          logger,
          metrics: createQueueMetrics(options.registry),
          appUrl: webhooks.appUrl,
          forwardTimeoutMs: webhooks.forwardTimeoutMs,
          visibilityMs: webhooks.dedupLeaseMs,
          horizonMs: webhooks.queueHorizonMs,
          deliveredRetentionMs: webhooks.dedupRetentionMs,
          now: options.now,
        })
      : null;
  connection.start();
  // Each waits for its subscription at most --redis-command-timeout-ms: a Redis that is away does not hold the start.
  await Promise.all([bus.start(), dedup?.start(), queue?.start()]);
  return {
    connection,
    keyspace,
    revocations: bus,
    dedup,
    queue,
    close: async (queueGraceMs = 0) => {
      await queue?.stop(queueGraceMs);
      await connection.close();
    },
  };
}
