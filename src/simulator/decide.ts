import type { ConsentStore } from './consent-store.js';
import type { FixtureConsent, FixtureScope } from './fixture-types.js';

/** The four pre-evaluation reasons of the interface document. */
export type PreEvaluationReason =
  | 'customer_not_found'
  | 'config_not_published'
  | 'ambiguous_config'
  | 'config_material_unavailable';

/** The three response forms of `POST /v1/authorization/check`. */
export type CheckResponse =
  | { readonly decision: 'ALLOW'; readonly configKey: string; readonly validUntil: number }
  | { readonly decision: 'DENY'; readonly configKey: string }
  | { readonly decision: 'DENY'; readonly reason: PreEvaluationReason };

/**
 * Decides one check exactly as the interface document says. Order of the pre-evaluation checks:
 * customer, published version, unambiguous-Flow rule, template material (the document lists them in
 * this order). `decisionLifetimeMs` bounds `validUntil` (epoch ms) together with the consent's expiry.
 */
export function decide(
  store: ConsentStore,
  request: { userReference: string; configKey: string },
  now: number,
  decisionLifetimeMs: number,
): CheckResponse {
  const customer = store.customer(request.userReference);
  if (!customer) return { decision: 'DENY', reason: 'customer_not_found' };
  const version = store.latestPublished(request.configKey);
  if (!version) return { decision: 'DENY', reason: 'config_not_published' };
  const target = unambiguous(version.consents);
  if (!target) return { decision: 'DENY', reason: 'ambiguous_config' };
  if (version.materialAvailable === false) return { decision: 'DENY', reason: 'config_material_unavailable' };

  const denied = { decision: 'DENY', configKey: request.configKey } as const;
  const record = store.record(customer.customerId, target.consent.consentId);
  if (!record || record.status !== 'granted') return denied;
  if (record.expiresAt !== undefined && record.expiresAt <= now) return denied;
  if (record.scopes && !record.scopes.has(target.scope.scopeId)) return denied;
  const validUntil = Math.min(now + decisionLifetimeMs, record.expiresAt ?? Number.POSITIVE_INFINITY);
  return { decision: 'ALLOW', configKey: request.configKey, validUntil };
}

/** Exactly one consent, with exactly one required scope, with exactly one combination. */
function unambiguous(consents: readonly FixtureConsent[]): { consent: FixtureConsent; scope: FixtureScope } | undefined {
  if (consents.length !== 1) return undefined;
  const consent = consents[0] as FixtureConsent;
  const required = consent.scopes.filter((s) => s.required);
  if (required.length !== 1) return undefined;
  const scope = required[0] as FixtureScope;
  if (scope.combinations.length !== 1) return undefined;
  return { consent, scope };
}
