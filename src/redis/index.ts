export { RedisConnection, REDIS_HEALTH_INTERVAL_MS, REDIS_RECONNECT_MAX_MS, REDIS_RECONNECT_MIN_MS, type RedisConnectionOptions } from './connection.js';
export { DEDUP_KEY_OWNER, DEDUP_SETTLED_CHANNEL, RedisDedupStore, type RedisDedupStoreOptions } from './dedup-store.js';
export { RedisError, type RedisCallOutcome, type RedisErrorCode } from './errors.js';
export { INVALIDATE_CHANNEL, InvalidationBus, type InvalidationBusOptions } from './invalidation-bus.js';
export { RedisKeyspace } from './keyspace.js';
export { createRedisMetrics, type RedisMetrics } from './metrics.js';
export { RedisScript } from './script.js';
export { startSharedState, type SharedState, type SharedStateOptions } from './shared-state.js';
export { REDEC_KEY_OWNER, RedisRedecState, type RedisRedecStateOptions } from './redec-state.js';
