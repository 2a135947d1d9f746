import type { IncomingMessage } from 'node:http';
import type { Registry } from 'prom-client';
import type { WebhookConfig } from '../config/index.js';
import type { RevocationPublisher } from '../lib/revocation-hook.js';
import type { WebhookTracer } from '../lib/trace.js';
import type { Logger } from '../observability/index.js';
import { AppClient } from './app-client.js';
import { AppRoutes } from './app-routes.js';
import { ForwardSigner } from './forward-signature.js';
import type { ClaimStore } from './claim-store.js';
import type { DeliveryMode } from './delivery-mode.js';
import type { RouteRejection, WebhookAnswer } from './answers.js';
import { WebhookIngress } from './ingress.js';
import { MarkerMacs } from './markers.js';
import { MemoryDedupStore } from './memory-dedup-store.js';
import { createQueueMetrics, createSharedDedupMetrics, createWebhookMetrics } from './metrics.js';
import { PassthroughMode } from './passthrough-mode.js';
import { QueueMode } from './queue-mode.js';
import type { QueueStore } from './queue-store.js';
import { QueueWorker } from './queue-worker.js';
import { SequenceTracker } from './sequence-tracker.js';
import { SharedDedup } from './shared-dedup.js';

/** What the webhook wing is built with: the process's tools and, with Redis, the stores it shares. */
export interface WebhookPorts {
  readonly logger: Logger;
  readonly registry: Registry;
  /** Epoch ms. */
  readonly now: () => number;
  /** Where revocations learned from events go: this replica's cache, and the other replicas'. */
  readonly revocations: RevocationPublisher;
  /** Spans of each delivery and of each queued forward; null when off. */
  readonly tracer: (WebhookTracer & { run<T>(name: string, work: () => Promise<T>, outcome?: (r: T) => { outcome: string; failed: boolean }): Promise<T> }) | null;
  /** With several replicas (Redis): the claim store of shared dedup and the queue's store. */
  readonly shared: { readonly claims: ClaimStore; readonly queue: QueueStore } | null;
  /** The app signing secrets' current list (`--app-signing-secret[-file]`); without it, forwards are unsigned (warned once). */
  readonly appSigningSecrets?: (() => readonly string[]) | null;
}

/** The webhook wing, built: what the listener hands requests to, and what the REDEC hand-over posts with. */
export interface Webhooks {
  /** `config.path`, the one route of the listener. */
  readonly path: string;
  /** One `POST {path}`: always answered (see {@link WebhookAnswer}). */
  receive(req: IncomingMessage): Promise<WebhookAnswer>;
  /** A request the listener's table refused (another path, another method): counted and logged. */
  refuse(reason: Extract<RouteRejection, 'not_found' | 'method_not_allowed'>, remoteAddress: string | undefined): WebhookAnswer;
  /** The wing's one client of the app, shared with the REDEC hand-over. */
  readonly app: AppClient;
  /** The routes by event type (`--app-webhook-route`, `--app-webhook-url`), shared with the REDEC hand-over. */
  readonly routes: AppRoutes;
  readonly mode: DeliveryMode['name'];
  /** Starts the mode's background work (shared dedup's listeners, the queue's workers); never waits for a store. */
  start(): Promise<void>;
  /** Stops the mode (forwards in flight get up to `graceMs`), then closes the app client. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The webhook wing's one builder (as `buildDecisions` is the decision wing's): it picks the
 * delivery mode (passthrough = dedup + forward, shared dedup with Redis; queue = enqueue, with its
 * workers), owns the one app client every forward goes through, and closes what it built.
 *
 * @throws RangeError when queue mode has no queue store (the config refuses it first, naming `--redis-url`).
 */
export function buildWebhooks(config: WebhookConfig, ports: WebhookPorts): Webhooks {
  const { logger, registry, now } = ports;
  const metrics = createWebhookMetrics(registry);
  const routes = new AppRoutes(config.routes, config.appUrl, config.ignore);
  for (const label of routes.labels) for (const outcome of ['accepted', 'failed']) metrics.routeForwards.labels(label, outcome);
  const signer = ports.appSigningSecrets ? new ForwardSigner(ports.appSigningSecrets, now) : null;
  if (!signer) {
    logger.warn(
      { event: 'forwards_unsigned', flag: '--app-signing-secret-file' },
      "forwarded events are unauthenticated: the app cannot tell the sidecar's forwards from anything else that reaches its webhook URL; set --app-signing-secret-file and verify them (docs/webhooks.md, Signed forwards)",
    );
  }
  const app = new AppClient({ timeoutMs: config.forwardTimeoutMs, signer });
  const sequences = new SequenceTracker(metrics);
  let mode: DeliveryMode;
  if (config.delivery === 'queue') {
    if (!ports.shared) throw new RangeError('webhook delivery mode queue needs a queue (--redis-url)');
    const worker = new QueueWorker({
      store: ports.shared.queue,
      logger,
      metrics: createQueueMetrics(registry),
      secrets: () => config.secrets.current(),
      app,
      routes,
      routeForwards: metrics.routeForwards,
      forwardTimeoutMs: config.forwardTimeoutMs,
      visibilityMs: config.dedupLeaseMs,
      horizonMs: config.queueHorizonMs,
      toleranceS: config.toleranceS,
      maxBodyBytes: config.maxBodyBytes,
      deliveredRetentionMs: config.dedupRetentionMs,
      deliveredMaxEntries: config.dedupMaxEntries,
      now,
      ...(ports.tracer ? { tracing: ports.tracer } : {}),
    });
    mode = new QueueMode({ queue: worker, sequences });
  } else {
    const memory = new MemoryDedupStore({ retentionMs: config.dedupRetentionMs, maxEntries: config.dedupMaxEntries, now });
    const shared = ports.shared
      ? new SharedDedup({
          store: ports.shared.claims,
          local: memory,
          leaseMs: config.dedupLeaseMs,
          forwardTimeoutMs: config.forwardTimeoutMs,
          retentionMs: config.dedupRetentionMs,
          metrics: createSharedDedupMetrics(registry),
          macs: new MarkerMacs(() => config.secrets.current()),
          logger,
          now,
        })
      : null;
    mode = new PassthroughMode({ dedup: shared ?? memory, ...(shared ? { startDedup: () => shared.start() } : {}), app, sequences, metrics });
  }
  const ingress = new WebhookIngress({ config, logger, metrics, revocations: ports.revocations, mode, routes, tracer: ports.tracer, now });

  let closing: Promise<void> | undefined;
  return {
    path: config.path,
    receive: (req) => ingress.receive(req),
    refuse: (reason, remote) => ingress.refuse(reason, remote, 'discard'),
    app,
    routes,
    mode: mode.name,
    start: () => mode.start(),
    close(graceMs = 0) {
      closing ??= (async () => {
        ingress.close();
        await mode.close(graceMs).catch((err: unknown) => logger.warn({ event: 'webhook_close_failed', err }, 'webhook delivery mode did not close cleanly'));
        // The drain had its time: a forward still hanging on the app must not outlive it.
        await app.destroy();
      })();
      return closing;
    },
  };
}
