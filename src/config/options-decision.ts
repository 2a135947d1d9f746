import { secretFlagWarning, type OptionSpec } from './option-spec.js';

// The decision capability's flags and defaults: the service, its pool and breaker, the ALLOW cache,
// the decision API, forward-auth, the decision log.

/** Upstream request deadline per check, retries included (ms). */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 2000;
/** Keep-alive connections to the service (undici pool size). */
export const DEFAULT_UPSTREAM_CONNECTIONS = 64;
/** Checks waiting on the service at once before new misses are shed with 503 `overload`. */
export const DEFAULT_UPSTREAM_MAX_IN_FLIGHT = 1024;
/** Deadline of one passthrough `/v1/*` request (ms). */
export const DEFAULT_PASSTHROUGH_TIMEOUT_MS = 10_000;
/** Consecutive upstream failures that open the circuit breaker. */
export const DEFAULT_BREAKER_FAILURE_THRESHOLD = 5;
/** How long the breaker stays open before a half-open probe (ms). */
export const DEFAULT_BREAKER_COOLDOWN_MS = 5000;
/** ALLOW cache size in entries; 0 disables the cache. */
export const DEFAULT_CACHE_MAX_ENTRIES = 100_000;
/** An entry dies this long before `validUntil` (ms). */
export const DEFAULT_CACHE_SAFETY_MARGIN_MS = 1000;
/** No entry lives longer than this (ms), whatever `validUntil` says. */
export const DEFAULT_CACHE_MAX_TTL_MS = 3_600_000;
/** Refresh-ahead window (ms): an entry read this close to its death is asked again in the background; 0 = off. */
export const DEFAULT_CACHE_REFRESH_AHEAD_MS = 0;
/** Largest accepted decision request body (bytes). */
export const DEFAULT_MAX_REQUEST_BYTES = 16_384;
/** At most one warn log per (reason, configKey), and 10 in all, per this interval (ms). */
export const DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS = 60_000;
/** Forward-auth: the request header that carries the user reference (lower case). */
export const DEFAULT_FORWARD_AUTH_USER_HEADER = 'x-user-reference';

/** Flags shared by every command that talks to the service (`serve`, `check`, `redec pending`). */
export const UPSTREAM_OPTIONS: readonly OptionSpec[] = [
  { name: 'upstream-url', arg: '<url>', description: "the consent service's base URL (required)" },
  { name: 'api-key', arg: '<key>', description: 'API key sent as Authorization: Bearer; never logged', secret: true },
  { name: 'api-key-file', arg: '<path>', description: 'file holding the API key; re-read when it changes' },
  {
    name: 'upstream-timeout-ms',
    arg: '<ms>',
    description: 'whole deadline of one check, retries included',
    defaultText: String(DEFAULT_UPSTREAM_TIMEOUT_MS),
  },
];

/** The pool, the breaker, the ALLOW cache, the decision API and forward-auth (after the listeners in help). */
export const DECISION_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'upstream-connections',
    arg: '<n>',
    description: 'keep-alive connections to the service',
    defaultText: String(DEFAULT_UPSTREAM_CONNECTIONS),
  },
  {
    name: 'upstream-max-in-flight',
    arg: '<n>',
    description: 'checks waiting on the service at once; beyond, 503 overload',
    defaultText: String(DEFAULT_UPSTREAM_MAX_IN_FLIGHT),
  },
  {
    name: 'passthrough-timeout-ms',
    arg: '<ms>',
    description: 'deadline of one passthrough /v1/* request',
    defaultText: String(DEFAULT_PASSTHROUGH_TIMEOUT_MS),
  },
  {
    name: 'breaker-failure-threshold',
    arg: '<n>',
    description: 'consecutive upstream failures that open the circuit breaker',
    defaultText: String(DEFAULT_BREAKER_FAILURE_THRESHOLD),
  },
  {
    name: 'breaker-cooldown-ms',
    arg: '<ms>',
    description: 'time the breaker stays open before a half-open probe',
    defaultText: String(DEFAULT_BREAKER_COOLDOWN_MS),
  },
  {
    name: 'cache-max-entries',
    arg: '<n>',
    description: 'ALLOW cache size (0 disables the cache)',
    defaultText: String(DEFAULT_CACHE_MAX_ENTRIES),
  },
  {
    name: 'cache-safety-margin-ms',
    arg: '<ms>',
    description: 'an entry dies this long before validUntil',
    defaultText: String(DEFAULT_CACHE_SAFETY_MARGIN_MS),
  },
  {
    name: 'cache-max-ttl-ms',
    arg: '<ms>',
    description: 'no entry lives longer than this',
    defaultText: String(DEFAULT_CACHE_MAX_TTL_MS),
  },  {
    name: 'cache-refresh-ahead-ms',
    arg: '<ms>',
    description: 'an entry read within this long of its death is asked again in the background, once (0: off)',
    defaultText: String(DEFAULT_CACHE_REFRESH_AHEAD_MS),
  },

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
    description: 'forward-auth: the request header that carries the user reference (the proxy sets it; it must strip the client\'s)',
    defaultText: DEFAULT_FORWARD_AUTH_USER_HEADER,
  },
];

/** Decision log: share of decisions written (1 = all). */
export const DEFAULT_DECISION_LOG_SAMPLE_RATE = 1;
/** Decision log: bytes waiting to be written before lines are dropped (and counted). */
export const DEFAULT_DECISION_LOG_BUFFER_BYTES = 1_048_576;

/** The optional decision log (off by default): one JSON line per decision, never the user reference. */
export const DECISION_LOG_OPTIONS: readonly OptionSpec[] = [
  { name: 'decision-log', arg: '<off|stdout|path>', description: 'write one JSON line per decision to stdout or to a file (appended)', defaultText: 'off' },
  {
    name: 'decision-log-sample-rate',
    arg: '<0..1>',
    description: 'share of decisions written',
    defaultText: String(DEFAULT_DECISION_LOG_SAMPLE_RATE),
  },
  {
    name: 'decision-log-hash-key',
    arg: '<key>',
    description: 'HMAC key for the user reference hash (16+ characters); random per process when absent',
    secret: true,
  },
  { name: 'decision-log-hash-key-file', arg: '<path>', description: 'file holding the HMAC key; re-read when it changes' },
  {
    name: 'decision-log-buffer-bytes',
    arg: '<bytes>',
    description: 'bytes waiting to be written before lines are dropped (counted)',
    defaultText: String(DEFAULT_DECISION_LOG_BUFFER_BYTES),
  },
];
