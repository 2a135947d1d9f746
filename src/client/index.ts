export {
  ConsentClient,
  DEFAULT_MAX_BATCH_BODY_BYTES,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_TIMEOUT_MS,
  MAX_BATCH_CHECKS,
  MAX_FIELD_LENGTH,
  type ConsentClientOptions,
} from './consent-client.js';
export { readBatchAnswer, readCheckAnswer, type RawAnswer } from './read-answer.js';
export { holdsAt, type Allowed, type CallOptions, type CheckInput, type CheckResult, type ClientCause, type NotAllowed, type NotAllowedKind } from './types.js';
export {
  DEFAULT_FORWARD_TOLERANCE_S,
  FORWARD_SIGNATURE_HEADER,
  FORWARD_TIMESTAMP_HEADER,
  signingSecretsFrom,
  verifyForwardedEvent,
  type ForwardedEvent,
  type ForwardHeaders,
  type ForwardRefusal,
  type VerifyForwardedEventInput,
  type VerifyForwardedEventResult,
} from './verify-forwarded-event.js';
