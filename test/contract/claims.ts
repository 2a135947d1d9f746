/**
 * Which contract test file exercises which entry of the document (`METHOD /path status`, or
 * `WEBHOOK name` for what the app receives). Each file asserts that it exercised its own claims;
 * test/contract/document.test.ts asserts that the claims and {@link NOT_PROVOKED} together are
 * exactly the document's entries, so a new entry needs a test, and a removed one its claim gone.
 */
const CHECK = '/v1/authorization/check';
const FORWARD_AUTH = '/sidecar/forward-auth';
const FORWARD_AUTH_BENEATH = '/sidecar/forward-auth/{originalPath}';
const PASSTHROUGH = '/v1/{operation}';

const each = (methods: readonly string[], path: string, statuses: readonly string[]): string[] => methods.flatMap((m) => statuses.map((s) => `${m} ${path} ${s}`));

export const FORWARD_AUTH_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const;
export const FORWARD_AUTH_BENEATH_METHODS = ['GET', 'POST'] as const;
export const WRONG_CHECK_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE'] as const;
export const PASSTHROUGH_METHODS = ['GET', 'POST'] as const;

export const CLAIMS = {
  'decision.contract.test.ts': [
    ...each(['POST'], CHECK, ['200', '400', '503']),
    ...each(WRONG_CHECK_METHODS, CHECK, ['405']),
    ...each(FORWARD_AUTH_METHODS, FORWARD_AUTH, ['200', '403', '503', '400']),
    ...each(FORWARD_AUTH_BENEATH_METHODS, FORWARD_AUTH_BENEATH, ['200', '403', '503', '400']),
    ...each(PASSTHROUGH_METHODS, PASSTHROUGH, ['400', '502', '504', 'default']),
    ...each(['DELETE'], '/sidecar/cache', ['200', '400', '503']),
    'GET /{anyOtherPath} 404',
  ],
  'ingress-admin.contract.test.ts': [
    'GET /metrics 200',
    'GET /healthz 200',
    'GET /readyz 200',
    'GET /readyz 503',
    ...each(['POST'], '/webhooks', ['200', '400', '401', '413', '503']),
    'GET /webhooks 405',
    'WEBHOOK verifiedEvent',
    'WEBHOOK redecNotificationPending',
  ],
  'batch-and-ids.contract.test.ts': each(['POST'], '/sidecar/authorization/check-batch', ['200', '400']),
} as const satisfies Record<string, readonly string[]>;

/** Entries no test provokes, each with why. */
export const NOT_PROVOKED: Readonly<Record<string, string>> = {};
