import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { serveSecrets, watchSecrets, type SidecarConfig } from '../config/index.js';
import { buildDecisions, DecisionLog, type AllowCache, type Decisions } from '../decision/index.js';
import { VERSION } from '../lib/version.js';
import type { Logger } from '../observability/index.js';
import type { Tracing } from '../observability/tracing.js';
import { startTracing } from '../observability/tracing-sdk.js';
import { buildWebhooks, type Webhooks } from '../webhooks/index.js';
import { startFleet, type Fleet } from './fleet.js';
import type { Lifecycle } from './lifecycle.js';
import { startReconciler } from './reconciler.js';
import { startUpstreamKeyProbe } from './upstream-key-probe.js';

/** The sidecar's rooms, started: what its listeners are built over. */
export interface Rooms {
  readonly tracing: Tracing;
  readonly decisions: Decisions;
  readonly fleet: Fleet;
  /** Null without `--app-webhook-url`. */
  readonly webhooks: Webhooks | null;
  /** Null without `--decision-log`. */
  readonly decisionLog: DecisionLog | null;
}

export interface RoomDeps {
  readonly logger: Logger;
  readonly registry: Registry;
  readonly now: () => number;
  /** The ALLOW cache (the bench passes one it filled); built from the config by default. */
  readonly cache?: AllowCache | undefined;
}

/** What is left of the shutdown budget at `deadline` (performance.now() ms). */
const left = (deadline: number): number => Math.max(0, deadline - performance.now());

/**
 * Builds and starts each room from the frozen config, adding each to `life` as it starts, so that
 * they stop in the reverse order: the decision log, the rooms' work (the webhook wing, the
 * reconciler, the key probe, the secret watch) together, the fleet (Redis after every room that may
 * write to it), the decision wing, and tracing last, so the spans of the shutdown's own work go too.
 */
export async function startRooms(config: SidecarConfig, deps: RoomDeps, life: Lifecycle): Promise<Rooms> {
  const { logger, registry, now } = deps;
  // OpenTelemetry (the standard OTEL_* variables): off unless an OTLP endpoint is configured.
  const tracing = await startTracing(config.tracing, { upstreamUrl: config.upstream.baseUrl, version: VERSION, logger });
  life.add('tracing', (deadline) => tracing.shutdown(Math.max(100, Math.min(1000, left(deadline)))));
  const decisions = buildDecisions(config, { ...(deps.cache ? { cache: deps.cache } : {}), registry, logger, now });
  life.add('decisions', () => decisions.close());
  // Several replicas: with Redis, revocations fan out and the webhook wing shares its stores.
  const fleet = await startFleet(config, { local: decisions.local, trust: decisions.trust, registry, logger, now });
  life.add('fleet', () => fleet.close());
  const webhooks = await startWork(config, { ...deps, tracing, fleet }, life);
  const decisionLog = config.decisionLog ? new DecisionLog(config.decisionLog, { logger, dropped: decisions.metrics.decisionLogDropped, now }) : null;
  if (decisionLog) life.add('decision log', () => decisionLog.close());
  return { tracing, decisions, fleet, webhooks, decisionLog };
}

/**
 * The rooms' work, one step that stops together: the webhook wing (its forwards in flight get what
 * is left of the budget, then its app client closes, which ends a REDEC hand-over the reconciler
 * waits for), the reconciler, the key probe and the secret watch.
 */
async function startWork(config: SidecarConfig, deps: RoomDeps & { tracing: Tracing; fleet: Fleet }, life: Lifecycle): Promise<Webhooks | null> {
  const { logger, registry, now, tracing, fleet } = deps;
  const work = life.step();
  const appSigning = config.appSigning;
  const webhooks = config.webhooks
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
  if (webhooks) work.add('webhooks', (deadline) => webhooks.close(left(deadline)));
  await webhooks?.start();
  const secrets = watchSecrets(serveSecrets(config), { intervalMs: config.secretPollIntervalMs, logger, registry, now });
  work.add('secrets', () => secrets.close());
  // REDEC reconciliation: null when --redec-reconcile-interval-ms is 0.
  const reconciler = startReconciler(config, { shared: fleet.shared, webhooks, registry, logger, now, tracing });
  if (reconciler) work.add('reconciler', () => reconciler.close());
  // One cheap authenticated call tells a rejected API key apart from a service out of reach.
  const keyProbe = startUpstreamKeyProbe(config, { logger, registry, now });
  work.add('key probe', () => keyProbe.close());
  return webhooks;
}
