import { collectDefaultMetrics, Registry } from './prom.js';

/** Prefix of every metric family the sidecar owns. */
export const METRIC_PREFIX = 'consent_sidecar_';

/**
 * prom-client's default gauges that carry a `_total` suffix, which Prometheus reserves for
 * counters (`promtool check metrics` rejects them). Their information (handles, requests) is of
 * little use for a sidecar; the process, heap, GC and event-loop defaults stay.
 */
const MISNAMED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/**
 * A fresh registry. Capabilities declare their metrics against the registry they are given, so
 * each test gets its own and never sees another's counts.
 */
export function createRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics(registry);
    for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
  }
  return registry;
}
