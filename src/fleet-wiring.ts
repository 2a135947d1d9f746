import type { Registry } from 'prom-client';
import type { SidecarConfig } from './config/index.js';
import { createInvalidationMetrics, FleetInvalidation } from './decision/index.js';
import { localPublisher, type RevocationHook, type RevocationPublisher } from './lib/revocation-hook.js';
import type { Logger } from './observability/index.js';
import type { Tracing } from './observability/tracing.js';
import { startSharedState, type SharedState } from './redis/index.js';
import { createQueueMetrics, createSharedDedupMetrics, MemoryDedupStore, QueueWorker, SharedDedup, type DedupStore } from './webhooks/index.js';

/** What a replica shares with the others, as the listeners take it. */
export interface Fleet {
  /** The Redis room, or null when this replica shares nothing (no Redis configured). */
  readonly shared: SharedState | null;
  /** Where revocations go: this replica's cache, and with Redis every replica's. */
  readonly revocations: RevocationPublisher;
  /** Shared webhook dedup (passthrough with Redis), else undefined (the listener's own memory store). */
  readonly dedup: DedupStore | undefined;
  /** Queue mode's queue and workers, else undefined. */
  readonly queue: QueueWorker | undefined;
  /** Stops the workers (forwards in flight get up to `queueGraceMs`), then closes Redis. */
  close(queueGraceMs?: number): Promise<void>;
}

/**
 * Part of the composition root: with Redis configured, builds the Redis room and plugs its stores
 * into the capabilities' policies (the fleet's invalidation, shared dedup, the queue's workers) and
 * starts them; each start waits at most one Redis deadline, so a Redis that is away never holds up
 * the sidecar. Without Redis, revocations purge this replica alone.
 */
export async function startFleet(
  config: SidecarConfig,
  deps: { local: RevocationHook; registry: Registry; logger: Logger; now: () => number; tracing?: Tracing },
): Promise<Fleet> {
  const { registry, logger, now, tracing } = deps;
  if (!config.redis) {
    return { shared: null, revocations: localPublisher(deps.local), dedup: undefined, queue: undefined, close: () => Promise.resolve() };
  }
  const webhooks = config.webhooks;
  const shared = startSharedState({ redis: config.redis, ...(webhooks ? { queueMaxEvents: webhooks.queueMaxEvents } : {}), registry, logger });
  const invalidation = new FleetInvalidation({ log: shared.invalidations, local: deps.local, metrics: createInvalidationMetrics(registry), logger, now });
  // Queue mode deduplicates inside its enqueue script: no claims then.
  const dedup =
    webhooks && webhooks.delivery !== 'queue'
      ? new SharedDedup({
          store: shared.claims,
          local: new MemoryDedupStore({ retentionMs: webhooks.dedupRetentionMs, maxEntries: webhooks.dedupMaxEntries, now }),
          leaseMs: webhooks.dedupLeaseMs,
          forwardTimeoutMs: webhooks.forwardTimeoutMs,
          retentionMs: webhooks.dedupRetentionMs,
          metrics: createSharedDedupMetrics(registry),
          logger,
          now,
        })
      : undefined;
  const queue =
    webhooks?.delivery === 'queue'
      ? new QueueWorker({
          store: shared.queue,
          logger,
          metrics: createQueueMetrics(registry),
          secrets: () => webhooks.secrets.current(),
          appUrl: webhooks.appUrl,
          forwardTimeoutMs: webhooks.forwardTimeoutMs,
          visibilityMs: webhooks.dedupLeaseMs,
          horizonMs: webhooks.queueHorizonMs,
          deliveredRetentionMs: webhooks.dedupRetentionMs,
          now,
          tracing,
        })
      : undefined;
  // The invalidation log's first read is this replica's starting point (nothing cached yet, nothing
  // to purge): give a reachable Redis one deadline to connect before it, so the read is not wasted.
  await shared.connection.connected(config.redis.commandTimeoutMs);
  await Promise.all([invalidation.start(), dedup?.start(), queue?.start()]);
  return {
    shared,
    revocations: invalidation,
    dedup,
    queue,
    close: async (queueGraceMs = 0) => {
      invalidation.close();
      await queue?.stop(queueGraceMs);
      await shared.close();
    },
  };
}
