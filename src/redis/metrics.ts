import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { METRIC_PREFIX } from '../observability/index.js';

/** Every metric of the Redis room, declared against an injected registry (a fresh one per test). */
export interface RedisMetrics {
  /** `consent_sidecar_redis_up` (contract): 1 while the last health PING was answered in time. */
  readonly up: Gauge;
  readonly callDuration: Histogram<'op' | 'outcome'>;
  /** Webhook claims decided by this replica alone because Redis did not answer. */
  readonly dedupFallbacks: Counter<'op'>;
  /** A holder settled a claim whose lease had lapsed (the lease is too short for the app). */
  readonly dedupLeaseLapses: Counter;
  readonly invalidationsPublished: Counter<'outcome'>;
  readonly invalidationsReceived: Counter<'scope'>;
  /** Whole-cache purges after a loss of Redis (a revocation may have been missed). */
  readonly reconnectPurges: Counter;
}

/** Declares the families; call once per registry (the composition root does). */
export function createRedisMetrics(registry: Registry): RedisMetrics {
  const registers = [registry];
  return {
    up: new Gauge({ name: `${METRIC_PREFIX}redis_up`, help: '1 while Redis answers the health PING in time, else 0.', registers }),
    callDuration: new Histogram({
      name: `${METRIC_PREFIX}redis_call_duration_seconds`,
      help: 'Redis calls by operation and outcome (ok, unavailable, timeout, reply, closed).',
      labelNames: ['op', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
    dedupFallbacks: new Counter({
      name: `${METRIC_PREFIX}webhook_dedup_fallbacks_total`,
      help: 'Webhook dedup steps decided by this replica alone because Redis did not answer, by op (claim, accept, release).',
      labelNames: ['op'],
      registers,
    }),
    dedupLeaseLapses: new Counter({
      name: `${METRIC_PREFIX}webhook_dedup_lease_lapses_total`,
      help: 'Claims settled after their lease had lapsed (raise --webhook-dedup-lease-ms).',
      registers,
    }),
    invalidationsPublished: new Counter({
      name: `${METRIC_PREFIX}cache_invalidations_published_total`,
      help: 'Revocations shared with the other replicas, by outcome (ok, failed).',
      labelNames: ['outcome'],
      registers,
    }),
    invalidationsReceived: new Counter({
      name: `${METRIC_PREFIX}cache_invalidations_received_total`,
      help: 'Revocations received from other replicas, by scope (user, all).',
      labelNames: ['scope'],
      registers,
    }),
    reconnectPurges: new Counter({
      name: `${METRIC_PREFIX}cache_reconnect_purges_total`,
      help: 'Whole-cache purges after Redis came back (revocations may have been missed meanwhile).',
      registers,
    }),
  };
}

// --- durable queue (issue 10) ---
/** What a worker did with an event it took: `outcome` label of the forwards counter. */
export type QueueForwardOutcome = 'delivered' | 'retry_scheduled' | 'dead_lettered' | 'already_delivered';

/** The queue's metrics (contract names for the three gauges), against an injected registry. */
export interface QueueMetrics {
  /** `consent_sidecar_webhook_queue_depth`: events waiting or being forwarded (all replicas). */
  readonly depth: Gauge;
  /** `consent_sidecar_webhook_queue_oldest_age_seconds`: age of the oldest event not yet delivered. */
  readonly oldestAge: Gauge;
  /** `consent_sidecar_webhook_dead_letters`: events parked past the horizon. */
  readonly deadLetters: Gauge;
  /** Forwards by this replica's workers, by outcome. */
  readonly forwards: Counter<'outcome'>;
}

export function createQueueMetrics(registry: Registry): QueueMetrics {
  const registers = [registry];
  return {
    depth: new Gauge({ name: `${METRIC_PREFIX}webhook_queue_depth`, help: 'Queue mode: events waiting or being forwarded (read from Redis, all replicas).', registers }),
    oldestAge: new Gauge({
      name: `${METRIC_PREFIX}webhook_queue_oldest_age_seconds`,
      help: 'Queue mode: age of the oldest event accepted and not yet delivered nor dead-lettered (0 when none).',
      registers,
    }),
    deadLetters: new Gauge({ name: `${METRIC_PREFIX}webhook_dead_letters`, help: 'Queue mode: events retried past --webhook-queue-horizon-ms, parked for replay.', registers }),
    forwards: new Counter({
      name: `${METRIC_PREFIX}webhook_queue_forwards_total`,
      help: 'Queue mode: events taken by this replica, by outcome (delivered, retry_scheduled, dead_lettered, already_delivered).',
      labelNames: ['outcome'],
      registers,
    }),
  };
}
// --- end durable queue ---
