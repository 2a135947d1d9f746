import { APP_SIGNING_OPTIONS } from './app-signing.js';
import { CACHE_OPTIONS } from './cache.js';
import { DECISION_API_OPTIONS } from './decision-api.js';
import { GRPC_OPTIONS } from './grpc.js';
import { LISTEN_OPTIONS } from './listen.js';
import { LISTENER_BOUNDS_OPTIONS } from './listener-bounds.js';
import { DECISION_LOG_OPTIONS, LOG_LEVEL_OPTIONS } from './observability.js';
import type { OptionSpec } from './option-spec.js';
import { PROCESS_OPTIONS } from './process-wide.js';
import { QUEUE_OPTIONS } from './queue.js';
import { REDEC_RECONCILE_OPTIONS } from './redec.js';
import { REDIS_OPTIONS } from './redis.js';
import { UPSTREAM_OPTIONS, UPSTREAM_POOL_OPTIONS } from './upstream.js';
import { WEBHOOK_OPTIONS } from './webhooks.js';

// The flags' public face: each capability's options and defaults live beside its reader
// (upstream.ts, cache.ts, decision-api.ts, webhooks.ts, app-signing.ts, queue.ts, redis.ts, redec.ts,
// observability.ts, listen.ts, process-wide.ts); this joins them into the `serve` table.

export { ENV_PREFIX, envName, secretFlagWarning, type OptionSpec } from './option-spec.js';
export {
  DEFAULT_BREAKER_COOLDOWN_MS,
  DEFAULT_BREAKER_FAILURE_THRESHOLD,
  DEFAULT_PASSTHROUGH_TIMEOUT_MS,
  DEFAULT_UPSTREAM_CONNECTIONS,
  DEFAULT_UPSTREAM_MAX_IN_FLIGHT,
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  UPSTREAM_OPTIONS,
} from './upstream.js';
export { DEFAULT_ADMIN_LISTEN, DEFAULT_DECISION_LISTEN, DEFAULT_WEBHOOK_LISTEN } from './listen.js';
export { DEFAULT_CACHE_MAX_ENTRIES, DEFAULT_CACHE_MAX_TTL_MS, DEFAULT_CACHE_REFRESH_AHEAD_MS, DEFAULT_CACHE_SAFETY_MARGIN_MS } from './cache.js';
export { DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, DEFAULT_GRPC_MAX_MESSAGE_BYTES, GRPC_OPTIONS } from './grpc.js';
export { DEFAULT_FORWARD_AUTH_USER_HEADER, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS } from './decision-api.js';
export {
  DEFAULT_WEBHOOK_BODY_TIMEOUT_MS,
  DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES,
  DEFAULT_WEBHOOK_DEDUP_RETENTION_MS,
  DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS,
  DEFAULT_WEBHOOK_MAX_BODY_BYTES,
  DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES,
  DEFAULT_WEBHOOK_PATH,
  DEFAULT_WEBHOOK_TOLERANCE_S,
  WEBHOOK_DELIVERY_MODES,
  type WebhookDeliveryMode,
} from './webhooks.js';
export { APP_SIGNING_OPTIONS, MIN_APP_SIGNING_SECRET_LENGTH } from './app-signing.js';
export { DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS, DEFAULT_WEBHOOK_QUEUE_HORIZON_MS, DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS } from './queue.js';
export { DEFAULT_FLEET_INVALIDATION_MAX_SILENCE_MS, DEFAULT_REDIS_COMMAND_TIMEOUT_MS, DEFAULT_REDIS_KEY_PREFIX } from './redis.js';
export {
  DEFAULT_REDEC_MAX_LISTING_BYTES,
  DEFAULT_REDEC_MAX_PAGE_BYTES,
  DEFAULT_REDEC_MAX_RECORDS,
  DEFAULT_REDEC_RECONCILE_GRACE_MS,
  DEFAULT_REDEC_RECONCILE_INTERVAL_MS,
  DEFAULT_REDEC_RECONCILE_PAGE_LIMIT,
  DEFAULT_REDEC_RECONCILE_REPEAT_MS,
  REDEC_LISTING_OPTIONS,
  REDEC_RECONCILE_OPTIONS,
} from './redec.js';
export { DEFAULT_DECISION_LOG_BUFFER_BYTES, DEFAULT_DECISION_LOG_SAMPLE_RATE, DECISION_LOG_OPTIONS, LOG_LEVELS, type LogLevel } from './observability.js';
export { DEFAULT_SECRET_POLL_INTERVAL_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS } from './process-wide.js';

/** Every `serve` flag, in the order `serve --help` lists them. */
export const SERVE_OPTIONS: readonly OptionSpec[] = [
  ...UPSTREAM_OPTIONS,
  ...LISTEN_OPTIONS,
  ...LISTENER_BOUNDS_OPTIONS,
  ...UPSTREAM_POOL_OPTIONS,
  ...CACHE_OPTIONS,
  ...DECISION_API_OPTIONS,
  ...GRPC_OPTIONS,
  ...WEBHOOK_OPTIONS,
  ...APP_SIGNING_OPTIONS,
  ...REDIS_OPTIONS,
  ...QUEUE_OPTIONS,
  ...LOG_LEVEL_OPTIONS,
  ...PROCESS_OPTIONS,
  ...DECISION_LOG_OPTIONS,
  ...REDEC_RECONCILE_OPTIONS,
];
