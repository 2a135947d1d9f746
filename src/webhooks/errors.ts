import { SidecarError } from '../lib/errors.js';

/**
 * Why a delivery was refused before its envelope was read (all answered 401). Each is one clause of
 * the interface document's Authentication part, plus the portal's optional custom header.
 */
export type WebhookAuthErrorCode =
  | 'ERR_WEBHOOK_TIMESTAMP_MISSING'
  | 'ERR_WEBHOOK_SIGNATURE_MISSING'
  | 'ERR_WEBHOOK_SIGNATURE_SCHEME'
  | 'ERR_WEBHOOK_TIMESTAMP_INVALID'
  | 'ERR_WEBHOOK_TIMESTAMP_TOO_OLD'
  | 'ERR_WEBHOOK_TIMESTAMP_TOO_NEW'
  | 'ERR_WEBHOOK_SIGNATURE_MISMATCH'
  | 'ERR_WEBHOOK_REQUIRED_HEADER_MISSING'
  | 'ERR_WEBHOOK_REQUIRED_HEADER_MISMATCH';

/** Every code the webhook capability produces. */
export type WebhookErrorCode =
  | WebhookAuthErrorCode
  | 'ERR_WEBHOOK_BODY_TOO_LARGE'
  | 'ERR_WEBHOOK_INVALID_ENVELOPE'
  | 'ERR_WEBHOOK_FORWARD_FAILED'
  /** The shared dedup store did not answer in time: whether another replica holds the event is unknown. */
  | 'ERR_WEBHOOK_DEDUP_UNKNOWN';

/** All authentication codes, in the order the checks run. */
export const WEBHOOK_AUTH_ERROR_CODES: readonly WebhookAuthErrorCode[] = [
  'ERR_WEBHOOK_REQUIRED_HEADER_MISSING',
  'ERR_WEBHOOK_REQUIRED_HEADER_MISMATCH',
  'ERR_WEBHOOK_TIMESTAMP_MISSING',
  'ERR_WEBHOOK_SIGNATURE_MISSING',
  'ERR_WEBHOOK_SIGNATURE_SCHEME',
  'ERR_WEBHOOK_TIMESTAMP_INVALID',
  'ERR_WEBHOOK_TIMESTAMP_TOO_OLD',
  'ERR_WEBHOOK_TIMESTAMP_TOO_NEW',
  'ERR_WEBHOOK_SIGNATURE_MISMATCH',
];

/** A webhook failure with a stable code; tests assert the code, never the message. */
export class WebhookError extends SidecarError<WebhookErrorCode> {}

/**
 * `ERR_WEBHOOK_TIMESTAMP_TOO_OLD` → `timestamp_too_old`: the metric label and log field for a code
 * (a closed set, since the codes are).
 */
export function reasonLabel(code: WebhookErrorCode): string {
  return code.slice('ERR_WEBHOOK_'.length).toLowerCase();
}
