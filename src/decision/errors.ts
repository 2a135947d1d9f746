import { SidecarError } from '../lib/errors.js';

/** Why no decision could be had. Every code maps to one fail-closed `cause`. */
export type DecisionErrorCode =
  | 'ERR_UPSTREAM_TIMEOUT'
  | 'ERR_UPSTREAM_NETWORK'
  | 'ERR_UPSTREAM_STATUS_5XX'
  | 'ERR_UPSTREAM_STATUS_4XX'
  | 'ERR_UPSTREAM_STATUS_OTHER'
  | 'ERR_UPSTREAM_MALFORMED'
  | 'ERR_UPSTREAM_CONTRADICTORY'
  | 'ERR_UPSTREAM_EXPIRED'
  | 'ERR_CIRCUIT_OPEN'
  | 'ERR_OVERLOADED';

export class DecisionError extends SidecarError<DecisionErrorCode> {
  /**
   * An `ERR_UPSTREAM_TIMEOUT` of a check handed to the service with less than
   * {@link FAIR_BUDGET_FRACTION} of its deadline left, because it first waited inside the sidecar
   * for a connection: the service never had a fair budget for it, so the circuit breaker does not
   * count it (the app still gets `upstream_timeout`). False for every other error.
   */
  readonly sentLate: boolean;

  constructor(code: DecisionErrorCode, message: string, options?: { cause?: unknown; sentLate?: boolean }) {
    super(code, message, options);
    this.sentLate = options?.sentLate === true;
  }
}

/**
 * A timeout counts against the service only when it had at least this fraction of the deadline
 * (`--upstream-timeout-ms`), from the moment the check was handed to it (its connection taken, its
 * request written or its connection being opened), to the deadline.
 */
export const FAIR_BUDGET_FRACTION = 1 / 2;

/** The closed set of `error` values in a 503 body and of the `cause` metric label. */
export const FAIL_CLOSED_CAUSES = [
  'upstream_timeout',
  'upstream_unreachable',
  'upstream_5xx',
  'upstream_4xx',
  'upstream_unexpected_status',
  'malformed_response',
  'contradictory_response',
  'expired_on_arrival',
  'circuit_open',
  'overload',
  'internal_error',
] as const;
export type FailClosedCause = (typeof FAIL_CLOSED_CAUSES)[number];

const CAUSE_BY_CODE: Record<DecisionErrorCode, FailClosedCause> = {
  ERR_UPSTREAM_TIMEOUT: 'upstream_timeout',
  ERR_UPSTREAM_NETWORK: 'upstream_unreachable',
  ERR_UPSTREAM_STATUS_5XX: 'upstream_5xx',
  ERR_UPSTREAM_STATUS_4XX: 'upstream_4xx',
  ERR_UPSTREAM_STATUS_OTHER: 'upstream_unexpected_status',
  ERR_UPSTREAM_MALFORMED: 'malformed_response',
  ERR_UPSTREAM_CONTRADICTORY: 'contradictory_response',
  ERR_UPSTREAM_EXPIRED: 'expired_on_arrival',
  ERR_CIRCUIT_OPEN: 'circuit_open',
  ERR_OVERLOADED: 'overload',
};

/** Any error, known or not, as a fail-closed cause; unknown errors are `internal_error`. */
export function causeOf(err: unknown): FailClosedCause {
  return err instanceof DecisionError ? CAUSE_BY_CODE[err.code] : 'internal_error';
}

/**
 * Whether an error says the service is unhealthy (feeds the circuit breaker). A timeout of a check
 * sent late ({@link DecisionError.sentLate}) does not: the service did not have a fair budget for it.
 */
export function isServiceFailure(err: unknown): boolean {
  if (!(err instanceof DecisionError)) return false;
  switch (err.code) {
    case 'ERR_UPSTREAM_TIMEOUT':
      return !err.sentLate;
    case 'ERR_UPSTREAM_NETWORK':
    case 'ERR_UPSTREAM_STATUS_5XX':
    case 'ERR_UPSTREAM_MALFORMED':
      return true;
    case 'ERR_UPSTREAM_STATUS_4XX':
    case 'ERR_UPSTREAM_STATUS_OTHER':
    case 'ERR_UPSTREAM_CONTRADICTORY':
    case 'ERR_UPSTREAM_EXPIRED':
    case 'ERR_CIRCUIT_OPEN':
    case 'ERR_OVERLOADED':
      return false;
  }
}
