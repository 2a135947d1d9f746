import { secretFlagWarning, type OptionSpec } from './option-spec.js';

// The webhook capability's flags and defaults: the ingress, its secrets, dedup, the durable queue.

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
/** Queue mode: events the queue holds at most, and dead letters kept at most. */
export const DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS = 100_000;
/** Added to `--webhook-forward-timeout-ms` for the default dedup claim lease (ms). */
export const DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS = 5000;
/** Queue mode: how long an event is retried before it is dead-lettered (ms), 72 h. */
export const DEFAULT_WEBHOOK_QUEUE_HORIZON_MS = 259_200_000;
export const WEBHOOK_DELIVERY_MODES = ['passthrough', 'queue'] as const;
export type WebhookDeliveryMode = (typeof WEBHOOK_DELIVERY_MODES)[number];

export const WEBHOOK_OPTIONS: readonly OptionSpec[] = [
  { name: 'app-webhook-url', arg: '<url>', description: 'where verified events go (webhook ingress off without it)' },
  { name: 'webhook-path', arg: '<path>', description: 'path of the webhook ingress', defaultText: DEFAULT_WEBHOOK_PATH },
  {
    name: 'webhook-secret',
    arg: '<whsec_…>',
    description: 'webhook signing secret; repeat for rotation (all are accepted)',
    repeatable: true,
    secret: true,
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
  { name: 'webhook-required-header', arg: '<"Name: value">', description: 'header every delivery must carry (not forwarded)', secret: true },
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
];

/** What dedup and the queue take from Redis (after the Redis flags in help). */
export const WEBHOOK_SHARED_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'webhook-dedup-lease-ms',
    arg: '<ms>',
    description: 'with Redis: how long a replica holds an event it forwards (must exceed --webhook-forward-timeout-ms)',
    defaultText: `forward timeout + ${DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS}`,
  },
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
];
