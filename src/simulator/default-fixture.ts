import type { Fixture, FixtureConsent, FixtureFlowVersion } from './fixture-types.js';

const DAY_MS = 86_400_000;

const marketingConsent: FixtureConsent = {
  consentId: 'con_marketing_email',
  scopes: [
    { scopeId: 'scp_email', required: true, combinations: [{ requirement: 'consent', use: 'email_marketing' }] },
    // Optional scopes do not count for the unambiguous-Flow rule.
    { scopeId: 'scp_newsletter', required: false, combinations: [{ requirement: 'consent', use: 'newsletter' }] },
  ],
};

function single(consent: FixtureConsent, version = 1, extra: Partial<FixtureFlowVersion> = {}): FixtureFlowVersion {
  return { version, published: true, materialAvailable: true, consents: [consent], ...extra };
}

/**
 * The shipped demo data (a TS module so it lands in `dist` without a copy step). Customers and what
 * `POST /v1/authorization/check` answers for them:
 *
 * | userReference | configKey | answer |
 * |---|---|---|
 * | `alice` | `marketing-email` | ALLOW (granted for 30 days) |
 * | `bob` | `marketing-email` | evaluated DENY (revoked) |
 * | `carol` | `marketing-email` | evaluated DENY (expired) |
 * | `dave` | `marketing-email` | evaluated DENY (grant does not cover the required scope) |
 * | `erin` | `marketing-email` | evaluated DENY (no consent) |
 * | `alice` | `credit-report` | ALLOW (REDEC, tenant notifies) |
 * | `alice` | `open-finance` | ALLOW (REDEC, service notifies) |
 * | `nobody` | any | DENY `customer_not_found` |
 * | any | `loyalty-program` | DENY `config_not_published` (draft only) |
 * | any | `onboarding-bundle` | DENY `ambiguous_config` (two consents) |
 * | any | `partner-sharing` | DENY `config_material_unavailable` |
 */
export const DEFAULT_FIXTURE: Fixture = {
  customers: [
    { userReference: 'alice', customerId: 'cus_alice' },
    { userReference: 'bob', customerId: 'cus_bob' },
    { userReference: 'carol', customerId: 'cus_carol' },
    { userReference: 'dave', customerId: 'cus_dave' },
    { userReference: 'erin', customerId: 'cus_erin' },
  ],
  flows: [
    {
      configKey: 'marketing-email',
      versions: [
        // Version 1 had two required scopes; version 2 (the latest published) fixed that.
        single(
          {
            consentId: 'con_marketing_email',
            scopes: marketingConsent.scopes.map((s) => ({ ...s, required: true })),
          },
          1,
        ),
        single(marketingConsent, 2),
        single(marketingConsent, 3, { published: false }),
      ],
    },
    {
      configKey: 'credit-report',
      versions: [
        single({
          consentId: 'con_redec_credit',
          scopes: [{ scopeId: 'scp_credit', required: true, combinations: [{ requirement: 'redec', use: 'credit_report' }] }],
          redec: {
            deliveryResponsibility: 'tenant',
            internalConsentCode: 'ICC-CREDIT-01',
            finalityCode: 'FIN-CREDIT',
            objectiveCodes: ['OBJ-RISK'],
            mediumCode: 'MED-WEB',
            initialAccessValidityMs: 30 * DAY_MS,
          },
        }),
      ],
    },
    {
      configKey: 'open-finance',
      versions: [
        single({
          consentId: 'con_redec_open_finance',
          scopes: [{ scopeId: 'scp_accounts', required: true, combinations: [{ requirement: 'redec', use: 'account_data' }] }],
          redec: {
            deliveryResponsibility: 'service',
            internalConsentCode: 'ICC-OF-01',
            finalityCode: 'FIN-OF',
            objectiveCodes: ['OBJ-PFM', 'OBJ-SCORING'],
            mediumCode: 'MED-APP',
          },
        }),
      ],
    },
    { configKey: 'loyalty-program', versions: [single(marketingConsent, 1, { published: false })] },
    {
      configKey: 'onboarding-bundle',
      versions: [
        {
          version: 1,
          published: true,
          consents: [
            marketingConsent,
            {
              consentId: 'con_profiling',
              scopes: [{ scopeId: 'scp_profile', required: true, combinations: [{ requirement: 'consent', use: 'profiling' }] }],
            },
          ],
        },
      ],
    },
    { configKey: 'partner-sharing', versions: [single(marketingConsent, 1, { materialAvailable: false })] },
  ],
  consentStates: [
    { userReference: 'alice', consentId: 'con_marketing_email', status: 'granted', expiresInMs: 30 * DAY_MS },
    { userReference: 'alice', consentId: 'con_redec_credit', status: 'granted', expiresInMs: 30 * DAY_MS },
    { userReference: 'alice', consentId: 'con_redec_open_finance', status: 'granted', expiresInMs: 90 * DAY_MS },
    { userReference: 'bob', consentId: 'con_marketing_email', status: 'revoked' },
    { userReference: 'carol', consentId: 'con_marketing_email', status: 'expired' },
    { userReference: 'dave', consentId: 'con_marketing_email', status: 'granted', scopes: ['scp_newsletter'] },
  ],
};
