import type { DeliveryOutcome } from './metrics.js';

/** Reasons a delivery is refused outside authentication (label values of the rejections counter). */
export const ROUTE_REJECTIONS = ['not_found', 'method_not_allowed', 'body_too_large', 'unverified_budget_exhausted', 'body_timeout', 'body_too_slow'] as const;
export type RouteRejection = (typeof ROUTE_REJECTIONS)[number];

/** What a 200 says (`{"status": …}`): the event is the app's, the queue's, a copy, or of a type the app does not want. */
export const WEBHOOK_OK_REASONS = ['accepted', 'queued', 'duplicate', 'ignored'] as const;
/** Why a delivery could not be taken now (`{"error": …}` of a 503; the service retries). */
export const WEBHOOK_UNAVAILABLE_REASONS = [
  'app_unavailable',
  'dedup_unavailable',
  'queue_unavailable',
  'queue_full',
  'unrouted',
  'revocation_failed',
  'revocation_not_shared',
  'unverified_budget_exhausted',
  'body_timeout',
  'body_too_slow',
  'internal_error',
] as const;
export type WebhookOkReason = (typeof WEBHOOK_OK_REASONS)[number];
export type WebhookUnavailableReason = (typeof WEBHOOK_UNAVAILABLE_REASONS)[number];

/**
 * The answer to one delivery, and what the listener does with the rest of the request:
 * `keep` (the body was read), `discard` (let the unread rest flow to nowhere so the sender reads
 * the answer), `close` (read nothing more and close once answered: a sender refused for load or
 * slowness gets nothing more from us), `none` (the sender went away: nothing to answer). The
 * reasons of each status are closed sets, which the OpenAPI document lists.
 */
export type WebhookAnswer = (
  | { readonly status: 200; readonly reason: WebhookOkReason }
  | { readonly status: 503; readonly reason: WebhookUnavailableReason }
  | { readonly status: 401; readonly reason: string }
  | { readonly status: 400; readonly reason: 'invalid_envelope' | 'aborted' }
  | { readonly status: 404; readonly reason: 'not_found' }
  | { readonly status: 405; readonly reason: 'method_not_allowed' }
  | { readonly status: 413; readonly reason: 'body_too_large' }
) & {
  readonly outcome: DeliveryOutcome;
  readonly then: 'keep' | 'discard' | 'close' | 'none';
};

/** The status each refusal outside authentication is answered with. */
export const REFUSAL_STATUS = {
  not_found: 404,
  method_not_allowed: 405,
  body_too_large: 413,
  unverified_budget_exhausted: 503,
  body_timeout: 503,
  body_too_slow: 503,
} as const satisfies Record<RouteRejection, WebhookAnswer['status']>;
