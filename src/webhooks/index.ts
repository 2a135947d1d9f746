export type { ClaimResult, DedupStore, InFlightOutcome } from './dedup-store.js';
export type { EnqueueResult, EventQueue, QueuedEvent } from './event-queue.js';
export { parseEnvelope, type EnvelopeResult, type WebhookEnvelope } from './envelope.js';
export {
  reasonLabel,
  WEBHOOK_AUTH_ERROR_CODES,
  WebhookError,
  type WebhookAuthErrorCode,
  type WebhookErrorCode,
} from './errors.js';
export { FORWARDED_HEADERS, Forwarder, type ForwarderOptions, type ForwardResult } from './forwarder.js';
export {
  OUT_OF_ORDER_HEADER,
  ROUTE_REJECTIONS,
  VERIFIED_HEADER,
  forwardHeaders,
  WebhookIngress,
  type IngressAnswer,
  type RouteRejection,
  type WebhookIngressDeps,
} from './ingress.js';
export { MemoryDedupStore, type MemoryDedupStoreOptions } from './memory-dedup-store.js';
export { createWebhookMetrics, type DeliveryOutcome, type WebhookMetrics } from './metrics.js';
export { readUnverifiedBody, type UnverifiedBodyResult } from './read-unverified-body.js';
export { UnverifiedBudget } from './unverified-budget.js';
export { applyRevocation, revocationOf, type RevocationEffect } from './revocations.js';
export { hmacHex, signatureHeaders, SIGNATURE_SCHEME_PREFIX } from './signature.js';
export {
  checkDeliveryHeaders,
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
