import type { AllowAnswer } from './allow-answer.js';

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

/** Where an answer came from; the value of `x-consent-decision-source`. */
export type DecisionSource = 'cache' | 'upstream' | 'fail-closed' | 'rejected';

/**
 * A DENY answer's body: a JSON object whose first member says DENY, whatever follows. The service's
 * ALLOW body comes only with an {@link AllowAnswer}.
 */
export type DenyBody = `{"decision":"DENY",${string}`;

/** Every answer but an ALLOW: the service's denials, no decision (503), a refused request (4xx). */
export interface DenyAnswer {
  readonly status: 200 | 400 | 405 | 408 | 431 | 503;
  readonly decision: 'deny';
  readonly source: DecisionSource;
  readonly body: DenyBody;
  readonly bodyBytes: number;
  /** A fail-closed answer's cause (the `error` in `body`). */
  readonly cause?: string;
}

/**
 * A finished answer to the application, serialised once: the hot path writes `body` as is.
 * `decision` is what the app may do; only an {@link AllowAnswer} (`decision: 'allow'`), which only
 * an ALLOW the fail-closed parser accepted can make, permits processing.
 */
export type Answer = DenyAnswer | AllowAnswer;
