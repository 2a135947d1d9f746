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

/**
 * What a nudge came to (`outcome` label): `applied` (another replica's revocation, the next entry:
 * applied with no read), `own` (this replica's own entry, the next one: nothing to do), `stale`
 * (at or before the position: already read past), `gap` (something before it was missed: the log
 * is read), `unverified` (no entry, or one whose MAC does not verify: the log is read).
 */
export type NudgeOutcome = 'applied' | 'own' | 'stale' | 'gap' | 'unverified' | 'bare';
export const NUDGE_OUTCOMES: readonly NudgeOutcome[] = ['applied', 'own', 'stale', 'gap', 'unverified', 'bare'];

export interface InvalidationMetrics {
  readonly published: Counter<'outcome'>;
  readonly received: Counter<'scope'>;
  /** Whole-cache purges because a replica could not tell what it missed, by cause. */
  readonly purges: Counter<'cause'>;
  /** Reads of the log that failed, by kind. */
  readonly readFailures: Counter<'kind'>;
  /** 1 while this replica serves nothing from its cache: it could not read the log for too long while the store answered. */
  readonly bypassed: Gauge;
  /** Nudges heard, by what they came to. */
  readonly nudges: Counter<'outcome'>;
  /** 1 while this replica's subscription is proven up and it has missed nothing: it reads the log only every quiet poll. */
  readonly subscribed: Gauge;
  /** Keep-alive echoes of a proven subscription that did not come back in time (or could not be sent): the log was read at once. */
  readonly keepAliveMisses: Counter;
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
  const nudges = new Counter({
    name: `${METRIC_PREFIX}cache_invalidation_nudges_total`,
    help: 'Nudges (revocations announced on the pub/sub channel) heard, by outcome (applied: applied with no read; own: this replica\'s own; stale: already read past; gap: something before it missed, the log is read; unverified: no entry or a MAC that does not verify, the log is read).',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of NUDGE_OUTCOMES) nudges.labels(outcome);
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
    nudges,
    subscribed: new Gauge({
      name: `${METRIC_PREFIX}cache_invalidation_subscribed`,
      help: '1 while this replica\'s subscription to revocations is proven up (a read of the invalidation log was echoed back on it) and it has missed none: it then reads the log every 30 s instead of every second.',
      registers,
    }),
    keepAliveMisses: new Counter({
      name: `${METRIC_PREFIX}cache_invalidation_keepalive_misses_total`,
      help: 'Keep-alive echoes of a proven subscription that did not come back in time or could not be sent (its socket may have died silently): the invalidation log was read at once.',
      registers,
    }),
  };
}
