import type { Registry } from 'prom-client';
import type { SidecarConfig } from '../config/index.js';
import type { RevocationHook } from '../lib/revocation-hook.js';
import { VERSION } from '../lib/version.js';
import type { Logger } from '../observability/index.js';
import { AllowCache } from './allow-cache.js';
import { CircuitBreaker } from './breaker.js';
import { CacheTrust } from './cache-trust.js';
import { DecisionMetrics } from './metrics.js';
import { Passthrough } from './passthrough.js';
import { PreEvaluationLog } from './pre-evaluation-log.js';
import { cacheRevocationHook } from './revocation-seam.js';
import { DecisionService } from './service.js';
import { UpstreamClient } from './upstream-client.js';

/** How often dead cache entries are swept out (ms, up to SWEEP_BUDGET each time); serving never depends on it. */
const CACHE_SWEEP_INTERVAL_MS = 100;

/** The decision capability, built: what the listeners and the shutdown need of it. */
export interface Decisions {
  readonly cache: AllowCache;
  readonly metrics: DecisionMetrics;
  readonly service: DecisionService;
  readonly passthrough: Passthrough;
  /** This replica's cache as a revocation seam: purges here only, counted as `webhook`. */
  readonly local: RevocationHook;
  /** Whether the cache may serve now (the fleet's invalidation sets it; always true without Redis). */
  readonly trust: CacheTrust;
  /** Stops the sweeper and cuts what is in flight to the service. */
  close(): Promise<void>;
}

/**
 * The decision wing's one builder (as `buildWebhooks` is the webhook wing's): the ALLOW cache
 * (swept from now on), its metrics, the breaker, the upstream client, the decision service and the
 * passthrough, from the config; it closes what it built.
 */
export function buildDecisions(config: Pick<SidecarConfig, 'cache' | 'upstream' | 'decisionApi'>, deps: { cache?: AllowCache; registry: Registry; logger: Logger; now: () => number }): Decisions {
  const { registry, logger, now } = deps;
  const cache = deps.cache ?? new AllowCache(config.cache, now);
  // A bounded sweep (the dead only, soonest first) before reporting, so the gauge does not count
  // entries that can no longer be served; never a walk over the live ones.
  const metrics = new DecisionMetrics(registry, () => (cache.sweep(), cache.size));
  const breaker = new CircuitBreaker({
    ...config.upstream.breaker,
    now,
    onStateChange: (state) => {
      metrics.setBreakerState(state);
      logger[state === 'open' ? 'warn' : 'info']({ event: 'circuit_breaker', state }, `circuit breaker ${state}`);
    },
  });
  const trust = new CacheTrust();
  const client = new UpstreamClient(config.upstream, { connections: config.upstream.connections, userAgent: `consent-sidecar/${VERSION}` });
  const service = new DecisionService({
    transport: client,
    cache,
    cacheConfig: config.cache,
    breaker,
    metrics,
    preEvaluationLog: new PreEvaluationLog(logger, config.decisionApi.preEvaluationLogIntervalMs, now),
    maxInFlight: config.upstream.maxInFlight,
    trust,
    now,
  });
  const passthrough = new Passthrough(config.upstream, config.upstream.passthroughTimeoutMs);
  const sweeper = setInterval(() => cache.sweep(), CACHE_SWEEP_INTERVAL_MS);
  sweeper.unref();
  return {
    cache,
    metrics,
    service,
    passthrough,
    local: cacheRevocationHook(cache, metrics.purged, 'webhook'),
    trust,
    async close() {
      clearInterval(sweeper);
      // Destroy, not close: close() waits for calls in flight, and a hanging passthrough or check
      // would keep the process alive past --shutdown-timeout-ms (measured: 9.5 s with 5,000 ms).
      await Promise.allSettled([client.destroy(), passthrough.destroy()]);
    },
  };
}
