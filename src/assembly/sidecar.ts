import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import type { SidecarConfig } from '../config/index.js';
import type { AllowCache } from '../decision/index.js';
import { drainListeners, listenAll } from '../http/listen.js';
import type { RevocationHook } from '../lib/revocation-hook.js';
import { VERSION } from '../lib/version.js';
import { createLogger, createRegistry, Readiness, registerBuildInfo, type Logger } from '../observability/index.js';
import { Lifecycle } from './lifecycle.js';
import { buildListeners } from './listeners.js';
import { startRooms } from './rooms.js';

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
 * The composition root: builds each room from the frozen config (`startRooms`), the listeners over
 * them (`buildListeners`), and starts listening. Nothing here decides anything. Each part joins a
 * {@link Lifecycle} as it starts: a start that fails stops what had started, latest first, and
 * `close()` stops everything in that order within `--shutdown-timeout-ms`, the listeners first.
 */
export async function startSidecar(config: SidecarConfig, deps: SidecarDeps = {}): Promise<SidecarHandle> {
  const logger = deps.logger ?? createLogger(config.logLevel);
  const registry = deps.registry ?? createRegistry();
  const readiness = new Readiness();
  readiness.require('listeners');
  registerBuildInfo(registry, VERSION);
  const life = new Lifecycle((part, err) => logger.warn({ event: 'close_failed', part, err }, `${part} did not stop cleanly`));
  const { rooms, urls } = await life.start(async () => {
    const rooms = await startRooms(config, { logger, registry, now: deps.now ?? Date.now, cache: deps.cache }, life);
    const listeners = await buildListeners(config, rooms, { logger, registry, readiness });
    // When one address cannot be taken, listenAll closes those it took.
    const urls = await listenAll(listeners);
    // The listeners stop first: answers in flight complete (or are cut at the deadline) before any room stops.
    life.add('listeners', (deadline) => drainListeners(listeners, deadline));
    return { rooms, urls };
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
    revocations: rooms.decisions.local,
    close() {
      closing ??= (async () => {
        readiness.startDraining();
        // One budget for everything: what is still in flight when it runs out is cut.
        await life.close(performance.now() + config.shutdownTimeoutMs);
        logger.info({ event: 'stopped' }, 'consent-sidecar stopped');
      })();
      return closing;
    },
  };
}
