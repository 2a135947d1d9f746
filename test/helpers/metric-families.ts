import { createSecretMetrics } from '../../src/config/index.js';
import { createInvalidationMetrics, DecisionMetrics } from '../../src/decision/index.js';
import { createListenerMetrics } from '../../src/edge/listener-gate.js';
import { createRegistry, registerBuildInfo } from '../../src/observability/index.js';
import { createRedecMetrics } from '../../src/redec/index.js';
import { createRedisMetrics } from '../../src/redis/index.js';
import { createUpstreamKeyMetrics } from '../../src/assembly/upstream-key-probe.js';
import { createQueueMetrics, createSharedDedupMetrics, createWebhookMetrics } from '../../src/webhooks/index.js';

/**
 * Every metric family the sidecar registers, read off a registry the way `serve` builds it, never
 * from the source text: a declaration written through a helper (`counter(registry, 'name', …)`)
 * is as declared as one spelled `${METRIC_PREFIX}name`.
 */
export async function declaredMetricFamilies(): Promise<Set<string>> {
  const registry = createRegistry({ defaultMetrics: false });
  new DecisionMetrics(registry, () => 0);
  createWebhookMetrics(registry);
  createSharedDedupMetrics(registry);
  createInvalidationMetrics(registry);
  createRedisMetrics(registry);
  createQueueMetrics(registry);
  createSecretMetrics(registry);
  createRedecMetrics(registry);
  createUpstreamKeyMetrics(registry);
  createListenerMetrics(registry);
  registerBuildInfo(registry, 'x');
  return new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
}
