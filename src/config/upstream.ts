import { ConfigError } from './errors.js';
import { envName, type OptionSpec } from './option-spec.js';
import { Reader, type RawEnv, type RawFlags } from './reader.js';
import type { Secret, SecretParser } from './secret.js';

// The decision capability's way to the service: where it is, its key, the deadline of a check, the
// connection pool, the in-flight bound, the passthrough's deadline and the circuit breaker.

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

/** Whether `serve` checks the API key with one call at start (`--api-key-check`). */
export const DEFAULT_API_KEY_CHECK = 'on';

/** `serve` alone: the key check, the pool, the in-flight bound, the passthrough and the breaker. */
export const UPSTREAM_POOL_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'api-key-check',
    arg: '<on|off>',
    description:
      'at start, one check call tells a rejected API key (401/403: error upstream_rejects_api_key naming the key\'s flag, gauge consent_sidecar_upstream_api_key_rejected) from a service that cannot be reached; repeated with backoff until the key is accepted; readiness does not depend on it',
    defaultText: DEFAULT_API_KEY_CHECK,
  },
  {
    name: 'upstream-connections',
    arg: '<n>',
    description: 'keep-alive connections to the service; checks beyond what they can send within the deadline get 503 overload',
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
];

const parseApiKey: SecretParser<string> = (text) => {
  const key = text.trim();
  if (key === '') return { error: 'the API key is empty' };
  if (/[\s]/.test(key)) return { error: 'the API key must not contain whitespace' };
  return { value: key };
};

/** How to reach the consent service. Shared by `serve`, `check` and `redec pending`. */
export interface UpstreamConfig {
  /** The service's `{base_url}`; paths such as `/v1/authorization/check` are appended to it. */
  readonly baseUrl: URL;
  readonly apiKey: Secret<string>;
  /** Whole deadline of one check, retries included (ms). */
  readonly timeoutMs: number;
}

/** `--upstream-url`, `--api-key[-file]`, `--upstream-timeout-ms`: null when the service cannot be reached. */
export function readUpstream(r: Reader): UpstreamConfig | null {
  let baseUrl = r.url('upstream-url', true);
  // Paths are joined below the base URL's path: a query or fragment there would end up in the
  // middle of every URL built from it (the key sent to `?tenant=/v1/…`).
  const rawUrl = r.raw('upstream-url');
  if (baseUrl && rawUrl && /[?#]/.test(rawUrl.value)) {
    r.problem(rawUrl.label, 'must not carry a query or fragment (give the base URL the service paths go below, e.g. https://consent.example.com/api)');
    baseUrl = null;
  }
  const apiKey = r.secret('api-key', parseApiKey);
  if (!apiKey && !r.problems.some((p) => p.startsWith('--api-key'))) {
    r.problem('--api-key', `one of --api-key or --api-key-file is required (or set ${envName('api-key')} / ${envName('api-key-file')})`);
  }
  const timeoutMs = r.int('upstream-timeout-ms', DEFAULT_UPSTREAM_TIMEOUT_MS, 1, 600_000);
  if (!baseUrl || !apiKey) return null;
  return { baseUrl, apiKey, timeoutMs };
}

/** The pool, the in-flight bound, the passthrough's timeout, the breaker and the key check (`serve` only). */
export interface UpstreamPoolConfig {
  /** `--api-key-check`: probe the API key once at start (and with backoff until it is accepted). */
  readonly keyCheck: boolean;
  /** Keep-alive connections to the service. */
  readonly connections: number;
  /** Checks waiting on the service at once before misses are shed (503 `overload`). */
  readonly maxInFlight: number;
  /** Deadline of one passthrough request (ms). */
  readonly passthroughTimeoutMs: number;
  readonly breaker: {
    readonly failureThreshold: number;
    readonly cooldownMs: number;
  };
}

/** The pool, the in-flight bound, the passthrough's timeout and the breaker beside the service. */
export function readUpstreamPool(r: Reader): UpstreamPoolConfig {
  const connections = r.int('upstream-connections', DEFAULT_UPSTREAM_CONNECTIONS, 1, 10_000);
  const maxInFlight = r.int('upstream-max-in-flight', DEFAULT_UPSTREAM_MAX_IN_FLIGHT, 1, 1_000_000);
  const passthroughTimeoutMs = r.int('passthrough-timeout-ms', DEFAULT_PASSTHROUGH_TIMEOUT_MS, 1, 600_000);
  const failureThreshold = r.int('breaker-failure-threshold', DEFAULT_BREAKER_FAILURE_THRESHOLD, 1, 10_000);
  const cooldownMs = r.int('breaker-cooldown-ms', DEFAULT_BREAKER_COOLDOWN_MS, 1, 3_600_000);
  const keyCheck = r.oneOf('api-key-check', ['on', 'off'], DEFAULT_API_KEY_CHECK) === 'on';
  return { keyCheck, connections, maxInFlight, passthroughTimeoutMs, breaker: Object.freeze({ failureThreshold, cooldownMs }) };
}

/**
 * Resolves the upstream flags shared by `check` and `redec pending`.
 * @throws ConfigError listing every problem.
 */
export function resolveUpstreamConfig(flags: RawFlags, env: RawEnv = process.env): UpstreamConfig {
  const r = new Reader(flags, env);
  const upstream = readUpstream(r);
  if (r.problems.length > 0 || !upstream) throw new ConfigError(r.problems);
  return Object.freeze(upstream);
}
