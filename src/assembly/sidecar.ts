import type { Server as HttpServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { serveSecrets, watchSecrets, type SidecarConfig } from '../config/index.js';
import { buildDecisions, DecisionLog, type AllowCache } from '../decision/index.js';
import { startFleet } from './fleet.js';
import { createAdminListener } from '../http/admin-listener.js';
import { DecisionBoundary } from '../http/decision-boundary.js';
import { createDecisionListener } from '../http/decision-listener.js';
import { drainListeners, listenAll, type NamedListener } from '../http/listen.js';
import { bound, createListenerMetrics, type ListenerName } from '../http/listener-bounds.js';
import { createWebhookListener } from '../http/webhook-listener.js';
import type { RevocationHook } from '../lib/revocation-hook.js';
import { createLogger, createRegistry, Readiness, registerBuildInfo, type Logger } from '../observability/index.js';
import { startReconciler } from './reconciler.js';
import { VERSION } from '../lib/version.js';
import { startTracing } from '../observability/tracing-sdk.js';
import { buildWebhooks, type Webhooks } from '../webhooks/index.js';
import { startUpstreamKeyProbe } from './upstream-key-probe.js';

export interface SidecarDeps {
  readonly logger?: Logger;
  /** A fresh registry per sidecar by default (tests read their own). */
  readonly registry?: Registry;
  readonly now?: () => number;
  /** The ALLOW cache (the bench passes one it filled); built from the config by default. */
  readonly cache?: AllowCache;
}

export interface SidecarHandle {
  /** `grpc`: a gRPC target (`127.0.0.1:7703` or `unix:/path`), null without `--grpc-listen`. */
  readonly urls: { readonly decision: string; readonly webhook: string | null; readonly admin: string; readonly grpc: string | null };
  readonly registry: Registry;
  readonly readiness: Readiness;
  /** This replica's cache as a revocation seam (purges here only). */
  readonly revocations: RevocationHook;
  /** Stops accepting, drains in-flight work up to the shutdown timeout, releases everything. */
  close(): Promise<void>;
}

/**
 * The composition root: builds each capability from the frozen config, wires them to their
 * listeners and starts them. Nothing here decides anything.
 */
export async function startSidecar(config: SidecarConfig, deps: SidecarDeps = {}): Promise<SidecarHandle> {
  const logger = deps.logger ?? createLogger(config.logLevel);
  const registry = deps.registry ?? createRegistry();
  const now = deps.now ?? Date.now;
  const readiness = new Readiness();
  readiness.require('listeners');
  registerBuildInfo(registry, VERSION);

  // OpenTelemetry (the standard OTEL_* variables): off unless an OTLP endpoint is configured.
  const tracing = await startTracing(config.tracing, { upstreamUrl: config.upstream.baseUrl, version: VERSION, logger });
  const decisions = buildDecisions(config, { ...(deps.cache ? { cache: deps.cache } : {}), registry, logger, now });
  // Several replicas: with Redis, revocations fan out and the webhook wing shares its stores.
  const fleet = await startFleet(config, { local: decisions.local, trust: decisions.trust, registry, logger, now }).catch(async (err: unknown) => {
    await decisions.close();
    throw err;
  });
  let webhooks: Webhooks | null = null;
  const appSigning = config.appSigning;
  try {
    webhooks = config.webhooks
      ? buildWebhooks(config.webhooks, {
          logger,
          registry,
          now,
          revocations: fleet.revocations,
          tracer: tracing.webhookTracer,
          shared: fleet.shared && { claims: fleet.shared.claims, queue: fleet.shared.queue },
          appSigningSecrets: appSigning ? () => appSigning.current() : null,
        })
      : null;
    await webhooks?.start();
  } catch (err) {
    await Promise.allSettled([decisions.close(), webhooks?.close()]);
    await fleet.close();
    throw err;
  }
  const decisionLog = config.decisionLog ? new DecisionLog(config.decisionLog, { logger, dropped: decisions.metrics.decisionLogDropped, now }) : null;
  // One fail-closed boundary for every decision route, HTTP and gRPC: one count, one log rate.
  const boundary = new DecisionBoundary({ metrics: decisions.metrics, logger, decisionLog });
  const decisionServer = createDecisionListener({
    service: decisions.service,
    cache: decisions.cache,
    metrics: decisions.metrics,
    passthrough: decisions.passthrough,
    revocations: fleet.revocations,
    logger,
    maxRequestBytes: config.decisionApi.maxRequestBytes,
    upstreamTimeoutMs: config.upstream.timeoutMs,
    decisionLog,
    forwardAuthUserHeader: config.forwardAuth.userHeader,
    allowedHosts: config.listenerBounds.allowedHosts,
    unixSocket: config.listeners.decision.path !== undefined,
    tracing,
    boundary,
  });
  const listenerMetrics = createListenerMetrics(registry);
  // gRPC ext_authz: its listener (and node:http2) is loaded only when --grpc-listen asks for it.
  const grpc = config.grpc
    ? new (await import('../grpc/index.js')).GrpcListener({
        service: decisions.service,
        boundary,
        readiness,
        userHeader: config.forwardAuth.userHeader,
        timeoutMs: config.upstream.timeoutMs,
        maxMessageBytes: config.grpc.maxMessageBytes,
        maxConcurrentStreams: config.grpc.maxConcurrentStreams,
        bounds: config.grpc.bounds,
        metrics: listenerMetrics,
        logger,
      })
    : null;
  const listeners: NamedListener[] = [
    { name: 'decision', flag: '--listen', address: config.listeners.decision, server: decisionServer },
    ...(webhooks ? [{ name: 'webhook', flag: '--webhook-listen', address: config.listeners.webhook, server: createWebhookListener(webhooks, logger) }] : []),
    ...(grpc && config.grpc ? [{ name: 'grpc', flag: '--grpc-listen', address: config.grpc.listen, server: grpc.server, drain: (ms: number) => grpc.drain(ms) }] : []),
    { name: 'admin', flag: '--admin-listen', address: config.listeners.admin, server: createAdminListener({ registry, readiness }) },
  ];

  // The HTTP listeners; the gRPC one bounds itself (its connection cap, timeouts, message size, bytes and streams).
  for (const name of ['decision', 'webhook', 'admin'] as const satisfies readonly ListenerName[]) {
    const l = listeners.find((x) => x.name === name);
    if (l) bound(l.server as HttpServer, name, config.listenerBounds[name], listenerMetrics, logger);
  }

  const secrets = watchSecrets(serveSecrets(config), { intervalMs: config.secretPollIntervalMs, logger, registry, now });
  // REDEC reconciliation: null when --redec-reconcile-interval-ms is 0.
  const reconciler = startReconciler(config, { shared: fleet.shared, webhooks, registry, logger, now, tracing });
  // One cheap authenticated call tells a rejected API key apart from a service out of reach.
  const keyProbe = startUpstreamKeyProbe(config, { logger, registry, now });

  // Each room closes itself; queueGraceMs is what is left of the shutdown budget for forwards in
  // flight (queue mode). Together: the webhook wing's app client, closed last within it, ends a
  // REDEC hand-over the app holds. Redis (the fleet) last: the others may still write to it.
  const release = async (queueGraceMs = 0): Promise<void> => {
    secrets.close();
    await Promise.allSettled([reconciler?.close(), keyProbe.close(), decisions.close(), webhooks?.close(queueGraceMs), decisionLog?.close()]);
    await fleet.close();
    // Last, so the spans of the shutdown's own work go too; at most 1 s, or what is left of the budget.
    await tracing.shutdown(Math.max(100, Math.min(1000, queueGraceMs)));
  };

  const urls = await listenAll(listeners).catch(async (err: unknown) => {
    await release();
    throw err;
  });
  // A gRPC target, not a URL: host:port, or unix:/path as it is.
  if (urls.grpc !== undefined) urls.grpc = urls.grpc.replace(/^http:\/\//, '');
  readiness.satisfy('listeners');
  logger.info({ event: 'started', version: VERSION, urls, cacheMaxEntries: config.cache.maxEntries, webhooks: config.webhooks !== null, redis: config.redis !== null }, 'consent-sidecar started');

  let closing: Promise<void> | undefined;
  return {
    urls: { decision: urls.decision!, webhook: urls.webhook ?? null, admin: urls.admin!, grpc: urls.grpc ?? null },
    registry,
    readiness,
    revocations: decisions.local,
    close() {
      closing ??= (async () => {
        readiness.startDraining();
        // One budget for everything: what is still in flight when it runs out is cut.
        const deadline = performance.now() + config.shutdownTimeoutMs;
        await drainListeners(listeners, deadline);
        await release(Math.max(0, deadline - performance.now()));
        logger.info({ event: 'stopped' }, 'consent-sidecar stopped');
      })();
      return closing;
    },
  };
}
