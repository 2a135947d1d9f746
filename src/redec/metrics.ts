import { Counter, Gauge, type Registry } from '../observability/prom.js';
import { METRIC_PREFIX } from '../observability/index.js';

/** `outcome` of `consent_sidecar_redec_handed_to_app_total` (CONTRACT.md). */
export const HANDED_OUTCOMES = ['accepted', 'failed'] as const;
export type HandedOutcome = (typeof HANDED_OUTCOMES)[number];

/**
 * `outcome` of `consent_sidecar_redec_reconcile_runs_total`: `ok`; `skipped` (another replica holds
 * the lease or ran within the interval); or why the run failed: the listing (`network`, `timeout`,
 * `http_status`, `malformed_page`, `cursor_loop`, `too_large`: past `--redec-max-page-bytes`,
 * `--redec-max-records` or `--redec-max-listing-bytes`), Redis (`redis`), the lease lapsed under the
 * run (`lease_lost`), anything else (`error`).
 */
export const RUN_OUTCOMES = [
  'ok',
  'skipped',
  'network',
  'timeout',
  'http_status',
  'malformed_page',
  'cursor_loop',
  'too_large',
  'redis',
  'lease_lost',
  'error',
] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

/** Every metric of the reconciler, declared against an injected registry. */
export interface RedecMetrics {
  /** `consent_sidecar_redec_pending_obligations` (contract): obligations in the last complete listing. */
  readonly pending: Gauge;
  /** `consent_sidecar_redec_oldest_pending_age_seconds` (contract): age of the oldest, since first seen. */
  readonly oldestAge: Gauge;
  readonly handed: Counter<'outcome'>;
  readonly runs: Counter<'outcome'>;
}

/**
 * Declares the families. `oldestFirstSeenAt()` gives the first-seen time (epoch ms) of the oldest
 * pending obligation or null; the age is computed at scrape time, so it grows between runs.
 */
export function createRedecMetrics(registry: Registry, oldestFirstSeenAt: () => number | null = () => null, now: () => number = Date.now): RedecMetrics {
  const registers = [registry];
  const handed = new Counter({
    name: `${METRIC_PREFIX}redec_handed_to_app_total`,
    help: 'Pending REDEC obligations handed to the app by the reconciler, by outcome (accepted, failed).',
    labelNames: ['outcome'],
    registers,
  });
  const runs = new Counter({
    name: `${METRIC_PREFIX}redec_reconcile_runs_total`,
    help: 'Reconcile runs by outcome (ok, skipped, or why the run failed).',
    labelNames: ['outcome'],
    registers,
  });
  for (const o of HANDED_OUTCOMES) handed.labels(o).inc(0);
  for (const o of ['ok', 'skipped'] as const) runs.labels(o).inc(0);
  return {
    pending: new Gauge({ name: `${METRIC_PREFIX}redec_pending_obligations`, help: 'Pending REDEC notification obligations in the last complete listing.', registers }),
    oldestAge: new Gauge({
      name: `${METRIC_PREFIX}redec_oldest_pending_age_seconds`,
      help: 'Age of the oldest pending REDEC obligation since the sidecar first saw it (0 when none).',
      registers,
      collect() {
        const at = oldestFirstSeenAt();
        this.set(at === null ? 0 : Math.max(0, (now() - at) / 1000));
      },
    }),
    handed,
    runs,
  };
}
