import type { Registry } from 'prom-client';
import type { RedisConfig } from '../config/index.js';
import type { Logger } from '../observability/index.js';
import { RedisClaimStore } from './claim-store.js';
import { RedisConnection } from './connection.js';
import { RedisInvalidationLog } from './invalidation-log.js';
import { RedisKeyspace } from './keyspace.js';
import { createRedisMetrics } from './metrics.js';
import { redisTargetOf } from './target.js';
import { RedisQueueStore } from './queue-store.js';
import { RedisRedecState, type RedisRedecStateOptions } from './redec-state.js';

export interface SharedStateOptions {
  readonly redis: RedisConfig;
  /** `--webhook-queue-max-events`, when queue mode is on. */
  readonly queueMaxEvents?: number;
  readonly registry: Registry;
  readonly logger: Logger;
  /** See `RedisConnectionOptions.quietHealthIntervalMs`: given when a log poll checks Redis with every read. */
  readonly quietHealthIntervalMs?: number;
}

/**
 * The Redis room as the composition root plugs it in: one connection and the thin stores that
 * implement the capabilities' interfaces (the claim store for shared dedup, the queue's store, the
 * invalidation log). Which of them a sidecar uses, and how, is the capabilities' business.
 */
export interface SharedState {
  readonly connection: RedisConnection;
  readonly keyspace: RedisKeyspace;
  readonly claims: RedisClaimStore;
  readonly queue: RedisQueueStore;
  readonly invalidations: RedisInvalidationLog;
  /** The REDEC reconciler's bookkeeping (ledger and lease) on this connection. */
  redec(o: Omit<RedisRedecStateOptions, 'connection' | 'keyspace'>): RedisRedecState;
  close(): Promise<void>;
}

/**
 * Builds the Redis room and starts its connection in the background: nothing waits for Redis,
 * and readiness never depends on it.
 */
export function startSharedState(options: SharedStateOptions): SharedState {
  const { redis, logger } = options;
  const keyspace = new RedisKeyspace(redis.keyPrefix);
  const connection = new RedisConnection({
    target: () => redisTargetOf(redis),
    keyspace,
    commandTimeoutMs: redis.commandTimeoutMs,
    logger,
    metrics: createRedisMetrics(options.registry),
    waitReplicas: redis.waitReplicas,
    ...(options.quietHealthIntervalMs !== undefined ? { quietHealthIntervalMs: options.quietHealthIntervalMs } : {}),
  });
  const waitTimeoutMs = Math.max(1, redis.commandTimeoutMs - 100);
  const shared: SharedState = {
    connection,
    keyspace,
    claims: new RedisClaimStore(connection, keyspace, { waitReplicas: redis.waitReplicas, waitTimeoutMs }),
    queue: new RedisQueueStore(connection, keyspace, {
      ...(options.queueMaxEvents !== undefined ? { maxEvents: options.queueMaxEvents } : {}),
      waitReplicas: redis.waitReplicas,
      waitTimeoutMs,
      logger,
    }),
    invalidations: new RedisInvalidationLog(connection, keyspace, { waitReplicas: redis.waitReplicas, waitTimeoutMs }),
    redec: (o) => new RedisRedecState({ ...o, connection, keyspace }),
    close: () => connection.close(),
  };
  connection.start();
  return shared;
}
