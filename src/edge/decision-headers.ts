/**
 * The sidecar's own headers on a decision, whatever carries it: an HTTP answer (check,
 * forward-auth, passthrough refusals), or the headers an ext_authz reply adds to the request it
 * lets through or writes on the one it refuses. The names are part of the contract (docs/decision-api.md,
 * docs/ext-authz-grpc.md); the `x-consent-` prefix is never taken from the service (src/decision/passthrough.ts).
 */

/** Every decision answered carries its id here (a batch: in each item's `decisionId`). */
export const DECISION_ID_HEADER = 'x-consent-decision-id';
/** Where the answer came from: `upstream`, `cache`, `fail-closed` or `rejected`. */
export const DECISION_SOURCE_HEADER = 'x-consent-decision-source';
/** An ALLOW's `validUntil` (epoch ms, decimal). */
export const VALID_UNTIL_HEADER = 'x-consent-valid-until';
/** A DENY of the service: its reason (a plain token), or `evaluated`. */
export const DENY_REASON_HEADER = 'x-consent-deny-reason';
/** No decision, or a refused request: its cause (`invalid_request`, `upstream_timeout`, …). */
export const DECISION_ERROR_HEADER = 'x-consent-decision-error';
/** Where a proxy may put the configKey of what it asks about (forward-auth, ext_authz). */
export const CONFIG_KEY_HEADER = 'x-consent-config-key';
