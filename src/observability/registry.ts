import { collectDefaultMetrics, Registry } from 'prom-client';

/** Prefix of every metric family the sidecar owns. */
export const METRIC_PREFIX = 'consent_sidecar_';

/**
 * A fresh registry. Capabilities declare their metrics against the registry they are given, so
 * each test gets its own and never sees another's counts.
 */
export function createRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}
