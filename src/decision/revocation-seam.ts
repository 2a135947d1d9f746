import type { Counter } from 'prom-client';
import type { RevocationHook } from '../lib/revocation-hook.js';
import type { AllowCache } from './allow-cache.js';

/**
 * The ALLOW cache as a revocation seam: every purge through it is counted in
 * `consent_sidecar_cache_purged_entries_total` under `trigger` (a revocation learned from a
 * webhook, here or on another replica, is `webhook`).
 */
export function cacheRevocationHook(cache: Pick<AllowCache, 'revokeUser' | 'revokeAll'>, purged: Counter<'trigger'>, trigger: 'webhook' | 'manual'): RevocationHook {
  return {
    revokeUser: (userReference) => {
      const n = cache.revokeUser(userReference);
      purged.labels(trigger).inc(n);
      return n;
    },
    revokeAll: () => {
      const n = cache.revokeAll();
      purged.labels(trigger).inc(n);
      return n;
    },
  };
}
