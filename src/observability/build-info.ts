import { Gauge, type Registry } from './prom.js';
import { METRIC_PREFIX } from './registry.js';

/** `consent_sidecar_build_info{version} 1`: which build runs where (join it on instance). */
export function registerBuildInfo(registry: Registry, version: string): void {
  new Gauge({
    name: `${METRIC_PREFIX}build_info`,
    help: 'Always 1; the version label says which build of consent-sidecar runs.',
    labelNames: ['version'],
    registers: [registry],
  }).set({ version }, 1);
}
