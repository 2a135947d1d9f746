import type { Registry } from 'prom-client';
import type { SidecarConfig } from '../config/index.js';
import { createInvalidationMetrics, FleetInvalidation, INVALIDATION_QUIET_POLL_INTERVAL_MS, type CacheTrust, type EntryMacs } from '../decision/index.js';
import { localPublisher, type RevocationHook, type RevocationPublisher } from '../lib/revocation-hook.js';
import type { Logger } from '../observability/index.js';
import type { SharedState } from '../redis/index.js';
import { MarkerMacs } from '../webhooks/index.js';

/** What a replica shares with the others, as the wings take it. */
export interface Fleet {
  /** The Redis room, or null when this replica shares nothing (no Redis configured). */
  readonly shared: SharedState | null;
  /** Where revocations go: this replica's cache, and with Redis every replica's. */
  readonly revocations: RevocationPublisher;
  /** Stops the fleet's invalidation and closes Redis (last: the wings may still write to it). */
  close(): Promise<void>;
}

/**
 * Part of the composition root: with Redis configured, builds the Redis room and the fleet's
 * invalidation of cached ALLOWs, and starts it; the start waits at most one Redis deadline, so a
 * Redis that is away never holds up the sidecar. Without Redis, revocations purge this replica alone.
 * The webhook wing takes its stores from `shared` (`buildWebhooks`).
 */
export async function startFleet(config: SidecarConfig, deps: { local: RevocationHook; trust?: CacheTrust; registry: Registry; logger: Logger; now: () => number }): Promise<Fleet> {
  const { registry, logger, now } = deps;
  if (!config.redis) return { shared: null, revocations: localPublisher(deps.local), close: () => Promise.resolve() };
  // The Redis client is loaded only when a Redis topology is configured: a pod pays for what it runs.
  const { startSharedState } = await import('../redis/index.js');
  // Every read of the invalidation log writes the health probe's key: the connection checks on its
  // own only when no read passed for two quiet polls (or when something failed).
  const shared = startSharedState({
    redis: config.redis,
    ...(config.webhooks ? { queueMaxEvents: config.webhooks.queueMaxEvents } : {}),
    registry,
    logger,
    quietHealthIntervalMs: 2 * INVALIDATION_QUIET_POLL_INTERVAL_MS,
  });
  const invalidation = new FleetInvalidation({
    log: shared.invalidations,
    local: deps.local,
    // Keyed from the webhook secrets, re-read as they rotate; none without the webhook ingress.
    macs: invalidationMacs(() => config.webhooks?.secrets.current() ?? []),
    metrics: createInvalidationMetrics(registry),
    logger,
    maxSilenceMs: config.redis.invalidationMaxSilenceMs,
    ...(deps.trust ? { trust: deps.trust } : {}),
    now,
  });
  // The invalidation log's first read is this replica's starting point (nothing cached yet, nothing
  // to purge): give a reachable Redis one deadline to connect before it, so the read is not wasted.
  await shared.connection.connected(config.redis.commandTimeoutMs);
  await invalidation.start();
  return {
    shared,
    revocations: invalidation,
    close: async () => {
      invalidation.close();
      await shared.close();
    },
  };
}

/**
 * The invalidation log's MACs, keyed from the webhook secrets as the other Redis markers are
 * (src/webhooks/markers.ts, kind `invalidation`). A replica given no webhook secret seals nothing
 * and verifies nothing: its entries, and every entry it reads, are purges of everything.
 */
export function invalidationMacs(secrets: () => readonly string[]): EntryMacs {
  const macs = new MarkerMacs(secrets);
  return {
    sign: (subject) => (secrets().length > 0 ? macs.sign('invalidation', subject) : null),
    verify: (subject, mac) => macs.verify('invalidation', subject, mac),
  };
}
