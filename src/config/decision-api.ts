import type { OptionSpec } from './option-spec.js';
import { HEADER_NAME, type Reader } from './reader.js';

// The decision listener's own bounds: the largest request, how often pre-evaluation denials are
// logged, and where forward-auth finds the user reference.

/** Largest accepted decision request body (bytes). */
export const DEFAULT_MAX_REQUEST_BYTES = 16_384;
/** At most one warn log per (reason, configKey), and 10 in all, per this interval (ms). */
export const DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS = 60_000;
/** Forward-auth: the request header that carries the user reference (lower case). */
export const DEFAULT_FORWARD_AUTH_USER_HEADER = 'x-user-reference';

export const DECISION_API_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'max-request-bytes',
    arg: '<bytes>',
    description: 'largest decision request body',
    defaultText: String(DEFAULT_MAX_REQUEST_BYTES),
  },
  {
    name: 'pre-evaluation-log-interval-ms',
    arg: '<ms>',
    description: 'at most one warn log per (reason, configKey), and 10 in all, per interval',
    defaultText: String(DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS),
  },
  {
    name: 'forward-auth-user-header',
    arg: '<name>',
    description: 'forward-auth and gRPC ext_authz: the request header that carries the user reference (the proxy sets it; it must strip the client\'s)',
    defaultText: DEFAULT_FORWARD_AUTH_USER_HEADER,
  },
];

/** The decision listener's bounds (`--max-request-bytes`, `--pre-evaluation-log-interval-ms`). */
export interface DecisionApiConfig {
  readonly maxRequestBytes: number;
  readonly preEvaluationLogIntervalMs: number;
}

/** The decision API's own bounds. */
export function readDecisionApi(r: Reader): DecisionApiConfig {
  const maxRequestBytes = r.int('max-request-bytes', DEFAULT_MAX_REQUEST_BYTES, 256, 1_048_576);
  const preEvaluationLogIntervalMs = r.int('pre-evaluation-log-interval-ms', DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS, 0, 86_400_000);
  return Object.freeze({ maxRequestBytes, preEvaluationLogIntervalMs });
}

/** Headers a proxy or node itself owns, or that carry something else: never the user reference. */
const FORBIDDEN_USER_HEADER = /^(host|content-length|content-type|transfer-encoding|connection|keep-alive|upgrade|te|trailer|cookie|cache-control|x-consent-config-key)$/;

/** Forward-auth (`/sidecar/forward-auth`) for a proxy in the pod. */
export interface ForwardAuthConfig {
  /** Lower-case name of the header the proxy puts the user reference in. */
  readonly userHeader: string;
}

/** `--forward-auth-user-header`, lower-cased. */
export function readForwardAuth(r: Reader): ForwardAuthConfig {
  const raw = r.raw('forward-auth-user-header');
  const name = raw ? raw.value.trim().toLowerCase() : DEFAULT_FORWARD_AUTH_USER_HEADER;
  if (raw && !HEADER_NAME.test(name)) r.problem(raw.label, `must be an HTTP header name, got "${raw.value}"`);
  else if (raw && FORBIDDEN_USER_HEADER.test(name)) r.problem(raw.label, `"${name}" cannot carry the user reference`);
  return Object.freeze({ userHeader: name });
}
