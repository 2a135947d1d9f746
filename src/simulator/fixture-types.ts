/** One requirement/use combination of a scope. */
export interface FixtureCombination {
  readonly requirement: string;
  readonly use: string;
}

/** A scope of a consent; only `required` scopes count for the unambiguous-Flow rule. */
export interface FixtureScope {
  readonly scopeId: string;
  readonly required: boolean;
  readonly combinations: readonly FixtureCombination[];
}

/**
 * REDEC settings of a consent. A grant or revocation of such a consent raises
 * `redec.notification.required` and a notification requirement.
 */
export interface FixtureRedec {
  readonly deliveryResponsibility: 'service' | 'tenant';
  readonly internalConsentCode: string;
  readonly finalityCode: string;
  readonly objectiveCodes: readonly string[];
  readonly mediumCode: string;
  /** Length of the initial access validity after a grant (ms); default 30 days. */
  readonly initialAccessValidityMs?: number;
}

export interface FixtureConsent {
  readonly consentId: string;
  readonly scopes: readonly FixtureScope[];
  readonly redec?: FixtureRedec;
}

/** One version of a Flow. The check resolves the highest `version` whose `published` is true. */
export interface FixtureFlowVersion {
  readonly version: number;
  readonly published: boolean;
  /** False simulates template material that cannot be loaded (`config_material_unavailable`). Default true. */
  readonly materialAvailable?: boolean;
  readonly consents: readonly FixtureConsent[];
}

export interface FixtureFlow {
  readonly configKey: string;
  readonly versions: readonly FixtureFlowVersion[];
}

export interface FixtureCustomer {
  readonly userReference: string;
  readonly customerId: string;
}

/** `none` is the same as having no entry. */
export type ConsentStatus = 'granted' | 'revoked' | 'expired' | 'none';

/**
 * A customer's state for one consent. A granted consent lasts until `expiresAt` (epoch ms) or
 * `expiresInMs` after the simulator starts (give at most one; neither means no expiry) and covers
 * `scopes` (scope ids; default: every scope of the consent).
 */
export interface FixtureConsentState {
  readonly userReference: string;
  readonly consentId: string;
  readonly status: ConsentStatus;
  readonly expiresAt?: number;
  readonly expiresInMs?: number;
  readonly scopes?: readonly string[];
  readonly redecConsentId?: string;
}

/**
 * The simulator's data. Example (JSON):
 * ```json
 * { "customers": [{ "userReference": "alice", "customerId": "cus_alice" }],
 *   "flows": [{ "configKey": "marketing-email", "versions": [{ "version": 1, "published": true,
 *     "consents": [{ "consentId": "con_marketing", "scopes": [{ "scopeId": "scp_email", "required": true,
 *       "combinations": [{ "requirement": "consent", "use": "email_marketing" }] }] }] }] }],
 *   "consentStates": [{ "userReference": "alice", "consentId": "con_marketing", "status": "granted" }] }
 * ```
 */
export interface Fixture {
  readonly customers: readonly FixtureCustomer[];
  readonly flows: readonly FixtureFlow[];
  readonly consentStates: readonly FixtureConsentState[];
}
