export type { ClaimResult, DedupStore, InFlightOutcome } from './dedup-store.js';
export type { ClaimStore, SharedAccept, SharedClaim } from './claim-store.js';
export { SharedDedup, type SharedDedupOptions } from './shared-dedup.js';
export { eventIdHeader, EVENT_ID_ENCODING_HEADER, logId, LOG_ID_CHARS, MAX_EVENT_ID_BYTES } from './event-id.js';
export type { EnqueueResult, EventQueue, QueuedEvent } from './event-queue.js';
export { parseEnvelope, type EnvelopeResult, type WebhookEnvelope } from './envelope.js';
export {
  reasonLabel,
  WEBHOOK_AUTH_ERROR_CODES,
  WebhookError,
  type WebhookAuthErrorCode,
  type WebhookErrorCode,
} from './errors.js';
export { AppClient, appUrl, FORWARDED_HEADERS, type AppClientOptions, type AppUrl, type ForwardResult } from './app-client.js';
export { AppRoutes, globMatcher, globsForward, type AppRouteSpec, type AppTarget, type RouteGlobs, type Routing } from './app-routes.js';
export { buildWebhooks, type WebhookPorts, type Webhooks } from './build.js';
export type { DeliveryMode, DeliveryResult, VerifiedEvent } from './delivery-mode.js';
export { PassthroughMode, type PassthroughModeOptions } from './passthrough-mode.js';
export { QueueMode, type QueueModeOptions } from './queue-mode.js';
export { WebhookIngress, type WebhookIngressDeps } from './ingress.js';
export {
  ROUTE_REJECTIONS,
  WEBHOOK_OK_REASONS,
  WEBHOOK_UNAVAILABLE_REASONS,
  type RouteRejection,
  type WebhookAnswer,
  type WebhookOkReason,
  type WebhookUnavailableReason,
} from './answers.js';
export {
  appHeaders,
  ATTEMPT_HEADER,
  deadSubject,
  decodeStored,
  deliveryIdOf,
  OUT_OF_ORDER_HEADER,
  replaySubject,
  reverify,
  storedDeliveryMaxBytes,
  storeDelivery,
  VERIFIED_HEADER,
  type DeliveryFacts,
  type Reverified,
  type StoredDelivery,
} from './stored-delivery.js';
export type { AcceptedMarks, AdvertBounds, Enqueued, EnqueueOutcome, ForwardClaim, QueueBatch, QueueEntry, QueueStats, QueueStore, ReadBounds, RouterAdvert, RouterListing } from './queue-store.js';
export { backoffMs, QUEUE_BACKOFF_MAX_MS, QUEUE_BACKOFF_MIN_MS } from './queue-delivery.js';
export { RouterDirectory, ROUTES_ADVERTISE_INTERVAL_MS, ROUTES_TTL_MS } from './queue-routers.js';
export { QUEUE_CONCURRENCY, QUEUE_READ_BATCH_BYTES, QUEUE_STALE_CONSUMER_MS, QueueWorker, type QueueWorkerOptions } from './queue-worker.js';
export { DEAD_LETTER_PAGE, DEAD_LETTER_PAGE_BYTES, deadLetterBounds, listDeadLetters, replayDeadLetters, type DeadLetter, type ReplayResult } from './dead-letters.js';
export { MarkerMacs, type MarkerKind } from './markers.js';
export { MemoryDedupStore, type MemoryDedupStoreOptions } from './memory-dedup-store.js';
export {
  createQueueMetrics,
  createSharedDedupMetrics,
  createWebhookMetrics,
  markerMismatchCounter,
  type DeliveryOutcome,
  type MarkerMismatch,
  QUEUE_FORWARD_OUTCOMES,
  type QueueForwardOutcome,
  type QueueMetrics,
  type SharedDedupMetrics,
  type WebhookMetrics,
} from './metrics.js';
export { readUnverifiedBody, SlowBodyWatch, type UnverifiedBodyResult } from './read-unverified-body.js';
export { UnverifiedBudget, type BudgetHolder } from './unverified-budget.js';
export { revocationOf } from './revocations.js';
export { hmacHex, signatureHeaders, SIGNATURE_SCHEME_PREFIX } from './signature.js';
export { FORWARD_SIGNATURE_HEADER, FORWARD_TIMESTAMP_HEADER, ForwardSigner } from './forward-signature.js';
export {
  checkDeliveryHeaders,
  parseTimestamp,
  startBodyVerification,
  verifyBodySignature,
  verifyDelivery,
  type BodyVerifier,
  type CheckedHeaders,
  type DeliveryHeaders,
  type HeaderCheckOptions,
  type HeaderCheckResult,
  type VerifyFailure,
  type VerifyResult,
  type Verified,
} from './verify.js';
