/** The service's authorization check request; both fields are sent in every request. */
export interface CheckRequest {
  readonly userReference: string;
  readonly configKey: string;
}

/** The four pre-evaluation reasons of the interface document (Errors, 2). */
export const PRE_EVALUATION_REASONS = [
  'customer_not_found',
  'config_not_published',
  'ambiguous_config',
  'config_material_unavailable',
] as const;
export type PreEvaluationReason = (typeof PRE_EVALUATION_REASONS)[number];

/** A well-formed answer of the service, as the strict parser accepts it. */
export type ServiceDecision =
  | { readonly kind: 'allow'; readonly configKey: string; readonly validUntil: number }
  | { readonly kind: 'evaluated_denial'; readonly configKey: string }
  | { readonly kind: 'pre_evaluation_denial'; readonly reason: string };

/** Where an answer came from; the value of `x-consent-decision-source`. */
export type DecisionSource = 'cache' | 'upstream' | 'fail-closed' | 'rejected';

/**
 * A finished answer to the application, serialised once: the hot path writes `body` as is.
 * `decision` is what the app may do; only `allow` permits processing.
 */
export interface Answer {
  readonly status: 200 | 400 | 405 | 408 | 431 | 503;
  readonly decision: 'allow' | 'deny';
  readonly source: DecisionSource;
  readonly body: string;
  readonly bodyBytes: number;
  /** An ALLOW's `validUntil` (the one in `body`), so a reader need not parse the body back. */
  readonly validUntil?: number;
  /** A fail-closed answer's cause (the `error` in `body`). */
  readonly cause?: string;
}
