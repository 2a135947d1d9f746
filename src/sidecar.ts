import type { Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { redisSecrets, watchSecrets, type SidecarConfig } from './config/index.js';
import {
  AllowCache,
  CircuitBreaker,
  DecisionLog,
  DecisionMetrics,
  DecisionService,
  Passthrough,
  PreEvaluationLog,
  UpstreamClient,
} from './decision/index.js';
import { createAdminListener } from './http/admin-listener.js';
import { createDecisionListener } from './http/decision-listener.js';
import { createWebhookListener } from './http/webhook-listener.js';
import { closeGracefully, listenAt } from './http/listen.js';
import type { ListenAddress } from './lib/listen-address.js';
import type { RevocationHook } from './lib/revocation-hook.js';
import { createLogger, createRegistry, Readiness, registerBuildInfo, type Logger } from './observability/index.js';
import { startFleet } from './fleet-wiring.js';
import { startReconciler } from './redec-wiring.js';
import { VERSION } from './version.js';

/** How often dead cache entries are swept out (ms, up to SWEEP_BUDGET each time); serving never depends on it. */
const CACHE_SWEEP_INTERVAL_MS = 100;

export interface SidecarDeps {
  readonly logger?: Logger;
  /** A fresh registry per sidecar by default (tests read their own). */
  readonly registry?: Registry;
  readonly now?: () => number;
  /** The ALLOW cache (the bench passes one it filled); built from the config by default. */
  readonly cache?: AllowCache;
}

export interface SidecarHandle {
  readonly urls: { readonly decision: string; readonly webhook: string | null; readonly admin: string };
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

  const cache = deps.cache ?? new AllowCache(config.cache, now);
  // A bounded sweep (the dead only, soonest first) before reporting, so the gauge does not count
  // entries that can no longer be served; never a walk over the live ones.
  const metrics = new DecisionMetrics(registry, () => (cache.sweep(), cache.size));
  const breaker = new CircuitBreaker({
    ...config.upstream.breaker,
    now,
    onStateChange: (state) => {
      metrics.setBreakerState(state);
      logger[state === 'open' ? 'warn' : 'info']({ event: 'circuit_breaker', state }, `circuit breaker ${state}`);
    },
  });
  const client = new UpstreamClient(config.upstream, { connections: config.upstream.connections, userAgent: `consent-sidecar/${VERSION}` });
  const service = new DecisionService({
    transport: client,
    cache,
    cacheConfig: config.cache,
    breaker,
    metrics,
    preEvaluationLog: new PreEvaluationLog(logger, config.decisionApi.preEvaluationLogIntervalMs, now),
    maxInFlight: config.upstream.maxInFlight,
    now,
  });
  const passthrough = new Passthrough(config.upstream, config.upstream.passthroughTimeoutMs);
  const localRevocations: RevocationHook = {
    revokeUser: (userReference) => {
      const n = cache.revokeUser(userReference);
      metrics.purged.labels('webhook').inc(n);
      return n;
    },
    revokeAll: () => {
      const n = cache.revokeAll();
      metrics.purged.labels('webhook').inc(n);
      return n;
    },
  };

  // Several replicas: with Redis, revocations fan out, webhook dedup is shared, queue mode has its queue.
  const fleet = await startFleet(config, { local: localRevocations, registry, logger, now });
  const decisionLog = config.decisionLog ? new DecisionLog(config.decisionLog, { logger, dropped: metrics.decisionLogDropped, now }) : null;

  const servers: { name: string; flag: string; server: Server; address: ListenAddress }[] = [];
  servers.push({
    name: 'decision',
    flag: '--listen',
    address: config.listeners.decision,
    server: createDecisionListener({
      service,
      cache,
      metrics,
      passthrough,
      logger,
      maxRequestBytes: config.decisionApi.maxRequestBytes,
      decisionLog,
      forwardAuthUserHeader: config.forwardAuth.userHeader,
    }),
  });

  // webhook ingress
  const webhooks = config.webhooks
    ? createWebhookListener({
        config: config.webhooks,
        logger,
        registry,
        revocations: fleet.revocations,
        now,
        shutdownTimeoutMs: config.shutdownTimeoutMs,
        ...(fleet.dedup ? { dedup: fleet.dedup } : {}),
        ...(fleet.queue ? { queue: fleet.queue } : {}),
      })
    : null;
  if (webhooks) servers.push({ name: 'webhook', flag: '--webhook-listen', address: config.listeners.webhook, server: webhooks.server });

  servers.push({ name: 'admin', flag: '--admin-listen', address: config.listeners.admin, server: createAdminListener({ registry, readiness }) });

  const secrets = [
    config.upstream.apiKey,
    config.webhooks?.secrets,
    config.webhooks?.requiredHeader ?? undefined,
    config.decisionLog?.hashKey ?? undefined,
    ...(config.redis ? redisSecrets(config.redis) : []),
  ].filter((s) => s !== undefined);
  watchSecrets(secrets, { intervalMs: config.secretPollIntervalMs, logger, registry, now });
  const sweeper = setInterval(() => cache.sweep(), CACHE_SWEEP_INTERVAL_MS);
  sweeper.unref();
  // REDEC reconciliation (issue 11): null when --redec-reconcile-interval-ms is 0.
  const reconciler = startReconciler(config, { shared: fleet.shared, registry, logger, now });

  // queueGraceMs: what is left of the shutdown budget for queue forwards in flight (queue mode).
  const release = async (queueGraceMs = 0): Promise<void> => {
    clearInterval(sweeper);
    for (const s of secrets) s.close();
    await reconciler?.close();
    // Destroy, not close: close() waits for calls in flight, and a hanging passthrough or check
    // would keep the process alive past --shutdown-timeout-ms (issue 8: 9.5 s with 5,000 ms).
    await Promise.allSettled([client.destroy(), passthrough.destroy(), webhooks?.close(), decisionLog?.close()]);
    await fleet.close(queueGraceMs);
  };

  const urls: Record<string, string> = {};
  try {
    for (const s of servers) urls[s.name] = await listenAt(s.server, s.address);
  } catch (err) {
    const failed = servers.find((s) => !s.server.listening && !urls[s.name]);
    await Promise.allSettled(servers.map((s) => closeGracefully(s.server, 0)));
    await release();
    const where = failed ? `${failed.flag} ${failed.address.path !== undefined ? `unix:${failed.address.path}` : `${failed.address.host}:${failed.address.port}`}` : 'listener';
    throw new Error(`${where}: cannot listen (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
  readiness.satisfy('listeners');
  logger.info({ event: 'started', version: VERSION, urls, cacheMaxEntries: config.cache.maxEntries, webhooks: config.webhooks !== null, redis: config.redis !== null }, 'consent-sidecar started');

  let closing: Promise<void> | undefined;
  return {
    urls: { decision: urls.decision!, webhook: urls.webhook ?? null, admin: urls.admin! },
    registry,
    readiness,
    revocations: localRevocations,
    close() {
      closing ??= (async () => {
        readiness.startDraining();
        // One budget for everything: what is still in flight when it runs out is cut.
        const deadline = performance.now() + config.shutdownTimeoutMs;
        const left = (): number => Math.max(0, deadline - performance.now());
        const traffic = servers.filter((s) => s.name !== 'admin');
        await Promise.all(traffic.map((s) => closeGracefully(s.server, left())));
        await Promise.all(servers.filter((s) => s.name === 'admin').map((s) => closeGracefully(s.server, Math.min(1000, left()))));
        await release(left());
        logger.info({ event: 'stopped' }, 'consent-sidecar stopped');
      })();
      return closing;
    },
  };
}
