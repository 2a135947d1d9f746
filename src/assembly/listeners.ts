import type { Server as HttpServer } from 'node:http';
import type { Registry } from 'prom-client';
import type { SidecarConfig } from '../config/index.js';
import { DecisionBoundary } from '../edge/decision-boundary.js';
import { createListenerMetrics, type ListenerName } from '../edge/listener-gate.js';
import { createAdminListener } from '../http/admin-listener.js';
import { createDecisionListener } from '../http/decision-listener.js';
import type { NamedListener } from '../http/listen.js';
import { bound } from '../http/listener-bounds.js';
import { createWebhookListener } from '../http/webhook-listener.js';
import type { Logger, Readiness } from '../observability/index.js';
import type { Rooms } from './rooms.js';

/**
 * The listeners over the started rooms, not yet listening: decision, webhook (with the webhook
 * wing), gRPC (with `--grpc-listen`; its listener and node:http2 are loaded only then) and admin.
 * Every decision route, HTTP and gRPC, answers through one fail-closed boundary: one count, one
 * log rate. Each HTTP listener is bounded; the gRPC one bounds itself (its connection cap,
 * timeouts, message size, bytes and streams).
 */
export async function buildListeners(config: SidecarConfig, rooms: Rooms, deps: { logger: Logger; registry: Registry; readiness: Readiness }): Promise<NamedListener[]> {
  const { decisions, fleet, webhooks, decisionLog, tracing } = rooms;
  const { logger, registry, readiness } = deps;
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
  for (const name of ['decision', 'webhook', 'admin'] as const satisfies readonly ListenerName[]) {
    const l = listeners.find((x) => x.name === name);
    if (l) bound(l.server as HttpServer, name, config.listenerBounds[name], listenerMetrics, logger);
  }
  return listeners;
}
