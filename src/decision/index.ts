export { AllowCache, cacheKey, SWEEP_BUDGET, type AllowDecision, type CacheHit } from './allow-cache.js';
export { DATE_RESOLUTION_SLACK_MS, deathOf } from './cache-death.js';
export { decisionAnswer, failClosedAnswer, methodNotAllowedAnswer, rejectedAnswer, METHOD_NOT_ALLOWED_ANSWER } from './answers.js';
export { CircuitBreaker, BREAKER_STATES, type BreakerState, type BreakerOptions } from './breaker.js';
export { DecisionLog, type DecisionLogDeps, type DecisionLogLine, type DecisionLogSink } from './decision-log.js';
export { DecisionError, causeOf, FAIL_CLOSED_CAUSES, type DecisionErrorCode, type FailClosedCause } from './errors.js';
export { DecisionMetrics, DECISION_ROUTES, UPSTREAM_OUTCOMES, type DecisionRoute } from './metrics.js';
export { parseCheckResponse, type UpstreamResponse, type ParsedDecision } from './parse-response.js';
export { Passthrough, PASSTHROUGH_METHODS } from './passthrough.js';
export { PreEvaluationLog } from './pre-evaluation-log.js';
export { cacheRevocationHook } from './revocation-seam.js';
export { parseCheckRequest, isInvalidRequest, MAX_FIELD_LENGTH, type InvalidRequest } from './request.js';
export { DecisionService, type CheckTransport, type DecideOptions, type DecisionServiceOptions } from './service.js';
export { PRE_EVALUATION_REASONS, type Answer, type CheckRequest, type DecisionSource, type ServiceDecision } from './types.js';
export { UpstreamClient, MAX_UPSTREAM_BODY_BYTES } from './upstream-client.js';
export {
  createInvalidationMetrics,
  FleetInvalidation,
  INVALIDATION_POLL_INTERVAL_MS,
  type CatchUpPurgeCause,
  type FleetInvalidationOptions,
  type InvalidationEntry,
  type InvalidationLog,
  type InvalidationMetrics,
  type InvalidationPage,
} from './fleet-invalidation.js';
