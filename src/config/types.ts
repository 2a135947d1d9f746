import type { ListenersBoundsConfig } from './listener-bounds.js';
import type { TracingOptions } from '../observability/tracing.js';
import type { ListenAddress } from '../lib/listen-address.js';
import type { LogLevel } from './observability.js';
import type { WebhookDeliveryMode } from './webhooks.js';
import type { Secret } from './secret.js';

/** How to reach the consent service. Shared by `serve`, `check` and `redec pending`. */
export interface UpstreamConfig {
  /** The service's `{base_url}`; paths such as `/v1/authorization/check` are appended to it. */
  readonly baseUrl: URL;
  readonly apiKey: Secret<string>;
  /** Whole deadline of one check, retries included (ms). */
  readonly timeoutMs: number;
}

export interface UpstreamPoolConfig {
  /** `--api-key-check`: probe the API key once at start (and with backoff until it is accepted). */
  readonly keyCheck: boolean;
  /** Keep-alive connections to the service. */
  readonly connections: number;
  /** Checks waiting on the service at once before misses are shed (503 `overload`). */
  readonly maxInFlight: number;
  /** Deadline of one passthrough request (ms). */
  readonly passthroughTimeoutMs: number;
  readonly breaker: {
    readonly failureThreshold: number;
    readonly cooldownMs: number;
  };
}

export interface CacheConfig {
  /** 0 disables the cache. */
  readonly maxEntries: number;
  readonly safetyMarginMs: number;
  readonly maxTtlMs: number;
  /** `--cache-refresh-ahead-ms`: an entry read within this long of its death is refreshed in the background; 0 or absent = off. */
  readonly refreshAheadMs?: number;
}

export interface DecisionApiConfig {
  readonly maxRequestBytes: number;
  readonly preEvaluationLogIntervalMs: number;
}

/** The gRPC ext_authz listener (`--grpc-listen`). */
export interface GrpcConfig {
  readonly listen: ListenAddress;
  /** Largest CheckRequest decided (bytes). */
  readonly maxMessageBytes: number;
  /** Streams one connection may have open at once. */
  readonly maxConcurrentStreams: number;
}

/** Forward-auth (`/sidecar/forward-auth`) for a proxy in the pod. */
export interface ForwardAuthConfig {
  /** Lower-case name of the header the proxy puts the user reference in. */
  readonly userHeader: string;
}

export interface RequiredHeader {
  /** Lower-case header name. */
  readonly name: string;
  readonly value: string;
}

export interface WebhookConfig {
  /** `--app-webhook-url`: where events no route takes go; null when only routes are given. */
  readonly appUrl: URL | null;
  /** `--app-webhook-route 'GLOB=URL'`, in the order given (first match wins). */
  readonly routes: readonly { readonly glob: string; readonly url: URL }[];
  readonly path: string;
  /** All accepted secrets, in the order given (rotation). */
  readonly secrets: Secret<readonly string[]>;
  readonly toleranceS: number;
  readonly maxBodyBytes: number;
  readonly requiredHeader: Secret<RequiredHeader> | null;
  readonly forwardTimeoutMs: number;
  readonly delivery: WebhookDeliveryMode;
  readonly dedupRetentionMs: number;
  readonly dedupMaxEntries: number;
  // --- unauthenticated load (docs/webhooks.md, Unauthenticated load) ---
  /** Bytes of bodies not verified yet held at once, across all connections; beyond, 503. */
  readonly maxUnverifiedBytes: number;
  /** Of those, what one sender address may hold (`--webhook-peer-max-unverified`). */
  readonly maxUnverifiedBytesPerPeer: number;
  /** Time a delivery's body has to arrive once its headers passed (ms); beyond, 503 `body_timeout`. */
  readonly bodyTimeoutMs: number;
  /** Slowest accepted body, in bytes a second after a short grace (`--webhook-min-body-rate-bytes`; 0: off); slower, 503 `body_too_slow`. */
  readonly minBodyRateBytes: number;
  /** With Redis: how long a claim on an event lives (ms); always more than `forwardTimeoutMs`. */
  readonly dedupLeaseMs: number;
  /** Queue mode: how long an event is retried before it is dead-lettered (ms), `--webhook-queue-horizon-ms`. */
  readonly queueHorizonMs: number;
  /** Queue mode: events waiting at most, and dead letters kept at most, `--webhook-queue-max-events`. */
  readonly queueMaxEvents: number;
}

/**
 * Where Redis is (contract, Redis topologies): one server (`--redis-url`), a cluster
 * (`--redis-cluster-nodes`, seed nodes) or a Sentinel-managed master (`--redis-sentinels` with
 * `--redis-sentinel-master`). URLs carry the credentials; file-backed secrets follow rotation.
 */
export type RedisTarget =
  | { readonly kind: 'single'; readonly url: Secret<URL> }
  | { readonly kind: 'cluster'; readonly nodes: Secret<readonly URL[]> }
  | { readonly kind: 'sentinel'; readonly sentinels: Secret<readonly URL[]>; readonly masterName: string };

/** Redis, for state shared by replicas. */
export interface RedisConfig {
  readonly target: RedisTarget;
  /** `--redis-tls-ca-file`: the PEM of a private CA that signed Redis' certificate; null: the system's CAs. */
  readonly tlsCa: Secret<string> | null;
  /** `--redis-key-prefix`: every key and channel starts with it, inside one hash tag. */
  readonly keyPrefix: string;
  /** `--redis-command-timeout-ms`: deadline of every call. */
  readonly commandTimeoutMs: number;
  /**
   * `--redis-wait-replicas`: queue mode, passthrough claims and accepts, and shared revocations
   * count only what this many Redis replicas hold.
   */
  readonly waitReplicas: number;
  /**
   * `--fleet-invalidation-max-silence-ms`: a replica that could not read the invalidation log this
   * long while Redis answers others serves nothing from its cache until it has caught up.
   */
  readonly invalidationMaxSilenceMs: number;
}

/** Every secret a Redis configuration holds (to watch for rotation, and to close). */
export function redisSecrets(redis: RedisConfig): Secret<unknown>[] {
  const t = redis.target;
  const where: Secret<unknown> = t.kind === 'single' ? t.url : t.kind === 'cluster' ? t.nodes : t.sentinels;
  return redis.tlsCa ? [where, redis.tlsCa] : [where];
}

/** Every secret the serve configuration holds, from a file or a variable (to watch for rotation, and to close). */
export function serveSecrets(config: SidecarConfig): Secret<unknown>[] {
  return [
    config.upstream.apiKey,
    config.webhooks?.secrets,
    config.webhooks?.requiredHeader ?? undefined,
    config.decisionLog?.hashKey ?? undefined,
    ...(config.redis ? redisSecrets(config.redis) : []),
  ].filter((s) => s !== undefined);
}

/** The optional decision log (`--decision-log*`). */
export interface DecisionLogConfig {
  /** `stdout`, or a file path the lines are appended to. */
  readonly destination: string;
  /** Share of decisions written, 0..1. */
  readonly sampleRate: number;
  /** HMAC key of the user reference hash; null: a random key per process. */
  readonly hashKey: Secret<string> | null;
  /** Bytes waiting to be written before lines are dropped. */
  readonly bufferBytes: number;
}

// --- REDEC reconciliation (docs/redec.md) ---
/** Where the listing's records are and how its cursor goes out (`--redec-items-field`, `--redec-cursor-param`). */
export interface RedecListingFields {
  /** null: `items`, else the page's only array of objects. */
  readonly itemsField: string | null;
  readonly cursorParam: string;
}

/**
 * How much of the listing one run reads (`--redec-max-page-bytes`, `--redec-max-records`,
 * `--redec-max-listing-bytes`); beyond any, the run fails `too_large` and nothing from it is used.
 */
export interface RedecListingBounds {
  /** Largest page read (bytes); the body is cut off past it. */
  readonly maxPageBytes: number;
  /** Most records in one run, all pages together. */
  readonly maxRecords: number;
  /** Most bytes read by one listing, all pages together. */
  readonly maxListingBytes: number;
}

/** The reconciler (`--redec-reconcile-*`); null when the interval is 0. */
export interface RedecReconcileConfig {
  readonly intervalMs: number;
  readonly graceMs: number;
  readonly repeatMs: number;
  readonly pageLimit: number;
  readonly fields: RedecListingFields;
  readonly bounds: RedecListingBounds;
}
// --- end REDEC reconciliation ---

/** Everything `serve` needs, validated and frozen. */
export interface SidecarConfig {
  readonly upstream: UpstreamConfig & UpstreamPoolConfig;
  readonly listeners: {
    readonly decision: ListenAddress;
    readonly webhook: ListenAddress;
    readonly admin: ListenAddress;
  };
  /** What each listener admits (connections, timeouts) and the decision listener's extra `Host` names. */
  readonly listenerBounds: ListenersBoundsConfig;
  readonly cache: CacheConfig;
  readonly decisionApi: DecisionApiConfig;
  readonly forwardAuth: ForwardAuthConfig;
  /** `null` without `--grpc-listen`: no gRPC listener. */
  readonly grpc: GrpcConfig | null;
  /** `null` when `--app-webhook-url` is not set: the webhook ingress is off. */
  readonly webhooks: WebhookConfig | null;
  /** `null` without `--redis-url`: dedup and cache invalidation stay per replica. */
  readonly redis: RedisConfig | null;
  readonly logLevel: LogLevel;
  readonly shutdownTimeoutMs: number;
  readonly secretPollIntervalMs: number;
  /** `null` when `--decision-log` is off (the default). */
  readonly decisionLog: DecisionLogConfig | null;
  /** `null` when `--redec-reconcile-interval-ms` is 0. */
  readonly redecReconcile: RedecReconcileConfig | null;
  /** OpenTelemetry spans (the standard `OTEL_*` variables), or null when off. */
  readonly tracing: TracingOptions | null;
}

/** Raw values as commander parsed them, keyed by long flag name without dashes. */
export type RawFlags = Readonly<Record<string, string | readonly string[] | boolean | undefined>>;
/** Environment variables (defaults to `process.env` inside `src/config/` only). */
export type RawEnv = Readonly<Record<string, string | undefined>>;
