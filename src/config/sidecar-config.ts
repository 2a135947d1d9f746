import type { CacheConfig } from './cache.js';
import type { DecisionApiConfig, ForwardAuthConfig } from './decision-api.js';
import type { GrpcConfig } from './grpc.js';
import type { ListenersConfig } from './listen.js';
import type { ListenersBoundsConfig } from './listener-bounds.js';
import type { DecisionLogConfig, LogLevel } from './observability.js';
import type { ProcessWideConfig } from './process-wide.js';
import type { RedecReconcileConfig } from './redec.js';
import { redisSecrets, type RedisConfig } from './redis.js';
import type { Secret } from './secret.js';
import type { TracingOptions } from './tracing.js';
import type { UpstreamConfig, UpstreamPoolConfig } from './upstream.js';
import type { WebhookConfig } from './webhooks.js';

// The whole of `serve`'s configuration: each section's type lives beside its reader; this file only
// joins them, so it imports the sections and none of them imports it.

/** Everything `serve` needs, validated and frozen. */
export interface SidecarConfig extends ProcessWideConfig {
  readonly upstream: UpstreamConfig & UpstreamPoolConfig;
  readonly listeners: ListenersConfig;
  /** What each listener admits (connections, timeouts) and the decision listener's extra `Host` names. */
  readonly listenerBounds: ListenersBoundsConfig;
  readonly cache: CacheConfig;
  readonly decisionApi: DecisionApiConfig;
  readonly forwardAuth: ForwardAuthConfig;
  /** `null` without `--grpc-listen`: no gRPC listener. */
  readonly grpc: GrpcConfig | null;
  /** `null` when `--app-webhook-url` is not set: the webhook ingress is off. */
  readonly webhooks: WebhookConfig | null;
  /**
   * `--app-signing-secret[-file]`: the secrets every event handed to the app is signed under (the
   * first signs); `null` without it (forwards are unauthenticated, warned at start) or without webhooks.
   */
  readonly appSigning: Secret<readonly string[]> | null;
  /** `null` without `--redis-url`: dedup and cache invalidation stay per replica. */
  readonly redis: RedisConfig | null;
  readonly logLevel: LogLevel;
  /** `null` when `--decision-log` is off (the default). */
  readonly decisionLog: DecisionLogConfig | null;
  /** `null` when `--redec-reconcile-interval-ms` is 0. */
  readonly redecReconcile: RedecReconcileConfig | null;
  /** OpenTelemetry spans (the standard `OTEL_*` variables), or null when off. */
  readonly tracing: TracingOptions | null;
}

/** Every secret the serve configuration holds, from a file or a variable (to watch for rotation, and to close). */
export function serveSecrets(config: SidecarConfig): Secret<unknown>[] {
  return [
    config.upstream.apiKey,
    config.webhooks?.secrets,
    config.webhooks?.requiredHeader ?? undefined,
    config.appSigning ?? undefined,
    config.decisionLog?.hashKey ?? undefined,
    ...(config.redis ? redisSecrets(config.redis) : []),
  ].filter((s) => s !== undefined);
}
