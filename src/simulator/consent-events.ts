import type { ConsentChange } from './consent-store.js';

const DEFAULT_INITIAL_ACCESS_VALIDITY_MS = 30 * 86_400_000;

/**
 * Data of `consent_action.created`. The document does not show its fields; these are ours:
 * `consentActionId`, `action` (`grant`|`revoke`|`deny`), `customerId`, `userReference` (whose consent
 * changed, so a cache can purge only that customer), `consentId`, `configKey` (when known),
 * `expiresAt` (grant with expiry, epoch ms).
 */
export function consentActionData(change: ConsentChange): Record<string, unknown> {
  return {
    consentActionId: change.consentActionId,
    action: change.action,
    customerId: change.customer.customerId,
    userReference: change.customer.userReference,
    consentId: change.consent.consentId,
    ...(change.configKey ? { configKey: change.configKey } : {}),
    ...(change.expiresAt !== undefined ? { expiresAt: change.expiresAt } : {}),
  };
}

/**
 * Data of `redec.notification.required` with the documented fields, or undefined when the consent is
 * not a REDEC consent. A revocation carries `revoked_at` in place of `granted_at` and
 * `initial_access_valid_until`; `designation_id` only under `service` responsibility.
 */
export function redecNotificationData(change: ConsentChange): Record<string, unknown> | undefined {
  const redec = change.consent.redec;
  // The document: the obligation arises from a grant or a revocation only.
  if (!redec || !change.redecConsentId || change.action === 'deny') return undefined;
  const data: Record<string, unknown> = {
    notification_reason: change.action,
    redec_consent_id: change.redecConsentId,
    internal_consent_code: redec.internalConsentCode,
    customer_tenant_id: change.customer.userReference,
    consent_action_id: change.consentActionId,
    delivery_responsibility: redec.deliveryResponsibility,
    channel_policy: 'tenant_determined',
    channel: 'digital',
    finality_code: redec.finalityCode,
    objective_codes: [...redec.objectiveCodes],
    medium_code: redec.mediumCode,
  };
  if (change.action === 'grant') {
    data.granted_at = change.occurredAt;
    data.initial_access_valid_until =
      change.occurredAt + (redec.initialAccessValidityMs ?? DEFAULT_INITIAL_ACCESS_VALIDITY_MS);
  } else {
    data.revoked_at = change.occurredAt;
  }
  if (redec.deliveryResponsibility === 'service') data.designation_id = `dsg_${change.consentActionId.slice(5)}`;
  return data;
}
