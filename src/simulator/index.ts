export {
  startSimulator,
  DEFAULT_SIMULATOR_API_KEY,
  DEFAULT_DECISION_LIFETIME_MS,
  DEFAULT_WEBHOOK_ATTEMPT_TIMEOUT_MS,
  type SimulatorOptions,
  type SimulatorHandle,
} from './simulator.js';
export { SimulatorError, type SimulatorErrorCode } from './errors.js';
export { DEFAULT_FIXTURE } from './default-fixture.js';
export { validateFixture } from './fixture-validate.js';
export type * from './fixture-types.js';
export type { CheckResponse, PreEvaluationReason } from './decide.js';
export { EVENT_TYPES, DSR_EVENT_TYPES, type EventEnvelope, type EventType } from './event-types.js';
export type { FaultSpec } from './faults.js';
export type { ConsentActionResult } from './simulator-core.js';
export type { ConsentTarget, GrantOptions } from './consent-store.js';
export type { WebhookEndpoint, WebhookEndpointInput } from './webhook-endpoints.js';
export type { DeliveryTimeline, DeliveryAttempt, DeliveryState } from './webhook-sender.js';
export {
  MAX_DELIVERY_ATTEMPTS,
  FIRST_RETRY_DELAY_MS,
  MAX_RETRY_DELAY_MS,
  RETRY_BACKOFF_FACTOR,
  retryDelayMs,
} from './backoff.js';
export type { NotificationRequirement, NotificationRequirementPage, NotificationStatus } from './redec-requirements.js';
