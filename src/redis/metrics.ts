import { Gauge, Histogram, type Registry } from '../observability/prom.js';
import { METRIC_PREFIX } from '../observability/index.js';

/** Every metric of the Redis room, declared against an injected registry (a fresh one per test). */
export interface RedisMetrics {
  /** `consent_sidecar_redis_up` (contract): 1 while the last health check passed. */
  readonly up: Gauge;
  readonly callDuration: Histogram<'op' | 'outcome'>;
}

/** Declares the families; call once per registry (the composition root does). */
export function createRedisMetrics(registry: Registry): RedisMetrics {
  const registers = [registry];
  return {
    up: new Gauge({ name: `${METRIC_PREFIX}redis_up`, help: '1 while Redis answers the commands the sidecar needs (a write under its hash tag, each second), else 0.', registers }),
    callDuration: new Histogram({
      name: `${METRIC_PREFIX}redis_call_duration_seconds`,
      help: 'Redis calls by operation and outcome (ok, unavailable, timeout, connection_lost, reply, closed).',
      labelNames: ['op', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
  };
}
