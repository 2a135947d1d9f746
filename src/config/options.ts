/**
 * The `serve` flags. Every flag `--some-flag` also reads `CONSENT_SIDECAR_SOME_FLAG`; a flag wins
 * over its variable. The CLI builds its options from these tables, so help text, environment
 * variables and validation cannot drift apart.
 */
export interface OptionSpec {
  /** Long flag name without dashes, e.g. `upstream-url`. */
  readonly name: string;
  /** Commander argument placeholder, e.g. `<url>`. */
  readonly arg: string;
  readonly description: string;
  /** Default as shown in help; the typed default lives in the named constant. */
  readonly defaultText?: string;
  /** Repeat the flag to give several values (the variable takes them comma- or newline-separated). */
  readonly repeatable?: boolean;
}

/** Upstream request deadline per check, retries included (ms). */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 2000;
/** Keep-alive connections to the service (undici pool size). */
export const DEFAULT_UPSTREAM_CONNECTIONS = 64;
/** Checks waiting on the service at once before new misses are shed with 503 `overload`. */
export const DEFAULT_UPSTREAM_MAX_IN_FLIGHT = 1024;
/** Deadline of one passthrough `/v1/*` request (ms). */
export const DEFAULT_PASSTHROUGH_TIMEOUT_MS = 10_000;
/** Consecutive upstream failures that open the circuit breaker. */
export const DEFAULT_BREAKER_FAILURE_THRESHOLD = 5;
/** How long the breaker stays open before a half-open probe (ms). */
export const DEFAULT_BREAKER_COOLDOWN_MS = 5000;
export const DEFAULT_DECISION_LISTEN = '127.0.0.1:7700';
export const DEFAULT_WEBHOOK_LISTEN = '0.0.0.0:7701';
export const DEFAULT_ADMIN_LISTEN = '0.0.0.0:7702';
/** ALLOW cache size in entries; 0 disables the cache. */
export const DEFAULT_CACHE_MAX_ENTRIES = 100_000;
/** An entry dies this long before `validUntil` (ms). */
export const DEFAULT_CACHE_SAFETY_MARGIN_MS = 1000;
/** No entry lives longer than this (ms), whatever `validUntil` says. */
export const DEFAULT_CACHE_MAX_TTL_MS = 3_600_000;
/** Refresh-ahead window (ms): an entry read this close to its death is asked again in the background; 0 = off. */
export const DEFAULT_CACHE_REFRESH_AHEAD_MS = 0;
/** Largest accepted decision request body (bytes). */
export const DEFAULT_MAX_REQUEST_BYTES = 16_384;
/** At most one warn log per (reason, configKey) per this interval (ms). */
export const DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS = 60_000;
/** Forward-auth: the request header that carries the user reference (lower case). */
export const DEFAULT_FORWARD_AUTH_USER_HEADER = 'x-user-reference';
export const DEFAULT_WEBHOOK_PATH = '/webhooks';
/** Timestamp tolerance of webhook signatures, both directions (s). */
export const DEFAULT_WEBHOOK_TOLERANCE_S = 300;
export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 1_048_576;
// --- unauthenticated load on the webhook ingress (issue 8) ---
/**
 * Bytes held at once, across all connections, for deliveries whose signature is not verified yet
 * (16 MiB); beyond it deliveries get 503 and the connection is closed.
 */
export const DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES = 16_777_216;
/** Time a delivery's body has to arrive once its headers passed (ms); beyond it, 503 `body_timeout`. */
export const DEFAULT_WEBHOOK_BODY_TIMEOUT_MS = 10_000;
// --- end ---
/** Time the app has to accept one forwarded event (ms). */
export const DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS = 10_000;
/** How long an accepted event id is remembered (ms); the service retries for about an hour. */
export const DEFAULT_WEBHOOK_DEDUP_RETENTION_MS = 86_400_000;
/** Accepted event ids remembered at most (oldest forgotten first). */
export const DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES = 1_000_000;
// --- Several replicas (Redis) ---
/** Prefix of every Redis key and channel, so several deployments can share one Redis. */
export const DEFAULT_REDIS_KEY_PREFIX = 'consent-sidecar:';
/** Queue mode: events the queue holds at most, and dead letters kept at most. */
export const DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS = 100_000;
/** Deadline of every Redis call (ms); beyond it the outcome of the call is unknown (a dedup claim answers 503). */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;
/** Added to `--webhook-forward-timeout-ms` for the default dedup claim lease (ms). */
export const DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS = 5000;
/** Queue mode: how long an event is retried before it is dead-lettered (ms), 72 h. */
export const DEFAULT_WEBHOOK_QUEUE_HORIZON_MS = 259_200_000;
// --- end Several replicas ---
// --- REDEC reconciliation (issue 11) ---
/** How often the pending REDEC obligations are listed (ms); 0 turns the reconciler off. */
export const DEFAULT_REDEC_RECONCILE_INTERVAL_MS = 300_000;
/** An obligation still pending this long after it was first seen is handed to the app (ms). */
export const DEFAULT_REDEC_RECONCILE_GRACE_MS = 7_200_000;
/** An obligation handed to the app and still pending is handed again after this long (ms). */
export const DEFAULT_REDEC_RECONCILE_REPEAT_MS = 86_400_000;
/** Page size the reconciler asks of the service (`limit`). */
export const DEFAULT_REDEC_RECONCILE_PAGE_LIMIT = 100;
/** Where the listing's records and cursor are (the document does not show it): `serve` and `redec pending`. */
export const REDEC_LISTING_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'redec-items-field',
    arg: '<name>',
    description: 'page member holding the REDEC listing\'s records',
    defaultText: '"items", else the only array of objects',
  },
  { name: 'redec-cursor-param', arg: '<name>', description: 'query parameter the REDEC listing\'s cursor is sent as', defaultText: 'cursor' },
];
export const REDEC_RECONCILE_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'redec-reconcile-interval-ms',
    arg: '<ms>',
    description: 'how often pending REDEC obligations are listed; 0 turns the reconciler off',
    defaultText: String(DEFAULT_REDEC_RECONCILE_INTERVAL_MS),
  },
  {
    name: 'redec-reconcile-grace-ms',
    arg: '<ms>',
    description: 'an obligation still pending this long after it was first seen is handed to the app',
    defaultText: String(DEFAULT_REDEC_RECONCILE_GRACE_MS),
  },
  {
    name: 'redec-reconcile-repeat-ms',
    arg: '<ms>',
    description: 'an obligation handed and still pending is handed again after this long',
    defaultText: String(DEFAULT_REDEC_RECONCILE_REPEAT_MS),
  },
  {
    name: 'redec-reconcile-page-limit',
    arg: '<n>',
    description: 'page size the reconciler asks of the service',
    defaultText: String(DEFAULT_REDEC_RECONCILE_PAGE_LIMIT),
  },
  ...REDEC_LISTING_OPTIONS,
];
// --- end REDEC reconciliation ---
/** Time given to in-flight work after SIGTERM (ms). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 20_000;
/** How often secret files are re-read (ms). */
export const DEFAULT_SECRET_POLL_INTERVAL_MS = 5000;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const WEBHOOK_DELIVERY_MODES = ['passthrough', 'queue'] as const;
export type WebhookDeliveryMode = (typeof WEBHOOK_DELIVERY_MODES)[number];

/** Decision log: share of decisions written (1 = all). */
export const DEFAULT_DECISION_LOG_SAMPLE_RATE = 1;
/** Decision log: bytes waiting to be written before lines are dropped (and counted). */
export const DEFAULT_DECISION_LOG_BUFFER_BYTES = 1_048_576;

/** The optional decision log (off by default): one JSON line per decision, never the user reference. */
export const DECISION_LOG_OPTIONS: readonly OptionSpec[] = [
  { name: 'decision-log', arg: '<off|stdout|path>', description: 'write one JSON line per decision to stdout or to a file (appended)', defaultText: 'off' },
  {
    name: 'decision-log-sample-rate',
    arg: '<0..1>',
    description: 'share of decisions written',
    defaultText: String(DEFAULT_DECISION_LOG_SAMPLE_RATE),
  },
  { name: 'decision-log-hash-key', arg: '<key>', description: 'HMAC key for the user reference hash (16+ characters); random per process when absent' },
  { name: 'decision-log-hash-key-file', arg: '<path>', description: 'file holding the HMAC key; re-read when it changes' },
  {
    name: 'decision-log-buffer-bytes',
    arg: '<bytes>',
    description: 'bytes waiting to be written before lines are dropped (counted)',
    defaultText: String(DEFAULT_DECISION_LOG_BUFFER_BYTES),
  },
];

/** Flags shared by every command that talks to the service (`serve`, `check`, `redec pending`). */
export const UPSTREAM_OPTIONS: readonly OptionSpec[] = [
  { name: 'upstream-url', arg: '<url>', description: "the consent service's base URL (required)" },
  { name: 'api-key', arg: '<key>', description: 'API key sent as Authorization: Bearer; never logged' },
  { name: 'api-key-file', arg: '<path>', description: 'file holding the API key; re-read when it changes' },
  {
    name: 'upstream-timeout-ms',
    arg: '<ms>',
    description: 'whole deadline of one check, retries included',
    defaultText: String(DEFAULT_UPSTREAM_TIMEOUT_MS),
  },
];

export const SERVE_OPTIONS: readonly OptionSpec[] = [
  ...UPSTREAM_OPTIONS,
  { name: 'listen', arg: '<host:port>', description: 'decision API listener', defaultText: DEFAULT_DECISION_LISTEN },
  { name: 'webhook-listen', arg: '<host:port>', description: 'webhook ingress listener', defaultText: DEFAULT_WEBHOOK_LISTEN },
  { name: 'admin-listen', arg: '<host:port>', description: 'metrics and probes listener', defaultText: DEFAULT_ADMIN_LISTEN },
  {
    name: 'upstream-connections',
    arg: '<n>',
    description: 'keep-alive connections to the service',
    defaultText: String(DEFAULT_UPSTREAM_CONNECTIONS),
  },
  {
    name: 'upstream-max-in-flight',
    arg: '<n>',
    description: 'checks waiting on the service at once; beyond, 503 overload',
    defaultText: String(DEFAULT_UPSTREAM_MAX_IN_FLIGHT),
  },
  {
    name: 'passthrough-timeout-ms',
    arg: '<ms>',
    description: 'deadline of one passthrough /v1/* request',
    defaultText: String(DEFAULT_PASSTHROUGH_TIMEOUT_MS),
  },
  {
    name: 'breaker-failure-threshold',
    arg: '<n>',
    description: 'consecutive upstream failures that open the circuit breaker',
    defaultText: String(DEFAULT_BREAKER_FAILURE_THRESHOLD),
  },
  {
    name: 'breaker-cooldown-ms',
    arg: '<ms>',
    description: 'time the breaker stays open before a half-open probe',
    defaultText: String(DEFAULT_BREAKER_COOLDOWN_MS),
  },
  {
    name: 'cache-max-entries',
    arg: '<n>',
    description: 'ALLOW cache size (0 disables the cache)',
    defaultText: String(DEFAULT_CACHE_MAX_ENTRIES),
  },
  {
    name: 'cache-safety-margin-ms',
    arg: '<ms>',
    description: 'an entry dies this long before validUntil',
    defaultText: String(DEFAULT_CACHE_SAFETY_MARGIN_MS),
  },
  {
    name: 'cache-max-ttl-ms',
    arg: '<ms>',
    description: 'no entry lives longer than this',
    defaultText: String(DEFAULT_CACHE_MAX_TTL_MS),
  },  {
    name: 'cache-refresh-ahead-ms',
    arg: '<ms>',
    description: 'an entry read within this long of its death is asked again in the background, once (0: off)',
    defaultText: String(DEFAULT_CACHE_REFRESH_AHEAD_MS),
  },

  {
    name: 'max-request-bytes',
    arg: '<bytes>',
    description: 'largest decision request body',
    defaultText: String(DEFAULT_MAX_REQUEST_BYTES),
  },
  {
    name: 'pre-evaluation-log-interval-ms',
    arg: '<ms>',
    description: 'at most one warn log per (reason, configKey) per interval',
    defaultText: String(DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS),
  },
  {
    name: 'forward-auth-user-header',
    arg: '<name>',
    description: 'forward-auth: the request header that carries the user reference (the proxy sets it; it must strip the client\'s)',
    defaultText: DEFAULT_FORWARD_AUTH_USER_HEADER,
  },
  { name: 'app-webhook-url', arg: '<url>', description: 'where verified events go (webhook ingress off without it)' },
  { name: 'webhook-path', arg: '<path>', description: 'path of the webhook ingress', defaultText: DEFAULT_WEBHOOK_PATH },
  {
    name: 'webhook-secret',
    arg: '<whsec_…>',
    description: 'webhook signing secret; repeat for rotation (all are accepted)',
    repeatable: true,
  },
  { name: 'webhook-secret-file', arg: '<path>', description: 'file with one whsec_ secret per line; re-read when it changes' },
  {
    name: 'webhook-tolerance-s',
    arg: '<s>',
    description: 'signature timestamp tolerance, both directions',
    defaultText: String(DEFAULT_WEBHOOK_TOLERANCE_S),
  },
  {
    name: 'webhook-max-body-bytes',
    arg: '<bytes>',
    description: 'larger webhook bodies get 413',
    defaultText: String(DEFAULT_WEBHOOK_MAX_BODY_BYTES),
  },
  // --- unauthenticated load on the webhook ingress (issue 8) ---
  {
    name: 'webhook-max-unverified-bytes',
    arg: '<bytes>',
    description: 'bytes buffered at once, across all connections, for deliveries not verified yet; beyond, 503',
    defaultText: String(DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES),
  },
  {
    name: 'webhook-body-timeout-ms',
    arg: '<ms>',
    description: "time a delivery's body has to arrive once its headers passed; beyond, 503",
    defaultText: String(DEFAULT_WEBHOOK_BODY_TIMEOUT_MS),
  },
  // --- end ---
  { name: 'webhook-required-header', arg: '<"Name: value">', description: 'header every delivery must carry (not forwarded)' },
  { name: 'webhook-required-header-file', arg: '<path>', description: 'file holding "Name: value"; re-read when it changes' },
  {
    name: 'webhook-forward-timeout-ms',
    arg: '<ms>',
    description: 'time the app has to accept one event',
    defaultText: String(DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS),
  },
  {
    name: 'webhook-delivery',
    arg: '<mode>',
    description: 'passthrough (200 once the app accepted) or queue (needs --redis-url)',
    defaultText: 'passthrough',
  },
  {
    name: 'webhook-dedup-retention-ms',
    arg: '<ms>',
    description: 'how long accepted event ids are remembered',
    defaultText: String(DEFAULT_WEBHOOK_DEDUP_RETENTION_MS),
  },
  {
    name: 'webhook-dedup-max-entries',
    arg: '<n>',
    description: 'accepted event ids remembered at most',
    defaultText: String(DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES),
  },
  // --- Several replicas (Redis) ---
  { name: 'redis-url', arg: '<url>', description: 'one Redis for state shared by replicas (dedup, invalidations, queue); redis:// or rediss:// (TLS)' },
  { name: 'redis-url-file', arg: '<path>', description: 'file holding the Redis URL (credentials inside); re-read when it changes' },
  {
    name: 'redis-cluster-nodes',
    arg: '<urls>',
    description: 'a Redis Cluster instead: seed nodes, comma-separated host:port or redis[s]:// URLs (credentials in the first)',
  },
  { name: 'redis-cluster-nodes-file', arg: '<path>', description: 'file holding the cluster seed nodes; re-read when it changes' },
  {
    name: 'redis-sentinels',
    arg: '<urls>',
    description: 'a Sentinel-managed Redis instead: the sentinels, comma-separated host:port or redis[s]:// URLs (credentials in the first serve sentinels and master)',
  },
  { name: 'redis-sentinels-file', arg: '<path>', description: 'file holding the sentinels; re-read when it changes' },
  { name: 'redis-sentinel-master', arg: '<name>', description: 'with --redis-sentinels: the name the sentinels monitor the master under' },
  { name: 'redis-tls-ca-file', arg: '<path>', description: 'PEM of a private CA to trust for rediss:// (default: the system CAs); re-read when it changes' },
  {
    name: 'redis-wait-replicas',
    arg: '<n>',
    description: 'queue mode and shared revocations: acknowledge only what this many Redis replicas hold (WAIT), so a failover loses nothing acknowledged',
    defaultText: '0',
  },
  { name: 'redis-key-prefix', arg: '<prefix>', description: 'prefix of every Redis key and channel', defaultText: DEFAULT_REDIS_KEY_PREFIX },
  {
    name: 'redis-command-timeout-ms',
    arg: '<ms>',
    description: 'deadline of every Redis call',
    defaultText: String(DEFAULT_REDIS_COMMAND_TIMEOUT_MS),
  },
  {
    name: 'webhook-dedup-lease-ms',
    arg: '<ms>',
    description: 'with Redis: how long a replica holds an event it forwards (must exceed --webhook-forward-timeout-ms)',
    defaultText: `forward timeout + ${DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS}`,
  },
  // --- durable queue (issue 10) ---
  {
    name: 'webhook-queue-horizon-ms',
    arg: '<ms>',
    description: 'queue mode: how long an event is retried before it is dead-lettered',
    defaultText: String(DEFAULT_WEBHOOK_QUEUE_HORIZON_MS),
  },
  {
    name: 'webhook-queue-max-events',
    arg: '<n>',
    description: 'queue mode: events waiting at most (beyond, 503 queue_full and the service retries), and dead letters kept at most',
    defaultText: String(DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS),
  },
  // --- end durable queue ---
  // --- end Several replicas ---
  { name: 'log-level', arg: '<level>', description: `one of ${LOG_LEVELS.join(', ')}`, defaultText: 'info' },
  {
    name: 'shutdown-timeout-ms',
    arg: '<ms>',
    description: 'time given to in-flight work after SIGTERM',
    defaultText: String(DEFAULT_SHUTDOWN_TIMEOUT_MS),
  },
  {
    name: 'secret-poll-interval-ms',
    arg: '<ms>',
    description: 'how often secret files are re-read',
    defaultText: String(DEFAULT_SECRET_POLL_INTERVAL_MS),
  },
  ...DECISION_LOG_OPTIONS,
  ...REDEC_RECONCILE_OPTIONS,
];

/** Prefix of every variable the sidecar reads. */
export const ENV_PREFIX = 'CONSENT_SIDECAR_';

/** `upstream-url` → `CONSENT_SIDECAR_UPSTREAM_URL`. */
export function envName(flagName: string): string {
  return `${ENV_PREFIX}${flagName.toUpperCase().replace(/-/g, '_')}`;
}
