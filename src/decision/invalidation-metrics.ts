import { Counter, Gauge, type Registry } from '../observability/prom.js';
import { METRIC_PREFIX } from '../observability/index.js';

/**
 * Why a replica purged its whole cache instead of catching up (`cause` label); `unauthenticated`:
 * an entry whose MAC did not verify (none, or not under the current webhook secrets).
 */
export type CatchUpPurgeCause = 'reset' | 'trimmed' | 'deleted' | 'rewound' | 'unreadable' | 'unauthenticated';
export const CATCH_UP_PURGE_CAUSES: readonly CatchUpPurgeCause[] = ['reset', 'trimmed', 'deleted', 'rewound', 'unreadable', 'unauthenticated'];

/** A read of the log that gave no page: the store answered with an error, or did not answer (`kind` label). */
export type LogReadFailure = 'refused' | 'no_answer';

export interface InvalidationMetrics {
  readonly published: Counter<'outcome'>;
  readonly received: Counter<'scope'>;
  /** Whole-cache purges because a replica could not tell what it missed, by cause. */
  readonly purges: Counter<'cause'>;
  /** Reads of the log that failed, by kind. */
  readonly readFailures: Counter<'kind'>;
  /** 1 while this replica serves nothing from its cache: it could not read the log for too long while the store answered. */
  readonly bypassed: Gauge;
}

/** Declares the fan-out's metrics against an injected registry. */
export function createInvalidationMetrics(registry: Registry): InvalidationMetrics {
  const registers = [registry];
  const purges = new Counter({
    name: `${METRIC_PREFIX}cache_reconnect_purges_total`,
    help: 'Whole-cache purges because this replica could not tell which revocations it missed, by cause (reset, trimmed, deleted, rewound, unreadable, unauthenticated).',
    labelNames: ['cause'],
    registers,
  });
  for (const cause of CATCH_UP_PURGE_CAUSES) purges.labels(cause);
  const readFailures = new Counter({
    name: `${METRIC_PREFIX}cache_invalidation_read_failures_total`,
    help: 'Reads of the shared invalidation log that failed, by kind (refused: Redis answered an error; no_answer: it did not answer in time, or not at all).',
    labelNames: ['kind'],
    registers,
  });
  for (const kind of ['refused', 'no_answer'] satisfies LogReadFailure[]) readFailures.labels(kind);
  return {
    published: new Counter({
      name: `${METRIC_PREFIX}cache_invalidations_published_total`,
      help: 'Revocations shared with the other replicas, by outcome (ok, failed).',
      labelNames: ['outcome'],
      registers,
    }),
    received: new Counter({
      name: `${METRIC_PREFIX}cache_invalidations_received_total`,
      help: 'Revocations received from other replicas, by scope (user, all).',
      labelNames: ['scope'],
      registers,
    }),
    purges,
    readFailures,
    bypassed: new Gauge({
      name: `${METRIC_PREFIX}cache_bypassed`,
      help: '1 while this replica serves nothing from its ALLOW cache (every check goes to the service): it could not read the invalidation log for longer than --fleet-invalidation-max-silence-ms while Redis answered other commands.',
      registers,
    }),
  };
}
