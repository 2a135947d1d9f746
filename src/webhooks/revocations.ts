import type { Revocation } from '../lib/revocation-hook.js';
import type { WebhookEnvelope } from './envelope.js';

const nonEmptyString = (v: unknown): v is string => typeof v === 'string' && v !== '';

/**
 * The revocation a verified event carries, or null. Published on every verified, well-formed
 * event, whether or not the app accepts it: a revocation is a fact even if the app is down.
 *
 * - `redec.notification.required` with `notification_reason: "revoke"`: the customer in
 *   `customer_tenant_id` ("Customer identifier in the tenant", i.e. the userReference); all entries
 *   when that is missing.
 * - `consent_action.created`: the document does not show its fields, and a consent action may be a
 *   revocation, so the customer it names (`data.userReference`) or, failing that, everything.
 */
export function revocationOf(envelope: WebhookEnvelope): Revocation | null {
  const { type, data } = envelope;
  let customer: unknown;
  if (type === 'redec.notification.required') {
    if (data['notification_reason'] !== 'revoke') return null;
    customer = data['customer_tenant_id'];
  } else if (type === 'consent_action.created') {
    customer = data['userReference'];
  } else {
    return null;
  }
  return nonEmptyString(customer) ? { scope: 'user', userReference: customer } : { scope: 'all' };
}
