import { ConfigError } from './errors.js';
import {
  DEFAULT_BREAKER_COOLDOWN_MS,
  DEFAULT_BREAKER_FAILURE_THRESHOLD,
  DEFAULT_CACHE_MAX_ENTRIES,
  DEFAULT_CACHE_MAX_TTL_MS,
  DEFAULT_CACHE_REFRESH_AHEAD_MS,
  DEFAULT_CACHE_SAFETY_MARGIN_MS,
  DEFAULT_DECISION_LOG_BUFFER_BYTES,
  DEFAULT_DECISION_LOG_SAMPLE_RATE,
  DEFAULT_FORWARD_AUTH_USER_HEADER,
  DEFAULT_MAX_REQUEST_BYTES,
  DEFAULT_PASSTHROUGH_TIMEOUT_MS,
  DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS,
  DEFAULT_UPSTREAM_CONNECTIONS,
  DEFAULT_UPSTREAM_MAX_IN_FLIGHT,
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  envName,
} from './options.js';
import { HEADER_NAME, Reader } from './reader.js';
import type { SecretParser } from './secret.js';
import type { DecisionLogConfig, RawEnv, RawFlags, SidecarConfig, UpstreamConfig } from './types.js';

// The decision capability's flags: the service, its pool and breaker, the ALLOW cache, the decision
// API, forward-auth and the decision log.

const parseApiKey: SecretParser<string> = (text) => {
  const key = text.trim();
  if (key === '') return { error: 'the API key is empty' };
  if (/[\s]/.test(key)) return { error: 'the API key must not contain whitespace' };
  return { value: key };
};


export function readUpstream(r: Reader): UpstreamConfig | null {
  const baseUrl = r.url('upstream-url', true);
  const apiKey = r.secret('api-key', parseApiKey);
  if (!apiKey && !r.problems.some((p) => p.startsWith('--api-key'))) {
    r.problem('--api-key', `one of --api-key or --api-key-file is required (or set ${envName('api-key')} / ${envName('api-key-file')})`);
  }
  const timeoutMs = r.int('upstream-timeout-ms', DEFAULT_UPSTREAM_TIMEOUT_MS, 1, 600_000);
  if (!baseUrl || !apiKey) return null;
  return { baseUrl, apiKey, timeoutMs };
}


/** The pool, the in-flight bound, the passthrough's timeout and the breaker beside the service. */
export function readUpstreamPool(r: Reader): Omit<SidecarConfig['upstream'], keyof UpstreamConfig> {
  const connections = r.int('upstream-connections', DEFAULT_UPSTREAM_CONNECTIONS, 1, 10_000);
  const maxInFlight = r.int('upstream-max-in-flight', DEFAULT_UPSTREAM_MAX_IN_FLIGHT, 1, 1_000_000);
  const passthroughTimeoutMs = r.int('passthrough-timeout-ms', DEFAULT_PASSTHROUGH_TIMEOUT_MS, 1, 600_000);
  const failureThreshold = r.int('breaker-failure-threshold', DEFAULT_BREAKER_FAILURE_THRESHOLD, 1, 10_000);
  const cooldownMs = r.int('breaker-cooldown-ms', DEFAULT_BREAKER_COOLDOWN_MS, 1, 3_600_000);
  return { connections, maxInFlight, passthroughTimeoutMs, breaker: Object.freeze({ failureThreshold, cooldownMs }) };
}

/** `--cache-*`. */
export function readCache(r: Reader): SidecarConfig['cache'] {
  const maxEntries = r.int('cache-max-entries', DEFAULT_CACHE_MAX_ENTRIES, 0, 100_000_000);
  const safetyMarginMs = r.int('cache-safety-margin-ms', DEFAULT_CACHE_SAFETY_MARGIN_MS, 0, 3_600_000);
  const maxTtlMs = r.int('cache-max-ttl-ms', DEFAULT_CACHE_MAX_TTL_MS, 1, 7 * 86_400_000);
  const refreshAheadMs = r.int('cache-refresh-ahead-ms', DEFAULT_CACHE_REFRESH_AHEAD_MS, 0, 3_600_000);
  return Object.freeze({ maxEntries, safetyMarginMs, maxTtlMs, refreshAheadMs });
}

/** The decision API's own bounds. */
export function readDecisionApi(r: Reader): SidecarConfig['decisionApi'] {
  const maxRequestBytes = r.int('max-request-bytes', DEFAULT_MAX_REQUEST_BYTES, 256, 1_048_576);
  const preEvaluationLogIntervalMs = r.int('pre-evaluation-log-interval-ms', DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS, 0, 86_400_000);
  return Object.freeze({ maxRequestBytes, preEvaluationLogIntervalMs });
}

/** Headers a proxy or node itself owns, or that carry something else: never the user reference. */
const FORBIDDEN_USER_HEADER = /^(host|content-length|content-type|transfer-encoding|connection|keep-alive|upgrade|te|trailer|cookie|cache-control|x-consent-config-key)$/;

export function readForwardAuth(r: Reader): SidecarConfig['forwardAuth'] {
  const raw = r.raw('forward-auth-user-header');
  const name = raw ? raw.value.trim().toLowerCase() : DEFAULT_FORWARD_AUTH_USER_HEADER;
  if (raw && !HEADER_NAME.test(name)) r.problem(raw.label, `must be an HTTP header name, got "${raw.value}"`);
  else if (raw && FORBIDDEN_USER_HEADER.test(name)) r.problem(raw.label, `"${name}" cannot carry the user reference`);
  return Object.freeze({ userHeader: name });
}


const parseHashKey: SecretParser<string> = (text) => {
  const key = text.trim();
  return key.length >= 16 ? { value: key } : { error: 'the decision log hash key must be at least 16 characters' };
};

/** `--decision-log*`: null when off. */
export function readDecisionLog(r: Reader): DecisionLogConfig | null {
  const raw = r.raw('decision-log');
  const destination = raw?.value.trim() ?? 'off';
  const rateRaw = r.raw('decision-log-sample-rate');
  let sampleRate = DEFAULT_DECISION_LOG_SAMPLE_RATE;
  if (rateRaw) {
    const n = /^\s*(0|1|0?\.\d+|1\.0*)\s*$/.test(rateRaw.value) ? Number(rateRaw.value) : Number.NaN;
    if (Number.isNaN(n)) r.problem(rateRaw.label, `must be a number from 0 to 1, got "${rateRaw.value}"`);
    else sampleRate = n;
  }
  const bufferBytes = r.int('decision-log-buffer-bytes', DEFAULT_DECISION_LOG_BUFFER_BYTES, 1024, 1024 * 1024 * 1024);
  const hashKey = r.secret('decision-log-hash-key', parseHashKey);
  if (destination === 'off' || destination === '') {
    hashKey?.close();
    return null;
  }
  return Object.freeze({ destination, sampleRate, hashKey, bufferBytes });
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

