import type { Registry } from 'prom-client';
import type { SidecarConfig } from '../config/index.js';
import type { Logger } from '../observability/index.js';
import type { Tracing } from '../observability/tracing.js';
import { createRedecMetrics, LocalLease, MemoryLedger, Reconciler, RECONCILED_EVENT_TYPE, type DeliverToApp } from '../redec/index.js';
import type { SharedState } from '../redis/index.js';
import type { Webhooks } from '../webhooks/index.js';

/** Slack over one page and one forward that a running lease allows before it lapses (ms). */
const LEASE_SLACK_MS = 10_000;

/**
 * Part of the composition root: builds the REDEC reconciler from the config, with its bookkeeping in
 * Redis when replicas share it (one replica at a time) and in memory otherwise (each replica alone),
 * and starts it. Returns null when `--redec-reconcile-interval-ms` is 0. Its events go through the
 * webhook wing's app client, to the route its event type takes (`--app-webhook-route`, else
 * `--app-webhook-url`); with no webhook wing, or no route for them, nothing is handed over.
 */
export function startReconciler(
  config: SidecarConfig,
  deps: { shared: SharedState | null; webhooks: Webhooks | null; registry: Registry; logger: Logger; now: () => number; tracing?: Tracing },
): { close(): Promise<void> } | null {
  const rc = config.redecReconcile;
  if (!rc) return null;
  const { shared, now, webhooks } = deps;
  const target = webhooks?.routes.pick(RECONCILED_EVENT_TYPE) ?? null;
  const deliver: DeliverToApp | null = webhooks && target ? (body, headers) => webhooks.app.forward(target.url, body, headers) : null;
  const state = shared
    ? shared.redec({
        leaseMs: config.upstream.timeoutMs + (config.webhooks?.forwardTimeoutMs ?? 0) + LEASE_SLACK_MS,
        // A little under the interval, so the replica that ran finds it free at its next tick.
        holdMs: Math.max(1, Math.floor(rc.intervalMs * 0.9)),
        now,
      })
    : null;
  let reconciler: Reconciler | undefined;
  const metrics = createRedecMetrics(deps.registry, () => reconciler?.oldestFirstSeenAt ?? null, now);
  reconciler = new Reconciler({
    upstream: config.upstream,
    config: rc,
    ledger: state ?? new MemoryLedger(),
    lease: state ?? new LocalLease(),
    deliver,
    metrics,
    logger: deps.logger.child({ component: 'redec-reconciler' }),
    now,
    ...(deps.tracing ? { tracing: deps.tracing } : {}),
  });
  reconciler.start();
  const r = reconciler;
  // A hand-over in flight ends when the webhook wing closes its app client, after this.
  return { close: () => r.close() };
}
